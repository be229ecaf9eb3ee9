# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct components whose __init__ raises.)
"""The MXU RTL equals the sequential MAC loop bit for bit, streams tiles without bubbles,
and loses nothing under backpressure."""

import functools

import ml_dtypes
import numpy as np
import pytest
import softfloatpy as sf

from golden import mxu as golden_mxu
from golden.formats import NUMERICS
from hdl.mxu import MXU, preset
from sim import mxu
from sim.backends import run_program
from verif.agents import Driver, Monitor
from verif.suites.mxu.scenarios import bf16_matrix, fp32_matrix

from .. import oracle


def _assert_bit_exact(got, expected):
    got_bits, exp_bits = got.view(np.uint32), expected.view(np.uint32)
    bad = np.argwhere(got_bits != exp_bits)
    assert not bad.size, (f"{len(bad)} of {got.size} outputs differ; first at {tuple(bad[0])}: "
                          f"got 0x{got_bits[tuple(bad[0])]:08x}, "
                          f"expected 0x{exp_bits[tuple(bad[0])]:08x}")


def _operands(rng, m, k, n, *, acc, special_density):
    x = bf16_matrix(rng, (m, k), special_density=special_density)
    w = bf16_matrix(rng, (k, n), special_density=special_density)
    a = fp32_matrix(rng, (m, n), special_density=special_density) if acc else None
    return x, w, a


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("use_acc", [False, True], ids=["no-acc", "acc"])
@pytest.mark.parametrize("m, k, n, rows, cols", [
    (1, 1, 1, 2, 2),
    (5, 3, 7, 2, 2),        # several K and N tiles
    pytest.param(17, 9, 10, 4, 4, marks=pytest.mark.slow),
    pytest.param(6, 7, 11, 3, 5, marks=pytest.mark.slow),
    (4, 2, 3, 5, 3),        # a non-square array; K and N smaller than it
])
def test_matmul_is_bit_exact(m, k, n, rows, cols, use_acc, numerics, rng):
    x, w, acc = _operands(rng, m, k, n, acc=use_acc, special_density=0.0)
    run = mxu.matmul(x, w, rows=rows, cols=cols, numerics=numerics, acc=acc)
    _assert_bit_exact(run.out, golden_mxu.matmul(x, w, numerics=numerics, acc=acc))
    assert run.out.shape == (m, n) and run.out.dtype == np.float32


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("use_acc", [False, True], ids=["no-acc", "acc"])
def test_special_values_are_bit_exact(use_acc, numerics, rng):
    x, w, acc = _operands(rng, 9, 7, 6, acc=use_acc, special_density=0.3)
    run = mxu.matmul(x, w, rows=3, cols=3, numerics=numerics, acc=acc)
    expected = golden_mxu.matmul(x, w, numerics=numerics, acc=acc)
    _assert_bit_exact(run.out, expected)
    bits = expected.view(np.uint32)
    # The mix must actually reach the special results, or the test proves little.
    assert (bits == 0x7FC00000).any() and (np.isinf(expected)).any()


def test_overflow_and_signed_zero_results(rng):
    big, neg_zero = 0x7F7F, 0x8000                         # largest finite bf16, -0
    x = np.array([[big, big], [neg_zero, neg_zero]], np.uint16).view(ml_dtypes.bfloat16)
    w = np.array([[big, 0x0000], [big, 0x0000]], np.uint16).view(ml_dtypes.bfloat16)
    acc = np.array([[0, 0], [0x80000000, 0x80000000]], np.uint32).view(np.float32)
    run = mxu.matmul(x, w, rows=2, cols=2, acc=acc)
    # big*big overflows to inf; big*0 sums to +0; -0 + (-0*big) + (-0*0) stays -0.
    assert run.out.view(np.uint32).tolist() == [[0x7F800000, 0x00000000],
                                                [0x80000000, 0x80000000]]


@pytest.mark.parametrize("numerics", NUMERICS)
def test_transposed_load_gives_the_same_tiles(numerics, rng):
    x, w, acc = _operands(rng, 6, 8, 8, acc=True, special_density=0.05)
    bits = lambda a: a.view(np.uint16 if a.dtype == ml_dtypes.bfloat16 else np.uint32)
    plan = mxu.plan_matmul(bits(x), bits(w), bits(acc), rows=4, cols=4, transpose_load=True)
    assert all(beat >> 64 == 1 for beat in plan.weight_beats)     # the flag is set
    run = mxu.run_plan(plan, numerics=numerics)
    _assert_bit_exact(run.out, golden_mxu.matmul(x, w, numerics=numerics, acc=acc))


