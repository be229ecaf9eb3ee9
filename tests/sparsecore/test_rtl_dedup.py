"""The dedup unit alone: first-occurrence slots, occurrence chains, and its two error flags.

Expected values come from golden.sparsecore.dedup (numpy's unique) and plain Python lists,
never from the unit.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden import sparsecore as golden
from hdl.sparsecore import Dedup, Geometry


def _geometry(max_unique=16):
    return Geometry(rows=32, row_words=8, words_per_cycle=8, max_ids=64, max_bags=8,
                    max_unique=max_unique)


def _run(ids, *, n_rows, max_unique=16, gaps=()):
    """Stream ``ids`` (bag 0, weight = position) into a Dedup; return its outputs and records."""
    dut = Dedup(geometry=_geometry(max_unique))
    got = {}

    async def bench(ctx):
        ctx.set(dut.n_rows, n_rows)
        for k, value in enumerate(ids):
            if k in gaps:                   # an idle cycle before this id
                ctx.set(dut.tagged.valid, 0)
                await ctx.tick()
            ctx.set(dut.tagged.payload, {"id": int(value), "weight": k, "bag": 0})
            ctx.set(dut.tagged.valid, 1)
            await ctx.tick()
        ctx.set(dut.tagged.valid, 0)
        await ctx.tick().repeat(3)
        for name in ("unique", "bad", "bad_position", "bad_count", "overflow",
                     "overflow_position"):
            got[name] = ctx.get(getattr(dut, name))
        got["uniq"] = [ctx.get(dut.uniq_mem[u]) for u in range(got["unique"])]
        got["tail"] = [ctx.get(dut.tail_mem[u]) for u in range(got["unique"])]
        got["occ"] = [ctx.get(dut.occ_mem[k]) for k in range(len(ids))]
        got["next"] = [ctx.get(dut.next_mem[k]) for k in range(len(ids))]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got


def _chain(got, u):
    """Follow slot ``u``'s chain from its head to its tail."""
    k, positions = got["uniq"][u].head, []
    while True:
        positions.append(k)
        if k == got["tail"][u]:
            return positions
        k = got["next"][k]


@pytest.mark.parametrize("gapped", [False, True], ids=["back-to-back", "gapped"])
def test_slots_and_chains_follow_first_occurrence_order(gapped, rng):
    # Runs of one id (the map read must see the write just before it) and a Zipf mix.
    ids = np.concatenate([[5, 5, 5, 9, 5, 9, 9, 0, 31, 0],
                          (rng.zipf(1.3, 30) - 1) % 32]).astype(np.int64)
    gaps = set(rng.integers(0, len(ids), 10).tolist()) if gapped else set()
    got = _run(ids, n_rows=32, max_unique=32, gaps=gaps)
    want = golden.dedup(ids)
    assert got["bad"] == 0 and got["overflow"] == 0
    assert got["unique"] == want.hbm_reads
    assert [entry.id for entry in got["uniq"]] == want.ids.tolist()
    assert [entry.head for entry in got["uniq"]] == want.first.tolist()
    assert [entry.slot for entry in got["occ"]] == want.inverse.tolist()
    assert [entry.weight for entry in got["occ"]] == list(range(len(ids)))
    for u, value in enumerate(want.ids):
        assert _chain(got, u) == np.flatnonzero(ids == value).tolist(), f"slot {u} (id {value})"


def test_out_of_range_ids_are_flagged_never_entered(rng):
    ids = np.array([3, 12, -1, 3, 11, 40, 2, -2147483648, 12], np.int64)     # n_rows = 12
    got = _run(ids, n_rows=12)
    bad = golden.bad_positions(ids, 12)
    assert got["bad"] == 1
    assert got["bad_position"] == bad[0] == 1
    assert got["bad_count"] == len(bad) == 5
    good = ids[(ids >= 0) & (ids < 12)]
    assert [entry.id for entry in got["uniq"]] == golden.dedup(good).ids.tolist()


def test_unique_capacity_overflow_is_flagged_at_its_position():
    ids = np.array([0, 1, 0, 2, 3, 1, 4, 5, 4], np.int64)      # the 5th distinct id is at 6
    got = _run(ids, n_rows=32, max_unique=4)
    assert got["overflow"] == 1 and got["overflow_position"] == 6
    assert got["unique"] == 4 and got["bad"] == 0
    # Repeats of ids that fit are still entered after the overflow.
    assert [entry.id for entry in got["uniq"]] == [0, 1, 2, 3]
    assert _chain(got, 1) == [1, 5]


def test_no_overflow_at_exactly_capacity():
    got = _run(np.array([7, 6, 5, 4, 7, 4], np.int64), n_rows=32, max_unique=4)
    assert got["overflow"] == 0 and got["unique"] == 4
