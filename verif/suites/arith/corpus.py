"""TestFloat-style stimulus: corner-case operand corpora and named cases.

Following Berkeley TestFloat's generator, single operands are a cross of
chosen biased exponents with significand patterns (zero, one, all ones, all
ones minus one, walking ones and zeros, runs of ones), both signs. Binary
operations pair those operands with each other, with operands a chosen
exponent distance away, and with weighted random values. ``NAMED_CASES``
pins down every corner the foundation issue lists, so a test can insist
that each one is present.

The fp32 multiplier, divider and square root also get generated rounding
cases (:func:`rounding_cases`): the corners random operands almost never
reach, such as exact ties, products that round up into the next binade,
exact and near-midpoint quotients, and perfect squares and their neighbours.

Every function that draws random numbers takes a ``numpy.random.Generator``;
callers derive it from the run's one seed.
"""

import numpy as np

from golden.formats import BF16, FP32, OperandClass

__all__ = [
    "EXPONENTS", "significand_patterns", "operands", "random_values", "class_values",
    "class_cross",
    "NAMED_CASES", "binary_corpus", "unary_corpus", "exponent_distance_pairs",
    "BINARY_OPS", "UNARY_OPS", "ROUNDING_OPS", "rounding_cases", "mul_ties", "mul_carries",
    "div_exact", "div_near_midpoints", "div_subnormal_ties", "exponent_edge_pairs",
    "sqrt_squares",
]

#: The operations each corpus serves, with the format of their operands.
BINARY_OPS = {"fp32_add": FP32, "bf16_mul": BF16, "fp32_mul": FP32, "fp32_div": FP32}
UNARY_OPS = {"fp32_to_bf16": FP32, "fp32_sqrt": FP32}

#: Biased exponents crossed with the significand patterns. For fp32: zero and
#: subnormal, the bottom of the normal range, 127-24 (where an add loses a
#: whole significand), one, just above, 127+23 (the integer boundary), and
#: the top of the range up to inf/NaN. bf16 operands feed a multiplier, so
#: their set also straddles the exponents whose products under- or overflow.
EXPONENTS = {
    "fp32": (0, 1, 2, 102, 103, 104, 126, 127, 128, 149, 150, 151, 253, 254, 255),
    "bf16": (0, 1, 2, 62, 63, 64, 65, 126, 127, 128, 190, 191, 192, 253, 254, 255),
}


def significand_patterns(fbits):
    """The fraction-field patterns, deduplicated, in a fixed order."""
    ones = (1 << fbits) - 1
    pats = [0, 1, ones, ones - 1]
    for i in range(fbits):
        pats += [1 << i, ones ^ (1 << i),              # walking one / zero
                 (1 << (i + 1)) - 1, ones & ~((1 << i) - 1)]  # runs from the bottom / top
    return list(dict.fromkeys(pats))


def operands(fmt):
    """The crossed single-operand corpus of ``fmt`` as bit patterns."""
    sig = np.array(significand_patterns(fmt.fbits), dtype=np.uint64)
    exp = np.array(EXPONENTS[fmt.name], dtype=np.uint64) << np.uint64(fmt.fbits)
    mags = (exp[:, None] | sig[None, :]).ravel()
    return np.concatenate([mags, mags | np.uint64(fmt.sign_mask)]).astype(fmt.bits_dtype)


def random_values(rng, fmt, n):
    """``n`` weighted random patterns: half uniform bits, half biased to the exponent corpus."""
    uniform = rng.integers(0, 1 << fmt.width, n, dtype=np.uint64)
    near = np.array(EXPONENTS[fmt.name], dtype=np.int64)
    exp = np.clip(rng.choice(near, n) + rng.integers(-2, 3, n), 0, (1 << fmt.ebits) - 1)
    frac = rng.integers(0, 1 << fmt.fbits, n, dtype=np.uint64)
    sign = rng.integers(0, 2, n, dtype=np.uint64)
    biased = (sign << np.uint64(fmt.width - 1)) | (exp.astype(np.uint64) << np.uint64(fmt.fbits)) | frac
    return np.where(rng.random(n) < 0.5, uniform, biased).astype(fmt.bits_dtype)


