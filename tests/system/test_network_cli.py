"""``tpu-rtl network`` (``verif.cli.network``): the latency-load table, the two plots, and a
side-by-side sweep of a regular and a twisted torus on the compiled path."""

import argparse

import numpy as np
import pytest

from sim.network import NetworkRun
from verif import report
from verif.bench import network as network_bench
from verif.cli import network as network_cli


class _Stats:
    def __init__(self, run):
        self.run = run


def fake_curve(scale):
    util = np.full((8, 4), 0.25 * scale)
    return [(rate, _Stats(NetworkRun(rate, rate * scale, 8 + 10 * rate, 12 + 20 * rate, 1.5,
                                     util)))
            for rate in (0.1, 0.5)]


def test_table_puts_topologies_side_by_side():
    table = report.latency_table({"regular": fake_curve(1.0),
                                       "twisted": fake_curve(0.9)[:1]}).splitlines()
    columns = ("offered", "accepted", "latency", "p99", "hops")
    assert table[0].split() == ["rate"] + [word for name in ("regular", "twisted")
                                           for col in columns for word in (name, col)]
    assert table[2].split() == ["0.1", "0.100", "0.100", "9.0", "14", "1.50",
                                "0.100", "0.090", "9.0", "14", "1.50"]
    assert table[3].split() == ["0.5", "0.500", "0.500", "13.0", "22", "1.50"] + ["-"] * 5


def test_plots_are_written(tmp_path):
    paths = report.plot_curves({"regular": fake_curve(1.0)}, tmp_path, "2x4", "uniform")
    assert [p.name for p in paths] == ["latency_2x4.png", "links_2x4.png"]
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def parse(*argv):
    parser = argparse.ArgumentParser(prog="tpu-rtl")
    network_cli.add_parser(parser.add_subparsers(dest="command", required=True), "help")
    return parser.parse_args(["network", *argv])


def test_sweep_side_by_side(tmp_path, capsys):
    args = parse("--topology", "2x4", "--compare-twist", "--rates", "0.2,0.6", "--cycles",
                 "300", "--warmup", "100", "--packet-flits", "2", "--out", str(tmp_path))
    args.func(args)
    out = capsys.readouterr().out
    assert "regular offered" in out and "twisted offered" in out
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["0.2"], ["0.6"])]
    assert len(rows) == 2 and all(len(row) == 11 for row in rows)
    assert (tmp_path / "latency_2x4.png").exists() and (tmp_path / "links_2x4.png").exists()


def test_bad_rates():
    args = parse("--rates", "0.1,lots")
    with pytest.raises(ValueError, match="--rates must be numbers separated by commas"):
        args.func(args)


@pytest.mark.parametrize("argv, match", [
    (("--routing", "adaptive"), "--routing adaptive needs --vcs 3 or more"),
    (("--routing", "adaptive", "--vcs", "3", "--packet-flits", "9"),
     r"--packet-flits \(9\) must fit --buffer-flits \(8\)"),
    (("--escape-bias", "4"), "--escape-bias would do nothing without --routing adaptive"),
    (("--speedup", "3"), r"--speedup 3 needs .* at most --vcs \(2\)"),
    (("--routing", "adaptive", "--vcs", "3", "--switching", "wormhole"),
     "--routing adaptive is cut-through"),
    (("--switching", "cut_through", "--packet-flits", "9"),
     r"--switching cut_through needs --packet-flits \(9\) to fit --buffer-flits \(8\)"),
    (("--routing", "adaptive", "--vcs", "3", "--injection-queues"),
     "--injection-queues would do nothing with --routing adaptive"),
])
def test_router_flags_are_refused_together_before_any_build(argv, match, tmp_path):
    args = parse(*argv, "--out", str(tmp_path / "out"))
    with pytest.raises(ValueError, match=match):
        args.func(args)
    assert not (tmp_path / "out").exists()


def test_router_flags_reach_the_run(monkeypatch, tmp_path, capsys):
    """``--routing``, ``--speedup`` and ``--escape-bias`` are the runs' parameters."""
    from sim import network
    seen = []

    def fake_run_stats(topology, **settings):
        seen.append(settings)
        raise network.NetworkIntegrityError("stop here")
    monkeypatch.setattr(network, "run_stats", fake_run_stats)
    args = parse("--routing", "adaptive", "--vcs", "4", "--speedup", "2", "--escape-bias",
                 "3", "--out", str(tmp_path))
    with pytest.raises(Exception, match="stop here"):
        args.func(args)
    assert {k: seen[0][k] for k in ("routing", "vcs", "speedup", "escape_bias")} == {
        "routing": "adaptive", "vcs": 4, "speedup": 2, "escape_bias": 3}
    assert "adaptive routing, 4 VCs x 8 flits, speed-up 2" in capsys.readouterr().out


def test_injection_queues_reach_the_run(monkeypatch, tmp_path, capsys):
    """``--injection-queues`` gives dimension order's runs ``injection_queues=True``;
    without it the run keeps the routing's own (None)."""
    from sim import network
    seen = []

    def fake_run_stats(topology, **settings):
        seen.append(settings)
        raise network.NetworkIntegrityError("stop here")
    monkeypatch.setattr(network, "run_stats", fake_run_stats)
    for flags in (("--injection-queues",), ()):
        args = parse(*flags, "--out", str(tmp_path))
        with pytest.raises(Exception, match="stop here"):
            args.func(args)
    assert [s["injection_queues"] for s in seen] == [True, None]
    assert "2 VCs x 8 flits, injection queues, 2-cycle links" in capsys.readouterr().out


