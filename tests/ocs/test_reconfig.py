"""OCS reconfiguration under traffic (SPEC 4.5): routers that honour quiesce/idle lose and
duplicate nothing, only the affected links go dark and for exactly ``reconfig_cycles``
cycles, unaffected links flow on, and a link that does not drain gets the request refused
with the old map kept."""

import pytest

from golden.topology import ocs_map, torus
from hdl.ocs import OpticalCircuitSwitch

from .harness import Routers, configure, random_map, simulate


def _window(log, key, port):
    """The cycles in which ``log[c][key]`` has bit ``port`` set."""
    return [c for c, entry in enumerate(log) if (entry[key] >> port) & 1]


def _contiguous(cycles):
    return cycles == list(range(cycles[0], cycles[0] + len(cycles))) if cycles else True


async def _reconfigure(ctx, ocs, routers, new, current):
    routers.pending = new
    return await configure(ctx, ocs, new, current)


async def _counters(ctx, ocs):
    return {name: ctx.get(getattr(ocs, name))
            for name in ("reconfigs", "refused", "violations", "violated")}


def _check_switch(log, old, new, reconfig_cycles):
    """Check one switch from ``old`` to ``new`` in a log segment that holds it alone:
    the affected ports (written out from the maps) quiesce together, were all idle just
    before going dark, go dark for exactly ``reconfig_cycles`` cycles at the end of the
    quiesce window, and the others neither quiesce nor go dark. Returns the dark cycles."""
    affected = [i for i in range(len(old)) if old[i] != new[i]]
    assert affected
    quiesce = _window(log, "quiesce", affected[0])
    dark = _window(log, "dark", affected[0])
    assert len(dark) == reconfig_cycles and _contiguous(dark)
    assert _contiguous(quiesce) and quiesce[-1] == dark[-1]
    for port in range(len(old)):
        if port in affected:
            assert _window(log, "dark", port) == dark, f"port {port} dark window"
            assert _window(log, "quiesce", port) == quiesce, f"port {port} quiesce window"
        else:
            assert not _window(log, "dark", port), f"unaffected port {port} went dark"
            assert not _window(log, "quiesce", port), f"unaffected port {port} quiesced"
    affected_bits = sum(1 << p for p in affected)
    assert log[dark[0] - 1]["idle"] & affected_bits == affected_bits
    return dark


@pytest.mark.parametrize("reconfig_cycles", [1, 6])
def test_regular_to_twisted_and_back_under_traffic(reconfig_cycles, rng):
    # A 2x4 torus to the twisted 2x4 and back: only the x wrap ports change partner.
    regular = ocs_map(torus("2x4")).tolist()
    twisted = ocs_map(torus("2x4", twist=True)).tolist()
    ocs = OpticalCircuitSwitch(ports=len(regular), payload_width=20, credit_width=2,
                               reconfig_cycles=reconfig_cycles, drain_timeout=500)
    routers = Routers(ocs, rng)
    out = {"marks": []}

    async def control(ctx):
        assert await _reconfigure(ctx, ocs, routers, regular, None) == ("ok", 0)
        for old, new in ((regular, twisted), (twisted, regular)):
            await ctx.tick().repeat(80)
            out["marks"].append(routers.cycle)
            assert await _reconfigure(ctx, ocs, routers, new, old) == ("ok", 0)
        await ctx.tick().repeat(80)
        out["marks"].append(routers.cycle)
        routers.stop = True
        while not routers.empty():
            await ctx.tick()
        out.update(await _counters(ctx, ocs))

    simulate(routers.top, routers.run, control)
    routers.check_all_delivered()
    assert (out["reconfigs"], out["refused"], out["violations"], out["violated"]) == (3, 0, 0, 0)
    a, b, c = out["marks"]
    moved = {i for i in range(len(regular)) if regular[i] != twisted[i]}
    for log, old, new in ((routers.log[a:b], regular, twisted),
                          (routers.log[b:c], twisted, regular)):
        dark = _check_switch(log, old, new, reconfig_cycles)
        # The unaffected links carried traffic while the others were dark (each flit
        # checked as it went); the affected ones did after the switch, to new partners.
        during = {p for cycle in dark for p in log[cycle]["sent"]}
        after = {p for entry in log[dark[-1] + 1:] for p in entry["sent"]}
        assert during and not during & moved
        assert after & moved