def class_values(rng, fmt, cls, n):
    """``n`` random positive patterns of operand class ``cls`` (see golden.formats.OperandClass)."""
    frac = rng.integers(1, 1 << fmt.fbits, n, dtype=np.uint64)
    exp_max = np.uint64((1 << fmt.ebits) - 1)
    exp = {OperandClass.ZERO: 0, OperandClass.SUBNORMAL: 0, OperandClass.INF: exp_max,
           OperandClass.NAN: exp_max}.get(cls)
    if exp is None:                                       # normal
        exp = rng.integers(1, exp_max, n, dtype=np.uint64)
    if cls in (OperandClass.ZERO, OperandClass.INF):
        frac = np.zeros(n, np.uint64)
    return ((np.asarray(exp, np.uint64) << np.uint64(fmt.fbits)) | frac).astype(fmt.bits_dtype)


def class_cross(rng, fmt):
    """One random pair for every (class, sign) of a crossed with every (class, sign) of b."""
    kinds = [(cls, sign) for cls in range(len(OperandClass.NAMES)) for sign in (0, 1)]
    pairs = [(ka, kb) for ka in kinds for kb in kinds]
    sign_bit = fmt.bits_dtype(fmt.sign_mask)

    def pick(kind):
        value = class_values(rng, fmt, kind[0], 1)[0]
        return value | sign_bit if kind[1] else value
    a = np.array([pick(ka) for ka, _ in pairs], fmt.bits_dtype)
    b = np.array([pick(kb) for _, kb in pairs], fmt.bits_dtype)
    return a, b


def exponent_distance_pairs(rng, n_per_distance, distances=(0, 1, 2, 3, 7, 8, 15, 16, 22, 23, 24, 25, 26, 27, 40, 100, 253)):
    """fp32 pairs whose biased exponents differ by each of ``distances`` (either order, either sign)."""
    d = np.repeat(np.array(distances, dtype=np.int64), n_per_distance)
    n = d.size
    lo = rng.integers(0, 255 - d)      # lo + d stays a finite exponent
    hi = lo + d
    fa = rng.integers(0, 1 << 23, n, dtype=np.uint64)
    fb = rng.integers(0, 1 << 23, n, dtype=np.uint64)
    sa = rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(31)
    sb = rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(31)
    a = sa | (hi.astype(np.uint64) << np.uint64(23)) | fa
    b = sb | (lo.astype(np.uint64) << np.uint64(23)) | fb
    swap = rng.random(n) < 0.5
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    return a.astype(np.uint32), b.astype(np.uint32)


# --- generated rounding cases of the fp32 multiplier, divider and square root -------------

def _fp32(sign, exp, sig):
    """fp32 patterns from signs, biased exponents and 24-bit significands (top bit implied)."""
    return ((np.asarray(sign, np.uint64) << np.uint64(31))
            | (np.asarray(exp, np.uint64) << np.uint64(23))
            | (np.asarray(sig, np.uint64) & np.uint64(0x7FFFFF))).astype(np.uint32)


def _signs(rng, n):
    return rng.integers(0, 2, n)


def _split_exponent(rng, total):
    """Biased exponents (ea, eb) of finite normals with ``ea + eb == total``, drawn uniformly."""
    ea = rng.integers(np.maximum(1, total - 254), np.minimum(254, total - 1) + 1)
    return ea, total - ea


def mul_ties(rng, n):
    """Pairs whose exact product lies halfway between two fp32 values.

    1.5 x an odd significand B below 2^25 / 3 is 3B x 2^22: 25 significant
    bits ending in a 1, so the guard bit is 1 and nothing is below it. The
    product's exponent is anywhere in the normal range.
    """
    b_sig = rng.integers(0x400000, 0x555555, n) * 2 + 1
    ea, eb = _split_exponent(rng, rng.integers(1, 254, n) + 127)
    return (_fp32(_signs(rng, n), ea, np.full(n, 0xC00000)),
            _fp32(_signs(rng, n), eb, b_sig))


