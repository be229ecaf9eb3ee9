"""Audit golden rcp, rsqrt or exp over a range of inputs (all 2**32 by default); not a pytest file.

    .venv/bin/python -m tools.audit_transcendental FUNCTION [--numerics ieee]
                     [--start N] [--stop N] [--nontrivial]

rcp and rsqrt are correctly rounded: every input's golden result is compared
with an independent estimate in x87 extended precision (``np.longdouble``:
64-bit significand; glibc's ``sqrtl`` and the FPU's division), rounded to
binary32. Where that estimate lies within 2**-30 binary32 ULP of a rounding
midpoint (its own error is below 2**-38 ULP), or where it and the golden
disagree, the exact-integer oracle decides. It prints the inputs checked, how
many the oracle decided, mismatches and the worst error in ULPs; exit status
1 on any mismatch.

exp is faithful, not correctly rounded (:func:`audit_exp`): every input's
golden result is compared with the correctly rounded result
(:func:`.oracle_transcendental.exp_correctly_rounded`; MPFR confirms it
wherever golden differs from it) and with numpy's float64 ``exp`` for the
error in ULPs (itself within about 2**-28 binary32 ULP of the truth).
``--nontrivial`` sweeps only :data:`EXP_NONTRIVIAL`, the inputs whose result
is neither 1, nor inf, nor 0, nor NaN. Exit status 1 if
a result is more than 1 ULP from the correctly rounded one, or the error
exceeds :data:`EXP_BOUND`.
"""

import argparse
import sys
import time

import numpy as np

from golden import transcendental
from tests.vpu import oracle_transcendental as oracle

_ESTIMATE = {
    "rcp": lambda x: 1 / x,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "exp": np.exp,
}
_ORACLE = {"rcp": oracle.EXACT["rcp"], "rsqrt": oracle.EXACT["rsqrt"], "exp": oracle.MPFR["exp"]}

#: The documented error bound of golden exp, in ULPs of the exact result.
EXP_BOUND = 0.519

#: Input ranges holding every exp result other than 1, inf, 0 and NaN (with
#: margin): x in [2**-27, 88.75) and x in (-104, -2**-27].
EXP_NONTRIVIAL = ((0x32000000, 0x42B20000), (0xB2000000, 0xC2D00000))


def _flush(bits):
    return np.where((bits & 0x7F800000) == 0, bits & np.uint32(0x80000000), bits)


def _estimate(function, bits, numerics):
    """Longdouble results, rounded, and the mask of inputs too near a midpoint to trust them;
    also the unrounded longdouble values."""
    if numerics == "tpu":
        bits = _flush(bits)
    with np.errstate(all="ignore"):
        v = _ESTIMATE[function](bits.view(np.float32).astype(np.longdouble))
        rounded = v.astype(np.float32).view(np.uint32)
        mag = np.abs(v)
        e2 = np.frexp(mag)[1]
        u = np.ldexp(mag, np.where(e2 - 1 >= -126, 24 - e2, 149))
        near = np.abs(u - np.floor(u) - 0.5) < 2.0 ** -30
        near &= np.isfinite(mag) & (mag > 0) & (e2 <= 128)
    rounded = np.where(np.isnan(v), np.uint32(oracle.QNAN), rounded)
    if numerics == "tpu":
        rounded = _flush(rounded)
    return rounded, near, v


def audit(function, numerics, start=0, stop=1 << 32, chunk=1 << 22, report=print):
    """Correctly rounded functions (rcp, rsqrt): the list of mismatches with the oracle."""
    if function == "exp":
        raise ValueError("exp is not correctly rounded: use audit_exp")
    began = time.perf_counter()
    decide = _ORACLE[function]
    mismatches, decided, worst = [], 0, 0
    for lo in range(start, stop, chunk):
        bits = np.arange(lo, min(lo + chunk, stop), dtype=np.uint64).astype(np.uint32)
        golden = transcendental.apply(function, bits, numerics=numerics)
        estimate, near, _ = _estimate(function, bits, numerics)
        ask = np.flatnonzero(near | (estimate != golden))
        decided += ask.size
        for i in ask:
            truth = decide(int(bits[i]), numerics)
            if truth != golden[i]:
                mismatches.append((int(bits[i]), int(golden[i]), truth))
                worst = max(worst, abs(int(golden[i]) - truth))
    seconds = time.perf_counter() - began
    report(f"{function}/{numerics} inputs [{start:#x}, {stop:#x}): {stop - start} checked in "
           f"{seconds:.0f} s; {decided} decided by the oracle; {len(mismatches)} mismatches; "
           f"worst error {worst} ULP")
    for m in mismatches[:20]:
        report(f"MISMATCH input {m[0]:#010x}: golden {m[1]:#010x}, oracle {m[2]:#010x}")
    return mismatches


