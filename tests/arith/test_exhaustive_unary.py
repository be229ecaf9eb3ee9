"""The exhaustive check of unary fp32 units and the ``vpu_transcendental_exhaustive`` suite.

Every run here is a small slice on one harness: ``fp32_sqrt`` with
``stages=1`` in "ieee" numerics, the cheapest unary unit to build (about 15 s
the first time, cached after). Where the suite's plumbing is tested, that
unit stands in for rcp, rsqrt and exp (:data:`sim.exhaustive_unary.UNITS`
patched), so no test waits for their builds. The full runs are
``tpu-rtl regress vpu_transcendental_exhaustive``.
"""

import stat
import subprocess
from dataclasses import replace

import numpy as np
import pytest

import sim.exhaustive_unary
from golden import arith as golden_arith
from golden.formats import NUMERICS
from sim.toolchain.build_cache import build_root
from sim.exhaustive import ExhaustiveError
from sim.exhaustive_unary import (TRANSCENDENTAL, UNITS, UnaryUnit, build_unary_harness,
                                  run_unary_exhaustive)
from verif import cli
from verif.regress.executor import Lost
from verif.regress.executor.slices import CHECKS, merge, run_slice, slices
from verif.regress import TRANSCENDENTAL as SUITE
from verif.regress import run_exhaustive

MODE = "ieee"
PARAMS = {"stages": 1}
#: The one harness of this file.
SQRT = UnaryUnit("fp32_sqrt", golden_arith.fp32_sqrt, PARAMS)
FOUR = 0x40800000               # 4.0, whose root 2.0 = 0x40000000 is known by hand


def _wrong_at(bad):
    """fp32_sqrt's golden with the last bit flipped at the inputs ``bad``."""
    def golden(a, *, numerics):
        expected = golden_arith.fp32_sqrt(a, numerics=numerics)
        expected[np.isin(a, np.array(sorted(bad), dtype=np.uint32))] ^= 1
        return expected
    return golden


@pytest.fixture
def as_transcendental(monkeypatch):
    """The cheap square root unit standing in for rcp, rsqrt and exp."""
    for function in TRANSCENDENTAL:
        monkeypatch.setitem(UNITS, function, SQRT)


def _harness(lo, hi):
    exe = build_unary_harness("sqrt", MODE, PARAMS)
    out = subprocess.run([str(exe), str(lo), str(hi)], capture_output=True, check=True).stdout
    return np.frombuffer(out, dtype=np.uint32)


def test_harness_output_is_the_root():
    # Read the harness directly, independently of the driver's reader, against
    # roots known by hand.
    assert _harness(FOUR, FOUR + 1).tolist() == [0x40000000]          # sqrt(4) = 2
    assert _harness(0x40100000, 0x40100001).tolist() == [0x3FC00000]  # sqrt(2.25) = 1.5
    # +inf, a NaN; then -0, a negative subnormal (NaN); the last two patterns (NaNs).
    assert _harness(0x7F800000, 0x7F800002).tolist() == [0x7F800000, 0x7FC00000]
    assert _harness(0x80000000, 0x80000002).tolist() == [0x80000000, 0x7FC00000]
    assert _harness(0xFFFFFFFE, 1 << 32).tolist() == [0x7FC00000] * 2
    # More than one 65536-result block, the last one short; sqrt is monotonic.
    got = _harness(0x3F7FFFF0, 0x3F7FFFF0 + 65536 + 33)
    assert got.size == 65536 + 33 and got[0x10] == 0x3F800000
    assert np.all(np.diff(got.astype(np.int64)) >= 0)


@pytest.mark.parametrize("args", [["5", "5"], ["0", "4294967297"], ["-1", "3"], ["x", "1"],
                                  ["1"], ["0x10", "8"]])
def test_harness_rejects_bad_arguments(args):
    exe = build_unary_harness("sqrt", MODE, PARAMS)
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True)
    assert proc.returncode == 2 and "usage" in proc.stderr


@pytest.mark.parametrize("x_range", [
    (0x3F000000 - 3, 0x3F000000 + (1 << 20) + 5),   # more than a chunk, odd length
    (0x007FFF00, 0x00800100),                       # largest subnormals, smallest normals
    (0x7F7FFF00, 0x7F800100),                       # largest finite values, inf, NaNs
    (0xFFFFFF00, 1 << 32),                          # the last patterns (negative NaNs)
], ids=["chunks", "subnormal", "special", "top"])
def test_slice_matches_golden(x_range):
    calls = []
    result = run_unary_exhaustive("sqrt", MODE, params=PARAMS, jobs=2, x_range=x_range,
                                  progress=lambda done, total: calls.append((done, total)))
    total = x_range[1] - x_range[0]
    assert (result.name, result.numerics, result.unit) == ("fp32_sqrt", MODE, "inputs")
    assert result.checked == total
    assert result.mismatches == 0 and result.first_mismatches == [] and result.ok
    assert calls[-1] == (total, total)
    assert result.summary().startswith(f"fp32_sqrt exhaustive (ieee): {total} inputs, ok")