def mul_carries(rng, n):
    """Pairs whose product is within half an ulp below a power of two, not a tie.

    Significands A and B (24-bit integers) with 2^47 - 2^22 < A x B < 2^47:
    the product's 24 significant bits are all ones and the bits below the
    guard make it round up, carrying into the exponent. A quarter of the
    pairs carry out of the largest finite value (overflow by rounding) and a
    quarter carry out of the subnormal range into 2^-126.
    """
    a_sig, b_sig = [], []
    while len(a_sig) < n:
        a = rng.integers(1 << 23, 1 << 24, 2 * n, dtype=np.uint64)
        b = (np.uint64((1 << 47) - (1 << 22)) + a) // a       # ceil((2^47 - 2^22 + 1) / a)
        ok = (b < (1 << 24)) & (a * b < np.uint64(1 << 47))
        a_sig += a[ok].tolist()
        b_sig += b[ok].tolist()
    # The product rounds to 2^(ea + eb - 253): biased exponent ea + eb - 126.
    result = np.select([rng.random(n) < 0.25, rng.random(n) < 1 / 3], [255, 1],
                       rng.integers(1, 255, n))
    ea, eb = _split_exponent(rng, result + 126)
    return (_fp32(_signs(rng, n), ea, np.array(a_sig[:n])),
            _fp32(_signs(rng, n), eb, np.array(b_sig[:n])))


#: Biased exponents of unrounded results at the edges of the range: deep in
#: the subnormal range, around 2^-126, and around the largest finite value.
EDGE_EXPONENTS = (-25, -24, -23, -1, 0, 1, 2, 253, 254, 255, 256)


def exponent_edge_pairs(op, rng, n):
    """Random-significand pairs whose result exponent is one of :data:`EDGE_EXPONENTS`.

    ``op`` is "fp32_mul" (ea + eb - 127 is the edge) or "fp32_div" (ea - eb + 127 is).
    """
    edge = rng.choice(np.array(EDGE_EXPONENTS), n)
    if op == "fp32_mul":
        ea, eb = _split_exponent(rng, edge + 127)
    elif op == "fp32_div":
        eb = rng.integers(np.maximum(1, 128 - edge), np.minimum(254, 381 - edge) + 1)
        ea = edge + eb - 127
    else:
        raise ValueError(f"no exponent edges for {op!r}")
    a = _fp32(_signs(rng, n), ea, rng.integers(0, 1 << 23, n))
    return a, _fp32(_signs(rng, n), eb, rng.integers(0, 1 << 23, n))


def div_exact(rng, n):
    """Pairs with an exact quotient: a = q x b with q and b of at most 12 significant bits."""
    q = rng.integers(1, 1 << 12, n) * np.exp2(rng.integers(-20, 20, n))
    b = rng.integers(1, 1 << 12, n) * np.exp2(rng.integers(-40, 40, n))
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    # In float64 the product of two 12-bit integers times powers of 2 is exact, and
    # so is its conversion to float32 (24 bits at most, and in the normal range).
    return (sign * q * b).astype(np.float32).view(np.uint32), b.astype(np.float32).view(np.uint32)


