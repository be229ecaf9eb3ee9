"""``sim.dma.run``: a DMA batch as a whole run on every backend, equal to golden.memory.run."""

import numpy as np
import pytest

from golden import memory as golden
from golden.ici import push_packets
from golden.memory import Descriptor
from sim import dma

from ..simulators import ICARUS
from .test_dma_burst import contiguous_descriptor
from .test_dma_system import random_descriptor

HBM_WORDS, VMEM_WORDS = 256, 128
#: Two-word HBM lines and 8-word VMEM lines: the multi-word paths, misaligned.
WPC = 2
#: Stream depth and HBM jitter of the runs below: one Verilator build serves them all.
DEPTH, JITTER = 32, 2


def _batch(rng, n):
    hbm = rng.integers(0, 1 << 32, HBM_WORDS, dtype=np.uint32)
    vmem = rng.integers(0, 1 << 32, VMEM_WORDS, dtype=np.uint32)
    sizes = {"hbm": HBM_WORDS, "vmem": VMEM_WORDS}
    return hbm, vmem, [(random_descriptor if k % 2 else contiguous_descriptor)(rng, sizes)
                       for k in range(n)]


# The compiled cases are slow (21 s and 13 s, make test's budget): the Amaranth case stays, and
# the DMA runs on Verilator in every system and collective test.
@pytest.mark.parametrize("backend", ["amaranth", pytest.param("verilator", marks=pytest.mark.slow),
                                     pytest.param("icarus", marks=[*ICARUS.marks,
                                                                   pytest.mark.slow])])
def test_batch_matches_golden_with_gaps_and_jitter(backend, rng):
    hbm, vmem, descriptors = _batch(rng, 24)
    expected = golden.run(hbm, vmem, descriptors)
    got = dma.run(hbm, vmem, descriptors, backend=backend, words_per_cycle=WPC, jitter=JITTER,
                  idle=0.3, stall=0.5, seed=11, depth=DEPTH)
    np.testing.assert_array_equal(got.hbm, expected.hbm)     # whole images: no stray write
    np.testing.assert_array_equal(got.vmem, expected.vmem)
    np.testing.assert_array_equal(got.flags, expected.flags)
    assert got.errors == expected.errors and got.errors, "the batch should reject some"
    assert got.cycles > 0


def _loopback_batch(rng):
    """Pushes from chip 0 to itself among local descriptors; the pushes land in the top
    quarter of each space, which nothing else touches. 13 descriptors, 16 flits."""
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


# Verilator's case is slow for make test's budget (16 s), as above.
@pytest.mark.parametrize("backend", ["amaranth",
                                     pytest.param("verilator", marks=pytest.mark.slow)])
def test_pushes_to_this_chip_loop_back(backend, rng):
    hbm, vmem, descriptors = _loopback_batch(rng)
    assert dma.push_flits(HBM_WORDS, VMEM_WORDS, descriptors) == 16
    expected = golden.run(hbm, vmem, descriptors)
    want = golden.land(expected.hbm, expected.vmem, expected.flags, expected.pushes)
    got = dma.run(hbm, vmem, descriptors, backend=backend, words_per_cycle=WPC, jitter=JITTER,
                  idle=0.3, stall=0.5, seed=5, depth=DEPTH)
    for name, value in zip(("hbm", "vmem", "flags"), want):
        np.testing.assert_array_equal(getattr(got, name), value)
    assert got.errors == expected.errors == [7, 9]
    assert len(expected.pushes) == 3 and want[0][250] == hbm[10]


