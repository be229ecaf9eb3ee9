"""Exhaustive checks cut into slices, each an independent task on a cluster.

A sliced check covers ``[0, span)`` of its outer operand for each mode; a
slice ``[lo, hi)`` of it runs anywhere with :func:`run_slice` (building or
reusing its Verilator harness in that worker's build cache), and
:func:`merge` joins a mode's slices into the result the whole check would
have given. Locally the regression runner keeps running a check whole
(``jobs`` harness processes in one call); the slices are for clusters.

A check joins :data:`CHECKS` with its modes, its span, a slice function and
a merge. ``bf16_mul_exhaustive`` slices ``a`` (65536 patterns; each slice
checks every ``b`` for its ``a``); the VPU's transcendental check, once it
has an RTL runner, slices its 2^32 inputs the same way.
"""

import operator
from dataclasses import dataclass
from typing import Callable

from golden.formats import NUMERICS

__all__ = ["SlicedCheck", "CHECKS", "slices", "run_slice", "merge"]


@dataclass(frozen=True)
class SlicedCheck:
    """``run(mode, lo, hi)`` checks a slice; ``merge(mode, results, seconds)`` joins them."""
    modes: tuple
    span: int
    run: Callable
    merge: Callable
    total: Callable             # checks in a slice of outer width ``hi - lo``


def _bf16_mul_slice(mode, lo, hi):
    from sim.exhaustive import run_bf16_mul_exhaustive
    return run_bf16_mul_exhaustive(mode, jobs=1, a_range=(lo, hi))


def _bf16_mul_merge(mode, results, seconds):
    from sim.exhaustive import ExhaustiveResult
    checked = sum(r.pairs_checked for r in results)
    # The mismatch lines start "a=0x.... b=0x....", fixed width: text order is (a, b) order.
    first = sorted(line for r in results for line in r.first_mismatches)[:5]
    return ExhaustiveResult(numerics=mode, pairs_checked=checked,
                            mismatches=sum(r.mismatches for r in results),
                            first_mismatches=first, seconds=seconds,
                            cycles_per_second=checked / seconds if seconds > 0 else 0.0,
                            build_seconds=max((r.build_seconds for r in results), default=0.0))


CHECKS = {
    "bf16_mul_exhaustive": SlicedCheck(modes=tuple(NUMERICS), span=65536, run=_bf16_mul_slice,
                                       merge=_bf16_mul_merge,
                                       total=lambda width: width * 65536),
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
    """Run slice ``[lo, hi)`` of ``check`` in ``mode`` here; returns the check's result."""
    return CHECKS[check].run(mode, lo, hi)


def merge(check, mode, results, seconds):
    """Join the results of a mode's slices (any order) into one result of ``seconds`` wall time."""
    return CHECKS[check].merge(mode, list(results), seconds)
