"""The rowwise mean unit alone: each record leaves in order, unchanged, with its row's mean
square gradient, through gaps on its input and back-pressure on its output.

The expected mean is golden.sparsecore's: the state ``update`` leaves for one bag of one
id from a +0.0 accumulator with the row's gradient (``add(+0.0, mean)`` is the mean,
bit for bit, in both numerics: the mean is never -0.0, and a tpu mean is already flushed).
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden import sparsecore as golden
from hdl.sparsecore import Geometry, LANES, RowwiseMean

from . import stimulus


def _expected_mean(gradient, numerics):
    """Golden's mean square of one row's gradient (1-D, its real columns)."""
    width = len(gradient)
    _, state = golden.update(np.zeros((1, width), np.uint32), [0], [0, 1],
                             gradient[None, :], optimizer="rowwise_adagrad", lr=1.0,
                             state=np.zeros(1, np.uint32), numerics=numerics)
    return int(state.view(np.uint32)[0])


def _run(gradients, *, columns, row_words, numerics, rng, gap, stall):
    g = Geometry(rows=64, row_words=row_words, words_per_cycle=8, max_ids=64, max_bags=8,
                 max_unique=64)
    dut = RowwiseMean(geometry=g, numerics=numerics)
    chunks = g.chunks
    padded = np.zeros((len(gradients), row_words), np.uint32)
    padded[:, :columns] = gradients
    sent = [(u, c, padded[u, c * LANES:(c + 1) * LANES]) for u in range(len(gradients))
            for c in range(chunks)]
    got = []

    async def feed(ctx):
        ctx.set(dut.columns, columns)
        for u, c, words in sent:
            while rng.random() < gap:
                ctx.set(dut.records.valid, 0)
                await ctx.tick()
            ctx.set(dut.records.payload, {"x": [int(w) for w in words], "u": u, "c": c,
                                          "id": u, "den": 0x1234, "empty": 0,
                                          "row_mean": 0xDEAD})
            ctx.set(dut.records.valid, 1)
            await ctx.tick().until(dut.records.ready)
        ctx.set(dut.records.valid, 0)

    async def drain(ctx):
        while len(got) < len(sent):
            ready = int(rng.random() >= stall)
            ctx.set(dut.out.ready, ready)
            await ctx.tick()
        ctx.set(dut.out.ready, 0)

    async def watch(ctx):
        # Sampled before each edge: what was offered and taken in that cycle.
        async for _, _, valid, ready, payload in ctx.tick().sample(
                dut.out.valid, dut.out.ready, dut.out.payload):
            if valid and ready:
                got.append((payload.u, payload.c, [int(w) for w in payload.x],
                            int(payload.row_mean), payload.den, payload.id))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feed)
    sim.add_testbench(drain)
    sim.add_process(watch)
    sim.run_until(1e-8 * (40 * len(sent) + 500))
    return sent, got


@pytest.mark.parametrize("numerics, columns, row_words, gap, stall", [
    ("tpu", 20, 24, 0.0, 0.0), ("ieee", 3, 8, 0.3, 0.5),
    pytest.param("ieee", 20, 24, 0.3, 0.4, marks=pytest.mark.slow),
    pytest.param("tpu", 8, 8, 0.2, 0.6, marks=pytest.mark.slow),
    pytest.param("tpu", 1, 128, 0.1, 0.1, marks=pytest.mark.slow)])
def test_each_record_leaves_in_order_with_its_row_s_mean(numerics, columns, row_words, gap,
                                                          stall, rng):
    n_rows = 12
    # Mostly normal gradients, so most means are finite; some rows carry the specials.
    gradients = stimulus.fp32_values(rng, (n_rows, columns), special_density=0.0)
    special = stimulus.fp32_values(rng, (n_rows, columns), special_density=0.2)
    gradients[::3] = special[::3]
    gradients[1] = 0                                     # 0/D: +0.0
    gradients[4, :] = np.uint32(0x00000001)              # squares underflow: flushed in tpu
    sent, got = _run(gradients, columns=columns, row_words=row_words, numerics=numerics,
                     rng=rng, gap=gap, stall=stall)
    assert len(got) == len(sent), f"{len(got)} of {len(sent)} records left"
    for (u, c, words), (gu, gc, gwords, mean, den, row_id) in zip(sent, got):
        assert (gu, gc, gwords, den, row_id) == (u, c, words.tolist(), 0x1234, u), \
            f"record {u}.{c} changed on the way"
        want = _expected_mean(gradients[u], numerics)
        assert mean == want, f"row {u}: row_mean {mean:#010x}, golden {want:#010x}"