def _spans(plan, fold=1, **agents):
    params = {"rows": plan.rows, "cols": plan.cols, "fold": fold}
    program = functools.partial(
        mxu.stream_matmul, weight_beats=plan.weight_beats, lhs_beats=plan.lhs_beats,
        acc_beats=plan.acc_beats, n_results=plan.n_results, final_from=plan.final_from, **agents)
    return MXU(**params), run_program("mxu", params, program)


def test_tiles_stream_back_to_back_without_bubbles(rng):
    # 2 K-tiles x 2 N-tiles on 4x4. A tile of (rows-1)*add_stages + cols + rows
    # LHS rows covers the next tile's weight load (MXU docstring), so with that
    # many rows per tile the LHS stream never waits.
    dut = MXU(rows=4, cols=4)
    m = (dut.rows - 1) * dut.array_params["add_stages"] + dut.cols + dut.rows
    x, w, _ = _operands(rng, m, 8, 8, acc=False, special_density=0.0)
    plan = mxu.plan_matmul(x.view(np.uint16), w.view(np.uint16), rows=4, cols=4)
    _, (final, spans) = _spans(plan)
    first, last = spans["lhs"]
    assert last - first + 1 == len(plan.lhs_beats), "the LHS stream stalled between tiles"
    _assert_bit_exact(plan.assemble(final), golden_mxu.matmul(x, w))


def test_latency_matches_the_docstring(rng):
    x, w, _ = _operands(rng, 1, 4, 4, acc=False, special_density=0.0)
    plan = mxu.plan_matmul(x.view(np.uint16), w.view(np.uint16), rows=4, cols=4)
    dut, (_final, spans) = _spans(plan)
    p = dut.array_params
    assert spans["result"][0] - spans["lhs"][0] == dut.latency == \
        4 * p["add_stages"] + 4 + p["mul_stages"] + 5


@pytest.mark.parametrize("m, k, n, rows, cols, fold, transpose_load, numerics, idle, stall", [
    (9, 7, 10, 4, 4, 2, True, "tpu", 0.0, 0.0),
    pytest.param(6, 7, 12, 3, 6, 3, False, "ieee", 0.3, 0.5,    # non-square, gaps, stalls
                 marks=pytest.mark.slow),
    pytest.param(13, 16, 16, 8, 8, 8, True, "tpu", 0.0, 0.9,    # the proto chip's MXU
                 marks=pytest.mark.slow),
])
def test_folded_mxu_is_bit_exact(m, k, n, rows, cols, fold, transpose_load, numerics, idle,
                                 stall, rng, seed):
    # Two K-tiles and several N-tiles, so the folded columns, the swaps between tiles and
    # the accumulation across K-tiles are all exercised, with specials in every operand.
    x, w, acc = _operands(rng, m, k, n, acc=True, special_density=0.1)
    plan = mxu.plan_matmul(x.view(np.uint16), w.view(np.uint16), acc.view(np.uint32),
                           rows=rows, cols=cols, transpose_load=transpose_load)
    run = mxu.run_plan(plan, numerics=numerics, mxu_params={"fold": fold}, seed=seed,
                       idle=idle, stall=stall)
    _assert_bit_exact(run.out, golden_mxu.matmul(x, w, numerics=numerics, acc=acc))


@pytest.mark.parametrize("fold", [2, 4])
def test_folded_mxu_takes_a_row_every_fold_cycles(fold, rng):
    # One tile, so nothing else holds the LHS stream: its rows are accepted exactly
    # `fold` cycles apart, and the first result comes at the docstring's latency.
    x, w, _ = _operands(rng, 6, 4, 4, acc=False, special_density=0.0)
    plan = mxu.plan_matmul(x.view(np.uint16), w.view(np.uint16), rows=4, cols=4)
    _, (final, spans) = _spans(plan, fold=fold)
    dut = MXU(rows=4, cols=4, fold=fold)
    p = dut.array_params
    first, last = spans["lhs"]
    assert last - first == fold * (len(plan.lhs_beats) - 1)
    assert spans["result"][0] - first == dut.latency == \
        4 * p["add_stages"] + 4 // fold + p["mul_stages"] + fold + 4
    _assert_bit_exact(plan.assemble(final), golden_mxu.matmul(x, w))


