"""Golden fp32 reciprocal, reciprocal square root and exp (SPEC section 3).

``rcp`` and ``rsqrt`` are correctly rounded (round to nearest even, 0 ULP)
and computed with exact integer arithmetic, vectorized over ``uint64``:

* ``rcp``: the significand ``m`` (24 bits) gives ``F = 2**49 // m`` and the
  remainder says whether the quotient is exact.
* ``rsqrt``: with the exponent made even, ``x = M * 2**(2k)`` and
  ``M`` in ``[2**24, 2**26)``, ``F = floor(2**38 / sqrt(M))`` is the largest
  integer with ``F*F*M <= 2**76``. A float64 estimate proposes ``F``; exact
  two-limb products ``F*F*M`` and ``(F+1)*(F+1)*M`` against ``2**76`` correct
  it, and say whether the root is exact. Composing two correctly rounded
  operations (``1/sqrt(x)``) would be wrong on about a quarter of the
  significands, and the hardest input, 0x403A18E3, lies 2**-28.5 ULP from a
  rounding midpoint: only an exact test settles it.

Either way the value is ``(F + d) * 2**E`` with ``F`` of 26 or 27 bits,
``0 <= d < 1`` and ``d > 0`` exactly when the result is inexact; one
rounding step (:func:`_round_pack`) turns that into binary32, subnormals and
overflow included.

``exp`` rounds numpy's float64 ``exp`` to binary32 and settles every case
where that estimate lies within ``2**-20`` ULP (binary32) of a rounding
midpoint with Python's ``decimal`` (60 digits, itself correctly rounded), so
it is correctly rounded as long as the float64 ``exp`` is within 512 ULP
(binary64) of the truth; numpy's is within a few. A decimal result too close
to the midpoint to decide raises ``RuntimeError`` rather than guess.
Measured worst case: 0 ULP against MPFR (tests/vpu/audit_transcendental.py).

Numerics: "tpu" reads a subnormal input as a zero of the same sign and
turns a subnormal result into a zero of the same sign; "ieee" keeps
subnormals. Every NaN result is the canonical 0x7FC00000. Special cases:

* ``rcp``: ``1/+-0 = +-inf``, ``1/+-inf = +-0``;
* ``rsqrt``: ``rsqrt(+-0) = +-inf``, ``rsqrt(+inf) = +0``, NaN for every
  negative non-zero input (``-inf`` included);
* ``exp``: ``exp(+-0) = 1``, ``exp(+inf) = +inf``, ``exp(-inf) = +0``;
  overflow gives inf, underflow a subnormal or +0;
* a NaN input gives NaN.
"""

import dataclasses
import decimal
import functools
import time
from fractions import Fraction

import numpy as np

from .formats import FP32, check_numerics, flush_subnormal

__all__ = ["FUNCTIONS", "rcp", "rsqrt", "exp", "apply", "exhaustive_check",
           "ExhaustiveReport"]

FUNCTIONS = ("rcp", "rsqrt", "exp")

_QNAN = np.uint32(FP32.qnan)
_INF = np.uint32(FP32.inf)
_SIGN = np.uint32(FP32.sign_mask)
_U64 = np.uint64


def _bits(a, name="a"):
    a = np.asarray(a)
    if a.dtype == np.float32:
        return a.view(np.uint32)
    if a.dtype != np.uint32:
        raise ValueError(f"{name} must be a float32 array or a uint32 bit-pattern array, "
                         f"not {a.dtype}")
    return a


def _bit_length(v):
    """Bit length of each element of a uint64 array whose values are below 2**53."""
    return np.frexp(v.astype(np.float64))[1].astype(np.int64)


def _unpack(mag):
    """Split finite non-zero magnitudes into ``m * 2**e`` with ``m`` in [2**23, 2**24).

    Through float64, where every binary32 value (subnormals too) is a
    normal number: frexp then scales exactly.
    """
    frac, e = np.frexp(mag.view(np.float32).astype(np.float64))
    return np.ldexp(frac, 24).astype(_U64), e.astype(np.int64) - 24


def _round_pack(f, e, inexact):
    """Binary32 magnitude of ``(f + d) * 2**e``, rounded to nearest even.

    ``f`` is uint64 with 25 to 53 bits, ``e`` int64, ``inexact`` says
    ``d > 0`` (``d < 1``). Subnormal results round at 2**-149; overflow
    gives inf.
    """
    n = _bit_length(f)
    lead = n - 1 + e
    normal = lead >= -126
    shift = np.where(normal, n - 24, -149 - e)
    # Past bit 53 every bit of f is below the rounding point: the same
    # outcome as any larger shift, without an undefined 64-bit shift.
    shift = np.minimum(shift, 60).astype(_U64)
    kept = f >> shift
    rem = f & ((_U64(1) << shift) - _U64(1))
    half = _U64(1) << (shift - _U64(1))
    up = (rem > half) | ((rem == half) & (inexact | ((kept & _U64(1)) == 1)))
    kept = kept + up.astype(_U64)
    # kept carries the hidden bit, so a carry out of the significand steps
    # the exponent, and a subnormal rounding up to 2**-126 becomes normal.
    exp_field = np.where(normal, lead + 126, 0)
    out = (np.minimum(exp_field, 255).astype(_U64) << _U64(23)) + kept
    return np.minimum(out, _U64(FP32.inf)).astype(np.uint32)


