# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct components whose __init__ raises.)
"""The OCS crossbar: seeded random maps and golden.topology's maps route payload forward and
credits back; maps that are not symmetric partial permutations are refused by the RTL
(status) and by golden's Python checker (ValueError), with the old map kept; flits and
credits on dark or unmapped ports are counted, never delivered; parameters and the
configuration encoding are validated."""

import pytest
from amaranth.back import rtlil

from golden.topology import check_ocs_map, ocs_map, torus
from hdl.ocs import (COUNTER_BITS, STATUSES, OcsPortSignature, OpticalCircuitSwitch,
                     config_beats)

from .harness import configure, random_map, send_beats, simulate

ALL = -1  # every idle bit: with no traffic, every port is trivially drained


def _bits(n):
    return (1 << n) - 1


async def _drive_and_check(ctx, ocs, rng, mapping, cycles):
    """Random flits on the lit ports and random credits back; every output as ``mapping``
    (the map the test chose) says, in the same cycle."""
    n, w, c = ocs.ports, ocs.payload_width, ocs.credit_width
    for cycle in range(cycles):
        valid = [bool(mapping[i] >= 0 and rng.random() < 0.6) for i in range(n)]
        payload = [int(rng.integers(1 << w)) for _ in range(n)]
        credit = [int(rng.integers(1 << c)) if mapping[i] >= 0 else 0 for i in range(n)]
        for i in range(n):
            ctx.set(ocs.ingress[i].valid, valid[i])
            ctx.set(ocs.ingress[i].payload, payload[i])
            ctx.set(ocs.egress[i].credit, credit[i])
        for j in range(n):
            src = mapping[j]
            where = f"cycle {cycle}, map {mapping}, port {j}"
            assert ctx.get(ocs.egress[j].valid) == (src >= 0 and valid[src]), where
            if src >= 0 and valid[src]:
                assert ctx.get(ocs.egress[j].payload) == payload[src], where
            assert ctx.get(ocs.ingress[j].credit) == (credit[src] if src >= 0 else 0), where
        await ctx.tick()
    for i in range(n):
        ctx.set(ocs.ingress[i].valid, 0)
        ctx.set(ocs.egress[i].credit, 0)


def test_random_maps_route_payload_and_credits(rng):
    ports = 11
    ocs = OpticalCircuitSwitch(ports=ports, payload_width=9, credit_width=3,
                               reconfig_cycles=2, drain_timeout=8)
    maps = [random_map(rng, ports, lit=lit) for lit in (1.0, 0.7, 0.5, 1.0, 0.0)]
    out = {}

    async def tb(ctx):
        ctx.set(ocs.idle, _bits(ports))
        current = None
        for new in maps:
            assert await configure(ctx, ocs, new, current) == ("ok", 0), new
            await _drive_and_check(ctx, ocs, rng, new, 12)
            current = new
        out["counts"] = [ctx.get(ocs.reconfigs), ctx.get(ocs.refused), ctx.get(ocs.violations)]

    simulate(ocs, tb)
    assert out["counts"] == [len(maps), 0, 0]


@pytest.mark.parametrize("shape, kw", [("2x2", {}), ("2x2", {"failed": [3]}),
                                        ("1x4", {"wrap": False})])
def test_topology_maps_route(shape, kw, rng):
    # golden.topology's own maps, as the network tops will load them.
    mapping = ocs_map(torus(shape, **kw)).tolist()
    ocs = OpticalCircuitSwitch(ports=len(mapping), payload_width=12, credit_width=2,
                               reconfig_cycles=5)

    async def tb(ctx):
        ctx.set(ocs.idle, _bits(ocs.ports))
        assert await configure(ctx, ocs, mapping) == ("ok", 0)
        await _drive_and_check(ctx, ocs, rng, mapping, 10)

    simulate(ocs, tb)


def test_zero_reconfig_cycles_switch_without_dark(rng):
    ports = 6
    ocs = OpticalCircuitSwitch(ports=ports, payload_width=4, credit_width=1, reconfig_cycles=0)
    first, second = [1, 0, 3, 2, -1, -1], [-1, 4, 5, -1, 1, 2]

    async def tb(ctx):
        ctx.set(ocs.idle, _bits(ports))
        assert await configure(ctx, ocs, first) == ("ok", 0)
        await send_beats(ctx, ocs, config_beats(second, ports=ports, current=first))
        busy = 0
        while True:
            _, _, is_busy, dark = await ctx.tick().sample(ocs.busy, ocs.dark)
            assert dark == 0
            if not is_busy:
                break
            busy += 1
        # Check (ports + 1 cycles at most), then one drain cycle: all idle at once.
        assert busy <= ports + 2
        await _drive_and_check(ctx, ocs, rng, second, 6)

    simulate(ocs, tb)


