"""Independent oracles for fp32 rcp, rsqrt and exp.

They share nothing with ``golden.transcendental`` (no golden helpers) and
little with each other. One element at a time, on plain integers:

* :data:`MPFR`: gmpy2 (MPFR) in an emulated binary32 context
  (``gmpy2.ieee(32)``: 24-bit precision, binary32 exponent range,
  subnormalized), every operation correctly rounded, for all three functions.
* :data:`EXACT`: Python integers for ``rcp`` (a long division) and ``rsqrt``
  (``math.isqrt``), then a rounding written out on integers.
* :data:`ALGORITHM`: ``exp`` as the hardware computes it (the algorithm
  documented in ``golden.transcendental``), restated on unbounded Python
  integers with its tables made by MPFR, so it checks the golden's vectorized
  ``uint64`` arithmetic and its ``decimal`` tables, not the algorithm's accuracy.

And one vectorized, for sweeps over many inputs:

* :func:`exp_correctly_rounded`: numpy's float64 ``exp`` rounded to binary32,
  with every case near a rounding midpoint settled by Python's ``decimal``.

The "tpu" rules (flush subnormal operands and results to a zero of the same
sign, canonical NaN) are restated here.
"""

import decimal
import math
import struct
from fractions import Fraction

import gmpy2
import numpy as np

QNAN, INF, SIGN = 0x7FC00000, 0x7F800000, 0x80000000
_IEEE32 = gmpy2.ieee(32)


def _is_nan(bits):
    return bits & 0x7F800000 == 0x7F800000 and bits & 0x007FFFFF != 0


def _flush(bits):
    return bits & SIGN if bits & 0x7F800000 == 0 else bits