def _mul_vs_pow2(a, b, p):
    """Sign (-1, 0, 1) of ``a*b - 2**p`` exactly: ``a < 2**53``, ``b < 2**27``, ``p >= 27``.

    The product needs up to 80 bits, so it is formed as two limbs,
    ``hi * 2**27 + lo``.
    """
    mask = _U64((1 << 27) - 1)
    low_product = (a & mask) * b
    hi = (a >> _U64(27)) * b + (low_product >> _U64(27))
    lo = low_product & mask
    target = _U64(1 << (p - 27))
    return np.where(hi > target, 1, np.where(hi < target, -1, (lo > 0).astype(np.int64)))


def _rcp_core(m, e):
    f = _U64(1 << 49) // m
    inexact = (_U64(1 << 49) % m) != 0
    return _round_pack(f, -49 - e, inexact)


def _rsqrt_core(m, e):
    odd = (e & 1) == 1
    big_m = np.where(odd, m << _U64(1), m << _U64(2))       # [2**24, 2**26)
    half_e = np.where(odd, e - 1, e - 2) // 2              # x = big_m * 4**half_e
    f = np.floor(2.0 ** 38 / np.sqrt(big_m.astype(np.float64))).astype(_U64)
    # The estimate is within one of floor(z); correct it until both bounds
    # hold exactly (the loop also confirms the correction).
    while True:
        low = _mul_vs_pow2(f * f, big_m, 76)
        too_big = low > 0
        too_small = _mul_vs_pow2((f + _U64(1)) * (f + _U64(1)), big_m, 76) <= 0
        if not (too_big.any() or too_small.any()):
            break
        f = f - too_big.astype(_U64) + too_small.astype(_U64)
    inexact = low != 0
    return _round_pack(f, -38 - half_e, inexact)


def _flat(function):
    """Run ``function`` on a 1-D view of its operand and give the result the operand's shape
    (numpy turns 0-d results into scalars, which cannot be assigned into)."""
    @functools.wraps(function)
    def wrapper(a, *, numerics="tpu"):
        a = _bits(a)
        return function(a.reshape(-1), numerics=numerics).reshape(a.shape)
    return wrapper


def _finish(out, numerics):
    out = np.asarray(out, dtype=np.uint32)
    if numerics == "tpu":
        out = flush_subnormal(out, FP32)
    return out


def _classes(a, numerics):
    check_numerics(numerics)
    a = _bits(a)
    if numerics == "tpu":
        a = flush_subnormal(a, FP32)
    sign = a & _SIGN
    mag = a & np.uint32(0x7FFFFFFF)
    return sign, mag, mag > _INF, mag == _INF, mag == 0


def _finite_part(mag, finite, core):
    """``core(m, e)`` on every element, specials replaced by 1.0 (the caller overrides them)."""
    m, e = _unpack(np.where(finite, mag, np.uint32(0x3F800000)))
    return core(m, e)


@_flat
def rcp(a, *, numerics="tpu"):
    """Correctly rounded ``1/a`` of fp32 bit patterns (or float32 values); returns uint32."""
    sign, mag, nan, inf, zero = _classes(a, numerics)
    out = _finite_part(mag, ~(nan | inf | zero), _rcp_core)
    out = np.where(zero, _INF, np.where(inf, np.uint32(0), out)) | sign
    return _finish(np.where(nan, _QNAN, out), numerics)


@_flat
def rsqrt(a, *, numerics="tpu"):
    """Correctly rounded ``1/sqrt(a)`` of fp32 bit patterns (or float32 values); returns uint32.

    ``rsqrt(+-0) = +-inf``, ``rsqrt(+inf) = +0``, and every negative
    non-zero input (``-inf`` included) gives NaN.
    """
    sign, mag, nan, inf, zero = _classes(a, numerics)
    out = _finite_part(mag, ~(nan | inf | zero), _rsqrt_core)
    out = np.where(zero, _INF | sign, np.where(inf, np.uint32(0), out))
    return _finish(np.where(nan | ((sign != 0) & ~zero), _QNAN, out), numerics)


# Decimal digits for exp's hard cases: binary32 exp's worst cases need
# about 2*24 + 30 bits; 60 digits are ~199 bits.
_EXP_DIGITS = 60
_EXP_MARGIN = 2.0 ** -20     # in binary32 ULPs around each midpoint


