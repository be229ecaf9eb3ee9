# amaranth: UnusedElaboratable=no
# (test_escape_bias_reaches_the_routers builds a system and its node to read their
# parameters, and never elaborates them.)
"""``sim.network``'s ``routing`` keyword (SPEC section 6, issue 44): checked with one-line
errors, and ``routing="dor"`` streams exactly what a run without it streams."""

import numpy as np
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


def test_adaptive_routing_needs_vcs_and_short_packets():
    with pytest.raises(ValueError, match="^routing='adaptive' needs vcs above 2"):
        network.run("4x4", rate=0.1, cycles=10, warmup=0, vcs=2, routing="adaptive")
    with pytest.raises(ValueError, match="packet_flits .9. must fit buffer_flits .8."):
        network.sweep("4x4", rates=[0.1], cycles=10, warmup=0, vcs=3, packet_flits=9,
                      routing="adaptive")


def test_adaptive_runs_stream_adaptive_tables(monkeypatch):
    whole = _captured_run(monkeypatch, routing="adaptive", vcs=3)
    assert whole.params["routing"] == "adaptive"
    t = topo.torus("4x4")
    tables = topo.routing_tables(t, vcs=3, routing="adaptive")
    from hdl.ici.layouts import adaptive_entry_layout, adaptive_table_entries
    from hdl.system.layouts import row_layout
    layout = row_layout(16, 2, "adaptive")
    size = adaptive_entry_layout.size
    for r, row in enumerate(whole.play["tables"]):
        for c in range(16):
            got = row >> (layout["entries"].offset + c * size) & ((1 << size) - 1)
            assert got == adaptive_table_entries(tables, c, vcs=3)[r]


def test_escape_bias_reaches_the_routers(monkeypatch):
    """``escape_bias`` is a build parameter of adaptive runs only; left out, the build's
    parameters are as without it."""
    plain = _captured_run(monkeypatch, routing="adaptive", vcs=3)
    assert "escape_bias" not in plain.params
    biased = _captured_run(monkeypatch, routing="adaptive", vcs=3, escape_bias=3)
    assert biased.params == plain.params | {"escape_bias": 3}
    from hdl.testbench import NetworkSystem
    from hdl.testbench.node import NetworkNode
    # The node the system would make, made here (so that it is this file's to leave
    # unelaborated).
    node = NetworkNode(**NetworkSystem(**biased.params).node_params)
    assert node.escape_bias == 3
    with pytest.raises(ValueError, match="^escape_bias is for routing='adaptive', not 'dor'"):
        network.run("4x4", rate=0.1, cycles=10, warmup=0, escape_bias=3)
    with pytest.raises(ValueError, match="^escape_bias must be"):
        network.run("4x4", rate=0.1, cycles=10, warmup=0, vcs=3, routing="adaptive",
                    escape_bias=-1)


def _sink_run(order):
    """Feed an unordered sink (node 2 of 4) 2-flit probes ``(src, seq)`` in this order;
    its ``sequence_errors`` and ``received``."""
    import numpy as np
    from amaranth.sim import Simulator
    from golden import ici
    from hdl.system.layouts import payload_word
    from hdl.testbench import TrafficSink
    dut = TrafficSink(n_nodes=4, ordered=False)
    out = {}

    async def tb(ctx):
        ctx.set(dut.node, 2)
        ctx.set(dut.packet_flits, 2)
        for src, seq in order:
            data = np.array([payload_word(src, 2, seq, j) for j in range(2)], np.uint32)
            rows = ici.encode_write(dst=2, src=src, space="vmem", address=0, flag=seq,
                                    data=data, flit_words=2)
            for row in rows:
                ctx.set(dut.eject.valid, 1)
                ctx.set(dut.eject.payload.as_value(), int(row[0]) | int(row[1]) << 32)
                await ctx.tick()
        ctx.set(dut.eject.valid, 0)
        await ctx.tick()
        out["errors"], out["received"] = ctx.get(dut.sequence_errors), ctx.get(dut.received)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return out["errors"], out["received"]


def test_unordered_sink_checks_each_flow_as_a_set():
    """Any order of each flow's 0..n-1 passes; a repeated packet where another is missing
    fails (the counts alone would not show it)."""
    assert _sink_run([(0, 2), (1, 1), (0, 0), (1, 0), (0, 1), (0, 3)]) == (0, 6)
    assert _sink_run([(0, 0), (0, 1), (0, 1), (0, 3)]) == (1, 4)
    assert _sink_run([(1, 1), (1, 1)]) == (1, 2)


# 25-30 s, nearly all of it the run: Amaranth re-evaluates each adaptive router's allocator
# whole every cycle. make test keeps tests/ici's adaptive 4-ring under load.
@pytest.mark.slow
def test_an_adaptive_whole_run_delivers_everything(seed):
    """A 4-ring on the Amaranth simulator with adaptive routing under load: every packet
    once and intact (the sinks' unordered check), nothing left, and packets on both the
    escape VCs and the adaptive one (the links' VC coverage bits)."""
    t = topo.torus((4, 1))
    stats = network.run_stats(t, traffic="uniform", rate=0.8, packet_flits=2, cycles=200,
                              warmup=40, seed=seed, backend="amaranth", vcs=3,
                              routing="adaptive")
    assert stats.problems() == []
    total = stats.total
    assert total("received") == total("injected") > 0
    assert total("sequence_errors") == total("header_errors") == total("payload_errors") == 0
    assert not stats.per_node["held"].any() and not stats.per_node["queued"].any()
    used = np.bitwise_or.reduce(stats.per_node["link_vcs"])
    vcs_used = {v for p in range(4) for v in range(3) if used >> (4 * p + v) & 1}
    assert 2 in vcs_used and vcs_used & {0, 1}
