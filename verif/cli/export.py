"""``tpu-rtl export``: a block's Verilog, hierarchical and lint-clean."""

import sys

from verif.cli.common import BLOCK_NAMES, CommandError, add_block, check_outputs, output_file

__all__ = ["add_parser", "run"]


def _core_path(output):
    """The ``.core`` file beside ``output``: ``FILE.v`` -> ``FILE.core``."""
    from pathlib import Path
    return Path(output).with_suffix(".core")


def run(args):
    from sim.verilog.export import export, fusesoc_core, parse_params
    if args.fusesoc and args.output is None:
        raise CommandError("--fusesoc needs -o FILE.v: the .core file goes beside the Verilog",
                           status=2)
    check_outputs(args, files=("output",))
    if args.fusesoc:
        output_file("--fusesoc", _core_path(args.output))
    result = export(args.block, parse_params(args.block, args.param))
    if args.output is None:
        sys.stdout.write(result.verilog)
    else:
        with open(args.output, "w") as f:
            f.write(result.verilog)
        print(f"wrote {args.output}: block {args.block}, modules {', '.join(result.modules)}, "
              f"{len(result.verilog) / 1e6:.2f} MB in {result.seconds:.1f} s", file=sys.stderr)
    if args.fusesoc:
        core = _core_path(args.output)
        core.write_text(fusesoc_core(result, args.output))
        print(f"wrote {core}: FuseSoC core, top module {args.block}", file=sys.stderr)
    if args.lint:
        from sim.verilog.lint import lint
        problems = lint(result.verilog, args.block)
        if problems:
            print("\n".join(problems), file=sys.stderr)
            raise CommandError(f"{len(problems)} lint warnings (verilator -Wall)")
        print("lint: clean (verilator -Wall)", file=sys.stderr)


def add_parser(subparsers, help):
    """Add ``export`` to the ``tpu-rtl`` subcommands."""
    p = subparsers.add_parser("export", help=help,
                       description=f"Export a block's Verilog. Blocks: {', '.join(BLOCK_NAMES)}. "
                                   "Parameters are the block's "
                                   "constructor parameters; --param preset=tpu_v4 (or tpu_v6e) "
                                   "sets an MXU's rows and cols.")
    add_block(p)
    p.add_argument("-o", "--out", "--output", dest="output", metavar="FILE.v",
                   help="output file (default: stdout)")
    p.add_argument("--fusesoc", action="store_true",
                   help="also write a FuseSoC CAPI2 core (FILE.core, beside -o FILE.v) naming "
                        "the Verilog and its top module, for Vivado, Quartus or Yosys flows")
    p.add_argument("--lint", action="store_true",
                   help="also lint the result with Verilator -Wall (fails on any warning)")
    p.set_defaults(func=run)
