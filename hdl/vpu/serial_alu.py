"""A sublane-serial ALU slot: a narrower :class:`VectorALU` that takes a vreg a slice at a time."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .isa import Opcode
from .layouts import SUBLANES, vreg_bits

__all__ = ["SerialALU", "ALU_WIDTHS", "check_alu_width"]

#: The sublanes an ALU may take a cycle (the VPU's ``alu_width``): the divisors of 8.
ALU_WIDTHS = tuple(w for w in range(1, SUBLANES + 1) if SUBLANES % w == 0)


def check_alu_width(alu_width, *, regfile):
    """``alu_width`` checked (TypeError, ValueError): one of :data:`ALU_WIDTHS`, and below
    8 only with a register file in RAM, whose one-instruction-at-a-time issue is what lets
    an ALU operation take several cycles without a second ALU slot."""
    if not isinstance(alu_width, int) or isinstance(alu_width, bool):
        raise TypeError(f"alu_width must be an integer, not {alu_width!r}")
    if alu_width not in ALU_WIDTHS:
        raise ValueError(f"alu_width must be one of {', '.join(map(str, ALU_WIDTHS))} "
                         f"(sublanes a cycle), not {alu_width}")
    if alu_width < SUBLANES and regfile == "flops":
        raise ValueError(f"alu_width={alu_width} needs regfile='ram' or 'block_ram' (one "
                         f"instruction at a time), not regfile={regfile!r}")
    return alu_width


class SerialALU(wiring.Component):
    """An ALU slot for a whole vreg built from ``alu``, a :class:`~hdl.vpu.vector_alu.VectorALU`
    of ``alu_width`` sublanes: the operands are held and fed through it a slice at a time.

    The word ALUs are the same as the full-width slot's, so every word's result is too;
    an FPGA build trades ``8 / alu_width`` cycles an operation for ``alu_width / 8`` of
    the word ALUs (with an ``8 / alu_width``-way multiplexer per operand bit of a slice).

    Parameters
    ----------
    alu : VectorALU
        The slice's ALU, ``alu_width * lanes`` words (the VPU builds it, so an export can
        emit its word ALU once).
    lanes : int

    Ports
    -----
    start : In(1)
        Take ``op``, ``a``, ``b`` and ``c`` in this cycle. Only while idle: the VPU
        issues an ALU instruction only when no register write is pending, and this one's
        is pending until ``done``.
    op : In(Opcode)
    a, b, c : In(vreg_bits(lanes))
        Operand vregs, as :class:`~hdl.vpu.vector_alu.VectorALU`'s.
    done : Out(1)
        ``result`` holds the operation's vreg in this cycle (one cycle, ``8 / alu_width + 1``
        cycles after ``start``).
    result : Out(vreg_bits(lanes))

    Latency ``8 / alu_width + 1`` cycles; one operation at a time, the next ``start`` from
    the cycle after ``done``.
    """

    def __init__(self, *, alu, lanes):
        if alu.words % lanes or SUBLANES % (alu.words // lanes):
            raise ValueError(f"the slice ALU's {alu.words} words must be a divisor of "
                             f"{SUBLANES} sublanes of {lanes} lanes")
        self.alu, self.lanes = alu, lanes
        self.steps = SUBLANES * lanes // alu.words
        width = vreg_bits(lanes)
        super().__init__({"start": In(1), "op": In(Opcode), "a": In(width), "b": In(width),
                          "c": In(width), "done": Out(1), "result": Out(width)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.alu = alu = self.alu
        steps, width = self.steps, vreg_bits(self.lanes)
        slice_bits = width // steps
        op = Signal(Opcode, reset_less=True)
        held = [Signal(width, name=f"held_{name}", reset_less=True) for name in "abc"]
        # step k: slice k goes in (k < steps); its result comes out at step k + 1.
        step = Signal(range(steps + 1))
        running = Signal()
        early = Signal(width - slice_bits, reset_less=True)   # slices 0 .. steps - 2
        with m.If(self.start):
            m.d.sync += [op.eq(self.op), step.eq(0), running.eq(1)]
            m.d.sync += [h.eq(v) for h, v in zip(held, (self.a, self.b, self.c))]
        with m.Elif(running):
            m.d.sync += step.eq(step + 1)
            with m.If(step == steps):
                m.d.sync += running.eq(0)
        m.d.comb += alu.op.eq(op)
        with m.Switch(step):          # cases, not an indexed shift: lint-clean Verilog
            for k in range(steps):
                with m.Case(k):
                    m.d.comb += [port.eq(h.word_select(k, slice_bits))
                                 for port, h in zip((alu.a, alu.b, alu.c), held)]
        for k in range(steps - 1):
            with m.If(running & (step == k + 1)):
                m.d.sync += early.word_select(k, slice_bits).eq(alu.result)
        m.d.comb += [self.done.eq(running & (step == steps)),
                     self.result.eq(Cat(early, alu.result))]
        return m
