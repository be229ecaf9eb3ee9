# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct components whose __init__ raises.)
"""The fp32 multiplier, divider and square root equal Berkeley SoftFloat bit for bit.

Expected values come from softfloatpy alone, with the "tpu" rules (flush
subnormal operands and results, canonical NaN) restated here on plain
integers. Stimulus: hand-picked corners, the TestFloat-style fp32 corpus,
generated exact ties and near-midpoints (checked to be what they claim with
exact integer arithmetic), and seeded random operands. :func:`soak` runs
any number of random operands for longer checks outside the default suite.
"""

import functools
import itertools
import math
import time
from fractions import Fraction

import numpy as np
import pytest
import softfloatpy as sf
from amaranth.back import rtlil

from golden.formats import FP32, NUMERICS
from hdl.arith import FP32Divider, FP32Multiplier, FP32Sqrt
from hdl.arith.float_ops import balanced_cuts
from sim.arith import stream_through
from sim.backends.amaranth_sim import simulate
from sim.transactors import StreamSink, StreamSource, run_transactors
from verif.scoreboard import Scoreboard
from verif.suites.arith import corpus

from .stream_timing import check_latency_and_rate

QNAN = 0x7FC00000
N_RANDOM = 1500


# --- the oracle ---------------------------------------------------------------------------

def _f32(bits):
    return sf.Float32.from_bytes(int(bits).to_bytes(4, "big"))


def _bits(value):
    return int.from_bytes(value.to_bytes(), "big")


def _flush(bits):
    return bits & 0x80000000 if (bits >> 23) & 0xFF == 0 else bits


def _finish(bits, numerics):
    if bits & 0x7F800000 == 0x7F800000 and bits & 0x7FFFFF:
        return QNAN
    return _flush(bits) if numerics == "tpu" else bits


def oracle(op, numerics, *operands):
    """SoftFloat's result for ``op`` ("mul", "div", "sqrt") on bit-pattern arrays."""
    fn = {"mul": sf.f32_mul, "div": sf.f32_div, "sqrt": sf.f32_sqrt}[op]
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    out = []
    for ops in zip(*operands):
        ops = [int(x) for x in ops]
        if numerics == "tpu":
            ops = [_flush(x) for x in ops]
        out.append(_finish(_bits(fn(*map(_f32, ops))), numerics))
    return np.array(out, np.uint32)


# --- stimulus -----------------------------------------------------------------------------

NANS = [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FC12345, 0xFFFFFFFF, 0x7FBFFFFF]

MUL_CASES = [
    (0x00000000, 0x3F800000), (0x80000000, 0x3F800000), (0x00000000, 0x80000000),
    (0x7F800000, 0x00000000), (0xFF800000, 0x80000001),     # inf x (subnormal or tpu zero)
    (0x7F800000, 0xC0000000), (0xFF800000, 0xFF800000),
    (0x00000001, 0x3F800000), (0x807FFFFF, 0x40000000),     # subnormal kept / flushed
    (0x00400000, 0x4B000000), (0x00000001, 0x4B000000),     # subnormal x 2^23 -> normal
    (0x00800000, 0x3F000000),                               # smallest normal / 2
    (0x00800000, 0x3F7FFFFF),   # 2^-126 - 2^-150: ties up to 2^-126, so "tpu" keeps it
    (0x80800000, 0x3F7FFFFF), (0x00800001, 0x3F7FFFFF),
    (0x00800000, 0x3F7FFFFE),   # 2^-126 - 2^-149: subnormal, flushed in "tpu"
    (0x00800000, 0x00800000), (0x1F800000, 0x1F800000), (0x1F800000, 0x1F7FFFFF),
    (0x00000001, 0x3F000000), (0x00000001, 0x3F400000), (0x00000003, 0x3F000000),
    (0x7F7FFFFF, 0x3F800001),   # overflow by rounding
    (0x7F7FFFFF, 0x3F800000), (0x7F7FFFFF, 0x40000000), (0xFF7FFFFF, 0x7F7FFFFF),
    (0x5F800000, 0x5F800000), (0x5F7FFFFF, 0x5F800000),
    (0x3FC00000, 0x3F800001),   # exact tie, rounds up to even
    (0x3FC00000, 0x3F800003),   # exact tie, stays even
    (0x3FC00001, 0x3F800001),   # guard 1 and only the product's last bit sticky: rounds up
    (0x3F800001, 0x3F800001), (0x3F7FFFFF, 0x3F7FFFFF), (0x3FFFFFFF, 0x3FFFFFFF),
]