# Bad maps over the old map [1, 0, 3, 2, -1, -1] of a 6-port OCS: the map, golden's
# complaint, and the RTL's status (code, port), written out by hand.
OLD = [1, 0, 3, 2, -1, -1]
BAD_MAPS = {
    "self_loop": ([1, 0, 3, 2, 4, -1], "maps to itself", ("self_loop", 4)),
    "one_way": ([1, 0, 3, 2, 5, -1], "links are bidirectional", ("asymmetric", 4)),
    "shared_target": ([2, 2, 0, -1, -1, -1], "both map to 2", ("asymmetric", 1)),
    "target_range": ([1, 0, 3, 2, 7, -1], "outside -1..5", ("target_range", 4)),
    "broken_pair": ([1, 0, 3, -1, -1, -1], "links are bidirectional", ("asymmetric", 2)),
}


@pytest.mark.parametrize("case", [*BAD_MAPS, "port_range"])
def test_bad_map_is_refused_and_old_map_kept(case, rng):
    ports = 6
    if case == "port_range":
        # An entry for port 6 of a 6-port OCS: config_beats cannot write it.
        with pytest.raises(ValueError, match="outside 0..5"):
            check_ocs_map({6: 1, 1: 6}, ports)
        beats = [{"commit": 0, "port": 4, "lit": 1, "target": 5},
                 {"commit": 0, "port": 6, "lit": 1, "target": 1},
                 {"commit": 1, "port": 0, "lit": 0, "target": 0}]
        expected = ("port_range", 6)
    else:
        bad, complaint, expected = BAD_MAPS[case]
        with pytest.raises(ValueError, match=complaint) as error:
            check_ocs_map(bad, ports)
        assert "\n" not in str(error.value)
        beats = config_beats(bad, ports=ports, current=OLD)
    ocs = OpticalCircuitSwitch(ports=ports, payload_width=8, credit_width=2, reconfig_cycles=3)
    good = [1, 0, -1, -1, 5, 4]
    out = {}

    async def tb(ctx):
        ctx.set(ocs.idle, _bits(ports))
        assert await configure(ctx, ocs, OLD) == ("ok", 0)
        await send_beats(ctx, ocs, beats)
        quiesced = 0
        while True:
            _, _, busy, quiesce = await ctx.tick().sample(ocs.busy, ocs.quiesce)
            quiesced |= quiesce
            if not busy:
                break
        out["status"] = (STATUSES[ctx.get(ocs.status.code)], ctx.get(ocs.status.port))
        out["quiesced"] = quiesced
        out["counts"] = [ctx.get(ocs.reconfigs), ctx.get(ocs.refused)]
        await _drive_and_check(ctx, ocs, rng, OLD, 8)
        # The refused edits were dropped: a later request starts from the map in force.
        assert await configure(ctx, ocs, good, OLD) == ("ok", 0)
        await _drive_and_check(ctx, ocs, rng, good, 8)

    simulate(ocs, tb)
    assert out["status"] == expected
    assert out["quiesced"] == 0, "a refused map quiesced links"
    assert out["counts"] == [1, 1]
    message = ocs.describe_status(STATUSES.index(expected[0]), expected[1])
    assert f"port {expected[1]}" in message and "\n" not in message


def test_flits_on_dark_or_unmapped_ports_are_counted(rng):
    ports, reconfig_cycles = 6, 4
    ocs = OpticalCircuitSwitch(ports=ports, payload_width=8, credit_width=2,
                               reconfig_cycles=reconfig_cycles)
    out = {}

    def nothing_out(ctx):
        return not any(ctx.get(p.valid) for p in ocs.egress) and \
            not any(ctx.get(p.credit) for p in ocs.ingress)

    async def tb(ctx):
        ctx.set(ocs.idle, _bits(ports))
        assert await configure(ctx, ocs, [1, 0, -1, -1, -1, -1]) == ("ok", 0)
        # Unmapped: a flit into port 3 on two cycles, a credit from port 5 on one.
        ctx.set(ocs.ingress[3].valid, 1)
        ctx.set(ocs.ingress[3].payload, 0xA5)
        ctx.set(ocs.egress[5].credit, 2)
        assert nothing_out(ctx)
        await ctx.tick()
        ctx.set(ocs.egress[5].credit, 0)
        assert nothing_out(ctx)
        await ctx.tick()
        ctx.set(ocs.ingress[3].valid, 0)
        await ctx.tick()
        out["unmapped"] = (ctx.get(ocs.violations), ctx.get(ocs.violated))
        # Dark: 0-1 becomes 0-2; a flit into port 0 and a credit from port 1 on every
        # dark cycle (the senders break the protocol).
        await send_beats(ctx, ocs, config_beats([2, -1, 0, -1, -1, -1], ports=ports,
                                                current=[1, 0, -1, -1, -1, -1]))
        dark_cycles = 0
        while ctx.get(ocs.busy):
            dark = ctx.get(ocs.dark)
            ctx.set(ocs.ingress[0].valid, dark & 1)
            ctx.set(ocs.egress[1].credit, 3 if dark & 2 else 0)
            if dark:
                assert dark == 0b111
                assert nothing_out(ctx)
                dark_cycles += 1
            await ctx.tick()
        ctx.set(ocs.ingress[0].valid, 0)
        ctx.set(ocs.egress[1].credit, 0)
        await ctx.tick()
        out["dark"] = (dark_cycles, ctx.get(ocs.violations), ctx.get(ocs.violated))

    simulate(ocs, tb)
    assert out["unmapped"] == (3, 0b101000)
    assert out["dark"] == (reconfig_cycles, 3 + 2 * reconfig_cycles, 0b101011)