def test_goal_commands_parse_to_the_measured_settings():
    """The command docs/network.md quotes for a figure sets what ``measure_goals`` ran."""
    line = network_bench.command("4x4x8", [2], cycles=6000, warmup=2000, seed=1, twist=True,
                               traffic="all_to_all", packet_flits=4, message_packets=16,
                               local_ports=2)
    args = parse(*line.split()[2:])
    assert (args.topology, args.compare_twist, args.traffic, args.packet_flits,
            args.message_packets, args.local_ports, args.vcs) == ("4x4x8", True, "all_to_all", 4,
                                                                  16, 2, 2)
    assert (args.rates, args.cycles, args.warmup, args.seed, args.backend, args.all_points) \
        == ("2", 6000, 2000, 1, "verilator", True)
    args = parse(*network_bench.command("4x4", [0.1, 0.85], cycles=4000, warmup=1000, seed=7,
                                      vcs=4).split()[2:])
    assert (args.vcs, args.rates, args.compare_twist, args.twist, args.traffic) == \
        (4, "0.1,0.85", False, False, "uniform")


def test_goal_verdicts():
    """Each goal is met or missed by its distance to the target, from the numbers given."""
    def config(zero, sat):
        return {"zero": {"latency_mean": zero}, "sat": {"accepted": sat}}
    rows = [("4x4, 2 VCs", config(13.5, 0.69), "4x4", {}),
            ("4x4, 4 VCs", config(13.5, 0.90), "4x4", {"vcs": 4})]
    twists = [("4x4x8", {False: {"accepted": 0.5}, True: {"accepted": 0.6}})]
    lines = network_bench._goal_summary(rows, twists, lambda x, digits=3: f"{x:.{digits}f}")
    verdicts = [line.rsplit("|", 2)[1].strip() for line in lines if line.startswith("| ")][1:]
    assert verdicts == ["met", "**missed** by 0.010", "met",
                        "**missed** by 0.27x (below the band's 1.47x)"]


def test_wired_into_tpu_rtl():
    from verif.cli import _parser
    args = _parser().parse_args(["network", "--topology", "4x4x8", "--twist"])
    assert args.func is network_cli.cmd_network and args.twist and args.topology == "4x4x8"


def test_side_by_side_panels_share_one_load():
    curves = {"regular": fake_curve(1.0), "twisted": fake_curve(0.9)[:1]}
    assert [(name, point.run.offered) for name, point in report.common_load_points(curves)] \
        == [("regular", 0.1), ("twisted", 0.1)]


def test_a_heat_map_leaves_out_dimensions_of_one_chip(tmp_path):
    import matplotlib.image
    from golden import topology
    heights = {}
    for shape in ((1, 4), (2, 2, 2)):
        t = topology.torus(shape)
        path = report.plot_links(np.full((t.n_chips, 2 * len(shape)), 0.5), t,
                                 tmp_path / f"{len(shape)}.png", "all_reduce")
        heights[shape] = matplotlib.image.imread(path).shape[0]
    # One panel (dimension y) against three.
    assert heights[(1, 4)] * 1.5 < heights[(2, 2, 2)]


@pytest.mark.parametrize("argv, match", [
    (("--router-profile",), "--router-profile reads the run's waveform: give --waves"),
    (("--router-profile", "--waves", "run.fst", "--rates", "0.5"),
     "--router-profile reads a VCD: name --waves FILE.vcd, not run.fst"),
    (("--waves", "run.vcd", "--rates", "0.2,0.5"), "--waves records one run: .* not 2 runs"),
    (("--waves", "run.vcd", "--rates", "0.5", "--compare-twist", "--topology", "2x4"),
     "--waves records one run: .* not 2 runs"),
    (("--waves", "run.vcd", "--goals", "goals.md"),
     "--waves and --router-profile would do nothing with --goals"),
])
def test_waves_flags_are_refused_before_any_build(argv, match, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = parse(*argv, "--out", str(tmp_path / "out"))
    with pytest.raises(ValueError, match=match):
        args.func(args)
    assert not (tmp_path / "out").exists() and not (tmp_path / "goals.md").exists()


def test_waves_reach_the_run(monkeypatch, tmp_path):
    from sim import network
    seen = []

    def fake_run_stats(topology, **settings):
        seen.append(settings)
        raise network.NetworkIntegrityError("stop here")
    monkeypatch.setattr(network, "run_stats", fake_run_stats)
    waves = tmp_path / "run.vcd"
    args = parse("--waves", str(waves), "--rates", "0.5", "--out", str(tmp_path))
    with pytest.raises(Exception, match="stop here"):
        args.func(args)
    assert seen[0]["waves"] == str(waves)


def test_the_profile_is_printed_by_port(capsys, tmp_path):
    """The hand-written waveform of ``tests/ici/router_profile_waves.py``: one router whose
    two outputs, on a topology of one torus port pair per axis, are +x and -x."""
    from golden import topology as topo
    from tests.ici.router_profile_waves import write_router_vcd
    vcd = write_router_vcd(tmp_path / "router.vcd")
    network_cli._print_profile(str(vcd), topo.torus((1, 4)))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("router outputs and inputs, share of the 3 measured cycles (mean of 1 "
                        "routers):")
    assert lines[3] == "| +x | 0.333 | 0.000 | 0.000 | 0.000 | 0.667 |"
    assert lines[4] == "| -x | 0.000 | 0.333 | 0.000 | 0.333 | 0.333 |"
    assert lines[8] == "| +x | 0.667 | 0.333 | 0.000 |"
