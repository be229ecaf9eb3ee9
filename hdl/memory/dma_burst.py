"""The DMA's burst engine: elements in, reads and writes out on the memory ports."""

import types

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.memory_port import WORD_BITS, MemoryPortSignature, check_int
from .dma_addrgen import element_layout, inflight_layout
from .layouts import ADDRESS_BITS, error_layout, flag_add_layout, reason_code

__all__ = ["BurstEngine", "ROUND_TRIP"]

#: Cycles a read holds its credit beyond the memory's read latency: into the request
#: register, accepted by the memory, its response into the response queue, out of it
#: with the write issued, and the credit seen free.
ROUND_TRIP = 3

_pending_layout = data.StructLayout({
    "src_space": 1, "src_addr": unsigned(ADDRESS_BITS),
    "dst_space": 1, "dst_addr": unsigned(ADDRESS_BITS), "last": 1,
})


def _log2(value):
    return value.bit_length() - 1


class BurstEngine(wiring.Component):
    """Moves elements one word a cycle: a read on the source space's port, then, when its
    line returns, a one-word masked write on the destination space's port.

    **Reads in flight.** Reads are issued ahead of the writes, in element order, up to
    ``max_reads`` whose writes are not yet issued. By Little's law the reads in flight
    equal throughput times latency, so one element a cycle needs
    ``max_reads >= read_latency + ROUND_TRIP``, where ``read_latency`` is the slowest
    memory's (jitter included) and :data:`ROUND_TRIP` the engine's own cycles; the
    constructor and ``elaborate`` both enforce it.

    **Order.** Each port has one request register, so a memory sees requests in the order
    they are issued. A read with ``fence`` set waits until no element's write is pending
    (see :class:`~hdl.memory.dma_addrgen.AddressGenerator`). A write has priority over a
    read for its port.

    **Completion.** A descriptor's last write leaves ``last`` set; when its memory accepts
    it, ``flag_add`` offers (flag, words) from the ``inflight`` entry, taken when the last
    write was issued. One last write is in flight at a time, so adds never collide.

    **Bus errors.** A line answered with ``error`` is written with an empty mask (nothing
    changes), and ``bus_errors`` reports the descriptor id and the source word address.
    The element otherwise completes, so nothing waits for it.

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
    elements : In(stream.Signature(element_layout))
    inflight : In(stream.Signature(inflight_layout))
    hbm, vmem : Out(MemoryPortSignature)
    flag_add : Out(stream.Signature(flag_add_layout))
    bus_errors : Out(stream.Signature(error_layout))
    drained : Out(1)
        No element's write is pending.

    Latency: an element taken in cycle ``t`` is requested from its memory from ``t + 1``;
    its write is issued the cycle after its response arrives and requested a cycle later.
    """

    def __init__(self, *, ports, read_latency, max_reads=None):
        if set(ports) != {0, 1}:
            raise ValueError("ports must map space codes 0 (hbm) and 1 (vmem) to signatures")
        for space, sig in ports.items():
            if not isinstance(sig, MemoryPortSignature):
                raise TypeError(f"port {space} must be a MemoryPortSignature, not {sig!r}")
            if sig.words & (sig.words - 1) or sig.mask_granularity != WORD_BITS:
                raise ValueError(f"port {space} needs a power-of-two line and a mask per word")
        check_int("read_latency", read_latency, least=1)
        if max_reads is None:
            max_reads = read_latency + ROUND_TRIP
        check_int("max_reads", max_reads, least=1)
        self.ports = dict(ports)
        self.read_latency = read_latency
        self.max_reads = max_reads
        self._check_littles_law()
        super().__init__({
            "elements": In(stream.Signature(element_layout)),
            "inflight": In(stream.Signature(inflight_layout)),
            "hbm": Out(ports[0]),
            "vmem": Out(ports[1]),
            "flag_add": Out(stream.Signature(flag_add_layout)),
            "bus_errors": Out(stream.Signature(error_layout)),
            "drained": Out(1),
        })

    def _check_littles_law(self):
        need = self.read_latency + ROUND_TRIP
        if self.max_reads < need:
            raise ValueError(f"max_reads ({self.max_reads}) cannot cover read_latency "
                             f"({self.read_latency}): one word a cycle needs at least "
                             f"read_latency + {ROUND_TRIP} = {need} reads in flight")

    def elaborate(self, platform):
        self._check_littles_law()
        m = Module()
        ports = {0: self.hbm, 1: self.vmem}

        m.submodules.pending = pending = fifo.SyncFIFO(width=_pending_layout.size,
                                                      depth=self.max_reads)
        head = data.View(_pending_layout, pending.r_data)
        spaces = {}
        for s, port in ports.items():
            sig = self.ports[s]
            fifo_ = fifo.SyncFIFO(width=sig.response_layout.size, depth=self.max_reads)
            m.submodules[f"responses{s}"] = fifo_
            # Credits guarantee room for every response: w_rdy is always high in use.
            m.d.comb += [fifo_.w_en.eq(port.resp.valid), fifo_.w_data.eq(port.resp.payload),
                         port.resp.ready.eq(fifo_.w_rdy)]
            slot = types.SimpleNamespace(
                valid=Signal(name=f"slot{s}_valid"),
                payload=Signal(sig.request_layout, name=f"slot{s}"),
                last=Signal(name=f"slot{s}_last"))
            m.d.comb += [port.req.valid.eq(slot.valid), port.req.payload.eq(slot.payload)]
            spaces[s] = types.SimpleNamespace(
                sig=sig, port=port, responses=fifo_, slot=slot,
                free=~slot.valid | port.req.ready,
                resp=data.View(sig.response_layout, fifo_.r_data))

        # ---- write side: the oldest pending element, once its line has returned.
        src_ready = Mux(head.src_space, spaces[1].responses.r_rdy, spaces[0].responses.r_rdy)
        word = Signal(WORD_BITS)
        error = Signal()
        for s, sp in spaces.items():
            with m.If(head.src_space == s):
                lane = head.src_addr[:_log2(sp.sig.words)] if sp.sig.words > 1 else 0
                m.d.comb += [word.eq(sp.resp.data.as_value().word_select(lane, WORD_BITS)),
                             error.eq(sp.resp.error)]
        dst_free = Mux(head.dst_space, spaces[1].free, spaces[0].free)

        last_busy = Signal()      # a last write issued, its flag add not yet taken
        last_info = Signal(flag_add_layout)
        bus = self.bus_errors
        write = Signal()
        m.d.comb += write.eq(pending.r_rdy & src_ready & dst_free
                             & (~head.last | (~last_busy & self.inflight.valid))
                             & (~error | ~bus.valid))
        m.d.comb += pending.r_en.eq(write)
        for s, sp in spaces.items():
            m.d.comb += sp.responses.r_en.eq(write & (head.src_space == s))
        with m.If(write & head.last):
            m.d.comb += self.inflight.ready.eq(1)
            m.d.sync += [last_busy.eq(1), last_info.flag.eq(self.inflight.payload.flag),
                         last_info.amount.eq(self.inflight.payload.words)]
        with m.If(bus.valid & bus.ready):
            m.d.sync += bus.valid.eq(0)
        with m.If(write & error):
            m.d.sync += [bus.valid.eq(1), bus.payload.id.eq(self.inflight.payload.id),
                         bus.payload.reason.eq(reason_code("bus")),
                         bus.payload.address.eq(head.src_addr)]

        # ---- read side: the next element, if a credit is free and it is not fenced off.
        elem = self.elements.payload
        read = Signal()
        src_free = Mux(elem.src_space, spaces[1].free, spaces[0].free)
        write_takes = write & (head.dst_space == elem.src_space)
        m.d.comb += [
            read.eq(self.elements.valid & pending.w_rdy & (~elem.fence | (pending.level == 0))
                    & src_free & ~write_takes),
            self.elements.ready.eq(read),
            pending.w_en.eq(read),
        ]
        entry = Signal(_pending_layout)
        m.d.comb += [entry.src_space.eq(elem.src_space), entry.src_addr.eq(elem.src_addr),
                     entry.dst_space.eq(elem.dst_space), entry.dst_addr.eq(elem.dst_addr),
                     entry.last.eq(elem.last), pending.w_data.eq(entry)]
        m.d.comb += self.drained.eq(pending.level == 0)

        # ---- the request registers, and completion when a last write is accepted.
        done = self.flag_add
        m.d.comb += done.payload.eq(last_info)
        with m.If(done.valid & done.ready):
            m.d.sync += [done.valid.eq(0), last_busy.eq(0)]
        for s, sp in spaces.items():
            shift = _log2(sp.sig.words)
            slot = sp.slot
            with m.If(sp.port.req.valid & sp.port.req.ready):
                m.d.sync += slot.valid.eq(0)
                with m.If(slot.last):
                    m.d.sync += done.valid.eq(1)
            with m.If(write & (head.dst_space == s)):
                lane = head.dst_addr[:shift] if shift else 0
                onehot = Cat(*[lane == j for j in range(sp.sig.words)])
                m.d.sync += [
                    slot.valid.eq(1), slot.last.eq(head.last),
                    slot.payload.addr.eq(head.dst_addr >> shift),
                    slot.payload.write.eq(1),
                    slot.payload.data.as_value().eq(Cat(*[word] * sp.sig.words)),
                    slot.payload.mask.eq(Mux(error, 0, onehot)),
                ]
            with m.Elif(read & (elem.src_space == s)):
                m.d.sync += [
                    slot.valid.eq(1), slot.last.eq(0),
                    slot.payload.addr.eq(elem.src_addr >> shift),
                    slot.payload.write.eq(0),
                    slot.payload.mask.eq(0),
                ]
        return m
