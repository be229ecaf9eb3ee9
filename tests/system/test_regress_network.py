"""The ``network`` regression suite (``verif.suites.network``) and the link stall knob.

A seed whose traffic is corrupted behind the check's back fails, naming its seed, build and
run; a stalled network still delivers everything, the ``stalled`` statistic counts what
the knob asked for, and stall 0 holds nothing; the suite's own checks catch what the
sinks cannot see. Marked slow: one regression seed end to end (on the Amaranth simulator:
4 short runs of an 8-node network, and the OCS case) passes, with its coverage sampled
from the hardware, and so does a whole Verilator seed.
"""

import numpy as np
import pytest
from cocotb_coverage.coverage import coverage_db

from golden import topology as topo
from sim import network
from verif.regress import functional_summary
from verif.regress.worker import run_seed
from verif.suites.network import coverage, ocs, stimulus, suite


@pytest.mark.slow
def test_one_seed_passes_with_coverage(tmp_path):
    """Seed 1 (a 2x4 torus with 2 VCs on Amaranth): both cases pass, and the coverage it
    recorded includes what its stimulus must reach."""
    record = run_seed("network", 1, "amaranth", tmp_path)
    assert record["status"] == "pass", record
    cases = {c["case"]: c for c in record["cases"]}
    assert set(cases) == {"network", "ocs"}
    assert cases["network"]["checked"] == stimulus.RUNS["amaranth"]
    assert cases["network"]["packets"] > 0
    assert cases["ocs"]["commits"] == 1 + len(ocs.EVENTS)     # the start, and the deck
    _, text = functional_summary(tmp_path / "network.cov.xml")
    # Four runs of the four kinds on a 2-D torus: every 2-D injection turn and ejection,
    # links on VCs 0 and 1, the stall knob both ways.
    for point in ("network.topology", "network.stall"):
        assert f"{point:<48}{100.0:7.1f}%" in text, text
    for name in ("inject to +x", "inject to -y", "from +y to eject", "from -x to +y"):
        assert f"network.turn: {name}\n" not in text, text
    assert "network.vcs: 4" in text and "network.dims: 3" in text       # not this build
    _, text = functional_summary(tmp_path / "ocs.cov.xml")
    assert "network.ocs_commit                                100.0%" in text, text


@pytest.mark.slow
def test_corrupted_traffic_fails_the_seed(tmp_path, monkeypatch):
    """``inject="golden-fault"``: the first run flips a payload bit of every 5th packet
    while the check expects none; the sinks catch each, and the seed fails."""
    monkeypatch.setitem(stimulus.RUNS, "amaranth", 1)
    record = run_seed("network", 1, "amaranth", tmp_path, inject="golden-fault",
                      only="network")
    assert record["status"] == "fail"
    (case,) = record["cases"]
    assert case["mismatches"] == 1
    message = case["first_mismatch"]
    assert message.startswith("network seed 1 (2x4, dor wormhole, one FIFO, 2 VCs"), message
    assert "corrupted is" in message and "payload_errors is" in message, message


def _run(stall, seed):
    return stimulus.Run(kind="regular", failed=None, traffic="uniform", packet_flits=2,
                        rate=0.4, message_packets=1, stall=stall, seed=seed, cycles=120)


def test_stall_knob_and_the_suite_checks(seed):
    """stall 0.3 holds each torus output in about 30% of the cycles of the run and the
    drain (counted in ``stalled``), every packet still arrives once and intact, and later
    on average; stall 0 holds nothing. The suite's own checks pass both runs, and fail a
    turn dimension order never takes (+y in, +x out) in a regular torus, a stall count
    that does not match the knob, and a packet at a failed chip."""
    topology = topo.torus("2x2")
    common = dict(traffic="uniform", rate=0.4, packet_flits=2, cycles=120, warmup=20,
                  seed=seed, backend="amaranth")
    free = network.run_stats(topology, **common)
    held = network.run_stats(topology, stall=0.3, **common)
    assert free.total("stalled") == 0
    for stats in (free, held):
        assert stats.problems() == []
        assert stats.total("received") == stats.total("injected") > 0
    # 4 nodes x 4 torus outputs, each held with probability 0.3 a cycle while traffic
    # runs and drains.
    port_cycles = 4 * 4 * (120 + held.drain_cycles)
    assert 0.25 * port_cycles < held.total("stalled") < 0.35 * port_cycles
    assert held.run.latency_mean > free.run.latency_mean
    with pytest.raises(ValueError, match="stall must be a number from 0 to 1"):
        network.run_stats(topology, stall=1.5, **common)

    assert suite.check_stats(free, _run(0.0, seed), topology) == []
    assert suite.check_stats(held, _run(0.3, seed), topology) == []
    assert suite.check_stats(free, _run(0.1, seed), topology) == [
        "the stall knob at 0.1 held links for 0 port-cycles"]
    free.per_node["turns_lo"][2] |= 1 << (8 * 2 + 0)
    free.per_node["stalled"][1] = 3
    assert suite.check_stats(free, _run(0.0, seed), topology) == [
        "the stall knob at 0.0 held links for 3 port-cycles",
        "chip 2 routed turns outside dimension order: ['from +y to +x']"]
    failed = topo.torus("2x2", failed=[3])
    assert "failed chip 3 has received" in " ".join(
        suite.check_stats(held, _run(0.3, seed), failed))


