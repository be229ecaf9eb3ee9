"""``tpu-rtl demo``: corner cases through the RTL, checked against golden."""

import numpy as np

from golden import arith as golden_arith
from golden.formats import NUMERICS
from sim import arith as sim_arith

from . import corpus
from .scoreboard import Scoreboard

__all__ = ["arith_demo"]


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
