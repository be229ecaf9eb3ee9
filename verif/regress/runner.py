"""``tpu-rtl regress``: N seeds of a suite on an executor, with merged coverage and repro commands.

Each seed runs in its own worker process (:mod:`verif.regress.worker`) with a
time limit, so a simulator crash or hang in one seed is recorded as that
seed's failure and loses no other result. Where the processes run is the
executor's business (:mod:`verif.regress.executor`): ``jobs`` at a time on this
machine by default, or as Dask tasks on a cluster, whose results come back
as data and land in the same folders. Every run keeps a folder of its own,
``build/regress/<suite>/<YYYYmmdd-HHMMSS>/``, and ``build/regress/<suite>/latest``
links to the newest, so rerunning a seed's reproduce command never erases the
regression it came from. In it: ``junit.xml`` (a test case per case and seed;
a seed that never ran is a skipped entry); ``coverage.xml`` (merged
functional coverage, cocotb-coverage's format) and ``coverage.txt`` (a
summary listing every uncovered bin); with Verilator, ``code_coverage.dat``
(merged) and ``code_coverage.txt``; and each seed's files under
``seeds/<seed>/``. An interrupted run (Ctrl-C, or SIGTERM from a CI time
limit) writes the same reports over the seeds that finished.
"""

import os
import shutil
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from verif.regress import code_coverage
from verif.regress.executor import Call, Lost
from verif.regress.executor import slices as sliced
from verif.regress.executor.local import LocalExecutor
from verif.regress.executor.seed import CLUSTER_INJECTIONS, Outcome, SeedTask
from verif.progress import ProgressLine
from verif.suites import SUITES

__all__ = ["Outcome", "Regression", "SuiteRun", "run_regression", "run_batches",
           "run_exhaustive", "functional_summary", "merge_reports", "run_folder", "EXHAUSTIVE",
           "TRANSCENDENTAL", "EXHAUSTIVE_SUITES", "SUITE_NAMES"]

#: The suite that checks the bf16 multiplier on every operand pair (no seeds).
EXHAUSTIVE = "bf16_mul_exhaustive"
#: The suite that checks the VPU's rcp, rsqrt and exp units on every fp32 input (no seeds).
TRANSCENDENTAL = "vpu_transcendental_exhaustive"
#: Suites of exhaustive checks: modes instead of seeds, on compiled Verilator harnesses.
EXHAUSTIVE_SUITES = (EXHAUSTIVE, TRANSCENDENTAL)
SUITE_NAMES = (*SUITES, *EXHAUSTIVE_SUITES)

#: Slices per numerics mode of an exhaustive check on a cluster: 1024 values of
#: ``a`` (67 M pairs, about 10 s of one core) each, so a lost worker costs little
#: and 128 workers can share the check, while the Verilog export each slice does
#: to find its cached harness (about 0.8 s) stays under a tenth.
EXHAUSTIVE_SLICES = 64


@dataclass
class Regression:
    suite: str
    sim: str
    out: Path
    outcomes: list
    coverage: float | None = None         # merged functional coverage, percent
    code_coverage: dict | None = None
    repro: dict = field(default_factory=dict)
    planned: int = 0                      # seeds (or modes) the run set out to do
    interrupted: bool = False             # Ctrl-C: outcomes holds what finished
    merge_seconds: float = 0.0            # merging the seeds' coverage into the reports
    seeds: list = field(default_factory=list)   # every seed (or mode) planned, in order

    @property
    def failed(self):
        return [o for o in self.outcomes if o.status != "pass"]


def _repro_command(suite, sim, seed, inject, only):
    command = f"tpu-rtl regress {suite} --backend {sim} --seed {seed}"
    command += f" --only {only}" if only else ""
    command += f" --inject {inject} --inject-seed {seed}" if inject else ""
    # A killed worker is the cluster's fault, reproduced on a cluster; anything else locally.
    return command + (" --cluster local:2" if inject in CLUSTER_INJECTIONS else "")


