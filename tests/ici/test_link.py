# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct components whose __init__ raises.)
"""The ICI link signature and the link model: flits and credits arrive exactly
``latency`` cycles later, unchanged, every cycle."""

import numpy as np
import pytest
from amaranth.hdl import ClockDomain, Module, Shape
from amaranth.sim import Simulator

from hdl.ici import Link, LinkSignature, flit_layout

CLOCK = 1e-8


def test_signature_members():
    sig = LinkSignature(vcs=3, flit_words=2)
    assert set(sig.members) == {"valid", "vc", "data", "credit"}
    assert sig.members["data"].shape == flit_layout(2)
    assert sig.members["credit"].flow.name == "In" and sig.members["valid"].flow.name == "Out"
    assert Shape.cast(sig.members["vc"].shape).width == 2
    assert Shape.cast(sig.members["credit"].shape).width == 3
    assert sig == LinkSignature(vcs=3, flit_words=2) != LinkSignature(vcs=2, flit_words=2)
    assert repr(sig) == "LinkSignature(vcs=3, flit_words=2)"


@pytest.mark.parametrize("latency, vcs, flit_words", [(0, 2, 1), (1, 4, 1), (3, 2, 3)])
def test_flits_and_credits_arrive_latency_cycles_later(latency, vcs, flit_words, rng):
    link = Link(vcs=vcs, flit_words=flit_words, latency=latency)
    cycles = 60
    flits = [(int(rng.random() < 0.6), int(rng.integers(0, vcs)),
              sum(int(w) << (32 * j) for j, w in
                  enumerate(rng.integers(0, 1 << 32, flit_words, dtype=np.uint32))))
             for _ in range(cycles)]
    credits = [int(rng.integers(0, 1 << vcs)) for _ in range(cycles)]
    seen_flits, seen_credits = [], []

    async def tb(ctx):
        for t in range(cycles + latency):
            valid, vc, data = flits[t] if t < cycles else (0, 0, 0)
            ctx.set(link.tx.valid, valid)
            ctx.set(link.tx.vc, vc)
            ctx.set(link.tx.data.as_value(), data)
            ctx.set(link.rx.credit, credits[t] if t < cycles else 0)
            got = ctx.get(link.rx.valid)
            seen_flits.append((got, ctx.get(link.rx.vc) if got else 0,
                               ctx.get(link.rx.data.as_value()) if got else 0))
            seen_credits.append(ctx.get(link.tx.credit))
            await ctx.tick()

    top = Module()     # a sync domain even for latency 0, whose link has no register
    top.domains.sync = ClockDomain()
    top.submodules.link = link
    sim = Simulator(top)
    sim.add_clock(CLOCK)
    sim.add_testbench(tb)
    sim.run()
    idle = [(0, 0, 0)] * latency
    assert seen_flits == idle + [(v, c if v else 0, d if v else 0) for v, c, d in flits]
    assert seen_credits == [0] * latency + credits


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(vcs=0), ValueError, "vcs must be at least 1"),
    (dict(vcs=9), ValueError, "vcs must be at most 8"),
    (dict(vcs=2, flit_words=0), ValueError, "flit_words must be at least 1"),
    (dict(vcs=2, latency=-1), ValueError, "latency must be at least 0"),
    (dict(vcs=2, latency=1.5), TypeError, "latency must be an integer"),
])
def test_bad_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        Link(**kwargs)


def test_signature_bad_parameters():
    with pytest.raises(TypeError, match="vcs must be an integer"):
        LinkSignature(vcs="2")