@pytest.mark.parametrize("idle, stall", [(0.0, 0.6), (0.4, 0.4), (0.0, 0.95)])
def test_backpressure_changes_nothing(idle, stall, rng, seed):
    x, w, acc = _operands(rng, 12, 6, 5, acc=True, special_density=0.1)
    plan = mxu.plan_matmul(x.view(np.uint16), w.view(np.uint16), acc.view(np.uint32),
                           rows=3, cols=3)
    calm = mxu.run_plan(plan)
    gaps = np.random.default_rng(seed)
    agents = {}

    def monitor(*args, **kwargs):          # the monitor also checks the stream rules
        agents["result"] = Monitor(*args, rng=gaps, stall=stall, **kwargs)
        return agents["result"]

    final, spans = _spans(plan, source=functools.partial(Driver, rng=gaps, idle=idle),
                          sink=monitor)[1]
    _assert_bit_exact(plan.assemble(final), calm.out)
    _assert_bit_exact(calm.out, golden_mxu.matmul(x, w, acc=acc))
    assert mxu.matmul_cycles(spans) > calm.cycles
    if stall > 0.9:                        # long waits fill the FIFO: the array must hold
        assert max(agents["result"].stalls) > MXU().fifo_depth


@pytest.mark.parametrize("numerics", NUMERICS)
def test_golden_matmul_is_the_softfloat_loop(numerics, rng):
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    x, w, acc = _operands(rng, 4, 6, 5, acc=True, special_density=0.2)
    xb, wb, ab = x.view(np.uint16), w.view(np.uint16), acc.view(np.uint32)
    expected = np.zeros((4, 5), np.uint32)
    for i in range(4):
        for j in range(5):
            total = int(ab[i, j])
            for kk in range(6):
                total = oracle.fp32_add(total, oracle.bf16_mul(xb[i, kk], wb[kk, j], numerics),
                                        numerics)
            expected[i, j] = total
    got = golden_mxu.matmul(x, w, numerics=numerics, acc=acc).view(np.uint32)
    np.testing.assert_array_equal(got, expected)


_bf16 = lambda *shape: np.zeros(shape, ml_dtypes.bfloat16)


@pytest.mark.parametrize("call, message", [
    (lambda: mxu.matmul(np.zeros((2, 2), np.float32), _bf16(2, 2)),
     r"x must be a numpy array of bfloat16 \(or its uint16 bit patterns\), not float32"),
    (lambda: mxu.matmul(_bf16(2, 3), _bf16(2, 2)), "x is 2x3 but w is 2x2: their K differ"),
    (lambda: mxu.matmul(_bf16(2, 2), _bf16(2, 2), acc=np.zeros((3, 2), np.float32)),
     r"acc must be 2x2, not \(3, 2\)"),
    (lambda: mxu.matmul(_bf16(0, 2), _bf16(2, 2)), "x must be a non-empty 2-D array"),
    (lambda: mxu.matmul(_bf16(2, 2), _bf16(2, 2), rows=0), "rows must be a positive integer"),
    (lambda: mxu.matmul(_bf16(2, 2), _bf16(2, 2), numerics="bf16"), "numerics must be one of"),
    (lambda: mxu.matmul(_bf16(2, 2), _bf16(2, 2), backend="xsim"), "backend must be one of"),
    (lambda: golden_mxu.matmul(_bf16(2, 3), _bf16(2, 2)), "their K differ"),
])
def test_bad_input_is_a_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("params, error, message", [
    (dict(rows=0), ValueError, "rows must be at least 1"),
    (dict(cols=2.0), TypeError, "cols must be an integer"),
    (dict(rows=3, cols=5, transpose=True), ValueError, "need a square array, not 3x5"),
    (dict(add_stages=7), ValueError, "add_stages must be between 1 and 6"),
    (dict(fifo_depth=3), ValueError, "fifo_depth must be an integer of at least 4"),
    (dict(rows=4, cols=6, fold=4), ValueError, "fold must divide cols = 6, not 4"),
    (dict(fold=0), ValueError, "fold must be at least 1"),
])
def test_bad_mxu_parameters(params, error, message):
    with pytest.raises(error, match=message):
        MXU(**params)


def test_presets():
    assert preset("tpu_v4") == {"rows": 128, "cols": 128}
    assert preset("tpu_v6e") == {"rows": 256, "cols": 256}
    with pytest.raises(ValueError, match="presets: tpu_v4, tpu_v6e"):
        preset("tpu_v5")