@pytest.mark.slow
def test_one_verilator_seed(tmp_path):
    """A whole Verilator seed: 8 runs of 4,000 cycles on its own build."""
    record = run_seed("network", 2, "verilator", tmp_path)
    assert record["status"] == "pass", record


@pytest.mark.parametrize("backend", ["verilator", "amaranth"])
def test_the_last_run_of_each_seed_takes_a_live_link_down(backend):
    """One run a seed (the last) takes a link down, a lit one of its topology, in the
    middle half of its traffic, and its description says so."""
    for seed in range(1, 9):
        b = stimulus.build(seed, backend)
        planned = stimulus.runs(seed, b, backend)
        assert [r.link_down is not None for r in planned] == \
            [False] * (len(planned) - 1) + [True]
        last = planned[-1]
        chip, port, cycle = last.link_down
        topology = stimulus.topology_of(b, last)
        assert topology.ocs[chip * topology.n_ports + port] >= 0, (seed, last)
        assert last.cycles // 4 <= cycle < 3 * last.cycles // 4
        assert f"the link out of chip {chip} {topo.PORT_NAMES[port]} down at {cycle}" \
            in last.describe()
        assert last.settings()["link_down"] == last.link_down


def test_seeds_deal_both_routings():
    """Seeds 1 to 8 build dimension-order routers with 2 and 4 VCs and adaptive ones with
    3, 4 and 8, each routing on a 2-D and a 3-D network and on a shape that twists, and
    adaptive ones with and without speed-up on both; dimension order with one injection
    FIFO (wormhole) and with injection queues (wormhole and cut-through); 16 seeds give
    every 2-D shape both routings; a cut-through run's packets fit a buffer."""
    builds = [stimulus.build(seed) for seed in range(1, 9)]
    assert [b.routing for b in builds] == ["dor"] * 4 + ["adaptive"] * 4
    assert {(b.routing, b.vcs) for b in builds} == {
        ("dor", 2), ("dor", 4), ("adaptive", 3), ("adaptive", 4), ("adaptive", 8)}
    assert {(len(b.dims), b.speedup) for b in builds if b.routing == "adaptive"} == {
        (2, 1), (2, 2), (3, 1), (3, 2)}
    assert [(b.switching, b.injection_queues) for b in builds[:4]] == [
        ("wormhole", False), ("wormhole", False), ("cut_through", True), ("wormhole", True)]
    assert {b.flow_control for b in builds} == set(stimulus.FLOW_CONTROLS) == {
        "dor wormhole, one FIFO", "dor wormhole, queues", "dor cut_through, queues",
        "adaptive cut_through, queues"}
    for routing in ("dor", "adaptive"):
        mine = [b for b in builds if b.routing == routing]
        assert {len(b.dims) for b in mine} == {2, 3}
        assert any(b.can_twist() for b in mine), routing
    pairs = {(stimulus.build(seed).shape, stimulus.build(seed).routing) for seed in range(1, 17)}
    assert {(shape, r) for shape in stimulus.SHAPES_2D for r in ("dor", "adaptive")} <= pairs
    for seed in range(1, 17):
        b = stimulus.build(seed)
        if b.routing == "adaptive" or b.switching == "cut_through":
            assert b.cut_through
            assert all(r.packet_flits <= b.buffer_flits for r in stimulus.runs(seed, b))


def _hits(name):
    return {bin_: hits for bin_, hits in coverage_db[name].detailed_coverage.items()}


