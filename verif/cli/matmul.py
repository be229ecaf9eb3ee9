"""``tpu-rtl matmul``: one matmul on the MXU RTL, checked against golden."""

from verif.cli.common import (CommandError, add_backend, add_gaps, check_outputs, fraction,
                              natural, positive, progress_printer)

__all__ = ["add_parser", "run"]


def _load_matrix(path, name, dtype):
    """``--x``/``--w``/``--acc``: a 2-D .npy array of floats or bit patterns."""
    import ml_dtypes
    import numpy as np
    option = f"--{name}"
    try:
        value = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise CommandError(f"{option} {path}: no such file", status=2) from None
    except (ValueError, OSError, EOFError):
        raise CommandError(f"{option} {path}: not a .npy array file (numpy.save writes one)",
                           status=2) from None
    if not isinstance(value, np.ndarray) or value.ndim != 2:
        raise CommandError(f"{option} {path}: {name} must be a 2-D matrix, not of shape "
                           f"{getattr(value, 'shape', '?')}", status=2)
    bits = np.uint16 if dtype == "bf16" else np.uint32
    target = ml_dtypes.bfloat16 if dtype == "bf16" else np.float32
    if value.dtype == bits:
        return value.view(target)
    if value.dtype.kind == "f" or value.dtype == target:
        return value.astype(target)
    raise CommandError(f"{option} {path}: {name} must hold floats or {np.dtype(bits).name} "
                       f"bit patterns, not {value.dtype}", status=2)


def run(args):
    check_outputs(args, files=("waves",))
    if args.waves_scope is not None and args.waves is None:
        raise CommandError("--waves-scope limits the waveform of --waves; give --waves too",
                           status=2)
    from sim.checks import check_tracing
    check_tracing(args.backend, args.waves, args.waves_scope)   # what the backend can trace
    import numpy as np
    from verif.suites.mxu.matmul_check import check_matmul
    from verif.suites.mxu.scenarios import bf16_matrix, fp32_matrix

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
    progress = progress_printer("matmul")
    check = check_matmul(x, w, acc=acc, rows=args.rows, cols=args.cols, numerics=args.numerics,
                         backend=args.backend, waves=args.waves, progress=progress,
                         seed=args.seed, idle=args.idle, stall=args.stall,
                         waves_scope=args.waves_scope)
    progress.close()
    print(f"  result: {check.board.summary()}")
    print(f"  cycles: {check.run.cycles}   utilization: {check.run.utilization:.3f}")
    if args.waves:
        print(f"  waves: {args.waves}")
    if not check.passed:
        raise CommandError(f"mismatch: {check.board.summary()}")


def add_parser(subparsers, help):
    """Add ``matmul`` to the ``tpu-rtl`` subcommands."""
    p = subparsers.add_parser("matmul", help=help)
    p.add_argument("--m", type=positive, help="rows of x")
    p.add_argument("--k", type=positive, help="columns of x, rows of w")
    p.add_argument("--n", type=positive, help="columns of w")
    p.add_argument("--rows", type=positive, default=8, help="array rows (default 8)")
    p.add_argument("--cols", type=positive, default=8, help="array columns (default 8)")
    p.add_argument("--numerics", choices=("tpu", "ieee"), default="tpu")
    p.add_argument("--seed", type=natural, default=0,
                   help="seed of the random operands and gaps (default 0)")
    add_gaps(p, stalled="the results")
    p.add_argument("--special-density", type=fraction, default=0.0, metavar="P",
                   help="fraction of operands replaced by special values (default 0)")
    p.add_argument("--with-acc", action="store_true", help="start from random partial sums")
    p.add_argument("--x", metavar="X.npy", help="x from a file (floats or uint16 bf16 patterns)")
    p.add_argument("--w", metavar="W.npy", help="w from a file")
    p.add_argument("--acc", metavar="ACC.npy", help="starting partial sums from a file")
    p.add_argument("--waves", metavar="FILE", help="write a waveform of the run (.vcd or .fst, "
                                                   "by the suffix)")
    p.add_argument("--waves-scope", metavar="PATH",
                   help="trace only the instances below PATH, such as dut (the MXU) or "
                        "dut.array (verilator and icarus; default everything)")
    add_backend(p)
    p.set_defaults(func=run)
