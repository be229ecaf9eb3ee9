"""Exhaustive check of a unary fp32 unit: every input bit pattern against golden.

A compiled Verilator harness (``sim/backends/harness/unary32_stream.cpp``)
streams the inputs ``[lo, hi)`` through the exported unit at one per cycle
and writes its results to a pipe; the shared engine of :mod:`sim.exhaustive`
runs ``jobs`` harness processes over slices of the inputs and compares their
results with the unit's golden function, in chunks. All 2^32 inputs are the
default.

The comparison is bit for bit with the golden function: for rcp and rsqrt
the correctly rounded value, for exp the golden's bit-exact model of the
hardware algorithm (whose own error is measured against a correctly rounded
oracle under ``tests/vpu``).

:data:`UNITS` lists the units the check knows, by function name; a new unit
in the block catalogue (:mod:`sim.blocks`) joins with one line. For example
``run_unary_exhaustive("sqrt", "ieee", x_range=(0x3F800000, 0x3F800100))``
checks the square roots of the 256 patterns from 1.0 up.
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from golden import arith, transcendental
from golden.formats import check_numerics
from hdl.vpu.transcendental_unit import core_depths

from .blocks import BLOCKS, block_params
from .exhaustive import ExhaustiveError, StreamCheck, build_stream_harness, run_stream_check

__all__ = ["UnaryUnit", "UNITS", "TRANSCENDENTAL", "HARNESS", "build_unary_harness",
           "run_unary_exhaustive"]

#: The C++ harness source; its text is part of the build cache key.
HARNESS = Path(__file__).parent / "backends" / "harness" / "unary32_stream.cpp"

_SPAN = 1 << 32          # fp32 bit patterns
# The harness is built with this model class name, whatever the unit's top module.
_PREFIX = "Vunary"


@dataclass(frozen=True)
class UnaryUnit:
    """A unary fp32 unit: its block in :data:`sim.blocks.BLOCKS` and its golden function.

    ``golden(a, *, numerics)`` maps a uint32 array of bit patterns to one of
    results. The block is a ``StreamPipeline`` with a 32-bit operand ``a``
    and a 32-bit result, built with a ``numerics`` parameter and ``params``
    (the block's defaults where they say nothing).
    """
    block: str
    golden: Callable
    params: dict = field(default_factory=dict)


#: The VPU's transcendental functions (SPEC section 4.2), each verified over all 2^32 inputs.
TRANSCENDENTAL = ("rcp", "rsqrt", "exp")
_VPU_DEPTHS = core_depths(TRANSCENDENTAL)

#: Function name -> unit. ``sqrt`` is not a transcendental; it is here as the
#: first unary unit that existed, and the cheapest to build. The transcendental units are
#: built at the depths the VPU builds them (exp deeper than its block's default).
UNITS = {
    "sqrt": UnaryUnit("fp32_sqrt", arith.fp32_sqrt),
    "rcp": UnaryUnit("fp32_rcp", transcendental.rcp, {"stages": _VPU_DEPTHS["rcp"]}),
    "rsqrt": UnaryUnit("fp32_rsqrt", transcendental.rsqrt, {"stages": _VPU_DEPTHS["rsqrt"]}),
    "exp": UnaryUnit("fp32_exp", transcendental.exp, {"stages": _VPU_DEPTHS["exp"]}),
}


def _unit(function):
    if function not in UNITS:
        raise ValueError(f"function must be one of {', '.join(UNITS)}, not {function!r}")
    return UNITS[function]


def _check_params(unit, params):
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict of {unit.block} parameters, "
                        f"not {type(params).__name__}")
    if "numerics" in params:
        raise ValueError("give numerics as its own argument, not in params")
    valid = block_params(unit.block)
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise ValueError(f"{unit.block}: unknown parameter {unknown[0]!r}; parameters: "
                         f"{', '.join(valid)}")
    return dict(params)


def build_unary_harness(function, numerics="tpu", params=None):
    """Build (or reuse) the harness of ``function``'s unit; return its executable.

    ``params`` are further block parameters (``{"stages": 1}``), over the
    unit's :attr:`UnaryUnit.params`. A unit that is not in the block
    catalogue yet is an :class:`~sim.exhaustive.ExhaustiveError`, so a
    regression records it as that mode's crash and goes on with the others.
    """
    unit = _unit(function)
    check_numerics(numerics)
    if unit.block not in BLOCKS:
        raise ExhaustiveError(f"{function}: the block catalogue (sim.blocks) has no unit "
                              f"{unit.block!r} yet")
    params = {**unit.params, **_check_params(unit, params)}
    return build_stream_harness(unit.block, {**params, "numerics": numerics}, HARNESS,
                                prefix=_PREFIX)


def _check(unit, numerics):
    def expected(first, count):
        inputs = np.arange(first, first + count, dtype=np.uint32)
        return np.asarray(unit.golden(inputs, numerics=numerics), dtype=np.uint32)

    def describe(index, got, expected):
        return f"x=0x{index:08X}: got 0x{got:08X}, expected 0x{expected:08X}"

    return StreamCheck(unit.block, "inputs", "x", span=_SPAN, per_value=1,
                       expected=expected, describe=describe)


def run_unary_exhaustive(function, numerics="tpu", *, params=None, jobs=2, x_range=(0, _SPAN),
                         progress=None):
    """Check ``function``'s RTL unit against its golden on every input in ``x_range``.

    Parameters
    ----------
    function : str
        A key of :data:`UNITS`: ``"rcp"``, ``"rsqrt"``, ``"exp"`` or ``"sqrt"``.
    numerics : "tpu" or "ieee"
    params : dict, optional
        Parameters of the unit's block (e.g. ``{"stages": 1}``), over the
        unit's :attr:`UnaryUnit.params`.
    jobs : int
        Harness processes run in parallel, each over a contiguous slice of inputs.
    x_range : (lo, hi)
        Inputs ``lo <= x < hi`` (fp32 bit patterns); the default is all 2^32.
    progress : callable, optional
        Called as ``progress(done_inputs, total_inputs)`` after each checked
        chunk, and once at the end.

    Returns
    -------
    ExhaustiveResult
        Named after the block, counting ``"inputs"``. Mismatches are counted,
        not raised; ``first_mismatches`` shows the first few in input order,
        as ``"x=0x...: got 0x..., expected 0x..."``.

    Raises
    ------
    ValueError, TypeError
        Bad ``function``, ``numerics``, ``params``, ``jobs`` or ``x_range``.
    ExhaustiveError
        The harness failed to build (or its unit does not exist yet), crashed
        or wrote short; the message names the slice.
    """
    unit = _unit(function)
    check_numerics(numerics)
    params = _check_params(unit, params)
    return run_stream_check(_check(unit, numerics),
                            lambda: build_unary_harness(function, numerics, params),
                            numerics, x_range, jobs=jobs, progress=progress)
