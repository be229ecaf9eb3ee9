# amaranth: UnusedElaboratable=no
# (The parts are made here and used by this component's elaborate: if the system itself is
# never elaborated, the warning about it, from its creator's file, is the one that counts;
# and a part made before a later part's bad parameter raised need not warn too.)
"""One chip's memory system: DMA, receive engine, HBM model, VMEM and sync flags, as one
component."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..ici.layouts import flit_layout
from ..lib.memory_port import MemoryPortSignature, line_addr_width, window_members
from ..lib.numbered_ports import port, port_name
from .dma import COUNT_BITS, DMA
from .dma_push import DEFAULT_MAX_PAYLOAD
from .dma_push_ports import DEFAULT_PUSH_BEATS
from .dma_receive import Receiver
from .hbm import HBM
from .layouts import (CHIP_BITS, descriptor_layout, error_layout, flag_add_layout,
                      flag_set_layout, flag_wait_layout)
from .port_merge import WriterMerge
from .port_share import PortShare
from .sync_flags import SyncFlags
from .vmem import VMEM
from ..lib.params import check_int

__all__ = ["DmaSystem", "core_signature", "STAMPS"]

#: The cycle-stamp outputs of a :class:`DmaSystem`, and their width.
STAMPS = ("first_taken", "first_request", "first_read", "last_read", "first_write",
          "last_write", "last_flag")
STAMP_BITS = 32


def core_signature(*, vmem_lines, lanes, vmem_window=0):
    """What the core holds: its VMEM port (and with ``vmem_window`` its port to VMEM's
    window of that many lines), flag set and flag wait, and ``waiting``."""
    return wiring.Signature({
        "vmem": Out(MemoryPortSignature(addr_width=line_addr_width(vmem_lines), words=lanes)),
        **window_members("vmem_window", lines=vmem_lines, lanes=lanes, window=vmem_window),
        "flag_set": Out(stream.Signature(flag_set_layout)),
        "flag_wait": Out(stream.Signature(flag_wait_layout)),
        "waiting": In(1),
    })


class DmaSystem(wiring.Component):
    """A :class:`~hdl.memory.dma.DMA` and a :class:`~hdl.memory.dma_receive.Receiver` per
    network port, joined to an :class:`~hdl.memory.hbm.HBM`, a :class:`~hdl.memory.vmem.VMEM`
    and :class:`~hdl.memory.sync_flags.SyncFlags`.

    A batch runs as: load ``hbm_words`` and ``vmem_words``, play descriptors into
    ``descriptors``, take ``errors``, wait until ``finished``, then read back the memories
    and ``flags``. That equals ``golden.memory.run`` on the same images and batch (without
    injected faults).

    **Remote pushes.** A push's packets leave on ``push``; packets arriving on ``receive``
    are landed here by the receive engine, whose writes take turns with the DMA's on each
    memory port (:class:`~hdl.memory.port_merge.WriterMerge`). Chips joined so (``push`` of
    one to ``receive`` of the chip each packet names, in order) end as
    ``golden.memory.run`` on each chip followed by ``golden.memory.land`` of the pushes
    for it, in order, provided no landed word is read or written by another descriptor
    of the batches (the receiving chip's included) or landed by a push from another
    chip: the order between those is not defined. ``finished`` says that this chip has
    sent everything and landed everything it has received; the packets still on their
    way are the network's to count.

    **Several ports.** With ``network_ports = k`` above 1 the chip has ``k`` push ports
    (the DMA deals its pushes to them in turn) and ``k`` receive ports, each with its own
    receive engine. Each memory port is shared through a chain of merges: the DMA and
    receive engine 0 in the first, whose port and receive engine j meet in merge j, so
    under contention engine ``k - 1`` has every other request and the earlier ones share
    the rest. Pushes
    that leave on different ports, and packets that arrive on different ports, may land
    in either order: the result above holds when no two pushes to a chip write the same
    word.

    Parameters
    ----------
    hbm_size : int
        HBM words (default 1024).
    words_per_cycle, read_latency, max_outstanding, jitter, error_ranges
        The HBM model's (:class:`~hdl.memory.hbm.HBM`); ``max_outstanding`` defaults to
        ``words_per_cycle * (read_latency + jitter)``.
    vmem_lines, lanes : int
        VMEM geometry (default 64 lines of 8 lanes).
    ram_ports : int
        Ports of the VMEM's storage (:class:`~hdl.memory.vmem.VMEM`'s): 2 (the default),
        or 1 for FPGA block RAM, the core's and the DMA's accesses in turns.
    vmem_window : int
        0 (the default), or the lines of the core's ``vmem_window`` port (with
        ``ram_ports=2``): the VMEM's ``window`` port, writes too
        (:class:`~hdl.memory.vmem.VMEM`'s ``window`` and ``window_writes``), for the VPU's
        whole-vreg ``vld`` and ``vst``.
    n_flags, n_chips, flit_words, max_payload, outstanding, queue_depth, max_reads, \
beat_queue
        The DMA's (:class:`~hdl.memory.dma.DMA`); the DMA covers ``read_latency + jitter``.
        ``n_chips`` and ``flit_words`` are the receive engines' too.
    network_ports : int
        Push ports and receive ports, 1 to 6, or 5 with a guest (the flag bank has 8 adders:
        the DMA's two, one a receive engine, one a guest), default 1: the DMA's ``push_ports``.
    push_beats, push_dealing
        The DMA's.
    guests : int
        Other initiators on the HBM, 0 (the default) or 1 (a SparseCore): with 1, the
        ``guest_hbm`` port shares the HBM with the DMA and receive engines (a
        :class:`~hdl.memory.port_share.PortShare`, turn by turn) and ``guest_flag`` adds to
        the flags.

    Ports
    -----
    descriptors : In(stream.Signature(descriptor_layout))
    errors : Out(stream.Signature(error_layout))
    push, push1, ... : Out(stream.Signature(flit_layout(flit_words)))
        Packets of pushes, to the router's injection ports.
    receive, receive1, ... : In(stream.Signature(flit_layout(flit_words)))
        Packets for this chip, from the router's ejection ports.
    chip : In(8)
        This chip's id: the source of its packets, and the destination it accepts.
    core : In(core_signature(...))
        The core's VMEM port and flag operations (not a stream port, so a whole-run
        harness leaves it idle).
    seed : In(32)
        Seed of the HBM jitter, loaded until the first descriptor is taken.
    guest_hbm : In(MemoryPortSignature(addr_width, words=words_per_cycle)), with ``guests=1``
    guest_flag : In(stream.Signature(flag_add_layout)), with ``guests=1``
    idle, received, completed, rejected, bus_errors : Out
        The DMA's status (:class:`~hdl.memory.dma.DMA`).
    landed, malformed : Out(32)
        Packets landed, and malformed packets dropped, by the receive engines.
    busy : Out(1)
        A memory request or response, or a flag add, moved this cycle: the DMA or the
        receive engine is making progress even while no stream of this component moves
        (a whole run's watchdog watches it).
    finished : Out(1)
        Every descriptor taken so far is completed or rejected, nothing is in flight, its
        error records and packets included, and the receive engine holds no packet: a
        batch is over once all are sent, and all this chip is sent has arrived.
    first_taken, first_request, first_read, last_read, first_write, last_write, last_flag \
    : Out(32)
        Cycle stamps, from a counter that starts at 0 after reset, for measuring a run:
        the first descriptor taken, the first cycle the DMA offers a memory request, the
        first and the latest read accepted by a memory, the same for writes, and the
        first cycle the latest flag add shows in ``flags``. ``first_request -
        first_taken`` is the latency from a descriptor accepted to its first request;
        ``last_flag - last_write`` from the last write to its flag visible; the read and
        write spans give the rate at which a batch streams.
    write_fault : Out(1)
        The HBM dropped a write to an error range.
    flags : Out(ArrayLayout(32, n_flags))
        Every flag's value.

    Attributes
    ----------
    hbm_words, vmem_words : MemoryData
        The HBM and VMEM storages (entry = line, word ``j`` in bits ``32*j ..``).
    """

    def __init__(self, *, hbm_size=1024, vmem_lines=64, lanes=8, words_per_cycle=1,
                 read_latency=4, max_outstanding=None, jitter=0, error_ranges=(), n_flags=16,
                 n_chips=1, flit_words=1, max_payload=DEFAULT_MAX_PAYLOAD, network_ports=1,
                 push_beats=DEFAULT_PUSH_BEATS, outstanding=4, queue_depth=None,
                 max_reads=None, guests=0, ram_ports=2, push_dealing="turn", vmem_window=0,
                 beat_queue=False):
        check_int("read_latency", read_latency, least=1)
        check_int("jitter", jitter, least=0)
        check_int("words_per_cycle", words_per_cycle, least=1)
        # Adders: the DMA's completions, its pushes' sent flags, one per receive engine, one
        # per guest: the flag bank has 8.
        check_int("guests", guests, least=0, most=1)
        check_int("network_ports", network_ports, least=1, most=6 - guests)
        if max_outstanding is None:
            max_outstanding = words_per_cycle * (read_latency + jitter)
        self.hbm = HBM(size=hbm_size, words_per_cycle=words_per_cycle,
                       read_latency=read_latency, max_outstanding=max_outstanding,
                       jitter=jitter, error_ranges=error_ranges)
        check_int("vmem_window", vmem_window, least=0)
        if vmem_window and ram_ports == 1:
            raise ValueError(f"vmem_window={vmem_window} needs VMEM ports of its own, which "
                             f"ram_ports=1 does not have: use vmem_window=0")
        self.vmem = VMEM(lines=vmem_lines, lanes=lanes, ram_ports=ram_ports, window=vmem_window,
                         window_writes=bool(vmem_window))
        self.dma = DMA(hbm_size=hbm_size, hbm_line_words=words_per_cycle, vmem_lines=vmem_lines,
                       lanes=lanes, n_flags=n_flags, n_chips=n_chips, flit_words=flit_words,
                       max_payload=max_payload, push_ports=network_ports,
                       push_beats=push_beats, push_dealing=push_dealing,
                       outstanding=outstanding,
                       queue_depth=queue_depth, read_latency=read_latency + jitter,
                       max_reads=max_reads, beat_queue=beat_queue)
        self.network_ports = network_ports
        self.receivers = [Receiver(ports=self.dma.port_signatures,
                                   sizes=(hbm_size, self.dma.vmem_size), n_flags=n_flags,
                                   n_chips=n_chips, flit_words=flit_words)
                          for _ in range(network_ports)]
        # Per space, a chain: the DMA and receiver 0 meet in merge 0, whose port meets
        # receiver j in merge j.
        self.merges = {space: [WriterMerge(signature=sig) for _ in range(network_ports)]
                       for space, sig in self.dma.port_signatures.items()}
        self.guests = guests
        self.hbm_signature = self.dma.port_signatures[0]
        self.sync_flags = SyncFlags(n_flags=n_flags, add_ports=2 + network_ports + guests)
        self.hbm_words = self.hbm.words
        self.vmem_words = self.vmem.words
        # What a whole run may load and read back (sim.blocks.memory_images).
        self.memory_images = {"hbm": (self.hbm_words, "hbm.words"),
                              "vmem": (self.vmem_words, "vmem.words")}
        self.n_flags = n_flags
        guest = {}
        if guests:
            guest = {"guest_hbm": In(self.hbm_signature),
                     "guest_flag": In(stream.Signature(flag_add_layout))}
        super().__init__({
            **guest,
            "descriptors": In(stream.Signature(descriptor_layout)),
            "errors": Out(stream.Signature(error_layout)),
            **{port_name("push", j): Out(stream.Signature(flit_layout(flit_words)))
               for j in range(network_ports)},
            **{port_name("receive", j): In(stream.Signature(flit_layout(flit_words)))
               for j in range(network_ports)},
            "chip": In(CHIP_BITS),
            "core": In(core_signature(vmem_lines=vmem_lines, lanes=lanes,
                                      vmem_window=vmem_window)),
            "seed": In(32),
            "idle": Out(1), "finished": Out(1), "busy": Out(1),
            "received": Out(COUNT_BITS), "completed": Out(COUNT_BITS),
            "rejected": Out(COUNT_BITS), "bus_errors": Out(COUNT_BITS),
            "landed": Out(COUNT_BITS), "malformed": Out(COUNT_BITS),
            "write_fault": Out(1),
            "flags": Out(data.ArrayLayout(32, n_flags)),
            **{name: Out(STAMP_BITS) for name in STAMPS},
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.dma = dma = self.dma
        m.submodules.hbm = hbm = self.hbm
        m.submodules.vmem = vmem = self.vmem
        m.submodules.flags = flags = self.sync_flags
        wiring.connect(m, wiring.flipped(self.descriptors), dma.descriptors)
        wiring.connect(m, dma.errors, wiring.flipped(self.errors))
        m.d.comb += dma.chip.eq(self.chip)
        wiring.connect(m, dma.flag_add, flags.add)
        wiring.connect(m, dma.sent_add, flags.add1)
        initiators = {0: dma.hbm, 1: dma.vmem}
        for j, receiver in enumerate(self.receivers):
            m.submodules[f"receiver{j}"] = receiver
            wiring.connect(m, port(dma, "push", j), wiring.flipped(port(self, "push", j)))
            wiring.connect(m, wiring.flipped(port(self, "receive", j)), receiver.flits)
            m.d.comb += receiver.chip.eq(self.chip)
            wiring.connect(m, receiver.flag_add, getattr(flags, flags.add_names[2 + j]))
            for space, name in ((0, "hbm"), (1, "vmem")):
                merge = self.merges[space][j]
                m.submodules[f"{name}_merge{j}"] = merge
                wiring.connect(m, initiators[space], merge.main)
                wiring.connect(m, getattr(receiver, name), merge.writer)
                initiators[space] = merge.memory
        if self.guests:
            m.submodules.hbm_share = share = PortShare(
                signature=self.hbm_signature, initiators=2, depth=self.hbm.slots + 1)
            wiring.connect(m, initiators[0], share.initiators[0])
            wiring.connect(m, wiring.flipped(self.guest_hbm), share.initiators[1])
            wiring.connect(m, share.memory, hbm.port)
            wiring.connect(m, wiring.flipped(self.guest_flag),
                           getattr(flags, flags.add_names[-1]))
        else:
            wiring.connect(m, initiators[0], hbm.port)
        wiring.connect(m, initiators[1], vmem.dma)
        wiring.connect(m, wiring.flipped(self.core.vmem), vmem.core)
        if vmem.window_lines:
            wiring.connect(m, wiring.flipped(self.core.vmem_window), vmem.window)
        wiring.connect(m, wiring.flipped(self.core.flag_set), flags.set)
        wiring.connect(m, wiring.flipped(self.core.flag_wait), flags.wait)

        # The jitter sequence starts with the first descriptor, so a run's jitter depends
        # only on the seed and the cycles since then.
        running = Signal()
        with m.If(self.descriptors.valid & self.descriptors.ready):
            m.d.sync += running.eq(1)
        m.d.comb += [
            hbm.seed.eq(self.seed), hbm.start.eq(running),
            self.core.waiting.eq(flags.waiting),
            self.idle.eq(dma.idle),
            self.finished.eq(dma.idle & (dma.received == dma.completed + dma.rejected)
                             & Cat(*(receiver.idle for receiver in self.receivers)).all()),
            self.busy.eq(Cat(*[handshake.valid & handshake.ready for handshake in (
                hbm.port.req, hbm.port.resp, vmem.dma.req, vmem.dma.resp, dma.flag_add,
                dma.sent_add, *(receiver.flag_add for receiver in self.receivers),
                *([self.guest_flag] if self.guests else []))]).any()),
            self.landed.eq(sum(receiver.packets for receiver in self.receivers)[:COUNT_BITS]),
            self.malformed.eq(
                sum(receiver.malformed for receiver in self.receivers)[:COUNT_BITS]),
            self.received.eq(dma.received), self.completed.eq(dma.completed),
            self.rejected.eq(dma.rejected), self.bus_errors.eq(dma.bus_errors),
            self.write_fault.eq(hbm.write_fault),
            self.flags.eq(flags.values),
        ]
        self._stamp(m, dma, flags)
        return m

    def _stamp(self, m, dma, flags):
        now = Signal(STAMP_BITS)
        m.d.sync += now.eq(now + 1)
        ports = (dma.hbm.req, dma.vmem.req)
        reads = Cat(*[req.valid & req.ready & ~req.payload.write for req in ports]).any()
        writes = Cat(*[req.valid & req.ready & req.payload.write for req in ports]).any()
        events = {
            "first_taken": self.descriptors.valid & self.descriptors.ready,
            "first_request": Cat(*[req.valid for req in ports]).any(),
            "first_read": reads, "first_write": writes,
        }
        for name, event in events.items():
            seen = Signal(name=f"{name}_seen")
            with m.If(event & ~seen):
                m.d.sync += [seen.eq(1), getattr(self, name).eq(now)]
        with m.If(reads):
            m.d.sync += self.last_read.eq(now)
        with m.If(writes):
            m.d.sync += self.last_write.eq(now)
        with m.If(flags.add.valid & flags.add.ready):
            # The bank registers the add: it shows from the next cycle.
            m.d.sync += self.last_flag.eq(now + 1)