def test_adaptive_bins_are_read_from_the_adaptive_words():
    """The ``adaptive`` and ``inject_queues`` words (``hdl.testbench.node.ADAPTIVE_STATS``)
    decode to the bins their bits name, the queues' also by the build's routing; a
    dimension-order run with one injection FIFO has neither word, and samples none of these
    bins; one with injection queues has their word alone."""
    coverage_db.clear()
    sampler = coverage.Sampler()
    zero = np.zeros(2, dtype=np.int64)
    dor = {name: zero for name in ("turns_lo", "turns_hi", "link_vcs", "datelines", "starved")}
    sampler.observed(dor, 4, [0, 1], "dor")
    for point in ("network.adaptive_hop", "network.inject_queue",
                  "network.routing_inject_queue"):
        assert not any(_hits(point).values()), point
    sampler.observed(dict(dor, inject_queues=np.array([0, 1 << 17])), 4, [0, 1], "dor")
    assert {b for b, h in _hits("network.routing_inject_queue").items() if h} == {"dor passed"}
    assert not any(_hits("network.adaptive_hop").values())
    words = dict(dor, adaptive=np.array([1 << 0 | 1 << 10, 1 << 21]),
                 inject_queues=np.array([1 << 3 | 1 << 9, 1 << 16]))
    sampler.observed(words, 6, [0, 1], "adaptive")
    assert {b for b, h in _hits("network.adaptive_hop").items() if h} == {
        "+x, escape port", "+y, other port"}
    assert {b for b, h in _hits("network.fallback").items() if h} == {"-z"}
    assert {b for b, h in _hits("network.inject_queue").items() if h} == {
        "queue 3 used", "queue 1 full", "queue 0 passed", "queue 1 passed"}
    assert {b for b, h in _hits("network.routing_inject_queue").items() if h} == {
        "dor passed", "adaptive used", "adaptive full", "adaptive passed"}
    coverage_db.clear()


def _bins_loaded_and_idle(points, *, routing="dor", **build):
    """The bins of ``points`` a 2x2 network (Amaranth, 2-flit uniform traffic, seed 3)
    reaches loaded with link stalls (offered 1.0, stall 0.3) and idle (offered 0.05, no
    stalls), each ``"point: bin"``; every run checked clean."""
    topology = topo.torus("2x2")
    covered = {}
    for name, rate, stall in (("loaded", 1.0, 0.3), ("idle", 0.05, 0.0)):
        coverage_db.clear()
        sampler = coverage.Sampler()
        stats = network.run_stats(topology, traffic="uniform", rate=rate, packet_flits=2,
                                  buffer_flits=4, cycles=150, warmup=20, seed=3,
                                  backend="amaranth", routing=routing, stall=stall, **build)
        assert stats.problems() == []
        sampler.observed(stats.per_node, topology.n_ports, [0, 1, 2, 3], routing)
        covered[name] = {f"{point}: {b}" for point in points
                         for b, h in _hits(point).items() if h}
    coverage_db.clear()
    return covered


@pytest.mark.slow
def test_adaptive_bins_need_their_stimulus():
    """On a 2x2 adaptive network (Amaranth), a loaded run with link stalls reaches the
    bins of another productive direction, of full injection queues and of escape
    fallbacks; the same network at 5% load without stalls leaves them uncovered (so the
    bins can fail: take the load away and the regression's coverage falls short)."""
    covered = _bins_loaded_and_idle(("network.adaptive_hop", "network.fallback",
                                     "network.inject_queue"), routing="adaptive", vcs=3)
    wanted = {"network.adaptive_hop: +x, other port", "network.inject_queue: queue 0 full",
              "network.fallback: -x"}
    assert wanted <= covered["loaded"], covered["loaded"]
    assert not wanted & covered["idle"], covered["idle"]


@pytest.mark.slow
def test_dimension_order_queues_report_what_they_passed():
    """On a 2x2 dimension-order network with injection queues (Amaranth), a loaded run
    with link stalls has a queue pass another's blocked head and a header wait for a full
    queue (``network.routing_inject_queue``: ``dor passed``, ``dor full``); at 5% load
    without stalls the queues are only used."""
    point = "network.routing_inject_queue"
    covered = _bins_loaded_and_idle((point,), vcs=2, injection_queues=True)
    assert covered == {"loaded": {f"{point}: dor {what}" for what in ("used", "full", "passed")},
                       "idle": {f"{point}: dor used"}}
