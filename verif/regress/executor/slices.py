"""Exhaustive checks cut into slices, each an independent task on a cluster.

A sliced check covers ``[0, span)`` of its outer operand for each mode; a
slice ``[lo, hi)`` of it runs anywhere with :func:`run_slice` (building or
reusing its Verilator harness in that worker's build cache), and
:func:`merge` joins a mode's slices into the result the whole check would
have given. Locally the regression runner keeps running a check whole
(``jobs`` harness processes in one call); the slices are for clusters.

A check joins :data:`CHECKS` with its modes, its span, a slice function and
a merge. ``bf16_mul_exhaustive`` slices ``a`` (65536 patterns; each slice
checks every ``b`` for its ``a``); ``vpu_transcendental_exhaustive`` slices
the 2^32 inputs of each transcendental unit, one mode per function and
numerics (``rcp-tpu``, ``rcp-ieee``, ...).
"""

import operator
from dataclasses import dataclass
from typing import Callable

from golden.formats import NUMERICS

__all__ = ["SlicedCheck", "CHECKS", "slices", "run_slice", "merge"]


@dataclass(frozen=True)
class SlicedCheck:
    """``run(mode, lo, hi, *, jobs=1, progress=None)`` checks a slice (or, locally, the whole
    range on ``jobs`` harness processes); ``merge(mode, results, seconds)`` joins slices."""
    modes: tuple
    span: int
    run: Callable
    merge: Callable
    total: Callable             # checks in a slice of outer width ``hi - lo``
    unit: str = "pairs"         # what a check is, for progress lines
    operand: str = "a"          # the sliced operand, for messages

    def slice_name(self, lo, hi):
        digits = len(f"{self.span - 1:X}")
        return f"slice {self.operand} in [0x{lo:0{digits}X}, 0x{hi:0{digits}X})"


def _bf16_mul_slice(mode, lo, hi, *, jobs=1, progress=None):
    from sim.exhaustive import run_bf16_mul_exhaustive
    return run_bf16_mul_exhaustive(mode, jobs=jobs, a_range=(lo, hi), progress=progress)


def _bf16_mul_merge(mode, results, seconds):
    from sim.exhaustive import merge_results
    return merge_results(results, seconds, name="bf16_mul", numerics=mode, unit="pairs")


def _transcendental_modes():
    # Function names spelled out (sim.exhaustive_unary.TRANSCENDENTAL, which a test holds
    # this to), so that listing the modes imports no HDL.
    return tuple(f"{function}-{numerics}" for function in ("rcp", "rsqrt", "exp")
                 for numerics in NUMERICS)


def _transcendental_slice(mode, lo, hi, *, jobs=1, progress=None):
    from sim.exhaustive_unary import run_unary_exhaustive
    function, numerics = mode.split("-")
    return run_unary_exhaustive(function, numerics, jobs=jobs, x_range=(lo, hi),
                                progress=progress)


def _transcendental_merge(mode, results, seconds):
    from sim.exhaustive import merge_results
    from sim.exhaustive_unary import UNITS
    function, numerics = mode.split("-")
    return merge_results(results, seconds, name=UNITS[function].block, numerics=numerics,
                         unit="inputs")


CHECKS = {
    "bf16_mul_exhaustive": SlicedCheck(modes=tuple(NUMERICS), span=65536, run=_bf16_mul_slice,
                                       merge=_bf16_mul_merge,
                                       total=lambda width: width * 65536),
    "vpu_transcendental_exhaustive": SlicedCheck(
        modes=_transcendental_modes(), span=1 << 32, run=_transcendental_slice,
        merge=_transcendental_merge, total=lambda width: width, unit="inputs", operand="x"),
}


def slices(lo, hi, count):
    """``[lo, hi)`` cut into ``min(count, hi - lo)`` contiguous, nearly equal slices."""
    lo, hi, count = operator.index(lo), operator.index(hi), operator.index(count)
    if not lo < hi or count < 1:
        raise ValueError(f"need lo < hi and a positive count, not lo={lo}, hi={hi}, "
                         f"count={count}")
    count = min(count, hi - lo)
    bounds = [lo + (hi - lo) * i // count for i in range(count + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def run_slice(check, mode, lo, hi):
    """Run slice ``[lo, hi)`` of ``check`` in ``mode`` here, on one harness process; returns
    the check's result."""
    return CHECKS[check].run(mode, lo, hi)


def merge(check, mode, results, seconds):
    """Join the results of a mode's slices (any order) into one result of ``seconds`` wall time."""
    return CHECKS[check].merge(mode, list(results), seconds)
