"""``tpu-rtl network`` (``verif.network_cli``): the latency-load table, the two plots, and a
side-by-side sweep of a regular and a twisted torus on the compiled path."""

import argparse

import numpy as np
import pytest

from sim.network import NetworkRun
from verif import network_cli


class _Stats:
    def __init__(self, run):
        self.run = run


def fake_curve(scale):
    util = np.full((8, 4), 0.25 * scale)
    return [(rate, _Stats(NetworkRun(rate, rate * scale, 8 + 10 * rate, 12 + 20 * rate, 1.5,
                                     util)))
            for rate in (0.1, 0.5)]


def test_table_puts_topologies_side_by_side():
    table = network_cli.latency_table({"regular": fake_curve(1.0),
                                       "twisted": fake_curve(0.9)[:1]}).splitlines()
    columns = ("offered", "accepted", "latency", "p99", "hops")
    assert table[0].split() == ["rate"] + [word for name in ("regular", "twisted")
                                           for col in columns for word in (name, col)]
    assert table[2].split() == ["0.1", "0.100", "0.100", "9.0", "14", "1.50",
                                "0.100", "0.090", "9.0", "14", "1.50"]
    assert table[3].split() == ["0.5", "0.500", "0.500", "13.0", "22", "1.50"]


def test_plots_are_written(tmp_path):
    paths = network_cli.plot_curves({"regular": fake_curve(1.0)}, tmp_path, "2x4", "uniform")
    assert [p.name for p in paths] == ["latency_2x4.png", "links_2x4.png"]
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def parse(*argv):
    parser = argparse.ArgumentParser(prog="tpu-rtl")
    network_cli.add_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["network", *argv])


def test_sweep_side_by_side(tmp_path, capsys):
    args = parse("--topology", "2x4", "--twist", "--rates", "0.2,0.6", "--cycles", "300",
                 "--warmup", "100", "--packet-flits", "2", "--out", str(tmp_path))
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
