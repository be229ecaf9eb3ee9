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

``exp`` is not correctly rounded: no cheap hardware is, so this is a
bit-exact model of the RTL's fixed-point algorithm (hdl/arith/fp32_exp.py),
in uint64 integer arithmetic, vectorized. For ``x = (-1)**s * m * 2**(e - 150)``
(``m`` the 24-bit significand, ``e >= 1`` the biased exponent; a subnormal
needs no normalizing):

1. ``|t| = |x| * log2(e)`` with 32 fraction bits, truncated:
   ``floor(m * L * 2**(e - 157))``, ``L = round(log2(e) * 2**39)`` (40 bits,
   so ``m * L`` fits 64 bits); ``t = n + f`` with ``n = floor(t)`` and ``f``
   in [0, 1) of 32 bits, split into 8 + 8 + 16 bits ``f1, f2, f3``.
2. ``2**f = 2**(f1/2**8) * 2**(f2/2**16) * 2**(f3/2**32)`` from two 256-entry
   tables, ``H[f1] = round(2**(f1/256) * 2**31)`` and
   ``G[f2] = round((2**(f2/65536) - 1) * 2**32)`` (:func:`exp_tables`), and
   ``2**(f3/2**32) ~ 1 + y``, ``y = f3 * 2**-32 * ln 2 < 2**-16.5``, held as
   ``Y = floor(f3 * round(ln2 * 2**32) / 2**16)`` (48 fraction bits):
   ``P = H + round(H * G / 2**32)``, ``S = P + round(P * Y / 2**48)``, with 31
   fraction bits, in [2**31, 2**32) (every product fits 64 bits).
3. The result ``S * 2**(n - 31)`` rounded once to binary32, nearest even, at
   the subnormal position below 2**-126; overflow gives inf. A biased
   exponent of 134 or more (``|x| >= 128``, infinities included) gives inf
   for ``x > 0`` and +0 for ``x < 0`` outright.

Error analysis, relative to ``2**t`` for the exact ``t = x log2(e)``
(units of 2**-32): the tables' rounding 1 (``H``) + 0.5 (``G``), the two
rounded products 1 + 1, the dropped ``y**2/2`` at most 0.24, ``Y``'s
truncation and ``ln 2``'s rounding below 0.001; ``t`` is off by less than
1 (the truncation of ``|t|``) plus ``|x| * 2**-40`` (``L``'s rounding, at
most 0.41 for ``|x| < 104``, beyond which the result is inf or 0 anyway),
which scales the result by at most ``ln 2 * 1.41 < 0.98``. In all ``|S * 2**(n - 31) /
exp(x) - 1| < 4.8 * 2**-32``, i.e. below 0.019 ULP of a binary32 result
(an ULP is at least 2**-24 of the value), so after the final rounding the
error is below 0.519 ULP: faithful, and at most 1 ULP from the correctly
rounded result.

Measured over all 2**32 inputs in both numerics (``python -m
tools.audit_transcendental exp --numerics ieee``, and ``tpu``; against
the correctly rounded exp, confirmed by MPFR wherever they differ, and
numpy's float64 ``exp`` for the error; about 50 minutes each on a shared
core): the worst error is 0.50987 ULP (at 0x40F3554F, x = 7.604);
1,147,618 results ("ieee"; 1,147,431 in "tpu") are not correctly rounded,
0.027% of all inputs and 0.204% of the 562,167,808 whose result is not 1,
inf, 0 or NaN (``--nontrivial``: ``x`` in [2**-27, 88.75) and
(-104, -2**-27]), each of them 1 ULP off; every other result, and every
"tpu" result in the flush zone, is the correctly rounded one.

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

import numpy as np

from .formats import FP32, check_numerics, flush_subnormal

__all__ = ["FUNCTIONS", "rcp", "rsqrt", "exp", "exp_tables", "exp_fixed_point", "apply",
           "exhaustive_check", "ExhaustiveReport"]

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


# --- exp: the hardware algorithm (hdl/arith/fp32_exp.py), bit for bit ----------------------

#: Fraction bits of the constants and tables below (see the module docstring).
EXP_LOG2E_FRAC = 39        # log2(e) * 2**39, 40 bits
EXP_LN2_FRAC = 32          # ln(2) * 2**32, 32 bits
EXP_HI_FRAC = 31           # 2**(i/256) * 2**31, 32 bits
EXP_LO_FRAC = 32           # (2**(j/65536) - 1) * 2**32, 24 bits

_EXP_TABLE_DIGITS = 60
#: Largest biased exponent the datapath takes: from 134 on, |x| >= 128 and
#: exp(x) overflows (x > 0) or is below half the smallest subnormal (x < 0).
_EXP_LAST = 133