def _faulting_batch(rng, sizes):
    """Local descriptors over the bottom three quarters of each space (where the first
    error range is), and pushes landing in the top quarter (where the second is), at
    indices 4, 5, 9 and 10. Error ranges (40, 56) and (224, 232): whole lines for HBM
    lines of 1, 2, 4 or 8 words."""
    hbm = rng.integers(0, 1 << 32, sizes["hbm"], dtype=np.uint32)
    vmem = rng.integers(0, 1 << 32, sizes["vmem"], dtype=np.uint32)
    work = {space: size * 3 // 4 for space, size in sizes.items()}
    local = [(random_descriptor if k % 2 else contiguous_descriptor)(rng, work)
             for k in range(10)]
    pushes = [
        # Reads 40..49 fault: zeros go out.
        Descriptor(("hbm", 37), ("remote", 0, "vmem", sizes["vmem"] - 16), (13,), (1,), (1,),
                   3, sent_flag=4),
        # Reads 50..55 fault, and 225..227 are dropped where they land.
        Descriptor(("hbm", 50), ("remote", 0, "hbm", 220), (3, 2), (1, 4), (1, 5), 5),
        # Lands on 226..230: all dropped.
        Descriptor(("vmem", 3), ("remote", 0, "hbm", 226), (5,), (1,), (1,), 2),
        # Reads 44 down to 41, all faulting.
        Descriptor(("hbm", 44), ("remote", 0, "hbm", 200), (4,), (-1,), (2,), 1),
    ]
    return hbm, vmem, local[:4] + pushes[:2] + local[4:7] + pushes[2:] + local[7:]


@pytest.mark.parametrize("words_per_cycle, lanes", [(2, 8), (4, 2)])
def test_bus_errors_match_golden(words_per_cycle, lanes, rng):
    # Two-word HBM lines into 8-word VMEM lines, and 4-word ones into 2-word lines (reads
    # narrower than an HBM line: several records per faulting line).
    sizes = {"hbm": HBM_WORDS, "vmem": 32 * lanes}
    hbm, vmem, descriptors = _faulting_batch(rng, sizes)
    ranges = [(40, 56), (224, 232)]
    sent = golden.run(hbm, vmem, descriptors, lanes=lanes, error_ranges=ranges,
                      words_per_cycle=words_per_cycle)
    want = golden.land(sent.hbm, sent.vmem, sent.flags, sent.pushes, error_ranges=ranges)
    got = dma.run(hbm, vmem, descriptors, backend="amaranth", words_per_cycle=words_per_cycle,
                  lanes=lanes, error_ranges=ranges, jitter=2, idle=0.3, stall=0.5, seed=3)
    for name, value in zip(("hbm", "vmem", "flags"), want):
        np.testing.assert_array_equal(getattr(got, name), value)
    assert got.errors == sent.errors
    assert got.bus_errors == sent.bus_errors
    assert {4, 5, 10} <= {e.index for e in sent.bus_errors}, "the pushes' reads fault"


def test_push_flits_count_the_packets_golden_cuts(rng):
    # Runs of consecutive destinations (unit, zero, negative and outer strides) cut at
    # random payload limits, counted against the packets golden.ici.push_packets builds.
    for _ in range(200):
        counts = tuple(int(c) for c in rng.integers(1, [90, 4, 3]))
        strides = (int(rng.choice([1, 1, 0, -1, 2])), int(rng.integers(-40, 41)),
                   int(rng.integers(-100, 101)))
        d = Descriptor(("hbm", 0), ("remote", 0, "vmem", int(rng.integers(1 << 12, 1 << 20))),
                       counts, (0, 0, 0), strides, 0)
        limit = int(rng.integers(1, 65))
        packets = push_packets(d, np.zeros(d.words, np.uint32), src_chip=0,
                               max_payload_words=limit)
        assert dma.push_flits(HBM_WORDS, 1 << 21, [d], max_payload=limit) == \
            sum(len(p) for p in packets), (d, limit)


def test_stream_beats_bound_the_error_records():
    ranges = ((8, 16),)
    batch = [Descriptor(("hbm", 4), ("vmem", 0), (8,), (1,), (1,), 0),       # 4 faulting
             Descriptor(("hbm", 9), ("vmem", 0), (5,), (0,), (1,), 0),       # 5 faulting
             Descriptor(("vmem", 8), ("hbm", 8), (8,), (1,), (1,), 0),       # writes only
             Descriptor(("hbm", 8), ("vmem", 0), (8,), (1,), (1,), 99),      # rejected
             Descriptor(("hbm", 0), ("remote", 0, "vmem", 40), (10,), (1,), (3,), 0)]
    beats = dma.stream_beats(64, 128, batch, error_ranges=ranges)
    assert beats == {"descriptors": 5, "errors": 5 + 4 + 5 + 2, "push": 10 * 3}


# Slow for make test's budget (17 s, the DMA's only Verilator build in it): the whole-run
# harness's cycle-for-cycle agreement is checked on the arithmetic units and the MXU
# (tests/sim/test_whole_run.py), and the DMA runs on Icarus here and on Verilator inside
# every system test's chip.
@pytest.mark.slow
def test_backends_agree_cycle_for_cycle(rng):
    hbm, vmem, descriptors = _batch(rng, 8)
    runs = [dma.run(hbm, vmem, descriptors, backend=backend, words_per_cycle=WPC,
                    jitter=JITTER, seed=5, depth=DEPTH)
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
    (lambda: dma.run(np.zeros(8, np.uint32), np.zeros(8, np.uint32), [], words_per_cycle=2,
                     error_ranges=[(1, 4)]),
     r"error range \(1, 4\) does not start and end on an HBM line boundary"),
    (lambda: dma.run(np.zeros(8, np.uint32), np.zeros(8, np.uint32), [],
                     error_ranges=[(4, 9)]),
     r"error range \(4, 9\) hi is 9, outside \[0, 9\)"),
    (lambda: dma.run(np.zeros(8, np.uint32), np.zeros(8, np.uint32), [], depth=0),
     "depth must be a positive integer or None, not 0"),
    (lambda: dma.run(np.zeros(8, np.uint32), np.zeros(8, np.uint32),
                     [Descriptor(("hbm", 0), ("vmem", 0), (1,), (1,), (1,), 0)] * 20, depth=16,
                     backend="amaranth"),
     "descriptors carries 20 beats, more than the harness memory's 16"),
])
def test_bad_input_is_a_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_dma_run_keeps_its_spec_fields():
    # SPEC section 6: DmaRun(hbm, vmem, flags, errors, cycles); bus errors come after.
    run = dma.DmaRun(np.zeros(1, np.uint32), np.zeros(1, np.uint32), np.zeros(1, np.uint32),
                     [], 5)
    assert run.cycles == 5 and tuple(run.bus_errors) == ()
