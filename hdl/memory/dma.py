"""The DMA engine: descriptor queue and check -> 3-D address generator -> burst engine, and
the push packetizer for remote descriptors."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..ici.layouts import MAX_FLIT_WORDS, flit_layout
from ..lib.memory_port import WORD_BITS, MemoryPortSignature, line_addr_width
from ..lib.numbered_ports import port, port_name
from .dma_addrgen import AddressGenerator
from .dma_burst import ROUND_TRIP, BurstEngine
from .dma_check import DescriptorCheck
from .dma_push import DEFAULT_MAX_PAYLOAD, max_payload_words
from .dma_push_ports import DEALINGS, DEFAULT_PUSH_BEATS, PushPorts
from .layouts import (ADDRESS_BITS, CHIP_BITS, FLAG_BITS, descriptor_layout, error_layout,
                      flag_add_layout)
from ..lib.params import check_bool, check_choice, check_int, check_power_of_two
from ..lib.stream_queue import StreamQueue

__all__ = ["DMA", "ROUND_TRIP"]

#: Width of the status counters.
COUNT_BITS = 32


class DMA(wiring.Component):
    """A DMA engine between HBM and VMEM (SPEC section 4.3), by ``golden.memory.run``.

    Descriptors pass, in order, through a queue and check (validation before any write:
    :class:`~hdl.memory.dma_check.DescriptorCheck`), a 3-D address generator
    (:class:`~hdl.memory.dma_addrgen.AddressGenerator`) and a burst engine
    (:class:`~hdl.memory.dma_burst.BurstEngine`), with streams between them. Up to
    ``outstanding`` accepted descriptors are in flight at once, their beats following
    each other through the pipeline with no gap, while the next descriptors are checked.
    Contiguous rows move a line per request (up to ``min(hbm_line_words, lanes)`` words,
    misaligned or not); other elements move one word per request. The result, images and
    flags, is that of running the descriptors one element at a time in order
    (``golden.memory``'s ordering rule: see the address generator for the fences that
    keep it).

    **Remote pushes** (``remote`` descriptors) read like any descriptor; their words leave
    on ``push`` as ICI ``write`` packets (:class:`~hdl.memory.dma_push.Packetizer`:
    ``golden.ici.push_packets`` with ``max_payload`` words a packet at most), and once the
    last flit has been taken the descriptor completes, adding its word count to its
    ``sent_flag`` if it names one. Its destination flag is added at the destination chip
    (:class:`~hdl.memory.dma_receive.Receiver`). With ``push_ports`` above 1, pushes are
    dealt in turn to that many packetizers, each on its own port
    (:class:`~hdl.memory.dma_push_ports.PushPorts`), so a chip whose program pushes to its
    neighbours alternately sends to all of them at once.

    **Reads in flight (Little's law).** Reads in flight = request rate x latency. Moving
    ``words_per_cycle`` words a cycle in requests of ``words_per_request`` words, each
    read holding its credit for ``read_latency + ROUND_TRIP`` cycles, needs
    ``max_reads >= words_per_cycle * (read_latency + ROUND_TRIP) / words_per_request``.
    A contiguous transfer requests a whole line (``words_per_request = words_per_cycle``)
    each cycle, so ``max_reads >= read_latency + ROUND_TRIP`` (:data:`ROUND_TRIP` = 3)
    keeps reads streaming while the first responses are on their way. ``read_latency`` is
    the slowest memory's, its jitter included. The constructor and ``elaborate`` assert
    it. The same law applies to whole descriptors: to stream descriptors of ``W`` words
    back to back, ``outstanding`` must cover ``1 + words_per_cycle * (read_latency +
    ROUND_TRIP) / W`` of them.

    Parameters
    ----------
    hbm_size : int
        HBM words, a multiple of ``hbm_line_words``, at most ``2**24``.
    hbm_line_words : int
        Words per HBM line (its ``words_per_cycle``), a power of two.
    vmem_lines, lanes : int
        VMEM lines and words per line (``lanes`` a power of two).
    n_flags : int
        Flags in the bank (default 16); a descriptor naming another is rejected.
    n_chips : int
        Chips in the system (default 1); a push to another is rejected.
    flit_words : int
        Words per ICI flit on ``push`` (default 1).
    max_payload : int
        Data words per ``write`` packet at most (default 64), 1 to
        :func:`~hdl.memory.dma_push.max_payload_words`.
    push_ports : int
        Packetizers and ``push`` ports, 1 to 8 (default 1).
    push_beats : int
        Beats each push port queues, with ``push_ports`` above 1 (default 64).
    push_dealing : str
        How pushes are dealt to the push ports: ``"turn"`` (default) or ``"empty"``
        (:class:`~hdl.memory.dma_push_ports.PushPorts`).
    outstanding : int
        Descriptors in flight at once (default 4).
    queue_depth : int
        Descriptors the input queue holds (default ``outstanding``).
    read_latency : int
        Read latency to cover (default 4).
    max_reads : int
        Line reads in flight (default ``read_latency + ROUND_TRIP``).
    beat_queue : bool
        False (the default): the address generator's beats go straight to the burst
        engine. True, for FPGAs: through a queue of two, so that whether the burst
        engine takes a beat (which hangs on the head of its reads in flight) does not
        reach into the address generator's arithmetic in the same cycle: a cycle more
        from a descriptor to its first request, the same throughput.

    Ports
    -----
    descriptors : In(stream.Signature(descriptor_layout))
        Numbered 0, 1, 2, ... as taken: the id an error record names.
    hbm, vmem : Out(MemoryPortSignature)
        To the memories' DMA ports.
    flag_add : Out(stream.Signature(flag_add_layout))
        A completed descriptor's word count, offered the cycle after its last write is
        accepted by its memory (so a flag bank that registers it shows it one cycle later).
    sent_add : Out(stream.Signature(flag_add_layout))
        A push's word count for its sent flag, offered the cycle after its last flit is
        taken on its push port (with several ports, once the round robin between their
        completions reaches it).
    push, push1, ... : Out(stream.Signature(flit_layout(flit_words)))
        Packets of pushes (``hdl.ici.Router``'s injection format), registered; one port
        per ``push_ports``.
    chip : In(8)
        This chip's id: the source of the packets.
    errors : Out(stream.Signature(error_layout))
        Rejections (in descriptor order) and bus errors (one per faulting line read), as
        they occur.
    idle : Out(1)
        Nothing queued, checked, moving or unreported.
    received, completed, rejected, bus_errors : Out(32)
        Descriptors taken, completed (flag added; for a push, its last flit sent),
        rejected, and bus errors reported.

    Latency: a descriptor taken in cycle ``t`` by an idle DMA has its first memory request
    valid in cycle ``t + 3`` (queue, corner extremes, then verdict, beat and request
    register in one cycle; ``t + 4`` with ``beat_queue``). Throughput: one line a cycle
    between different memories (one memory read and written shares its port: half
    that), one word a cycle for strided elements, and one descriptor a cycle.
    """

    def __init__(self, *, hbm_size, hbm_line_words=1, vmem_lines, lanes=8, n_flags=16,
                 n_chips=1, flit_words=1, max_payload=DEFAULT_MAX_PAYLOAD, push_ports=1,
                 push_beats=DEFAULT_PUSH_BEATS, outstanding=4, queue_depth=None,
                 read_latency=4, max_reads=None, push_dealing="turn", beat_queue=False):
        check_power_of_two("hbm_line_words", hbm_line_words)
        check_power_of_two("lanes", lanes)
        check_int("hbm_size", hbm_size, least=hbm_line_words, most=1 << ADDRESS_BITS)
        if hbm_size % hbm_line_words:
            raise ValueError(f"hbm_size ({hbm_size}) must be a multiple of hbm_line_words "
                             f"({hbm_line_words})")
        check_int("vmem_lines", vmem_lines, least=1, most=(1 << ADDRESS_BITS) // lanes)
        check_int("n_flags", n_flags, least=1, most=1 << FLAG_BITS)
        check_int("n_chips", n_chips, least=1, most=1 << CHIP_BITS)
        check_int("flit_words", flit_words, least=1, most=MAX_FLIT_WORDS)
        check_int("max_payload", max_payload, least=1, most=max_payload_words(flit_words))
        check_int("push_ports", push_ports, least=1, most=8)
        check_int("push_beats", push_beats, least=1)
        check_choice("push_dealing", push_dealing, DEALINGS)
        check_int("outstanding", outstanding, least=1, most=1024)
        if queue_depth is None:
            queue_depth = outstanding
        check_int("queue_depth", queue_depth, least=1, most=1 << 16)
        check_int("read_latency", read_latency, least=1, most=1 << 20)
        if max_reads is None:
            max_reads = read_latency + ROUND_TRIP
        check_int("max_reads", max_reads, least=1, most=1 << 20)
        self.hbm_size, self.hbm_line_words = hbm_size, hbm_line_words
        self.vmem_lines, self.lanes = vmem_lines, lanes
        self.vmem_size = vmem_lines * lanes
        self.n_flags, self.outstanding, self.queue_depth = n_flags, outstanding, queue_depth
        self.n_chips, self.flit_words, self.max_payload = n_chips, flit_words, max_payload
        self.push_ports, self.push_beats = push_ports, push_beats
        self.push_dealing = push_dealing
        self.read_latency, self.max_reads = read_latency, max_reads
        self.beat_queue = check_bool("beat_queue", beat_queue)
        self.port_signatures = {
            0: MemoryPortSignature(addr_width=line_addr_width(hbm_size // hbm_line_words),
                                   words=hbm_line_words, mask_granularity=WORD_BITS),
            1: MemoryPortSignature(addr_width=line_addr_width(vmem_lines), words=lanes,
                                   mask_granularity=WORD_BITS),
        }
        self._check_littles_law()
        super().__init__({
            "descriptors": In(stream.Signature(descriptor_layout)),
            "hbm": Out(self.port_signatures[0]),
            "vmem": Out(self.port_signatures[1]),
            "flag_add": Out(stream.Signature(flag_add_layout)),
            "sent_add": Out(stream.Signature(flag_add_layout)),
            **{port_name("push", j): Out(stream.Signature(flit_layout(flit_words)))
               for j in range(push_ports)},
            "chip": In(CHIP_BITS),
            "errors": Out(stream.Signature(error_layout)),
            "idle": Out(1),
            "received": Out(COUNT_BITS), "completed": Out(COUNT_BITS),
            "rejected": Out(COUNT_BITS), "bus_errors": Out(COUNT_BITS),
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
        m.submodules.check = check = DescriptorCheck(
            hbm_size=self.hbm_size, vmem_size=self.vmem_size, n_flags=self.n_flags,
            n_chips=self.n_chips, queue_depth=self.queue_depth)
        m.submodules.addrgen = addrgen = AddressGenerator(
            line_words=(self.hbm_line_words, self.lanes), outstanding=self.outstanding)
        m.submodules.burst = burst = BurstEngine(
            ports=self.port_signatures, read_latency=self.read_latency,
            max_reads=self.max_reads)

        wiring.connect(m, wiring.flipped(self.descriptors), check.descriptors)
        wiring.connect(m, check.jobs, addrgen.jobs)
        wiring.connect(m, addrgen.inflight, burst.inflight)
        if self.beat_queue:
            m.submodules.beat_queue = queue = StreamQueue(shape=addrgen.beats.payload.shape(),
                                                          depth=2)
            wiring.connect(m, addrgen.beats, queue.i)
            wiring.connect(m, queue.o, burst.beats)
            # A beat in the queue may write what a later read needs: not drained yet.
            m.d.comb += addrgen.drained.eq(burst.drained & ~queue.o.valid)
        else:
            wiring.connect(m, addrgen.beats, burst.beats)
            m.d.comb += addrgen.drained.eq(burst.drained)
        wiring.connect(m, burst.hbm, wiring.flipped(self.hbm))
        wiring.connect(m, burst.vmem, wiring.flipped(self.vmem))
        wiring.connect(m, burst.flag_add, wiring.flipped(self.flag_add))
        m.submodules.push_ports = push_ports = PushPorts(
            ports=self.push_ports, max_words=burst.max_words, flit_words=self.flit_words,
            max_payload=self.max_payload, beats=self.push_beats, dealing=self.push_dealing)
        wiring.connect(m, burst.pushed, push_ports.beats_in)
        for j in range(self.push_ports):
            wiring.connect(m, port(push_ports, "push", j), wiring.flipped(port(self, "push", j)))
        m.d.comb += push_ports.chip.eq(self.chip)
        # A push completes when its last flit has left; only a named sent flag is added.
        pushed = push_ports.done
        m.d.comb += [
            self.sent_add.valid.eq(pushed.valid & pushed.payload.sent),
            self.sent_add.payload.eq(pushed.payload.add),
            pushed.ready.eq(~pushed.payload.sent | self.sent_add.ready),
        ]

        # Two error sources, one stream: the choice is held while an offer waits, so the
        # payload stays put until taken. Rejections go first when both offer at once.
        held = Signal()
        pick_bus = Signal()
        bus_first = Signal()
        m.d.comb += pick_bus.eq(Mux(held, bus_first, ~check.errors.valid))
        m.d.comb += [
            self.errors.valid.eq(check.errors.valid | burst.bus_errors.valid),
            self.errors.payload.eq(Mux(pick_bus, burst.bus_errors.payload,
                                       check.errors.payload)),
            check.errors.ready.eq(self.errors.ready & ~pick_bus),
            burst.bus_errors.ready.eq(self.errors.ready & pick_bus),
        ]
        m.d.sync += [held.eq(self.errors.valid & ~self.errors.ready), bus_first.eq(pick_bus)]

        def count(counter, event):
            with m.If(event):
                m.d.sync += counter.eq(counter + 1)

        count(self.received, self.descriptors.valid & self.descriptors.ready)
        local_done = self.flag_add.valid & self.flag_add.ready
        push_done = pushed.valid & pushed.ready
        with m.If(local_done | push_done):
            m.d.sync += self.completed.eq(self.completed + local_done + push_done)
        count(self.rejected, check.errors.valid & check.errors.ready)
        count(self.bus_errors, burst.bus_errors.valid & burst.bus_errors.ready)
        m.d.comb += self.idle.eq(check.idle & ~addrgen.busy & ~addrgen.inflight.valid
                                 & burst.drained
                                 & ~self.hbm.req.valid & ~self.vmem.req.valid
                                 & ~self.flag_add.valid & ~self.errors.valid
                                 & push_ports.idle)
        return m
