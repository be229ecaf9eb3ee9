""":class:`~sim.backends.bench.Bench` over a cocotb DUT handle (Verilator or Icarus).

Inputs are driven just after a rising edge; outputs are read at the
falling edge, when everything has settled and nothing can change before the
next rising edge. Those are the values the design sees at that edge, which
is what Amaranth's ``tick().sample()`` returns, so test programs behave the
same on every backend, cycle for cycle.
"""

from cocotb.triggers import FallingEdge, RisingEdge

from .bench import Bench

__all__ = ["CocotbBench"]


def _to_int(value):
    try:
        return int(value)
    except ValueError:
        # X or Z (an undriven input, say) reads as 0, like Amaranth's initial values.
        return int(str(value).lower().replace("x", "0").replace("z", "0"), 2)


class CocotbBench(Bench):
    def __init__(self, dut):
        self._dut = dut
        self._handles = {}
        self._falling = FallingEdge(dut.clk)
        self._rising = RisingEdge(dut.clk)
        self.cycles = 0

    def _handle(self, path):
        try:
            return self._handles[path]
        except KeyError:
            handle = self._handles[path] = getattr(self._dut, path.replace(".", "__"))
            return handle

    async def cycle(self, drive, sample=()):
        for path, value in drive.items():
            self._handle(path).value = value
        await self._falling
        values = tuple(_to_int(self._handle(path).value) for path in sample)
        await self._rising
        self.cycles += 1
        return values
