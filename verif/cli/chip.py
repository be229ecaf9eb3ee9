"""``tpu-rtl chip``: programs on one chip's RTL.

::

    tpu-rtl chip matmul --m 256 --k 256 --n 256 --activation relu
    tpu-rtl chip matmul --m 37 --k 20 --n 19 --special-density 0.2 --numerics ieee
    tpu-rtl chip matmul --m 20 --k 24 --n 17 --activation relu --preset proto

``matmul`` runs ``sim.chip.matmul`` (HBM -> DMA -> VMEM -> MXU -> VPU -> DMA -> HBM, from
the assembled kernel of :mod:`sim.kernels.matmul`) on random bf16 operands, checks every
result word against ``golden.mxu.matmul`` (and ReLU), and prints the verdict, the cycles,
the MXU's utilization, the DMA/compute overlap and the sequencer's stall cycles by cause.
The exit status is 1 on any mismatch.
"""

from verif.cli.common import check_outputs, fraction, natural, positive

__all__ = ["add_parser", "cmd_chip_matmul"]


def add_parser(subparsers, help):
    """Add ``chip`` to the ``tpu-rtl`` subcommands."""
    p = subparsers.add_parser("chip", help=help,
                              description="Run TensorCore programs on the chip RTL "
                                          "(hdl.tensorcore.TensorCoreSystem).")
    sub = p.add_subparsers(dest="program", required=True, metavar="PROGRAM")
    m = sub.add_parser("matmul", help="x @ w (then ReLU) from HBM to HBM, checked bit for bit",
                       description="Multiply random bf16 x [M, K] by w [K, N] on the chip "
                                   "with the DMA-overlapped matmul kernel; check it against "
                                   "golden.mxu.matmul and report cycles, MXU utilization "
                                   "and DMA/compute overlap.")
    for dim in "mkn":
        m.add_argument(f"--{dim}", type=positive, required=True, help=f"{dim.upper()} (>= 1)")
    m.add_argument("--activation", choices=("relu",), help="apply ReLU on the VPU")
    m.add_argument("--numerics", choices=("tpu", "ieee"), default="tpu",
                   help="numerics mode (default tpu)")
    m.add_argument("--backend", choices=("verilator", "amaranth", "icarus"),
                   default="verilator", help="simulator (default verilator)")
    m.add_argument("--special-density", type=fraction, default=0.0, metavar="P",
                   help="fraction of operands replaced by special values (default 0)")
    m.add_argument("--seed", type=natural, default=0, help="seed of the operands (default 0)")
    m.add_argument("--waves", metavar="FILE", help="write a waveform of the run")
    m.add_argument("--preset", choices=("proto",),
                   help="run on a preset chip: proto, the FPGA prototype's (default: "
                        "sim.chip.MATMUL_CHIP)")
    m.set_defaults(func=cmd_chip_matmul)


def cmd_chip_matmul(args):
    check_outputs(args, files=("waves",))
    import numpy as np

    from golden import mxu, vpu
    from sim import chip

    from verif.cli.common import CommandError, progress_printer
    from verif.suites.mxu.scenarios import bf16_matrix

    rng = np.random.default_rng(args.seed)
    x = bf16_matrix(rng, (args.m, args.k), special_density=args.special_density)
    w = bf16_matrix(rng, (args.k, args.n), special_density=args.special_density)
    print(f"chip matmul {args.m}x{args.k}x{args.n}"
          f"{' + relu' if args.activation else ''} (numerics {args.numerics}, seed "
          f"{args.seed}, backend {args.backend}"
          f"{f', the {args.preset} chip' if args.preset else ''})", flush=True)
    progress = progress_printer("chip matmul")
    try:
        run = chip.matmul(x, w, activation=args.activation, numerics=args.numerics,
                          backend=args.backend, waves=args.waves, progress=progress,
                          preset=args.preset)
    except chip.ChipError as error:
        raise CommandError(str(error)) from None
    finally:
        progress.close()
    want = mxu.matmul(x, w, numerics=args.numerics).view(np.uint32)
    if args.activation == "relu":
        want = vpu.elementwise("max", want, np.zeros_like(want), numerics=args.numerics)
    wrong = int(np.count_nonzero(run.out.view(np.uint32) != want))
    verdict = "bit-exact" if not wrong else f"{wrong} of {want.size} words differ"
    print(f"  result: {verdict} against golden.mxu.matmul")
    print(f"  cycles: {run.cycles:,}   MXU utilization: {run.utilization:.3f}   "
          f"DMA/compute overlap: {run.overlap:.3f}")
    stalled = {cause: n for cause, n in run.stalls.items() if n}
    if stalled:
        # Where the cycles that issued no bundle went: what to attack for utilization.
        print("  sequencer stalls: " + ", ".join(
            f"{cause} {n:,} ({n / run.cycles:.1%})" for cause, n in stalled.items()))
    print(f"  simulated in {run.seconds:.2f} s: {run.cycles / max(run.seconds, 1e-9):,.0f} "
          f"cycles/s on {args.backend} (loading and read-back included, the build not)")
    if args.waves:
        print(f"  waves: {args.waves}")
    if wrong:
        again = (f"tpu-rtl chip matmul --m {args.m} --k {args.k} --n {args.n} --seed {args.seed} "
                 f"--numerics {args.numerics} --backend {args.backend} --special-density "
                 f"{args.special_density}" + (" --activation relu" if args.activation else "")
                 + (f" --preset {args.preset}" if args.preset else ""))
        raise CommandError(f"mismatch: {verdict} (reproduce: {again})")
