"""The golden models agree with Berkeley SoftFloat bit for bit, in both numerics."""

import numpy as np
import pytest
import softfloatpy as sf
from hypothesis import given, settings, strategies as st

from golden import arith
from golden.formats import NUMERICS
from verif.suites.arith import corpus
from verif.scoreboard import Scoreboard

from .. import oracle

OPS = ("fp32_add", "bf16_mul", "fp32_to_bf16")


@pytest.fixture(autouse=True)
def _round_to_nearest_even():
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)


def _operands(op, rng, n_random):
    if op == "fp32_to_bf16":
        return (corpus.unary_corpus(op, rng, n_random),)
    return corpus.binary_corpus(op, rng, n_random)


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("op", OPS)
def test_golden_matches_softfloat_on_corpus(op, numerics, rng):
    operands = _operands(op, rng, n_random=20_000)
    got = getattr(arith, op)(*operands, numerics=numerics)
    expected = np.array(oracle.apply(op, numerics, *operands), dtype=got.dtype)
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
}

_GOLDEN = {"add": ("fp32_add", np.uint32), "mul": ("bf16_mul", np.uint16),
           "cvt": ("fp32_to_bf16", np.uint32)}


def test_corpus_holds_every_required_corner_case():
    missing = [name for name in REQUIRED_CASES if name not in corpus.NAMED_CASES]
    assert not missing


@pytest.mark.parametrize("name", sorted(HAND_CHECKED))
@pytest.mark.parametrize("numerics", NUMERICS)
def test_named_case_by_hand(name, numerics):
    op, a, b = corpus.NAMED_CASES[name]
    fn, dtype = _GOLDEN[name[:3]]
    assert op == fn
    operands = [np.array([a], dtype)] + ([] if b is None else [np.array([b], dtype)])
    expected = dict(zip(("ieee", "tpu"), HAND_CHECKED[name]))[numerics]
    assert int(getattr(arith, fn)(*operands, numerics=numerics)[0]) == expected
    assert oracle.apply(fn, numerics, *operands) == [expected]


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("op", ["fp32_add", "bf16_mul"])
def test_golden_commutes_bitwise(op, numerics, rng):
    # Golden on (b, a) against SoftFloat on (a, b): a + b == b + a, bit for bit,
    # including which NaN comes out.
    a, b = corpus.binary_corpus(op, rng, n_random=2_000)
    swapped = getattr(arith, op)(b, a, numerics=numerics)
    assert [int(v) for v in swapped] == oracle.apply(op, numerics, a, b)


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


_PROPERTY = settings(max_examples=3_000, derandomize=True, database=None, deadline=None)


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
