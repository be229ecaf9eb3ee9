"""The matmul kernel on the instruction-set simulator: bit-exact against golden.mxu.matmul
for odd shapes, special values, both numerics modes, every block shape and pop lag."""

import numpy as np
import pytest

from golden import tensorcore as tc
from sim.kernels import plan_matmul
from sim.kernels.matmul import MAX_SUMS

from .operands import expected, operands


def _iss(kernel, numerics):
    smem = np.zeros(max(tc.DEFAULT_SMEM_WORDS, kernel.smem.size), np.uint32)
    smem[:kernel.smem.size] = kernel.smem
    state = tc.run(kernel.program, hbm=kernel.hbm, vmem=kernel.vmem, smem=smem,
                   mxu_results=kernel.mxu_results, numerics=numerics, max_bundles=10**7)
    assert state.status == "halted", (state.status, state.error)
    return kernel.result(state.hbm)


@pytest.mark.parametrize("numerics", ["tpu", "ieee"])
@pytest.mark.parametrize("activation", [None, "relu"])
@pytest.mark.parametrize("shape, max_rows, cols", [
    ((1, 1, 1), None, None), ((5, 13, 7), None, None), ((8, 8, 8), 1, None),
    ((17, 9, 23), 2, 1), ((40, 33, 17), None, None), ((24, 40, 8), 3, None),
    ((64, 24, 16), None, 1), ((17, 9, 40), None, 3), ((8, 8, 30), 1, 4),
])
def test_kernel_is_bit_exact_on_the_iss(rng, numerics, activation, shape, max_rows, cols):
    x, w = operands(rng, *shape, special=0.2)
    kernel = plan_matmul(x, w, activation=activation, max_rows=max_rows, cols=cols)
    got = _iss(kernel, numerics)
    np.testing.assert_array_equal(got, expected(x, w, activation=activation,
                                                numerics=numerics))


@pytest.mark.parametrize("numerics", ["tpu", "ieee"])
@pytest.mark.parametrize("shape, k_per_step, cols", [
    ((40, 33, 17), 2, 2), ((17, 45, 9), 3, 1), ((30, 20, 50), 4, 2), ((9, 70, 16), 5, 2),
])
def test_steps_of_several_k_tiles_are_bit_exact(rng, numerics, shape, k_per_step, cols):
    x, w = operands(rng, *shape, special=0.2)
    kernel = plan_matmul(x, w, activation="relu", k_per_step=k_per_step, cols=cols)
    assert kernel.k_per_step == k_per_step
    np.testing.assert_array_equal(_iss(kernel, numerics),
                                  expected(x, w, activation="relu", numerics=numerics))


def test_the_defaults_shrink_to_fit_vmem():
    x, w = np.zeros((256, 64), np.uint16), np.zeros((64, 8), np.uint16)
    roomy = plan_matmul(x, w)
    assert (roomy.rows, roomy.cols, roomy.k_per_step) == (16, 1, 2)
    fitted = plan_matmul(x, w, vmem_lines=512)          # 16 x 1 x 2 needs 673 lines
    assert (fitted.rows, fitted.k_per_step) == (16, 1)
    with pytest.raises(ValueError, match="needs 673 VMEM lines, more than 512"):
        plan_matmul(x, w, max_rows=16, k_per_step=2, vmem_lines=512)


@pytest.mark.parametrize("numerics", ["tpu", "ieee"])
def test_a_negative_zero_sum_survives_the_k_padding(numerics):
    # 2**-126 + (-1.5 * 2**-126) = -2**-127: a subnormal, flushed to -0.0 in "tpu" mode.
    # K = 2 pads to 8; the six padded products must leave -0.0 (and -2**-127) unchanged,
    # which +0.0 products would not (-0.0 + +0.0 = +0.0).
    x = np.array([[0x3F80, 0xBFC0]], np.uint16)
    w = np.array([[0x0080], [0x0080]], np.uint16)
    want = {"tpu": 0x80000000, "ieee": 0x80400000}[numerics]
    np.testing.assert_array_equal(_iss(plan_matmul(x, w), numerics), [[want]])


def test_long_k_is_one_chain_not_a_sum_of_tiles(rng):
    # 1 + 2**-24 * many small terms: a single rounding chain and per-tile sums differ.
    x = np.full((8, 64), 0x3F80, np.uint16)                   # 1.0
    w = np.full((64, 8), 0x3380, np.uint16)                   # 2**-24
    w[0] = 0x3F80                                             # 1.0 first
    got = _iss(plan_matmul(x, w), "ieee")
    # Sequentially, each 1 + 2**-24 rounds back to 1.0 (a tie to even): the chain stays 1.0.
    np.testing.assert_array_equal(got, np.full((8, 8), 0x3F800000, np.uint32))


