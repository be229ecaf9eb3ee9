"""``tpu-rtl demo``: the main job, a data-parallel step, an all-reduce and an all-to-all on a
2x2 torus of chips, then an embedding step on a 2x2 torus of chips with SparseCores, each
checked against golden."""

import os

from verif.cli.common import CommandError, add_backend, flushed, natural

#: ``tpu-rtl demo``'s g++ optimization of its models, unless $TPU_RTL_OPT sets one: the
#: demo runs 4,000 cycles, and its 2x2 system's C++ compiles several times faster at -Og
#: than at -O1 (docs/simulation.md).
DEMO_OPT = "-Og"

__all__ = ["add_parser", "run"]


def run(args):
    from sim.toolchain import OPT_VARIABLE
    from verif.demo import arith_demo, embedding_demo, mxu_demo, system_demo
    # The demo's runs are a few thousand cycles: its builds favour compile time.
    os.environ.setdefault(OPT_VARIABLE, DEMO_OPT)
    ok = system_demo(seed=args.seed, out=flushed)
    flushed()
    ok &= embedding_demo(seed=args.seed, out=flushed)
    if args.blocks:
        flushed()
        ok &= mxu_demo(seed=args.seed, backend=args.backend, out=flushed)
        flushed()
        ok &= arith_demo(seed=args.seed, backend=args.backend, out=flushed)
    if not ok:
        raise CommandError("results differ from golden (see the tables above)")


def add_parser(subparsers, help):
    """Add ``demo`` to the ``tpu-rtl`` subcommands."""
    p = subparsers.add_parser(
        "demo", help=help,
        description="The main job, each part checked bit for bit against golden: on a 2x2 "
                    "torus of chips, a data-parallel step (a matmul on every chip's MXU, then "
                    "the all-reduce of the products, one program a chip), an all-reduce and an "
                    "all-to-all, then an embedding step on chips with SparseCores; with "
                    "--blocks, odd-shaped matmuls and arithmetic corner cases too. Exits 1 if "
                    "any result differs.")
    p.add_argument("--seed", type=natural, default=0,
                   help="seed of every random choice (default 0)")
    p.add_argument("--blocks", action="store_true",
                   help="then odd-shaped matmuls with special values on an 8x8 MXU and "
                        "arithmetic corner cases, on --backend (about 80 s more on Amaranth)")
    add_backend(p)
    p.set_defaults(func=run)
