"""The golden models agree with Berkeley SoftFloat bit for bit, in both numerics."""

import math
from fractions import Fraction

import numpy as np
import pytest
import softfloatpy as sf
from hypothesis import given, settings, strategies as st

from golden import arith
from golden.formats import NUMERICS
from verif.suites.arith import corpus
from verif.scoreboard import Scoreboard

from .. import oracle
from .test_fp32_mul_div_sqrt import oracle as fp32_oracle

OPS = ("fp32_add", "bf16_mul", "fp32_to_bf16", "fp32_mul", "fp32_div", "fp32_sqrt")

# tests/oracle.py has the first three; the fp32 multiply, divide and square root
# oracle (SoftFloat with the "tpu" rules restated) lives with the RTL tests.
_FP32_ORACLE_OPS = {"fp32_mul": "mul", "fp32_div": "div", "fp32_sqrt": "sqrt"}


def _softfloat(op, numerics, *operands):
    """SoftFloat's results for ``op`` on integer sequences, as a list of ints."""
    if op in _FP32_ORACLE_OPS:
        return fp32_oracle(_FP32_ORACLE_OPS[op], numerics, *operands).tolist()
    return oracle.apply(op, numerics, *operands)


@pytest.fixture(autouse=True)
def _round_to_nearest_even():
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)


def _operands(op, rng, n_random):
    if op in corpus.UNARY_OPS:
        return (corpus.unary_corpus(op, rng, n_random),)
    return corpus.binary_corpus(op, rng, n_random)


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("op", OPS)
def test_golden_matches_softfloat_on_corpus(op, numerics, rng):
    operands = _operands(op, rng, n_random=20_000)
    got = getattr(arith, op)(*operands, numerics=numerics)
    expected = np.array(_softfloat(op, numerics, *operands), dtype=got.dtype)
    board = Scoreboard(f"golden {op}/{numerics} vs softfloat", expected,
                       dict(zip("ab", operands)))
    board.check_all(got)
    assert board.passed, board.summary()


# The corner cases foundation issue lists, each by its corpus name.
REQUIRED_CASES = [
    "add: exact cancellation to +0", "add: exact cancellation to -0 (-0 + -0)",
    "add: full renormalizing shift (1 - (1 - ulp/2))",
    "add: normal minus normal gives a subnormal",
    "add: tie to even stays", "add: tie to even rounds up", "add: sticky bit breaks a tie",
    "add: borrow out of the sticky bit",
    *(f"add: exponent difference {d}" for d in ("0", "1", "23", "24", "25", "26", "huge")),
    "add: rounding carry into the exponent",
    "add: overflow by rounding", "add: just no overflow by rounding",
    "add: subnormal + subnormal = normal", "add: inf - inf", "add: quiet NaN in",
    "add: signalling NaN in",
    "mul: product at 2^-126 (smallest normal)", "mul: product at 2^-127 (subnormal)",
    "mul: product at 2^128 (overflow)", "mul: inf * 0", "mul: -x * 0",
]

