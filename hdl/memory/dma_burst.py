"""The DMA's burst engine: beats in, line reads and merged line writes out on the memory
ports."""

import types

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.memory_port import WORD_BITS
from ..lib.stream_queue import StreamQueue
from .dma_addrgen import beat_layout, inflight_layout
from .dma_lanes import check_space_ports, lane_mask, rotate_words_left
from .dma_push import push_beat_layout
from .layouts import ADDRESS_BITS, Reason, error_layout, flag_add_layout
from ..lib.params import check_int

__all__ = ["BurstEngine", "ROUND_TRIP"]

#: Cycles a read holds its credit beyond the memory's read latency: into the request
#: register, its response into the response queue, out of it with the write issued, and
#: the credit seen free.
ROUND_TRIP = 3
#: Completed descriptors each port may hold (last write issued or accepted, flag add not
#: yet taken): three keep one-line descriptors streaming on one port.
COMPLETIONS = 3


def _pending_layout(max_words):
    return data.StructLayout({
        "src_space": 1, "src_addr": unsigned(ADDRESS_BITS),
        "dst_space": 1, "dst_addr": unsigned(ADDRESS_BITS),
        "count": range(1, max_words + 1), "last": 1, "flush": 1, "remote": 1,
    })


def _log2(value):
    return value.bit_length() - 1


def _words(value, first, end):
    """Words ``first .. end - 1`` of a line value."""
    return value[WORD_BITS * first:WORD_BITS * end]


