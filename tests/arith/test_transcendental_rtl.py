# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct components whose __init__ raises.)
"""The RTL reciprocal and reciprocal square root are correctly rounded, bit for bit.

Expected values come from ``golden.transcendental`` (exact integer
arithmetic); an independent spot check holds the RTL to MPFR and to a
second exact-integer oracle (tests/vpu/oracle_transcendental.py), and a few
results are hand-checked constants. Stimulus: the golden tests' directed
corpus (specials, subnormals, boundaries, powers of two and neighbours,
the TestFloat operand corpus, the hardest rsqrt input 0x403A18E3 and its
neighbours), inputs whose results lie closest to a rounding midpoint
(found by an exact scan of every significand, checked here to be what
they claim), and seeded random inputs. :func:`soak` runs any number of
random inputs on Verilator outside the default suite;
``sim.exhaustive_unary.run_unary_exhaustive`` checks all 2^32.
"""

import functools
import math
import re
import time
from fractions import Fraction

import numpy as np
import pytest

from golden import arith as golden_arith
from golden import transcendental
from golden.formats import FP32, NUMERICS
from hdl.arith import FP32Rcp, FP32RcpCore, FP32Rsqrt, FP32RsqrtCore
from sim import arith
from sim.arith import stream_through
from sim.backends.amaranth_sim import simulate
from sim.verilog.export import export
from sim.verilog.lint import lint
from verif.scoreboard import Scoreboard
from verif.suites.arith import corpus

from .stream_timing import check_latency_and_rate, run_with_backpressure
from ..vpu import oracle_transcendental as oracle
from ..vpu.test_transcendental import HAND_CHECKED, HARDEST_RSQRT, directed

FUNCTIONS = ("rcp", "rsqrt")
UNITS = {"rcp": FP32Rcp, "rsqrt": FP32Rsqrt}
CORES = {"rcp": FP32RcpCore, "rsqrt": FP32RsqrtCore}
MAX_STAGES = {"rcp": 30, "rsqrt": 53}
SIGN = np.uint32(0x80000000)

# The significands whose results lie closest to a rounding midpoint, from an
# exact scan of all 2^23 of them (both exponent parities for rsqrt): rsqrt
# within 2^-20.6 ULP (0x403A18E3 at 2^-28.5), rcp within 2^-24.7 ULP.
RSQRT_NEAR_MIDPOINT = [0x403A18E3, 0x4009F038, 0x407FFFFE, 0x407DE1E1, 0x407DBBAC, 0x401DD16A,
                       0x4042ED16, 0x3FBA2A39, 0x3FD2208F, 0x3FED3230, 0x3F8A5C86, 0x3FDAE942,
                       0x3FD19305, 0x3FA49C14]
RCP_NEAR_MIDPOINT = [0x3FFFFFFF, 0x3FFE01FF, 0x3FFC3237, 0x3FF0FF0F, 0x3FF02A3B, 0x3FF00FF1,
                     0x3FEE4BC5, 0x3FEC7EC7]
# (inputs, scale step in binades, largest biased exponent with a normal result)
NEAR_MIDPOINT = {"rsqrt": (RSQRT_NEAR_MIDPOINT, 2, 254), "rcp": (RCP_NEAR_MIDPOINT, 1, 252)}


# --- stimulus -----------------------------------------------------------------------------