def test_random_maps_under_traffic(rng):
    ports, reconfig_cycles = 10, 4
    maps = [random_map(rng, ports) for _ in range(5)]
    maps = [m for m, prev in zip(maps, [None] + maps) if m != prev]
    ocs = OpticalCircuitSwitch(ports=ports, payload_width=20, credit_width=3,
                               reconfig_cycles=reconfig_cycles, drain_timeout=500)
    routers = Routers(ocs, rng, buffer=3, max_len=5)
    out = {"marks": []}

    async def control(ctx):
        current = None
        for new in maps:
            out["marks"].append(routers.cycle)
            assert await _reconfigure(ctx, ocs, routers, new, current) == ("ok", 0)
            current = new
            await ctx.tick().repeat(int(rng.integers(10, 60)))
        out["marks"].append(routers.cycle)
        routers.stop = True
        while not routers.empty():
            await ctx.tick()
        out.update(await _counters(ctx, ocs))

    simulate(routers.top, routers.run, control)
    routers.check_all_delivered()
    assert (out["reconfigs"], out["refused"], out["violations"]) == (len(maps), 0, 0)
    marks = out["marks"]
    for k in range(1, len(maps)):
        _check_switch(routers.log[marks[k]:marks[k + 1]], maps[k - 1], maps[k],
                      reconfig_cycles)


def test_drain_timeout_refuses_and_keeps_old_map(rng):
    ports, timeout = 12, 30
    old = random_map(rng, ports, lit=1.0)
    new = random_map(rng, ports, lit=1.0)
    while new == old:
        new = random_map(rng, ports, lit=1.0)
    affected = [i for i in range(ports) if old[i] != new[i]]
    stuck = affected[0]        # its receiver stops: its partner's credits never come home
    ocs = OpticalCircuitSwitch(ports=ports, payload_width=20, credit_width=2,
                               reconfig_cycles=3, drain_timeout=timeout)
    routers = Routers(ocs, rng)
    out = {}

    async def control(ctx):
        assert await _reconfigure(ctx, ocs, routers, old, None) == ("ok", 0)
        await ctx.tick().repeat(20)
        routers.stalled.add(stuck)
        while not any(routers.buffers[stuck]):
            await ctx.tick()
        out["start"] = routers.cycle
        out["status"] = await _reconfigure(ctx, ocs, routers, new, old)
        out["refused_at"] = routers.cycle
        await ctx.tick().repeat(40)      # traffic on the old map, checked per flit
        routers.stalled.clear()
        await ctx.tick().repeat(20)
        out["retry"] = await _reconfigure(ctx, ocs, routers, new, old)
        await ctx.tick().repeat(40)
        routers.stop = True
        while not routers.empty():
            await ctx.tick()
        out.update(await _counters(ctx, ocs))

    simulate(routers.top, routers.run, control)
    routers.check_all_delivered()
    assert out["retry"] == ("ok", 0)
    assert (out["reconfigs"], out["refused"], out["violations"]) == (2, 1, 0)

    log = routers.log[out["start"]:out["refused_at"]]
    quiesce = _window(log, "quiesce", stuck)
    assert len(quiesce) == timeout and _contiguous(quiesce)
    assert not any(entry["dark"] for entry in log), "a refused request went dark"
    # The port named is the lowest affected one not idle in the last drain cycle; the
    # stalled receiver's partner is among them.
    idle = log[quiesce[-1]]["idle"]
    busy = [p for p in affected if not (idle >> p) & 1]
    assert old[stuck] in busy
    assert out["status"] == ("timeout", min(busy))
    # The old map carried traffic after the refusal (every flit checked against it).
    assert any(routers.log[c]["sent"] for c in range(out["refused_at"], out["refused_at"] + 40))