# Expected results worked out by hand from IEEE 754 (not from any model here):
# name -> (ieee result, tpu result).
HAND_CHECKED = {
    "add: exact cancellation to +0": (0x00000000, 0x00000000),
    "add: exact cancellation to -0 (-0 + -0)": (0x80000000, 0x80000000),
    "add: +0 + -0 = +0": (0x00000000, 0x00000000),
    "add: full renormalizing shift (1 - (1 - ulp/2))": (0x33800000, 0x33800000),  # 2^-24
    "add: normal minus normal gives a subnormal": (0x00000001, 0x00000000),
    "add: tie to even stays": (0x3F800000, 0x3F800000),
    "add: tie to even rounds up": (0x3F800002, 0x3F800002),
    "add: sticky bit breaks a tie": (0x3F800001, 0x3F800001),
    "add: borrow out of the sticky bit": (0x3F7FFFFF, 0x3F7FFFFF),
    "add: rounding carry into the exponent": (0x40000000, 0x40000000),
    "add: overflow by rounding": (0x7F800000, 0x7F800000),
    "add: just no overflow by rounding": (0x7F7FFFFF, 0x7F7FFFFF),
    "add: subnormal + subnormal = normal": (0x00800000, 0x00000000),
    "add: inf - inf": (0x7FC00000, 0x7FC00000),
    "add: signalling NaN in": (0x7FC00000, 0x7FC00000),
    "mul: product at 2^-126 (smallest normal)": (0x00800000, 0x00800000),
    "mul: product at 2^-127 (subnormal)": (0x00400000, 0x00000000),
    "mul: product at 2^128 (overflow)": (0x7F800000, 0x7F800000),
    "mul: tie in the subnormal range": (0x00007F00, 0x00000000),
    "mul: inf * 0": (0x7FC00000, 0x7FC00000),
    "mul: -x * 0": (0x80000000, 0x80000000),
    "cvt: tie to even stays": (0x3F80, 0x3F80),
    "cvt: tie to even rounds up": (0x3F82, 0x3F82),
    "cvt: overflow by rounding": (0x7F80, 0x7F80),
    "cvt: subnormal rounds up to normal": (0x0080, 0x0000),
    "cvt: NaN whose payload is below bf16 precision": (0x7FC0, 0x7FC0),
    "fmul: exact": (0x41100000, 0x41100000),                               # 3 x 3
    "fmul: tie to even stays": (0x3FC00004, 0x3FC00004),                   # 1.5 + 4.5 ulp
    "fmul: tie to even rounds up": (0x3FC00002, 0x3FC00002),               # 1.5 + 1.5 ulp
    "fmul: sticky bit breaks a tie": (0x3FC00003, 0x3FC00003),             # 1.5 + 2.5 ulp + ulp^2
    # 0xFED4D5 x 0x809645 = 2^47 - 0x1BD497, less than half an ulp (2^22) below 2^47.
    "fmul: rounding carry into the exponent": (0x40000000, 0x40000000),
    "fmul: overflow by rounding": (0x7F800000, 0x7F800000),                # the same, at 2^128
    "fmul: max * max overflows": (0x7F800000, 0x7F800000),
    "fmul: tie rounds up to the smallest normal": (0x00800000, 0x00800000),  # 2^-126 - 2^-150
    "fmul: subnormal product": (0x00400000, 0x00000000),                   # 2^-127
    "fmul: subnormal x normal = normal": (0x00800000, 0x00000000),         # 2^-149 x 2^23
    "fmul: underflow to zero (a tie)": (0x00000000, 0x00000000),           # 2^-150
    "fmul: inf * 0": (0x7FC00000, 0x7FC00000),
    "fmul: inf * subnormal": (0xFF800000, 0x7FC00000),                     # "tpu": inf x 0
    "fmul: -x * +0": (0x80000000, 0x80000000),
    "fmul: NaN in": (0x7FC00000, 0x7FC00000),
    "div: exact": (0x40400000, 0x40400000),                                # 6 / 2
    "div: equal significands": (0x40000000, 0x40000000),                   # 3 / 1.5
    "div: 1 / 3": (0x3EAAAAAB, 0x3EAAAAAB),                                # 0.0101..., rounds up
    "div: quotient just below 1": (0x3F7FFFFE, 0x3F7FFFFE),                # 1 - 2^-23 + 2^-46
    "div: quotient exactly 2^128 overflows": (0x7F800000, 0x7F800000),
    "div: tie in the subnormal range stays even": (0x007FFFFE, 0x00000000),  # 0x7FFFFE.8 ulp
    "div: tie in the subnormal range rounds up": (0x00000002, 0x00000000),   # 1.5 ulp; "tpu": 0/2
    "div: tie rounds up to the smallest normal": (0x00800000, 0x00800000),   # 0x7FFFFF.8 ulp
    "div: underflow to zero (a tie)": (0x00000000, 0x00000000),            # 2^-150
    "div: normal / subnormal": (0x4B000000, 0x7F800000),                   # "tpu": x / 0
    "div: subnormal / subnormal": (0x3F800000, 0x7FC00000),                # "tpu": 0 / 0
    "div: x / +0": (0x7F800000, 0x7F800000),
    "div: -x / +0": (0xFF800000, 0xFF800000),
    "div: x / -0": (0xFF800000, 0xFF800000),
    "div: 0 / 0": (0x7FC00000, 0x7FC00000),
    "div: 0 / -x": (0x80000000, 0x80000000),
    "div: inf / inf": (0x7FC00000, 0x7FC00000),
    "div: -inf / x": (0xFF800000, 0xFF800000),
    "div: x / -inf": (0x80000000, 0x80000000),
    "div: NaN in": (0x7FC00000, 0x7FC00000),
    "sqrt: +0": (0x00000000, 0x00000000),
    "sqrt: -0": (0x80000000, 0x80000000),
    "sqrt: +inf": (0x7F800000, 0x7F800000),
    "sqrt: -inf": (0x7FC00000, 0x7FC00000),
    "sqrt: negative normal": (0x7FC00000, 0x7FC00000),
    "sqrt: negative subnormal": (0x7FC00000, 0x80000000),                  # "tpu": sqrt(-0)
    "sqrt: smallest subnormal": (0x1A3504F3, 0x00000000),                  # sqrt(2) x 2^-75
    "sqrt: smallest normal": (0x20000000, 0x20000000),                     # 2^-63
    "sqrt: perfect square": (0x40400000, 0x40400000),                      # sqrt(9)
    "sqrt: odd exponent": (0x3FB504F3, 0x3FB504F3),                        # sqrt(2)
    "sqrt: just below 1": (0x3F7FFFFF, 0x3F7FFFFF),                        # 1 - 2^-25 - 2^-51...
    "sqrt: largest finite": (0x5F7FFFFF, 0x5F7FFFFF),                      # the same, x 2^64
    "sqrt: NaN in": (0x7FC00000, 0x7FC00000),
}

