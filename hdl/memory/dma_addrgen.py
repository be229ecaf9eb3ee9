"""The DMA's 3-D address generator: accepted descriptors in, one beat (up to a line of
contiguous words) per cycle out."""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int, check_power_of_two
from ..lib.stream_queue import StreamQueue
from .dma_check import job_layout
from .layouts import ADDRESS_BITS, CHIP_BITS, DIMS, FLAG_BITS, ID_BITS

__all__ = ["AddressGenerator", "beat_layout", "inflight_layout"]


def beat_layout(max_words):
    """One beat: ``count`` (1 to ``max_words``) consecutive elements, read from
    ``src_addr`` on in ``src_space`` and written from ``dst_addr`` on in ``dst_space``
    (both ascending by one word when ``count > 1``). ``fence``: the read must wait until
    every earlier beat's write has been issued. ``last``: the descriptor's last beat.
    ``flush``: the destination run ends with this beat, so its words must all be written
    before the next beat's (the burst engine may otherwise hold a partial line).
    ``remote``: the beat belongs to a push, so its words leave for another chip
    instead of being written here."""
    check_int("max_words", max_words, least=1)
    return data.StructLayout({
        "src_space": 1, "src_addr": unsigned(ADDRESS_BITS),
        "dst_space": 1, "dst_addr": unsigned(ADDRESS_BITS),
        "count": range(1, max_words + 1),
        "fence": 1, "last": 1, "flush": 1, "remote": 1,
    })


#: A descriptor in flight: what its completion needs (``flag``, ``words``), its ``id``,
#: and for a push (``remote``) its destination chip and sent flag (``sent``, ``sent_flag``).
inflight_layout = data.StructLayout({
    "flag": unsigned(FLAG_BITS), "words": unsigned(ADDRESS_BITS), "id": unsigned(ID_BITS),
    "remote": 1, "chip": unsigned(CHIP_BITS), "sent": 1, "sent_flag": unsigned(FLAG_BITS),
})


def _min(a, b):
    return Mux(a < b, a, b)


