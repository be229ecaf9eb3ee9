"""``tpu-rtl demo``: odd-shaped matmuls and arithmetic corner cases on the RTL, against golden."""

import numpy as np

from golden import arith as golden_arith
from golden.formats import NUMERICS
from sim import arith as sim_arith

from .suites.arith import corpus
from .suites.mxu.matmul_check import check_matmul
from .suites.mxu.scenarios import bf16_matrix, fp32_matrix
from .scoreboard import Scoreboard

__all__ = ["mxu_demo", "arith_demo", "MXU_CASES"]

#: (M, K, N, numerics, start from acc, special-value density) on the demo array.
MXU_CASES = (
    (16, 8, 8, "tpu", False, 0.0),      # one tile
    (13, 20, 11, "ieee", True, 0.1),    # 3 K-tiles x 2 N-tiles, chained through acc_in
    (5, 17, 9, "tpu", True, 0.25),      # few rows a tile: the chain waits on its results
    (1, 1, 1, "ieee", False, 0.0),
)


def mxu_demo(*, seed, rows=8, cols=8, backend="amaranth", out=print):
    """Run :data:`MXU_CASES` on a ``rows x cols`` MXU; True if every output is bit-exact."""
    rng = np.random.default_rng(seed)
    out(f"MXU {rows}x{cols}: bf16 x bf16 -> fp32 matmuls vs golden (seed {seed}, "
        f"backend {backend})")
    out(f"  {'M x K x N':<12}{'numerics':<10}{'acc':<5}{'specials':>9}{'cycles':>8}"
        f"{'util':>7}  verdict")
    ok = True
    for m, k, n, numerics, use_acc, density in MXU_CASES:
        x = bf16_matrix(rng, (m, k), special_density=density)
        w = bf16_matrix(rng, (k, n), special_density=density)
        acc = fp32_matrix(rng, (m, n), special_density=density) if use_acc else None
        check = check_matmul(x, w, acc=acc, rows=rows, cols=cols, numerics=numerics,
                             backend=backend)
        ok &= check.passed
        verdict = "bit-exact" if check.passed else "MISMATCH"
        out(f"  {f'{m}x{k}x{n}':<12}{numerics:<10}{'yes' if use_acc else 'no':<5}"
            f"{density:>9.0%}{check.run.cycles:>8}{check.run.utilization:>7.2f}  {verdict}")
        if not check.passed:
            out(f"    {check.board.summary()}")
    return ok


def _arith_cases(rng, n_random):
    """Operands per unit: TestFloat-style corpus plus ``n_random`` random operations."""
    add = corpus.binary_corpus("fp32_add", rng, n_random)
    mul = corpus.binary_corpus("bf16_mul", rng, n_random)
    cvt = (corpus.unary_corpus("fp32_to_bf16", rng, n_random),)
    return {"fp32_add": add, "bf16_mul": mul, "fp32_to_bf16": cvt}


def arith_demo(*, seed, n_random=500, backend="amaranth", out=print):
    """Run every arithmetic unit on corner cases in both numerics; True if all bit-exact."""
    rng = np.random.default_rng(seed)
    out(f"Arithmetic units vs golden (seed {seed}, backend {backend})")
    out(f"  {'unit':<14}{'numerics':<10}{'vectors':>8}{'mismatches':>12}  verdict")
    ok = True
    for name, operands in _arith_cases(rng, n_random).items():
        names = [n for n, _ in sim_arith.UNITS[name].operands]
        for numerics in NUMERICS:
            got = getattr(sim_arith, name)(*operands, numerics=numerics, backend=backend)
            expected = getattr(golden_arith, name)(*operands, numerics=numerics)
            board = Scoreboard(f"{name}/{numerics}", expected, dict(zip(names, operands)))
            board.check_all(got)
            ok &= board.passed
            verdict = "bit-exact" if board.passed else "MISMATCH"
            out(f"  {name:<14}{numerics:<10}{board.checked:>8}{board.mismatches:>12}  {verdict}")
            if not board.passed:
                out(f"    first mismatch: {board.first_mismatch}")
    return ok
