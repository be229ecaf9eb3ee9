"""``tpu-rtl regress``: a seeded, coverage-driven regression, or an exhaustive check."""

import argparse
import signal
import sys

from verif.cli.common import CommandError, lo_hi_range, natural, number, positive

__all__ = ["add_parser", "run"]

#: Injections that take stimulus away (a coverage hole on purpose), and the suites that
#: know them (a suite's ``STIMULUS_INJECTIONS``).
STIMULUS_INJECTIONS = ("starve-nan",)


def run(args):
    from sim.backends import check_backend
    from verif.regress.executor import ClusterError, open_executor
    from verif.regress import EXHAUSTIVE_SUITES, SUITE_NAMES
    if args.suite == "all":
        return _run_all(args)
    if args.suites is not None:
        raise CommandError("--suites applies to regress all, not to one suite", status=2)
    if args.suite not in SUITE_NAMES:
        raise ValueError(f"unknown suite {args.suite!r}; suites: {', '.join(SUITE_NAMES)}")
    check_backend(args.backend)
    if args.suite in EXHAUSTIVE_SUITES and args.backend != "verilator":
        raise CommandError(f"{args.suite} runs on a compiled Verilator harness; "
                           f"use --backend verilator", status=2)
    if args.range is not None and args.suite not in EXHAUSTIVE_SUITES:
        raise CommandError(f"--range narrows an exhaustive suite ({', '.join(EXHAUSTIVE_SUITES)}),"
                           f" not {args.suite}", status=2)
    if args.cluster is not None and args.jobs != 1:
        raise CommandError("give -j (workers on this machine) or --cluster, not both", status=2)
    if args.inject in ("kill-worker", "kill-worker-once") and args.cluster is None:
        raise CommandError(f"--inject {args.inject} kills a Dask worker; it needs --cluster",
                           status=2)
    if args.until_covered and (args.suite in EXHAUSTIVE_SUITES or args.seed is not None
                               or args.seeds is None):
        raise CommandError("--until-covered adds seeds up to --seeds N: give --seeds (and no "
                           "--seed; an exhaustive suite has no seeds)", status=2)
    if args.suite not in EXHAUSTIVE_SUITES:
        _check_seed_options(args)
    elif args.seeds is not None or args.seed is not None or args.inject is not None:
        raise CommandError(f"{args.suite} checks every operand, in modes, not seeds: drop "
                           f"--seeds, --seed and --inject", status=2)
    args.seeds = 4 if args.seeds is None else args.seeds
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        with open_executor(args.cluster, jobs=args.jobs,
                           connect_timeout=args.connect_timeout) as executor:
            result, unit = _regress_on(executor, args)
    except ClusterError as error:       # raised on entering: nothing has run
        raise CommandError(str(error)) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    passed = len(result.outcomes) - len(result.failed)
    print(f"passed {passed} of {len(result.outcomes)} {unit}")
    if result.coverage is not None:
        print(f"functional coverage: {result.coverage:.2f}% (uncovered bins listed in "
              f"{result.out / 'coverage.txt'})")
    if result.code_coverage:
        parts = ", ".join(f"{kind} {100 * hit / total:.1f}%"
                          for kind, (hit, total) in result.code_coverage.items() if total)
        print(f"code coverage: {parts} ({result.out / 'code_coverage.txt'})")
    print(f"junit: {result.out / 'junit.xml'}")
    for outcome in sorted(result.failed, key=lambda o: str(o.seed)):
        print(f"FAILED {'seed ' * (unit == 'seeds')}{outcome.seed} ({outcome.status}): "
              f"{outcome.message.splitlines()[0] if outcome.message else ''}")
        print(f"  reproduce: {result.repro[outcome.seed]}")
    if result.interrupted:
        raise CommandError(f"interrupted: {len(result.outcomes)} of {result.planned} {unit} "
                           f"finished; the reports above cover those", status=130)
    if result.failed:
        raise CommandError(f"{len(result.failed)} of {len(result.outcomes)} {unit} failed")
    goal = args.cover_goal if args.cover_goal is not None else \
        (100.0 if args.until_covered else None)
    if goal is not None and (result.coverage or 0.0) < goal:
        if args.until_covered:
            _print_holes(result)
        raise CommandError(f"functional coverage {result.coverage or 0.0:.2f}% is below the "
                           f"goal of {goal:g}%"
                           + (f" after {len(result.outcomes)} seeds" if args.until_covered
                              else ""))