def _exp_hard(x, lo, scale):
    """Round ``exp(x)`` between ``lo * 2**-scale`` and the next value, exactly."""
    with decimal.localcontext() as ctx:
        ctx.prec = _EXP_DIGITS
        ctx.Emin, ctx.Emax = -999999, 999999
        t = decimal.Decimal(float(x)).exp()
    bound = Fraction(10) ** (t.adjusted() - _EXP_DIGITS + 2)
    mid = Fraction(2 * lo + 1) * Fraction(2) ** (-scale - 1)
    gap = Fraction(t) - mid
    if abs(gap) <= bound:
        raise RuntimeError(f"exp({float(x)!r}) is too close to a rounding midpoint to decide "
                           f"with {_EXP_DIGITS} digits")
    return np.ldexp(float(lo + (gap > 0)), -scale)


@_flat
def exp(a, *, numerics="tpu"):
    """``exp(a)`` of fp32 bit patterns (or float32 values), correctly rounded; returns uint32."""
    check_numerics(numerics)
    a = _bits(a)
    if numerics == "tpu":
        a = flush_subnormal(a, FP32)
    with np.errstate(all="ignore"):       # a signalling NaN warns on the cast
        x = a.view(np.float32).astype(np.float64)
        v = np.exp(x)
        out = v.astype(np.float32).view(np.uint32).copy()
        # Where v (a few binary64 ULPs from exp(x)) sits near a binary32
        # rounding midpoint, the float32 conversion may round the wrong way.
        # u is v counted in binary32 ULPs of its binade (or of the subnormal
        # range), so the midpoints are at u = n + 1/2.
        e2 = np.frexp(v)[1]
        scale = np.where(e2 - 1 >= -126, 24 - e2, 149)
        u = np.ldexp(v, scale)
        lo = np.floor(u)
        near = np.abs(u - lo - 0.5) < _EXP_MARGIN
        hard = np.flatnonzero(near & np.isfinite(v) & (v > 0) & (e2 <= 128))
        for i in hard:
            value = _exp_hard(x.flat[i], int(lo.flat[i]), int(scale.flat[i]))
            out.flat[i] = np.float32(value).view(np.uint32)
    out[np.isnan(x)] = _QNAN
    return _finish(out, numerics)


_BY_NAME = {"rcp": rcp, "rsqrt": rsqrt, "exp": exp}


def apply(function, a, *, numerics="tpu"):
    """Run one of :data:`FUNCTIONS` by name."""
    if function not in FUNCTIONS:
        raise ValueError(f"function must be one of {', '.join(FUNCTIONS)}, not {function!r}")
    return _BY_NAME[function](a, numerics=numerics)


@dataclasses.dataclass
class ExhaustiveReport:
    """What :func:`exhaustive_check` found over inputs ``[start, stop)``."""
    function: str
    numerics: str
    start: int
    stop: int
    checked: int
    mismatch_count: int
    mismatches: list      # (input, expected, got) of the first ``limit`` mismatches
    seconds: float

    @property
    def passed(self):
        return self.mismatch_count == 0 and self.checked == self.stop - self.start


def exhaustive_check(function, numerics, implementation=None, *, start=0, stop=1 << 32,
                     chunk=1 << 20, limit=100, progress=None):
    """Compare ``implementation`` with the golden on every input pattern in ``[start, stop)``.

    Parameters
    ----------
    function : "rcp", "rsqrt" or "exp"
    numerics : "tpu" or "ieee"
    implementation : callable or None
        ``implementation(inputs) -> outputs``, both uint32 arrays of one chunk.
        ``None`` runs the golden alone (to time it).
    start, stop : int
        The input range, ``0 <= start <= stop <= 2**32``.
    chunk : int
        Inputs per call.
    limit : int
        How many mismatches to keep (all are counted).
    progress : callable or None
        Called as ``progress(done, total)`` after each chunk.

    Returns
    -------
    ExhaustiveReport
    """
    if function not in FUNCTIONS:
        raise ValueError(f"function must be one of {', '.join(FUNCTIONS)}, not {function!r}")
    check_numerics(numerics)
    if not (isinstance(start, int) and isinstance(stop, int) and 0 <= start <= stop <= 1 << 32):
        raise ValueError(f"need integers 0 <= start <= stop <= 2**32, not {start!r}, {stop!r}")
    if not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be a positive integer, not {chunk!r}")
    golden = _BY_NAME[function]
    began = time.perf_counter()
    checked = count = 0
    kept = []
    for lo in range(start, stop, chunk):
        inputs = np.arange(lo, min(lo + chunk, stop), dtype=np.uint64).astype(np.uint32)
        expected = golden(inputs, numerics=numerics)
        if implementation is not None:
            got = np.asarray(implementation(inputs))
            if got.shape != expected.shape:
                raise ValueError(f"implementation returned shape {got.shape} for "
                                 f"{expected.shape} inputs")
            bad = np.flatnonzero(got.astype(np.uint32) != expected)
            count += bad.size
            for i in bad[:max(0, limit - len(kept))]:
                kept.append((int(inputs[i]), int(expected[i]), int(got[i])))
        checked += inputs.size
        if progress is not None:
            progress(checked, stop - start)
    return ExhaustiveReport(function, numerics, start, stop, checked, count, kept,
                            time.perf_counter() - began)
