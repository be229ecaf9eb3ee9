# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct components whose __init__ raises.)
"""The DMA's multi-word path against golden.memory.run: contiguous rows moved a line per
request, misaligned source and destination rotated and merged, runs crossing lines, every
pair of spaces, negative and zero strides, overlap; the number of requests that takes; and
the exact cycles of the latency figures."""

import functools

import numpy as np
import pytest
from amaranth.hdl import Const, Module
from amaranth.sim import Simulator

from golden import memory as golden
from golden.memory import Descriptor as D
from hdl.lib.memory_port import MemoryPortSignature
from hdl.memory import AddressGenerator, BurstEngine, DmaSystem, Receiver
from hdl.memory.dma_lanes import lane_mask, rotate_words_left
from sim import dma as sim_dma
from sim.verilog.export import export
from sim.verilog.lint import lint

from .simtools import descriptor_beat, load, run_batch, simulate

N_FLAGS = 8
CONFIGS = {
    # Equal lines: a beat is a whole line.
    "w8-lanes8": dict(hbm_size=512, vmem_lines=48, lanes=8, words_per_cycle=8, read_latency=5),
    # HBM lines narrower than VMEM's, with jitter: beats of 4, VMEM lines merged from two.
    "w4-lanes8-jitter": dict(hbm_size=512, vmem_lines=48, lanes=8, words_per_cycle=4,
                             read_latency=3, jitter=2, outstanding=2),
    # VMEM lines narrower: beats of 2.
    "w8-lanes2": dict(hbm_size=512, vmem_lines=192, lanes=2, words_per_cycle=8, read_latency=2),
}

# Every case moves something, reads and writes in range of every config (384-word VMEM).
CASES = {
    "aligned": [D(("hbm", 64), ("vmem", 128), (64,), (1,), (1,), 1)],
    "misaligned-crossing-lines": [D(("hbm", 3), ("vmem", 13), (61,), (1,), (1,), 1)],
    "inside-one-line": [D(("hbm", 9), ("vmem", 2), (3,), (1,), (1,), 1)],
    "ends-at-a-line-end": [D(("hbm", 5), ("vmem", 5), (11,), (1,), (1,), 1)],
    "vmem-to-hbm": [D(("vmem", 7), ("hbm", 100), (40,), (1,), (1,), 2)],
    "hbm-to-hbm": [D(("hbm", 1), ("hbm", 300), (50,), (1,), (1,), 2)],
    "vmem-to-vmem": [D(("vmem", 3), ("vmem", 200), (45,), (1,), (1,), 2)],
    "rows-2d-misaligned": [D(("hbm", 2), ("vmem", 1), (13, 5), (1, 17), (1, 14), 3)],
    "rows-3d-negative-outer": [D(("hbm", 50), ("vmem", 300), (9, 3, 2), (1, 10, -40),
                                 (1, -30, 9), 3)],
    "contiguous-across-rows": [D(("vmem", 5), ("hbm", 77), (6, 4), (1, 6), (1, 6), 3)],
    "negative-inner": [D(("hbm", 60), ("vmem", 90), (20,), (-1,), (-1,), 4)],
    "reverse": [D(("hbm", 60), ("vmem", 90), (20,), (-1,), (1,), 4)],
    "broadcast-merged": [D(("hbm", 33), ("vmem", 41), (19, 2), (0, 1), (1, 19), 4)],
    "zero-destination-stride": [D(("hbm", 10), ("vmem", 41), (19,), (1,), (0,), 4)],
    "gather": [D(("hbm", 7), ("vmem", 3), (21,), (3,), (1,), 5)],
    "scatter": [D(("hbm", 7), ("vmem", 3), (21,), (1,), (2,), 5)],
    "overlap-smear": [D(("vmem", 10), ("vmem", 11), (30,), (1,), (1,), 6)],
    "overlap-ahead-3": [D(("vmem", 10), ("vmem", 13), (30,), (1,), (1,), 6)],
    "overlap-ahead-8": [D(("hbm", 16), ("hbm", 24), (40,), (1,), (1,), 6)],
    "overlap-behind": [D(("vmem", 20), ("vmem", 15), (40,), (1,), (1,), 6)],
    "overlap-2d": [D(("hbm", 4), ("hbm", 6), (10, 3), (1, 12), (1, 12), 6)],
    "chain-across-descriptors": [D(("hbm", 0), ("vmem", 0), (40,), (1,), (1,), 7),
                                 D(("vmem", 5), ("hbm", 3), (30,), (1,), (1,), 7),
                                 D(("hbm", 1), ("vmem", 60), (33,), (1,), (1,), 7)],
}


