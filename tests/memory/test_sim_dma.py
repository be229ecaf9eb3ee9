"""``sim.dma.run``: a DMA batch as a whole run on every backend, equal to golden.memory.run."""

import numpy as np
import pytest

from golden import memory as golden
from golden.memory import Descriptor
from sim import dma
from sim.backends.toolchain import iverilog

from .test_dma_burst import contiguous_descriptor
from .test_dma_system import random_descriptor

HBM_WORDS, VMEM_WORDS = 256, 128
#: Two-word HBM lines and 8-word VMEM lines: the multi-word paths, misaligned.
WPC = 2
ICARUS = pytest.param("icarus", marks=pytest.mark.skipif(iverilog() is None,
                                                         reason="Icarus (iverilog) not installed"))


def _batch(rng, n):
    hbm = rng.integers(0, 1 << 32, HBM_WORDS, dtype=np.uint32)
    vmem = rng.integers(0, 1 << 32, VMEM_WORDS, dtype=np.uint32)
    sizes = {"hbm": HBM_WORDS, "vmem": VMEM_WORDS}
    return hbm, vmem, [(random_descriptor if k % 2 else contiguous_descriptor)(rng, sizes)
                       for k in range(n)]


@pytest.mark.parametrize("backend", ["amaranth", "verilator", ICARUS])
def test_batch_matches_golden_with_gaps_and_jitter(backend, rng):
    hbm, vmem, descriptors = _batch(rng, 24)
    expected = golden.run(hbm, vmem, descriptors)
    got = dma.run(hbm, vmem, descriptors, backend=backend, words_per_cycle=WPC, jitter=3,
                  idle=0.3, stall=0.5, seed=11)
    np.testing.assert_array_equal(got.hbm, expected.hbm)     # whole images: no stray write
    np.testing.assert_array_equal(got.vmem, expected.vmem)
    np.testing.assert_array_equal(got.flags, expected.flags)
    assert got.errors == expected.errors and got.errors, "the batch should reject some"
    assert got.cycles > 0


def test_backends_agree_cycle_for_cycle(rng):
    hbm, vmem, descriptors = _batch(rng, 8)
    runs = [dma.run(hbm, vmem, descriptors, backend=backend, words_per_cycle=WPC, jitter=2,
                    seed=5)
            for backend in ("amaranth", "verilator")]
    assert runs[0].cycles == runs[1].cycles


@pytest.mark.parametrize("call, message", [
    (lambda: dma.run(np.zeros(8, np.int32), np.zeros(8, np.uint32), []),
     "hbm must be a 1-D numpy array of uint32 words"),
    (lambda: dma.run(np.zeros(8, np.uint32), np.zeros(12, np.uint32), []),
     r"vmem must hold a positive multiple of lanes \(8\) words, not 12"),
    (lambda: dma.run(np.zeros(8, np.uint32), np.zeros(8, np.uint32), ["copy"]),
     "descriptor 0 must be a golden.memory.Descriptor, not str"),
    (lambda: dma.run(np.zeros(8, np.uint32), np.zeros(8, np.uint32),
                     [Descriptor(("hbm", 0), ("remote", 1, "vmem", 0), (1,), (1,), (1,), 0)]),
     "remote pushes are not supported by the DMA RTL yet"),
])
def test_bad_input_is_a_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
