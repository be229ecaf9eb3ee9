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


def _loopback_batch(rng):
    """Pushes from chip 0 to itself among local descriptors; the pushes land in the top
    quarter of each space, which nothing else touches. 13 descriptors, 16 flits: the
    build of ``test_backends_agree_cycle_for_cycle`` serves it."""
    hbm = rng.integers(0, 1 << 32, HBM_WORDS, dtype=np.uint32)
    vmem = rng.integers(0, 1 << 32, VMEM_WORDS, dtype=np.uint32)
    work = {"hbm": HBM_WORDS * 3 // 4, "vmem": VMEM_WORDS * 3 // 4}
    local = []
    while len(local) < 8:
        d = contiguous_descriptor(rng, work)
        if golden.validate(d, hbm_words=work["hbm"], vmem_words=work["vmem"], n_flags=16) is None:
            local.append(d)
    pushes = [
        Descriptor(("vmem", 5), ("remote", 0, "hbm", 200), (3,), (1,), (1,), 3, sent_flag=4),
        Descriptor(("hbm", 7), ("remote", 0, "vmem", 100), (3,), (2,), (1,), 5),
        Descriptor(("hbm", 7), ("remote", 1, "vmem", 100), (3,), (1,), (1,), 5),  # no chip 1
        # Two one-word packets to one word: the second (hbm[10]) wins.
        Descriptor(("hbm", 9), ("remote", 0, "hbm", 250), (2,), (1,), (0,), 3, sent_flag=3),
        Descriptor(("hbm", 9), ("remote", 0, "hbm", 250), (9,), (1,), (1,), 3),  # past 256
    ]
    return hbm, vmem, local[:3] + pushes[:2] + local[3:5] + pushes[2:] + local[5:]


@pytest.mark.parametrize("backend", ["amaranth", "verilator"])
def test_pushes_to_this_chip_loop_back(backend, rng):
    hbm, vmem, descriptors = _loopback_batch(rng)
    assert dma.push_flits(HBM_WORDS, VMEM_WORDS, descriptors) == 16
    expected = golden.run(hbm, vmem, descriptors)
    want = golden.land(expected.hbm, expected.vmem, expected.flags, expected.pushes)
    got = dma.run(hbm, vmem, descriptors, backend=backend, words_per_cycle=WPC, jitter=2,
                  idle=0.3, stall=0.5, seed=5)
    for name, value in zip(("hbm", "vmem", "flags"), want):
        np.testing.assert_array_equal(getattr(got, name), value)
    assert got.errors == expected.errors == [7, 9]
    assert len(expected.pushes) == 3 and want[0][250] == hbm[10]


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
                     [Descriptor(("hbm", 0), ("vmem", 0), (4,), (1,), (1,), 0),
                      Descriptor(("hbm", 4), ("remote", 0, "vmem", 3), (2,), (1,), (1,), 0)]),
     r"descriptor 1 pushes to vmem\[3\], which another descriptor of the batch reads or "
     r"writes"),
])
def test_bad_input_is_a_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
