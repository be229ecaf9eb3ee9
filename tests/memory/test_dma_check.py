"""The DMA's descriptor check on its own, over the full 24-bit address space: verdicts and
recorded addresses as golden.memory.validate, extents and word counts of accepted ones, and
the latency of range rejections."""

import numpy as np

from golden import memory as golden
from golden.memory import Descriptor
from hdl.memory import REASONS, DescriptorCheck
from sim import dma

from .simtools import descriptor_beat, simulate

HBM, VMEM, N_FLAGS = golden.MAX_WORDS, 3 << 20, 16


def _random(rng):
    dims = int(rng.integers(1, 4))
    big = rng.random() < 0.3
    counts = [int(c) for c in rng.integers(1, 40 if big else 6, dims)]
    if rng.random() < 0.05:
        counts[0] = 0
    scale = [1, 1 << 10, 1 << 20, (1 << 24) - 1][int(rng.integers(4))]

    def strides():
        return tuple(int(s) for s in rng.integers(-scale, scale + 1, dims))

    spaces = ["hbm", "vmem"]
    src = (spaces[int(rng.integers(2))], int(rng.integers(0, golden.MAX_WORDS)))
    dst = (spaces[int(rng.integers(2))], int(rng.integers(0, golden.MAX_WORDS)))
    if rng.random() < 0.5:             # mostly-legal ones: small strides near the middle
        src, dst = (src[0], 1 << 19), (dst[0], 1 << 19)
    flag = int(rng.integers(0, N_FLAGS + 2))
    return Descriptor(src, dst, tuple(counts), strides(), strides(), flag)


def test_check_matches_golden_validate(rng):
    descriptors = [_random(rng) for _ in range(60)]
    check = DescriptorCheck(hbm_size=HBM, vmem_size=VMEM, n_flags=N_FLAGS)
    jobs, errors = [], []

    async def feeder(ctx):
        for d in descriptors:
            ctx.set(check.descriptors.payload, descriptor_beat(d))
            ctx.set(check.descriptors.valid, 1)
            await ctx.tick().until(check.descriptors.ready)
        ctx.set(check.descriptors.valid, 0)

    async def collector(ctx):
        ctx.set(check.jobs.ready, 1)
        ctx.set(check.errors.ready, 1)
        cycles = 0
        while len(jobs) + len(errors) < len(descriptors):
            _, _, jv, job, ev, err = await ctx.tick().sample(
                check.jobs.valid, check.jobs.payload, check.errors.valid, check.errors.payload)
            if jv:
                jobs.append((job.id, job.words, job.src_lo, job.src_hi, job.dst_lo,
                             job.dst_hi, job.overlap))
            if ev:
                errors.append((err.id, REASONS[err.reason], err.address))
            cycles += 1
            assert cycles < 50_000

    simulate(check, feeder, collector)
    want_errors, want_jobs = [], []
    for index, d in enumerate(descriptors):
        verdict = golden.validate(d, hbm_words=HBM, vmem_words=VMEM, n_flags=N_FLAGS,
                                  index=index)
        if verdict is not None:
            want_errors.append(tuple(verdict))
            continue
        src, dst = golden.addresses(d)
        overlap = d.src[0] == d.dst[0] and src.min() <= dst.max() and dst.min() <= src.max()
        want_jobs.append((index, d.words, int(src.min()), int(src.max()), int(dst.min()),
                          int(dst.max()), int(overlap)))
    assert errors == want_errors
    assert jobs == want_jobs
    reasons = {reason for _, reason, _ in want_errors}
    assert {"src_range", "dst_range", "flag"} <= reasons and len(want_jobs) > 10
    # Some recorded address lies outside any 24-bit space, below 0 or far above.
    assert any(a < 0 for _, r, a in want_errors if r.endswith("range"))
    assert any(a >= golden.MAX_WORDS for _, r, a in want_errors if r.endswith("range"))


# ---- range rejections: the first offending element, found by the scan's binary search.

def _split(total, dims, rng):
    """Counts of ``dims`` dimensions whose product is at most ``total``, log-uniformly
    shared out."""
    shares = rng.dirichlet(np.ones(dims)) * np.log2(total)
    return [max(1, int(2 ** s)) for s in shares]