def exp_errors(bits, golden, exact, numerics):
    """Error of ``golden`` exp results in ULPs of the ``exact`` values (float arrays).

    An ULP is the binary32 spacing at the exact value (2**-149 below 2**-126
    in "ieee"); inf counts as 2**128. NaN results, results equal to a
    correctly rounded 0 or inf, and in "tpu" exact values below 2**-126 (the
    flush zone, where only equality with the correctly rounded result means
    anything) get error 0.
    """
    with np.errstate(all="ignore"):
        e2 = np.frexp(exact)[1]
        one = exact.dtype.type(1)
        ulp = np.ldexp(one, np.maximum(e2 - 1, -126) - 23)
        value = golden.view(np.float32).astype(exact.dtype)
        value = np.where(golden == oracle.INF, np.ldexp(one, 128), value)
        error = np.abs(value - exact) / ulp
    skip = np.isnan(exact) | (golden == oracle.QNAN)
    skip |= (exact >= np.ldexp(one, 128)) & (golden == oracle.INF)
    skip |= (exact < np.ldexp(one, -150)) & (golden == 0)
    if numerics == "tpu":
        skip |= exact < np.ldexp(one, -126)
    return np.where(skip, 0, error)


def audit_exp(numerics, ranges=((0, 1 << 32),), chunk=1 << 18, report=print):
    """Measure golden exp against the correctly rounded exp over ``ranges`` of input patterns.

    Returns a dict: ``checked``, ``not_correctly_rounded`` (count), ``max_ulp``
    (worst error in ULPs of the exact value, :func:`exp_errors`) and
    ``worst_input``, ``max_steps`` (largest distance to the correctly rounded
    pattern, "tpu" flush zone apart), ``flush_zone_differences`` ("tpu": inputs
    whose exact result is below 2**-126 where golden and the correctly rounded
    result differ), ``oracle_errors`` (inputs where golden differs from the
    correctly rounded oracle and MPFR disagrees with the oracle), ``seconds``.
    """
    began = time.perf_counter()
    stats = dict(checked=0, not_correctly_rounded=0, max_ulp=0.0, worst_input=None,
                 max_steps=0, flush_zone_differences=0, oracle_errors=[])
    for start, stop in ranges:
        for lo in range(start, stop, chunk):
            bits = np.arange(lo, min(lo + chunk, stop), dtype=np.uint64).astype(np.uint32)
            golden = transcendental.exp(bits, numerics=numerics)
            rounded = oracle.exp_correctly_rounded(bits, numerics)
            differ = golden != rounded
            for i in np.flatnonzero(differ):
                if oracle.MPFR["exp"](int(bits[i]), numerics) != rounded[i]:
                    stats["oracle_errors"].append(int(bits[i]))
            with np.errstate(all="ignore"):
                exact = np.exp((_flush(bits) if numerics == "tpu" else bits)
                               .view(np.float32).astype(np.float64))
            zone = exact < 2.0 ** -126
            if numerics == "ieee":
                zone = np.zeros_like(differ)
            stats["flush_zone_differences"] += int(np.count_nonzero(differ & zone))
            steps = np.abs(golden.astype(np.int64) - rounded.astype(np.int64))
            stats["max_steps"] = max(stats["max_steps"], int(np.max(np.where(zone, 0, steps))))
            stats["not_correctly_rounded"] += int(np.count_nonzero(differ))
            error = exp_errors(bits, golden, exact, numerics)
            i = int(np.argmax(error))
            if error[i] > stats["max_ulp"]:
                stats["max_ulp"], stats["worst_input"] = float(error[i]), int(bits[i])
            stats["checked"] += bits.size
    stats["seconds"] = time.perf_counter() - began
    spans = ", ".join(f"[{a:#010x}, {b:#010x})" for a, b in ranges)
    worst = stats["worst_input"]
    report(f"exp/{numerics} inputs {spans}: {stats['checked']} checked in "
           f"{stats['seconds']:.0f} s; max error {stats['max_ulp']:.5f} ULP"
           + (f" at {worst:#010x}" if worst is not None else "")
           + f"; {stats['not_correctly_rounded']} not correctly rounded "
           f"({stats['not_correctly_rounded'] / max(1, stats['checked']):.3%}); at most "
           f"{stats['max_steps']} ULP from the correctly rounded result"
           + (f"; {stats['flush_zone_differences']} differ in the flush zone"
              if numerics == "tpu" else "")
           + f"; {len(stats['oracle_errors'])} oracle errors")
    return stats


def exp_failed(stats):
    """Whether an :func:`audit_exp` result breaks the documented accuracy."""
    return (stats["max_steps"] > 1 or stats["max_ulp"] > EXP_BOUND or stats["oracle_errors"]
            or stats["flush_zone_differences"] > 0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("function", choices=transcendental.FUNCTIONS)
    parser.add_argument("--numerics", choices=("ieee", "tpu"), default="ieee")
    parser.add_argument("--start", type=lambda s: int(s, 0), default=0)
    parser.add_argument("--stop", type=lambda s: int(s, 0), default=1 << 32)
    parser.add_argument("--nontrivial", action="store_true",
                        help="exp: sweep only the inputs whose result is not 1, inf, 0 or NaN")
    args = parser.parse_args(argv)
    if args.function == "exp":
        ranges = EXP_NONTRIVIAL if args.nontrivial else ((args.start, args.stop),)
        return 1 if exp_failed(audit_exp(args.numerics, ranges)) else 0
    return 1 if audit(args.function, args.numerics, args.start, args.stop) else 0


if __name__ == "__main__":
    sys.exit(main())
