"""``verif.bench.network.compare_twist`` and ``twist_markdown`` (issue 44's twist figures):
the runs it asks for, the peak over the offered loads, and the table, on stand-in runs
whose numbers are chosen here (no simulation)."""

from types import SimpleNamespace

import numpy as np
import pytest

from sim import network
from verif.bench import network as bench


def fake_stats(accepted, problems=()):
    run = network.NetworkRun(offered=0.0, accepted=accepted, latency_mean=10.0,
                             latency_p99=20.0, hops_mean=2.0,
                             link_utilization=np.zeros((2, 4)))
    return SimpleNamespace(run=run, cycles=100, seconds=0.1, problems=lambda: list(problems))


def test_twist_runs_the_all_to_all_set_up_and_keeps_the_peak(monkeypatch):
    calls = []
    # Accepted load by (routing, twisted, rate): the peak is not at the last rate.
    table = {("dor", False): [0.30, 0.40, 0.38], ("dor", True): [0.50, 0.45, 0.44],
             ("adaptive", False): [0.45, 0.60, 0.70], ("adaptive", True): [0.50, 1.00, 0.90]}

    def run_stats(topology, **kwargs):
        calls.append(kwargs)
        twisted = bool(topology.twist)
        return fake_stats(table[kwargs["routing"], twisted][
            (0.5, 1.0, 2.0).index(kwargs["rate"])])

    monkeypatch.setattr(network, "run_stats", run_stats)
    result = bench.compare_twist("2x4", rates=(0.5, 1.0, 2.0), cycles=300, warmup=100)
    assert len(calls) == 12
    assert {(c["traffic"], c["packet_flits"], c["message_packets"], c["local_ports"])
            for c in calls} == {("all_to_all", 4, 16, 2)}
    assert [(c["routing"], c["vcs"]) for c in calls[::3]] == \
        [("dor", 2), ("dor", 2), ("adaptive", 3), ("adaptive", 3)]
    result["bound"] = {False: 1.0, True: 1.5}          # chosen, for the table's arithmetic
    lines = bench.twist_markdown(result).splitlines()
    assert lines[2] == ("| dor, 2 VCs | 0.400 | 0.500 | 1.25x | 0.40 / 0.33 | "
                        "1.00 / 1.50 / 1.50x | not given |")
    assert lines[3] == ("| adaptive, 3 VCs | 0.700 | 1.000 | 1.43x | 0.70 / 0.67 | "
                        "1.00 / 1.50 / 1.50x | not given |")
    result["shape"] = "4x4x8"
    assert bench.twist_markdown(result).splitlines()[2].endswith("| 1.63x |")


def test_twist_stops_on_a_run_that_lost_packets(monkeypatch):
    monkeypatch.setattr(network, "run_stats",
                        lambda topology, **kwargs: fake_stats(0.5, ["1 packet lost"]))
    with pytest.raises(network.NetworkIntegrityError, match="2x4 regular, dor, 2 VCs, rate 1"):
        bench.compare_twist("2x4", rates=(1.0,))


def test_a_config_may_set_its_own_buffers_and_speedup(monkeypatch):
    """``(routing, vcs, buffer_flits)`` runs with those buffers (the others with
    ``buffer_flits``), ``(routing, vcs, buffer_flits, speedup)`` with that input speed-up
    too (the others with none), and the table says so."""
    calls = []

    def run_stats(topology, **kwargs):
        calls.append((kwargs["routing"], kwargs["vcs"], kwargs["buffer_flits"],
                      kwargs["speedup"]))
        return fake_stats(0.5)

    monkeypatch.setattr(network, "run_stats", run_stats)
    result = bench.compare_twist("2x4", configs=(("dor", 2), ("adaptive", 4, 16),
                                                 ("adaptive", 8, 16, 2)),
                                 rates=(1.0,), cycles=300, warmup=100)
    assert calls == ([("dor", 2, 8, 1)] * 2 + [("adaptive", 4, 16, 1)] * 2
                     + [("adaptive", 8, 16, 2)] * 2)
    lines = bench.twist_markdown(result).splitlines()
    assert lines[2].startswith("| dor, 2 VCs | 0.500 |")
    assert lines[3].startswith("| adaptive, 4 VCs, 16-flit buffers | 0.500 |")
    assert lines[4].startswith("| adaptive, 8 VCs, 16-flit buffers, speed-up 2 | 0.500 |")


def test_measure_goals_keeps_the_routing_comparison_as_json(monkeypatch):
    """``measure_goals`` stores ``compare_twist``'s result in its JSON file and reads it back
    unchanged; each routing has 16-flit buffers, adaptive routing its 8 VCs and
    speed-up."""
    import json
    monkeypatch.setattr(network, "run_stats", lambda topology, **kwargs: fake_stats(0.5))
    result = bench.compare_twist("2x4", configs=bench.TWIST_CONFIGS, rates=(1.0,),
                                 cycles=300, warmup=100)
    back = bench._twist_from_json(json.loads(json.dumps(bench._twist_to_json(result))))
    assert back == result
    assert bench.TWIST_CONFIGS == (("dor", 4, 16), ("adaptive", 8, 16, 2))


def test_measure_goals_rewrites_only_its_part_of_the_page(monkeypatch, tmp_path):
    """``tpu-rtl network --goals FILE`` writes between its markers and keeps the page's
    hand-written sections, before and after, as they were."""
    def run_stats(topology, **kwargs):
        stats = fake_stats(0.5)
        stats.run = stats.run._replace(
            link_utilization=np.zeros((topology.n_chips, 2 * len(topology.dims))))
        return stats

    monkeypatch.setattr(network, "run_stats", run_stats)
    page = tmp_path / "network.md"
    page.write_text(f"{bench.TITLE}\n\n{bench.GOALS_BEGIN}\nstale figures\n{bench.GOALS_END}\n\n"
                    "## Hand-written\n\nkept\n")
    bench.measure_goals(page, out=tmp_path / "out", twisted=())
    text = page.read_text()
    assert text.startswith(f"{bench.TITLE}\n\n{bench.GOALS_BEGIN}\nMeasured by ")
    assert text.endswith(f"{bench.GOALS_END}\n\n## Hand-written\n\nkept\n")
    assert "stale figures" not in text
    assert ("| saturation throughput, 2 VCs | >= 0.70 flits/node/cycle | 0.500 | **missed** by "
            "0.200 |") in text