# Named-case prefix -> (golden function, operand dtype).
_GOLDEN = {"add": ("fp32_add", np.uint32), "mul": ("bf16_mul", np.uint16),
           "cvt": ("fp32_to_bf16", np.uint32), "fmul": ("fp32_mul", np.uint32),
           "div": ("fp32_div", np.uint32), "sqrt": ("fp32_sqrt", np.uint32)}


def test_corpus_holds_every_required_corner_case():
    missing = [name for name in REQUIRED_CASES if name not in corpus.NAMED_CASES]
    assert not missing


@pytest.mark.parametrize("name", sorted(HAND_CHECKED))
@pytest.mark.parametrize("numerics", NUMERICS)
def test_named_case_by_hand(name, numerics):
    op, a, b = corpus.NAMED_CASES[name]
    fn, dtype = _GOLDEN[name.split(":")[0]]
    assert op == fn
    operands = [np.array([a], dtype)] + ([] if b is None else [np.array([b], dtype)])
    expected = dict(zip(("ieee", "tpu"), HAND_CHECKED[name]))[numerics]
    assert int(getattr(arith, fn)(*operands, numerics=numerics)[0]) == expected
    assert _softfloat(fn, numerics, *operands) == [expected]


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("op", ["fp32_add", "bf16_mul", "fp32_mul"])
def test_golden_commutes_bitwise(op, numerics, rng):
    # Golden on (b, a) against SoftFloat on (a, b): a + b == b + a, bit for bit,
    # including which NaN comes out.
    a, b = corpus.binary_corpus(op, rng, n_random=2_000)
    swapped = getattr(arith, op)(b, a, numerics=numerics)
    assert [int(v) for v in swapped] == _softfloat(op, numerics, a, b)


def test_mac_sequence_is_the_sequential_loop():
    # Three steps chosen so the order matters: 2^24 + 1 + 1 is 2^24 in fp32
    # when accumulated left to right (each +1 is a tie to even), but 2^24 + 2
    # if the ones were summed first.
    x = np.array([[0x4B80, 0x3F80, 0x3F80]], np.uint16)   # 2^24, 1, 1
    w = np.array([[0x3F80, 0x3F80, 0x3F80]], np.uint16)   # 1, 1, 1
    assert arith.mac_sequence(x, w, numerics="ieee").tolist() == [0x4B800000]
    acc = np.array([0x3F800000], np.uint32)               # 1 + 2^24 + 1 + 1, in that order
    assert arith.mac_sequence(x, w, numerics="ieee", acc=acc).tolist() == [0x4B800000]


def test_golden_rejects_bad_input():
    with pytest.raises(ValueError, match="numerics must be one of"):
        arith.fp32_add(np.zeros(1, np.uint32), np.zeros(1, np.uint32), numerics="fast")
    with pytest.raises(ValueError, match="float32 array or a uint32"):
        arith.fp32_add(np.zeros(1, np.float64), np.zeros(1, np.uint32))
    with pytest.raises(ValueError, match="disagree on K"):
        arith.mac_sequence(np.zeros((1, 2), np.uint16), np.zeros((1, 3), np.uint16))


# A thousand examples each: the corpus test above already runs 20,000 random operands of
# each unit against the same oracle, vectorized; these draw one operand at a time.
_PROPERTY = settings(max_examples=1_000, derandomize=True, database=None, deadline=None)


@_PROPERTY
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.sampled_from(NUMERICS))
def test_golden_add_property(a, b, numerics):
    got = arith.fp32_add(np.array([a], np.uint32), np.array([b], np.uint32), numerics=numerics)
    assert int(got[0]) == oracle.fp32_add(a, b, numerics)


@_PROPERTY
@given(st.integers(0, 2**16 - 1), st.integers(0, 2**16 - 1), st.sampled_from(NUMERICS))
def test_golden_mul_property(a, b, numerics):
    got = arith.bf16_mul(np.array([a], np.uint16), np.array([b], np.uint16), numerics=numerics)
    assert int(got[0]) == oracle.bf16_mul(a, b, numerics)


