# amaranth: UnusedElaboratable=no
# (One test reads a signature off an arbiter it never simulates; two build components
# whose __init__ raises.)
"""The round-robin arbiter against a Python model of its rule, plain and sticky, and the
adaptive allocator's outputs that keep a packet until its tail."""

import pytest
from amaranth.sim import Simulator

from hdl.ici import Router
from hdl.ici.allocator import Allocator
from hdl.ici.arbiter import RoundRobin

CLOCK = 1e-8


def model(n, requests, advances, keeps):
    """Grants of the arbiter's rule: the first request at or after the pointer; an
    advancing grant moves the pointer past it, or onto it when kept."""
    pointer, grants = 0, []
    for req, advance, keep in zip(requests, advances, keeps):
        # The first request at or after the pointer, else the lowest (cyclically).
        above = [i for i in range(pointer, n) if req >> i & 1]
        grant = above[0] if above else next((i for i in range(n) if req >> i & 1), None)
        grants.append(0 if grant is None else 1 << grant)
        if advance and grant is not None:
            pointer = grant if keep else grant + 1
            pointer = pointer if pointer < n else 0
    return grants


def _simulate(arb, testbench):
    sim = Simulator(arb)
    sim.add_clock(CLOCK)
    sim.add_testbench(testbench)
    sim.run()


@pytest.mark.parametrize("sticky", [False, True])
def test_grants_follow_the_rule(sticky, rng):
    n, cycles = 5, 400
    requests = [int(r) for r in rng.integers(0, 1 << n, cycles)]
    advances = [int(a) for a in rng.random(cycles) < 0.8]
    keeps = [int(k) if sticky else 0 for k in rng.random(cycles) < 0.5]
    arb = RoundRobin(n=n, sticky=sticky)
    seen = []

    async def tb(ctx):
        for req, advance, keep in zip(requests, advances, keeps):
            ctx.set(arb.requests, req)
            ctx.set(arb.advance, advance)
            if sticky:
                ctx.set(arb.keep, keep)
            seen.append(ctx.get(arb.grant))
            await ctx.tick()

    _simulate(arb, tb)
    assert seen == model(n, requests, advances, keeps)


def test_a_kept_grant_stays_until_released():
    arb = RoundRobin(n=3, sticky=True)
    seen = []

    async def tb(ctx):
        ctx.set(arb.advance, 1)
        # Requesters 1 and 2 ask every cycle; 1 is kept for three grants, then released.
        for keep in (1, 1, 1, 0, 0, 0):
            ctx.set(arb.requests, 0b110)
            ctx.set(arb.keep, keep)
            seen.append(ctx.get(arb.grant))
            await ctx.tick()

    _simulate(arb, tb)
    assert seen == [0b010, 0b010, 0b010, 0b010, 0b100, 0b010]
    assert "keep" not in RoundRobin(n=3).signature.members


def _output_turns(keep_packets):
    """Two inputs each send a 4-flit packet to torus output 0 (input 0 on VC 0, input 1
    on VC 1, no other choice) through an adaptive allocator: the input output 0 took a
    flit from, cycle by cycle."""
    alloc = Allocator(n_in=2, n_out=5, vcs=3, buffer_flits=12, adaptive=True, escape_vcs=2,
                      keep_packets=keep_packets)
    turns = []

    async def bench(ctx):
        left = [4, 4]
        for i in range(2):
            head = alloc.heads[i][0]
            ctx.set(head.length, 4)
            ctx.set(head.port, 0)
            ctx.set(head.vc, i)
        while any(left) and len(turns) < 20:
            for i in range(2):
                head = alloc.heads[i][0]
                ctx.set(head.valid, left[i] > 0)
                ctx.set(head.head, left[i] == 4)
                ctx.set(head.tail, left[i] == 1)
            select = ctx.get(alloc.select[0])
            turns.append({0b01: 0, 0b10: 1}.get(select))
            for i in range(2):
                left[i] -= ctx.get(alloc.grant[i]) & 1
            await ctx.tick()

    _simulate(alloc, bench)
    return turns


def test_kept_packets_cross_a_link_whole():
    assert _output_turns(keep_packets=True) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert _output_turns(keep_packets=False) == [0, 1, 0, 1, 0, 1, 0, 1]


def test_keep_packets_needs_adaptive_routing():
    with pytest.raises(ValueError, match="keep_packets needs routing='adaptive' or switching='cut_through'"):
        Router(keep_packets=True)
    with pytest.raises(ValueError, match="keep_packets needs cut-through allocation"):
        Allocator(n_in=2, n_out=5, vcs=2, buffer_flits=8, keep_packets=True)
