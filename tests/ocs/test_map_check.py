"""MapCheck against golden.topology.check_ocs_map on every encodable map of 3 and 4 ports
(and seeded samples of 5), and against a first-failing-port reference written here; the
walk takes one cycle per port."""

import itertools

import pytest
from amaranth.lib import data

from golden.topology import check_ocs_map
from hdl.ocs import STATUSES, MapCheck, entry_layout, port_bits

from .harness import random_map, simulate


def reference(mapping):
    """(status, port): the first port, in order, that is out of range, loops, or whose
    target does not map back to it."""
    n = len(mapping)
    for i, t in enumerate(mapping):
        if t < 0:
            continue
        if t >= n:
            return "target_range", i
        if t == i:
            return "self_loop", i
        if mapping[t] != i:
            return "asymmetric", i
    return "ok", 0


def run_checks(ports, maps):
    """(status, port, cycles from start to done) of MapCheck for each map."""
    check = MapCheck(ports=ports)
    layout = data.ArrayLayout(entry_layout(ports), ports)
    results = []

    async def tb(ctx):
        for mapping in maps:
            ctx.set(check.map, layout.const([{"lit": int(t >= 0), "target": max(t, 0)}
                                             for t in mapping]))
            ctx.set(check.start, 1)
            await ctx.tick()
            ctx.set(check.start, 0)
            cycles = 1
            while not ctx.get(check.done):
                assert ctx.get(check.busy)
                await ctx.tick()
                cycles += 1
            results.append((STATUSES[ctx.get(check.code)], ctx.get(check.port), cycles))

    simulate(check, tb)
    return results


def _golden_accepts(mapping):
    try:
        check_ocs_map(mapping, len(mapping))
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("ports", [3, 4])
def test_every_map(ports):
    values = range(-1, 1 << port_bits(ports))
    maps = [list(m) for m in itertools.product(values, repeat=ports)]
    results = run_checks(ports, maps)
    accepted = 0
    for mapping, (status, port, cycles) in zip(maps, results):
        assert (status, port) == reference(mapping), mapping
        assert (status == "ok") == _golden_accepts(mapping), mapping
        # One cycle per port walked, one more to report.
        assert cycles == (ports if status == "ok" else port + 1) + 1, mapping
        accepted += status == "ok"
    # Partial matchings: 4 on 3 ports, 10 on 4 ports.
    assert accepted == {3: 4, 4: 10}[ports]


def test_sampled_maps(rng):
    ports = 5
    maps = [[int(v) for v in rng.integers(-1, 8, ports)] for _ in range(150)]
    # Mostly-legal maps too: random matchings with one entry changed, or none.
    for _ in range(150):
        m = random_map(rng, ports)
        if rng.random() < 0.7:
            m[int(rng.integers(ports))] = int(rng.integers(-1, 8))
        maps.append(m)
    for mapping, (status, port, _) in zip(maps, run_checks(ports, maps)):
        assert (status, port) == reference(mapping), mapping
        assert (status == "ok") == _golden_accepts(mapping), mapping
