"""An instance of a separately emitted module, standing in for a component in an export."""

from amaranth.hdl import ClockSignal, Instance, ResetSignal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In

__all__ = ["BlackBox"]


class BlackBox(wiring.Component):
    """Instantiates Verilog module ``module`` in place of a component with ``signature``.

    Port names follow Amaranth's Verilog export of that component: the
    signature path joined with ``__``, plus ``clk`` and ``rst`` of the sync
    domain. Exporting the component once as ``module`` and every occurrence
    as a ``BlackBox`` emits a repeated module once instead of once per copy.
    """

    def __init__(self, module, signature):
        self.module = module
        super().__init__(signature)

    def elaborate(self, platform):
        ports = {}
        for path, member, value in self.signature.flatten(self):
            name = "__".join(str(part) for part in path)
            ports[("i_" if member.flow == In else "o_") + name] = Value.cast(value)
        return Instance(self.module, i_clk=ClockSignal(), i_rst=ResetSignal(), **ports)
