"""``tpu-rtl regress``: N seeds of a suite on J workers, with merged coverage and repro commands.

Each seed runs in its own worker process (:mod:`verif.regress_worker`) with a
time limit, so a simulator crash or hang in one seed is recorded as that
seed's failure and loses no other result. Everything lands in
``build/regress/<suite>/``: ``junit.xml``; ``coverage.xml`` (merged
functional coverage, cocotb-coverage's format) and ``coverage.txt`` (a
summary listing every uncovered bin); with Verilator, ``code_coverage.dat``
(merged) and ``code_coverage.txt``; and each seed's files under
``seeds/<seed>/``.
"""

import json
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import code_coverage
from .progress import ProgressLine
from .suites import SUITES

__all__ = ["Outcome", "Regression", "run_regression", "run_exhaustive", "functional_summary",
           "EXHAUSTIVE", "SUITE_NAMES"]

#: The suite that checks the bf16 multiplier on every operand pair (no seeds).
EXHAUSTIVE = "bf16_mul_exhaustive"
SUITE_NAMES = (*SUITES, EXHAUSTIVE)


@dataclass
class Outcome:
    seed: int
    status: str              # pass, fail, crash, timeout
    message: str = ""
    seconds: float = 0.0
    record: dict = field(default_factory=dict)


@dataclass
class Regression:
    suite: str
    sim: str
    out: Path
    outcomes: list
    coverage: float | None = None         # merged functional coverage, percent
    code_coverage: dict | None = None
    repro: dict = field(default_factory=dict)

    @property
    def failed(self):
        return [o for o in self.outcomes if o.status != "pass"]


def _repro_command(suite, sim, seed, inject, only):
    command = f"tpu-rtl regress {suite} --sim {sim} --seed {seed}"
    command += f" --only {only}" if only else ""
    return command + (f" --inject {inject} --inject-seed {seed}" if inject else "")


def _run_one(suite, seed, sim, out, *, waves, timeout, inject, only):
    folder = out / "seeds" / str(seed)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    command = [sys.executable, "-m", "verif.regress_worker", suite, str(seed), "--sim", sim,
               "--out", str(folder)]
    command += ["--waves"] if waves else []
    command += ["--code-coverage"] if sim == "verilator" else []
    command += ["--inject", inject] if inject else []
    command += ["--only", only] if only else []
    log = folder / "worker.log"
    started = time.perf_counter()
    with open(log, "w") as f:
        try:
            proc = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            return Outcome(seed, "timeout", f"no result after {timeout:.0f} s; log: {log}",
                           time.perf_counter() - started)
    seconds = time.perf_counter() - started
    result = folder / "result.json"
    if not result.exists():
        return Outcome(seed, "crash", f"worker exited with status {proc.returncode} and no "
                                      f"result; log: {log}", seconds)
    record = json.loads(result.read_text())
    bad = [c for c in record["cases"] if c["status"] != "pass"]
    message = "; ".join(c.get("error") or c.get("first_mismatch") or c["status"] for c in bad)
    return Outcome(seed, record["status"], message, seconds, record)


class _SeedProgress:
    """Seeds done and failed on one progress line, and a line of its own per seed."""

    def __init__(self, total):
        self.line = ProgressLine("regress", total=total, unit="seeds")
        self.failed = 0
        self.line.update(text="0 failed")

    def update(self, outcome):
        self.failed += outcome.status != "pass"
        message = f"seed {outcome.seed}: {outcome.status} ({outcome.seconds:.1f} s)"
        if outcome.status != "pass":
            message += f": {outcome.message.splitlines()[0][:200] if outcome.message else ''}"
        self.line.log(message)
        self.line.update(advance=1, text=f"{self.failed} failed")

    def close(self):
        self.line.close()


def _case_name(seed):
    return f"seed {seed}" if isinstance(seed, int) else str(seed)


def _write_junit(regression, path):
    suite = ET.Element("testsuite", name=f"regress.{regression.suite}",
                       tests=str(len(regression.outcomes)),
                       failures=str(len(regression.failed)))
    for outcome in sorted(regression.outcomes, key=lambda o: str(o.seed)):
        case = ET.SubElement(suite, "testcase", classname=f"regress.{regression.suite}."
                             f"{regression.sim}", name=_case_name(outcome.seed),
                             time=f"{outcome.seconds:.2f}")
        if outcome.status != "pass":
            failure = ET.SubElement(case, "failure", type=outcome.status,
                                    message=outcome.message.splitlines()[0] if outcome.message
                                    else outcome.status)
            failure.text = f"{outcome.message}\nreproduce: {regression.repro[outcome.seed]}"
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


