# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct components whose __init__ raises.)
"""The DMA system RTL against golden.memory.run: whole HBM and VMEM images, flags and error
records, on random batches and on the directed cases DMA engines are known to get wrong."""

import functools

import numpy as np
import pytest
from amaranth.back import rtlil

from golden import memory as golden
from golden.memory import Descriptor
from hdl.memory import DMA, ROUND_TRIP, DmaSystem, layouts

from .simtools import descriptor_beat, load, run_batch, simulate

N_FLAGS = 8
CONFIGS = {
    # name: DmaSystem parameters (small memories keep the whole-image compare cheap)
    "w1-lanes4": dict(hbm_size=128, vmem_lines=16, lanes=4, words_per_cycle=1, read_latency=3),
    "w2-lanes8-jitter": dict(hbm_size=192, vmem_lines=12, lanes=8, words_per_cycle=2,
                             read_latency=6, jitter=3, outstanding=2),
    "w4-lanes2-lat1": dict(hbm_size=96, vmem_lines=40, lanes=2, words_per_cycle=4,
                           read_latency=1, outstanding=6, queue_depth=2),
}


@functools.cache
def _system(config, **extra):
    # One object per configuration: its runs share one compiled simulation (support.simulate).
    return DmaSystem(**CONFIGS[config], n_flags=N_FLAGS, **extra)


def _images(rng, system):
    hbm = rng.integers(0, 1 << 32, system.hbm.size, dtype=np.uint32)
    vmem = rng.integers(0, 1 << 32, system.vmem.size, dtype=np.uint32)
    return hbm, vmem


def _extent(base, counts, strides):
    lo = base + sum(min(0, (c - 1) * s) for c, s in zip(counts, strides))
    hi = base + sum(max(0, (c - 1) * s) for c, s in zip(counts, strides))
    return lo, hi


def random_descriptor(rng, sizes, *, legal=0.8):
    """A random descriptor, in range with probability about ``legal``: dims 1 to 3, zero
    and negative strides, a zero count now and then, a bad flag now and then, and source
    and destination often in one space (so extents overlap)."""
    dims = int(rng.integers(1, 4))
    counts = [int(c) for c in rng.integers(1, [9, 4, 3][:dims])]
    if rng.random() < 0.05:
        counts[int(rng.integers(dims))] = 0
    spaces = list(sizes)
    src_space = spaces[int(rng.integers(2))]
    dst_space = src_space if rng.random() < 0.4 else spaces[int(rng.integers(2))]

    def strides():
        choice = rng.random(dims)
        return [0 if p < 0.2 else int(rng.integers(-1, 2)) if p < 0.5
                else int(rng.integers(-12, 13)) for p in choice]

    sides = []
    for space, st in ((src_space, strides()), (dst_space, strides())):
        lo, hi = _extent(0, counts, st)
        size = sizes[space]
        if rng.random() < legal and hi - lo < size:
            base = int(rng.integers(-lo, size - hi))
        else:
            base = int(rng.integers(0, size))
        sides.append(((space, base), st))
    flag = int(rng.integers(N_FLAGS + 3 if rng.random() < 0.05 else N_FLAGS))
    (src, ss), (dst, ds) = sides
    return Descriptor(src, dst, tuple(counts), tuple(ss), tuple(ds), flag)


def _check_against_golden(run, hbm, vmem, descriptors, lanes, flags=None):
    expected = golden.run(hbm, vmem, descriptors, n_flags=N_FLAGS, lanes=lanes, flags=flags)
    for name in ("hbm", "vmem"):
        got, want = run[name], getattr(expected, name)
        bad = np.flatnonzero(got != want)
        assert not bad.size, (f"{name}: {bad.size} words differ, first at {bad[0]}: "
                              f"got {got[bad[0]]:#x}, expected {want[bad[0]]:#x}")
    assert run["flags"].tolist() == expected.flags.tolist()
    assert run["errors"] == [tuple(e) for e in expected.error_records]
    return expected


def _batch(rng, system, n, **kwargs):
    sizes = {"hbm": system.hbm.size, "vmem": system.vmem.size}
    return [random_descriptor(rng, sizes, **kwargs) for _ in range(n)]


# ------------------------------------------------------------------ layouts and contracts

def test_constants_match_golden():
    assert layouts.ADDRESS_BITS == golden.ADDRESS_BITS
    assert layouts.FLAG_BITS == golden.FLAG_BITS
    assert layouts.SPACES == golden.SPACES
    assert layouts.REASONS[:len(golden.REASONS)] == golden.REASONS
    # The widest offending address golden can record fits the error record.
    worst = (golden.MAX_WORDS - 1) + 3 * (golden.MAX_WORDS - 1) ** 2
    assert worst < 1 << (layouts.ERROR_ADDRESS_BITS - 1)