@_PROPERTY
@given(st.integers(0, 2**32 - 1), st.sampled_from(NUMERICS))
def test_golden_convert_property(a, numerics):
    got = arith.fp32_to_bf16(np.array([a], np.uint32), numerics=numerics)
    assert int(got[0]) == oracle.fp32_to_bf16(a, numerics)


@_PROPERTY
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.sampled_from(NUMERICS),
       st.sampled_from(["fp32_mul", "fp32_div"]))
def test_golden_fp32_mul_div_property(a, b, numerics, op):
    got = getattr(arith, op)(np.array([a], np.uint32), np.array([b], np.uint32),
                             numerics=numerics)
    assert [int(got[0])] == _softfloat(op, numerics, [a], [b])


@_PROPERTY
@given(st.integers(0, 2**32 - 1), st.sampled_from(NUMERICS))
def test_golden_sqrt_property(a, numerics):
    got = arith.fp32_sqrt(np.array([a], np.uint32), numerics=numerics)
    assert [int(got[0])] == _softfloat("fp32_sqrt", numerics, [a])


# --- the generated rounding cases are what they claim, by exact arithmetic ---------------

def _exact(bits):
    """The value of a finite fp32 pattern as a Fraction, from its fields."""
    bits = int(bits)
    exp, frac = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    assert exp != 0xFF, f"{bits:#x} is not finite"
    value = Fraction(frac | 0x800000, 1 << 23) * Fraction(2) ** (exp - 127) if exp else \
        Fraction(frac, 1 << 23) * Fraction(2) ** -126
    return -value if bits >> 31 else value


def _grid(value):
    """(exact / ulp, ulp) of ``value`` > 0 on the fp32 grid, subnormal spacing below 2^-126."""
    exp = max(math.floor(math.log2(value)), -126)
    while Fraction(2) ** exp > value and exp > -126:   # log2 rounding near powers of 2
        exp -= 1
    while Fraction(2) ** (exp + 1) <= value:
        exp += 1
    ulp = Fraction(2) ** (max(exp, -126) - 23)
    return value / ulp, ulp


def test_generated_rounding_cases_are_what_they_claim(rng):
    n = 60
    for a, b in zip(*corpus.mul_ties(rng, n)):
        scaled, _ = _grid(abs(_exact(a) * _exact(b)))
        assert scaled.denominator == 2, f"{a:#x} x {b:#x} is not a tie"
    for a, b in zip(*corpus.mul_carries(rng, n)):
        product = abs(_exact(a) * _exact(b))
        power = Fraction(2) ** math.ceil(math.log2(product))
        scaled, _ = _grid(product)
        assert power - product < _grid(power)[1] / 4, f"{a:#x} x {b:#x} is not within half an ulp"
        assert scaled.denominator > 2, f"{a:#x} x {b:#x} is exact or a tie"
    for op in ("fp32_mul", "fp32_div"):
        for a, b in zip(*corpus.exponent_edge_pairs(op, rng, n)):
            result = _exact(a) * _exact(b) if op == "fp32_mul" else _exact(a) / _exact(b)
            edge = math.floor(math.log2(abs(result))) + 127
            assert any(abs(edge - e) <= 1 for e in corpus.EDGE_EXPONENTS), (op, hex(a), hex(b))
    for a, b in zip(*corpus.div_exact(rng, n)):
        scaled, _ = _grid(abs(_exact(a) / _exact(b)))
        assert scaled.denominator == 1, f"{a:#x} / {b:#x} is not exact"
    for a, b in zip(*corpus.div_subnormal_ties(rng, n)):
        quotient = abs(_exact(a) / _exact(b))
        assert quotient < Fraction(2) ** -126
        assert (quotient / Fraction(2) ** -149).denominator == 2, f"{a:#x} / {b:#x}"
    for a, b in zip(*corpus.div_near_midpoints(rng, n)):
        scaled, _ = _grid(abs(_exact(a) / _exact(b)))
        distance = abs(scaled - math.floor(scaled) - Fraction(1, 2))
        assert 0 < distance < Fraction(1, 1 << 20), f"{a:#x} / {b:#x} is not near a midpoint"
    squares = corpus.sqrt_squares(rng, n)
    for square, below, above in zip(*squares.reshape(3, n)):
        value = _exact(square)
        root = math.isqrt(value.numerator), math.isqrt(value.denominator)
        assert Fraction(root[0], root[1]) ** 2 == value, f"{square:#x} is not a perfect square"
        assert int(below) == int(square) - 1 and int(above) == int(square) + 1
