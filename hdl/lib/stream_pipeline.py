"""Stream ports around a fixed-latency, clock-enabled pipeline core."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["StreamPipeline"]


class StreamPipeline(wiring.Component):
    """Give a pipeline core ``operands`` and ``result`` streams.

    The core is a component with ``In`` operand ports, an ``In(1)`` port
    ``en`` (all its registers advance when high), an ``Out`` port ``result``
    and a ``latency`` attribute. This wrapper carries a valid bit alongside
    the core's registers and stalls everything when a result is waiting and
    the consumer is not ready.

    Ports
    -----
    operands : In(stream.Signature(StructLayout))
        One field per operand port of the core.
    result : Out(stream.Signature(result width))

    Latency is the core's ``latency``; throughput one operation per cycle while
    ``result.ready`` is high. When ``result`` is valid and not ready, the
    pipeline and ``operands.ready`` hold, so nothing is lost, duplicated or
    reordered. Bubbles in the input travel through as bubbles; they are not
    squeezed out during a stall.
    """

    def __init__(self, core):
        self._core = core
        ports = core.signature.members
        self._operand_names = [name for name, member in ports.items()
                               if member.flow == In and name != "en"]
        layout = data.StructLayout({name: ports[name].shape for name in self._operand_names})
        super().__init__({
            "operands": In(stream.Signature(layout)),
            "result": Out(stream.Signature(ports["result"].shape)),
        })

    @property
    def latency(self):
        return self._core.latency

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self._core

        valid = Signal(core.latency)        # valid[i]: a result-to-be sits after stage i
        advance = Signal()
        m.d.comb += [
            advance.eq(~valid[-1] | self.result.ready),
            core.en.eq(advance),
            self.operands.ready.eq(advance),
            self.result.valid.eq(valid[-1]),
            self.result.payload.eq(core.result),
        ]
        m.d.comb += [getattr(core, name).eq(getattr(self.operands.payload, name))
                     for name in self._operand_names]
        with m.If(advance):
            m.d.sync += valid.eq(Cat(self.operands.valid, valid[:-1]))
        return m