def div_near_midpoints(rng, n):
    """Pairs whose quotient is a hair's breadth from a rounding midpoint.

    For an odd divisor significand B and k of 24 or 25, a dividend
    significand A with A x 2^k = Q x B + s, s = +-1, makes A / B equal
    Q / 2^k + s / (B x 2^k): the midpoint Q / 2^k (Q odd, 25 bits) plus or
    minus far less than an ulp, so only the sticky bit says which way to
    round. A is s / 2^k modulo B, plus a multiple of B.
    """
    a_sig, b_sig = [], []
    while len(a_sig) < n:
        b = int(rng.integers(1 << 22, 1 << 23)) * 2 + 1
        k, s = int(rng.integers(24, 26)), int(rng.choice([-1, 1]))
        for a in range(s * pow(2, -k, b) % b, 1 << 24, b):
            q, rest = divmod((a << k) - s, b)
            if a >= 1 << 23 and 1 << 24 <= q < 1 << 25 and not rest:
                a_sig.append(a)
                b_sig.append(b)
                break
    eb = rng.integers(1, 255, n)
    ea = np.clip(eb + rng.integers(-20, 20, n), 1, 254)
    return _fp32(_signs(rng, n), ea, a_sig), _fp32(_signs(rng, n), eb, b_sig)


def div_subnormal_ties(rng, n):
    """Pairs whose quotient is exactly halfway between two subnormals.

    (2m + 1) x 2^(j - 150) / 2^j is (2m + 1) x 2^-150, the midpoint of
    m x 2^-149 and (m + 1) x 2^-149; the dividend is exact in fp32 for
    2m + 1 < 2^24 and j >= 1. Normal quotients are never ties: a quotient
    of 24-bit significands that is not exact has no finite binary expansion.
    """
    odd = rng.integers(0, 1 << 23, n) * 2 + 1
    j = rng.integers(1, 128, n)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    a = (sign * np.ldexp(odd.astype(np.float64), j - 150)).astype(np.float32)
    b = (np.where(rng.random(n) < 0.5, -1.0, 1.0) * np.ldexp(1.0, j)).astype(np.float32)
    return a.view(np.uint32), b.view(np.uint32)


def sqrt_squares(rng, n):
    """Perfect squares (k^2 for k of at most 12 bits, times even powers of 2) and
    their neighbours one ulp either side: 3n operands, squares first."""
    k = rng.integers(1, 1 << 12, n).astype(np.float64)
    squares = (k * k * np.exp2(2 * rng.integers(-70, 50, n))).astype(np.float32).view(np.uint32)
    return np.concatenate([squares, squares - 1, squares + 1])


#: The operations that have generated rounding cases.
ROUNDING_OPS = ("fp32_mul", "fp32_div", "fp32_sqrt")


def rounding_cases(op, rng, n):
    """``n`` generated cases of each of ``op``'s rounding families, as a tuple of operand arrays.

    fp32_mul: ties, carries into the exponent, exponent edges. fp32_div:
    exact quotients, near-midpoints, subnormal ties, exponent edges.
    fp32_sqrt: perfect squares and their neighbours (3n operands).
    """
    if op == "fp32_sqrt":
        return (sqrt_squares(rng, n),)
    if op == "fp32_mul":
        families = [mul_ties(rng, n), mul_carries(rng, n), exponent_edge_pairs(op, rng, n)]
    elif op == "fp32_div":
        families = [div_exact(rng, n), div_near_midpoints(rng, n), div_subnormal_ties(rng, n),
                    exponent_edge_pairs(op, rng, n)]
    else:
        raise ValueError(f"no rounding cases for {op!r}; operations: {', '.join(ROUNDING_OPS)}")
    return tuple(np.concatenate([f[i] for f in families]) for i in (0, 1))