def _print_holes(result):
    """Name the bins that stayed empty (all of them are in coverage.txt)."""
    from verif.regress import functional
    entry = functional.collect({result.suite: result.out})[result.suite]
    holes = [f"{p.name}: {' x '.join(b.label) if isinstance(b.label, tuple) else b.label}"
             for p in entry["points"].values() for b in p.bins if b.hits < p.at_least]
    print(f"{len(holes)} bins stayed empty after {len(entry['seeds'])} seeds: "
          + "; ".join(holes[:12]) + ("; ..." if len(holes) > 12 else "")
          + f" (all in {result.out / 'coverage.txt'})")


def _run_all(args):
    """``regress all``: every suite (or ``--suites``) on one executor, one closure table."""
    from sim.backends import check_backend
    from verif.regress.executor import ClusterError, open_executor
    from verif.suites import SUITES
    check_backend(args.backend)
    for flag, value in (("--seed", args.seed), ("--range", args.range)):
        if value is not None:
            raise CommandError(f"{flag} does not apply to regress all (give --seeds N, or "
                               f"run one suite)", status=2)
    if args.cluster is not None and args.jobs != 1:
        raise CommandError("give -j (workers on this machine) or --cluster, not both", status=2)
    suites = list(SUITES) if args.suites is None else args.suites
    unknown = [s for s in suites if s not in SUITES]
    if unknown or not suites:
        raise CommandError(f"--suites {','.join(suites)}: {', '.join(unknown) or 'none'} "
                           f"{'is' if len(unknown) == 1 else 'are'} not a suite of regress all "
                           f"(suites: {','.join(SUITES)})", status=2)
    if args.until_covered and args.seeds is None:
        raise CommandError("--until-covered adds seeds up to --seeds N: give --seeds", status=2)
    args.seeds = 4 if args.seeds is None else args.seeds
    for suite in suites:
        _check_seed_options(args, suite=suite)
    workers = args.jobs if args.cluster is None else _cluster_workers(args)
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        with open_executor(args.cluster, jobs=args.jobs,
                           connect_timeout=args.connect_timeout) as executor:
            if executor.note:
                print(executor.note, file=sys.stderr, flush=True)
            mode = (f"up to {args.seeds} seeds each, until {args.cover_goal or 100:g}% "
                    f"covered" if args.until_covered else f"{args.seeds} seeds each")
            print(f"regress all: {len(suites)} suites ({', '.join(suites)}), {mode}, on "
                  f"{args.backend}, {executor.describe()}", flush=True)
            from verif.regress.campaign import run_all
            campaign = run_all(seeds=args.seeds, jobs=args.jobs, sim=args.backend,
                               suites=suites, seed_base=args.seed_base,
                               until_covered=args.until_covered, cover_goal=args.cover_goal,
                               step=workers, timeout=args.timeout, only=args.only,
                               inject=args.inject, inject_seed=args.inject_seed,
                               waves=args.waves, executor=executor,
                               code_coverage=not args.no_code_coverage)
    except ClusterError as error:
        raise CommandError(str(error)) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    _report_all(campaign)


