"""``tpu-rtl regress``: a seeded, coverage-driven regression, or an exhaustive check."""

import sys

from verif.cli.common import CommandError, lo_hi_range, positive

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
    try:
        with open_executor(args.cluster, jobs=args.jobs,
                           connect_timeout=args.connect_timeout) as executor:
            result, unit = _regress_on(executor, args)
    except ClusterError as error:       # raised on entering: nothing has run
        raise CommandError(str(error)) from None
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
    p.add_argument("--seeds", type=positive, default=4, help="number of seeds (default 4)")
    p.add_argument("-j", "--jobs", type=positive, default=1, help="parallel workers (default 1)")
    p.add_argument("--backend", "--sim", dest="backend", default="verilator",
                   choices=("amaranth", "verilator", "icarus"),
                   help="simulator (default verilator: many seeds share one build; --sim is an "
                        "alias)")
    p.add_argument("--seed-base", type=int, default=1, help="first seed (default 1)")
    p.add_argument("--seed", type=int, help="run exactly this one seed (to reproduce it)")
    p.add_argument("--cover-goal", type=float, metavar="PCT",
                   help="fail if merged functional coverage is below PCT percent")
    p.add_argument("--only", metavar="TEXT",
                   help="run only the suite's runs whose name contains TEXT "
                        "(e.g. fp32_add, tpu, mxu-ieee; an exhaustive suite's modes: tpu, "
                        "ieee, or rsqrt-ieee and the like)")
    p.add_argument("--range", type=lo_hi_range, metavar="LO:HI",
                   help="exhaustive suites: check only LO <= operand < HI (bf16_mul's a, a "
                        "transcendental's input bit pattern), a quick run")
    p.add_argument("--waves", action="store_true", help="write a waveform of every run")
    p.add_argument("--timeout", type=float, default=1800.0, metavar="SECONDS",
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
    p.add_argument("--inject-seed", type=int, metavar="SEED",
                   help="inject only into this seed (default: every seed)")
    p.set_defaults(func=run)
