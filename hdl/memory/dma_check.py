"""The DMA's descriptor queue and check: validation before any write, pipelined so that it
adds no cycle between back-to-back descriptors."""

from amaranth.hdl import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int
from ..lib.stream_queue import StreamQueue
from .layouts import (ADDRESS_BITS, CHIP_BITS, DIMS, ERROR_ADDRESS_BITS, FLAG_BITS, ID_BITS,
                      STRIDE_BITS, Reason, descriptor_layout, error_layout)

__all__ = ["DescriptorCheck", "check_descriptor_check_params", "job_layout"]

#: An accepted descriptor, as the address generator takes it: the descriptor with its
#: ``id``, its word count, ``last`` (each count minus 1), the extents (lowest and highest
#: address) of its source and destination, ``overlap``: a local descriptor whose source and
#: destination share a space and whose extents intersect, and the remote fields of the
#: descriptor (``remote``, ``chip``, ``sent``, ``sent_flag``; ``sent`` is 0 when not remote).
job_layout = data.StructLayout({
    "src_space": 1, "src_base": unsigned(ADDRESS_BITS),
    "dst_space": 1, "dst_base": unsigned(ADDRESS_BITS),
    "last": data.ArrayLayout(unsigned(ADDRESS_BITS), DIMS),
    "src_strides": data.ArrayLayout(signed(STRIDE_BITS), DIMS),
    "dst_strides": data.ArrayLayout(signed(STRIDE_BITS), DIMS),
    "flag": unsigned(FLAG_BITS), "words": unsigned(ADDRESS_BITS), "id": unsigned(ID_BITS),
    "src_lo": unsigned(ADDRESS_BITS), "src_hi": unsigned(ADDRESS_BITS),
    "dst_lo": unsigned(ADDRESS_BITS), "dst_hi": unsigned(ADDRESS_BITS),
    "overlap": 1,
    "remote": 1, "chip": unsigned(CHIP_BITS), "sent": 1, "sent_flag": unsigned(FLAG_BITS),
})

_WIDE = signed(ERROR_ADDRESS_BITS)
# The scan's cursor is a box's first address, |.| < 2**ADDRESS_BITS + 2**(2 * ADDRESS_BITS);
# a probe adds a stride shifted by under ADDRESS_BITS bits, |.| < 2**(STRIDE_BITS - 1 +
# ADDRESS_BITS - 1). Their sum, below 2**(STRIDE_BITS + ADDRESS_BITS), must fit `_WIDE`.
assert STRIDE_BITS + ADDRESS_BITS < _WIDE.width - 1, "scan cursors would overflow"
_SIDES = ("src", "dst")

#: A queued descriptor with what the accept cycle already computed: the span of each
#: dimension, ``(count - 1) * stride``, per side, and the product of the first two counts.
_queued_layout = data.StructLayout({
    "d": descriptor_layout,
    "src_spans": data.ArrayLayout(_WIDE, DIMS),
    "dst_spans": data.ArrayLayout(_WIDE, DIMS),
    "pairs": unsigned(ADDRESS_BITS),
})

#: The descriptor being judged: the queued one with its id, ``last`` (counts minus 1),
#: word count and the corner extremes of each side.
_judged_layout = data.StructLayout({
    "q": _queued_layout,
    "id": unsigned(ID_BITS),
    "last": data.ArrayLayout(unsigned(ADDRESS_BITS), DIMS),
    "words": unsigned(ADDRESS_BITS),
    "src_lo": _WIDE, "src_hi": _WIDE, "dst_lo": _WIDE, "dst_hi": _WIDE,
})


def _extremes(spans, k):
    """The lowest and highest offset from a box's first element, for a box of the ``k``
    innermost dimensions: the sums of the negative and of the positive spans."""
    lo = sum(Mux(s < 0, s, 0) for s in spans[:k])
    hi = sum(Mux(s > 0, s, 0) for s in spans[:k])
    return lo, hi


def check_descriptor_check_params(*, hbm_size, vmem_size, n_flags, n_chips=1, queue_depth=4):
    """Raise what :class:`DescriptorCheck` raises for these parameters, without building
    one: a component that builds its check in ``elaborate`` refuses them at once."""
    check_int("hbm_size", hbm_size, least=1, most=1 << ADDRESS_BITS)
    check_int("vmem_size", vmem_size, least=1, most=1 << ADDRESS_BITS)
    check_int("n_flags", n_flags, least=1, most=1 << FLAG_BITS)
    check_int("n_chips", n_chips, least=1, most=1 << CHIP_BITS)
    check_int("queue_depth", queue_depth, least=1, most=1 << 16)


