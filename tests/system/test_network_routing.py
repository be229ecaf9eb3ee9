"""``sim.network``'s ``routing`` keyword (SPEC section 6, issue 44): checked with one-line
errors, and ``routing="dor"`` streams exactly what a run without it streams."""

import pytest

import sim.network as network
from golden import topology as topo


class _Captured(Exception):
    pass


def _captured_run(monkeypatch, **kwargs):
    """The WholeRun a run would simulate (the simulation itself is replaced)."""
    seen = []

    def fake(whole, **_):
        seen.append(whole)
        raise _Captured

    monkeypatch.setattr(network, "_simulate", fake)
    with pytest.raises(_Captured):
        network.run(topo.torus("4x4", twist=False), rate=0.5, cycles=200, warmup=50,
                    traffic="all_to_all", **kwargs)
    return seen[0]


def test_dor_routing_is_todays_run(monkeypatch):
    base = _captured_run(monkeypatch)
    dor = _captured_run(monkeypatch, routing="dor")
    assert dor.params == base.params and dor.inputs == base.inputs
    assert dor.play == base.play and dor.play["tables"]


@pytest.mark.parametrize("bad", ["DOR", "minimal", "", None, 2])
def test_bad_routing_is_a_one_line_value_error(bad):
    for call in (lambda: network.run("4x4", rate=0.1, cycles=10, warmup=0, routing=bad),
                 lambda: network.sweep("4x4", rates=[0.1], cycles=10, warmup=0,
                                       routing=bad)):
        with pytest.raises(ValueError, match="^routing must be one of") as info:
            call()
        assert "\n" not in str(info.value)


def test_adaptive_routing_says_the_router_is_not_built():
    with pytest.raises(NotImplementedError, match="adaptive router RTL, not built yet"):
        network.run("4x4", rate=0.1, cycles=10, warmup=0, vcs=3, routing="adaptive")
    with pytest.raises(NotImplementedError):
        network.sweep("4x4", rates=[0.1], cycles=10, warmup=0, routing="adaptive")
