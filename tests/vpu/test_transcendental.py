"""golden.transcendental: rcp and rsqrt against MPFR and exact integers, bit for bit; exp
against its algorithm restated on integers, bit for bit, and within its error bound of MPFR."""

import math

import gmpy2
import numpy as np
import pytest

from golden import transcendental
from golden.formats import FP32, NUMERICS
from verif.scoreboard import Scoreboard
from verif.suites.arith import corpus

from . import oracle_transcendental as oracle
from tools.audit_transcendental import EXP_BOUND, audit, audit_exp, exp_failed

FUNCTIONS = transcendental.FUNCTIONS
HARDEST_RSQRT = 0x403A18E3

# Inputs around the places where each function's result changes character:
# rcp's results turn subnormal above 2**126 and overflow below 2**-128; exp
# overflows at 88.72, turns subnormal below -87.34 and zero below -103.97,
# and rounds to 1 for tiny inputs.
BOUNDARIES = [
    0x7E800000, 0x7E7FFFFF, 0x7E800001, 0x7EFFFFFF, 0x7F000000, 0x7F000001, 0x7F7FFFFF,
    0x00200000, 0x001FFFFF, 0x00200001, 0x00400000, 0x003FFFFF, 0x00400001, 0x007FFFFF,
    0x42B17217, 0x42B17218, 0x42B17216, 0xC2AEAC4F, 0xC2AEAC50, 0xC2AEAC51,
    0xC2CFF1B4, 0xC2CFF1B5, 0xC2CFF1B3, 0xC2CE8ED0, 0xC2CE8ED1,
    0x33800000, 0x33000000, 0x33000001, 0x32FFFFFF, 0xB3000000, 0xB2800000, 0xB2800001,
    0x3F800000, 0x3F800001, 0x3F7FFFFF, 0x40000000, 0x40800000, 0x3E800000,
]

# The inputs whose float64 exp lies closest to a binary32 rounding midpoint
# (found by scanning all 2**32): the correctly rounded oracle settles these
# with decimal arithmetic.
EXP_NEAR_MIDPOINT = [0xC16912CD, 0xBBF0EDF1, 0xC2B2E798, 0x377EFF81, 0x38E69CC1, 0x39C6BE5B,
                     0xB3000000, 0xBAE0E25C, 0x383A3EF1, 0x3D1A274E, 0x4001B249, 0x40315B33]

SPECIALS = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
            0x7F800001, 0xFF800001, 0x7FFFFFFF, 0x00000001, 0x80000001, 0x007FFFFF,
            0x807FFFFF, 0x00800000, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF]


def directed():
    """Specials, boundaries, the TestFloat operand cross, powers of two and their neighbours,
    subnormal walks, and the hardest rsqrt input with its neighbours."""
    powers = [e << 23 for e in range(1, 255)] + [1 << i for i in range(23)]
    neighbours = [p + d for p in powers for d in (-1, 1) if 0 <= p + d < 1 << 31]
    subnormal_runs = [(1 << i) - 1 for i in range(1, 24)] + [0x7FFFFF ^ (1 << i) for i in range(23)]
    hard = [HARDEST_RSQRT + d for d in range(-4, 5)]
    mags = np.array(BOUNDARIES + powers + neighbours + subnormal_runs + hard, dtype=np.uint32)
    specials = np.array(SPECIALS + EXP_NEAR_MIDPOINT, np.uint32)
    return np.concatenate([specials, corpus.operands(FP32), mags, mags | np.uint32(0x80000000)])


def vectors(rng, n_random):
    return np.concatenate([directed(), corpus.random_values(rng, FP32, n_random)])


def _f32(values):
    with np.errstate(over="ignore"):
        return np.asarray(values, np.float64).astype(np.float32).view(np.uint32)


def _neighbours(bits, reach):
    """Each pattern and the ``reach`` patterns on either side (same sign)."""
    steps = np.arange(-reach, reach + 1, dtype=np.int64)
    out = (bits.astype(np.int64)[:, None] + steps[None, :]).ravel()
    return out[(out >= 0) & (out < 1 << 32)].astype(np.uint32)