class DescriptorCheck(wiring.Component):
    """Queues descriptors, numbers them, and accepts or rejects each one before it moves.

    The checks, first failure wins (``golden.memory`` module docstring): a zero count
    (records the source base), a push to a chip at or above ``n_chips`` (records the chip
    id), a flag at or above ``n_flags`` (records the flag id), a push's ``sent_flag`` at
    or above ``n_flags`` (records it), then the ranges. A push's destination is checked
    against the local space of its name (chips are alike). An affine address over a box
    takes its extremes at corners, so accepting is an O(1) corner check. A rejected range
    needs the first offending element in element order (its source checked before its
    destination); a scan finds it by descending: the first plane (i2) whose corner
    extremes leave a space, then the first such row (i1) in it, then the first such
    element (i0). Every plane and row before it is wholly in range,
    so the element found is the first. Within a level the boxes in range form an interval
    of indices (addresses are affine in the index), so once box 0 is in range a binary
    search over the index bits, one probe a cycle, finds the first box out of range.

    **Pipeline.** Three stages, one descriptor per cycle through each: the accept cycle
    computes the spans ``(count - 1) * stride`` into the queue; the cycle a descriptor
    leaves the queue sums them into the corner extremes of each side (a register); the
    next cycle compares those with the spaces and offers the verdict, combinationally, on
    ``jobs`` or ``errors``. The check of the next descriptor therefore overlaps the
    current transfer, and a verdict taken lets the next one in the same cycle.

    Parameters
    ----------
    hbm_size, vmem_size : int
        Words in each space, 1 to ``2**24``.
    n_flags : int
        Flags in the bank, 1 to 128.
    n_chips : int
        Chips a push may name, 1 to 256 (default 1).
    queue_depth : int
        Descriptors the input queue holds (default 4).

    Ports
    -----
    descriptors : In(stream.Signature(descriptor_layout))
        Ready while the queue has room.
    jobs : Out(stream.Signature(job_layout))
        Accepted descriptors, in order.
    errors : Out(stream.Signature(error_layout))
        Rejections, in order, by ``id`` (the arrival number, from 0).
    idle : Out(1)
        No descriptor is queued or being judged.

    Latency: a descriptor taken in cycle ``t`` into an empty check is offered on ``jobs``,
    or on ``errors`` for a count, chip, flag or sent flag rejection, in cycle ``t + 2``; a
    range rejection adds one cycle plus the scan, at most ``4 + sum(ceil(log2(c_k)))``
    cycles for counts ``c_k``: a check of each level's box 0, up to ``ceil(log2(c_k))``
    probes in each level, and a check of the element found. With fewer than ``2**24``
    words that is at most 30, so a range rejection is offered by cycle ``t + 33``.
    Throughput: one descriptor a cycle while verdicts are taken. ``jobs`` and ``errors``
    hold until taken, and a waiting verdict holds the queue.
    """

    def __init__(self, *, hbm_size, vmem_size, n_flags, n_chips=1, queue_depth=4):
        check_descriptor_check_params(hbm_size=hbm_size, vmem_size=vmem_size,
                                      n_flags=n_flags, n_chips=n_chips,
                                      queue_depth=queue_depth)
        self.hbm_size, self.vmem_size, self.n_flags = hbm_size, vmem_size, n_flags
        self.n_chips = n_chips
        self.queue_depth = queue_depth
        super().__init__({
            "descriptors": In(stream.Signature(descriptor_layout)),
            "jobs": Out(stream.Signature(job_layout)),
            "errors": Out(stream.Signature(error_layout)),
            "idle": Out(1),
        })

    def _size(self, space):
        return Mux(space, self.vmem_size, self.hbm_size)

    def elaborate(self, platform):
        m = Module()
        m.submodules.queue = queue = StreamQueue(shape=_queued_layout, depth=self.queue_depth)

        # ---- stage 1, the accept cycle: spans and the first product, into the queue.
        incoming = self.descriptors.payload
        queued = queue.i.payload
        for side, strides in (("src", incoming.src_strides), ("dst", incoming.dst_strides)):
            # A zero count is rejected before its spans matter.
            m.d.comb += [queued[f"{side}_spans"][k].eq((incoming.counts[k] - 1) * strides[k])
                         for k in range(DIMS)]
        m.d.comb += [
            queued.d.eq(incoming), queued.pairs.eq(incoming.counts[0] * incoming.counts[1]),
            queue.i.valid.eq(self.descriptors.valid), self.descriptors.ready.eq(queue.i.ready),
        ]

        # ---- stage 2, leaving the queue: id, word count and corner extremes, registered.
        head = queue.o.payload
        judged = Signal(_judged_layout)
        held = Signal()                      # `judged` holds a descriptor
        leaves = Signal()
        next_id = Signal(ID_BITS)
        take = Signal()
        m.d.comb += [take.eq(queue.o.valid & (~held | leaves)), queue.o.ready.eq(take)]
        with m.If(leaves):
            m.d.sync += held.eq(0)
        with m.If(take):
            m.d.sync += [held.eq(1), judged.q.eq(head), judged.id.eq(next_id),
                         next_id.eq(next_id + 1),
                         judged.words.eq(head.pairs * head.d.counts[2])]
            m.d.sync += [judged.last[k].eq(head.d.counts[k] - 1) for k in range(DIMS)]
            for side, base in (("src", head.d.src_base), ("dst", head.d.dst_base)):
                lo, hi = _extremes(head[f"{side}_spans"], DIMS)
                m.d.sync += [judged[f"{side}_lo"].eq(base + lo), judged[f"{side}_hi"].eq(base + hi)]

        # ---- stage 3: the verdict, offered combinationally.
        d = judged.q.d
        zero = ~(d.counts[0].any() & d.counts[1].any() & d.counts[2].any())
        # (With every id valid, a comparison would be constant: Verilator flags that.)
        def at_or_above(value, limit, bits):
            return value >= limit if limit < 1 << bits else Const(0)

        bad_chip = d.remote & at_or_above(d.chip, self.n_chips, CHIP_BITS)
        bad_flag = at_or_above(d.flag, self.n_flags, FLAG_BITS)
        bad_sent = d.remote & d.sent & at_or_above(d.sent_flag, self.n_flags, FLAG_BITS)
        quick_bad = Signal()                 # rejected without a scan
        m.d.comb += quick_bad.eq(zero | bad_chip | bad_flag | bad_sent)
        in_range = ((judged.src_lo >= 0) & (judged.src_hi < self._size(d.src_space))
                    & (judged.dst_lo >= 0) & (judged.dst_hi < self._size(d.dst_space)))
        accept = Signal()
        out_of_range = Signal()
        m.d.comb += [accept.eq(held & ~quick_bad & in_range),
                     out_of_range.eq(held & ~quick_bad & ~in_range)]

        job = self.jobs.payload
        m.d.comb += [
            self.jobs.valid.eq(accept),
            job.src_space.eq(d.src_space), job.src_base.eq(d.src_base),
            job.dst_space.eq(d.dst_space), job.dst_base.eq(d.dst_base),
            job.last.eq(judged.last), job.src_strides.eq(d.src_strides),
            job.dst_strides.eq(d.dst_strides), job.flag.eq(d.flag),
            job.words.eq(judged.words), job.id.eq(judged.id),
            job.src_lo.eq(judged.src_lo), job.src_hi.eq(judged.src_hi),
            job.dst_lo.eq(judged.dst_lo), job.dst_hi.eq(judged.dst_hi),
            # A push writes nothing here: its extents never overlap.
            job.overlap.eq(~d.remote & (d.src_space == d.dst_space)
                           & (judged.src_lo <= judged.dst_hi) & (judged.dst_lo <= judged.src_hi)),
            job.remote.eq(d.remote), job.chip.eq(d.chip), job.sent.eq(d.remote & d.sent),
            job.sent_flag.eq(d.sent_flag),
        ]

        quick = Signal(error_layout)         # a rejection known at once, first failure wins
        reason, address = Reason.SENT_FLAG, d.sent_flag
        for bad, code, value in ((bad_flag, Reason.FLAG, d.flag), (bad_chip, Reason.CHIP, d.chip),
                                 (zero, Reason.COUNT, d.src_base)):
            reason, address = Mux(bad, code, reason), Mux(bad, value, address)
        m.d.comb += [quick.id.eq(judged.id), quick.reason.eq(reason), quick.address.eq(address)]
        found = Signal()                     # the scan has found a range rejection's address
        scanned = Signal(error_layout)
        self._scan(m, judged, out_of_range & ~found, found, scanned)
        m.d.comb += [
            self.errors.valid.eq(held & (quick_bad | found)),
            self.errors.payload.eq(Mux(found, scanned, quick)),
            leaves.eq((self.jobs.valid & self.jobs.ready)
                      | (self.errors.valid & self.errors.ready)),
            self.idle.eq(~queue.o.valid & ~held),
        ]
        with m.If(self.errors.valid & self.errors.ready):
            m.d.sync += found.eq(0)
        return m

    def _scan(self, m, judged, wanted, found, error):
        """Find the first offending element of the out-of-range descriptor in ``judged``
        while ``wanted``; then set ``found`` and the ``error`` record."""
        d = judged.q.d
        running = Signal(name="scan_running")
        searching = Signal(name="scan_searching")            # probing, else checking
        level = Signal(range(DIMS), name="scan_level")       # 2 plane, 1 row, 0 element
        index = Signal(ADDRESS_BITS, name="scan_index")
        bit = Signal(range(ADDRESS_BITS), name="scan_bit")   # the probe's distance, log2
        cursor = {side: Signal(_WIDE, name=f"scan_{side}") for side in _SIDES}
        spaces = {"src": d.src_space, "dst": d.dst_space}

        def by_level(values):
            # values[k] for the current level, as a mux chain (no case statement).
            result = values[0]
            for k in range(1, DIMS):
                result = Mux(level == k, values[k], result)
            return result

        # While searching, the box judged is the probe `2**bit` boxes past the cursor; while
        # checking, the one at the cursor. Shifts, no multiplier; exact in `_WIDE` (see its
        # assertion).
        stride, probe, double = {}, {}, {}
        for side in _SIDES:
            stride[side] = by_level(list(d[f"{side}_strides"]))
            shifted = Signal(_WIDE, name=f"{side}_shifted")
            m.d.comb += shifted.eq(stride[side] << bit)
            probe[side] = Signal(_WIDE, name=f"{side}_probe")
            m.d.comb += probe[side].eq(cursor[side] + Mux(searching, shifted, 0))
            double[side] = cursor[side] + (stride[side] << 1)
        # A search takes the bits highest first, so `index` has none at or below `bit`: an
        # OR adds the probe's distance.
        probe_index = index | (Const(1, ADDRESS_BITS) << bit)[:ADDRESS_BITS]
        # The box judged is a plane, a row or one element: bad when its corner extremes
        # leave the space.
        bad = {}
        for side in _SIDES:
            bad[side] = Signal(name=f"{side}_bad")
            spans = judged.q[f"{side}_spans"]
            lows, highs = zip(*[_extremes(spans, k) if k else (0, 0) for k in range(DIMS)])
            m.d.comb += bad[side].eq((probe[side] + by_level(lows) < 0)
                                     | (probe[side] + by_level(highs) >= self._size(spaces[side])))
        count_last = Signal(ADDRESS_BITS)
        m.d.comb += count_last.eq(by_level(list(judged.last)))
        # The first probe's bit: the top bit of count_last - 1, the highest index a probe
        # may accept (bit 0 when that is 0: the probe of box 1 is then refused).
        top = Signal.like(bit)
        m.d.comb += top.eq(0)
        for k in range(1, ADDRESS_BITS):
            with m.If((count_last - 1)[k]):
                m.d.comb += top.eq(k)

        # Checking: a bad box holds the first bad element: descend into it (its first
        # sub-box starts at the cursor). The last box of a level is bad by construction, and
        # treated so, so the scan always ends. Only box 0 can be good here (a search ends on
        # a bad or last box): then search its level.
        #
        # Searching: the boxes of a level in range form an interval of indices (addresses
        # are affine in the index, and the outside of the source's interval and of the
        # destination's is the outside of their intersection), and box 0 is in it. Over
        # the index bits, highest first, a probe is accepted when its box is good and is
        # not the last, leaving the cursor on the last good box before the last. After bit
        # 0, the first bad box is the next one: descend into it, or, for an element, check
        # it to name the side.
        descend = Signal()
        accept = Signal()
        m.d.comb += [descend.eq(bad["src"] | bad["dst"] | (index == count_last)),
                     accept.eq(~bad["src"] & ~bad["dst"] & (probe_index < count_last))]
        with m.If(wanted & ~running):
            m.d.sync += [running.eq(1), searching.eq(0), level.eq(DIMS - 1), index.eq(0),
                         cursor["src"].eq(d.src_base), cursor["dst"].eq(d.dst_base)]
        with m.If(running & ~searching):
            with m.If(descend & level.any()):
                m.d.sync += [level.eq(level - 1), index.eq(0)]
            with m.Elif(descend):
                m.d.sync += [
                        running.eq(0), found.eq(1), error.id.eq(judged.id),
                        error.reason.eq(Mux(bad["src"], Reason.SRC_RANGE, Reason.DST_RANGE)),
                        error.address.eq(Mux(bad["src"], cursor["src"], cursor["dst"])),
                    ]
            with m.Else():
                m.d.sync += [searching.eq(1), bit.eq(top)]
        with m.If(running & searching & bit.any()):
            m.d.sync += bit.eq(bit - 1)
            with m.If(accept):
                m.d.sync += index.eq(probe_index)
                m.d.sync += [cursor[side].eq(probe[side]) for side in _SIDES]
        with m.If(running & searching & ~bit.any()):
            # This probe was box index + 1. The first bad box follows the last good one, and
            # is known bad: descend into it at once, but check an element for its side.
            m.d.sync += searching.eq(0)
            m.d.sync += [cursor[side].eq(Mux(accept, double[side], probe[side]))
                         for side in _SIDES]
            with m.If(level.any()):
                m.d.sync += [level.eq(level - 1), index.eq(0)]
            with m.Else():
                m.d.sync += index.eq(Mux(accept, index + 2, probe_index))
