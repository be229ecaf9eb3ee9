"""The DMA's 3-D address generator: accepted descriptors in, one element per cycle out."""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.memory_port import check_int
from .dma_check import job_layout
from .layouts import ADDRESS_BITS, DIMS, FLAG_BITS, ID_BITS

__all__ = ["AddressGenerator", "element_layout", "inflight_layout"]

#: One element: read ``src_addr`` of ``src_space``, write the word to ``dst_addr`` of
#: ``dst_space``. ``fence``: the read must wait until every earlier element's write has
#: been issued. ``last``: the descriptor's last element.
element_layout = data.StructLayout({
    "src_space": 1, "src_addr": unsigned(ADDRESS_BITS),
    "dst_space": 1, "dst_addr": unsigned(ADDRESS_BITS),
    "fence": 1, "last": 1,
})

#: A descriptor in flight: what its completion needs (``flag``, ``words``) and its ``id``.
inflight_layout = data.StructLayout({
    "flag": unsigned(FLAG_BITS), "words": unsigned(ADDRESS_BITS), "id": unsigned(ID_BITS),
})


class AddressGenerator(wiring.Component):
    """Expands accepted descriptors into elements, in element order, i0 fastest.

    Addresses are stepped, not multiplied: each dimension keeps the address of its
    current row or plane start and adds its stride. Every address stepped to is an
    element's, in range by the check, so 24-bit arithmetic wrapping modulo ``2**24`` gives
    exact results for negative strides too.

    **Ordering (golden.memory's rule).** Reads are issued in element order and each memory
    performs requests in issue order, so the only hazard is a read of a word an earlier
    element writes. Elements carry ``fence`` where that can happen, and the burst engine
    holds a fenced read until every earlier write is issued:

    * every element of a descriptor whose source and destination extents intersect in one
      space (``overlap``), so such a descriptor runs one element at a time;
    * the first element of a descriptor whose source extent intersects, in its space, the
      destination extents of the descriptors whose writes may still be pending. Those are
      tracked as one covering interval per space, emptied whenever the pipeline drains
      (conservative: a fence is never missed, and rarely taken needlessly).

    Parameters
    ----------
    outstanding : int
        Descriptors in flight at once (default 4): from their first element to their last
        write, each holds an entry of the ``inflight`` queue.

    Ports
    -----
    jobs : In(stream.Signature(job_layout))
    elements : Out(stream.Signature(element_layout))
        A register; one element per cycle while taken, including across descriptors (a
        job's first element leaves in the cycle the job is taken).
    inflight : Out(stream.Signature(inflight_layout))
        The descriptors in flight, oldest first; the burst engine takes an entry when it
        issues that descriptor's last write.
    drained : In(1)
        The burst engine holds no element whose write is not yet issued.

    Latency: one cycle from a job taken to its first element valid. A job waits while
    ``outstanding`` descriptors are in flight.
    """

    def __init__(self, *, outstanding=4):
        check_int("outstanding", outstanding, least=1, most=1024)
        self.outstanding = outstanding
        super().__init__({
            "jobs": In(stream.Signature(job_layout)),
            "elements": Out(stream.Signature(element_layout)),
            "inflight": Out(stream.Signature(inflight_layout)),
            "drained": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.queue = queue = fifo.SyncFIFO(width=inflight_layout.size,
                                                  depth=self.outstanding)
        m.d.comb += [self.inflight.valid.eq(queue.r_rdy),
                     self.inflight.payload.eq(queue.r_data),
                     queue.r_en.eq(self.inflight.ready)]

        job = self.jobs.payload
        busy = Signal()
        cur = Signal(job_layout)                 # the descriptor being expanded
        index = [Signal(ADDRESS_BITS, name=f"i{k}") for k in range(DIMS)]
        # Address of the current element, and of the current row and plane starts.
        src = [Signal(ADDRESS_BITS, name=f"src_start{k}") for k in range(DIMS)]
        dst = [Signal(ADDRESS_BITS, name=f"dst_start{k}") for k in range(DIMS)]

        out_free = ~self.elements.valid | self.elements.ready
        load = Signal()
        emit = Signal()
        m.d.comb += [
            load.eq(out_free & ~busy & self.jobs.valid & queue.w_rdy),
            emit.eq(out_free & busy),
            self.jobs.ready.eq(load),
            queue.w_en.eq(load),
        ]
        entry = Signal(inflight_layout)
        m.d.comb += [entry.flag.eq(job.flag), entry.words.eq(job.words), entry.id.eq(job.id),
                     queue.w_data.eq(entry)]

        # Destination extents whose writes may be pending, one interval per space.
        held = [Signal(name=f"held{s}") for s in range(2)]
        held_lo = [Signal(ADDRESS_BITS, name=f"held{s}_lo") for s in range(2)]
        held_hi = [Signal(ADDRESS_BITS, name=f"held{s}_hi") for s in range(2)]
        drained = Signal()
        m.d.comb += drained.eq(self.drained & ~self.elements.valid & ~busy)
        hazard = Signal()
        with m.Switch(job.src_space):
            for s in range(2):
                with m.Case(s):
                    m.d.comb += hazard.eq(held[s] & ~drained & (job.src_lo <= held_hi[s])
                                          & (held_lo[s] <= job.src_hi))
        with m.If(drained):
            m.d.sync += [h.eq(0) for h in held]
        with m.If(load):
            for s in range(2):
                with m.If(job.dst_space == s):
                    keep = held[s] & ~drained
                    m.d.sync += [
                        held[s].eq(1),
                        held_lo[s].eq(Mux(keep & (held_lo[s] < job.dst_lo), held_lo[s],
                                          job.dst_lo)),
                        held_hi[s].eq(Mux(keep & (held_hi[s] > job.dst_hi), held_hi[s],
                                          job.dst_hi)),
                    ]

        # The element leaving now: the job's first on a load, else the current one.
        last = [Mux(load, job.last[k], cur.last[k]) for k in range(DIMS)]
        src_stride = [Mux(load, job.src_strides[k], cur.src_strides[k]) for k in range(DIMS)]
        dst_stride = [Mux(load, job.dst_strides[k], cur.dst_strides[k]) for k in range(DIMS)]
        at = [Mux(load, 0, index[k]) for k in range(DIMS)]
        src_at = [Mux(load, job.src_base, src[k]) for k in range(DIMS)]
        dst_at = [Mux(load, job.dst_base, dst[k]) for k in range(DIMS)]
        end = [Signal(name=f"end{k}") for k in range(DIMS)]
        m.d.comb += [end[k].eq(at[k] == last[k]) for k in range(DIMS)]
        final = end[0] & end[1] & end[2]

        with m.If(out_free):
            m.d.sync += self.elements.valid.eq(load | busy)
        with m.If(load | emit):
            m.d.sync += [
                self.elements.payload.src_space.eq(Mux(load, job.src_space, cur.src_space)),
                self.elements.payload.dst_space.eq(Mux(load, job.dst_space, cur.dst_space)),
                self.elements.payload.src_addr.eq(src_at[0]),
                self.elements.payload.dst_addr.eq(dst_at[0]),
                self.elements.payload.fence.eq(Mux(load, job.overlap | hazard, cur.overlap)),
                self.elements.payload.last.eq(final),
                busy.eq(~final),
            ]
            with m.If(load):
                # Every dimension of a new job starts at its base; the step below then
                # overrides the ones it moves.
                m.d.sync += cur.eq(job)
                m.d.sync += [r.eq(0) for r in index]
                m.d.sync += [r.eq(job.src_base) for r in src]
                m.d.sync += [r.eq(job.dst_base) for r in dst]
            # Step to the next element: the innermost dimension not at its end advances,
            # and every dimension inside it restarts from that dimension's new start.
            with m.If(~end[0]):
                m.d.sync += [index[0].eq(at[0] + 1),
                             src[0].eq(src_at[0] + src_stride[0]),
                             dst[0].eq(dst_at[0] + dst_stride[0])]
            for k in range(1, DIMS):
                with m.Elif(~end[k]):
                    new_src = Signal(ADDRESS_BITS, name=f"next_src{k}")
                    new_dst = Signal(ADDRESS_BITS, name=f"next_dst{k}")
                    m.d.comb += [new_src.eq(src_at[k] + src_stride[k]),
                                 new_dst.eq(dst_at[k] + dst_stride[k])]
                    m.d.sync += [index[k].eq(at[k] + 1), src[k].eq(new_src), dst[k].eq(new_dst)]
                    for j in range(k):
                        m.d.sync += [index[j].eq(0), src[j].eq(new_src), dst[j].eq(new_dst)]
        return m