DIV_CASES = [
    (0x3F800000, 0x00000000), (0xBF800000, 0x00000000), (0x3F800000, 0x80000000),
    (0x00000000, 0x00000000), (0x80000000, 0x3F800000), (0x00000000, 0xBF800000),
    (0x7F800000, 0x7F800000), (0x7F800000, 0x00000000), (0x00000000, 0x7F800000),
    (0x3F800000, 0xFF800000), (0xFF800000, 0x3F800000),
    (0x3F800000, 0x00000001), (0x00000001, 0x00000001), (0x00000001, 0x3F800000),
    (0x40C00000, 0x40000000), (0x40400000, 0x40400000), (0x3F800000, 0x40400000),
    (0x3F800000, 0x3F800001), (0x3FFFFFFF, 0x3F800000), (0x3F800000, 0x3FFFFFFF),
    (0x7F7FFFFF, 0x3F7FFFFF),   # exactly 2^128: overflow
    (0x7F7FFFFF, 0x3F7FFFFE), (0x7F7FFFFF, 0x3F800000), (0x7F7FFFFF, 0x00800000),
    (0x00800000, 0x40000000),   # smallest normal / 2: subnormal, flushed in "tpu"
    (0x00FFFFFF, 0x40000000),   # 2^-126 - 2^-150: ties up to 2^-126 in both numerics
    (0x00FFFFFD, 0x40000000),   # tie in the subnormal range, stays even
    (0x00000003, 0x40000000), (0x00000001, 0x40000000), (0x00000001, 0x3FC00000),
    (0x00800000, 0x3F800001), (0x00800000, 0x7F7FFFFF), (0x3F800000, 0x7F7FFFFF),
    (0x007FFFFF, 0x3F000000), (0x007FFFFF, 0x007FFFFF), (0x00000001, 0x7F7FFFFF),
]

SQRT_CASES = [
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0xBF800000, 0x80000001, 0x807FFFFF,
    0x00000001, 0x00000002, 0x00000004, 0x007FFFFF, 0x00800000, 0x00800001, 0x01000000,
    0x3F800000, 0x3F800001, 0x3F7FFFFF, 0x40000000, 0x40800000, 0x40400000,
    0x7F7FFFFF, 0x7F000000, 0x7EFFFFFF, 0x3E800000, 0x3F000000,
]


def _special_pairs():
    """Every NaN against a normal, a zero and an inf, in both positions."""
    others = [0x3F800000, 0x00000000, 0xFF800000, 0x00000001]
    pairs = [(n, o) for n in NANS for o in others]
    return pairs + [(o, n) for n, o in pairs]


def _fields(sign, exp, sig):
    """fp32 patterns from sign, biased exponent and 24-bit significand (hidden bit dropped)."""
    return ((sign.astype(np.uint64) << 31) | (exp.astype(np.uint64) << 23)
            | (sig.astype(np.uint64) & 0x7FFFFF)).astype(np.uint32)


def _significand(bits):
    exp = (int(bits) >> 23) & 0xFF
    frac = int(bits) & 0x7FFFFF
    return (frac | 0x800000, exp) if exp else (frac, 1)


def _value(bits):
    """The value of a finite fp32 pattern as a Python float (exact)."""
    sig, exp = _significand(bits)
    return (-1) ** (int(bits) >> 31) * math.ldexp(sig, exp - 150)