def _report_all(campaign):
    from verif.regress import functional
    from verif.regress.campaign import summary_table
    print(summary_table(campaign), end="")
    hit = sum(functional.suite_totals(e)[0] for e in campaign.database.values())
    total = sum(functional.suite_totals(e)[1] for e in campaign.database.values())
    if total:
        print(f"merged functional coverage: {100 * hit / total:.2f}% of {total:,} bins "
              f"({campaign.reports['coverage.json']}, UCIS {campaign.reports['ucis']})")
    if campaign.source is not None:
        sums = {}
        for block in campaign.source.blocks().values():
            for kind, (h, t) in block.items():
                sums[kind] = (sums.get(kind, (0, 0))[0] + h, sums.get(kind, (0, 0))[1] + t)
        parts = ", ".join(f"{kind} {100 * h / t:.1f}%" for kind, (h, t) in sums.items() if t)
        print(f"code coverage on hdl/: {parts} ({campaign.reports['lcov']}, "
              f"{campaign.reports['cobertura']})")
    print(f"report: {campaign.reports.get('html_link', campaign.reports['html'])}")
    print(f"wall time: {campaign.seconds:.0f} s")
    failed = 0
    for suite, regression in campaign.regressions.items():
        for outcome in sorted(regression.failed, key=lambda o: str(o.seed)):
            failed += 1
            print(f"FAILED {suite} seed {outcome.seed} ({outcome.status}): "
                  f"{outcome.message.splitlines()[0] if outcome.message else ''}")
            print(f"  reproduce: {regression.repro[outcome.seed]}")
    for suite in campaign.short:
        entry = campaign.database.get(suite, {"points": {}})
        if not entry.get("seeds"):          # interrupted before any of its seeds ended
            print(f"{suite}: no seed finished")
            continue
        holes = [f"{p.name}: {' x '.join(b.label) if isinstance(b.label, tuple) else b.label}"
                 for p in entry["points"].values() for b in p.bins if b.hits < p.at_least]
        print(f"{suite}: {len(holes)} bins stayed empty"
              + (f" after {len(entry['seeds'])} seeds" if entry.get("seeds") else "")
              + ": " + "; ".join(holes[:12]) + ("; ..." if len(holes) > 12 else "")
              + f" (all in {campaign.regressions[suite].out / 'coverage.txt'})")
    runs = sum(len(r.outcomes) for r in campaign.regressions.values())
    planned = sum(r.planned for r in campaign.regressions.values())
    if campaign.interrupted:
        raise CommandError(f"interrupted: {runs} of {planned} seeds finished; the reports "
                           f"above cover those", status=130)
    if failed:
        raise CommandError(f"{failed} of {runs} seeds failed (in {', '.join(campaign.failed)})")
    if campaign.short:
        raise CommandError(f"functional coverage below the goal of {campaign.goal:g}% in "
                           + ", ".join(f"{s} ({campaign.percent(s):.2f}%)"
                                       for s in campaign.short))


class _Terminated(KeyboardInterrupt):
    """SIGTERM (what a CI time limit sends): stop as Ctrl-C does, writing the reports of the
    seeds that finished."""


def _terminated(signum, frame):
    raise _Terminated()


def _check_seed_options(args, suite=None):
    """Refuse, before anything runs, the options that would do nothing or fail every seed
    (of ``suite``, by default ``args.suite``)."""
    from verif.regress.executor.seed import CLUSTER_INJECTIONS
    from verif.suites import SUITES
    from verif.suites.case import WholeCase
    name = args.suite if suite is None else suite
    if args.seed is not None and args.seeds is not None:
        raise CommandError("give --seeds N (a regression) or --seed S (one seed), not both",
                           status=2)
    first = args.seed if args.seed is not None else args.seed_base
    seeds = [args.seed] if args.seed is not None else \
        list(range(args.seed_base, args.seed_base + (args.seeds or 4)))
    suite = SUITES[name]
    if args.inject in ("golden-no-flush", "golden-fault") and \
            args.inject != suite.GOLDEN_INJECTION:
        raise CommandError(f"--inject {args.inject} does nothing in suite {name}; its "
                           f"broken golden model is --inject {suite.GOLDEN_INJECTION}", status=2)
    if args.inject in STIMULUS_INJECTIONS and args.inject not in \
            getattr(suite, "STIMULUS_INJECTIONS", ()):
        raise CommandError(f"--inject {args.inject} does nothing in suite {name} (it starves "
                           f"the arith suite's stimulus)", status=2)
    if args.inject_seed is not None:
        if args.inject is None:
            raise CommandError("--inject-seed says which seed gets the fault of --inject; give "
                               "--inject too", status=2)
        if args.inject_seed not in seeds:
            raise CommandError(f"--inject-seed {args.inject_seed} is not a seed of this run "
                               f"({_seed_span(seeds)})", status=2)
    if args.inject in CLUSTER_INJECTIONS and args.cluster is None:
        raise CommandError(f"--inject {args.inject} kills a Dask worker; it needs --cluster",
                           status=2)
    if args.only is not None:
        names = [run.name if isinstance(run, WholeCase) else run[2]
                 for run in suite.runs(first)]
        if not any(args.only in run_name for run_name in names):
            raise CommandError(f"--only {args.only!r} matches no run of suite {name}; "
                               f"its runs: {', '.join(names)}", status=2)


