# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct components whose __init__ raises.)
"""The RTL arithmetic units equal golden bit for bit, and lose nothing under backpressure."""

import functools

import numpy as np
import pytest

from golden import arith as golden
from golden.formats import NUMERICS
from hdl.arith import BF16Multiplier, FP32Adder, FP32ToBF16
from sim import arith
from sim.backends.amaranth_sim import simulate
from sim.transactors import SimulationHang, StreamSink, StreamSource, run_transactors
from verif.suites.arith import corpus
from verif.suites.arith.suite import seed_operands
from verif.scoreboard import Scoreboard

OPS = ("fp32_add", "bf16_mul", "fp32_to_bf16", "fp32_mul", "fp32_div", "fp32_sqrt")
COMMUTATIVE = ("fp32_add", "bf16_mul", "fp32_mul")
MIN_VECTORS = 6_000
# The fp32 units are slow to simulate on Amaranth (the divider most; the adder's corpus is
# 6,000 pairs, 12,000 with the swaps): there they run a regression seed's stimulus, a sample
# of the corpus. The whole corpus runs on Verilator below, and the multiplier, divider and
# square root are checked against SoftFloat in test_fp32_mul_div_sqrt.py as well.
SAMPLED = ("fp32_add", "fp32_mul", "fp32_div", "fp32_sqrt")
#: The units test_fp32_mul_div_sqrt.py checks against SoftFloat in the default suite.
SOFTFLOAT_CHECKED = ("fp32_mul", "fp32_div", "fp32_sqrt")


def _swapped(op, operands):
    """For commutative ops every pair also appears swapped (a+b == b+a)."""
    if op not in COMMUTATIVE:
        return operands
    a, b = operands
    return np.concatenate([a, b]), np.concatenate([b, a])


def _vectors(op, rng, n_random):
    """Corpus operands, swapped too for commutative ops."""
    if op in corpus.UNARY_OPS:
        return (corpus.unary_corpus(op, rng, n_random),)
    return _swapped(op, corpus.binary_corpus(op, rng, n_random))


def _check(op, operands, got, numerics):
    expected = getattr(golden, op)(*operands, numerics=numerics)
    board = Scoreboard(f"rtl {op}/{numerics}", expected, dict(zip("ab", operands)))
    board.check_all(got)
    assert board.passed, board.summary()


# The units SoftFloat checks in the default suite run the regression's stimulus in
# make test-slow.
@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("op", [pytest.param(op, marks=pytest.mark.slow)
                                if op in SOFTFLOAT_CHECKED else op for op in OPS])
