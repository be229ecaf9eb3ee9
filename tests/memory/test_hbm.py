# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct components whose __init__ raises.)
"""The HBM model: golden.memory.HbmTiming cycle for cycle without jitter, a lone read in
exactly read_latency, full bandwidth when streamed, data as of the accept cycle, bounded
seeded jitter, and faulting ranges."""

import numpy as np
import pytest

from golden.memory import HbmTiming
from hdl.memory import HBM

from .simtools import load, pack_lines, read_back, simulate


def _drive(hbm, requests, *, ready=None, seed=0, start=False, preload=None, limit=20_000):
    """Issue ``requests`` (dicts with addr, write, data, mask, at) in order, each offered
    from cycle ``at`` on; the response stream is ready on the cycles ``ready(cycle)``.
    Returns accept cycles and the responses as (cycle, data, error)."""
    accepts, responses = [], []
    n_reads = sum(not r.get("write", 0) for r in requests)
    ready = ready or (lambda cycle: True)

    async def driver(ctx):
        if preload is not None:
            load(ctx, hbm.words, preload, hbm.words_per_cycle)
        ctx.set(hbm.seed, seed)
        # One edge with start low loads the seed; cycle 0 is the one after it.
        await ctx.tick()
        ctx.set(hbm.start, start)
        cycle = 0
        for r in requests:
            while cycle < r.get("at", 0):
                await ctx.tick()
                cycle += 1
            ctx.set(hbm.port.req.payload, {"addr": r["addr"], "write": r.get("write", 0),
                                          "data": r.get("data", [0] * hbm.words_per_cycle),
                                          "mask": r.get("mask", 0)})
            ctx.set(hbm.port.req.valid, 1)
            while True:
                # Sampled at the edge: ready follows resp.ready, which the monitor sets.
                _, _, taken = await ctx.tick().sample(hbm.port.req.ready)
                cycle += 1
                if taken:
                    accepts.append(cycle - 1)
                    break
            ctx.set(hbm.port.req.valid, 0)

    async def monitor(ctx):
        await ctx.tick()
        cycle = 0
        while len(responses) < n_reads:
            on = ready(cycle)
            ctx.set(hbm.port.resp.ready, on)
            _, _, valid, payload = await ctx.tick().sample(hbm.port.resp.valid,
                                                           hbm.port.resp.payload)
            if valid and on:
                responses.append((cycle, list(payload.data), payload.error))
            cycle += 1
            assert cycle < limit, "HBM hung"

    simulate(hbm, driver, monitor)
    return accepts, responses


@pytest.mark.parametrize("wpc, latency", [(1, 1), (1, 5), (2, 3), (4, 9)])
def test_lone_read_takes_exactly_read_latency(wpc, latency):
    hbm = HBM(size=64, words_per_cycle=wpc, read_latency=latency)
    accepts, responses = _drive(hbm, [{"addr": 3, "at": 2}])
    assert accepts == [2]
    assert responses[0][0] - accepts[0] == latency


@pytest.mark.parametrize("latency, outstanding", [(1, 1), (4, 4), (6, 3), (3, 8)])
def test_word_trace_matches_hbm_timing(latency, outstanding, rng):
    # Random offer times, some together, some apart: every return cycle as golden's.
    n = 40
    offered = np.sort(rng.integers(0, 60, n)).astype(np.int64)
    hbm = HBM(size=32, words_per_cycle=1, read_latency=latency, max_outstanding=outstanding)
    requests = [{"addr": int(a), "at": int(t)} for a, t in zip(rng.integers(0, 32, n), offered)]
    _, responses = _drive(hbm, requests)
    timing = HbmTiming(words_per_cycle=1, read_latency=latency, max_outstanding=outstanding)
    assert [c for c, _, _ in responses] == timing.read_returns(offered).tolist()