def _stride(rng, count):
    """Zero, unit, small, the count (packed) or any size, either sign."""
    magnitude = [0, 1, int(rng.integers(2, 65)), count,
                 int(rng.integers(1, golden.MAX_WORDS))][int(rng.integers(5))]
    return magnitude * (1 if rng.random() < 0.5 else -1)


def _place(rng, lo, hi, size, overshoot):
    """A base for offsets from ``lo`` to ``hi``: in ``[0, size)`` if they fit, or, with
    ``overshoot``, leaving it by a few words at one end. None if no such base is in
    ``[0, MAX_WORDS)``."""
    if overshoot:
        delta = int(rng.integers(1, 4)) if rng.random() < 0.7 else int(rng.integers(1, 1 << 12))
        # Past the end away from element 0 (offset 0), where there is one.
        high = hi > 0 and (lo == 0 or rng.random() < 0.6)
        base = size - 1 - hi + delta if high else -lo - delta
    else:
        base = int(rng.integers(-lo, size - hi)) if size - hi > -lo else -1
    return base if 0 <= base < golden.MAX_WORDS else None


def _out_of_range(rng, *, log_words=(1, 20)):
    """A descriptor the check rejects for range. Mostly one side's extent overshoots its
    space by a few words at one end, so the first offending element lies deep inside;
    sometimes both sides share a layout, overshooting on the same element; sometimes
    the bases are anywhere."""
    sizes = {"hbm": HBM, "vmem": VMEM}
    while True:
        dims = int(rng.integers(1, 4))
        counts = _split(2 ** rng.uniform(*log_words), dims, rng)
        strides = {side: tuple(_stride(rng, c) for c in counts) for side in ("src", "dst")}
        spaces = {side: ["hbm", "vmem"][int(rng.integers(2))] for side in ("src", "dst")}
        bad = "src" if rng.random() < 0.5 else "dst"
        bases = {side: int(rng.integers(golden.MAX_WORDS)) for side in ("src", "dst")}
        if rng.random() < 0.85:
            for side in ("src", "dst"):
                offsets = [(c - 1) * s for c, s in zip(counts, strides[side])]
                lo, hi = sum(min(o, 0) for o in offsets), sum(max(o, 0) for o in offsets)
                bases[side] = _place(rng, lo, hi, sizes[spaces[side]], side == bad)
            if None in bases.values():
                continue
        if rng.random() < 0.2:
            for part in (strides, spaces, bases):
                part["dst"] = part["src"]
        d = Descriptor((spaces["src"], bases["src"]), (spaces["dst"], bases["dst"]),
                       tuple(counts), strides["src"], strides["dst"], int(rng.integers(N_FLAGS)))
        verdict = golden.validate(d, hbm_words=HBM, vmem_words=VMEM, n_flags=N_FLAGS)
        if verdict is not None and verdict.reason.endswith("range"):
            return d


def _first_bad_element(d):
    src, dst = golden.addresses(d)
    sizes = {"hbm": HBM, "vmem": VMEM}
    bad = (src < 0) | (src >= sizes[d.src[0]]) | (dst < 0) | (dst >= sizes[d.dst[0]])
    return int(np.argmax(bad))


def _one_at_a_time(descriptors):
    """Each descriptor's record ``(id, reason, address)`` (None when accepted) and its
    latency: clock edges from the one that takes it to the one that takes its verdict."""
    check = DescriptorCheck(hbm_size=HBM, vmem_size=VMEM, n_flags=N_FLAGS)
    out = []

    async def bench(ctx):
        ctx.set(check.jobs.ready, 1)
        ctx.set(check.errors.ready, 1)
        for d in descriptors:
            ctx.set(check.descriptors.payload, descriptor_beat(d))
            ctx.set(check.descriptors.valid, 1)
            await ctx.tick().until(check.descriptors.ready)
            ctx.set(check.descriptors.valid, 0)
            for edges in range(1, 1000):
                _, _, job, error, record = await ctx.tick().sample(
                    check.jobs.valid, check.errors.valid, check.errors.payload)
                if job or error:
                    break
            else:
                raise AssertionError(f"no verdict for {d} in 1000 cycles")
            out.append(((record.id, REASONS[record.reason], record.address) if error else None,
                        edges))

    simulate(check, bench)
    return out