def exp_directed(rng):
    """Inputs where exp's datapath changes character.

    The integer part n of t = x log2(e) steps at x = k ln 2 (every k from -150
    to 128, so also the subnormal and overflow edges); the table indices
    step at x = (k + i/256) ln 2 and (k + j/65536) ln 2; the result turns
    subnormal, zero and inf near -87.34, -103.97 and 88.72; tiny inputs give
    1; subnormal inputs (flushed in "tpu"); and random subnormal results.
    """
    ln2 = math.log(2)
    k = np.arange(-150, 129)
    n_edges = _neighbours(_f32(k * ln2), 3)
    ks = rng.integers(-140, 127, 256)
    hi_edges = _neighbours(_f32((ks + np.arange(256) / 256) * ln2), 1)
    ks = rng.integers(-140, 127, 256)
    lo_edges = _neighbours(_f32((ks + (rng.integers(0, 256, 256) * 256 + np.arange(256))
                                 / 65536) * ln2), 1)
    tiny = np.concatenate([_neighbours(_f32(2.0 ** -np.arange(14, 40)), 2),
                           _f32(-(2.0 ** -np.arange(14, 40)))])
    tiny = np.concatenate([tiny, tiny | np.uint32(0x80000000)])
    edges = _neighbours(np.array([0x42B17217, 0xC2CFF1B4, 0xC2AEAC4F, 0xC2AEAC50, 0x42B00000,
                                  0x43000000, 0xC3000000, 0x42FFFFFF, 0xC2FFFFFF], np.uint32), 4)
    subnormal_results = _f32(rng.uniform(-103.98, -87.3, 2000))
    subnormal_inputs = rng.integers(1, 1 << 23, 200, dtype=np.uint64).astype(np.uint32)
    subnormal_inputs = np.concatenate([subnormal_inputs, subnormal_inputs | np.uint32(1 << 31)])
    return np.concatenate([n_edges, hi_edges, lo_edges, tiny, edges, subnormal_results,
                           subnormal_inputs]).astype(np.uint32)


def exp_vectors(rng, n_random):
    return np.concatenate([vectors(rng, n_random), exp_directed(rng)])


def _check(name, inputs, got, expected):
    board = Scoreboard(name, np.asarray(expected, np.uint32), {"a": inputs})
    board.check_all(got)
    assert board.passed, board.summary()


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("function", ["rcp", "rsqrt"])
def test_golden_matches_mpfr(function, numerics, rng):
    inputs = vectors(rng, 200_000 if numerics == "ieee" else 50_000)
    got = transcendental.apply(function, inputs, numerics=numerics)
    _check(f"{function}/{numerics} vs MPFR", inputs, got,
           oracle.apply(oracle.MPFR, function, inputs, numerics))


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("function", ["rcp", "rsqrt"])
def test_golden_matches_exact_integers(function, numerics, rng):
    inputs = vectors(rng, 50_000)
    got = transcendental.apply(function, inputs, numerics=numerics)
    _check(f"{function}/{numerics} vs exact integers", inputs, got,
           oracle.apply(oracle.EXACT, function, inputs, numerics))


@pytest.mark.parametrize("function", ["rcp", "rsqrt"])
def test_exact_oracle_agrees_with_mpfr(function, rng):
    """The integer oracle (what the exhaustive run can afford) spot-checked against gmpy2."""
    inputs = np.concatenate([directed(), rng.integers(0, 1 << 32, 20_000, dtype=np.uint64)
                             .astype(np.uint32)])
    for numerics in NUMERICS:
        _check(f"exact {function}/{numerics} vs MPFR", inputs,
               np.array(oracle.apply(oracle.EXACT, function, inputs, numerics), np.uint32),
               oracle.apply(oracle.MPFR, function, inputs, numerics))


def _exp_ulp_error(bits, got, numerics):
    """Error of one golden exp result in ULPs of the exact value (MPFR, 160 bits), or None
    where an error means nothing: NaN, a correct 0 or inf, and the "tpu" flush zone."""
    if numerics == "tpu" and bits & 0x7F800000 == 0:
        bits &= 0x80000000
    x = oracle._value(bits)
    if math.isnan(x) or got == oracle.QNAN:
        return None
    with gmpy2.context(precision=160):
        y = gmpy2.exp(gmpy2.mpfr(x))
        big, small = gmpy2.mpfr(2) ** 128, gmpy2.mpfr(2) ** -126
        if (y >= big and got == oracle.INF) or (y < small / 2 ** 24 and got == 0):
            return None
        if numerics == "tpu" and y < small:
            return None
        mantissa, exponent = y.as_mantissa_exp()
        ulp = gmpy2.mpfr(2) ** (max(int(mantissa).bit_length() - 1 + exponent, -126) - 23)
        value = big if got == oracle.INF else gmpy2.mpfr(oracle._value(got))
        return float(abs(value - y) / ulp)