#: Named corner cases: name -> (operation, a, b). ``b`` is None for unary ops.
#: Every case the foundation issue lists is here, so tests can require them.
NAMED_CASES = {
    # fp32_add
    "add: exact cancellation to +0": ("fp32_add", 0x3FC00000, 0xBFC00000),
    "add: exact cancellation to -0 (-0 + -0)": ("fp32_add", 0x80000000, 0x80000000),
    "add: +0 + -0 = +0": ("fp32_add", 0x00000000, 0x80000000),
    "add: full renormalizing shift (1 - (1 - ulp/2))": ("fp32_add", 0x3F800000, 0xBF7FFFFF),
    "add: normal minus normal gives a subnormal": ("fp32_add", 0x00800001, 0x80800000),
    "add: tie to even stays": ("fp32_add", 0x3F800000, 0x33800000),
    "add: tie to even rounds up": ("fp32_add", 0x3F800001, 0x33800000),
    "add: sticky bit breaks a tie": ("fp32_add", 0x3F800000, 0x33800001),
    "add: borrow out of the sticky bit": ("fp32_add", 0x3F800000, 0xB3000001),
    "add: exponent difference 0": ("fp32_add", 0x3F812345, 0x3FFEDCBA),
    "add: exponent difference 1": ("fp32_add", 0x40012345, 0x3FFEDCBA),
    "add: exponent difference 23": ("fp32_add", 0x4B012345, 0x3FFEDCBA),
    "add: exponent difference 24": ("fp32_add", 0x4B812345, 0x3FFEDCBA),
    "add: exponent difference 25": ("fp32_add", 0x4C012345, 0x3FFEDCBA),
    "add: exponent difference 26": ("fp32_add", 0x4C812345, 0xBFFEDCBA),
    "add: exponent difference huge": ("fp32_add", 0x7E812345, 0x00FEDCBA),
    "add: exact carry into the exponent": ("fp32_add", 0x3FFFFFFF, 0x34000000),
    "add: rounding carry into the exponent": ("fp32_add", 0x3FFFFFFF, 0x33800000),
    "add: overflow by rounding": ("fp32_add", 0x7F7FFFFF, 0x73000000),
    "add: just no overflow by rounding": ("fp32_add", 0x7F7FFFFF, 0x72FFFFFF),
    "add: max + max overflows": ("fp32_add", 0x7F7FFFFF, 0x7F7FFFFF),
    "add: subnormal + subnormal = normal": ("fp32_add", 0x00400000, 0x00400000),
    "add: subnormal + subnormal = subnormal": ("fp32_add", 0x00000001, 0x80000003),
    "add: subnormal + normal": ("fp32_add", 0x00000001, 0x00800000),
    "add: inf - inf": ("fp32_add", 0x7F800000, 0xFF800000),
    "add: inf + inf": ("fp32_add", 0xFF800000, 0xFF800000),
    "add: inf + finite": ("fp32_add", 0x7F800000, 0xFF7FFFFF),
    "add: quiet NaN in": ("fp32_add", 0x7FC00001, 0x3F800000),
    "add: signalling NaN in": ("fp32_add", 0x3F800000, 0xFF800001),
    "add: NaN + inf": ("fp32_add", 0xFFFFFFFF, 0x7F800000),
    # bf16_mul
    "mul: product at 2^-126 (smallest normal)": ("bf16_mul", 0x2000, 0x2000),
    "mul: product at 2^-127 (subnormal)": ("bf16_mul", 0x2000, 0x1F80),
    "mul: product at 2^128 (overflow)": ("bf16_mul", 0x5F80, 0x5F80),
    "mul: product just below 2^128": ("bf16_mul", 0x5F7F, 0x5F80),
    # A 16-bit product is exact down to 2^-134; these lose bits below 2^-149.
    "mul: tie in the subnormal range": ("bf16_mul", 0x1BFF, 0x1FFF),
    "mul: sticky rounding in the subnormal range": ("bf16_mul", 0x1AFF, 0x1FFD),
    "mul: exact in the subnormal range": ("bf16_mul", 0x1FFF, 0x1FFF),
    "mul: underflow to zero": ("bf16_mul", 0x0001, 0x0001),
    "mul: subnormal x normal": ("bf16_mul", 0x0040, 0x4000),
    "mul: inf * 0": ("bf16_mul", 0x7F80, 0x0000),
    "mul: -x * 0": ("bf16_mul", 0xBFC0, 0x0000),
    "mul: x * -0": ("bf16_mul", 0x3FC0, 0x8000),
    "mul: inf * -x": ("bf16_mul", 0x7F80, 0xC000),
    "mul: NaN in": ("bf16_mul", 0x7F81, 0x3F80),
    # fp32_to_bf16
    "cvt: tie to even stays": ("fp32_to_bf16", 0x3F808000, None),
    "cvt: tie to even rounds up": ("fp32_to_bf16", 0x3F818000, None),
    "cvt: sticky bit breaks a tie": ("fp32_to_bf16", 0x3F808001, None),
    "cvt: rounding carry into the exponent": ("fp32_to_bf16", 0x3FFFFFFF, None),
    "cvt: overflow by rounding": ("fp32_to_bf16", 0x7F7FFFFF, None),
    "cvt: just no overflow by rounding": ("fp32_to_bf16", 0x7F7F7FFF, None),
    "cvt: subnormal rounds up to normal": ("fp32_to_bf16", 0x007FFFFF, None),
    "cvt: subnormal": ("fp32_to_bf16", 0x80012345, None),
    "cvt: NaN whose payload is below bf16 precision": ("fp32_to_bf16", 0x7F800001, None),
    "cvt: -inf": ("fp32_to_bf16", 0xFF800000, None),
    "cvt: -0": ("fp32_to_bf16", 0x80000000, None),
    # fp32_mul
    "fmul: exact": ("fp32_mul", 0x40400000, 0x40400000),
    "fmul: tie to even stays": ("fp32_mul", 0x3FC00000, 0x3F800003),
    "fmul: tie to even rounds up": ("fp32_mul", 0x3FC00000, 0x3F800001),
    "fmul: sticky bit breaks a tie": ("fp32_mul", 0x3FC00001, 0x3F800001),
    "fmul: rounding carry into the exponent": ("fp32_mul", 0x3FFED4D5, 0x3F809645),
    "fmul: overflow by rounding": ("fp32_mul", 0x7F7ED4D5, 0x3F809645),
    "fmul: max * max overflows": ("fp32_mul", 0x7F7FFFFF, 0x7F7FFFFF),
    "fmul: tie rounds up to the smallest normal": ("fp32_mul", 0x00800000, 0x3F7FFFFF),
    "fmul: subnormal product": ("fp32_mul", 0x00800000, 0x3F000000),
    "fmul: subnormal x normal = normal": ("fp32_mul", 0x00000001, 0x4B000000),
    "fmul: underflow to zero (a tie)": ("fp32_mul", 0x00000001, 0x3F000000),
    "fmul: inf * 0": ("fp32_mul", 0x7F800000, 0x80000000),
    "fmul: inf * subnormal": ("fp32_mul", 0xFF800000, 0x00000001),
    "fmul: -x * +0": ("fp32_mul", 0xC0000000, 0x00000000),
    "fmul: NaN in": ("fp32_mul", 0x7F800001, 0x3F800000),
    # fp32_div
    "div: exact": ("fp32_div", 0x40C00000, 0x40000000),
    "div: equal significands": ("fp32_div", 0x40400000, 0x3FC00000),
    "div: 1 / 3": ("fp32_div", 0x3F800000, 0x40400000),
    "div: quotient just below 1": ("fp32_div", 0x3F800000, 0x3F800001),
    "div: quotient exactly 2^128 overflows": ("fp32_div", 0x7F7FFFFF, 0x3F7FFFFF),
    "div: tie in the subnormal range stays even": ("fp32_div", 0x00FFFFFD, 0x40000000),
    "div: tie in the subnormal range rounds up": ("fp32_div", 0x00000003, 0x40000000),
    "div: tie rounds up to the smallest normal": ("fp32_div", 0x00FFFFFF, 0x40000000),
    "div: underflow to zero (a tie)": ("fp32_div", 0x00000001, 0x40000000),
    "div: normal / subnormal": ("fp32_div", 0x00800000, 0x00000001),
    "div: subnormal / subnormal": ("fp32_div", 0x00000001, 0x00000001),
    "div: x / +0": ("fp32_div", 0x3F800000, 0x00000000),
    "div: -x / +0": ("fp32_div", 0xBF800000, 0x00000000),
    "div: x / -0": ("fp32_div", 0x3F800000, 0x80000000),
    "div: 0 / 0": ("fp32_div", 0x00000000, 0x80000000),
    "div: 0 / -x": ("fp32_div", 0x00000000, 0xBF800000),
    "div: inf / inf": ("fp32_div", 0x7F800000, 0xFF800000),
    "div: -inf / x": ("fp32_div", 0xFF800000, 0x3F800000),
    "div: x / -inf": ("fp32_div", 0x3F800000, 0xFF800000),
    "div: NaN in": ("fp32_div", 0x3F800000, 0xFFC00001),
    # fp32_sqrt
    "sqrt: +0": ("fp32_sqrt", 0x00000000, None),
    "sqrt: -0": ("fp32_sqrt", 0x80000000, None),
    "sqrt: +inf": ("fp32_sqrt", 0x7F800000, None),
    "sqrt: -inf": ("fp32_sqrt", 0xFF800000, None),
    "sqrt: negative normal": ("fp32_sqrt", 0xBF800000, None),
    "sqrt: negative subnormal": ("fp32_sqrt", 0x80000001, None),
    "sqrt: smallest subnormal": ("fp32_sqrt", 0x00000001, None),
    "sqrt: smallest normal": ("fp32_sqrt", 0x00800000, None),
    "sqrt: perfect square": ("fp32_sqrt", 0x41100000, None),
    "sqrt: odd exponent": ("fp32_sqrt", 0x40000000, None),
    "sqrt: just below 1": ("fp32_sqrt", 0x3F7FFFFF, None),
    "sqrt: largest finite": ("fp32_sqrt", 0x7F7FFFFF, None),
    "sqrt: NaN in": ("fp32_sqrt", 0xFF800001, None),
}