class _SeedProgress:
    """One progress line (seeds done, failed, running, workers, and the simulator builds
    the seeds wait on), and a line of its own per seed and per build started.

    ``seeds`` is the folder of the seeds' folders, or a list of them (several suites);
    ``label`` the line's label."""

    def __init__(self, total, seeds=None, *, label="regress"):
        self.line = ProgressLine(label, total=total, unit="seeds")
        self.failed = self.running = self.workers = 0
        self.folders = [] if seeds is None else [seeds] if isinstance(seeds, Path) else \
            list(seeds)
        self.announced, self.building = set(), []
        self.line.update(text=self._text())

    def _text(self):
        text = f"{self.failed} failed, {self.running} running, {self.workers} workers"
        return text + (f", building {', '.join(self.building)}" if self.building else "")

    def _builds(self):
        """Builds under way in the seeds' worker logs (``building X`` without ``built X``),
        each announced once: a seed's build happens in its own process."""
        under_way = []
        logs = [log for folder in self.folders for log in sorted(folder.glob("*/worker.log"))]
        for log in logs:
            try:
                lines = log.read_text(errors="replace").splitlines()
            except OSError:
                continue
            started = [line.split()[1] for line in lines if line.startswith("building ")]
            done = {line.split()[1] for line in lines if line.startswith("built ")}
            for build in started:
                if build not in done:
                    under_way.append(build)
                    if (log.parent, build) not in self.announced:
                        self.announced.add((log.parent, build))
                        self.line.log(f"{self._seed_name(log.parent)} is building {build} "
                                      f"(once for this design; later seeds reuse it)")
        return sorted(set(under_way))

    def _seed_name(self, folder):
        """``seed 3``, or ``arith seed 3`` when the line follows several suites."""
        suite = f"{folder.parent.parent.name} " if len(self.folders) > 1 else ""
        return f"{suite}seed {folder.name}"

    def update(self, outcome):
        self.failed += outcome.status != "pass"
        suite = f"{outcome.record['suite']} " if len(self.folders) > 1 and \
            outcome.record.get("suite") else ""
        message = f"{suite}seed {outcome.seed}: {outcome.status} ({outcome.seconds:.1f} s)"
        if outcome.status != "pass":
            message += f": {outcome.message.splitlines()[0][:200] if outcome.message else ''}"
        self.line.log(message)
        self.running = max(0, self.running - 1)
        self.line.update(advance=1, text=self._text())

    def status(self, running, workers):
        self.running, self.workers = running, workers
        self.building = self._builds()
        self.line.update(text=self._text())

    def close(self):
        self.line.close()


def _case_name(seed):
    return f"seed {seed}" if isinstance(seed, int) else str(seed)