# ------------------------------------------------------------------ random batches

@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_random_batches_match_golden(config, rng, seed):
    system = _system(config)
    hbm, vmem = _images(rng, system)
    descriptors = _batch(rng, system, 24)
    run = run_batch(system, hbm, vmem, descriptors, rng=rng, gap=0.3, stall=0.3, seed=seed)
    expected = _check_against_golden(run, hbm, vmem, descriptors, system.vmem.lanes)
    # The batch must exercise both outcomes, or it proves little.
    assert 0 < len(expected.errors) < len(descriptors)


@pytest.mark.parametrize("beat_queue", [False, True])
def test_back_to_back_batch_without_gaps_matches_golden(beat_queue, rng):
    system = _system("w1-lanes4", beat_queue=beat_queue)
    hbm, vmem = _images(rng, system)
    descriptors = _batch(rng, system, 30, legal=0.95)
    run = run_batch(system, hbm, vmem, descriptors, rng=rng)
    _check_against_golden(run, hbm, vmem, descriptors, system.vmem.lanes)


# ------------------------------------------------------------------ directed cases

D = Descriptor


@pytest.mark.parametrize("case, descriptors", [
    # dst = src + 1 over one range: a forward word loop smears src[0].
    ("smear", [D(("hbm", 10), ("hbm", 11), (12,), (1,), (1,), 0)]),
    # dst = src - 1: each element reads a word a later element writes, so the old value.
    ("shift-down", [D(("vmem", 9), ("vmem", 8), (20,), (1,), (1,), 1)]),
    # A zero destination stride: the last element wins.
    ("last-wins", [D(("hbm", 0), ("vmem", 7), (5, 3), (1, 5), (0, 0), 2)]),
    # A zero source stride: a broadcast.
    ("broadcast", [D(("vmem", 3), ("hbm", 40), (4, 2, 2), (0, 0, 0), (1, 4, 8), 3)]),
    # Negative strides in every dimension.
    ("negative", [D(("hbm", 100), ("vmem", 60), (3, 3, 2), (-1, -4, -20), (-2, -7, 5), 4)]),
    # A later descriptor reads what an earlier one writes, with others in between.
    ("chain", [D(("hbm", 0), ("vmem", 0), (16,), (1,), (1,), 5),
               D(("hbm", 64), ("hbm", 80), (8,), (1,), (1,), 5),
               D(("vmem", 4), ("hbm", 0), (8,), (1,), (1,), 6),
               D(("hbm", 8), ("vmem", 30), (6,), (-1,), (2,), 6)]),
    # The next descriptor reads words the previous one is still writing (its reads are
    # slow HBM reads, so without a fence the VMEM read would overtake them).
    ("raw-across", [D(("hbm", 0), ("vmem", 0), (16,), (1,), (1,), 5),
                    D(("vmem", 12), ("hbm", 100), (4,), (1,), (1,), 6)]),
    # The same, one word each: the next descriptor's read is judged while the first's
    # only beat may still be between the address generator and the burst engine.
    ("raw-next", [D(("hbm", 0), ("vmem", 0), (1,), (1,), (1,), 5),
                  D(("vmem", 0), ("hbm", 50), (1,), (1,), (1,), 6)]),
    # Overlapping 3-D read-modify on one space with a zero middle stride.
    ("overlap-3d", [D(("vmem", 20), ("vmem", 22), (3, 2, 3), (1, 0, 4), (1, 3, 3), 7)]),
])
@pytest.mark.parametrize("beat_queue", [False, True])
def test_directed_orderings_match_golden(case, descriptors, beat_queue, rng):
    # With beat_queue, a beat waits in the queue while the burst engine may look drained:
    # "raw-next" needs the queue counted as not drained.
    system = _system("w2-lanes8-jitter", beat_queue=beat_queue)
    hbm, vmem = _images(rng, system)
    run = run_batch(system, hbm, vmem, descriptors, rng=rng, stall=0.2)
    expected = _check_against_golden(run, hbm, vmem, descriptors, system.vmem.lanes)
    assert not expected.errors
    # The case must move something, so an engine that does nothing fails.
    assert not (np.array_equal(expected.hbm, hbm) and np.array_equal(expected.vmem, vmem))