def test_counters_saturate():
    # A violation every cycle from a counter one below full: it stops at the top.
    ocs = OpticalCircuitSwitch(ports=2, payload_width=1, credit_width=1, reconfig_cycles=1)
    top = (1 << COUNTER_BITS) - 1
    out = []

    async def tb(ctx):
        ctx.set(ocs.violations, top - 1)
        ctx.set(ocs.ingress[0].valid, 1)
        for _ in range(3):
            await ctx.tick()
            out.append(ctx.get(ocs.violations))

    simulate(ocs, tb)
    assert out == [top, top, top]


@pytest.mark.parametrize("kw, error, match", [
    ({"ports": 1}, ValueError, "ports must be at least 2"),
    ({"ports": 4.0}, TypeError, "ports must be an integer"),
    ({"ports": True}, TypeError, "ports must be an integer"),
    ({"payload_width": 0}, ValueError, "payload_width must be at least 1"),
    ({"credit_width": 0}, ValueError, "credit_width must be at least 1"),
    ({"reconfig_cycles": -1}, ValueError, "reconfig_cycles must be at least 0"),
    ({"drain_timeout": 0}, ValueError, "drain_timeout must be at least 1"),
    ({"drain_timeout": None}, TypeError, "drain_timeout must be an integer"),
])
def test_bad_parameters(kw, error, match):
    params = {"ports": 4, "payload_width": 8, "credit_width": 2, "reconfig_cycles": 3} | kw
    with pytest.raises(error, match=match):
        OpticalCircuitSwitch(**params)
    with pytest.raises(TypeError):
        OpticalCircuitSwitch(4, 8, 2, 3)


def test_link_signature():
    a = OcsPortSignature(payload_width=8, credit_width=2)
    assert a == OcsPortSignature(payload_width=8, credit_width=2)
    assert a != OcsPortSignature(payload_width=8, credit_width=3)
    assert [name for name, _ in a.members.items()] == ["valid", "payload", "credit"]
    with pytest.raises(ValueError, match="credit_width must be at least 1"):
        OcsPortSignature(payload_width=8, credit_width=0)


def test_config_beats():
    assert config_beats([1, 0, -1], ports=3, current=[2, -1, 0]) == [
        {"commit": 0, "port": 0, "lit": 1, "target": 1},
        {"commit": 0, "port": 1, "lit": 1, "target": 0},
        {"commit": 0, "port": 2, "lit": 0, "target": 0},
        {"commit": 1, "port": 0, "lit": 0, "target": 0}]
    assert config_beats([-1, -1], ports=2) == [{"commit": 1, "port": 0, "lit": 0, "target": 0}]
    # Encodable but illegal targets pass (the RTL refuses them); unencodable ones do not.
    assert config_beats([3, -1, -1], ports=3)[0]["target"] == 3
    for bad, match in [([0, 1], "must have 3 entries"), ([4, -1, -1], "cannot be encoded"),
                       ([-2, -1, -1], "cannot be encoded"), ([0.5, -1, -1], "must be an int"),
                       ("abc", "sequence of 3 ints"), (5, "sequence of 3 ints")]:
        with pytest.raises(ValueError, match=match):
            config_beats(bad, ports=3)


def test_describe_status_and_export():
    ocs = OpticalCircuitSwitch(ports=16, payload_width=40, credit_width=4, reconfig_cycles=9,
                               drain_timeout=100)
    assert ocs.describe_status(STATUSES.index("timeout"), 7) == \
        "OCS port 7 did not drain within 100 cycles: nothing was switched"
    with pytest.raises(ValueError, match="unknown OCS status code"):
        ocs.describe_status(len(STATUSES), 0)
    rtlil.convert(ocs)
