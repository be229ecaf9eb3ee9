"""The VPU's side of the MXU: pushing weight and LHS rows, popping result rows."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.memory_port import check_int
from ..mxu.matrix_unit import lhs_layout, weights_layout
from .layouts import REG_BITS, SUBLANES, gather_rows, select_row, vreg_bits, writeback_signature

__all__ = ["MXUPusher", "MXUPopper"]


def _bf16_row(words, lanes):
    """The low 16 bits of each word: a vreg row as bf16 values."""
    return Cat(words[32 * j:32 * j + 16] for j in range(lanes))


class MXUPusher(wiring.Component):
    """``push_weights``, ``push_lhs`` and ``push_lhs_acc``: the 8 sublanes of a vreg as 8 MXU
    beats, bf16 (with ``push_lhs_acc``, a second vreg's sublanes as their starting sums).

    Parameters
    ----------
    lanes : int
        Words per sublane: the MXU is ``lanes x lanes``.

    Ports
    -----
    issue : In(stream.Signature(StructLayout({"lhs": 1, "swap": 1, "acc": 1,
            "src": 256 * lanes, "acc_src": 256 * lanes})))
        The vreg (read at issue) and where it goes: weight rows (``lhs`` 0) or
        LHS rows (``lhs`` 1); ``swap`` sets the MXU's swap flag on the first
        LHS beat (the issuer knows when the shadow tile is whole); ``acc``
        (LHS rows only) sends ``acc_src``'s sublane ``s`` with LHS row ``s``.
    weights : Out(stream.Signature(weights_layout(lanes, True)))
        Weight beats: sublane ``s`` is row ``W[k, :]`` of the tile being loaded.
    lhs : Out(stream.Signature(lhs_layout(lanes)))
        LHS beats, sublane ``s`` as row ``s``.
    acc_in : Out(stream.Signature(ArrayLayout(32, lanes)))
        The starting fp32 sums of each ``acc`` LHS beat, valid with it (the MXU
        takes the two together).

    One beat per cycle the MXU takes, from the cycle after issue; ``issue.ready``
    is high while idle (8 beats per instruction, so 8 cycles without
    backpressure).
    """

    def __init__(self, *, lanes):
        self.lanes = check_int("lanes", lanes, least=1)
        layout = data.StructLayout({"lhs": 1, "swap": 1, "acc": 1, "src": vreg_bits(lanes),
                                    "acc_src": vreg_bits(lanes)})
        super().__init__({
            "issue": In(stream.Signature(layout)),
            "weights": Out(stream.Signature(weights_layout(lanes, True))),
            "lhs": Out(stream.Signature(lhs_layout(lanes))),
            "acc_in": Out(stream.Signature(data.ArrayLayout(32, lanes))),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        src = Signal(vreg_bits(lanes), reset_less=True)
        acc_src = Signal(vreg_bits(lanes), reset_less=True)
        to_lhs = Signal(reset_less=True)
        swap = Signal(reset_less=True)
        acc = Signal(reset_less=True)
        left = Signal(range(SUBLANES + 1))
        index = Signal(range(SUBLANES))

        m.d.comb += self.issue.ready.eq(~left.any())
        with m.If(self.issue.valid & self.issue.ready):
            m.d.sync += [src.eq(self.issue.payload.src), to_lhs.eq(self.issue.payload.lhs),
                         swap.eq(self.issue.payload.swap), acc.eq(self.issue.payload.acc),
                         acc_src.eq(self.issue.payload.acc_src), left.eq(SUBLANES),
                         index.eq(0)]
        beat = _bf16_row(select_row(src, index, lanes), lanes)
        m.d.comb += [
            self.weights.valid.eq((left != 0) & ~to_lhs),
            self.weights.payload.data.eq(beat),
            self.lhs.valid.eq((left != 0) & to_lhs),
            self.lhs.payload.data.eq(beat),
            self.lhs.payload.swap.eq(swap & ~index.any()),
            self.lhs.payload.acc.eq(acc),
            self.acc_in.valid.eq(self.lhs.valid & acc),
            self.acc_in.payload.eq(select_row(acc_src, index, lanes)),
        ]
        with m.If((self.weights.valid & self.weights.ready) | (self.lhs.valid & self.lhs.ready)):
            m.d.sync += [left.eq(left - 1), index.eq(index + 1)]
        return m


class MXUPopper(wiring.Component):
    """``pop``: the next 8 MXU result rows into a vreg, row ``m`` in sublane ``m``.

    Parameters
    ----------
    lanes : int

    Ports
    -----
    issue : In(stream.Signature(StructLayout({"dest": 5})))
    result : In(stream.Signature(ArrayLayout(32, lanes)))
        The MXU's result rows, taken only while a pop is under way.
    writeback : Out(writeback_signature(lanes))
        Valid in the cycle the eighth row arrives; always taken.

    One pop at a time (``issue.ready`` while idle); it lasts until 8 rows have
    arrived, however long the MXU takes.
    """

    def __init__(self, *, lanes):
        self.lanes = check_int("lanes", lanes, least=1)
        super().__init__({
            "issue": In(stream.Signature(data.StructLayout({"dest": REG_BITS}))),
            "result": In(stream.Signature(data.ArrayLayout(32, lanes))),
            "writeback": Out(writeback_signature(lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        dest = Signal(REG_BITS, reset_less=True)
        left = Signal(range(SUBLANES + 1))
        index = Signal(range(SUBLANES))

        m.d.comb += [self.issue.ready.eq(~left.any()), self.result.ready.eq(left != 0)]
        with m.If(self.issue.valid & self.issue.ready):
            m.d.sync += [dest.eq(self.issue.payload.dest), left.eq(SUBLANES), index.eq(0)]
        arriving = self.result.valid & self.result.ready
        with m.If(arriving):
            m.d.sync += [left.eq(left - 1), index.eq(index + 1)]
        popped = gather_rows(m, arriving=arriving, index=index, value=self.result.payload,
                             lanes=lanes, name="popped")
        m.d.comb += [
            self.writeback.valid.eq(arriving & (index == SUBLANES - 1)),
            self.writeback.payload.dest.eq(dest),
            self.writeback.payload.data.eq(popped),
        ]
        return m