@pytest.mark.parametrize("wpc, latency, outstanding", [
    (1, 5, 5), (2, 4, 8), (4, 3, 12),        # bandwidth-bound: max_outstanding = w * lat
    (2, 6, 4), (4, 5, 8),                    # outstanding-bound
])
def test_streaming_matches_hbm_timing(wpc, latency, outstanding):
    words = 64 * wpc
    hbm = HBM(size=words, words_per_cycle=wpc, read_latency=latency,
              max_outstanding=outstanding)
    _, responses = _drive(hbm, [{"addr": line} for line in range(words // wpc)])
    timing = HbmTiming(words_per_cycle=wpc, read_latency=latency, max_outstanding=outstanding)
    assert responses[-1][0] == timing.stream_cycles(words)
    if outstanding == wpc * latency:
        # Full bandwidth: one line, words_per_cycle words, every cycle once streaming.
        cycles = [c for c, _, _ in responses]
        assert cycles == list(range(latency, latency + len(cycles)))


def test_reads_return_the_line_as_of_their_accept(rng):
    # Writes (masked) and reads interleaved; a write right after a read in flight does not
    # change that read's answer. Expected lines are computed here, write by write.
    wpc = 4
    hbm = HBM(size=32, words_per_cycle=wpc, read_latency=6)
    image = rng.integers(0, 1 << 32, 32, dtype=np.uint32)
    model = image.reshape(-1, wpc).copy()
    requests, expected = [], []
    for _ in range(60):
        line = int(rng.integers(0, 8))
        if rng.random() < 0.5:
            data = [int(v) for v in rng.integers(0, 1 << 32, wpc)]
            mask = int(rng.integers(0, 1 << wpc))
            requests.append({"addr": line, "write": 1, "data": data, "mask": mask})
            for j in range(wpc):
                if mask >> j & 1:
                    model[line, j] = data[j]
        else:
            requests.append({"addr": line})
            expected.append(model[line].tolist())
    stalls = rng.random(10_000) < 0.4
    _, responses = _drive(hbm, requests, preload=image, ready=lambda c: not stalls[c])
    assert [d for _, d, _ in responses] == expected


@pytest.mark.parametrize("seed_a, seed_b", [(1, 2)])
def test_jitter_is_bounded_seeded_and_in_order(seed_a, seed_b, rng):
    latency, jitter = 5, 6

    def lone_read_latencies(seed):
        hbm = HBM(size=16, read_latency=latency, jitter=jitter)
        requests = [{"addr": k % 16, "at": 20 * k} for k in range(24)]
        accepts, responses = _drive(hbm, requests, seed=seed, start=True,
                                    preload=np.arange(16, dtype=np.uint32) + 100)
        assert [d[0] for _, d, _ in responses] == [100 + k % 16 for k in range(24)]
        return [c - a for (c, _, _), a in zip(responses, accepts)]

    first = lone_read_latencies(seed_a)
    assert all(latency <= x <= latency + jitter for x in first)
    assert len(set(first)) > 2, "jitter should vary the latency"
    assert lone_read_latencies(seed_a) == first
    assert lone_read_latencies(seed_b) != first


def test_jittered_stream_keeps_order_and_data(rng):
    hbm = HBM(size=64, words_per_cycle=2, read_latency=4, max_outstanding=20, jitter=7)
    image = rng.integers(0, 1 << 32, 64, dtype=np.uint32)
    lines = [int(x) for x in rng.integers(0, 32, 50)]
    _, responses = _drive(hbm, [{"addr": line} for line in lines], seed=9, start=True,
                          preload=image)
    assert [d for _, d, _ in responses] == [image[2 * ln:2 * ln + 2].tolist() for ln in lines]


def test_error_ranges_fault_reads_and_drop_writes(rng):
    hbm = HBM(size=32, words_per_cycle=2, read_latency=3, error_ranges=[(8, 12), (30, 32)])
    image = rng.integers(1, 1 << 32, 32, dtype=np.uint32)
    requests = [{"addr": 3}, {"addr": 4}, {"addr": 5}, {"addr": 6}, {"addr": 15},
                {"addr": 5, "write": 1, "data": [1, 2], "mask": 3},
                {"addr": 7, "write": 1, "data": [3, 4], "mask": 1},
                {"addr": 15, "write": 1, "data": [5, 6], "mask": 3}]
    final = {}

    accepts, responses = _drive(hbm, requests[:5], preload=image)
    assert [(d, e) for _, d, e in responses] == [
        (image[6:8].tolist(), 0), ([0, 0], 1), ([0, 0], 1), (image[12:14].tolist(), 0),
        ([0, 0], 1)]
    # Faulting reads answer on time like the others.
    assert [c - a for (c, _, _), a in zip(responses, accepts)] == [3] * 5

    hbm2 = HBM(size=32, words_per_cycle=2, read_latency=3, error_ranges=[(8, 12), (30, 32)])

    async def writer(ctx):
        load(ctx, hbm2.words, image, 2)
        for r in requests[5:]:
            ctx.set(hbm2.port.req.payload, {"addr": r["addr"], "write": 1, "data": r["data"],
                                           "mask": r["mask"]})
            ctx.set(hbm2.port.req.valid, 1)
            await ctx.tick()
        ctx.set(hbm2.port.req.valid, 0)
        await ctx.tick()
        final["image"] = read_back(ctx, hbm2.words, 2)
        final["fault"] = (ctx.get(hbm2.write_fault), ctx.get(hbm2.write_fault_addr))

    simulate(hbm2, writer)
    expected = image.copy()
    expected[14] = 3                                 # line 7, word 0 only; lines 5, 15 fault
    assert final["image"].tolist() == expected.tolist()
    assert final["fault"] == (1, 5)


def test_pack_lines_round_trip():
    words = np.arange(12, dtype=np.uint32) * 0x01010101
    assert pack_lines(words, 4)[1] == (0x04040404 | 0x05050505 << 32 | 0x06060606 << 64
                                       | 0x07070707 << 96)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(size=64, words_per_cycle=3), ValueError, "power of two"),
    (dict(size=63, words_per_cycle=2), ValueError, "multiple of words_per_cycle"),
    (dict(size=64, read_latency=0), ValueError, "read_latency must be at least 1"),
    (dict(size=64, words_per_cycle=4, max_outstanding=6), ValueError, "multiple of"),
    (dict(size=64, words_per_cycle=4, max_outstanding=2), ValueError, "at least 4"),
    (dict(size=64, jitter=-1), ValueError, "jitter must be at least 0"),
    (dict(size=64, error_ranges=[(4, 2)]), ValueError, "lo < hi"),
    (dict(size=64, words_per_cycle=2, error_ranges=[(1, 4)]), ValueError, "multiples"),
    (dict(size=64, error_ranges=[(0, 65)]), ValueError, "at most 64"),
    (dict(size=64, error_ranges=[5]), TypeError, "pair"),
    (dict(size="64"), TypeError, "size must be an integer"),
    (dict(size=64, read_latency=True), TypeError, "read_latency must be an integer"),
])
def test_bad_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        HBM(**kwargs)