@pytest.mark.parametrize("numerics", NUMERICS)
def test_golden_exp_is_its_algorithm(numerics, rng):
    """Bit for bit against the documented algorithm restated on Python integers, with tables
    made by MPFR (catches the golden's uint64 arithmetic, not the algorithm's accuracy)."""
    inputs = exp_vectors(rng, 40_000)
    got = transcendental.exp(inputs, numerics=numerics)
    _check(f"exp/{numerics} vs its algorithm", inputs, got,
           oracle.apply(oracle.ALGORITHM, "exp", inputs, numerics))


@pytest.mark.parametrize("numerics", NUMERICS)
def test_golden_exp_is_faithful(numerics, rng):
    """Within EXP_BOUND ULP of the exact exp (MPFR) and at most one ULP from the correctly
    rounded result, which it equals in the "tpu" flush zone; and mostly correctly rounded."""
    inputs = exp_vectors(rng, 30_000)
    got = transcendental.exp(inputs, numerics=numerics)
    rounded = np.array(oracle.apply(oracle.MPFR, "exp", inputs, numerics), np.uint32)
    worst, differ = 0.0, 0
    for x, g, r in zip(inputs.tolist(), got.tolist(), rounded.tolist()):
        error = _exp_ulp_error(x, g, numerics)
        if error is None:
            assert g == r, f"exp({x:#010x})/{numerics} = {g:#010x}, correctly rounded {r:#010x}"
            continue
        assert error <= EXP_BOUND, f"exp({x:#010x})/{numerics} = {g:#010x}: {error:.4f} ULP"
        assert abs(g - r) <= 1, f"exp({x:#010x})/{numerics} = {g:#010x}, not next to {r:#010x}"
        worst, differ = max(worst, error), differ + (g != r)
    assert worst > 0.5, "no input was rounded the wrong way: the corpus misses the hard cases"
    assert differ < 0.01 * inputs.size, f"{differ} of {inputs.size} not correctly rounded"


def test_exp_tables_match_mpfr():
    """The golden's decimal tables against the same rounding done by MPFR at 200 bits."""
    assert transcendental.exp_tables() == oracle.HARDWARE_EXP_CONSTANTS


def test_exp_datapath_stays_in_range(rng):
    """S = 2**f with 31 fraction bits lies in [2**31, 2**32), so the RTL's 32-bit datapath holds it.

    S grows with each table entry (both tables increase) and with f3, so its
    largest value is at f1 = f2 = 255, f3 = 0xFFFF; recomputed here from the
    tables with the algorithm's roundings."""
    t = transcendental.exp_tables()
    hi, lo, y = t["hi"][255], t["lo"][255], (0xFFFF * t["ln2"]) >> 16
    p = hi + ((hi * lo + (1 << 31)) >> 32)
    assert p + ((p * y + (1 << 47)) >> 48) < 1 << 32
    assert list(t["hi"]) == sorted(t["hi"]) and list(t["lo"]) == sorted(t["lo"])
    s, _ = transcendental.exp_fixed_point(exp_vectors(rng, 10_000) & np.uint32(0xC2FFFFFF))
    assert s.min() >= 1 << 31 and s.max() < 1 << 32


@pytest.mark.parametrize("numerics", NUMERICS)
def test_correctly_rounded_exp_oracle_agrees_with_mpfr(numerics, rng):
    """The vectorized oracle the exhaustive audit measures against, spot-checked on gmpy2."""
    inputs = exp_vectors(rng, 20_000)
    _check(f"exp_correctly_rounded/{numerics} vs MPFR", inputs,
           oracle.exp_correctly_rounded(inputs, numerics),
           oracle.apply(oracle.MPFR, "exp", inputs, numerics))