def test_wrong_results_are_reported_with_their_inputs(monkeypatch):
    # Mismatches in both slices of two jobs, more than are kept in full: all
    # are counted and the first five, in input order, name input, result and
    # expected value.
    bad = {FOUR, FOUR + 3, *range(FOUR + 0xF0, FOUR + 0xF8)}
    monkeypatch.setitem(UNITS, "sqrt", replace(SQRT, golden=_wrong_at(bad)))
    result = run_unary_exhaustive("sqrt", MODE, jobs=2, x_range=(FOUR, FOUR + 0x100))
    assert result.checked == 0x100 and result.mismatches == len(bad) and not result.ok
    assert result.first_mismatches[0] == "x=0x40800000: got 0x40000000, expected 0x40000001"
    assert [line[:12] for line in result.first_mismatches] == [
        "x=0x40800000", "x=0x40800003", "x=0x408000F0", "x=0x408000F1", "x=0x408000F2"]
    assert f"{len(bad)} MISMATCHES" in result.summary()


@pytest.mark.parametrize("script, message", [
    ("head -c 1000 /dev/zero; echo 'simulated crash' >&2; exit 3",
     r"stopped after 250 of 256 results \(exit status 3\): simulated crash"),
    # Killed as soon as the extra result is seen: its exit status is a race.
    ("head -c 1028 /dev/zero", r"wrote more results than it owed \(exit status -?\d+\)"),
])
def test_a_misbehaving_harness_is_an_error(monkeypatch, tmp_path, script, message):
    fake = tmp_path / "fake_harness"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(sim.exhaustive_unary, "build_unary_harness", lambda *args: fake)
    with pytest.raises(ExhaustiveError, match=r"fp32_sqrt harness for slice x in "
                                              r"\[0x3F800000, 0x3F800100\) " + message):
        run_unary_exhaustive("sqrt", MODE, jobs=1, x_range=(0x3F800000, 0x3F800100))


def test_a_unit_not_in_the_catalogue_is_an_exhaustive_error(monkeypatch):
    # So that a regression records that mode as a crash and goes on.
    monkeypatch.setitem(UNITS, "nothing", UnaryUnit("fp32_nothing", golden_arith.fp32_sqrt))
    with pytest.raises(ExhaustiveError, match="has no unit 'fp32_nothing' yet"):
        run_unary_exhaustive("nothing", x_range=(0, 1))


@pytest.mark.parametrize("kwargs, error, message", [
    ({"function": "sin"}, ValueError, "function must be one of sqrt, rcp, rsqrt, exp"),
    ({"numerics": "fast"}, ValueError, "numerics must be one of"),
    ({"x_range": (5, 5)}, ValueError, r"0 <= lo < hi <= 4294967296, not \(5, 5\)"),
    ({"x_range": (-1, 3)}, ValueError, r"0 <= lo < hi <= 4294967296"),
    ({"x_range": (0, (1 << 32) + 1)}, ValueError, r"0 <= lo < hi <= 4294967296"),
    ({"x_range": (0.5, 3)}, ValueError, "x_range must be a pair of integers"),
    ({"x_range": 7}, ValueError, "x_range must be a pair of integers"),
    ({"jobs": 0}, ValueError, "jobs must be a positive integer"),
    ({"params": {"numerics": "tpu"}}, ValueError, "give numerics as its own argument"),
    ({"params": {"depth": 3}}, ValueError, "fp32_sqrt: unknown parameter 'depth'"),
    ({"params": [("stages", 1)]}, TypeError, "params must be a dict"),
])
def test_bad_input_is_rejected_before_anything_runs(kwargs, error, message):
    kwargs = {"function": "sqrt", **kwargs}
    with pytest.raises(error, match=message):
        run_unary_exhaustive(kwargs.pop("function"), **kwargs)


def test_suite_modes_are_each_function_in_each_numerics():
    assert CHECKS[SUITE].modes == tuple(f"{function}-{numerics}" for function in TRANSCENDENTAL
                                        for numerics in NUMERICS)
    assert TRANSCENDENTAL == ("rcp", "rsqrt", "exp")
    assert {function: UNITS[function].block for function in TRANSCENDENTAL} == {
        "rcp": "fp32_rcp", "rsqrt": "fp32_rsqrt", "exp": "fp32_exp"}
    # Each at the depth the VPU builds it: exp at all 16 stages, under rsqrt's 27.
    assert {function: UNITS[function].params for function in TRANSCENDENTAL} == {
        "rcp": {"stages": 16}, "rsqrt": {"stages": 27}, "exp": {"stages": 16}}


