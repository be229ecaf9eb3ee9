"""Shapes shared by the VPU's parts: vregs, the program stream and the units' write-backs."""

from amaranth.hdl import Array, Cat, Signal
from amaranth.lib import data, stream

__all__ = ["SUBLANES", "VREGS", "REG_BITS", "PROGRAM_LAYOUT", "vreg_bits", "row",
           "select_row", "gather_rows", "writeback_signature"]

#: Sublanes per vreg and vregs in the register file (SPEC section 4.2).
SUBLANES = 8
VREGS = 32
REG_BITS = 5

#: One beat of the instruction stream: ``count`` (1 or 2) words, ``words[0]`` first.
#: Two words of one beat may issue in the same cycle.
PROGRAM_LAYOUT = data.StructLayout({"words": data.ArrayLayout(32, 2), "count": 2})


def vreg_bits(lanes):
    """Bits of a vreg: sublane ``s``, lane ``j`` is word ``s * lanes + j``."""
    return 32 * SUBLANES * lanes


def row(value, s, lanes):
    """Sublane ``s`` (``lanes`` words) of a vreg-wide value."""
    return value[32 * lanes * s:32 * lanes * (s + 1)]


def writeback_signature(lanes):
    """A unit's register write: a whole vreg for ``dest``; the register file always takes it."""
    layout = data.StructLayout({"dest": REG_BITS, "data": vreg_bits(lanes)})
    return stream.Signature(layout, always_ready=True)


def select_row(value, index, lanes):
    """Sublane ``index`` (a signal) of a vreg-wide value."""
    return Array(row(value, s, lanes) for s in range(SUBLANES))[index]


def gather_rows(m, *, arriving, index, value, lanes, name):
    """A vreg assembled from sublanes that arrive one at a time, in order.

    Sublanes 0 to 6 are held as they arrive (``arriving`` with ``index``);
    the returned vreg is complete in the cycle sublane 7 arrives, as ``value``.
    """
    held = [Signal(32 * lanes, name=f"{name}{s}", reset_less=True)
            for s in range(SUBLANES - 1)]
    for s, register in enumerate(held):
        # (``~index.any()`` for 0: Yosys writes ``index == 0`` as a multi-bit ``!``.)
        with m.If(arriving & (index == s if s else ~index.any())):
            m.d.sync += register.eq(value)
    return Cat(*held, value)
