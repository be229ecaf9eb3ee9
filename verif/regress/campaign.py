"""``tpu-rtl regress all``: every suite's seeds on one executor, one closure table and one
set of merged reports.

The seeds of all suites go to the executor as one list (so the workers stay busy across
suites), each into its suite's folder ``<run>/<suite>/`` (the same reports a
``regress SUITE`` run writes there). Then, in the run folder
``build/regress/all/<YYYYmmdd-HHMMSS>/``:

- ``summary.txt``: the closure table (suite, seeds, passed, bins hit / total, Verilator
  code coverage) also printed by the command;
- ``coverage.json`` and ``coverage.ucis.xml``: the merged functional coverage database
  and its UCIS export (:mod:`.functional`);
- ``lcov.info``, ``cobertura.xml`` and ``source_coverage.json``: Verilator's code
  coverage carried back to the ``hdl/`` Python lines (:mod:`.source_coverage`);
- ``report/``: the static HTML report and the closure plots (:mod:`.html`), also reached
  from ``build/regress/report/index.html``.

With ``until_covered`` the seeds go in rounds per suite, and a suite gets no more once it
reaches the goal (or has had ``seeds``). A round is the ``step`` workers shared among the
suites still going, at least one seed each: one seed each while there are more suites than
workers (a seed more than a suite needs can cost half an hour), more for the last ones, so
the workers stay busy. Each suite's rounds go on by themselves: the next is queued as soon
as the suite's last seed of a round ends, not when every suite's round has, so a suite that
needs many cheap rounds does not wait on the slowest seed of another.
"""

import time
from dataclasses import dataclass, field
from pathlib import Path

from verif.regress import functional, source_coverage
from verif.regress.executor.local import LocalExecutor
from verif.regress.runner import SuiteRun, _SeedProgress, run_folder
from verif.suites import SUITES

__all__ = ["Campaign", "run_all", "summary_table"]


@dataclass
class Campaign:
    """What ``regress all`` did: a :class:`~verif.regress.runner.Regression` per suite, the
    merged functional coverage database, the source coverage, and the report files."""
    out: Path
    sim: str
    regressions: dict
    database: dict = field(default_factory=dict)
    source: object = None                 # source_coverage.SourceCoverage or None
    goal: float | None = None
    interrupted: bool = False
    reports: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def failed(self):
        """Suites with a failing seed."""
        return [s for s, r in self.regressions.items() if r.failed]

    def percent(self, suite):
        hit, total = functional.suite_totals(self.database[suite]) \
            if suite in self.database else (0, 0)
        return 100.0 * hit / total if total else 0.0

    @property
    def short(self):
        """Suites below the goal (none without a goal)."""
        if self.goal is None:
            return []
        return [s for s in self.regressions if self.percent(s) < self.goal]


def summary_table(campaign):
    """The closure table: a row per suite and one for all of them, as text."""
    width = max(12, *(len(suite) + 1 for suite in campaign.regressions))
    head = f"{'suite':<{width}}{'seeds':>6}{'passed':>8}{'bins hit / total':>20}{'':>9}  code coverage"
    lines = [head, "-" * len(head)]
    all_hit = all_total = all_seeds = all_passed = 0
    for suite, regression in campaign.regressions.items():
        hit, total = functional.suite_totals(campaign.database[suite]) \
            if suite in campaign.database else (0, 0)
        passed = len(regression.outcomes) - len(regression.failed)
        all_hit, all_total = all_hit + hit, all_total + total
        all_seeds, all_passed = all_seeds + len(regression.outcomes), all_passed + passed
        code = ", ".join(f"{kind} {100 * h / t:.1f}%" for kind, (h, t)
                         in (regression.code_coverage or {}).items() if t) or "-"
        pct = f"{100 * hit / total:.2f}%" if total else "-"
        lines.append(f"{suite:<{width}}{len(regression.outcomes):>6}{passed:>8}"
                     f"{f'{hit:,} / {total:,}':>20}{pct:>9}  {code}")
    lines.append("-" * len(head))
    pct = f"{100 * all_hit / all_total:.2f}%" if all_total else "-"
    lines.append(f"{'all':<{width}}{all_seeds:>6}{all_passed:>8}"
                 f"{f'{all_hit:,} / {all_total:,}':>20}{pct:>9}")
    return "\n".join(lines) + "\n"


