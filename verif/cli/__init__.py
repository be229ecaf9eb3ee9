"""The ``tpu-rtl`` command line.

The parser is assembled from :data:`COMMANDS`, a registry of command modules
(``verif.cli.<name>``), each with ``add_parser(subparsers, help)`` and a
``run(args)`` it sets as the parser's ``func``. Only the module of the command
being run is imported: ``tpu-rtl --help`` and a mistyped command answer at
once, and one command's imports never slow another's start.

Every subcommand exits 0 on success, 1 on a mismatch or a failed run (a hang,
a simulator or tool failure), and 2 on bad input (a usage error: a flag out of
range, a missing or malformed file), with a one-line reason on stderr;
``--debug`` (before or after the command) shows the traceback of an unexpected
error instead.
"""

import argparse
import importlib
import sys

from verif.cli.common import CommandError

__all__ = ["COMMANDS", "main"]

#: Every command: its module under ``verif.cli`` and its one-line help.
COMMANDS = {
    "demo": "the main job: a data-parallel step, all-reduce and all-to-all on a 2x2 torus "
            "of chips, against golden",
    "matmul": "run one matmul on the MXU RTL and check it against golden",
    "chip": "run programs on one chip's RTL",
    "system": "run collectives and a data-parallel step on a multi-chip torus",
    "network": "sweep load on the ICI network RTL: latency-load table and plots",
    "sparsecore": "run an embedding lookup and update on the SparseCore tile RTL and check "
                  "them against golden",
    "export": "export a block's Verilog (hierarchical, lint-clean)",
    "fpga": "synthesize, place and route a block for a Lattice ECP5",
    "board": "build an FPGA board's bitstream (the ULX3S-85F) with the pip tools",
    "regress": "run a seeded, coverage-driven regression",
    "bench": "measure speed, utilization and the goals of docs/*.md",
}


class _DefaultsFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless the help already says it."""

    def _get_help_string(self, action):
        text = action.help or ""
        if ("default" in text or action.default in (None, False, argparse.SUPPRESS)
                or action.option_strings == [] or action.nargs == 0):
            return text
        return f"{text} (default {action.default})" if text else f"default {action.default}"


class _Parser(argparse.ArgumentParser):
    """The parser of ``tpu-rtl`` and of every command and sub-command under it (argparse
    makes sub-parsers of the parent's class): defaults stated in every help text."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        """A usage error as one line naming the flag, then exit status 2."""
        self.exit(2, f"{self.prog}: error: {message} (usage: {self.prog} --help)\n")

    def add_argument(self, *args, **kwargs):
        # An option without help still shows its default (and its choices, in the usage).
        if kwargs.get("help") is None and kwargs.get("default") not in (None, False):
            kwargs["help"] = f"default {kwargs['default']}"
        return super().add_argument(*args, **kwargs)


def _debug_option():
    """``--debug``, accepted before and after the command."""
    parent = _Parser(add_help=False)
    parent.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show a traceback instead of a one-line error")
    return parent


class _Subcommands:
    """What a command module's ``add_parser`` is handed: argparse's subparsers, with the
    ``--debug`` option added to every parser it makes."""

    def __init__(self, subparsers, parent):
        self._subparsers, self._parent = subparsers, parent

    def add_parser(self, name, **kwargs):
        return self._subparsers.add_parser(name, parents=[self._parent], **kwargs)


def _command_of(argv):
    """The command ``argv`` names (its first word that is one), or None."""
    return next((word for word in argv if word in COMMANDS), None)


def _parser(command=None):
    """The parser with every command's options, or only ``command``'s (the others listed
    by name and help, their modules not imported)."""
    parser = _Parser(
        prog="tpu-rtl",
        description="Synthesizable RTL model of a TPU-like machine: simulate, export Verilog, "
                    "verify. Options every command spells the same way: --backend (amaranth, "
                    "verilator or icarus; each command defaults to its Python runner's "
                    "default), --seed, --out, --waves FILE (.vcd or .fst), --fail CHIP, "
                    "--json FILE. Exit status: 0 on success, 1 on a mismatch or a failed "
                    "check, 2 on a usage error, with a one-line reason on stderr.")
    parser.add_argument("--debug", action="store_true",
                        help="show a traceback instead of a one-line error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wrapped = _Subcommands(sub, _debug_option())
    for name, help in COMMANDS.items():
        if command is None or command == name:
            importlib.import_module(f"verif.cli.{name}").add_parser(wrapped, help)
        else:
            sub.add_parser(name, help=help)
    return parser


def _run_failures():
    """The errors of a run that failed rather than of bad input (exit status 1). Imported
    only once a command has raised, so that ``--help`` and usage errors need none of the
    simulators' modules."""
    from sim.backends.cocotb_sim import SimulationError
    from sim.toolchain import ToolMissing
    from sim.transactors import SimulationHang
    from sim.verilog.fpga import FpgaError
    return ToolMissing, SimulationError, SimulationHang, FpgaError


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = _parser(_command_of(argv)).parse_args(argv)
    except SystemExit as done:          # --help (0) or a usage error (2), already printed
        return done.code if isinstance(done.code, int) else 0
    from sim.collector import collect_less
    collect_less()              # what follows elaborates and simulates designs
    try:
        args.func(args)
    except CommandError as error:
        print(f"tpu-rtl {args.command}: {error}", file=sys.stderr)
        return error.status
    except (ValueError, TypeError, FileNotFoundError) as error:
        # Bad input (a value out of range, a missing file): a usage error, as argparse's.
        if args.debug:
            raise
        print(f"tpu-rtl {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"tpu-rtl {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        if args.debug:
            raise
        if isinstance(error, _run_failures()):
            print(f"tpu-rtl {args.command}: error: {error}", file=sys.stderr)
            return 1
        # A bug, not bad input nor a failed run: one line unless asked for the traceback.
        print(f"tpu-rtl {args.command}: internal error: {type(error).__name__}: {error} "
              f"(rerun with --debug for the traceback)", file=sys.stderr)
        return 1
    return 0