@functools.cache
def _system(config, **extra):
    # One object per configuration: its runs share one compiled simulation (support.simulate).
    return DmaSystem(**CONFIGS[config], n_flags=N_FLAGS, **extra)


def _images(rng, system):
    return (rng.integers(0, 1 << 32, system.hbm.size, dtype=np.uint32),
            rng.integers(0, 1 << 32, system.vmem.size, dtype=np.uint32))


def _check(run, hbm, vmem, descriptors, lanes):
    expected = golden.run(hbm, vmem, descriptors, n_flags=N_FLAGS, lanes=lanes)
    for name in ("hbm", "vmem"):                      # whole images: no stray write
        got, want = run[name], getattr(expected, name)
        bad = np.flatnonzero(got != want)
        assert not bad.size, (f"{name}: {bad.size} words differ, first at {bad[0]}: "
                              f"got {got[bad[0]]:#x}, expected {want[bad[0]]:#x}")
    assert run["flags"].tolist() == expected.flags.tolist()
    assert run["errors"] == [tuple(e) for e in expected.error_records]
    return expected


@pytest.mark.parametrize("case", sorted(CASES))
def test_multi_word_cases_match_golden(case, rng):
    system = _system("w8-lanes8")
    hbm, vmem = _images(rng, system)
    descriptors = CASES[case]
    run = run_batch(system, hbm, vmem, descriptors, rng=rng, stall=0.2)
    expected = _check(run, hbm, vmem, descriptors, system.vmem.lanes)
    assert not expected.errors
    assert not (np.array_equal(expected.hbm, hbm) and np.array_equal(expected.vmem, vmem))


@pytest.mark.parametrize("config", ["w4-lanes8-jitter", "w8-lanes2"])
def test_multi_word_cases_in_one_batch_match_golden(config, rng):
    # The other line widths, every case in turn (one simulation keeps the suite fast).
    system = _system(config)
    hbm, vmem = _images(rng, system)
    descriptors = [d for case in sorted(CASES) for d in CASES[case]]
    run = run_batch(system, hbm, vmem, descriptors, rng=rng, stall=0.2)
    assert not _check(run, hbm, vmem, descriptors, system.vmem.lanes).errors


def contiguous_descriptor(rng, sizes, *, legal=0.9):
    """A random descriptor whose innermost dimension is mostly contiguous on both sides:
    random misaligned bases, rows up to a few lines, outer strides of any sign."""
    dims = int(rng.integers(1, 4))
    counts = [int(rng.integers(1, 40))] + [int(rng.integers(1, 4)) for _ in range(dims - 1)]
    spaces = list(sizes)
    src_space = spaces[int(rng.integers(2))]
    dst_space = src_space if rng.random() < 0.3 else spaces[int(rng.integers(2))]
    sides = []
    for space in (src_space, dst_space):
        inner = 1 if rng.random() < 0.8 else int(rng.integers(-3, 4))
        strides = [inner] + [int(rng.integers(-60, 61)) for _ in range(dims - 1)]
        lo = sum(min(0, (c - 1) * s) for c, s in zip(counts, strides))
        hi = sum(max(0, (c - 1) * s) for c, s in zip(counts, strides))
        size = sizes[space]
        if rng.random() < legal and hi - lo < size:
            base = int(rng.integers(-lo, size - hi))
        else:
            base = int(rng.integers(0, size))
        sides.append(((space, base), tuple(strides)))
    (src, ss), (dst, ds) = sides
    return D(src, dst, tuple(counts), ss, ds, int(rng.integers(N_FLAGS)))


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_random_contiguous_batches_match_golden(config, rng, seed):
    system = _system(config)
    hbm, vmem = _images(rng, system)
    sizes = {"hbm": system.hbm.size, "vmem": system.vmem.size}
    descriptors = [contiguous_descriptor(rng, sizes) for _ in range(16)]
    run = run_batch(system, hbm, vmem, descriptors, rng=rng, gap=0.2, stall=0.2, seed=seed)
    expected = _check(run, hbm, vmem, descriptors, system.vmem.lanes)
    assert len(expected.errors) < len(descriptors)