def run_folder(root):
    """A new folder for one run under ``root`` (``YYYYmmdd-HHMMSS``, then ``-2``, ... if
    taken), with ``root/latest`` linked to it."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 1000):
        folder = root / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            folder.mkdir()
            break
        except FileExistsError:
            continue
    link = root / f".latest-{os.getpid()}"
    link.unlink(missing_ok=True)
    link.symlink_to(folder.name)
    os.replace(link, root / "latest")      # atomic: a reader sees the old run or the new
    return folder


def _junit_cases(regression, outcome):
    """(name, seconds, failure or None) per case of ``outcome``'s seed; a seed that
    crashed or timed out before reporting its cases is one entry."""
    cases = outcome.record.get("cases") or []
    if not cases:
        failure = None if outcome.status == "pass" else (outcome.status, outcome.message)
        return [(_case_name(outcome.seed), outcome.seconds, failure)]
    entries = []
    for case in cases:
        failure = None
        if case.get("status") != "pass":
            failure = (case.get("status", "fail"),
                       case.get("error") or f"{case['case']}: {case.get('mismatches', '?')} "
                                            f"mismatches")
        entries.append((f"{_case_name(outcome.seed)}: {case['case']}",
                        outcome.seconds / len(cases), failure))
    return entries


def _write_junit(regression, path):
    by_seed = {outcome.seed: outcome for outcome in regression.outcomes}
    order = regression.seeds or sorted(by_seed, key=str)
    classname = f"regress.{regression.suite}.{regression.sim}"
    suite = ET.Element("testsuite", name=f"regress.{regression.suite}")
    tests = failures = skipped = 0
    for seed in order:
        outcome = by_seed.get(seed)
        if outcome is None:
            case = ET.SubElement(suite, "testcase", classname=classname,
                                 name=_case_name(seed), time="0.00")
            ET.SubElement(case, "skipped", message="never ran: the regression was interrupted")
            tests, skipped = tests + 1, skipped + 1
            continue
        for name, seconds, failure in _junit_cases(regression, outcome):
            case = ET.SubElement(suite, "testcase", classname=classname, name=name,
                                 time=f"{seconds:.2f}")
            tests += 1
            if failure is not None:
                kind, message = failure
                element = ET.SubElement(case, "failure", type=kind,
                                        message=message.splitlines()[0] if message else kind)
                element.text = f"{message}\nreproduce: {regression.repro[seed]}"
                failures += 1
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
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
    markers = code_coverage.marker_lines(files)
    code_coverage.write(points, out / "code_coverage.dat")
    (out / "code_coverage.txt").write_text(
        f"Verilator code coverage merged over {len(files)} runs\n"
        + code_coverage.format_summary(points, markers) + "\n")
    return code_coverage.summary(points, markers)


def merge_reports(out):
    """Merge the coverage of every seed under ``out/seeds`` into ``out``'s reports.

    Returns (functional coverage percent, code coverage summary), each None
    when no seed produced any.
    """
    out = Path(out)
    return _merge_functional(out, out / "seeds"), _merge_code(out, out / "seeds")


def _exhaustive_progress(label, unit):
    """The ``progress(done, total)`` callback of an exhaustive check counting ``unit``."""
    line = ProgressLine(label, unit=unit)

    def show(done, total):
        line.total = total
        line.update(done, text=f"{100 * done // total}%")
    show.close = line.close
    return show


def run_exhaustive(suite=EXHAUSTIVE, *, jobs=2, only=None, out=None, executor=None,
                   a_range=None, slices=EXHAUSTIVE_SLICES):
    """An exhaustive suite: every operand of its units, per mode (:data:`EXHAUSTIVE_SUITES`).

    ``bf16_mul_exhaustive`` checks all 2^32 operand pairs per numerics mode;
    ``vpu_transcendental_exhaustive`` all 2^32 inputs of rcp, rsqrt and exp
    per numerics mode (modes ``rcp-tpu``, ``rcp-ieee``, ...). ``only`` keeps
    the modes whose name contains it. Locally (``executor`` None or local)
    each mode runs whole on ``jobs`` compiled Verilator harness processes. On
    a cluster executor each mode is cut into ``slices`` slices of the sliced
    operand (bf16_mul's ``a``, a transcendental's input), one task each.
    ``a_range`` narrows that operand (a quick run; the default is all of
    it). Writes ``junit.xml`` and ``summary.txt`` (the table of the modes,
    also printed on stderr) into ``out``. Returns a :class:`Regression`;
    after Ctrl-C its ``interrupted`` is set and it holds the modes that
    finished.
    """
    if suite not in EXHAUSTIVE_SUITES:
        raise ValueError(f"{suite!r} is not an exhaustive suite; those are "
                         f"{', '.join(EXHAUSTIVE_SUITES)}")
    spec = sliced.CHECKS[suite]
    modes = [mode for mode in spec.modes if not only or only in mode]
    if not modes:
        raise ValueError(f"--only {only!r} matches no mode of {suite} "
                         f"(modes: {', '.join(spec.modes)})")
    a_range = a_range or (0, spec.span)
    lo, hi = a_range
    if not 0 <= lo < hi <= spec.span:
        raise ValueError(f"the range of {spec.operand} must satisfy 0 <= lo < hi <= "
                         f"{spec.span}, not ({lo}, {hi})")
    out = _out_folder(out, suite)
    outcomes, interrupted = [], False
    try:
        if executor is not None and executor.remote:
            _run_sliced(suite, modes, executor, a_range, slices, outcomes)
        else:
            for mode in modes:
                outcomes.append(_exhaustive_mode(suite, mode, jobs, a_range))
    except KeyboardInterrupt:
        interrupted = True
    regression = Regression(suite, "verilator", out, outcomes, planned=len(modes), seeds=modes,
                            interrupted=interrupted)
    regression.repro = {o.seed: f"tpu-rtl regress {suite} --only {o.seed}" for o in outcomes}
    _write_junit(regression, out / "junit.xml")
    table = _mode_table(outcomes)
    (out / "summary.txt").write_text(table)
    print(table, end="", file=sys.stderr, flush=True)
    return regression


def _exhaustive_mode(suite, mode, jobs, a_range):
    """One mode of an exhaustive check, whole, on this machine."""
    from sim.exhaustive import ExhaustiveError
    spec = sliced.CHECKS[suite]
    bar = _exhaustive_progress(f"{suite} {mode}", spec.unit)
    try:
        result = spec.run(mode, *a_range, jobs=jobs, progress=bar)
    except ExhaustiveError as error:
        outcome = Outcome(mode, "crash", str(error))
    else:
        outcome = _result_outcome(mode, result)
    finally:
        bar.close()
    _print_mode(outcome)
    return outcome


def _result_outcome(mode, result):
    """The outcome of a mode from its :class:`sim.exhaustive.ExhaustiveResult`."""
    return Outcome(mode, "pass" if result.ok else "fail",
                   "" if result.ok else "; ".join(result.first_mismatches), result.seconds,
                   {"summary": result.summary(), "checked": result.checked,
                    "mismatches": result.mismatches, "rate": result.cycles_per_second})


def _print_mode(outcome):
    print(f"{outcome.seed}: {outcome.status}: {outcome.record.get('summary', outcome.message)}",
          file=sys.stderr, flush=True)


def _mode_table(outcomes):
    """A fixed-width table of an exhaustive run's modes; a crashed mode shows its reason."""
    lines = [f"{'mode':<12}{'status':<8}{'checked':>15}{'mismatches':>12}{'seconds':>10}"
             f"{'M/s':>8}"]
    for o in outcomes:
        if "checked" in o.record:
            lines.append(f"{o.seed:<12}{o.status:<8}{o.record['checked']:>15,}"
                         f"{o.record['mismatches']:>12,}{o.seconds:>10.1f}"
                         f"{o.record['rate'] / 1e6:>8.1f}")
        else:
            reason = (o.message.splitlines() or [""])[0]
            lines.append(f"{o.seed:<12}{o.status:<8}  {reason[:100]}")
    return "\n".join(lines) + "\n"