def _exact_product_tail(a, b):
    """(guard, sticky) of the exact product of two normal fp32 values, by integers."""
    product = _significand(a)[0] * _significand(b)[0]
    drop = product.bit_length() - 24
    return (product >> (drop - 1)) & 1, product & ((1 << (drop - 1)) - 1) != 0


def mul_ties(rng, n):
    """Products exactly halfway between two fp32 values.

    1.5 x an odd significand B below 2^25 / 3 is 3B x 2^22: 25 significant
    bits, the last one a 1 and nothing below, so the guard bit is 1 and the
    sticky bit 0. Exponents cover the normal range and its underflow edge.
    """
    b_sig = rng.integers(0x400000, 0x555555, n) * 2 + 1
    a_exp = rng.integers(1, 200, n)
    b_exp = rng.integers(np.maximum(1, 70 - a_exp), 254 - np.maximum(0, a_exp - 127))
    a = _fields(rng.integers(0, 2, n), a_exp, np.full(n, 0xC00000))
    b = _fields(rng.integers(0, 2, n), b_exp, b_sig)
    return a, b


def _sqrt_mod_power_of_two(c, bits):
    """A square root of ``c`` (odd, 1 modulo 8) modulo 2^bits, by Hensel lifting."""
    assert c % 8 == 1, c
    root = 1
    for k in range(3, bits):
        if (root * root - c) >> k & 1:
            root += 1 << (k - 1)
    return root % (1 << bits)


def sqrt_near_midpoints(rng, n):
    """Integers T (times even powers of 2) whose root is a hair's breadth from a midpoint.

    With Q odd and of 25 bits, Q / 2^13 is a midpoint of 24-bit roots. If
    Q^2 = T * 2^26 + d for a small d, sqrt(T) is just below the midpoint,
    or just above it for a negative d (the square roots of d modulo 2^26
    give such Q). An odd square is 1 modulo 8, so d is 1 (below) or -7
    (above) modulo 8: the smallest remainders are 1 and 7. T has 23 or 24
    bits, so both exponent parities occur.
    """
    values = []
    while len(values) < n:
        j = int(rng.integers(0, 64))
        d = 8 * j + 1 if rng.integers(0, 2) else -(8 * j + 7)
        root = _sqrt_mod_power_of_two(d % (1 << 26), 26)
        for q in (root, -root % (1 << 26), (root + (1 << 25)) % (1 << 26),
                  -(root + (1 << 25)) % (1 << 26)):
            if 1 << 24 <= q < 1 << 25:
                values.append((q * q - d) >> 26)
                break
    scale = np.exp2(2 * rng.integers(-40, 40, n))
    return (np.array(values, np.float64) * scale).astype(np.float32).view(np.uint32)


def _pairs(cases):
    a, b = zip(*cases)
    return np.array(a, np.uint32), np.array(b, np.uint32)


def binary_vectors(op, rng, n_random):
    """Corner cases, the corpus crossed with a shuffled copy of itself, generated cases, random."""
    cases = MUL_CASES if op == "mul" else DIV_CASES
    swapped = [(b, a) for a, b in cases]
    parts = [_pairs(cases + swapped + _special_pairs())]
    crossed = corpus.operands(FP32)
    parts.append((crossed, rng.permutation(crossed)))
    parts.append(mul_ties(rng, 200) if op == "mul" else corpus.div_near_midpoints(rng, 300))
    if op == "div":
        parts.append(corpus.div_exact(rng, 200))
    parts.append((corpus.random_values(rng, FP32, n_random),
                  corpus.random_values(rng, FP32, n_random)))
    return tuple(np.concatenate([p[i] for p in parts]).astype(np.uint32) for i in (0, 1))


def unary_vectors(rng, n_random):
    return (np.concatenate([np.array(SQRT_CASES + NANS, np.uint32), corpus.operands(FP32),
                            corpus.sqrt_squares(rng, 200), sqrt_near_midpoints(rng, 200),
                            corpus.random_values(rng, FP32, n_random)]).astype(np.uint32),)