# ------------------------------------------------------------------ requests per line

@pytest.mark.parametrize("config, descriptor, reads, writes", [
    # 3..63 in 8-word lines 0..7; 13..73 in lines 1..9: one request per line touched.
    ("w8-lanes8", D(("hbm", 3), ("vmem", 13), (61,), (1,), (1,), 1), ("hbm", 8), ("vmem", 9)),
    # One-word HBM reads merged into 4-word VMEM lines: 2..15 is lines 0..3.
    ("w1-lanes4", D(("hbm", 0), ("vmem", 2), (14,), (1,), (1,), 1), ("hbm", 14), ("vmem", 4)),
    # Two-word VMEM lines into 8-word HBM lines: 1..16 is VMEM lines 0..8, HBM 3..18 is 0..2.
    ("w8-lanes2", D(("vmem", 1), ("hbm", 3), (16,), (1,), (1,), 1), ("vmem", 9), ("hbm", 3)),
    # A gather: one read per element, merged writes (hbm 2..22 is lines 0..2).
    ("w8-lanes8", D(("vmem", 0), ("hbm", 2), (21,), (5,), (1,), 1), ("vmem", 21), ("hbm", 3)),
])
def test_each_line_is_requested_once(config, descriptor, reads, writes, rng):
    params = CONFIGS.get(config) or dict(hbm_size=64, vmem_lines=16, lanes=4, words_per_cycle=1,
                                         read_latency=3)
    system = DmaSystem(**params, n_flags=N_FLAGS)
    hbm, vmem = _images(rng, system)
    run = run_batch(system, hbm, vmem, [descriptor], rng=rng)
    _check(run, hbm, vmem, [descriptor], system.vmem.lanes)
    requests = {key: len(cycles) for key, cycles in run["requests"].items()}
    other = {"hbm": "vmem", "vmem": "hbm"}
    assert requests == {(reads[0], "read"): reads[1], (writes[0], "write"): writes[1],
                        (other[reads[0]], "read"): 0, (other[writes[0]], "write"): 0}


# ------------------------------------------------------------------ exact cycles

def _trace(system, descriptors, hbm, *, cycles=200):
    """Per cycle from the first descriptor offered: descriptor taken, HBM read accepted,
    VMEM write accepted, and the value of flag 1."""
    log = []

    async def tb(ctx):
        load(ctx, system.hbm_words, hbm, system.hbm.words_per_cycle)
        pending = list(descriptors)
        for _ in range(cycles):
            if pending:
                ctx.set(system.descriptors.payload, descriptor_beat(pending[0]))
            ctx.set(system.descriptors.valid, bool(pending))
            _, _, taken, read, write, flag = await ctx.tick().sample(
                system.descriptors.valid & system.descriptors.ready,
                system.hbm.port.req.valid & system.hbm.port.req.ready,
                system.vmem.dma.req.valid & system.vmem.dma.req.ready,
                system.flags[1])
            if taken:
                pending.pop(0)
            log.append((taken, read, write, flag))

    simulate(system, tb)
    return [[cycle for cycle, entry in enumerate(log) if entry[k]] for k in range(3)], log


def test_back_to_back_descriptors_stream_without_a_gap(rng):
    # Three aligned 2-line descriptors into an idle DMA: the first read 3 cycles after the
    # first descriptor is taken, then one line read a cycle across descriptors; each line
    # written read_latency + 2 cycles after its read; the last flag 2 cycles after the
    # last write.
    latency = 5
    system = DmaSystem(hbm_size=256, vmem_lines=16, lanes=8, words_per_cycle=8,
                       read_latency=latency, n_flags=N_FLAGS)
    hbm, _ = _images(rng, system)
    descriptors = [D(("hbm", 32 * k), ("vmem", 16 * k), (16,), (1,), (1,), 1) for k in range(3)]
    (taken, reads, writes), log = _trace(system, descriptors, hbm)
    assert taken == [0, 1, 2]
    assert reads == list(range(3, 9))
    assert writes == [r + latency + 2 for r in reads]
    first_full = next(cycle for cycle, entry in enumerate(log) if entry[3] == 48)
    assert first_full == writes[-1] + 2


