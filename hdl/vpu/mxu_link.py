"""The VPU's side of the MXU: pushing weight and LHS rows (two pushers side by side),
popping result rows."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int
from ..mxu.matrix_unit import lhs_layout, weights_layout
from .layouts import REG_BITS, SUBLANES, gather_rows, select_row, vreg_bits, writeback_signature

__all__ = ["WeightPusher", "LHSPusher", "MXUPopper"]


def _bf16_row(words, lanes):
    """The low 16 bits of each word: a vreg row as bf16 values."""
    return Cat(words[32 * j:32 * j + 16] for j in range(lanes))


def _eight_beats(m, issue, taken):
    """The count shared by the pushers and the popper: an instruction lasts 8 beats, and
    the next may issue as the last one goes (so instructions stream back to back).
    ``taken`` is the handshake of the current beat. Returns ``(start, busy, index)``: an
    instruction issues, one is under way, and the current beat's sublane."""
    left = Signal(range(SUBLANES + 1))
    index = Signal(range(SUBLANES))
    start = issue.valid & issue.ready
    m.d.comb += issue.ready.eq(~left.any() | ((left == 1) & taken))
    with m.If(taken):
        m.d.sync += [left.eq(left - 1), index.eq(index + 1)]
    with m.If(start):
        m.d.sync += [left.eq(SUBLANES), index.eq(0)]
    return start, left != 0, index


def _sublane_beats(m, issue, taken, *, lanes):
    """A pusher's registers: the issued payload, captured, and its sublanes sent one beat
    at a time. Returns ``(payload, beat, sending, index)``: the captured payload, the
    current sublane as bf16, whether a beat is on offer, and the sublane's index."""
    payload = Signal(issue.payload.shape(), reset_less=True)
    start, sending, index = _eight_beats(m, issue, taken)
    with m.If(start):
        m.d.sync += payload.eq(issue.payload)
    beat = _bf16_row(select_row(payload.src, index, lanes), lanes)
    return payload, beat, sending, index


class WeightPusher(wiring.Component):
    """``push_weights``: the 8 sublanes of a vreg as 8 MXU weight beats, bf16.

    Parameters
    ----------
    lanes : int
        Words per sublane: the MXU is ``lanes x lanes``.

    Ports
    -----
    issue : In(stream.Signature(StructLayout({"src": 256 * lanes})))
        The vreg, read at issue.
    weights : Out(stream.Signature(weights_layout(lanes, True)))
        Weight beats: sublane ``s`` is row ``W[k, :]`` of the tile being loaded.

    One beat per cycle the MXU takes, from the cycle after issue; ``issue.ready``
    is high while idle and in the cycle the last beat is taken, so instructions
    stream back to back (8 cycles each without backpressure). It runs
    beside :class:`LHSPusher`, so the next weight tile loads into the MXU's
    shadow while LHS rows stream through the current one; the MXU orders the two
    (an LHS beat that swaps waits for a whole shadow tile, and weights wait for
    the swap before them).
    """

    def __init__(self, *, lanes):
        self.lanes = check_int("lanes", lanes, least=1)
        super().__init__({
            "issue": In(stream.Signature(data.StructLayout({"src": vreg_bits(lanes)}))),
            "weights": Out(stream.Signature(weights_layout(lanes, True))),
        })

    def elaborate(self, platform):
        m = Module()
        _, beat, sending, _ = _sublane_beats(
            m, self.issue, self.weights.valid & self.weights.ready, lanes=self.lanes)
        m.d.comb += [self.weights.valid.eq(sending), self.weights.payload.data.eq(beat)]
        return m


class LHSPusher(wiring.Component):
    """``push_lhs`` and ``push_lhs_acc``: the 8 sublanes of a vreg as 8 MXU LHS beats, bf16
    (with ``push_lhs_acc``, a second vreg's sublanes as their starting sums).

    Parameters
    ----------
    lanes : int
        Words per sublane: the MXU is ``lanes x lanes``.

    Ports
    -----
    issue : In(stream.Signature(StructLayout({"swap": 1, "acc": 1, "src": 256 * lanes,
            "acc_src": 256 * lanes})))
        The vregs, read at issue. ``swap`` sets the MXU's swap flag on the first
        beat (the issuer knows when the shadow tile is whole); ``acc`` sends
        ``acc_src``'s sublane ``s`` with LHS row ``s``.
    lhs : Out(stream.Signature(lhs_layout(lanes)))
        LHS beats, sublane ``s`` as row ``s``.
    acc_in : Out(stream.Signature(ArrayLayout(32, lanes)))
        The starting fp32 sums of each ``acc`` beat, valid with it (the MXU takes
        the two together).

    One beat per cycle the MXU takes, from the cycle after issue; ``issue.ready``
    is high while idle and in the cycle the last beat is taken, so instructions
    stream back to back (8 cycles each without backpressure).
    """

    def __init__(self, *, lanes):
        self.lanes = check_int("lanes", lanes, least=1)
        layout = data.StructLayout({"swap": 1, "acc": 1, "src": vreg_bits(lanes),
                                    "acc_src": vreg_bits(lanes)})
        super().__init__({
            "issue": In(stream.Signature(layout)),
            "lhs": Out(stream.Signature(lhs_layout(lanes))),
            "acc_in": Out(stream.Signature(data.ArrayLayout(32, lanes))),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        payload, beat, sending, index = _sublane_beats(
            m, self.issue, self.lhs.valid & self.lhs.ready, lanes=lanes)
        m.d.comb += [
            self.lhs.valid.eq(sending),
            self.lhs.payload.data.eq(beat),
            self.lhs.payload.swap.eq(payload.swap & ~index.any()),
            self.lhs.payload.acc.eq(payload.acc),
            self.acc_in.valid.eq(sending & payload.acc),
            self.acc_in.payload.eq(select_row(payload.acc_src, index, lanes)),
        ]
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

    One pop at a time (``issue.ready`` while idle, and in the cycle the eighth row
    arrives); it lasts until 8 rows have arrived, however long the MXU takes.
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
        arriving = Signal()
        # The next pop may issue as the eighth row arrives, so pops keep pace with pushes.
        start, busy, index = _eight_beats(m, self.issue, arriving)
        m.d.comb += [self.result.ready.eq(busy),
                     arriving.eq(self.result.valid & self.result.ready)]
        with m.If(start):
            m.d.sync += dest.eq(self.issue.payload.dest)
        popped = gather_rows(m, arriving=arriving, index=index, value=self.result.payload,
                             lanes=lanes, name="popped")
        m.d.comb += [
            self.writeback.valid.eq(arriving & (index == SUBLANES - 1)),
            self.writeback.payload.dest.eq(dest),
            self.writeback.payload.data.eq(popped),
        ]
        return m