UNITS = {"mul": FP32Multiplier, "div": FP32Divider, "sqrt": FP32Sqrt}


def vectors(op, rng, n_random):
    return unary_vectors(rng, n_random) if op == "sqrt" else binary_vectors(op, rng, n_random)


# --- running the RTL ----------------------------------------------------------------------

def _beats(operands):
    packed = np.zeros(operands[0].size, np.uint64)
    for i, x in enumerate(operands):
        packed |= x.astype(np.uint64) << np.uint64(32 * i)
    return packed.tolist()


def run(op, numerics, operands, **params):
    """Stream ``operands`` through the RTL unit at full rate; its results as uint32."""
    dut = UNITS[op](numerics=numerics, **params)
    results = simulate(dut, functools.partial(stream_through, beats=_beats(operands)))
    return np.array(results, np.uint32)


def check(op, numerics, operands, got):
    board = Scoreboard(f"{op}/{numerics}", oracle(op, numerics, *operands),
                       dict(zip("ab", operands)))
    board.check_all(got)
    assert board.passed, board.summary()


# --- tests --------------------------------------------------------------------------------

@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("op", UNITS)
def test_matches_softfloat(op, numerics, rng):
    operands = vectors(op, rng, N_RANDOM)
    check(op, numerics, operands, run(op, numerics, operands))


# The extremes of each unit and an odd depth in between (in make test-slow: a build each). The
# cut placement depends on the numerics, so each depth runs in both.
@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("op, stages", [
    ("mul", 1), pytest.param("mul", 5, marks=pytest.mark.slow), ("div", 1),
    pytest.param("div", 7, marks=pytest.mark.slow), ("div", 30), ("sqrt", 1),
    pytest.param("sqrt", 9, marks=pytest.mark.slow), ("sqrt", 27)])
def test_every_pipeline_depth_matches_softfloat(op, stages, numerics, rng):
    operands = vectors(op, rng, 100)
    rows = rng.permutation(operands[0].size)[:300]
    operands = tuple(x[rows] for x in operands)
    check(op, numerics, operands, run(op, numerics, operands, stages=stages))


def test_generated_cases_are_what_they_claim(rng):
    for a, b in zip(*mul_ties(rng, 100)):
        assert _exact_product_tail(a, b) == (1, False), f"{a:#x} x {b:#x} is not a tie"
    assert _exact_product_tail(0x3FC00000, 0x3F800001) == (1, False)
    assert _exact_product_tail(0x3FC00000, 0x3F800003) == (1, False)
    for a, b in zip(*corpus.div_near_midpoints(rng, 100)):
        (sa, _), (sb, _) = _significand(a), _significand(b)
        near = []
        for k in (24, 25):
            q, rest = divmod(sa << k, sb)
            near.append((q % 2 and rest == 1) or (q % 2 == 0 and rest == sb - 1))
        assert any(near), f"{a:#x} / {b:#x} is not next to a midpoint"
    for a, b in zip(*corpus.div_exact(rng, 100)):
        quotient = Fraction(_value(a)) / Fraction(_value(b))
        odd_part = quotient.numerator // (quotient.numerator & -quotient.numerator)
        assert odd_part < 1 << 24 and quotient.denominator.bit_count() == 1, f"{a:#x} / {b:#x}"
    for t in sqrt_near_midpoints(rng, 100):
        (sig, exp) = _significand(t)
        scaled = sig << (26 - exp % 2)        # sqrt(t) times a power of 2: 25-bit root
        root = math.isqrt(scaled)
        below = root % 2 == 0 and (root + 1) ** 2 - scaled < 1 << 10
        above = root % 2 == 1 and scaled - root ** 2 < 1 << 10
        assert below or above, f"sqrt({t:#x}) is not next to a midpoint"
    squares = corpus.sqrt_squares(rng, 50)[:50]
    assert all(_bits(sf.f32_mul(r := sf.f32_sqrt(_f32(s)), r)) == s for s in squares)


