"""Independent oracles for fp32 rcp, rsqrt and exp, one element at a time.

Two of them, sharing nothing with ``golden.transcendental`` (no numpy
arithmetic, no golden helpers) and little with each other:

* :func:`mpfr`: gmpy2 (MPFR) in an emulated binary32 context
  (``gmpy2.ieee(32)``: 24-bit precision, binary32 exponent range,
  subnormalized), every operation correctly rounded, for all three functions.
* :func:`exact`: Python integers for ``rcp`` (a long division) and ``rsqrt``
  (``math.isqrt``), then a rounding written out on integers.

The "tpu" rules (flush subnormal operands and results to a zero of the same
sign, canonical NaN) are restated here on plain integers.
"""

import math
import struct

import gmpy2

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


def apply(oracle, function, inputs, numerics):
    """Run ``oracle`` (:data:`MPFR` or :data:`EXACT`) over integer patterns; returns a list."""
    fn = oracle[function]
    return [fn(b, numerics) for b in inputs]