def functional_summary(xml_path):
    """(percent, text) of a cocotb-coverage XML file; the text lists every uncovered bin."""
    root = ET.parse(xml_path).getroot()
    percent = float(root.get("cover_percentage"))
    lines = [f"functional coverage: {percent:.2f}% ({root.get('coverage')} of "
             f"{root.get('size')} bins)", ""]
    holes = []
    for item in root.iter():
        if item.get("at_least") is None:
            continue
        name = item.get("abs_name").removeprefix("top.")
        lines.append(f"  {name:<48}{float(item.get('cover_percentage')):7.1f}%")
        at_least = int(item.get("at_least"))
        holes += [f"  {name}: {b.get('bin')}" for b in item
                  if int(b.get("hits", 0)) < at_least]
    lines += ["", f"uncovered bins: {len(holes)}"] + holes
    return percent, "\n".join(lines) + "\n"


def _merge_functional(out, seeds_dir):
    from cocotb_coverage.coverage import merge_coverage
    files = sorted(str(p) for p in seeds_dir.glob("*/*.cov.xml"))
    if not files:
        return None
    merged = out / "coverage.xml"
    if len(files) == 1:
        shutil.copy(files[0], merged)
    else:
        merge_coverage(lambda *_: None, str(merged), *files)
    percent, text = functional_summary(merged)
    (out / "coverage.txt").write_text(text)
    return percent


def _merge_code(out, seeds_dir):
    files = sorted(seeds_dir.glob("*/*.dat"))
    if not files:
        return None
    points = code_coverage.merge(files)
    code_coverage.write(points, out / "code_coverage.dat")
    (out / "code_coverage.txt").write_text(
        f"Verilator code coverage merged over {len(files)} runs\n"
        + code_coverage.format_summary(points) + "\n")
    return code_coverage.summary(points)


def _pair_progress(label):
    """The ``progress(done, total)`` callback of an exhaustive check."""
    line = ProgressLine(label, unit="pairs")

    def show(done, total):
        line.total = total
        line.update(done, text=f"{100 * done // total}%")
    show.close = line.close
    return show


def run_exhaustive(*, jobs=2, only=None, out=None):
    """The ``bf16_mul_exhaustive`` suite: all 2^32 operand pairs per numerics mode.

    It runs on the compiled Verilator harness of :mod:`sim.exhaustive`, one
    case per mode (``only`` picks one); returns a :class:`Regression`.
    """
    from golden.formats import NUMERICS
    from sim.exhaustive import ExhaustiveError, run_bf16_mul_exhaustive
    out = Path(out or Path("build") / "regress" / EXHAUSTIVE)
    out.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for numerics in NUMERICS:
        if only and only not in numerics:
            continue
        bar = _pair_progress(f"{EXHAUSTIVE} {numerics}")
        try:
            result = run_bf16_mul_exhaustive(numerics, jobs=jobs, progress=bar)
        except ExhaustiveError as error:
            outcome = Outcome(numerics, "crash", str(error))
        else:
            outcome = Outcome(numerics, "pass" if result.ok else "fail",
                              "" if result.ok else "; ".join(result.first_mismatches),
                              result.seconds, {"summary": result.summary()})
        bar.close()
        print(f"{numerics}: {outcome.status}: {outcome.record.get('summary', outcome.message)}",
              file=sys.stderr, flush=True)
        outcomes.append(outcome)
    if not outcomes:
        raise ValueError(f"--only {only!r} matches no numerics mode of {EXHAUSTIVE}")
    regression = Regression(EXHAUSTIVE, "verilator", out, outcomes)
    regression.repro = {o.seed: f"tpu-rtl regress {EXHAUSTIVE} --only {o.seed}"
                        for o in outcomes}
    _write_junit(regression, out / "junit.xml")
    return regression


def run_regression(suite, *, seeds, jobs=1, sim="amaranth", seed_base=1, only_seed=None,
                   waves=False, timeout=1800.0, inject=None, inject_seed=None, only=None,
                   out=None, progress=None):
    """Run a regression; returns a :class:`Regression` (see the module docstring)."""
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; suites: {', '.join(SUITE_NAMES)}")
    seed_list = [only_seed] if only_seed is not None else \
        list(range(seed_base, seed_base + seeds))
    out = Path(out or Path("build") / "regress" / suite)
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("junit.xml", "coverage.xml", "coverage.txt", "code_coverage.dat",
                  "code_coverage.txt"):
        (out / stale).unlink(missing_ok=True)
    shutil.rmtree(out / "seeds", ignore_errors=True)
    bar = progress if progress is not None else _SeedProgress(len(seed_list))
    outcomes = []

    def job(seed):
        seed_inject = inject if inject and (inject_seed is None or seed == inject_seed) \
            else None
        outcome = _run_one(suite, seed, sim, out, waves=waves, timeout=timeout,
                           inject=seed_inject, only=only)
        outcome.record.setdefault("inject", seed_inject)
        bar.update(outcome)
        return outcome

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        outcomes = list(pool.map(job, seed_list))
    bar.close()
    regression = Regression(suite, sim, out, outcomes)
    regression.repro = {o.seed: _repro_command(suite, sim, o.seed, o.record.get("inject"), only)
                        for o in outcomes}
    regression.coverage = _merge_functional(out, out / "seeds")
    regression.code_coverage = _merge_code(out, out / "seeds")
    _write_junit(regression, out / "junit.xml")
    return regression