def run_all(*, seeds, jobs=1, sim="verilator", suites=None, seed_base=1, until_covered=False,
            cover_goal=None, step=None, timeout=1800.0, only=None, inject=None,
            inject_seed=None, waves=False, executor=None, out=None, report_link=True,
            code_coverage=True):
    """Run ``seeds`` seeds of every suite in ``suites`` (default all of
    :data:`verif.suites.SUITES`) on one executor; returns a :class:`Campaign` (see the module
    docstring). ``until_covered`` adds seeds in rounds per suite (``step``, default
    ``jobs``, workers shared among the suites still going) until the suite reaches
    ``cover_goal`` (default 100) or has had ``seeds``.
    ``inject`` goes to every suite (``inject_seed`` narrows it to one seed).
    ``code_coverage=False`` runs Verilator's plain builds (no code coverage, faster)."""
    suites = list(SUITES if suites is None else suites)
    unknown = [s for s in suites if s not in SUITES]
    if unknown or not suites:
        raise ValueError(f"suites must be among {', '.join(SUITES)}, not "
                         f"{', '.join(unknown) or 'none'}")
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"seeds must be a positive integer, not {seeds!r}")
    if executor is None:
        with LocalExecutor(jobs=jobs) as local:
            return run_all(seeds=seeds, jobs=jobs, sim=sim, suites=suites, seed_base=seed_base,
                           until_covered=until_covered, cover_goal=cover_goal, step=step,
                           timeout=timeout, only=only, inject=inject, inject_seed=inject_seed,
                           waves=waves, executor=local, out=out, report_link=report_link,
                           code_coverage=code_coverage)
    started = time.perf_counter()
    goal = 100.0 if cover_goal is None and until_covered else cover_goal
    step = max(1, step or jobs)
    root = Path("build") / "regress"
    out = run_folder(root / "all") if out is None else Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs = {s: SuiteRun(s, sim, out / s, waves=waves, timeout=timeout, inject=inject,
                        inject_seed=inject_seed, only=only, code_coverage=code_coverage)
            for s in suites}
    bar = _SeedProgress(len(suites) * seeds, [out / s / "seeds" for s in suites],
                        label="regress all")
    end = seed_base + seeds
    next_seed = dict.fromkeys(suites, seed_base)
    owner, waiting = {}, {}             # call name -> (suite, seed); suite -> seeds running
    going = set(suites)                 # suites that may get another round

    def next_round(suite):
        """The calls of the suite's next seeds (its share of ``step``, or all with no
        goal)."""
        count = min(max(1, step // len(going)), end - next_seed[suite]) if until_covered \
            else seeds
        batch = list(range(next_seed[suite], next_seed[suite] + count))
        next_seed[suite] += count
        calls, names = runs[suite].calls(executor, batch)
        owner.update((name, (suite, seed)) for name, seed in names.items())
        waiting[suite] = set(batch)
        return calls

    def on_result(call, value):
        """Record a seed; when it ends its suite's round, that suite's next round if it is
        below the goal with seeds left (each suite's rounds go on as its own seeds end)."""
        suite, seed = owner[call.name]
        bar.update(runs[suite].record(seed, value))
        waiting[suite].discard(seed)
        if not until_covered or waiting[suite]:
            return ()
        entry = functional.collect({suite: out / suite})[suite]
        hit, total = functional.suite_totals(entry)
        percent = 100.0 * hit / total if total else 0.0
        if percent < goal and next_seed[suite] < end:
            return next_round(suite)
        going.discard(suite)
        bar.line.total -= end - next_seed[suite]
        bar.line.log(f"{suite}: {percent:.2f}% of {total:,} bins after {len(entry['seeds'])} "
                     f"seeds" + ("" if percent >= goal else
                                 f", below the goal of {goal:g}% with no seeds left"))
        return ()

    interrupted = False
    try:
        executor.run([call for suite in suites for call in next_round(suite)], on_result,
                     on_tick=bar.status)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.close()
    regressions = {s: runs[s].finish(interrupted=interrupted) for s in suites}
    campaign = Campaign(out, sim, regressions, goal=goal, interrupted=interrupted)
    _write_reports(campaign, report_link=report_link)
    campaign.seconds = time.perf_counter() - started
    return campaign


def _write_reports(campaign, *, report_link):
    from verif.regress import html
    out = campaign.out
    campaign.database = functional.collect({s: out / s for s in campaign.regressions})
    reports = campaign.reports
    reports["coverage.json"] = functional.write_json(campaign.database, out / "coverage.json")
    reports["ucis"] = functional.write_ucis(campaign.database, out / "coverage.ucis.xml")
    dats = sorted(p for s in campaign.regressions for p in (out / s / "seeds").glob("*/*.dat"))
    if dats:
        campaign.source = source_coverage.collect(dats)
        reports["lcov"] = source_coverage.write_lcov(campaign.source, out / "lcov.info")
        reports["cobertura"] = source_coverage.write_cobertura(reports["lcov"],
                                                              out / "cobertura.xml")
        reports["source_coverage.json"] = source_coverage.write_json(
            campaign.source, out / "source_coverage.json")
    text = summary_table(campaign)
    (out / "summary.txt").write_text(text)
    reports["summary"] = out / "summary.txt"
    reports["html"] = html.write_report(campaign, out / "report")
    if report_link:
        reports["html_link"] = html.write_redirect(reports["html"],
                                                   out.parent.parent / "report" / "index.html")
