"""The DMA's descriptor check: validation before any write, by golden.memory's error rule."""

import types

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.memory_port import check_int
from .layouts import (ADDRESS_BITS, DIMS, ERROR_ADDRESS_BITS, FLAG_BITS, ID_BITS, STRIDE_BITS,
                      descriptor_layout, error_layout, reason_code)

__all__ = ["DescriptorCheck", "job_layout"]

#: An accepted descriptor, as the address generator takes it: the descriptor with its
#: ``id``, its word count, ``last`` (each count minus 1), the extents (lowest and highest
#: address) of its source and destination, and ``overlap``: source and destination share
#: a space and their extents intersect.
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
})

_WIDE = signed(ERROR_ADDRESS_BITS)


class DescriptorCheck(wiring.Component):
    """Numbers descriptors as they arrive and accepts or rejects each one before it moves.

    The checks, first failure wins (``golden.memory`` module docstring): a zero count
    (records the source base), a flag at or above ``n_flags`` (records the flag id), then
    the ranges. An affine address over a box takes its extremes at corners, so accepting
    is an O(1) corner check. A rejected range needs the first offending element in element
    order (its source checked before its destination); a scan finds it in at most
    ``c2 + c1 + c0`` cycles by descending: the first plane (i2) whose corner extremes leave
    a space, then the first such row (i1) in it, then the first such element (i0). Every
    plane and row before it is wholly in range, so the element found is the first.

    Parameters
    ----------
    hbm_size, vmem_size : int
        Words in each space, 1 to ``2**24``.
    n_flags : int
        Flags in the bank, 1 to 128.

    Ports
    -----
    descriptors : In(stream.Signature(descriptor_layout))
    jobs : Out(stream.Signature(job_layout))
        Accepted descriptors, in order.
    errors : Out(stream.Signature(error_layout))
        Rejections, in order, by ``id`` (the arrival number, from 0).
    idle : Out(1)
        No descriptor is being checked or waiting to leave.

    Latency: a descriptor accepted in cycle ``t`` is offered on ``jobs`` or ``errors`` in
    cycle ``t + 3`` (plus the scan for a range rejection); the next one is taken in the
    cycle its predecessor leaves, so one descriptor every three cycles at most. ``jobs``
    and ``errors`` hold until taken, and a waiting output holds the input.
    """

    def __init__(self, *, hbm_size, vmem_size, n_flags):
        check_int("hbm_size", hbm_size, least=1, most=1 << ADDRESS_BITS)
        check_int("vmem_size", vmem_size, least=1, most=1 << ADDRESS_BITS)
        check_int("n_flags", n_flags, least=1, most=1 << FLAG_BITS)
        self.hbm_size, self.vmem_size, self.n_flags = hbm_size, vmem_size, n_flags
        super().__init__({
            "descriptors": In(stream.Signature(descriptor_layout)),
            "jobs": Out(stream.Signature(job_layout)),
            "errors": Out(stream.Signature(error_layout)),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        d = Signal(descriptor_layout)
        ident = Signal(ID_BITS)
        next_id = Signal(ID_BITS)
        job = Signal(job_layout)
        error = Signal(error_layout)
        # The span of each dimension, (count - 1) * stride, for source and destination.
        span = {side: [Signal(_WIDE, name=f"{side}_span{k}") for k in range(DIMS)]
                for side in ("src", "dst")}
        words = Signal(ADDRESS_BITS)
        # The range scan's registers: its level (2 plane, 1 row, 0 element), the index
        # within that level, and the address of the current box's first element.
        scan = types.SimpleNamespace(
            level=Signal(range(DIMS), name="scan_level"),
            index=Signal(ADDRESS_BITS, name="scan_index"),
            cursor={side: Signal(_WIDE, name=f"scan_{side}") for side in ("src", "dst")})

        def size(space):
            return Mux(space, self.vmem_size, self.hbm_size)

        # Sums of the negative and of the positive spans of the inner dimensions: the
        # lowest and highest offset from a box's first element, for a box of the k
        # innermost dimensions (k = 1 a row, 2 a plane, 3 the whole descriptor).
        def extremes(side, k):
            lo = sum(Mux(s < 0, s, 0) for s in span[side][:k])
            hi = sum(Mux(s > 0, s, 0) for s in span[side][:k])
            return lo, hi

        free = Signal()
        m.d.comb += [self.jobs.payload.eq(job), self.errors.payload.eq(error),
                     self.descriptors.ready.eq(free)]

        def take_next():
            # The cycle the previous descriptor leaves, the next one comes in.
            m.d.comb += free.eq(1)
            with m.If(self.descriptors.valid):
                m.d.sync += [d.eq(self.descriptors.payload), ident.eq(next_id),
                             next_id.eq(next_id + 1)]
                m.next = "span"
            with m.Else():
                m.next = "idle"

        with m.FSM():
            with m.State("idle"):
                m.d.comb += self.idle.eq(1)
                take_next()
            with m.State("span"):
                for side, strides in (("src", d.src_strides), ("dst", d.dst_strides)):
                    for k in range(DIMS):
                        count = d.counts[k]
                        m.d.sync += span[side][k].eq(Mux(count == 0, 0,
                                                         (count - 1) * strides[k]))
                m.d.sync += words.eq(d.counts[0] * d.counts[1] * d.counts[2])
                m.next = "check"
            with m.State("check"):
                self._check(m, d, ident, job, error, words, size, extremes, scan)
            with m.State("scan"):
                self._scan(m, d, ident, error, size, extremes, scan)
            with m.State("job"):
                m.d.comb += self.jobs.valid.eq(1)
                with m.If(self.jobs.ready):
                    take_next()
            with m.State("error"):
                m.d.comb += self.errors.valid.eq(1)
                with m.If(self.errors.ready):
                    take_next()
        return m

    def _check(self, m, d, ident, job, error, words, size, extremes, scan):
        lo = {}
        hi = {}
        for side, base in (("src", d.src_base), ("dst", d.dst_base)):
            low, high = extremes(side, DIMS)
            lo[side], hi[side] = Signal(_WIDE, name=f"{side}_lo"), Signal(_WIDE, name=f"{side}_hi")
            m.d.comb += [lo[side].eq(base + low), hi[side].eq(base + high)]
        in_range = ((lo["src"] >= 0) & (hi["src"] < size(d.src_space))
                    & (lo["dst"] >= 0) & (hi["dst"] < size(d.dst_space)))
        zero = (d.counts[0] == 0) | (d.counts[1] == 0) | (d.counts[2] == 0)
        with m.If(zero):
            m.d.sync += [error.id.eq(ident), error.reason.eq(reason_code("count")),
                         error.address.eq(d.src_base)]
            m.next = "error"
        with m.Elif(d.flag >= self.n_flags):
            m.d.sync += [error.id.eq(ident), error.reason.eq(reason_code("flag")),
                         error.address.eq(d.flag)]
            m.next = "error"
        with m.Elif(in_range):
            m.d.sync += [
                job.src_space.eq(d.src_space), job.src_base.eq(d.src_base),
                job.dst_space.eq(d.dst_space), job.dst_base.eq(d.dst_base),
                job.src_strides.eq(d.src_strides), job.dst_strides.eq(d.dst_strides),
                job.flag.eq(d.flag), job.words.eq(words), job.id.eq(ident),
                job.src_lo.eq(lo["src"]), job.src_hi.eq(hi["src"]),
                job.dst_lo.eq(lo["dst"]), job.dst_hi.eq(hi["dst"]),
                job.overlap.eq((d.src_space == d.dst_space) & (lo["src"] <= hi["dst"])
                               & (lo["dst"] <= hi["src"])),
            ]
            m.d.sync += [job.last[k].eq(d.counts[k] - 1) for k in range(DIMS)]
            m.next = "job"
        with m.Else():
            m.d.sync += [scan.level.eq(DIMS - 1), scan.index.eq(0),
                         scan.cursor["src"].eq(d.src_base), scan.cursor["dst"].eq(d.dst_base)]
            m.next = "scan"

    def _scan(self, m, d, ident, error, size, extremes, scan):
        level, index, cursor = scan.level, scan.index, scan.cursor
        strides = {"src": d.src_strides, "dst": d.dst_strides}
        # The box of the current level at the cursor: a plane (level 2), a row (level 1)
        # or one element (level 0). Bad when its extremes leave the space.
        bad = {}
        for side, space in (("src", d.src_space), ("dst", d.dst_space)):
            bad[side] = Signal(name=f"{side}_bad")
            with m.Switch(level):
                for k in range(DIMS):
                    with m.Case(k):
                        low, high = extremes(side, k) if k else (0, 0)
                        m.d.comb += bad[side].eq((cursor[side] + low < 0)
                                                 | (cursor[side] + high >= size(space)))
        count_last = Signal(ADDRESS_BITS)
        with m.Switch(level):
            for k in range(DIMS):
                with m.Case(k):
                    m.d.comb += count_last.eq(d.counts[k] - 1)
        # A bad box holds the first bad element: descend into it (its first sub-box starts
        # at the cursor). Otherwise step to the next box of this level. The last box of a
        # level is bad by construction, and treated so, so the scan always ends.
        with m.If(level == 0):
            with m.If(bad["src"] | bad["dst"] | (index == count_last)):
                m.d.sync += [error.id.eq(ident),
                             error.reason.eq(Mux(bad["src"], reason_code("src_range"),
                                                 reason_code("dst_range"))),
                             error.address.eq(Mux(bad["src"], cursor["src"], cursor["dst"]))]
                m.next = "error"
        with m.Elif(bad["src"] | bad["dst"] | (index == count_last)):
            m.d.sync += [level.eq(level - 1), index.eq(0)]
        with m.Else():
            m.d.sync += index.eq(index + 1)
        with m.If(~bad["src"] & ~bad["dst"] & (index != count_last)):
            for side in ("src", "dst"):
                with m.Switch(level):
                    for k in range(DIMS):
                        with m.Case(k):
                            m.d.sync += cursor[side].eq(cursor[side] + strides[side][k])
