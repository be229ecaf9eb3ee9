"""The one interface testbench code uses to talk to a simulator.

Testbench code (transactors, scoreboards, whole test programs) is written
once against :class:`Bench` and runs unchanged on every backend: Amaranth's
simulator here, and cocotb (Verilator, Icarus) in :mod:`sim.backends.cocotb_bench`.

The interface is cycle based. Ports are named by their path in the
component's signature, such as ``"operands.valid"`` or ``"result.payload"``;
a payload is one packed integer, however its layout splits it. One call,
:meth:`Bench.cycle`, drives input ports, advances the clock by one edge and
returns output ports as they were sampled at that edge (so a handshake seen
in the samples really happened on that edge).
"""

from amaranth.hdl import Value

__all__ = ["Bench", "AmaranthBench", "port_path"]


class Bench:
    """Protocol of a cycle-based simulator connection (documentation only).

    ``async cycle(drive, sample) -> tuple[int, ...]``
        Set each ``drive`` port (a mapping from port path to int), let the
        design settle, advance one rising clock edge, and return the values
        the ``sample`` ports (a tuple of paths) had at that edge.
    ``cycles``
        Number of edges advanced so far.
    """


def port_path(component, path):
    """Resolve ``"operands.payload"`` to the Amaranth value of that port."""
    obj = component
    for part in path.split("."):
        obj = getattr(obj, part)
    return Value.cast(obj)


class AmaranthBench(Bench):
    """:class:`Bench` over an Amaranth async testbench context."""

    def __init__(self, ctx, component):
        self._ctx = ctx
        self._component = component
        self._ports = {}
        self.cycles = 0

    def _port(self, path):
        try:
            return self._ports[path]
        except KeyError:
            value = self._ports[path] = port_path(self._component, path)
            return value

    async def cycle(self, drive, sample=()):
        for path, value in drive.items():
            self._ctx.set(self._port(path), value)
        _clk, _rst, *values = await self._ctx.tick().sample(*(self._port(p) for p in sample))
        self.cycles += 1
        return tuple(values)
