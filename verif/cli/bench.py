"""``tpu-rtl bench``: the measurements that write docs/*.md."""

import sys

__all__ = ["add_parser", "run"]


def run(args):
    from verif.bench.blocks import run_bench
    flags = f"{' --quick' if args.quick else ''}{f' --only {args.only}' if args.only else ''}"
    print(f"bench{flags}: measuring (progress on stderr)", flush=True)
    print(run_bench(quick=args.quick, output=args.output, large_array=args.large_array,
                    only=args.only))
    print(f"wrote {args.output}", file=sys.stderr)


def add_parser(subparsers, help):
    """Add ``bench`` to the ``tpu-rtl`` subcommands."""
    p = subparsers.add_parser("bench", help=help)
    p.add_argument("--quick", action="store_true", help="a short run with fewer sizes")
    p.add_argument("-o", "--output", default="docs/benchmarks.md", metavar="FILE.md",
                   help="where to write the table (default docs/benchmarks.md)")
    p.add_argument("--large-array", type=int, metavar="N",
                   help="edge of the large MXU built and run on the compiled path (default 32; "
                        "0 skips it; 64 needs about 8 GB and half an hour)")
    p.add_argument("--only", choices=("sparsecore",),
                   help="measure only this section and replace it in FILE.md, keeping the rest")
    p.set_defaults(func=run)
