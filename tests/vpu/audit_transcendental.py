"""Audit golden rcp, rsqrt or exp over a range of inputs (all 2**32 by default); not a pytest file.

    .venv/bin/python -m tests.vpu.audit_transcendental FUNCTION [--numerics ieee]
                     [--start N] [--stop N]

Every input's golden result is compared with an independent estimate in
x87 extended precision (``np.longdouble``: 64-bit significand; glibc's
``expl``, ``sqrtl`` and the FPU's division), rounded to binary32. Where that
estimate lies within 2**-30 binary32 ULP of a rounding midpoint (its own
error is below 2**-38 ULP), or where it and the golden disagree, the
one-element oracle decides: exact integers for rcp and rsqrt, MPFR for exp.
It prints the inputs checked, how many the oracle decided, mismatches
against the oracle and the worst error in ULPs; for exp also the inputs
where rounding numpy's float64 ``exp`` straight to binary32 would have been
wrong (the cases golden settles with ``decimal``). Exit status 1 on any
mismatch.
"""

import argparse
import sys
import time

import numpy as np

from golden import transcendental
from . import oracle_transcendental as oracle

_ESTIMATE = {
    "rcp": lambda x: 1 / x,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "exp": np.exp,
}
_ORACLE = {"rcp": oracle.EXACT["rcp"], "rsqrt": oracle.EXACT["rsqrt"], "exp": oracle.MPFR["exp"]}


def _flush(bits):
    return np.where((bits & 0x7F800000) == 0, bits & np.uint32(0x80000000), bits)


def _estimate(function, bits, numerics):
    """Longdouble-rounded results, and the mask of inputs too near a midpoint to trust them."""
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
    return rounded, near


def audit(function, numerics, start=0, stop=1 << 32, chunk=1 << 22, report=print):
    began = time.perf_counter()
    decide = _ORACLE[function]
    mismatches, decided, double_rounding, worst = [], 0, [], 0
    for lo in range(start, stop, chunk):
        bits = np.arange(lo, min(lo + chunk, stop), dtype=np.uint64).astype(np.uint32)
        golden = transcendental.apply(function, bits, numerics=numerics)
        estimate, near = _estimate(function, bits, numerics)
        ask = np.flatnonzero(near | (estimate != golden))
        decided += ask.size
        for i in ask:
            truth = decide(int(bits[i]), numerics)
            if truth != golden[i]:
                mismatches.append((int(bits[i]), int(golden[i]), truth))
                worst = max(worst, abs(int(golden[i]) - truth))
        if function == "exp":
            flushed = _flush(bits) if numerics == "tpu" else bits
            with np.errstate(all="ignore"):
                naive = np.exp(flushed.view(np.float32).astype(np.float64)) \
                    .astype(np.float32).view(np.uint32)
            naive = np.where(np.isnan(flushed.view(np.float32)), np.uint32(oracle.QNAN), naive)
            if numerics == "tpu":
                naive = _flush(naive)
            double_rounding += [(int(bits[i]), int(naive[i]), int(golden[i]))
                                for i in np.flatnonzero(naive != golden)]
    seconds = time.perf_counter() - began
    report(f"{function}/{numerics} inputs [{start:#x}, {stop:#x}): {stop - start} checked in "
           f"{seconds:.0f} s; {decided} decided by the oracle; {len(mismatches)} mismatches; "
           f"worst error {worst} ULP")
    if function == "exp":
        report(f"float64 exp rounded straight to binary32 is wrong on {len(double_rounding)} "
               f"inputs: " + ", ".join(f"{a:#010x} (gives {n:#010x}, golden {g:#010x})"
                                       for a, n, g in double_rounding[:40]))
    for m in mismatches[:20]:
        report(f"MISMATCH input {m[0]:#010x}: golden {m[1]:#010x}, oracle {m[2]:#010x}")
    return mismatches


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("function", choices=transcendental.FUNCTIONS)
    parser.add_argument("--numerics", choices=("ieee", "tpu"), default="ieee")
    parser.add_argument("--start", type=lambda s: int(s, 0), default=0)
    parser.add_argument("--stop", type=lambda s: int(s, 0), default=1 << 32)
    args = parser.parse_args(argv)
    return 1 if audit(args.function, args.numerics, args.start, args.stop) else 0


if __name__ == "__main__":
    sys.exit(main())