def _range_latency_bound(d):
    """The docstring's bound: offered ``3 + S`` cycles after it is taken, the scan taking
    ``S <= 4 + sum(ceil(log2(count)))`` cycles."""
    return 3 + 4 + sum((c - 1).bit_length() for c in d.counts)


def test_range_rejections_record_the_first_offending_element(rng):
    descriptors = [_out_of_range(rng) for _ in range(70)]
    # Two huge ones: over 2**23 words in all.
    descriptors += [_out_of_range(rng, log_words=(23.5, 24)) for _ in range(2)]
    flagged = Descriptor(("hbm", 0), ("vmem", 0), (4,), (1,), (1,), N_FLAGS)  # calibration
    got = _one_at_a_time(descriptors + [flagged])
    for index, (d, (record, edges)) in enumerate(zip(descriptors, got)):
        want = golden.validate(d, hbm_words=HBM, vmem_words=VMEM, n_flags=N_FLAGS,
                               index=index)
        assert record == tuple(want), (index, d)
        assert edges <= _range_latency_bound(d), (index, d, edges)
    assert got[-1] == ((len(descriptors), "flag", N_FLAGS), 2)     # as the docstring says
    # The set covers what the search must get right.
    reasons = [golden.validate(d, hbm_words=HBM, vmem_words=VMEM, n_flags=N_FLAGS).reason
               for d in descriptors]
    assert {"src_range", "dst_range"} <= set(reasons)
    assert {len([c for c in d.counts if c > 1]) for d in descriptors} >= {1, 2, 3}
    strides = [s for d in descriptors for s in d.src_strides + d.dst_strides]
    assert min(strides) < 0 < max(strides) and 0 in strides
    assert max(d.words for d in descriptors) > 1 << 23
    deep = [_first_bad_element(d) for d in descriptors if d.words <= 1 << 20]
    assert sum(e > 1000 for e in deep) >= 5 and max(deep) > 10_000


def test_a_huge_range_rejection_is_judged_within_a_hundred_cycles():
    # A contiguous 3-D destination whose last element, of 8.6M, is the first past HBM:
    # every level is searched to its end. A one-box-a-cycle scan took 130 + 258 + 258.
    counts = (258, 258, 130)
    words = 258 * 258 * 130
    worst = Descriptor(("hbm", 0), ("hbm", HBM - words + 1), counts, (1, 258, 258 * 258),
                       (1, 258, 258 * 258), 0)
    # 16M words, the first bad one the seventh: the destination runs down from 5.
    long_row = Descriptor(("hbm", 0), ("vmem", 5), ((1 << 24) - 1,), (1,), (-1,), 3)
    got = _one_at_a_time([worst, long_row])
    assert [record for record, _ in got] == [(0, "dst_range", HBM), (1, "dst_range", -1)]
    assert [record for record, _ in got] == [
        tuple(golden.validate(d, hbm_words=HBM, vmem_words=VMEM, n_flags=N_FLAGS, index=i))
        for i, d in enumerate((worst, long_row))]
    for (_, edges), d in zip(got, (worst, long_row)):
        assert edges <= min(_range_latency_bound(d), 100), (d, edges)


def test_dma_run_rejects_a_long_row_as_golden(rng):
    # Rejected first at element 1,348 of 1,500: when the scan stepped one element a cycle
    # this outlasted the watchdog (1,032 quiet cycles), as the dma regression found.
    hbm = rng.integers(0, 1 << 32, 4096, dtype=np.uint32)
    vmem = rng.integers(0, 1 << 32, 256 * 8, dtype=np.uint32)
    d = Descriptor(("vmem", 10), ("vmem", 700), (1500,), (1,), (1,), 14)
    ok = Descriptor(("hbm", 100), ("vmem", 40), (64,), (1,), (1,), 2)
    expected = golden.run(hbm, vmem, [d, ok], n_flags=16, lanes=8)
    assert expected.error_records == [golden.DmaError(0, "dst_range", 2048)]
    got = dma.run(hbm, vmem, [d, ok], lanes=8, n_flags=16, backend="amaranth", read_latency=8,
                  outstanding=4, words_per_cycle=1)
    assert got.errors == expected.errors
    np.testing.assert_array_equal(got.hbm, expected.hbm)
    np.testing.assert_array_equal(got.vmem, expected.vmem)
    np.testing.assert_array_equal(got.flags, expected.flags)
