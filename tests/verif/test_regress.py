"""``tpu-rtl regress``: exit codes, merged coverage, failures caught and reproduced."""

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from verif import cli
from verif.regress import code_coverage
from verif.regress import functional_summary


def _regress(*args, cwd):
    """Run ``tpu-rtl regress ...`` in ``cwd``: its build/regress stays in the test's
    folder, while simulator builds come from (and go to) the project's cache."""
    env = dict(os.environ, TPU_RTL_CACHE=str(Path("build/sim").resolve()))
    return subprocess.run([sys.executable, "-m", "verif.cli", "regress", *args],
                          capture_output=True, text=True, cwd=cwd, env=env)


def _junit(folder):
    return ET.parse(folder / "junit.xml").getroot()


ARITH_UNITS = ("fp32_add", "bf16_mul", "fp32_to_bf16", "fp32_mul", "fp32_div", "fp32_sqrt")


# The adder's four runs in make test; every unit's (28 s of its budget) in make test-slow.
@pytest.mark.parametrize("units", [("fp32_add",),
                                   pytest.param(ARITH_UNITS, marks=pytest.mark.slow)],
                         ids=["fp32_add", "every-unit"])
def test_arith_regression_passes_with_full_coverage(units, tmp_path):
    only = ("--only", units[0]) if len(units) == 1 else ()
    proc = _regress("arith", "--seeds", "2", "-j", "2", "--sim", "amaranth", *only,
                    "--cover-goal", "100", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tmp_path / "build" / "regress" / "arith" / "latest"
    assert [case.get("name") for case in _junit(out)] == [
        f"seed {seed}: {unit}/{numerics}" for seed in (1, 2) for unit in units
        for numerics in ("tpu", "ieee")]
    percent, text = functional_summary(out / "coverage.xml")
    assert percent == 100.0 and "uncovered bins: 0" in text
    assert (out / "coverage.txt").read_text() == text
    # Two seeds of twelve runs each were merged: bins hold both seeds' hits.
    single, _ = functional_summary(out / "seeds" / "1" / "fp32_add-tpu.cov.xml")
    merged = ET.parse(out / "coverage.xml").getroot()
    named = merged.find(".//fp32_add/tpu/rounding")
    assert sum(int(b.get("hits")) for b in named) > \
        sum(int(b.get("hits")) for b in ET.parse(out / "seeds" / "1" / "fp32_add-tpu.cov.xml")
            .getroot().find(".//fp32_add/tpu/rounding"))
    assert single == 100.0


@pytest.mark.slow      # 15 s; the arith regression keeps full coverage in the default suite
def test_mxu_regression_reaches_full_coverage_in_one_seed(tmp_path):
    proc = _regress("mxu", "--seeds", "1", "--sim", "amaranth", "--cover-goal", "100",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "functional coverage: 100.00%" in proc.stdout


def test_coverage_goal_fails_the_run(tmp_path):
    # A seed without NaN operands leaves three of the converter's 25 bins empty; every seed
    # passes, and the goal alone fails the run.
    proc = _regress("arith", "--seeds", "1", "--sim", "amaranth", "--only", "fp32_to_bf16-tpu",
                    "--inject", "starve-nan", "--cover-goal", "100", cwd=tmp_path)
    assert proc.returncode == 1
    assert "passed 1 of 1 seeds" in proc.stdout
    assert "functional coverage 88.00% is below the goal of 100%" in proc.stderr


def test_broken_golden_is_caught_and_reproduced(tmp_path):
    proc = _regress("arith", "--seeds", "2", "-j", "2", "--sim", "amaranth", "--only",
                    "fp32_to_bf16-tpu", "--inject", "golden-no-flush", "--inject-seed", "2",
                    cwd=tmp_path)
    assert proc.returncode == 1
    assert "passed 1 of 2 seeds" in proc.stdout
    assert "FAILED seed 2 (fail): fp32_to_bf16/tpu" in proc.stdout and "expected 0x" in proc.stdout
    repro = next(line.split("reproduce: ", 1)[1] for line in proc.stdout.splitlines()
                 if "reproduce:" in line)
    assert repro == ("tpu-rtl regress arith --backend amaranth --seed 2 --only fp32_to_bf16-tpu "
                     "--inject golden-no-flush --inject-seed 2")
    again = _regress(*shlex.split(repro)[2:], cwd=tmp_path)
    assert again.returncode == 1 and "FAILED seed 2 (fail)" in again.stdout
    failures = [case for case in _junit(tmp_path / "build" / "regress" / "arith" / "latest")
                if case.find("failure") is not None]
    assert len(failures) == 1 and "reproduce: tpu-rtl regress" in failures[0].find("failure").text


@pytest.mark.slow      # 24 s, make test's budget: it waits out a hang's timeout
def test_a_crash_or_a_hang_loses_only_its_seed(tmp_path):
    crash = _regress("arith", "--seeds", "3", "-j", "2", "--sim", "amaranth", "--only",
                     "fp32_to_bf16-tpu", "--inject", "crash", "--inject-seed", "2", cwd=tmp_path)
    assert crash.returncode == 1
    assert "passed 2 of 3 seeds" in crash.stdout
    assert "FAILED seed 2 (crash): worker exited with status 86" in crash.stdout
    hang = _regress("arith", "--seeds", "2", "-j", "2", "--sim", "amaranth", "--only",
                    "fp32_to_bf16-tpu", "--inject", "hang", "--inject-seed", "1",
                    "--timeout", "20", cwd=tmp_path)
    assert hang.returncode == 1
    assert "FAILED seed 1 (timeout): no result after 20 s" in hang.stdout
    assert "seed 2: pass" in hang.stderr


@pytest.mark.slow
def test_verilator_regression_merges_code_coverage(tmp_path):
    proc = _regress("arith", "--seeds", "2", "-j", "2", "--sim", "verilator", "--only",
                    "fp32_to_bf16-ieee", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tmp_path / "build" / "regress" / "arith" / "latest"
    runs = sorted((out / "seeds").glob("*/*.dat"))
    assert len(runs) == 2
    merged = code_coverage.read(out / "code_coverage.dat")
    # The merge sums each point's hits over the runs; counted here from the raw files.
    expected = {}
    for run in runs:
        for line in run.read_text("latin-1").splitlines():
            if line.startswith("C '"):
                key, count = line[3:].rsplit("' ", 1)
                expected[key] = expected.get(key, 0) + int(count)
    assert dict(merged) == expected and sum(expected.values()) > 0
    summary = code_coverage.summary(merged)
    assert set(summary) >= {"line", "toggle"}
    hit, total = summary["toggle"]
    assert 0 < hit <= total
    assert "code coverage: " in proc.stdout and "toggle" in proc.stdout


def test_code_coverage_merge_sums_hits(tmp_path):
    key = "\x01f\x02top.v\x01l\x0210\x01t\x02{kind}\x01o\x02{name}\x01h\x02top"
    first, second = tmp_path / "a.dat", tmp_path / "b.dat"
    first.write_text("# SystemC::Coverage-3\n"
                     f"C '{key.format(kind='line', name='block')}' 3\n"
                     f"C '{key.format(kind='toggle', name='x[0]:0->1')}' 0\n"
                     f"C '{key.format(kind='toggle', name='__024auto[0]:0->1')}' 0\n",
                     encoding="latin-1")
    second.write_text("# SystemC::Coverage-3\n"
                      f"C '{key.format(kind='toggle', name='x[0]:0->1')}' 2\n",
                      encoding="latin-1")
    merged = code_coverage.merge([first, second])
    assert merged[key.format(kind="toggle", name="x[0]:0->1")] == 2
    assert merged[key.format(kind="line", name="block")] == 3
    # Amaranth's `$` temporaries (`__024` once mangled) are left out of the percentages.
    assert code_coverage.summary(merged) == {"line": (1, 1), "toggle": (1, 1)}


def test_unknown_suite_is_a_one_line_error(tmp_path):
    proc = _regress("alu", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("tpu-rtl regress: error: unknown suite 'alu'; suites: "
                                   "arith, mxu, dma, network, sparsecore, system, "
                                   "system_embedding, tensorcore, vpu, bf16_mul_exhaustive, "
                                   "vpu_transcendental_exhaustive")


@pytest.mark.slow
def test_dma_regression_runs_whole_and_catches_a_broken_golden(tmp_path):
    proc = _regress("dma", "--seeds", "2", "-j", "2", "--sim", "amaranth", "--inject",
                    "golden-fault", "--inject-seed", "2", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "passed 1 of 2 seeds" in proc.stdout
    assert "FAILED seed 2 (fail): dma seed 2 batch 0" in proc.stdout
    assert "reproduce: tpu-rtl regress dma --backend amaranth --seed 2 --inject golden-fault " \
           "--inject-seed 2" in proc.stdout
    out = tmp_path / "build" / "regress" / "dma" / "latest"
    case = json.loads((out / "seeds" / "1" / "result.json").read_text())["cases"][0]
    assert case["mismatches"] == 0 and case["descriptors"] == 39
    assert case["pushes"] > 0 and case["bus_errors"] > 0     # looped back, faults injected
    percent, text = functional_summary(out / "coverage.xml")
    # Two seeds of 39 small descriptors cover most bins, but not the large size classes,
    # which only Verilator's batches of 800 carry.
    assert 50 < percent < 100 and "dma.size: large" in text


@pytest.mark.parametrize("args, message", [
    (("arith", "--inject", "golden-fault"),
     "--inject golden-fault does nothing in suite arith; its broken golden model is "
     "--inject golden-no-flush"),
    (("dma", "--inject", "golden-no-flush"), "--inject golden-no-flush does nothing in suite dma"),
    (("arith", "--inject-seed", "2"), "give --inject too"),
    (("arith", "--seeds", "2", "--inject", "crash", "--inject-seed", "7"),
     "--inject-seed 7 is not a seed of this run (seeds 1 to 2)"),
    (("arith", "--seeds", "3", "--seed", "2"), "give --seeds N (a regression) or --seed S"),
    (("arith", "--cover-goal", "150"), "must be a percentage above 0 and at most 100"),
    (("arith", "--timeout", "0"), "must be a number of seconds above 0"),
    (("arith", "--seed-base", "-5"), "must be a non-negative integer"),
    (("arith", "--only", "nomatch"), "--only 'nomatch' matches no run of suite arith; its runs: "
                                     "fp32_add-tpu, fp32_add-ieee"),
    (("bf16_mul_exhaustive", "--seeds", "2"), "checks every operand, in modes, not seeds"),
])
def test_options_that_would_do_nothing_are_refused_before_any_work(
        args, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["regress", *args]) == 2
    assert message in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "build").exists()


def test_every_run_keeps_its_folder_and_latest_is_the_newest(tmp_path):
    args = ("arith", "--seeds", "1", "--sim", "amaranth", "--only", "fp32_to_bf16-tpu")
    first = _regress(*args, cwd=tmp_path)
    second = _regress(*args, cwd=tmp_path)
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    root = tmp_path / "build" / "regress" / "arith"
    runs = sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())
    assert len(runs) == 2 and all((run / "junit.xml").is_file() for run in runs)
    assert (root / "latest").resolve() == runs[-1].resolve()
    assert f"junit: build/regress/arith/{runs[-1].name}/junit.xml" in second.stdout


def test_sigterm_writes_the_reports_of_the_seeds_that_finished(tmp_path):
    """What a CI time limit sends: the finished seeds' reports, a skipped entry per seed that
    never ran, exit status 130."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "verif.cli", "regress", "arith", "--seeds", "3", "-j", "1",
         "--sim", "amaranth", "--only", "fp32_to_bf16-tpu", "--inject", "hang",
         "--inject-seed", "2"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=dict(os.environ, TPU_RTL_CACHE=str(Path("build/sim").resolve())))
    worker = tmp_path / "build" / "regress" / "arith" / "latest" / "seeds" / "2"
    deadline = time.monotonic() + 120
    while not worker.exists():      # seed 1 has passed and seed 2 (hung) has started
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert "interrupted: 1 of 3 seeds finished" in err
    cases = ET.parse(tmp_path / "build" / "regress" / "arith" / "latest" / "junit.xml").getroot()
    assert [(case.get("name"), case.find("skipped") is not None) for case in cases] == [
        ("seed 1: fp32_to_bf16/tpu", False), ("seed 2", True), ("seed 3", True)]


def test_the_progress_line_names_the_builds_the_seeds_wait_on(tmp_path, capsys):
    """A seed builds its simulator in its own process: the runner finds the build in the
    seed's log, announces it once and names it on the line until it is built."""
    from verif.regress.runner import _SeedProgress
    log = tmp_path / "seeds" / "3" / "worker.log"
    log.parent.mkdir(parents=True)
    log.write_text("building whole-verilator/fp32_add (once for this design; later runs "
                   "reuse build/sim/x)\n")
    bar = _SeedProgress(4, tmp_path / "seeds")
    bar.status(1, 2)
    bar.status(1, 2)
    assert bar.building == ["whole-verilator/fp32_add"]
    assert "building whole-verilator/fp32_add" in bar._text()
    log.write_text(log.read_text() + "built whole-verilator/fp32_add in 41 s\n")
    bar.status(1, 2)
    bar.close()
    assert bar.building == [] and "building" not in bar._text()
    err = capsys.readouterr().err
    assert err.count("seed 3 is building whole-verilator/fp32_add (once for this design") == 1