def _nearest(value, frac_bits):
    """``value * 2**frac_bits`` (a Decimal) rounded to the nearest integer, refusing a near-tie."""
    scaled = value * (1 << frac_bits)
    nearest = int(scaled.to_integral_value(decimal.ROUND_HALF_EVEN))
    if abs(abs(scaled - nearest) - decimal.Decimal("0.5")) < decimal.Decimal(10) ** -40:
        raise RuntimeError(f"{value} is too close to a rounding tie at {frac_bits} bits")
    return nearest


def exp_tables():
    """The constants and the two 256-entry tables of the exp datapath, as Python integers.

    Every entry is the exact value rounded to nearest at its fixed point,
    computed with Python's ``decimal`` at 60 digits (whose ``**`` and ``ln``
    are accurate far beyond the 40 bits kept). The RTL restates this
    generator (``hdl.arith.fp32_exp.exp_tables``; a test holds the two equal).

    Returns
    -------
    dict
        ``log2e``: log2(e) * 2**39; ``ln2``: ln(2) * 2**32; ``hi``: 256
        entries 2**(i/256) * 2**31; ``lo``: 256 entries
        (2**(j/65536) - 1) * 2**32.
    """
    return dict(_exp_tables())     # a copy: the cached one stays as generated


@functools.cache
def _exp_tables():
    with decimal.localcontext() as ctx:
        ctx.prec = _EXP_TABLE_DIGITS
        two = decimal.Decimal(2)
        ln2 = two.ln()
        return {
            "log2e": _nearest(1 / ln2, EXP_LOG2E_FRAC),
            "ln2": _nearest(ln2, EXP_LN2_FRAC),
            "hi": tuple(_nearest(two ** (decimal.Decimal(i) / 256), EXP_HI_FRAC)
                        for i in range(256)),
            "lo": tuple(_nearest(two ** (decimal.Decimal(j) / 65536) - 1, EXP_LO_FRAC)
                        for j in range(256)),
        }


@functools.cache
def _exp_arrays():
    t = exp_tables()
    return _U64(t["log2e"]), _U64(t["ln2"]), np.array(t["hi"], _U64), np.array(t["lo"], _U64)


def exp_fixed_point(a):
    """The datapath of :func:`exp` before rounding, on fp32 patterns (no flushing, no specials).

    Returns ``(s, n)``: uint64 ``s`` in [2**31, 2**32) and int64 ``n`` such
    that the unrounded result is ``s * 2**(n - 31)``, for inputs whose
    biased exponent is at most 133 (other elements hold the value for
    exponent 133). Exposed for tests and error audits.
    """
    log2e, ln2, hi, lo = _exp_arrays()
    a = _bits(a).astype(_U64)
    field = (a >> _U64(23)) & _U64(0xFF)
    sig = (a & _U64(0x7FFFFF)) | np.where(field > 0, _U64(1 << 23), _U64(0))
    # |x| = sig * 2**(e - 150) with e >= 1 (subnormals need no normalizing),
    # so |t| * 2**32 = sig * log2e * 2**(e - 157); below e = 94 that is 0.
    e = np.clip(field, 1, _EXP_LAST).astype(np.int64)
    shift = 157 - e
    mag = np.where(shift < 64, (sig * log2e) >> np.minimum(shift, 63).astype(_U64), _U64(0))
    t = np.where((a >> _U64(31)) == 1, -mag.astype(np.int64), mag.astype(np.int64))
    n = t >> 32                                         # floor(t)
    f = (t & 0xFFFFFFFF).astype(_U64)                   # t - n in [0, 1), 32 bits
    big = hi[(f >> _U64(24)).astype(np.intp)]
    small = lo[((f >> _U64(16)) & _U64(0xFF)).astype(np.intp)]
    y = ((f & _U64(0xFFFF)) * ln2) >> _U64(16)           # ln(2) * f3, 48 fraction bits
    p = big + ((big * small + _U64(1 << 31)) >> _U64(32))
    s = p + ((p * y + _U64(1 << 47)) >> _U64(48))
    return s, n



@_flat
def exp(a, *, numerics="tpu"):
    """``exp(a)`` of fp32 bit patterns (or float32 values) as the RTL computes it; returns uint32.

    Faithful: below 0.519 ULP of the exact value, at most 1 ULP from the
    correctly rounded result (module docstring). NaN gives 0x7FC00000,
    ``exp(+inf) = +inf``, ``exp(-inf) = +0``.
    """
    check_numerics(numerics)
    a = _bits(a)
    if numerics == "tpu":
        a = flush_subnormal(a, FP32)
    s, n = exp_fixed_point(a)
    out = _round_pack(s, n - 31, np.zeros(s.shape, bool))
    mag = a & np.uint32(0x7FFFFFFF)
    outright = np.where(a >> np.uint32(31) == 1, np.uint32(0), _INF)
    out = np.where(mag >> np.uint32(23) > _EXP_LAST, outright, out)
    return _finish(np.where(mag > _INF, _QNAN, out), numerics)


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