def _run_sliced(check, modes, executor, a_range, count, outcomes):
    """Run ``check``'s modes as slices on ``executor``, one mode after the other (so a mode's
    time is its own); append each mode's outcome when all its slices are in."""
    spec = sliced.CHECKS[check]
    plan = {mode: sliced.slices(*a_range, count) for mode in modes}
    line = ProgressLine(check, total=sum(spec.total(hi - lo) for mode in modes
                                         for lo, hi in plan[mode]), unit=spec.unit)
    state = {"failed": 0, "running": 0, "workers": 0}

    def text():
        return (f"{state['failed']} failed slices, {state['running']} running, "
                f"{state['workers']} workers")

    def on_tick(running, workers):
        state["running"], state["workers"] = running, workers
        line.update(text=text())

    try:
        for mode in modes:
            results, lost = [], []

            def on_result(call, value):
                lo, hi = call.args[2:]
                if isinstance(value, Lost):
                    lost.append(f"{spec.slice_name(lo, hi)}: {value.reason}")
                else:
                    results.append(value)
                state["failed"] += isinstance(value, Lost) or not value.ok
                state["running"] = max(0, state["running"] - 1)
                line.update(advance=spec.total(hi - lo), text=text())

            started = time.perf_counter()
            executor.run([Call(f"{check}-{mode}-{lo:05x}-{hi:05x}-{executor.token}",
                               sliced.run_slice, (check, mode, lo, hi))
                          for lo, hi in plan[mode]], on_result, on_tick=on_tick)
            outcomes.append(_sliced_outcome(check, mode, results, lost,
                                            time.perf_counter() - started))
    finally:
        line.close()
        for outcome in outcomes:
            _print_mode(outcome)