# Worked out from IEEE 754 and SPEC section 3 by hand: input -> (ieee, tpu).
HAND_CHECKED = {
    "rcp": {
        0x00000000: (0x7F800000, 0x7F800000), 0x80000000: (0xFF800000, 0xFF800000),
        0x7F800000: (0x00000000, 0x00000000), 0xFF800000: (0x80000000, 0x80000000),
        0x7F800001: (0x7FC00000, 0x7FC00000), 0xFFC12345: (0x7FC00000, 0x7FC00000),
        0x40000000: (0x3F000000, 0x3F000000), 0xC0800000: (0xBE800000, 0xBE800000),
        0x3F800000: (0x3F800000, 0x3F800000),
        0x40400000: (0x3EAAAAAB, 0x3EAAAAAB),                     # 1/3 rounds up
        0x7F000000: (0x00400000, 0x00000000),                     # 2**-127: subnormal
        0x7E800000: (0x00800000, 0x00800000),                     # 2**-126
        0x00400000: (0x7F000000, 0x7F800000),                     # 1/2**-127 = 2**127
        0x80000001: (0xFF800000, 0xFF800000),                     # -2**149 overflows
    },
    "rsqrt": {
        0x00000000: (0x7F800000, 0x7F800000), 0x80000000: (0xFF800000, 0xFF800000),
        0x7F800000: (0x00000000, 0x00000000), 0xFF800000: (0x7FC00000, 0x7FC00000),
        0xBF800000: (0x7FC00000, 0x7FC00000), 0x7FA00000: (0x7FC00000, 0x7FC00000),
        0x80000001: (0x7FC00000, 0xFF800000),                     # -subnormal: NaN, or -0
        0x40800000: (0x3F000000, 0x3F000000), 0x3E800000: (0x40000000, 0x40000000),
        0x00000001: (0x64B504F3, 0x7F800000),                     # 2**74.5
        0x40000000: (0x3F3504F3, 0x3F3504F3),                     # 1/sqrt(2)
    },
    "exp": {
        0x00000000: (0x3F800000, 0x3F800000), 0x80000000: (0x3F800000, 0x3F800000),
        0x7F800000: (0x7F800000, 0x7F800000), 0xFF800000: (0x00000000, 0x00000000),
        0x7FC00001: (0x7FC00000, 0x7FC00000), 0x00000001: (0x3F800000, 0x3F800000),
        0x3F800000: (0x402DF854, 0x402DF854),                     # e
        0x42C80000: (0x7F800000, 0x7F800000),                     # exp(100) overflows
        0xC2C80000: (0x0000001B, 0x00000000),                     # exp(-100) = 3.72e-44
        0xC3000000: (0x00000000, 0x00000000),                     # exp(-128) underflows
    },
}


@pytest.mark.parametrize("function", FUNCTIONS)
def test_hand_checked_cases(function):
    for x, (ieee, tpu) in HAND_CHECKED[function].items():
        for numerics, want in (("ieee", ieee), ("tpu", tpu)):
            got = int(transcendental.apply(function, np.uint32(x), numerics=numerics))
            assert got == want, f"{function}({x:#010x})/{numerics} = {got:#010x}, want {want:#010x}"


def test_hardest_rsqrt_input():
    """0x403A18E3: 1/sqrt(x) lies 2**-28.5 ULP below a rounding midpoint, so it rounds down."""
    with gmpy2.context(precision=200):
        x = gmpy2.mpfr(float(np.uint32(HARDEST_RSQRT).view(np.float32)))
        ulps = gmpy2.rec_sqrt(x) * 2 ** 24                  # result in [0.5, 1): ULP 2**-24
        below_midpoint = gmpy2.floor(ulps) + gmpy2.mpfr("0.5") - ulps
        assert 0 < below_midpoint < gmpy2.mpfr(2) ** -28
        want = (126 << 23) | (int(gmpy2.floor(ulps)) - (1 << 23))
    assert want == 0x3F16209E
    for numerics in NUMERICS:
        assert int(transcendental.rsqrt(np.uint32(HARDEST_RSQRT), numerics=numerics)) == want


def test_exp_oracle_settles_near_midpoints_exactly(monkeypatch):
    calls = []
    settle = oracle._exp_hard
    monkeypatch.setattr(oracle, "_exp_hard", lambda *a: calls.append(a) or settle(*a))
    x = np.array(EXP_NEAR_MIDPOINT, np.uint32)
    got = oracle.exp_correctly_rounded(x, "ieee")
    assert len(calls) == x.size
    np.testing.assert_array_equal(got, oracle.apply(oracle.MPFR, "exp", x, "ieee"))
    # Too few digits to decide: an error, not a guess.
    monkeypatch.setattr(oracle, "_EXP_DIGITS", 8)
    with pytest.raises(RuntimeError, match="too close to a rounding midpoint"):
        oracle.exp_correctly_rounded(x[:1], "ieee")