class AddressGenerator(wiring.Component):
    """Expands accepted descriptors into beats, in element order, i0 fastest.

    **Beats.** Where a row is contiguous on both sides (innermost strides both 1), a beat
    takes as many of its next elements as fit in the rest of the source line, at most
    ``min(line words of the source, line words of the destination)`` (so the destination
    words span at most two lines) and at most what is left of the row. Any other element
    is a beat of its own. A beat ends its destination run (``flush``) at the end of a row,
    wherever the innermost destination stride is not 1, and in an overlapping descriptor.

    Addresses are stepped, not multiplied: each dimension keeps the address of its
    current row or plane start and adds its stride. Every address stepped to is an
    element's, in range by the check, so 24-bit arithmetic wrapping modulo ``2**24`` gives
    exact results for negative strides too.

    **Ordering (golden.memory's rule).** Reads are issued in element order and each memory
    performs requests in issue order, so the only hazard is a read of a word an earlier
    element writes. Beats carry ``fence`` where that can happen, and the burst engine
    holds a fenced read until every earlier write is issued:

    * every beat of a descriptor whose source and destination extents intersect in one
      space (``overlap``). Such a beat still moves a line of contiguous words at once,
      unless the destination lies less than a beat ahead of the source (``0 < dst - src
      < beat``), where an element would read a word an earlier one of the same beat
      writes: those move one word per beat;
    * the first beat of a descriptor whose source extent intersects, in its space, the
      destination extents of the descriptors whose writes may still be pending. Those are
      tracked as one covering interval per space, emptied whenever the pipeline drains
      (conservative: a fence is never missed, and rarely taken needlessly). A push writes
      nothing here, so its destination is not tracked; its reads are fenced like any.

    A fenced beat always starts a destination run (the previous beat flushed), so the
    writes it waits for are never held back waiting for it.

    Parameters
    ----------
    line_words : (int, int)
        Words per line of space 0 (HBM) and space 1 (VMEM), powers of two.
    outstanding : int
        Descriptors in flight at once (default 4): from their first beat to their last
        write, each holds an entry of the ``inflight`` queue.

    Ports
    -----
    jobs : In(stream.Signature(job_layout))
    beats : Out(stream.Signature(beat_layout(max(line_words))))
        One beat per cycle while taken, including across descriptors: a job's first beat
        is offered, combinationally, in the cycle the job is (and the job is taken with
        it).
    inflight : Out(stream.Signature(inflight_layout))
        The descriptors in flight, oldest first; the burst engine takes an entry when it
        issues that descriptor's last write.
    drained : In(1)
        The burst engine holds no beat whose writes are not all issued.
    busy : Out(1)
        A descriptor is partly expanded.

    Latency: none; a job waits while ``outstanding`` descriptors are in flight.
    """

    def __init__(self, *, line_words=(1, 8), outstanding=4):
        if not isinstance(line_words, (tuple, list)) or len(line_words) != 2:
            raise TypeError(f"line_words must be a pair (hbm, vmem), not {line_words!r}")
        for name, words in zip(("hbm", "vmem"), line_words):
            check_power_of_two(f"{name} line words", words)
        check_int("outstanding", outstanding, least=1, most=1024)
        self.line_words = tuple(line_words)
        self.outstanding = outstanding
        self.max_words = max(line_words)
        super().__init__({
            "jobs": In(stream.Signature(job_layout)),
            "beats": Out(stream.Signature(beat_layout(self.max_words))),
            "inflight": Out(stream.Signature(inflight_layout)),
            "drained": In(1),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.queue = queue = StreamQueue(shape=inflight_layout, depth=self.outstanding)
        wiring.connect(m, queue.o, wiring.flipped(self.inflight))

        job = self.jobs.payload
        busy = self.busy
        cur = Signal(job_layout)                 # the descriptor being expanded
        index = [Signal(ADDRESS_BITS, name=f"i{k}") for k in range(DIMS)]
        # Address of the current element, and of the current row and plane starts.
        src = [Signal(ADDRESS_BITS, name=f"src_start{k}") for k in range(DIMS)]
        dst = [Signal(ADDRESS_BITS, name=f"dst_start{k}") for k in range(DIMS)]

        # The beat offered now: a new job's first while idle, else the current one. The
        # choice is by `busy`, a register, so the offer does not depend on `ready`.
        desc = data.View(job_layout, Mux(busy, cur.as_value(), job.as_value()))
        at = [Mux(busy, index[k], 0) for k in range(DIMS)]
        src_at = [Mux(busy, src[k], job.src_base) for k in range(DIMS)]
        dst_at = [Mux(busy, dst[k], job.dst_base) for k in range(DIMS)]

        advance = Signal()
        load = Signal()
        m.d.comb += [
            self.beats.valid.eq(busy | (self.jobs.valid & queue.i.ready)),
            advance.eq(self.beats.valid & self.beats.ready),
            load.eq(advance & ~busy),
            self.jobs.ready.eq(load),
            queue.i.valid.eq(load),
        ]
        entry = queue.i.payload
        m.d.comb += [entry.flag.eq(job.flag), entry.words.eq(job.words), entry.id.eq(job.id),
                     entry.remote.eq(job.remote), entry.chip.eq(job.chip),
                     entry.sent.eq(job.sent), entry.sent_flag.eq(job.sent_flag)]

        hazard = self._hazards(m, job, load, drained=self.drained & ~busy)
        count, left, contiguous = self._beat_size(m, desc, src_at[0], dst_at[0], at[0])

        end = [Signal(name=f"end{k}") for k in range(DIMS)]
        m.d.comb += end[0].eq(left == count)                          # the row's last beat
        m.d.comb += [end[k].eq(at[k] == desc.last[k]) for k in range(1, DIMS)]
        final = end[0] & end[1] & end[2]

        beat = self.beats.payload
        m.d.comb += [
            beat.src_space.eq(desc.src_space), beat.src_addr.eq(src_at[0]),
            beat.dst_space.eq(desc.dst_space), beat.dst_addr.eq(dst_at[0]),
            beat.count.eq(count),
            beat.fence.eq(desc.overlap | (~busy & hazard)),
            beat.last.eq(final),
            beat.flush.eq(end[0] | desc.overlap | (desc.dst_strides[0] != 1)),
            beat.remote.eq(desc.remote),
        ]

        # The start of the next row or plane, where dimension k steps.
        next_src = [None] + [Signal(ADDRESS_BITS, name=f"next_src{k}") for k in range(1, DIMS)]
        next_dst = [None] + [Signal(ADDRESS_BITS, name=f"next_dst{k}") for k in range(1, DIMS)]
        for k in range(1, DIMS):
            m.d.comb += [next_src[k].eq(src_at[k] + desc.src_strides[k]),
                         next_dst[k].eq(dst_at[k] + desc.dst_strides[k])]

        with m.If(advance):
            m.d.sync += busy.eq(~final)
            with m.If(load):
                # Every dimension of a new job starts at its base; the step below then
                # overrides the ones it moves.
                m.d.sync += cur.eq(job)
                m.d.sync += [r.eq(0) for r in index]
                m.d.sync += [r.eq(job.src_base) for r in src]
                m.d.sync += [r.eq(job.dst_base) for r in dst]
            # Step past the beat: the innermost dimension not at its end advances, and
            # every dimension inside it restarts from that dimension's new start.
            with m.If(~end[0]):
                m.d.sync += [
                    index[0].eq(at[0] + count),
                    src[0].eq(src_at[0] + Mux(contiguous, count, desc.src_strides[0])),
                    dst[0].eq(dst_at[0] + Mux(contiguous, count, desc.dst_strides[0])),
                ]
            for k in range(1, DIMS):
                with m.Elif(~end[k]):
                    new_src, new_dst = next_src[k], next_dst[k]
                    m.d.sync += [index[k].eq(at[k] + 1), src[k].eq(new_src), dst[k].eq(new_dst)]
                    for j in range(k):
                        m.d.sync += [index[j].eq(0), src[j].eq(new_src), dst[j].eq(new_dst)]
        return m

    def _beat_size(self, m, desc, src_addr, dst_addr, at):
        """The current beat's element count, the elements left in its row (itself
        included), and whether the row moves in multi-word beats."""
        w0, w1 = self.line_words
        src_words = Mux(desc.src_space, w1, w0)
        # Words per beat: the narrower line of the two spaces.
        cap = Mux(desc.src_space, Mux(desc.dst_space, w1, min(w0, w1)),
                  Mux(desc.dst_space, min(w0, w1), w0))
        # An element may not read what an earlier one of its own beat writes.
        ahead = Signal(unsigned(ADDRESS_BITS), name="ahead")
        m.d.comb += ahead.eq(dst_addr - src_addr)
        near = desc.overlap & ahead.any() & (ahead < cap)
        contiguous = Signal()
        m.d.comb += contiguous.eq((desc.src_strides[0] == 1) & (desc.dst_strides[0] == 1)
                                  & ~near)
        room = Signal(range(self.max_words + 1))              # words left in the source line
        m.d.comb += room.eq(src_words - (src_addr & (src_words - 1)))
        left = Signal(ADDRESS_BITS + 1)                       # elements left in the row
        m.d.comb += left.eq(desc.last[0] - at + 1)
        count = Signal(range(1, self.max_words + 1))
        m.d.comb += count.eq(Mux(contiguous, _min(_min(cap, room), left), 1))
        return count, left, contiguous

    def _hazards(self, m, job, load, *, drained):
        """Whether a job's source may read a word an earlier descriptor has yet to write."""
        held = [Signal(name=f"held{s}") for s in range(2)]
        held_lo = [Signal(ADDRESS_BITS, name=f"held{s}_lo") for s in range(2)]
        held_hi = [Signal(ADDRESS_BITS, name=f"held{s}_hi") for s in range(2)]
        hazard = Signal()
        m.d.comb += hazard.eq(Mux(job.src_space,
                                  *[held[s] & ~drained & (job.src_lo <= held_hi[s])
                                    & (held_lo[s] <= job.src_hi) for s in (1, 0)]))
        with m.If(drained):
            m.d.sync += [h.eq(0) for h in held]
        with m.If(load & ~job.remote):
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
        return hazard