def test_the_cli_lists_the_suite_and_checks_its_options(capsys):
    assert cli.main(["regress", "alu"]) == 2
    suites = capsys.readouterr().err.strip().partition("suites: ")[2].split(", ")
    assert suites[-2:] == ["bf16_mul_exhaustive", "vpu_transcendental_exhaustive"]
    assert cli.main(["regress", "--help"]) == 0
    assert "vpu_transcendental_exhaustive (all 2^32 inputs" in " ".join(
        capsys.readouterr().out.split())
    assert cli.main(["regress", SUITE, "--sim", "amaranth"]) == 2
    assert "runs on a compiled Verilator harness" in capsys.readouterr().err
    assert cli.main(["regress", "arith", "--range", "0:1"]) == 2
    assert "--range narrows an exhaustive suite" in capsys.readouterr().err
    assert cli.main(["regress", SUITE, "--range", "0:0x100000001"]) == 2
    assert "0 <= lo < hi <= 4294967296" in capsys.readouterr().err
    assert cli.main(["regress", SUITE, "--only", "sin"]) == 2
    assert "matches no mode of vpu_transcendental_exhaustive" in capsys.readouterr().err
    assert cli.main(["regress", SUITE, "--range", "9:3"]) == 2
    assert "must be LO:HI with 0 <= LO < HI" in capsys.readouterr().err


def test_the_suite_runs_and_fails_on_a_mismatch(monkeypatch, tmp_path, capsys,
                                                as_transcendental):
    # The whole command on a quick range: one mode wrong, the others right;
    # non-zero exit, the failing mode with its first mismatch and how to rerun
    # it, and the table of modes.
    monkeypatch.setitem(UNITS, "rsqrt", replace(SQRT, golden=_wrong_at({FOUR})))
    monkeypatch.setenv("TPU_RTL_CACHE", str(build_root()))   # keep the harness build
    monkeypatch.chdir(tmp_path)
    assert cli.main(["regress", SUITE, "--only", MODE, "--range", f"{FOUR:#x}:{FOUR + 256:#x}",
                     "-j", "2"]) == 1
    captured = capsys.readouterr()
    assert "every fp32 input of rcp, rsqrt and exp in [0x40800000, 0x40800100)" in captured.out
    assert "passed 2 of 3 modes" in captured.out
    assert "FAILED rsqrt-ieee (fail): x=0x40800000: got 0x40000000, expected 0x40000001" \
        in captured.out
    assert f"reproduce: tpu-rtl regress {SUITE} --only rsqrt-ieee" in captured.out
    out = tmp_path / "build" / "regress" / SUITE / "latest"
    table = (out / "summary.txt").read_text().splitlines()
    assert [line.split()[:4] for line in table[1:]] == [
        ["rcp-ieee", "pass", "256", "0"], ["rsqrt-ieee", "fail", "256", "1"],
        ["exp-ieee", "pass", "256", "0"]]
    assert "\n".join(table) in captured.err
    assert (out / "junit.xml").read_text().count("<failure") == 1


class _InProcess:
    """A 'remote' executor that runs the calls here, one after the other, and can lose one."""
    remote, token, note = True, "test", None

    def __init__(self, lose=None):
        self.lose = lose

    def run(self, calls, on_result, on_tick=None):
        for call in calls:
            lost = tuple(call.args[2:]) == self.lose
            on_result(call, Lost("its worker died") if lost else call.fn(*call.args))


def test_slices_merge_into_the_whole_check(monkeypatch, as_transcendental):
    bad = {FOUR + 1, FOUR + 0x80, FOUR + 0xFF}            # in each of three slices
    monkeypatch.setitem(UNITS, "rcp", replace(SQRT, golden=_wrong_at(bad)))
    parts = [run_slice(SUITE, "rcp-ieee", lo, hi) for lo, hi in slices(FOUR, FOUR + 0x100, 3)]
    merged = merge(SUITE, "rcp-ieee", reversed(parts), seconds=2.0)
    whole = run_unary_exhaustive("rcp", MODE, jobs=1, x_range=(FOUR, FOUR + 0x100))
    assert (merged.checked, merged.mismatches) == (whole.checked, whole.mismatches) == (256, 3)
    assert merged.first_mismatches == whole.first_mismatches
    assert (merged.name, merged.numerics, merged.unit) == ("fp32_sqrt", MODE, "inputs")
    assert merged.cycles_per_second == 256 / 2.0


def test_the_suite_runs_in_slices_on_a_cluster_executor(tmp_path, as_transcendental):
    result = run_exhaustive(SUITE, only="rsqrt-ieee", executor=_InProcess(),
                            a_range=(FOUR, FOUR + 0x100), slices=2, out=tmp_path)
    [outcome] = result.outcomes
    assert outcome.status == "pass", outcome.message
    assert outcome.record["summary"].startswith("fp32_sqrt exhaustive (ieee): 256 inputs, ok")
    lost = run_exhaustive(SUITE, only="rsqrt-ieee", executor=_InProcess(lose=(FOUR + 0x80,
                                                                               FOUR + 0x100)),
                          a_range=(FOUR, FOUR + 0x100), slices=2, out=tmp_path)
    [outcome] = lost.outcomes
    assert outcome.status == "crash"
    assert outcome.message == "slice x in [0x40800080, 0x40800100): its worker died"