def test_rtl_matches_golden(op, numerics, rng):
    if op in SAMPLED:
        operands = _swapped(op, seed_operands(op, rng, n_corpus=1500, n_random=1000))
        assert operands[0].size >= 2_500
    else:
        unary = op == "fp32_to_bf16"
        operands = _vectors(op, rng, n_random=MIN_VECTORS if unary else MIN_VECTORS // 2)
        assert operands[0].size >= MIN_VECTORS
    got = getattr(arith, op)(*operands, numerics=numerics)
    if op in COMMUTATIVE:       # first, so an order-dependent RTL says so by name
        half = operands[0].size // 2
        np.testing.assert_array_equal(got[:half], got[half:],
                                      err_msg=f"{op}(a, b) != {op}(b, a) bitwise")
    _check(op, operands, got, numerics)


# The whole corpus, one numerics each (the Amaranth runs above take both on a sample); one
# unit in the default suite, the others in make test-slow (its budget: a build each).
@pytest.mark.parametrize("op, numerics", [
    ("fp32_add", "ieee"), pytest.param("fp32_mul", "ieee", marks=pytest.mark.slow),
    pytest.param("fp32_div", "tpu", marks=pytest.mark.slow),
    pytest.param("fp32_sqrt", "ieee", marks=pytest.mark.slow)])
def test_rtl_matches_golden_on_verilator(op, numerics, rng):
    operands = _vectors(op, rng, n_random=2_000)
    got = getattr(arith, op)(*operands, numerics=numerics, backend="verilator")
    _check(op, operands, got, numerics)


@pytest.mark.parametrize("numerics", NUMERICS)
# The shallowest and the deepest pipelines in the default suite; the ones between are slow.
@pytest.mark.parametrize("component, op, stages", [
    *((FP32Adder, "fp32_add", s) for s in (1, 6)),
    pytest.param(FP32Adder, "fp32_add", 4, marks=pytest.mark.slow),
    *((BF16Multiplier, "bf16_mul", s) for s in (1, 5)),
    pytest.param(BF16Multiplier, "bf16_mul", 3, marks=pytest.mark.slow),
    (FP32ToBF16, "fp32_to_bf16", 2),
])
def test_every_pipeline_depth_matches_golden(component, op, stages, numerics, rng):
    # A sample of the corpus: the default depth runs the whole of it (above).
    operands = seed_operands(op, rng, n_corpus=600, n_random=300)
    unit = arith.UNITS[op]
    dut = component(numerics=numerics, stages=stages)
    assert dut.latency == stages
    results = simulate(dut, functools.partial(arith.stream_through, beats=unit.pack(operands)))
    _check(op, operands, np.array(results, unit.result), numerics)


async def _with_gaps(bench, *, beats, rng, idle, stall, latency):
    sink = StreamSink("result", len(beats), stall=lambda: rng.random() < stall)
    source = StreamSource("operands", beats, idle=lambda: rng.random() < idle)
    await run_transactors(bench, [source, sink])
    # Nothing may follow the last result: a duplicate would show up here.
    extra = []
    for _ in range(2 * latency + 4):
        valid, = await bench.cycle({"result.ready": 1, "operands.valid": 0}, ("result.valid",))
        extra.append(valid)
    return sink.beats, extra


@pytest.mark.parametrize("idle, stall", [(0.0, 0.5), (0.5, 0.0), (0.3, 0.7), (0.7, 0.3)])
def test_backpressure_loses_nothing(idle, stall, rng):
    operands = _vectors("fp32_add", rng, n_random=200)
    operands = tuple(x[:1500] for x in operands)
    dut = FP32Adder(numerics="ieee", stages=4)
    beats = arith.UNITS["fp32_add"].pack(operands)
    results, extra = simulate(dut, functools.partial(
        _with_gaps, beats=beats, rng=rng, idle=idle, stall=stall, latency=dut.latency))
    assert len(results) == len(beats)
    assert not any(extra), "a result was delivered twice"
    _check("fp32_add", operands, np.array(results, np.uint32), "ieee")


def test_watchdog_names_the_stuck_stream():
    async def never_ready(bench):
        sink = StreamSink("result", 3, stall=lambda: True)
        await run_transactors(bench, [StreamSource("operands", [1, 2, 3]), sink], watchdog=50)

    with pytest.raises(SimulationHang, match=r"result: received 0/3"):
        simulate(FP32Adder(), never_ready)


def test_waves_on_request(tmp_path):
    path = tmp_path / "add.vcd"
    arith.fp32_add(np.array([1, 2], np.uint32), np.array([3, 4], np.uint32), waves=path)
    assert b"$enddefinitions" in path.read_bytes()
    # A folder that does not exist is a mistake, refused before the run: nothing is made.
    with pytest.raises(ValueError, match="no folder"):
        arith.fp32_add(np.array([1], np.uint32), np.array([3], np.uint32),
                       waves=tmp_path / "waves" / "add.vcd")
    assert not (tmp_path / "waves").exists()


@pytest.mark.parametrize("call, message", [
    (lambda: arith.fp32_add(np.zeros(2, np.uint32), np.zeros(2, np.uint16)),
     "operand b must hold uint32 bit patterns, not uint16"),
    (lambda: arith.bf16_mul(np.zeros(2, np.float32), np.zeros(2, np.uint16)),
     "operand a must hold uint16 bit patterns, not float32"),
    (lambda: arith.fp32_add(np.zeros(2, np.uint32), np.zeros(3, np.uint32)),
     r"operands differ in shape: \(2,\) vs \(3,\)"),
    (lambda: arith.fp32_add([1, 2], np.zeros(2, np.uint32)),
     "operand a must be a numpy array of uint32 bit patterns, not list"),
    (lambda: arith.fp32_to_bf16(np.zeros(2, np.uint32), numerics="ftz"),
     "numerics must be one of 'tpu', 'ieee', not 'ftz'"),
    (lambda: arith.bf16_mul(np.zeros(2, np.uint16), np.zeros(2, np.uint16), backend="vcs"),
     "backend must be one of 'amaranth', 'verilator', 'icarus', not 'vcs'"),
    (lambda: arith.fp32_div(np.zeros(2, np.uint32), np.zeros(3, np.uint32)),
     r"fp32_div: operands differ in shape: \(2,\) vs \(3,\)"),
    (lambda: arith.fp32_sqrt(np.zeros(2, np.float32)),
     "fp32_sqrt: operand a must hold uint32 bit patterns, not float32"),
    (lambda: arith.fp32_mul(np.zeros(2, np.uint32), np.zeros(2, np.uint32), numerics="fast"),
     "numerics must be one of 'tpu', 'ieee', not 'fast'"),
])
def test_bad_input_is_a_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("component", [FP32Adder, BF16Multiplier, FP32ToBF16])
def test_bad_parameters_are_rejected(component):
    with pytest.raises(ValueError, match="numerics must be one of"):
        component(numerics="IEEE")
    with pytest.raises(ValueError, match="stages must be between 1 and"):
        component(stages=0)
    with pytest.raises(TypeError, match="stages must be an integer"):
        component(stages=2.5)


def test_empty_input_gives_empty_output():
    assert arith.fp32_add(np.zeros(0, np.uint32), np.zeros(0, np.uint32)).shape == (0,)
    assert arith.fp32_sqrt(np.zeros((0, 3), np.uint32)).shape == (0, 3)


def test_result_keeps_the_operand_shape():
    a = np.full((2, 3), 0x3F800000, np.uint32)
    assert arith.fp32_add(a, a).tolist() == [[0x40000000] * 3] * 2