def _value(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _pattern(value):
    """The binary32 pattern of a Python float that is a binary32 value (or beyond its range)."""
    try:
        return struct.unpack("<I", struct.pack("<f", value))[0]
    except OverflowError:                  # 2**128, reached by rounding up
        return INF | (SIGN if value < 0 else 0)


def _wrap(compute):
    def apply(bits, numerics):
        bits = int(bits)
        if numerics == "tpu":
            bits = _flush(bits)
        result = compute(bits)
        if _is_nan(result):
            return QNAN
        return _flush(result) if numerics == "tpu" else result
    return apply


# A float argument enters MPFR exactly; the context rounds only the result.
def _mpfr_rcp(bits):
    return _pattern(float(_IEEE32.div(1, _value(bits))))


def _mpfr_rsqrt(bits):
    # MPFR (like C) gives rec_sqrt(-0) = +inf; IEEE 754 rSqrt, and SPEC, -inf.
    if bits == SIGN:
        return INF | SIGN
    return _pattern(float(_IEEE32.rec_sqrt(_value(bits))))


def _mpfr_exp(bits):
    return _pattern(float(_IEEE32.exp(_value(bits))))


MPFR = {"rcp": _wrap(_mpfr_rcp), "rsqrt": _wrap(_mpfr_rsqrt), "exp": _wrap(_mpfr_exp)}

# Bits of the exact fixed-point quotients below: far more than 24 + 2 for
# every binary32 input, so the rounding always has guard bits to spare.
_P = 200


def _split(bits):
    """Finite non-zero magnitude -> (m, e) with value m * 2**e, m a positive integer."""
    biased, frac = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    return (frac, -149) if biased == 0 else (frac | 1 << 23, biased - 150)


def _round(f, e, inexact):
    """binary32 pattern of (f + d) * 2**e, 0 <= d < 1, d > 0 iff inexact: round to nearest even."""
    lead = f.bit_length() - 1 + e
    if lead >= -126:
        drop = f.bit_length() - 24
    else:
        drop = -149 - e                 # subnormal: the last kept bit is 2**-149
    assert drop >= 2, "not enough guard bits"
    q, r = divmod(f, 1 << drop)
    half = 1 << (drop - 1)
    if r > half or (r == half and (inexact or q & 1)):
        q += 1
    return _pattern(math.ldexp(q, e + drop)) if q else 0


def _exact_rcp(bits):
    sign, mag = bits & SIGN, bits & 0x7FFFFFFF
    if mag > INF:
        return QNAN
    if mag == INF:
        return sign
    if mag == 0:
        return sign | INF
    m, e = _split(mag)
    q, r = divmod(1 << (_P - e), m)      # 2**P / x = 2**(P - e) / m
    return sign | _round(q, -_P, r != 0)


def _exact_rsqrt(bits):
    sign, mag = bits & SIGN, bits & 0x7FFFFFFF
    if mag > INF or (sign and mag):
        return QNAN
    if mag == 0:
        return sign | INF
    if mag == INF:
        return 0
    m, e = _split(mag)
    # 2**P / sqrt(x) = sqrt(2**(2P - e) / m), and floor(sqrt(y)) = isqrt(floor(y)).
    num = 1 << (2 * _P - e)
    q = math.isqrt(num // m)
    return _round(q, -_P, q * q * m != num)


EXACT = {"rcp": _wrap(_exact_rcp), "rsqrt": _wrap(_exact_rsqrt)}



# --- exp as the hardware computes it ---------------------------------------------------------

def _hardware_constants():
    """The datapath's constants and tables, each the exact value rounded to nearest (MPFR)."""
    with gmpy2.context(precision=200):
        def nearest(value, frac_bits):
            return int(gmpy2.rint(value * gmpy2.mpfr(2) ** frac_bits))
        ln2 = gmpy2.log(2)
        return {
            "log2e": nearest(1 / ln2, 39),
            "ln2": nearest(ln2, 32),
            "hi": tuple(nearest(gmpy2.exp2(gmpy2.mpfr(i) / 256), 31) for i in range(256)),
            "lo": tuple(nearest(gmpy2.exp2(gmpy2.mpfr(j) / 65536) - 1, 32) for j in range(256)),
        }


HARDWARE_EXP_CONSTANTS = _hardware_constants()


def _algorithm_exp(bits):
    c = HARDWARE_EXP_CONSTANTS
    sign, mag = bits >> 31, bits & 0x7FFFFFFF
    if mag > INF:
        return QNAN
    if mag >> 23 > 133:                      # |x| >= 128
        return 0 if sign else INF
    m, e = _split(mag)                       # zero: m = 0
    t = (m * c["log2e"]) >> (7 - e)          # |x| * log2(e) * 2**32 = m * L * 2**(e - 7), truncated
    if sign:
        t = -t
    n, f = t >> 32, t & 0xFFFFFFFF
    hi, lo = c["hi"][f >> 24], c["lo"][(f >> 16) & 0xFF]
    y = ((f & 0xFFFF) * c["ln2"]) >> 16
    p = hi + ((hi * lo + (1 << 31)) >> 32)
    s = p + ((p * y + (1 << 47)) >> 48)
    return _round(s, n - 31, False)


ALGORITHM = {"exp": _wrap(_algorithm_exp)}


# --- correctly rounded exp, vectorized -------------------------------------------------------

# Decimal digits for the hard cases: binary32 exp's worst cases need about
# 2*24 + 30 bits; 60 digits are ~199 bits.
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


def _flush_array(bits):
    return np.where(bits & np.uint32(0x7F800000) == 0, bits & np.uint32(SIGN), bits)


def exp_correctly_rounded(bits, numerics):
    """Correctly rounded ``exp`` of a uint32 array of fp32 patterns; returns uint32.

    numpy's float64 ``exp`` rounded to binary32, except where it lies within
    ``2**-20`` ULP (binary32) of a rounding midpoint: there Python's
    ``decimal`` (60 digits, itself correctly rounded) decides. That is
    correct as long as numpy's ``exp`` is within 512 ULP (binary64) of the
    truth (it is within a few). A decimal result too close to the midpoint
    to decide raises ``RuntimeError`` rather than guess.
    """
    bits = np.asarray(bits, np.uint32).reshape(-1)
    if numerics == "tpu":
        bits = _flush_array(bits)
    with np.errstate(all="ignore"):       # a signalling NaN warns on the cast
        x = bits.view(np.float32).astype(np.float64)
        v = np.exp(x)
        out = v.astype(np.float32).view(np.uint32).copy()
        # u is v counted in binary32 ULPs of its binade (or of the subnormal
        # range), so the midpoints are at u = k + 1/2.
        e2 = np.frexp(v)[1]
        scale = np.where(e2 - 1 >= -126, 24 - e2, 149)
        u = np.ldexp(v, scale)
        lo = np.floor(u)
        near = np.abs(u - lo - 0.5) < _EXP_MARGIN
        hard = np.flatnonzero(near & np.isfinite(v) & (v > 0) & (e2 <= 128))
    for i in hard:
        out[i] = np.float32(_exp_hard(x[i], int(lo[i]), int(scale[i]))).view(np.uint32)
    out[np.isnan(x)] = QNAN
    return _flush_array(out) if numerics == "tpu" else out

def apply(oracle, function, inputs, numerics):
    """Run ``oracle`` (:data:`MPFR`, :data:`EXACT` or :data:`ALGORITHM`) over integer patterns;
    returns a list."""
    fn = oracle[function]
    return [fn(b, numerics) for b in inputs]