def _seed_span(seeds):
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]} to {seeds[-1]}"


def _regress_on(executor, args):
    from verif.regress import EXHAUSTIVE, EXHAUSTIVE_SUITES, run_exhaustive, run_regression
    if executor.note:
        print(executor.note, file=sys.stderr, flush=True)
    if args.suite in EXHAUSTIVE_SUITES:
        where = executor.describe() if executor.remote else f"{args.jobs} harness processes"
        what = "bf16 operand pair" if args.suite == EXHAUSTIVE else \
            "fp32 input of rcp, rsqrt and exp"
        scope = "" if args.range is None else f" in [{args.range[0]:#x}, {args.range[1]:#x})"
        print(f"regress {args.suite}: every {what}{scope}, on {where} (seeds do not apply)",
              flush=True)
        return run_exhaustive(args.suite, jobs=args.jobs, only=args.only, executor=executor,
                              a_range=args.range), "modes"
    seeds = 1 if args.seed is not None else args.seeds
    print(f"regress {args.suite}: {seeds} seed{'s' * (seeds > 1)} on {args.backend}, "
          f"{executor.describe()}", flush=True)
    return run_regression(args.suite, seeds=args.seeds, sim=args.backend, seed_base=args.seed_base,
                          only_seed=args.seed, waves=args.waves, timeout=args.timeout,
                          inject=args.inject, inject_seed=args.inject_seed, only=args.only,
                          executor=executor, until_covered=args.until_covered,
                          cover_goal=args.cover_goal, code_coverage=not args.no_code_coverage,
                          step=args.jobs if args.cluster is None else _cluster_workers(args)), \
        "seeds"


def _cluster_workers(args):
    """Seeds a round of --until-covered gives a cluster: its workers for local:N, else 2."""
    return int(args.cluster.split(":")[1]) if args.cluster.startswith("local:") else 2


def _percent(text):
    value = number(text)
    if not 0.0 < value <= 100.0:
        raise argparse.ArgumentTypeError(f"must be a percentage above 0 and at most 100, not "
                                         f"{text}")
    return value


def _seconds(text):
    value = number(text)
    if not (value > 0.0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text}")
    return value


def _suite_list(text):
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"must name suites, such as arith,mxu, not {text!r}")
    return names