def test_rejections_record_golden_reasons_and_addresses(rng):
    # Each rejection reason, and range errors whose first offending element has only a bad
    # source, only a bad destination, or both (the source wins); none writes anything.
    descriptors = [
        D(("hbm", 5), ("vmem", 0), (4, 0), (1, 1), (1, 1), 0),           # count: src base
        D(("hbm", 5), ("vmem", 0), (4,), (1,), (1,), N_FLAGS + 1),       # flag: flag id
        D(("hbm", 120), ("vmem", 0), (4, 3), (1, 3), (1, 4), 1),         # src past the end
        D(("hbm", 2), ("vmem", 2), (4, 2), (-1, 5), (1, 1), 1),          # src below 0
        D(("vmem", 0), ("hbm", 126), (2, 3), (1, 2), (1, 1), 1),         # dst, in row 1
        D(("vmem", 0), ("hbm", 127), (3,), (1,), (-200, ), 1),           # dst below 0
        D(("hbm", 127), ("hbm", 127), (2,), (1,), (1,), 1),              # both: src first
        D(("hbm", 0), ("hbm", 0), (2, 2, 4), (0, 0, 50), (1, 2, 3), 1),  # plane 3, src
        D(("hbm", 0), ("vmem", 0), (4,), (1,), (1,), 1),                 # fine: proceeds
        D(("hbm", 0), ("vmem", 0), (100, 100, 100), (0, 0, 0), (0, 1, 0), 2),  # huge box
    ]
    system = _system("w1-lanes4")
    hbm, vmem = _images(rng, system)
    run = run_batch(system, hbm, vmem, descriptors, rng=rng)
    expected = _check_against_golden(run, hbm, vmem, descriptors, system.vmem.lanes)
    assert [reason for _, reason, _ in run["errors"]] == [
        "count", "flag", "src_range", "src_range", "dst_range", "dst_range", "src_range",
        "src_range", "dst_range"]
    assert expected.flags[1] == 4


def test_zero_count_transfer_completes_as_a_rejection(rng):
    system = _system("w1-lanes4")
    hbm, vmem = _images(rng, system)
    descriptors = [D(("hbm", 0), ("vmem", 0), (0,), (1,), (1,), 0)] * 3 + \
                  [D(("hbm", 0), ("vmem", 0), (5,), (1,), (1,), 0)]
    run = run_batch(system, hbm, vmem, descriptors)
    _check_against_golden(run, hbm, vmem, descriptors, system.vmem.lanes)
    assert run["flags"][0] == 5


def test_outstanding_descriptors_with_rejections_in_between(rng):
    # The most transfers in flight while the check is busy rejecting: long transfers
    # interleaved with rejections, never waiting on the error stream.
    system = _system("w4-lanes2-lat1")
    hbm, vmem = _images(rng, system)
    good = D(("hbm", 0), ("vmem", 0), (20,), (1,), (1,), 3)
    bad = D(("hbm", 90), ("vmem", 0), (20,), (1,), (1,), 3)
    descriptors = [good, bad] * 6
    run = run_batch(system, hbm, vmem, descriptors, stall=0.5, rng=rng)
    _check_against_golden(run, hbm, vmem, descriptors, system.vmem.lanes)


def test_bus_error_is_reported_and_nothing_hangs(rng):
    system = DmaSystem(hbm_size=64, vmem_lines=8, lanes=4, words_per_cycle=2, read_latency=4,
                       error_ranges=[(16, 20)], n_flags=N_FLAGS)
    hbm, vmem = _images(rng, system)
    descriptors = [
        D(("hbm", 12), ("vmem", 0), (10,), (1,), (1,), 1),   # reads 16..19 fault
        D(("vmem", 0), ("hbm", 18), (2,), (1,), (1,), 2),    # writes into the fault: dropped
        D(("hbm", 0), ("vmem", 20), (4,), (1,), (1,), 3),    # later ones still run
    ]
    run = run_batch(system, hbm, vmem, descriptors)
    # One record per faulting line read, naming its first word: descriptor 0 reads its
    # words two at a time (a 2-word HBM line), 16-17 and 18-19 from the faulting lines.
    assert run["errors"] == [(0, "bus", 16), (0, "bus", 18)]
    expected_vmem = vmem.copy()
    expected_vmem[0:4] = hbm[12:16]
    expected_vmem[8:10] = hbm[20:22]                 # 4..7 kept their old words
    expected_vmem[20:24] = hbm[0:4]
    assert run["vmem"].tolist() == expected_vmem.tolist()
    assert run["hbm"].tolist() == hbm.tolist()
    assert run["flags"][1:4].tolist() == [10, 2, 4]   # counts complete, so waiters go on


# ------------------------------------------------------------------ throughput

def _cycles(words, rng, beat_queue=False):
    system = _system("w1-lanes4", outstanding=4, beat_queue=beat_queue)
    hbm, vmem = _images(rng, system)
    per = words // 4
    descriptors = [D(("hbm", 32 * k), ("vmem", 16 * k), (per,), (1,), (1,), 0)
                   for k in range(4)]
    return run_batch(system, hbm, vmem, descriptors)["cycles"]


