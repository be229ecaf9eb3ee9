"""``tpu-rtl regress``: a seeded, coverage-driven regression, or an exhaustive check."""

import argparse
import signal
import sys

from verif.cli.common import CommandError, lo_hi_range, natural, number, positive

__all__ = ["add_parser", "run"]


def run(args):
    from sim.backends import check_backend
    from verif.regress.executor import ClusterError, open_executor
    from verif.regress import EXHAUSTIVE_SUITES, SUITE_NAMES
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
    if args.cover_goal is not None and (result.coverage or 0.0) < args.cover_goal:
        raise CommandError(f"functional coverage {result.coverage or 0.0:.2f}% is below the "
                           f"goal of {args.cover_goal:g}%")


class _Terminated(KeyboardInterrupt):
    """SIGTERM (what a CI time limit sends): stop as Ctrl-C does, writing the reports of the
    seeds that finished."""


def _terminated(signum, frame):
    raise _Terminated()


def _check_seed_options(args):
    """Refuse, before anything runs, the options that would do nothing or fail every seed."""
    from verif.regress.executor.seed import CLUSTER_INJECTIONS
    from verif.suites import SUITES
    from verif.suites.case import WholeCase
    if args.seed is not None and args.seeds is not None:
        raise CommandError("give --seeds N (a regression) or --seed S (one seed), not both",
                           status=2)
    first = args.seed if args.seed is not None else args.seed_base
    seeds = [args.seed] if args.seed is not None else \
        list(range(args.seed_base, args.seed_base + (args.seeds or 4)))
    suite = SUITES[args.suite]
    if args.inject in ("golden-no-flush", "golden-fault") and \
            args.inject != suite.GOLDEN_INJECTION:
        raise CommandError(f"--inject {args.inject} does nothing in suite {args.suite}; its "
                           f"broken golden model is --inject {suite.GOLDEN_INJECTION}", status=2)
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
        if not any(args.only in name for name in names):
            raise CommandError(f"--only {args.only!r} matches no run of suite {args.suite}; "
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
                          executor=executor), "seeds"


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
                                   "table of them.")
    p.add_argument("suite", help="arith, mxu, dma, sparsecore, vpu (random vector programs "
                                 "against the golden executor), tensorcore (random "
                                 "programs on the chip against the instruction-set "
                                 "simulator), network (random topologies and traffic), "
                                 "system (random collectives on multi-chip systems "
                                 "against golden.collectives), "
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
    p.add_argument("--timeout", type=_seconds, default=1800.0, metavar="SECONDS",
                   help="time limit of one seed (default 1800)")
    p.add_argument("--cluster", metavar="WHERE",
                   help="run on Dask: local:N (a LocalCluster of N worker processes started "
                        "for the run) or tcp://HOST:PORT (a running scheduler); default: -j "
                        "workers on this machine")
    p.add_argument("--connect-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="how long to try to reach a --cluster scheduler (default 10)")
    p.add_argument("--inject", choices=("golden-no-flush", "golden-fault", "crash", "hang",
                                        "kill-worker", "kill-worker-once"),
                   help="inject a fault, to test the regression itself")
    p.add_argument("--inject-seed", type=natural, metavar="SEED",
                   help="inject only into this seed (default: every seed)")
    p.set_defaults(func=run)
