"""Several initiators that read and write on one memory port (a chip's HBM shared by its DMA
engine and its SparseCore)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..lib.memory_port import MemoryPortSignature
from ..lib.params import check_int

__all__ = ["PortShare"]


class PortShare(wiring.Component):
    """Shares a memory port among ``initiators`` initiators that may all read and write.

    Requests: round robin among the initiators offering one, starting after the last one
    taken; an offer that waits holds, so the request the memory sees stays until it is
    taken. Responses come back in request order, so a FIFO of the initiators whose reads
    are in flight (``depth`` of them) routes each to its initiator; while it is full, no
    read is offered. An initiator's own requests keep their order, reads and writes alike,
    and an initiator sees its responses in its own request order.

    Parameters
    ----------
    signature : MemoryPortSignature
        Every initiator's and the memory's.
    initiators : int
        At least 1.
    depth : int
        Reads in flight at most (default 16): enough to cover the memory's latency times
        its rate, or reads wait.

    Ports
    -----
    initiators : In(signature).array(initiators)
    memory : Out(signature)

    Latency: none on the request path (combinational); responses pass combinationally.
    Throughput: one request a cycle, any initiator.
    """

    def __init__(self, *, signature, initiators=2, depth=16):
        if not isinstance(signature, MemoryPortSignature):
            raise TypeError(f"signature must be a MemoryPortSignature, not {signature!r}")
        self.n = check_int("initiators", initiators, least=1)
        self.depth = check_int("depth", depth, least=1)
        super().__init__({"initiators": In(signature).array(initiators),
                          "memory": Out(signature)})

    def elaborate(self, platform):
        m = Module()
        n = self.n
        reqs = [port.req for port in self.initiators]
        memory = self.memory
        m.submodules.owners = owners = SyncFIFO(width=max(1, (n - 1).bit_length()),
                                                depth=self.depth)
        turn = Signal(range(n))                  # the first initiator to consider
        held = Signal()                          # the last cycle's offer was not taken
        last = Signal(range(n))                  # ... and whose it was
        pick = Signal(range(n))
        # Round robin from `turn`: the highest priority is assigned last.
        with m.If(held):
            m.d.comb += pick.eq(last)
        with m.Else():
            for k in reversed(range(n)):
                for i in range(n):
                    with m.If((turn == i) & reqs[(i + k) % n].valid):
                        m.d.comb += pick.eq((i + k) % n)
        offered = Signal()
        chosen_valid = Signal()
        chosen_write = Signal()
        for i, req in enumerate(reqs):
            with m.If(pick == i):
                m.d.comb += [chosen_valid.eq(req.valid), chosen_write.eq(req.payload.write),
                             memory.req.payload.eq(req.payload)]
        m.d.comb += [
            offered.eq(chosen_valid & (chosen_write | owners.w_rdy)),
            memory.req.valid.eq(offered),
            owners.w_data.eq(pick),
            owners.w_en.eq(offered & memory.req.ready & ~chosen_write),
        ]
        for i, req in enumerate(reqs):
            m.d.comb += req.ready.eq(memory.req.ready & offered & (pick == i))
        m.d.sync += [held.eq(offered & ~memory.req.ready), last.eq(pick)]
        with m.If(offered & memory.req.ready):
            m.d.sync += turn.eq(Mux(pick == n - 1, 0, pick + 1))

        # Responses, to the initiator at the head of the FIFO.
        head = owners.r_data
        for i, port in enumerate(self.initiators):
            m.d.comb += [port.resp.valid.eq(memory.resp.valid & owners.r_rdy & (head == i)),
                         port.resp.payload.eq(memory.resp.payload)]
            with m.If(head == i):
                m.d.comb += memory.resp.ready.eq(port.resp.ready & owners.r_rdy)
        m.d.comb += owners.r_en.eq(memory.resp.valid & memory.resp.ready)
        return m