@pytest.mark.parametrize("beat_queue", [False, True])
def test_contiguous_hbm_to_vmem_streams_one_word_a_cycle(beat_queue, rng):
    # Doubling the words of four back-to-back descriptors adds exactly that many cycles:
    # one word a cycle, no gap between descriptors (the beat queue costs no throughput).
    assert _cycles(64, rng, beat_queue) - _cycles(32, rng, beat_queue) == 32


# ------------------------------------------------------------------ parameters

def test_littles_law_is_enforced():
    with pytest.raises(ValueError, match="Little's law"):
        DMA(hbm_size=64, vmem_lines=4, read_latency=10, max_reads=10 + ROUND_TRIP - 1)
    dma = DMA(hbm_size=64, vmem_lines=4, read_latency=10)
    assert dma.max_reads == 10 + ROUND_TRIP
    dma.max_reads = 5                       # changed after construction: elaboration refuses
    with pytest.raises(ValueError, match="Little's law"):
        rtlil.convert(dma)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(hbm_size=64, vmem_lines=4, lanes=3), ValueError, "lanes must be a power of two"),
    (dict(hbm_size=64, vmem_lines=4, hbm_line_words=2.0), TypeError,
     "hbm_line_words must be an int"),
    (dict(hbm_size=63, vmem_lines=4, hbm_line_words=2), ValueError, "multiple of hbm_line_words"),
    (dict(hbm_size=64, vmem_lines=4, n_flags=129), ValueError, "n_flags must be at most"),
    (dict(hbm_size=64, vmem_lines=4, outstanding=0), ValueError, "outstanding must be at least"),
    (dict(hbm_size=1 << 25, vmem_lines=4), ValueError, "hbm_size must be at most"),
    (dict(hbm_size=64, vmem_lines=4, push_dealing="first"), ValueError, "push_dealing"),
    (dict(hbm_size=64, vmem_lines=4, beat_queue=1), TypeError,
     "beat_queue must be a bool, not 1"),
])
def test_bad_dma_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        DMA(**kwargs)


@pytest.mark.parametrize("beat_queue, request_latency", [(False, 3), (True, 4)])
def test_request_and_flag_latencies(beat_queue, request_latency, rng):
    # From the DMA docstring: a descriptor taken in cycle t into an idle DMA has its first
    # memory request valid in cycle t + 3 (t + 4 with beat_queue); a last write accepted
    # in cycle u shows in its flag in cycle u + 2.
    system = _system("w1-lanes4", beat_queue=beat_queue)
    hbm, vmem = _images(rng, system)
    times = {}

    async def tb(ctx):
        load(ctx, system.hbm_words, hbm, 1)
        ctx.set(system.descriptors.payload,
                descriptor_beat(D(("hbm", 9), ("vmem", 2), (3,), (1,), (1,), 4)))
        ctx.set(system.descriptors.valid, 1)
        cycle = 0
        while "flag" not in times:
            if ctx.get(system.descriptors.valid & system.descriptors.ready):
                times["taken"] = cycle
            if ctx.get(system.hbm.port.req.valid) and "request" not in times:
                times["request"] = cycle
            if ctx.get(system.vmem.dma.req.valid & system.vmem.dma.req.ready):
                times["write"] = cycle
            if ctx.get(system.flags[4]):
                times["flag"] = cycle
            await ctx.tick()
            ctx.set(system.descriptors.valid, 0)
            cycle += 1
            assert cycle < 100

    simulate(system, tb)
    assert times["request"] - times["taken"] == request_latency
    assert times["flag"] - times["write"] == 2


def test_system_exposes_its_storages():
    system = _system("w2-lanes8-jitter")
    assert system.hbm_words is system.hbm.words and system.vmem_words is system.vmem.words
    assert (system.hbm_words.depth, system.hbm_words.shape) == (96, 64)
    assert (system.vmem_words.depth, system.vmem_words.shape) == (12, 256)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(jitter=-1), ValueError, "jitter must be at least 0"),
    (dict(words_per_cycle=3), ValueError, "power of two"),
    (dict(error_ranges=[(0, 300)]), ValueError, "at most 192"),
    (dict(max_reads=4), ValueError, "Little's law"),
    (dict(network_ports=6, guests=1, n_chips=4), ValueError,
     "network_ports must be at most 5, not 6"),
])
def test_bad_system_parameters(kwargs, error, match):
    params = {**CONFIGS["w2-lanes8-jitter"], **kwargs}
    with pytest.raises(error, match=match):
        DmaSystem(**params)
