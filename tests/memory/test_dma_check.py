"""The DMA's descriptor check on its own, over the full 24-bit address space: verdicts and
recorded addresses as golden.memory.validate, extents and word counts of accepted ones."""


from golden import memory as golden
from golden.memory import Descriptor
from hdl.memory import REASONS, DescriptorCheck

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