def near_midpoints(function, rng, n):
    """The listed near-midpoint inputs scaled by random powers of 4 (rsqrt) or 2 (rcp),
    which scale the result exactly: every exponent whose result is normal (and for rcp
    both signs)."""
    base, step, top = NEAR_MIDPOINT[function]
    picks = np.array(base, np.int64)[rng.integers(0, len(base), n)]
    exp = (picks >> 23) & 0xFF
    shift = step * rng.integers(-((exp - 1) // step), (top - exp) // step + 1)
    sign = rng.integers(0, 2, n) << 31 if function == "rcp" else 0
    out = (picks + (shift << 23)) | sign
    return np.concatenate([np.array(base, np.uint32), out.astype(np.uint32)])


def random_inputs(function, rng, n):
    """Weighted random patterns; for rsqrt seven in eight made positive (negatives are NaN)."""
    x = corpus.random_values(rng, FP32, n)
    if function == "rsqrt":
        x = np.where(rng.random(n) < 7 / 8, x & ~SIGN, x)
    return x.astype(np.uint32)


def vectors(function, rng, n_random, *, n_directed=None):
    """Directed corpus (all of it, or a random ``n_directed`` of it), hand-checked inputs,
    near-midpoint inputs, then random ones."""
    fixed = directed()
    if n_directed is not None:
        fixed = rng.permutation(fixed)[:n_directed]
    hand = np.array(list(HAND_CHECKED[function]), np.uint32)
    return np.concatenate([hand, fixed, near_midpoints(function, rng, 200),
                           random_inputs(function, rng, n_random)]).astype(np.uint32)


# --- running and checking -----------------------------------------------------------------

def run(function, numerics, x, **params):
    """Stream ``x`` through a freshly built unit at full rate; its results as uint32."""
    dut = UNITS[function](numerics=numerics, **params)
    return np.array(simulate(dut, functools.partial(stream_through, beats=x.tolist())), np.uint32)


def check(name, x, got, expected):
    board = Scoreboard(name, np.asarray(expected, np.uint32), {"a": x})
    board.check_all(got)
    assert board.passed, board.summary()


def check_golden(function, numerics, x, got):
    check(f"rtl {function}/{numerics}", x, got, transcendental.apply(function, x, numerics=numerics))


# --- the stimulus is what it claims -------------------------------------------------------

def _significand(bits):
    exp, frac = (int(bits) >> 23) & 0xFF, int(bits) & 0x7FFFFF
    return frac | 1 << 23, exp


def _midpoint_distance(function, bits):
    """An upper bound, in result ULPs, on the distance of a normal input's result from the
    nearest rounding midpoint, by exact integers.

    rcp: 1/x is 2^47/S scaled by a power of 2, with S the 24-bit significand and 2^47/S
    in (2^23, 2^24], so the midpoints are where 2^48/S is odd. rsqrt: 1/sqrt(x) is
    z = sqrt(2^N / S), N = 73 (even unbiased exponent) or 72, scaled; z/2 is in
    (2^23, 2^24], so the midpoints are where z is odd, and for an odd c,
    |z - c| = |2^N - S c^2| / (S (z + c)) <= |2^N - S c^2| / (S (2c - 1)).
    """
    s, exp = _significand(bits)
    if function == "rcp":
        q = (1 << 48) // s
        return min(Fraction(abs((1 << 48) - s * c), 2 * s) for c in (q - 1, q, q + 1) if c % 2)
    n = 73 if (exp - 127) % 2 == 0 else 72
    root = math.isqrt((1 << n) // s)
    return min(Fraction(abs((1 << n) - s * c * c), 2 * s * (2 * c - 1))
               for c in (root - 1, root, root + 1, root + 2) if c % 2)


@pytest.mark.parametrize("function, bound", [("rsqrt", -20), ("rcp", -24)])
def test_near_midpoint_inputs_are_near_midpoints(function, bound, rng):
    for x in near_midpoints(function, rng, 100):
        assert _midpoint_distance(function, x) < Fraction(2) ** bound, f"{function}({x:#010x})"
    assert _midpoint_distance("rsqrt", HARDEST_RSQRT) < Fraction(2) ** -28


@pytest.mark.parametrize("numerics", NUMERICS)
def test_reciprocal_is_a_division_of_one(numerics, rng):
    """Why FP32Rcp is the divider with the dividend 1.0: the golden reciprocal equals the
    golden division 1.0 / x (one-off check: all 2^32 inputs, both numerics; here a sample)."""
    subnormals = rng.integers(0, 1 << 23, 20_000) | rng.integers(0, 2, 20_000) << 31
    x = np.concatenate([directed(), near_midpoints("rcp", rng, 2000), subnormals.astype(np.uint32),
                        corpus.random_values(rng, FP32, 100_000)])
    one = np.full(x.shape, 0x3F800000, np.uint32)
    np.testing.assert_array_equal(transcendental.rcp(x, numerics=numerics),
                                  golden_arith.fp32_div(one, x, numerics=numerics))


# --- against golden -----------------------------------------------------------------------

@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("function", FUNCTIONS)
def test_rtl_matches_golden(function, numerics, rng):
    x = vectors(function, rng, n_random=600, n_directed=1000)
    check_golden(function, numerics, x,
                 getattr(arith, f"fp32_{function}")(x, numerics=numerics))


# One numerics each (the Amaranth runs cover both); every directed input and more random ones.
# Both in make test-slow: a build each (make test's budget).
@pytest.mark.parametrize("function, numerics", [
    pytest.param("rsqrt", "ieee", marks=pytest.mark.slow),
    pytest.param("rcp", "tpu", marks=pytest.mark.slow)])
def test_rtl_matches_golden_on_verilator(function, numerics, rng):
    x = vectors(function, rng, n_random=20_000)
    check_golden(function, numerics, x,
                 getattr(arith, f"fp32_{function}")(x, numerics=numerics, backend="verilator"))


@pytest.mark.parametrize("function", FUNCTIONS)
def test_rtl_matches_independent_oracles(function, rng):
    """MPFR (gmpy2, binary32 context) and exact integers, not golden; plus hand-checked values."""
    x = np.concatenate([np.array(list(HAND_CHECKED[function]), np.uint32),
                        near_midpoints(function, rng, 50), rng.permutation(directed())[:300],
                        random_inputs(function, rng, 300)])
    for numerics in NUMERICS:
        got = getattr(arith, f"fp32_{function}")(x, numerics=numerics)
        for name, table in (("MPFR", oracle.MPFR), ("exact", oracle.EXACT)):
            check(f"rtl {function}/{numerics} vs {name}", x, got,
                  oracle.apply(table, function, x, numerics))
        hand = HAND_CHECKED[function]
        want = [hand[int(v)][numerics == "tpu"] for v in x[:len(hand)]]
        check(f"rtl {function}/{numerics} vs hand-checked", x[:len(hand)], got[:len(hand)], want)


def test_hardest_rsqrt_input_rounds_down():
    """0x403A18E3: 2^-28.5 ULP below a midpoint; 0x3F16209E by MPFR at 200 bits
    (tests/vpu/test_transcendental.py::test_hardest_rsqrt_input)."""
    for numerics in NUMERICS:
        assert run("rsqrt", numerics, np.array([HARDEST_RSQRT], np.uint32)).tolist() == [0x3F16209E]


# --- pipeline depths, timing, backpressure ------------------------------------------------

# The extremes and a depth in between. The cut placement depends on the
# numerics, so each depth runs in both. The combinational stages=1 datapath
# is slow to simulate, hence few inputs.
@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("function, stages", [("rsqrt", 1), ("rsqrt", 2), ("rsqrt", 19),
                                              ("rsqrt", 53), ("rcp", 1), ("rcp", 30)])
def test_every_pipeline_depth_matches_golden(function, stages, numerics, rng):
    x = rng.permutation(vectors(function, rng, n_random=100, n_directed=200))[:24]
    x = np.concatenate([np.array([HARDEST_RSQRT, 0x3F800000, 0x00000001], np.uint32), x])
    dut = UNITS[function](numerics=numerics, stages=stages)
    assert dut.latency == stages
    got = simulate(dut, functools.partial(stream_through, beats=x.tolist()))
    check_golden(function, numerics, x, np.array(got, np.uint32))


@pytest.mark.parametrize("function", FUNCTIONS)
def test_latency_and_back_to_back_rate(function, rng):
    """One result exactly ``latency`` cycles after its operand; then one per cycle."""
    dut = UNITS[function](numerics="ieee")
    x = vectors(function, rng, n_random=64, n_directed=0)[-64:]
    assert dut.latency == {"rcp": 16, "rsqrt": 27}[function]
    results = check_latency_and_rate(dut, x.tolist())
    check_golden(function, "ieee", x, np.array(results, np.uint32))


@pytest.mark.parametrize("function", FUNCTIONS)
def test_backpressure_loses_nothing(function, rng):
    dut = UNITS[function](numerics="tpu", stages=9)
    x = vectors(function, rng, n_random=300, n_directed=0)[-300:]
    results = run_with_backpressure(dut, x.tolist(), rng, idle=0.3, stall=0.4)
    check_golden(function, "tpu", x, np.array(results, np.uint32))


# --- export and parameters ----------------------------------------------------------------

@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("function, register", [("rsqrt", "rsqrt_s52_result"),
                                                ("rcp", "div_s29_result")])
def test_exports_lint_clean_verilog(function, register, numerics):
    """Through the block catalogue, as `tpu-rtl export fp32_rsqrt` does."""
    block = f"fp32_{function}"
    text = export(block, {"numerics": numerics}).verilog
    assert re.search(rf"^module\s+{block}\b", text, re.M)
    assert register in text
    assert lint(text, block) == []


@pytest.mark.parametrize("function", FUNCTIONS)
def test_bad_parameters_are_rejected(function):
    top = MAX_STAGES[function]
    for unit in (UNITS[function], CORES[function]):
        with pytest.raises(ValueError, match="numerics must be one of"):
            unit(numerics="IEEE")
        with pytest.raises(ValueError, match=f"stages must be between 1 and {top}, not 0"):
            unit(stages=0)
        with pytest.raises(ValueError, match=f"stages must be between 1 and {top}, not {top + 1}"):
            unit(stages=top + 1)
        with pytest.raises(TypeError, match="stages must be an integer"):
            unit(stages=2.5)
        with pytest.raises(TypeError):
            unit("ieee")                                     # keyword-only


@pytest.mark.parametrize("call, message", [
    (lambda: arith.fp32_rsqrt(np.zeros(2, np.float32)),
     "fp32_rsqrt: operand a must hold uint32 bit patterns, not float32"),
    (lambda: arith.fp32_rcp([1, 2]),
     "fp32_rcp: operand a must be a numpy array of uint32 bit patterns, not list"),
    (lambda: arith.fp32_rcp(np.zeros(2, np.uint32), numerics="ftz"),
     "numerics must be one of 'tpu', 'ieee', not 'ftz'"),
])
def test_bad_input_is_a_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_runners_keep_the_shape():
    x = np.array([[0x40800000, 0x40000000], [0x00000000, 0x7F800000]], np.uint32)
    assert arith.fp32_rsqrt(x).tolist() == [[0x3F000000, 0x3F3504F3], [0x7F800000, 0]]
    assert arith.fp32_rcp(np.zeros((0, 3), np.uint32)).shape == (0, 3)


# --- longer runs, outside the default suite -----------------------------------------------

def soak(function, numerics, count, *, seed=0, backend="verilator", chunk=200_000):
    """Check ``count`` weighted random inputs of ``function`` on ``backend``; (checked, seconds).

    Raises AssertionError naming the seed and the first mismatch. Example:
    ``python -c "from tests.arith.test_transcendental_rtl import soak; print(soak('rsqrt', 'ieee', 10**6))"``
    """
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    for start in range(0, count, chunk):
        x = random_inputs(function, rng, min(chunk, count - start))
        got = getattr(arith, f"fp32_{function}")(x, numerics=numerics, backend=backend)
        try:
            check_golden(function, numerics, x, got)
        except AssertionError as error:
            raise AssertionError(f"soak {function}/{numerics} seed {seed}: {error}") from None
    return count, time.perf_counter() - started
