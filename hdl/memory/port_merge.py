"""Two initiators on one memory port: the DMA, and a writer that only writes (the receive
engine)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..lib.memory_port import MemoryPortSignature

__all__ = ["WriterMerge"]


class WriterMerge(wiring.Component):
    """Shares a memory port between ``main``, which reads and writes, and ``writer``, which
    only writes, so every response belongs to ``main``.

    When both offer a request, they take turns (round robin), so neither waits more than
    one request for the other; an offer that waits keeps its turn, so the request the
    memory sees holds until taken. While ``writer`` is idle, ``main`` passes straight
    through, cycle for cycle; ``main.req.ready`` also depends on ``writer.req.valid``.

    Parameters
    ----------
    signature : MemoryPortSignature

    Ports
    -----
    main, writer : In(signature)
        The initiators. ``writer.resp`` never offers anything: a read on ``writer`` would
        be answered to ``main``, so it must issue none.
    memory : Out(signature)
        To the memory.

    Latency: none (combinational).
    """

    def __init__(self, *, signature):
        if not isinstance(signature, MemoryPortSignature):
            raise TypeError(f"signature must be a MemoryPortSignature, not {signature!r}")
        super().__init__({"main": In(signature), "writer": In(signature),
                          "memory": Out(signature)})

    def elaborate(self, platform):
        m = Module()
        main, writer, memory = self.main.req, self.writer.req, self.memory.req
        turn = Signal()                          # 1: the writer goes first when both offer
        held = Signal()                          # the last cycle's offer was not taken
        chosen = Signal()                        # ... and was the writer's
        pick = Signal()                          # the writer's request is offered
        m.d.comb += [
            pick.eq(Mux(held, chosen, writer.valid & (~main.valid | turn))),
            memory.valid.eq(main.valid | writer.valid),
            memory.payload.eq(Mux(pick, writer.payload, main.payload)),
            main.ready.eq(memory.ready & ~pick),
            writer.ready.eq(memory.ready & pick),
        ]
        m.d.sync += [held.eq(memory.valid & ~memory.ready), chosen.eq(pick)]
        with m.If(memory.valid & memory.ready):
            m.d.sync += turn.eq(~pick)
        m.d.comb += [self.main.resp.valid.eq(self.memory.resp.valid),
                     self.main.resp.payload.eq(self.memory.resp.payload),
                     self.memory.resp.ready.eq(self.main.resp.ready),
                     self.writer.resp.valid.eq(0)]
        return m