def _sliced_outcome(check, mode, results, lost, seconds):
    if lost:
        return Outcome(mode, "crash", "; ".join(sorted(lost)), seconds)
    return _result_outcome(mode, sliced.merge(check, mode, results, seconds))


def _out_folder(out, suite):
    """``out`` emptied of an earlier run's reports, or by default a new run folder under
    ``build/regress/<suite>/``."""
    if out is None:
        return run_folder(Path("build") / "regress" / suite)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("junit.xml", "coverage.xml", "coverage.txt", "code_coverage.dat",
                  "code_coverage.txt", "summary.txt"):
        (out / stale).unlink(missing_ok=True)
    shutil.rmtree(out / "seeds", ignore_errors=True)
    return out


def run_regression(suite, *, seeds, jobs=1, sim="amaranth", seed_base=1, only_seed=None,
                   waves=False, timeout=1800.0, inject=None, inject_seed=None, only=None,
                   out=None, progress=None, executor=None, until_covered=False,
                   cover_goal=None, step=None, code_coverage=True):
    """Run a regression; returns a :class:`Regression` (see the module docstring).

    ``executor`` (entered; see :func:`verif.regress.executor.open_executor`) runs the
    seeds; by default a :class:`~verif.regress.executor.local.LocalExecutor` of
    ``jobs`` workers. After Ctrl-C the result's ``interrupted`` is set and it
    holds, and its reports cover, the seeds that finished. ``until_covered`` runs
    the seeds in rounds of ``step`` (default ``jobs``) and stops once the merged
    functional coverage reaches ``cover_goal`` (default 100). ``code_coverage`` (Verilator)
    builds every model with line, branch and toggle coverage and merges them; False runs
    the plain builds, which are faster.
    """
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; suites: {', '.join(SUITE_NAMES)}")
    if inject in CLUSTER_INJECTIONS and not (executor is not None and executor.remote):
        raise ValueError(f"--inject {inject} kills a Dask worker; it needs --cluster")
    if executor is None:
        with LocalExecutor(jobs=jobs) as local:
            return run_regression(suite, seeds=seeds, sim=sim, seed_base=seed_base,
                                  only_seed=only_seed, waves=waves, timeout=timeout,
                                  inject=inject, inject_seed=inject_seed, only=only, out=out,
                                  progress=progress, executor=local,
                                  until_covered=until_covered, cover_goal=cover_goal,
                                  step=step, code_coverage=code_coverage)
    seed_list = [only_seed] if only_seed is not None else \
        list(range(seed_base, seed_base + seeds))
    out = _out_folder(out, suite)
    bar = progress if progress is not None else _SeedProgress(len(seed_list), out / "seeds")
    run = SuiteRun(suite, sim, out, waves=waves, timeout=timeout, inject=inject,
                   inject_seed=inject_seed, only=only, code_coverage=code_coverage)
    interrupted = False
    rounds = [seed_list]
    if until_covered:
        size = max(1, step or jobs)
        rounds = [seed_list[i:i + size] for i in range(0, len(seed_list), size)]
    goal = 100.0 if cover_goal is None else cover_goal
    try:
        for batch in rounds:
            run_batches(executor, [(run, batch)], bar)
            if until_covered and _covered(out) >= goal:
                if hasattr(bar, "line"):
                    bar.line.total = len(run.seeds)
                break
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.close()
    return run.finish(interrupted=interrupted)