def test_blocks_and_lag_follow_the_shape():
    x = np.zeros((256, 8), np.uint16)
    w = np.zeros((8, 8), np.uint16)
    kernel = plan_matmul(x, w)
    assert (kernel.rows, kernel.cols, kernel.lag, kernel.mxu_results) == (16, 1, 9, 80)
    assert kernel.padded == (256, 8)
    small = plan_matmul(np.zeros((9, 8), np.uint16), w)
    assert (small.rows, small.lag) == (2, 1)                 # lag < the block's sums
    assert plan_matmul(np.zeros((200, 8), np.uint16), w, max_rows=MAX_SUMS).rows == 13
    # Two N-tiles a block once N spans two: 8 M-tiles x 2 N-tiles (the vregs' limit is 9),
    # spread evenly over 256 rows, and N padded to whole blocks.
    wide = plan_matmul(x, np.zeros((8, 24), np.uint16))
    assert (wide.rows, wide.cols, wide.padded) == (8, 2, (256, 32))


@pytest.mark.parametrize("kwargs, message", [
    (dict(activation="gelu"), "activation must be None or 'relu'"),
    (dict(max_rows=0), "max_rows must be an integer in 1..24 with cols=1"),
    (dict(cols=2, max_rows=10), "max_rows must be an integer in 1..9 with cols=2"),
    (dict(cols=0), "cols must be a positive integer"),
    (dict(lag=-1), "lag must be a non-negative integer"),
    (dict(vmem_lines=32), "needs 41 VMEM lines, more than 32"),
])
def test_bad_parameters_are_one_line_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plan_matmul(np.zeros((8, 8), np.uint16), np.zeros((8, 8), np.uint16), **kwargs)


def test_bad_shapes_are_one_line_errors():
    with pytest.raises(ValueError, match="their K differ"):
        plan_matmul(np.zeros((2, 3), np.uint16), np.zeros((4, 2), np.uint16))
    with pytest.raises(ValueError, match="must not be empty"):
        plan_matmul(np.zeros((0, 3), np.uint16), np.zeros((3, 2), np.uint16))
    with pytest.raises(ValueError, match="2-D"):
        plan_matmul(np.zeros(3, np.uint16), np.zeros((3, 2), np.uint16))


@pytest.mark.parametrize("vmem_base, smem_base, flag_base", [(0, 0, 0), (37, 100, 9)])
def test_a_placed_kernel_touches_nothing_below_its_bases(rng, vmem_base, smem_base,
                                                         flag_base):
    # Two M-blocks and two K-steps, so the block table, both buffers and both flags are used.
    x, w = operands(rng, 40, 24, 9, special=0.1)
    kernel = plan_matmul(x, w, max_rows=3, k_per_step=2, vmem_base=vmem_base,
                         smem_base=smem_base, flag_base=flag_base, halt=False)
    assert (kernel.rows, kernel.cols) == (3, 2)
    assert (kernel.out_flag, kernel.out_words) == (flag_base + 1, 64 * 3 * 2)
    assert not kernel.program.rstrip().endswith("halt")
    # Whatever shares the chip: marks below the bases, and other flags counting.
    vmem, smem = kernel.vmem.copy(), np.zeros(max(tc.DEFAULT_SMEM_WORDS, kernel.smem.size),
                                              np.uint32)
    smem[:kernel.smem.size] = kernel.smem
    assert not vmem[:8 * vmem_base].any() and not smem[:smem_base].any()
    vmem[:8 * vmem_base] = np.arange(8 * vmem_base, dtype=np.uint32) + 0xA000
    smem[:smem_base] = np.arange(smem_base, dtype=np.uint32) + 0xB000
    flags = np.arange(16, dtype=np.uint32) + 0xC000
    flags[flag_base:flag_base + 2] = 0
    # The program the caller appends: wait for the last output block, then halt.
    program = kernel.program + f"wait f{kernel.out_flag}, {kernel.out_words}\nhalt\n"
    state = tc.run(program, hbm=kernel.hbm, vmem=vmem, smem=smem, flags=flags,
                   mxu_results=kernel.mxu_results, max_bundles=10**6)
    assert state.status == "halted", (state.status, state.error)
    np.testing.assert_array_equal(kernel.result(state.hbm),
                                  expected(x, w, activation=None, numerics="tpu"))
    np.testing.assert_array_equal(state.vmem[:8 * vmem_base], vmem[:8 * vmem_base])
    np.testing.assert_array_equal(state.smem[:smem_base], smem[:smem_base])
    others = np.r_[0:flag_base, flag_base + 2:16]
    np.testing.assert_array_equal(state.flags[others], flags[others])


@pytest.mark.parametrize("name, value", [("vmem_base", -1), ("smem_base", 1 << 15),
                                         ("flag_base", 127), ("flag_base", True)])
def test_bad_placements_are_one_line_errors(name, value):
    with pytest.raises(ValueError, match=f"{name} must be an integer in 0.."):
        plan_matmul(np.zeros((8, 8), np.uint16), np.zeros((8, 8), np.uint16), **{name: value})