def test_exp_audit_measures_and_can_fail(monkeypatch):
    """The exhaustive audit on a slice around 1.0 (n = 0 and n = -1, both table indices)."""
    lines = []
    ranges = ((0x3F7F0000, 0x3F810000), (0xBF7F8000, 0xBF808000))
    stats = audit_exp("ieee", ranges, chunk=1 << 16, report=lines.append)
    assert stats["checked"] == 0x30000 and not exp_failed(stats), lines
    assert 0.5 < stats["max_ulp"] <= EXP_BOUND and stats["not_correctly_rounded"] > 0, lines
    exact = transcendental.exp

    def two_ulps_off_once(a, numerics):
        return exact(a, numerics=numerics) + 2 * np.uint32(a == 0x3F800100)
    monkeypatch.setattr(transcendental, "exp", two_ulps_off_once)
    stats = audit_exp("ieee", ranges, chunk=1 << 16, report=lines.append)
    assert exp_failed(stats) and stats["max_steps"] >= 1 and stats["max_ulp"] > 1, lines


def test_composed_rsqrt_would_fail(rng):
    """The trap: rcp(sqrt(x)), both correctly rounded, differs on about 26% of significands,
    so the corpus above would catch an RTL that composes them."""
    x = corpus.random_values(rng, FP32, 100_000) & np.uint32(0x7FFFFFFF)
    x = x[(x >= 0x00800000) & (x < 0x7F800000)]
    composed = (np.float32(1) / np.sqrt(x.view(np.float32))).view(np.uint32)
    share = np.mean(composed != transcendental.rsqrt(x, numerics="ieee"))
    assert 0.2 < share < 0.32, share


@pytest.mark.parametrize("function, start, stop", [
    ("rcp", 0x3F800000, 0x40000000),         # [1, 2): every significand
    ("rsqrt", 0x3F800000, 0x40800000),       # [1, 4): every significand, both exponent parities
])
def test_every_significand(function, start, stop):
    """Scaling by 2 (rcp) or 4 (rsqrt) scales a normal result exactly, so these ranges hold
    every rounding decision of a normal result. An extended-precision estimate checks each;
    the exact-integer oracle decides wherever it is within 2**-30 ULP of a midpoint."""
    lines = []
    assert not audit(function, "ieee", start, stop, chunk=1 << 18, report=lines.append), lines


def test_rcp_equals_ieee_division_where_numpy_agrees(rng):
    """A third opinion: numpy float32 division is correctly rounded too (ieee, no NaN)."""
    x = corpus.random_values(rng, FP32, 100_000)
    x = x[(x & 0x7FFFFFFF) <= 0x7F800000]
    with np.errstate(all="ignore"):
        want = (np.float32(1) / x.view(np.float32)).view(np.uint32)
    np.testing.assert_array_equal(transcendental.rcp(x, numerics="ieee"), want)


def test_inputs_are_not_modified_and_shapes_kept():
    x = np.array([[0x3F800000, 0x00000001], [0x7FC00001, 0x40000000]], np.uint32)
    before = x.copy()
    for function in FUNCTIONS:
        for numerics in NUMERICS:
            out = transcendental.apply(function, x, numerics=numerics)
            assert out.shape == x.shape and out.dtype == np.uint32
    np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(transcendental.rcp(np.float32([2.0, 4.0])),
                                  np.float32([0.5, 0.25]).view(np.uint32))


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="uint32"):
        transcendental.rcp(np.array([1.0]))
    with pytest.raises(ValueError, match="numerics"):
        transcendental.exp(np.uint32(0), numerics="fast")
    with pytest.raises(ValueError, match="function"):
        transcendental.apply("sqrt", np.uint32(0))


def test_exhaustive_check_reports_mismatches():
    start, stop = 0x3F7FFF00, 0x3F800100
    clean = transcendental.exhaustive_check(
        "rsqrt", "tpu", lambda x: transcendental.rsqrt(x, numerics="tpu"),
        start=start, stop=stop, chunk=100)
    assert clean.passed and clean.checked == stop - start and clean.mismatch_count == 0

    def broken(x):
        out = transcendental.rsqrt(x, numerics="tpu")
        return np.where(x == 0x3F800000, out ^ 1, out)
    seen = []
    report = transcendental.exhaustive_check("rsqrt", "tpu", broken, start=start, stop=stop,
                                             chunk=100, progress=lambda d, t: seen.append(d))
    assert not report.passed and report.mismatch_count == 1
    assert report.mismatches == [(0x3F800000, 0x3F800000, 0x3F800001)]
    assert seen[-1] == stop - start
    with pytest.raises(ValueError, match="start"):
        transcendental.exhaustive_check("exp", "ieee", start=5, stop=1 << 33)
    with pytest.raises(ValueError, match="function"):
        transcendental.exhaustive_check("log", "ieee")
