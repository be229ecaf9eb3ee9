"""TestFloat-style stimulus: corner-case operand corpora and named cases.

Following Berkeley TestFloat's generator, single operands are a cross of
chosen biased exponents with significand patterns (zero, one, all ones, all
ones minus one, walking ones and zeros, runs of ones), both signs. Binary
operations pair those operands with each other, with operands a chosen
exponent distance away, and with weighted random values. ``NAMED_CASES``
pins down every corner the foundation issue lists, so a test can insist
that each one is present.

Every function that draws random numbers takes a ``numpy.random.Generator``;
callers derive it from the run's one seed.
"""

import numpy as np

from golden.formats import BF16, FP32, OperandClass

__all__ = [
    "EXPONENTS", "significand_patterns", "operands", "random_values", "class_values",
    "class_cross",
    "NAMED_CASES", "binary_corpus", "unary_corpus", "exponent_distance_pairs",
]

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
}


def _named(op):
    cases = [(a, b) for o, a, b in NAMED_CASES.values() if o == op]
    a = np.array([c[0] for c in cases], dtype=np.uint64)
    b = np.array([0 if c[1] is None else c[1] for c in cases], dtype=np.uint64)
    return a, b


def binary_corpus(op, rng, n_random):
    """Operand pairs for ``op`` ("fp32_add" or "bf16_mul").

    Named cases, then every corpus operand paired with a random corpus operand
    (and the same pairs swapped, so commutativity is exercised), then for the
    adder pairs at chosen exponent distances, then ``n_random`` random pairs.
    """
    fmt = {"fp32_add": FP32, "bf16_mul": BF16}[op]
    na, nb = _named(op)
    corp = operands(fmt)
    partner = rng.permutation(corp)
    parts_a = [na, corp, partner]
    parts_b = [nb, partner, corp]
    if op == "fp32_add":
        da, db = exponent_distance_pairs(rng, 40)
        parts_a.append(da)
        parts_b.append(db)
    parts_a.append(random_values(rng, fmt, n_random))
    parts_b.append(random_values(rng, fmt, n_random))
    cast = lambda parts: np.concatenate([p.astype(np.uint64) for p in parts]).astype(fmt.bits_dtype)
    return cast(parts_a), cast(parts_b)


def unary_corpus(op, rng, n_random):
    """Operands for ``op`` ("fp32_to_bf16"): named cases, the fp32 corpus, random values."""
    if op != "fp32_to_bf16":
        raise ValueError(f"no unary corpus for {op!r}")
    na, _ = _named(op)
    return np.concatenate([na.astype(np.uint32), operands(FP32),
                           random_values(rng, FP32, n_random)])