def add_parser(subparsers, help):
    """Add ``regress`` to the ``tpu-rtl`` subcommands."""
    p = subparsers.add_parser("regress", help=help,
                       description="Run SEEDS seeds of a suite on J parallel workers, or as "
                                   "tasks on a Dask cluster (--cluster). Writes "
                                   "JUnit XML, merged functional coverage and (Verilator) code "
                                   "coverage under build/regress/SUITE/, prints every failing "
                                   "seed with the command that reproduces it, and exits "
                                   "non-zero on any failure or when coverage is below the goal. "
                                   "An exhaustive suite runs modes instead of seeds (numerics, "
                                   "or function-numerics such as rsqrt-ieee) and ends with a "
                                   "table of them. 'regress all' runs every suite's seeds on "
                                   "one set of workers, prints one closure table and writes "
                                   "merged reports under build/regress/all/ (coverage.json, "
                                   "UCIS XML, lcov and Cobertura on the hdl/ source) and an "
                                   "HTML report, build/regress/report/index.html.")
    p.add_argument("suite", help="all (every suite below that runs seeds, one closure table "
                                 "and merged reports: HTML, UCIS, lcov), "
                                 "arith, mxu, dma, sparsecore, vpu (random vector programs "
                                 "against the golden executor), tensorcore (random "
                                 "programs on the chip against the instruction-set "
                                 "simulator), network (random topologies and traffic), "
                                 "system (random collectives on multi-chip systems "
                                 "against golden.collectives), system_embedding (random "
                                 "embedding steps on multi-chip systems against "
                                 "golden.embedding), "
                                 "bf16_mul_exhaustive (all "
                                 "2^32 multiplier operand pairs on a compiled Verilator "
                                 "harness) or vpu_transcendental_exhaustive (all 2^32 inputs "
                                 "of rcp, rsqrt and exp, likewise)")
    p.add_argument("--seeds", type=positive, help="number of seeds (default 4)")
    p.add_argument("-j", "--jobs", type=positive, default=1, help="parallel workers (default 1)")
    p.add_argument("--backend", "--sim", dest="backend", default="verilator",
                   choices=("amaranth", "verilator", "icarus"),
                   help="simulator (default verilator: many seeds share one build; --sim is an "
                        "alias)")
    p.add_argument("--seed-base", type=natural, default=1, help="first seed (default 1)")
    p.add_argument("--seed", type=natural, help="run exactly this one seed (to reproduce it)")
    p.add_argument("--cover-goal", type=_percent, metavar="PCT",
                   help="fail if merged functional coverage is below PCT percent")
    p.add_argument("--only", metavar="TEXT",
                   help="run only the suite's runs whose name contains TEXT "
                        "(e.g. fp32_add, tpu, mxu-ieee; an exhaustive suite's modes: tpu, "
                        "ieee, or rsqrt-ieee and the like)")
    p.add_argument("--range", type=lo_hi_range, metavar="LO:HI",
                   help="exhaustive suites: check only LO <= operand < HI (bf16_mul's a, a "
                        "transcendental's input bit pattern), a quick run")
    p.add_argument("--waves", action="store_true", help="write a waveform of every run")
    p.add_argument("--no-code-coverage", action="store_true",
                   help="Verilator: run the plain builds, without line, branch and toggle "
                        "coverage (faster; by default every model is a coverage build)")
    p.add_argument("--timeout", type=_seconds, default=1800.0, metavar="SECONDS",
                   help="time limit of one seed (default 1800)")
    p.add_argument("--cluster", metavar="WHERE",
                   help="run on Dask: local:N (a LocalCluster of N worker processes started "
                        "for the run) or tcp://HOST:PORT (a running scheduler); default: -j "
                        "workers on this machine")
    p.add_argument("--connect-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="how long to try to reach a --cluster scheduler (default 10)")
    p.add_argument("--suites", type=_suite_list, metavar="A,B,...",
                   help="regress all: only these suites (default every one)")
    p.add_argument("--until-covered", action="store_true",
                   help="add seeds in rounds until the suite (each suite, for all) reaches "
                        "--cover-goal (default 100) or has had --seeds, and name the bins "
                        "that stayed empty; a round is -j seeds (or the cluster's workers), "
                        "for all shared among the suites still going")
    p.add_argument("--inject", choices=("golden-no-flush", "golden-fault", "crash", "hang",
                                        "kill-worker", "kill-worker-once", "starve-nan"),
                   help="inject a fault, to test the regression itself")
    p.add_argument("--inject-seed", type=natural, metavar="SEED",
                   help="inject only into this seed (default: every seed)")
    p.set_defaults(func=run)