def _named(op):
    cases = [(a, b) for o, a, b in NAMED_CASES.values() if o == op]
    a = np.array([c[0] for c in cases], dtype=np.uint64)
    b = np.array([0 if c[1] is None else c[1] for c in cases], dtype=np.uint64)
    return a, b


def binary_corpus(op, rng, n_random):
    """Operand pairs for ``op`` (one of :data:`BINARY_OPS`).

    Named cases, then every corpus operand paired with a random corpus operand
    (and the same pairs swapped, so commutativity is exercised), then for the
    adder pairs at chosen exponent distances, for the fp32 multiplier and
    divider :func:`rounding_cases`, then ``n_random`` random pairs.
    """
    if op not in BINARY_OPS:
        raise ValueError(f"no binary corpus for {op!r}; operations: {', '.join(BINARY_OPS)}")
    fmt = BINARY_OPS[op]
    na, nb = _named(op)
    corp = operands(fmt)
    partner = rng.permutation(corp)
    parts_a = [na, corp, partner]
    parts_b = [nb, partner, corp]
    if op == "fp32_add":
        da, db = exponent_distance_pairs(rng, 40)
        parts_a.append(da)
        parts_b.append(db)
    if op in ROUNDING_OPS:
        ra, rb = rounding_cases(op, rng, 100)
        parts_a.append(ra)
        parts_b.append(rb)
    parts_a.append(random_values(rng, fmt, n_random))
    parts_b.append(random_values(rng, fmt, n_random))
    cast = lambda parts: np.concatenate([p.astype(np.uint64) for p in parts]).astype(fmt.bits_dtype)
    return cast(parts_a), cast(parts_b)


def unary_corpus(op, rng, n_random):
    """Operands for ``op`` (one of :data:`UNARY_OPS`): named cases, the fp32 corpus,
    for the square root :func:`rounding_cases`, then ``n_random`` random values."""
    if op not in UNARY_OPS:
        raise ValueError(f"no unary corpus for {op!r}; operations: {', '.join(UNARY_OPS)}")
    na, _ = _named(op)
    parts = [na.astype(np.uint32), operands(FP32)]
    if op in ROUNDING_OPS:
        parts += rounding_cases(op, rng, 100)
    return np.concatenate(parts + [random_values(rng, FP32, n_random)])