def _covered(out):
    """The percent of the bins covered so far by the seeds under ``out/seeds``."""
    from verif.regress import functional
    entry = functional.collect({"suite": out})["suite"]
    hit, total = functional.suite_totals(entry)
    return 100.0 * hit / total if total else 0.0


class SuiteRun:
    """The seeds of one suite in one run folder ``out``: tasks for them, their outcomes as
    they arrive (:meth:`calls`, possibly in several batches) and the merged reports
    (:meth:`finish`). Several suites' batches can share one executor (:func:`run_batches`)."""

    def __init__(self, suite, sim, out, *, waves=False, timeout=1800.0, inject=None,
                 inject_seed=None, only=None, code_coverage=True):
        self.suite, self.sim, self.out = suite, sim, Path(out)
        self.code_coverage = code_coverage
        self.waves, self.timeout, self.only = waves, timeout, only
        self.inject, self.inject_seed = inject, inject_seed
        self.seeds, self.by_seed, self.tasks = [], {}, {}

    def calls(self, executor, seeds):
        """The executor calls of ``seeds`` (added to this run's seeds), and
        ``{call name: seed}``."""
        calls, names = [], {}
        for seed in seeds:
            seed_inject = self.inject if self.inject and (
                self.inject_seed is None or seed == self.inject_seed) else None
            task = SeedTask(self.suite, seed, self.sim, waves=self.waves, timeout=self.timeout,
                            inject=seed_inject, only=self.only,
                            code_coverage=self.code_coverage)
            self.tasks[seed] = task
            self.seeds.append(seed)
            call = executor.seed_call(task, self.out / "seeds" / str(seed))
            calls.append(call)
            names[call.name] = seed
        return calls, names

    def record(self, seed, value):
        """Keep ``value`` (an :class:`Outcome` or a lost call) as ``seed``'s outcome."""
        if seed in self.by_seed:             # an executor bug, not a seed's failure
            raise RuntimeError(f"seed {seed} of {self.suite} was reported twice")
        outcome = value if isinstance(value, Outcome) else \
            Outcome(seed, "crash", f"lost: {value.reason}")
        outcome.record.setdefault("inject", self.tasks[seed].inject)
        outcome.record.setdefault("suite", self.suite)
        self.by_seed[seed] = outcome
        return outcome

    def finish(self, *, interrupted=False):
        """Merge the finished seeds' files into the run folder's reports; a
        :class:`Regression`."""
        for seed in set(self.seeds) - set(self.by_seed):  # cut short: partial files would merge
            shutil.rmtree(self.out / "seeds" / str(seed), ignore_errors=True)
        self.out.mkdir(parents=True, exist_ok=True)       # a suite none of whose seeds began
        outcomes = [self.by_seed[seed] for seed in self.seeds if seed in self.by_seed]
        regression = Regression(self.suite, self.sim, self.out, outcomes,
                                planned=len(self.seeds), interrupted=interrupted,
                                seeds=list(self.seeds))
        regression.repro = {o.seed: _repro_command(self.suite, self.sim, o.seed,
                                                   o.record.get("inject"), self.only)
                            for o in outcomes}
        started = time.perf_counter()
        regression.coverage, regression.code_coverage = merge_reports(self.out)
        regression.merge_seconds = time.perf_counter() - started
        _write_junit(regression, self.out / "junit.xml")
        return regression


def run_batches(executor, batches, bar):
    """Run ``[(suite run, seeds)]`` as one list of calls on ``executor``, so that the seeds
    of several suites share the workers; ``bar.update(outcome)`` as each seed ends.
    A ``KeyboardInterrupt`` propagates after the executor stopped the running seeds."""
    calls, owner = [], {}
    for run, seeds in batches:
        more, names = run.calls(executor, seeds)
        calls += more
        owner |= {name: (run, seed) for name, seed in names.items()}

    def on_result(call, value):
        run, seed = owner[call.name]
        bar.update(run.record(seed, value))

    executor.run(calls, on_result, on_tick=getattr(bar, "status", None))
