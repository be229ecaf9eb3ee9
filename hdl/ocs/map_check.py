"""The OCS map check: is a staged map a symmetric partial permutation? One port per cycle."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int
from .config import Status, entry_layout, port_bits

__all__ = ["MapCheck"]


class MapCheck(wiring.Component):
    """Walks a map from port 0 up and stops at the first port that breaks the rules.

    Port i is legal when it is dark, or when its target t is below ``ports``, is not i,
    and maps back to i. Symmetry alone rules out shared targets (t can map back to only
    one port), so these checks are exactly ``golden.topology.check_ocs_map``'s; only the
    port blamed may differ, as the walk reports ports in order and golden reports by kind.

    The walk takes one port per cycle, so it costs two ``ports``-way multiplexers rather
    than the ``ports``-squared comparators of a one-cycle check; a reconfiguration takes
    far longer anyway.

    Parameters
    ----------
    ports : int
        Ports of the map, at least 1.

    Ports
    -----
    map : In(ArrayLayout(entry_layout(ports), ports))
        The map to check; it must hold still from ``start`` to ``done``.
    start : In(1)
        Begin a walk (ignored while ``busy``).
    busy : Out(1)
        A walk is under way.
    done : Out(1)
        High for one cycle when the walk ends, with ``code`` and ``port`` valid.
    code : Out(Status)
        ``OK`` or the reason (``TARGET_RANGE``, ``SELF_LOOP``, ``ASYMMETRIC``); held until
        the next ``done``.
    port : Out(port_bits(ports))
        The port blamed (0 when ok).

    Latency: a walk started in cycle t checks port i in cycle t + 1 + i; ``done`` is high
    in the cycle after the last port checked, at most ``t + 1 + ports``.
    """

    def __init__(self, *, ports):
        self.ports = check_int("ports", ports, least=1)
        super().__init__({
            "map": In(data.ArrayLayout(entry_layout(ports), ports)),
            "start": In(1), "busy": Out(1), "done": Out(1),
            "code": Out(Status), "port": Out(port_bits(ports)),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.ports
        index = Signal(range(n))
        entry = self.map[index]
        back = self.map[entry.target]  # meaningless when out of range, checked first

        m.d.sync += self.done.eq(0)
        with m.If(~self.busy):
            with m.If(self.start):
                m.d.sync += [self.busy.eq(1), index.eq(0)]
        with m.Else():
            def stop(status):
                m.d.sync += [self.busy.eq(0), self.done.eq(1), self.code.eq(status),
                             self.port.eq(index if status != Status.OK else 0)]
            with m.If(entry.lit & (entry.target >= n)):
                stop(Status.TARGET_RANGE)
            with m.Elif(entry.lit & (entry.target == index)):
                stop(Status.SELF_LOOP)
            with m.Elif(entry.lit & ~(back.lit & (back.target == index))):
                stop(Status.ASYMMETRIC)
            with m.Elif(index == n - 1):
                stop(Status.OK)
            with m.Else():
                m.d.sync += index.eq(index + 1)
        return m