def test_run_stamps_measure_the_latencies():
    # The stamps the RTL records agree with the cycles the testbench above observes.
    hbm = np.arange(1024, dtype=np.uint32)
    vmem = np.zeros(512, np.uint32)
    descriptors = [D(("hbm", 0), ("vmem", 0), (512,), (1,), (1,), 1),
                   D(("hbm", 512), ("vmem", 0), (512,), (1,), (1,), 2)]
    run, stamps = sim_dma.run_stamped(hbm, vmem, descriptors, words_per_cycle=8,
                                      read_latency=6, backend="amaranth")
    assert run.vmem.tolist() == list(range(512, 1024))
    assert run.flags[1:3].tolist() == [512, 512]
    assert stamps.request_latency == 3 and stamps.flag_latency == 2
    # 128 lines read, then written, on 128 consecutive cycles: a line a cycle, no gap
    # between the descriptors; each line written read_latency + 2 cycles after its read.
    assert stamps.first_read == stamps.first_request
    assert stamps.last_read - stamps.first_read + 1 == 128
    assert stamps.write_cycles == stamps.stream_cycles == 128
    assert stamps.first_write == stamps.first_read + 6 + 2


# ------------------------------------------------------------------ parts and export

def test_lane_networks():
    words = [0x100 + j for j in range(8)]
    value = sum(w << (32 * j) for j, w in enumerate(words))
    got = {}

    async def tb(ctx):
        for amount in range(8):
            got[amount] = ctx.get(rotate_words_left(Const(value, 256), Const(amount, 3), 8))
        got["mask"] = [ctx.get(lane_mask(Const(first, 3), Const(end, 5), 16))
                       for first, end in ((0, 0), (2, 5), (7, 16), (3, 3))]

    sim = Simulator(Module())
    sim.add_testbench(tb)
    sim.run()
    for amount in range(8):
        moved = words[-amount:] + words[:-amount]          # word j to lane j + amount
        assert got[amount] == sum(w << (32 * j) for j, w in enumerate(moved))
    assert got["mask"] == [0, 0b11100, 0b1111111110000000, 0]


def test_export_is_lint_clean():
    # Lines of different widths, and faulting ranges. (Not jitter: the `seed == 0` of
    # hdl/lib/xorshift.py is not lint-clean.)
    params = dict(hbm_size=96, vmem_lines=20, lanes=8, words_per_cycle=2,
                  error_ranges=[(16, 20)], n_flags=5)
    assert lint(export("dma", params).verilog, "dma") == []


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(line_words=8), TypeError, "line_words must be a pair"),
    (dict(line_words=(8, 6)), ValueError, "vmem line words must be a power of two"),
    (dict(line_words=(0, 8)), ValueError, "hbm line words must be at least 1"),
])
def test_bad_address_generator_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        AddressGenerator(**kwargs)


@pytest.mark.parametrize("ports, error, message", [
    ({0: MemoryPortSignature(addr_width=4, words=2)}, ValueError, "space codes 0 .hbm. and 1"),
    ({0: MemoryPortSignature(addr_width=4, words=2), 1: "vmem"}, TypeError,
     "port 1 must be a MemoryPortSignature"),
    ({0: MemoryPortSignature(addr_width=4, words=3), 1: MemoryPortSignature(addr_width=4)},
     ValueError, "port 0 needs a power-of-two line"),
])
def test_burst_engine_and_receiver_check_their_ports(ports, error, message):
    for make in (lambda: BurstEngine(ports=ports, read_latency=4),
                 lambda: Receiver(ports=ports, sizes=(64, 64), n_flags=4)):
        with pytest.raises(error, match=message):
            make()