class BurstEngine(wiring.Component):
    """Moves beats: one line read on the source space's port, then, when the line returns,
    its words rotated into place and written, merged, on the destination space's port.

    **Reads.** One request a cycle on each port, in beat order, each reading the one
    source line that holds a beat (up to a line of contiguous words).

    **Writes.** A beat's words land in at most two destination lines (a beat is no longer
    than the narrower line). They are rotated by ``destination lane - source lane`` into a
    two-line window, so misaligned source and destination cost no extra request. A line
    is written once it is complete or its run ends (``flush``); the words of a line not
    yet complete wait in a one-line *merge register* and are written with the next beat's,
    so a contiguous run writes each destination line once, whatever the alignment. A beat
    that completes one line, spills into the next and ends its run takes two cycles.

    **Reads in flight (Little's law).** Reads in flight = request rate x the time each
    holds its credit. Moving ``words_per_cycle`` words a cycle in requests of
    ``words_per_request`` words takes ``words_per_cycle / words_per_request`` reads a
    cycle, each holding a credit for ``read_latency + ROUND_TRIP`` cycles, so::

        max_reads >= words_per_cycle * (read_latency + ROUND_TRIP) / words_per_request

    A contiguous transfer carries a full line per request (``words_per_request =
    words_per_cycle``), one request a cycle, so ``max_reads >= read_latency + ROUND_TRIP``
    (:data:`ROUND_TRIP` = 3), where ``read_latency`` is the slowest memory's, its jitter
    included. The constructor and ``elaborate`` both enforce it.

    **Order.** Each port has one request register, so a memory sees requests in the order
    they are issued. A read with ``fence`` set waits until no beat's write is pending and
    the merge register is empty (see :class:`~hdl.memory.dma_addrgen.AddressGenerator`).
    A write has priority over a read for its port.

    **Pushes.** A beat of a remote descriptor (``remote``) is not written: when its line
    returns, its words, rotated to lane 0, leave on ``pushed`` with its destination and the
    descriptor's ``inflight`` entry, through a one-beat output register; its last beat
    takes the entry. It waits for the merge register to be flushed like any beat, so local
    writes before it are issued first.

    **Completion.** A descriptor's last write takes its ``inflight`` entry (flag, words)
    along in the request register; when its memory accepts it, the entry queues for
    ``flag_add`` (per port, up to :data:`COMPLETIONS`; the ports take turns), so a flag add
    never comes before its descriptor's data has landed, and adds of descriptors one line
    long still stream.

    **Bus errors.** A line answered with ``error`` writes none of its beat's words, and
    ``bus_errors`` reports the descriptor id and the address of the beat's first source
    word: one record per faulting read. The beat otherwise completes, so nothing waits
    for it; a push's faulting beat leaves with its words zeroed (the HBM answers a fault
    with zero data), so the flag at its destination still counts them.

    Parameters
    ----------
    ports : dict of space code to MemoryPortSignature
        ``{0: hbm, 1: vmem}``; words per line a power of two, mask per word.
    read_latency : int
        The latency to cover, in cycles.
    max_reads : int
        Reads in flight; default ``read_latency + ROUND_TRIP``.

    Ports
    -----
    beats : In(stream.Signature(beat_layout(max words per line)))
    inflight : In(stream.Signature(inflight_layout))
    hbm, vmem : Out(MemoryPortSignature)
    flag_add : Out(stream.Signature(flag_add_layout))
    pushed : Out(stream.Signature(push_beat_layout(max words per line)))
        Beats of pushes, registered (``valid`` does not depend on ``ready``).
    bus_errors : Out(stream.Signature(error_layout))
    drained : Out(1)
        No beat's write is pending and no partial line is held.

    Latency: a beat taken in cycle ``t`` is requested from its memory from ``t + 1``; its
    line is written the cycle after its response arrives, requested a cycle later.
    Throughput: one beat a cycle (one line between different memories; one memory read
    and written shares its port: half that).
    """

    def __init__(self, *, ports, read_latency, max_reads=None):
        check_space_ports(ports)
        check_int("read_latency", read_latency, least=1)
        if max_reads is None:
            max_reads = read_latency + ROUND_TRIP
        check_int("max_reads", max_reads, least=1)
        self.ports = dict(ports)
        self.read_latency = read_latency
        self.max_reads = max_reads
        self.max_words = max(sig.words for sig in ports.values())
        self._check_littles_law()
        super().__init__({
            "beats": In(stream.Signature(beat_layout(self.max_words))),
            "inflight": In(stream.Signature(inflight_layout)),
            "hbm": Out(ports[0]),
            "vmem": Out(ports[1]),
            "flag_add": Out(stream.Signature(flag_add_layout)),
            "pushed": Out(stream.Signature(push_beat_layout(self.max_words))),
            "bus_errors": Out(stream.Signature(error_layout)),
            "drained": Out(1),
        })

    def _check_littles_law(self):
        need = self.read_latency + ROUND_TRIP
        if self.max_reads < need:
            raise ValueError(f"max_reads ({self.max_reads}) cannot cover read_latency "
                             f"({self.read_latency}): Little's law needs at least "
                             f"read_latency + {ROUND_TRIP} = {need} line reads in flight for "
                             f"one line a cycle")

    def elaborate(self, platform):
        self._check_littles_law()
        m = Module()
        wmax = self.max_words
        pending_layout = _pending_layout(wmax)
        m.submodules.pending = pending = StreamQueue(shape=pending_layout, depth=self.max_reads)
        head = pending.o.payload
        spaces = {}
        for s, port in ((0, self.hbm), (1, self.vmem)):
            sig = self.ports[s]
            responses = StreamQueue(shape=sig.response_layout, depth=self.max_reads)
            m.submodules[f"responses{s}"] = responses
            # Credits guarantee room for every response: i.ready is always high in use.
            wiring.connect(m, wiring.flipped(port.resp), responses.i)
            # Flag adds of descriptors whose last write this port has accepted.
            landed = StreamQueue(shape=flag_add_layout, depth=COMPLETIONS)
            m.submodules[f"landed{s}"] = landed
            spaces[s] = types.SimpleNamespace(
                sig=sig, port=port, responses=responses, words=sig.words,
                shift=_log2(sig.words), landed=landed,
                last=Signal(name=f"slot{s}_last"),               # the request is a last write
                info=Signal(flag_add_layout, name=f"slot{s}_info"),   # ... completing this
                free=~port.req.valid | port.req.ready,
                resp=responses.o.payload)

        def by_space(space, values):
            return Mux(space, values[1], values[0])

        def lane(addr, space):
            return by_space(space, [addr[:spaces[s].shift] if spaces[s].shift else 0
                                    for s in (0, 1)])

        # ---- write side: the oldest pending beat, once its line has returned, rotated into
        # a two-line window at its destination lanes.
        line = Signal(WORD_BITS * 2 * wmax)
        error = Signal()
        m.d.comb += [line.eq(by_space(head.src_space, [sp.resp.data.as_value()
                                                       for sp in spaces.values()])),
                     error.eq(by_space(head.src_space, [sp.resp.error for sp in spaces.values()]))]
        src_lane = Signal(max(1, _log2(wmax)))
        dst_lane = Signal(max(1, _log2(wmax)))
        end = Signal(range(2 * wmax + 1))         # the lane after the beat's last word
        shift = Signal(range(2 * wmax))
        # A push's words go out from lane 0.
        m.d.comb += [src_lane.eq(lane(head.src_addr, head.src_space)),
                     dst_lane.eq(Mux(head.remote, 0, lane(head.dst_addr, head.dst_space))),
                     end.eq(dst_lane + head.count),
                     shift.eq(dst_lane - src_lane)]       # modulo the window
        window = Signal(WORD_BITS * 2 * wmax)
        placed = Signal(2 * wmax)                 # the lanes the beat writes, if it may
        m.d.comb += [window.eq(rotate_words_left(line, shift, 2 * wmax)),
                     placed.eq(Mux(error, 0, lane_mask(dst_lane, end, 2 * wmax)))]

        dst_words = by_space(head.dst_space, [1 << sp.shift for sp in spaces.values()])
        dst_line = Signal(ADDRESS_BITS)
        lo_data, hi_data = Signal(WORD_BITS * wmax), Signal(WORD_BITS * wmax)
        lo_mask, hi_mask = Signal(wmax), Signal(wmax)
        w0, w1 = spaces[0].words, spaces[1].words
        m.d.comb += [
            dst_line.eq(by_space(head.dst_space, [head.dst_addr >> sp.shift
                                                  for sp in spaces.values()])),
            lo_data.eq(by_space(head.dst_space, [_words(window, 0, w0), _words(window, 0, w1)])),
            hi_data.eq(by_space(head.dst_space, [_words(window, w0, 2 * w0),
                                                 _words(window, w1, 2 * w1)])),
            lo_mask.eq(by_space(head.dst_space, [placed[:w0], placed[:w1]])),
            hi_mask.eq(by_space(head.dst_space, [placed[w0:2 * w0], placed[w1:2 * w1]])),
        ]
        reaches = Signal()                        # the beat fills its first line to the end
        spill = Signal()                          # ... and runs into the next
        m.d.comb += [reaches.eq(end >= dst_words), spill.eq(end > dst_words)]

        # The merge register: a destination line some of whose words wait for the rest.
        merge = types.SimpleNamespace(
            valid=Signal(name="merge_valid"), space=Signal(name="merge_space"),
            line=Signal(ADDRESS_BITS, name="merge_line"),
            data=Signal(WORD_BITS * wmax, name="merge_data"),
            mask=Signal(wmax, name="merge_mask"),       # 0 whenever not valid
            flush=Signal(name="merge_flush"),           # write it before the next beat
            last=Signal(name="merge_last"))             # ... as its descriptor's last write
        merged_mask = merge.mask | lo_mask
        merged_data = Cat(*[Mux(lo_mask[j], _words(lo_data, j, j + 1), _words(merge.data, j, j + 1))
                            for j in range(wmax)])

        bus = self.bus_errors
        # A last write may be issued while its port has room for one more completion.
        room = [sp.landed.level + sp.last < COMPLETIONS for sp in spaces.values()]
        can_finish = by_space(Mux(merge.flush, merge.space, head.dst_space), room)
        final_here = head.last & ~spill          # (a push's beat never spills)
        pushed = self.pushed
        consume, flush, write, finish = Signal(), Signal(), Signal(), Signal()
        m.d.comb += [
            consume.eq(~merge.flush & pending.o.valid
                       & by_space(head.src_space, [sp.responses.o.valid for sp in spaces.values()])
                       & Mux(head.remote, ~pushed.valid | pushed.ready,
                             by_space(head.dst_space, [sp.free for sp in spaces.values()])
                             & (~final_here | can_finish))
                       & (~error | ~bus.valid)),
            flush.eq(merge.flush & by_space(merge.space, [sp.free for sp in spaces.values()])
                     & (~merge.last | can_finish)),
            write.eq(consume & ~head.remote & (reaches | head.flush)),
            finish.eq((consume & final_here) | (flush & merge.last)),
            pending.o.ready.eq(consume),
            self.inflight.ready.eq(finish),
        ]
        writes = {}
        for s, sp in spaces.items():
            writes[s] = Signal(name=f"write{s}")
            m.d.comb += [writes[s].eq((write & (head.dst_space == s))
                                      | (flush & (merge.space == s))),
                         sp.responses.o.ready.eq(consume & (head.src_space == s))]

        with m.If(flush):
            m.d.sync += [merge.valid.eq(0), merge.mask.eq(0), merge.flush.eq(0)]
        with m.If(pushed.valid & pushed.ready):
            m.d.sync += pushed.valid.eq(0)
        with m.If(consume & head.remote):
            m.d.sync += [pushed.valid.eq(1), pushed.payload.data.as_value().eq(
                             _words(window, 0, wmax)),
                         pushed.payload.count.eq(head.count),
                         pushed.payload.dst_space.eq(head.dst_space),
                         pushed.payload.dst_addr.eq(head.dst_addr),
                         pushed.payload.last.eq(head.last),
                         pushed.payload.info.eq(self.inflight.payload)]
        with m.If(consume & ~head.remote):
            with m.If(spill):
                m.d.sync += [merge.valid.eq(1), merge.space.eq(head.dst_space),
                             merge.line.eq(dst_line + 1), merge.data.eq(hi_data),
                             merge.mask.eq(hi_mask), merge.flush.eq(head.flush),
                             merge.last.eq(head.last)]
            with m.Elif(write):
                m.d.sync += [merge.valid.eq(0), merge.mask.eq(0)]
            with m.Else():
                m.d.sync += [merge.valid.eq(1), merge.space.eq(head.dst_space),
                             merge.line.eq(dst_line), merge.data.eq(merged_data),
                             merge.mask.eq(merged_mask)]
        with m.If(bus.valid & bus.ready):
            m.d.sync += bus.valid.eq(0)
        with m.If(consume & error):
            m.d.sync += [bus.valid.eq(1), bus.payload.id.eq(self.inflight.payload.id),
                         bus.payload.reason.eq(Reason.BUS),
                         bus.payload.address.eq(head.src_addr)]

        # ---- read side: the next beat, if a credit is free and it is not fenced off.
        beat = self.beats.payload
        read = Signal()
        drained = Signal()
        m.d.comb += [
            drained.eq(~pending.o.valid & ~merge.valid),
            read.eq(self.beats.valid & pending.i.ready & (~beat.fence | drained)
                    & by_space(beat.src_space, [sp.free & ~writes[s]
                                                for s, sp in spaces.items()])),
            self.beats.ready.eq(read),
            pending.i.valid.eq(read),
            self.drained.eq(drained),
        ]
        entry = pending.i.payload
        m.d.comb += [entry.src_space.eq(beat.src_space), entry.src_addr.eq(beat.src_addr),
                     entry.dst_space.eq(beat.dst_space), entry.dst_addr.eq(beat.dst_addr),
                     entry.count.eq(beat.count), entry.last.eq(beat.last),
                     entry.flush.eq(beat.flush), entry.remote.eq(beat.remote)]

        # ---- the request registers, and completion when a last write is accepted.
        for s, sp in spaces.items():
            req = sp.port.req
            m.d.comb += [sp.landed.i.valid.eq(req.valid & req.ready & sp.last),
                         sp.landed.i.payload.eq(sp.info)]
            with m.If(req.valid & req.ready):
                m.d.sync += [req.valid.eq(0), sp.last.eq(0)]
            with m.If(writes[s]):
                m.d.sync += [
                    sp.info.flag.eq(self.inflight.payload.flag),
                    sp.info.amount.eq(self.inflight.payload.words),
                    req.valid.eq(1), sp.last.eq(Mux(merge.flush, merge.last, final_here)),
                    req.payload.addr.eq(Mux(merge.flush, merge.line, dst_line)),
                    req.payload.write.eq(1),
                    req.payload.data.as_value().eq(
                        _words(Mux(merge.flush, merge.data, merged_data), 0, sp.words)),
                    req.payload.mask.eq(Mux(merge.flush, merge.mask, merged_mask)[:sp.words]),
                ]
            with m.Elif(read & (beat.src_space == s)):
                m.d.sync += [
                    req.valid.eq(1), sp.last.eq(0),
                    req.payload.addr.eq(beat.src_addr >> sp.shift),
                    req.payload.write.eq(0),
                    req.payload.mask.eq(0),
                ]
        self._flag_adds(m, [sp.landed for sp in spaces.values()])
        return m

    def _flag_adds(self, m, landed):
        """Offer the ports' completions on ``flag_add``, taking turns when both have one.
        The choice is held while an offer waits, so the payload stays put until taken."""
        done = self.flag_add
        turn = Signal()                           # 1: port 1 goes first when both offer
        held = Signal()                           # the last cycle's offer was not taken
        chosen = Signal()                         # ... and came from this port
        pick = Signal()
        m.d.comb += [
            pick.eq(Mux(held, chosen,
                        Mux(landed[0].o.valid & landed[1].o.valid, turn, landed[1].o.valid))),
            done.valid.eq(landed[0].o.valid | landed[1].o.valid),
            done.payload.eq(Mux(pick, landed[1].o.payload, landed[0].o.payload)),
            landed[0].o.ready.eq(done.ready & ~pick),
            landed[1].o.ready.eq(done.ready & pick),
        ]
        m.d.sync += [held.eq(done.valid & ~done.ready), chosen.eq(pick)]
        with m.If(done.valid & done.ready):
            m.d.sync += turn.eq(~pick)
