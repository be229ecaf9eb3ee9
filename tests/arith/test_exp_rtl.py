# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct components whose __init__ raises.)
"""The RTL fp32 exp equals golden.transcendental.exp bit for bit, at every depth and under stalls.

golden's exp is the datapath's model, held to the exact exp by
tests/vpu/test_transcendental.py; here the RTL is also spot-checked against
the algorithm restated on integers and against MPFR (at most one ULP from
the correctly rounded result), so a shared mistake in golden would show.
"""

import functools
import time

import numpy as np
import pytest
from amaranth.back import rtlil

from golden import transcendental
from golden.formats import FP32, NUMERICS
from hdl.arith import FP32Exp
from hdl.arith.fp32_exp import MAX_STAGES, exp_tables
from sim import arith
from sim.arith import stream_through
from sim.backends.amaranth_sim import simulate
from sim.verilog.export import export
from sim.verilog.lint import lint
from verif.scoreboard import Scoreboard
from verif.suites.arith import corpus

from .stream_timing import check_latency_and_rate, run_with_backpressure
from ..vpu import oracle_transcendental as oracle
from ..vpu.test_transcendental import SPECIALS, exp_directed, vectors


def exp_inputs(rng, n_random):
    """Specials, boundaries and the TestFloat corpus; exp's own edges; random patterns, half of
    them in the range where the result is neither 1, inf nor 0."""
    nontrivial = np.concatenate([rng.integers(0x32000000, 0x42B20000, n_random // 4,
                                              dtype=np.uint64),
                                 rng.integers(0xB2000000, 0xC2D00000, n_random // 4,
                                              dtype=np.uint64)]).astype(np.uint32)
    return np.concatenate([vectors(rng, n_random // 2), exp_directed(rng), nontrivial])


def _check(name, inputs, got, numerics):
    board = Scoreboard(name, transcendental.exp(inputs, numerics=numerics), {"a": inputs})
    board.check_all(np.asarray(got, np.uint32))
    assert board.passed, board.summary()


def run(dut, inputs):
    """Stream ``inputs`` through ``dut`` at full rate; its results as uint32."""
    return np.array(simulate(dut, functools.partial(stream_through, beats=inputs.tolist())),
                    np.uint32)


def test_tables_match_golden():
    """The RTL restates golden's table generator (hdl may not import golden)."""
    assert exp_tables() == transcendental.exp_tables()


@pytest.mark.parametrize("numerics", NUMERICS)
def test_rtl_matches_golden(numerics, rng):
    """Amaranth: the specials and a sample of the rest (the Verilator test below runs it all)."""
    inputs = np.concatenate([np.array(SPECIALS, np.uint32),
                             rng.permutation(exp_inputs(rng, 2000))[:3000]])
    _check(f"rtl exp/{numerics}", inputs, arith.fp32_exp(inputs, numerics=numerics), numerics)


# One numerics, as for the other units: a Verilator build costs about 15 s, and "ieee" holds
# the more logic (the subnormal shifter).
@pytest.mark.slow      # a build of its own (make test's budget); the Amaranth runs stay
@pytest.mark.parametrize("numerics", ["ieee"])
def test_rtl_matches_golden_on_verilator(numerics, rng):
    inputs = exp_inputs(rng, 60_000)
    got = arith.fp32_exp(inputs, numerics=numerics, backend="verilator")
    _check(f"verilator exp/{numerics}", inputs, got, numerics)


def test_rtl_against_independent_oracles(rng):
    """A sample against the algorithm on integers (bit for bit) and MPFR (within one ULP)."""
    inputs = rng.permutation(exp_inputs(rng, 400))[:1500]
    for numerics in NUMERICS:
        got = arith.fp32_exp(inputs, numerics=numerics)
        np.testing.assert_array_equal(
            got, oracle.apply(oracle.ALGORITHM, "exp", inputs, numerics), err_msg=numerics)
        rounded = np.array(oracle.apply(oracle.MPFR, "exp", inputs, numerics), np.int64)
        far = np.flatnonzero(np.abs(got.astype(np.int64) - rounded) > 1)
        assert far.size == 0, [(hex(inputs[i]), hex(got[i]), hex(rounded[i])) for i in far[:5]]


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("stages", range(1, MAX_STAGES + 1))
def test_every_pipeline_depth_matches_golden(stages, numerics, rng):
    inputs = rng.permutation(exp_inputs(rng, 200))[:150]
    dut = FP32Exp(numerics=numerics, stages=stages)
    assert dut.latency == stages
    _check(f"exp/{numerics}/stages={stages}", inputs,
           run(dut, inputs), numerics)


def test_latency_and_back_to_back_rate(rng):
    """One result exactly ``latency`` cycles after its operand; then one per cycle."""
    dut = FP32Exp(numerics="ieee")
    inputs = rng.permutation(exp_inputs(rng, 100))[:64]
    assert dut.latency == 6
    _check("exp latency", inputs, check_latency_and_rate(dut, inputs.tolist()), "ieee")


@pytest.mark.parametrize("idle, stall", [(0.0, 0.5), (0.4, 0.6)])
def test_backpressure_loses_nothing(idle, stall, rng):
    dut = FP32Exp(numerics="tpu", stages=4)
    inputs = rng.permutation(exp_inputs(rng, 300))[:400]
    results = run_with_backpressure(dut, inputs.tolist(), rng, idle=idle, stall=stall)
    _check("exp backpressure", inputs, results, "tpu")


@pytest.mark.parametrize("numerics", NUMERICS)
def test_exports_to_rtlil_and_lint_clean_verilog(numerics):
    text = rtlil.convert(FP32Exp(numerics=numerics), name="fp32_exp")
    assert "module \\fp32_exp" in text
    assert "exp_s15_result" in text
    assert "exp_s14_rounded" not in text, "the default depth rounds in the output stage"
    # Every stage: each product's partial products, their sum and each sum after it
    # has a register, and so have the table words twice and the subnormal shift.
    deep = rtlil.convert(FP32Exp(numerics=numerics, stages=MAX_STAGES), name="fp32_exp")
    for register in ("exp_s1_log2e0", "exp_s2_product_hi", "exp_s5_hi", "exp_s6_table_hi",
                     "exp_s7_hg0", "exp_s8_hg", "exp_s9_partial", "exp_s10_py3", "exp_s11_py",
                     "exp_s12_power", "exp_s14_rounded"):
        assert register in deep, register
    assert ("exp_s13_shifted" in deep) == (numerics == "ieee")
    if numerics == "ieee":      # the superset: "tpu" only lacks the subnormal shifter
        assert lint(export("fp32_exp", {"numerics": numerics}).verilog, "fp32_exp") == []


def test_bad_parameters_are_rejected():
    with pytest.raises(ValueError, match="numerics must be one of"):
        FP32Exp(numerics="IEEE")
    with pytest.raises(ValueError, match=f"stages must be between 1 and {MAX_STAGES}, not 0"):
        FP32Exp(stages=0)
    with pytest.raises(ValueError, match=f"stages must be between 1 and {MAX_STAGES}, not 17"):
        FP32Exp(stages=MAX_STAGES + 1)
    with pytest.raises(TypeError, match="stages must be an integer"):
        FP32Exp(stages=2.5)
    with pytest.raises(ValueError, match="fp32_exp: operand a must hold uint32 bit patterns"):
        arith.fp32_exp(np.zeros(2, np.float32))


def test_empty_and_shaped_inputs():
    assert arith.fp32_exp(np.zeros((0, 3), np.uint32)).shape == (0, 3)
    got = arith.fp32_exp(np.array([[0, 0x3F800000], [0xFF800000, 0x7F800000]], np.uint32),
                         numerics="ieee")
    assert got.tolist() == [[0x3F800000, 0x402DF854], [0, 0x7F800000]]


def soak(numerics, count, *, seed=0, chunk=100_000, backend="verilator"):
    """Check ``count`` random patterns on the RTL against golden; returns (checked, seconds).

    Outside the default suite. Example:
    ``python -c "from tests.arith.test_exp_rtl import soak; print(soak('ieee', 10**6))"``
    """
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    for start in range(0, count, chunk):
        inputs = corpus.random_values(rng, FP32, min(chunk, count - start))
        got = arith.fp32_exp(inputs, numerics=numerics, backend=backend)
        try:
            _check(f"soak exp/{numerics}", inputs, got, numerics)
        except AssertionError as error:
            raise AssertionError(f"soak exp/{numerics} seed {seed}: {error}") from None
    return count, time.perf_counter() - started
