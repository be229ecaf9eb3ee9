"""The tpu-rtl command line: verdicts, exit statuses and one-line errors."""

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from verif import cli, demo
from verif.cli import common
from verif.suites.mxu import matmul_check

from ..support import error_lines


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "verif.cli", *args], capture_output=True,
                          text=True)


def test_help_lists_every_command():
    proc = _cli("--help")
    assert proc.returncode == 0
    for command in ("demo", "matmul", "sparsecore", "export", "fpga", "regress", "bench"):
        assert command in proc.stdout


@pytest.mark.parametrize("args", [["--help"], ["export"], ["regress", "arith", "--seeds", "0"]])
def test_help_and_usage_errors_import_no_hdl_nor_simulator(args):
    """The parser answers at once: neither Amaranth nor any block, suite or backend is
    loaded to print help or to refuse a flag."""
    probe = ("import sys\nfrom verif.cli import main\nstatus = main(sys.argv[1:])\n"
             "heavy = ('amaranth', 'hdl', 'cocotb', 'sim.backends', 'sim.blocks', "
             "'verif.suites')\n"
             "loaded = sorted(m for m in sys.modules if m.startswith(heavy))\n"
             "print(status, loaded)")
    proc = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True,
                          text=True)
    status, loaded = proc.stdout.strip().splitlines()[-1].split(" ", 1)
    assert status == ("0" if args == ["--help"] else "2"), proc.stdout + proc.stderr
    assert loaded == "[]"


def test_a_command_runs_with_the_collectors_thresholds():
    """A command elaborates designs, so it runs with ``sim.collector``'s thresholds; a
    usage error leaves Python's own."""
    probe = ("import gc, sys\nfrom verif.cli import main\nbefore = gc.get_threshold()\n"
             "status = main(sys.argv[1:])\nprint(status, before, gc.get_threshold(), sep='|')")
    found = {}
    for args in (["export"], ["export", "mxu", "--param", "rows=0"]):
        proc = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True,
                              text=True)
        status, before, after = proc.stdout.strip().splitlines()[-1].split("|")
        assert status == "2", proc.stdout + proc.stderr
        found[args[-1]] = before, after
    before, after = found["export"]
    assert after == before != "(20000, 20, 20)"
    assert found["rows=0"][1] == "(20000, 20, 20)"


def test_block_and_suite_help_lists_the_catalogues():
    from sim.blocks import BLOCKS
    from verif.regress import SUITE_NAMES
    assert common.BLOCK_NAMES == tuple(BLOCKS)
    assert ", ".join(BLOCKS) in " ".join(_cli("export", "--help").stdout.split())
    regress_help = " ".join(_cli("regress", "--help").stdout.split())
    for suite in SUITE_NAMES:
        assert suite in regress_help


def test_matmul_prints_a_verdict(capsys):
    assert cli.main(["matmul", "--m", "5", "--k", "3", "--n", "7", "--rows", "2", "--cols", "2",
                     "--numerics", "ieee", "--special-density", "0.2", "--with-acc"]) == 0
    out = capsys.readouterr().out
    assert "matmul 5x3x7 on a 2x2 MXU" in out and "35 results bit-exact" in out
    assert "utilization: " in out


def test_matmul_from_files(tmp_path, capsys):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", np.eye(3, dtype=np.float32).astype(ml_dtypes.bfloat16)
            .view(np.uint16))
    assert cli.main(["matmul", "--x", str(tmp_path / "x.npy"), "--w", str(tmp_path / "w.npy"),
                     "--rows", "2", "--cols", "2"]) == 0
    assert "matmul 2x3x3" in capsys.readouterr().out


def test_matmul_exits_non_zero_on_a_mismatch(monkeypatch, capsys):
    real = matmul_check.golden_mxu.matmul
    monkeypatch.setattr(matmul_check.golden_mxu, "matmul",
                        lambda *a, **k: real(*a, **k) * np.float32(2))
    assert cli.main(["matmul", "--m", "2", "--k", "2", "--n", "2", "--rows", "2",
                     "--cols", "2"]) == 1
    err = error_lines(capsys.readouterr().err)
    assert len(err) == 1
    assert err[0].startswith("tpu-rtl matmul: mismatch: ") and "out[0, 0]" in err[0]


def test_demo_reports_and_fails_on_a_mismatch(monkeypatch, capsys):
    # The system part has tests of its own (tests/system/test_system_cli.py).
    monkeypatch.setattr(demo, "system_demo", lambda **kwargs: True)
    monkeypatch.setattr(demo, "embedding_demo", lambda **kwargs: True)
    monkeypatch.setattr(demo, "MXU_CASES", ((3, 2, 2, "tpu", True, 0.2),))
    monkeypatch.setattr(demo.corpus, "binary_corpus", lambda op, rng, n: (
        np.array([0x3F80, 0x0001], np.uint16 if op == "bf16_mul" else np.uint32),) * 2)
    monkeypatch.setattr(demo.corpus, "unary_corpus",
                        lambda op, rng, n: np.array([0x3F808000], np.uint32))
    assert cli.main(["demo"]) == 0
    assert "bit-exact" not in capsys.readouterr().out       # the blocks only on request
    # One unit's golden broken: only its rows (both numerics) fail, and the run with them.
    real = demo.golden_arith.fp32_to_bf16
    monkeypatch.setattr(demo.golden_arith, "fp32_to_bf16", lambda *a, **k: real(*a, **k) ^ 1)
    assert cli.main(["demo", "--blocks"]) == 1
    captured = capsys.readouterr()
    assert captured.out.count("bit-exact") == 5          # 1 matmul + 4 of the 6 units
    assert captured.out.count("MISMATCH") == 2
    assert "first mismatch: fp32_to_bf16/tpu #0" in captured.out
    assert captured.err.strip() == "tpu-rtl demo: results differ from golden (see the tables " \
                                   "above)"


@pytest.mark.parametrize("args, status, message", [
    (["matmul", "--m", "5"], 2, "give --k, --n (or --x and --w files)"),
    (["matmul", "--x", "a.npy"], 2, "give both --x and --w, or neither"),
    (["matmul", "--x", "missing.npy", "--w", "missing.npy"], 2, "--x missing.npy: no such file"),
    (["matmul", "--m", "2", "--k", "2", "--n", "2", "--rows", "0"], 2, "must be a positive"),
    (["regress", "mxu", "--sim", "vcs"], 2, "invalid choice: 'vcs'"),
    (["regress", "bf16_mul_exhaustive", "--sim", "amaranth"], 2, "runs on a compiled Verilator"),
    (["fpga", "mxu", "--param", "rows=x"], 2, "parameter rows must be an integer"),
    (["fpga", "router", "--lut-mapper", "vpr"], 2, "--lut-mapper: invalid choice: 'vpr'"),
])
def test_bad_arguments_are_one_line_errors(args, status, message, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "verif.cli", *args], capture_output=True,
                          text=True, cwd=tmp_path)
    assert proc.returncode == status
    assert message in proc.stderr and "Traceback" not in proc.stderr
