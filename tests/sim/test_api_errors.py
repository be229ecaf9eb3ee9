"""The public API as a user meets it: bad input is a one-line ValueError (TypeError for a
wrong type) before any simulation, naming the argument and its limit, and leaves nothing
behind; what users naturally pass (bit patterns, nested lists) is taken."""

import re

import ml_dtypes
import numpy as np
import pytest

from golden import mxu as golden_mxu
from golden.memory import Descriptor
from sim import chip, dma, mxu, sparsecore, system


def _bf16(rng, shape):
    return rng.standard_normal(shape).astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(rows=10**6), ValueError,
     "rows must be at most 256 (the tpu_v6e preset), not 1,000,000"),
    (dict(cols=0), ValueError, "cols must be a positive integer, not 0"),
    (dict(idle=1.0), ValueError, "idle must be at least 0 and below 1 (at 1 nothing moves)"),
    (dict(stall=-0.1), ValueError, "stall must be at least 0 and below 1"),
    (dict(idle="0.5"), TypeError, "idle must be a number in [0, 1), not str"),
    (dict(waves="run.txt"), ValueError, "name a .vcd or .fst file"),
    (dict(waves=3), TypeError, "waves must be a path to a .vcd or .fst file, not int"),
])
def test_mxu_matmul_refuses_bad_arguments_at_once(kwargs, error, message, rng):
    with pytest.raises(error, match=re.escape(message)):
        mxu.matmul(_bf16(rng, (2, 2)), _bf16(rng, (2, 2)), **kwargs)


def test_waves_to_a_missing_or_unwritable_place_is_refused_before_the_run(tmp_path, rng):
    x, w = _bf16(rng, (2, 2)), _bf16(rng, (2, 2))
    with pytest.raises(ValueError, match="no folder"):
        mxu.matmul(x, w, waves=tmp_path / "missing" / "run.vcd")
    assert not (tmp_path / "missing").exists()
    (tmp_path / "folder.vcd").mkdir()
    with pytest.raises(ValueError, match="is a folder"):
        mxu.matmul(x, w, waves=tmp_path / "folder.vcd")
    with pytest.raises(ValueError, match="cannot write it"):
        mxu.matmul(x, w, waves="/proc/run.vcd")


def test_mxu_matmul_takes_bit_patterns_as_chip_matmul_does(rng):
    x, w = _bf16(rng, (3, 2)), _bf16(rng, (2, 3))
    run = mxu.matmul(x.view(np.uint16), w.view(np.uint16), rows=2, cols=2)
    want = golden_mxu.matmul(x, w)
    assert np.array_equal(run.out.view(np.uint32), want.view(np.uint32))


def test_chip_matmul_past_its_memory_is_refused_at_once(rng):
    x, w = _bf16(rng, (8, 100_000)), _bf16(rng, (100_000, 8))
    with pytest.raises(ValueError, match=r"a 8x100000 @ 100000x8 matmul needs [\d,]+ words of "
                                         r"HBM; the chip has 262,144 \(sim.chip.MATMUL_CHIP\)"):
        chip.matmul(x, w, backend="amaranth")


def test_dma_run_names_what_descriptors_must_be():
    one = Descriptor(("hbm", 0), ("vmem", 0), (8,), (1,), (1,), 0)
    with pytest.raises(TypeError, match=r"descriptors must be a list of golden.memory.Descriptor,"
                                        r" not Descriptor \(a single descriptor goes in a list"):
        dma.run(np.zeros(64, np.uint32), np.zeros(64, np.uint32), one)


@pytest.mark.parametrize("lr", [float("nan"), float("inf"), 1e39,
                                np.array(0x7FC00000, np.uint32)])
def test_sparsecore_update_refuses_a_learning_rate_that_is_not_finite(lr):
    table = np.zeros((8, 8), np.float32)
    with pytest.raises(ValueError, match="lr must be a finite fp32 number"):
        sparsecore.update(table, np.array([1]), np.array([0, 1]), np.ones((1, 8), np.float32),
                          lr=lr)


def test_collective_inputs_as_nested_lists_are_values():
    bits, view = system._bits([[1.5, -0.0], [2.0, 3.0]], "float32")
    assert view is np.float32
    assert bits.tolist() == np.array([[1.5, -0.0], [2.0, 3.0]], np.float32).view(
        np.uint32).tolist()
    bits, view = system._bits([[-1, 2]], "int32")
    assert view is np.int32 and bits.tolist() == [[0xFFFFFFFF, 2]]
    with pytest.raises(ValueError, match=r"int32 inputs must lie in \[-2\*\*31, 2\*\*31\)"):
        system._bits([[2**31]], "int32")
    with pytest.raises(ValueError, match="float32 inputs must be float32 values or uint32"):
        system._bits(np.zeros((2, 2)), "float32")      # a float64 array keeps its meaning