@pytest.mark.parametrize("op", UNITS)
def test_latency_and_back_to_back_rate(op, rng):
    """One result exactly ``latency`` cycles after its operands; then one per cycle."""
    dut = UNITS[op](numerics="ieee")
    operands = tuple(x[:64] for x in vectors(op, rng, 64))
    results = check_latency_and_rate(dut, _beats(operands))
    check(op, "ieee", operands, np.array(results, np.uint32))


@pytest.mark.parametrize("op", UNITS)
def test_backpressure_loses_nothing(op, rng):
    dut = UNITS[op](numerics="tpu")
    operands = tuple(x[:300] for x in vectors(op, rng, 300))

    async def program(bench):
        sink = StreamSink("result", operands[0].size, stall=lambda: rng.random() < 0.4)
        source = StreamSource("operands", _beats(operands), idle=lambda: rng.random() < 0.3)
        await run_transactors(bench, [source, sink])
        return sink.beats

    check(op, "tpu", operands, np.array(simulate(dut, program), np.uint32))


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("op, registers", [
    ("mul", ["mul_s0_a_frac", "mul_s0_b_frac", "mul_s1_product", "mul_s4_result"]),
    ("div", ["div_s29_result"]),
    ("sqrt", ["sqrt_s26_result"]),
])
def test_exports_to_rtlil(op, registers, numerics):
    text = rtlil.convert(UNITS[op](numerics=numerics), name=f"fp32_{op}")
    assert "module \\fp32_" in text
    for register in registers:     # the multiply is registered on both sides by default
        assert register in text, register


@pytest.mark.parametrize("op, max_stages", [("mul", 5), ("div", 30), ("sqrt", 27)])
def test_bad_parameters_are_rejected(op, max_stages):
    unit = UNITS[op]
    with pytest.raises(ValueError, match="numerics must be one of"):
        unit(numerics="IEEE")
    with pytest.raises(ValueError, match=f"stages must be between 1 and {max_stages}, not 0"):
        unit(stages=0)
    with pytest.raises(ValueError, match=f"stages must be between 1 and {max_stages}"):
        unit(stages=max_stages + 1)
    with pytest.raises(TypeError, match="stages must be an integer"):
        unit(stages=2.5)


def test_balanced_cuts_are_optimal(rng):
    """Against brute force over every choice of cuts, on small random chains."""
    for _ in range(40):
        delays = [int(d) for d in rng.integers(1, 6, rng.integers(1, 9))]
        for stages in range(1, len(delays) + 1):
            preference = balanced_cuts(delays, stages)
            assert sorted(preference) == list(range(len(delays)))
            assert preference[0] == len(delays) - 1, "the output must be registered"
            chosen = sorted(preference[:stages])

            def slowest(cuts):
                bounds = [-1, *cuts]
                return max(sum(delays[lo + 1:hi + 1]) for lo, hi in zip(bounds, bounds[1:]))

            best = min(slowest([*c, len(delays) - 1])
                       for c in itertools.combinations(range(len(delays) - 1), stages - 1))
            assert slowest(chosen) == best, (delays, stages, chosen)


# --- longer runs, outside the default suite -----------------------------------------------

def soak(op, numerics, count, *, seed=0, chunk=20_000):
    """Check ``count`` weighted random operands of ``op``; returns (checked, seconds).

    Raises AssertionError naming the seed and the first mismatch. Example:
    ``python -c "from tests.arith.test_fp32_mul_div_sqrt import soak; print(soak('div', 'ieee', 10**5))"``
    """
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    for start in range(0, count, chunk):
        n = min(chunk, count - start)
        operands = tuple(corpus.random_values(rng, FP32, n) for _ in range(1 if op == "sqrt" else 2))
        try:
            check(op, numerics, operands, run(op, numerics, operands))
        except AssertionError as error:
            raise AssertionError(f"soak {op}/{numerics} seed {seed}: {error}") from None
    return count, time.perf_counter() - started
