"""Every VPU op on its corpus, through ``sim.vpu``'s generated programs, on one full build.

``sim.vpu.elementwise`` builds a VPU with just the op asked for; here every op's passes
run on the full 1-lane build of a backend and numerics mode (the build the regression's
1-lane programs use): the same datapaths, one compile. The default tests run it on
Verilator in "tpu" numerics; the other backends and modes from the command line::

    .venv/bin/python -m tests.vpu.corpus --backend icarus --numerics ieee --seed 1
"""

import argparse
import sys

import numpy as np

from golden import vpu as golden
from sim import vpu
from verif.scoreboard import Scoreboard

from .operands import FLOAT_BINARY, float_pairs, int_pairs, unary_inputs

__all__ = ["SPECIAL", "corpus", "check_elementwise_corpus", "check_reduce_corpus", "main"]

#: Special and hard inputs: zeros, subnormals, the normal range's ends, infinities, NaNs,
#: rsqrt's hardest input (0x403A18E3), exp's overflow and underflow edges, integers.
SPECIAL = np.array([
    0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x3F800000, 0xBF800000,
    0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001,
    0x403A18E3, 0x42B17218, 0xC2CFF1B5, 0x3F808000, 0x4B800001, 0x0000001F, 0x00000021,
    0xFFFFFFFF, 0x00007F7F, 0xABCD0001,
], dtype=np.uint32)


def corpus(op, rng, size=512):
    """``size`` operands of ``op`` from the shared sets (tests/vpu/operands.py): their
    leading corners (every class against every class, the integer edges) and a random
    sample of the rest."""
    if op == "select":
        a, b = int_pairs(rng, 200)
        sets = (a, b, rng.integers(0, 3, a.size).astype(np.uint32))
    elif op in FLOAT_BINARY:
        sets = float_pairs(rng, 200)
    elif op in ("iadd", "isub", "and", "or", "xor", "shl", "shr", "sra"):
        sets = int_pairs(rng, 200)
    else:
        sets = (unary_inputs(op, rng, 200),)
    head = 169                                    # the class cross, or the integer grid
    rest = np.arange(head, sets[0].size)
    keep = np.concatenate([np.arange(head), rng.choice(rest, min(size - head, rest.size), False)])
    sets = tuple(x[keep] for x in sets)
    return (sets[0].astype(np.uint16),) if op == "bf16_to_f32" else sets


def _on_the_full_build(passes, *, backend, numerics):
    out = []
    for step in passes:
        got = vpu.run(step.program, vmem=step.vmem, lanes=1, backend=backend, numerics=numerics)
        assert got.error is None, got
        out.append(got.vmem[step.results])
    return np.concatenate(out)


def check_elementwise_corpus(op, rng, *, backend, numerics="tpu"):
    """The :class:`Scoreboard` of ``op`` on its corpus against ``golden.vpu.elementwise``."""
    operands = corpus(op, rng)
    words = golden.elementwise_operands(op, *operands)
    got = _on_the_full_build(vpu.plan_elementwise(op, [w.ravel() for w in words], lanes=1),
                             backend=backend, numerics=numerics)
    want = golden.elementwise(op, *operands, numerics=numerics)
    board = Scoreboard(f"{op}/{numerics}/{backend}", want, dict(zip("abc", operands)))
    board.check_all(got.astype(want.dtype))
    return board


def check_reduce_corpus(op, rng, special, *, backend, numerics="tpu"):
    """Reduction ``op`` over two passes of rows (``special`` values, ten random rows)
    against ``golden.vpu.reduce``; raises AssertionError on a difference."""
    rows = rng.choice(special, (vpu.VMEM_LINES // 8 + 5, 8))
    rows[:10] = rng.integers(0, 1 << 32, (10, 8), dtype=np.uint64).astype(np.uint32)
    np.testing.assert_array_equal(
        _on_the_full_build(vpu.plan_reduce(op, rows, lanes=1), backend=backend,
                           numerics=numerics),
        golden.reduce(op, rows, numerics=numerics), err_msg=f"{op}/{numerics}/{backend}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tests.vpu.corpus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("amaranth", "verilator", "icarus"),
                        default="verilator")
    parser.add_argument("--numerics", choices=("tpu", "ieee"), default="tpu")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    failed = 0
    for op in golden.ELEMENTWISE_OPS:
        board = check_elementwise_corpus(op, rng, backend=args.backend, numerics=args.numerics)
        print(board.summary(), flush=True)
        failed += not board.passed
    for op in golden.REDUCE_OPS:
        try:
            check_reduce_corpus(op, rng, SPECIAL, backend=args.backend, numerics=args.numerics)
            print(f"{op}: bit-exact", flush=True)
        except AssertionError as error:
            print(error, flush=True)
            failed += 1
    where = f"--backend {args.backend} --numerics {args.numerics} --seed {args.seed}"
    print(f"{'FAILED' if failed else 'passed'}: {failed} ops differ ({where})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
