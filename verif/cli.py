"""The ``tpu-rtl`` command line.

Every subcommand exits 0 on success and non-zero on any mismatch or error,
with a one-line reason on stderr; ``--debug`` shows the traceback of an
unexpected error instead.
"""

import argparse
import sys

__all__ = ["main"]


class CommandError(Exception):
    """A failure to report as one line, with exit status ``status``."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


def _not_built(issue):
    def command(args):
        raise CommandError(f"'{args.command}' is not built yet (see issue {issue})", status=2)
    return command


def _cmd_demo(args):
    from .demo import arith_demo
    if not arith_demo(seed=args.seed):
        raise CommandError("demo: results differ from golden (see the table above)")


def _parser():
    parser = argparse.ArgumentParser(
        prog="tpu-rtl",
        description="Synthesizable RTL model of TPU building blocks: simulate, export, verify.")
    parser.add_argument("--debug", action="store_true",
                        help="show a traceback instead of a one-line error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("demo", help="the main job: run the RTL on corner cases and check it "
                                    "against golden")
    p.add_argument("--seed", type=int, default=1, help="seed of every random choice (default 1)")
    p.set_defaults(func=_cmd_demo)

    for name, issue, text in (
            ("matmul", 3, "run one matmul on the MXU RTL and check it against golden"),
            ("export", 5, "export a block's Verilog"),
            ("fpga", 5, "synthesize and place a block for an ECP5 FPGA"),
            ("regress", 4, "run a seeded, coverage-driven regression"),
            ("bench", 5, "measure simulation and export speed into docs/benchmarks.md")):
        p = sub.add_parser(name, help=f"{text} (not built yet)")
        p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        p.set_defaults(func=_not_built(issue))
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        args.func(args)
    except CommandError as error:
        print(f"tpu-rtl {args.command}: {error}", file=sys.stderr)
        return error.status
    except (ValueError, TypeError, FileNotFoundError) as error:
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
