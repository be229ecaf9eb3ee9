"""The ``network`` regression suite (``verif.suites.network``) and the link stall knob.

A seed whose traffic is corrupted behind the check's back fails, naming its seed, build and
run; a stalled network still delivers everything, the ``stalled`` statistic counts what
the knob asked for, and stall 0 holds nothing; the suite's own checks catch what the
sinks cannot see. Marked slow: one regression seed end to end (on the Amaranth simulator:
4 short runs of an 8-node network, and the OCS case) passes, with its coverage sampled
from the hardware, and so does a whole Verilator seed.
"""

import pytest

from golden import topology as topo
from sim import network
from verif.regress import functional_summary
from verif.regress.worker import run_seed
from verif.suites.network import ocs, stimulus, suite


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
    assert message.startswith("network seed 1 (2x4, 2 VCs"), message
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
