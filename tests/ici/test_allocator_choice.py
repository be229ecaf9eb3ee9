"""The adaptive choice's tree (``hdl.ici.allocator.leftmost_best``) against a scan in order,
the rule the allocator documents: the first ok candidate of greatest key."""

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from hdl.ici.allocator import leftmost_best

KEY_BITS, PORT_BITS, VC_BITS = 4, 3, 3


def scan(oks, keys):
    """The index a scan in order keeps: a later candidate replaces the kept one only when
    it is ok and the kept one is not ok or has a smaller key (0 when none is ok)."""
    best = 0
    for k in range(1, len(oks)):
        if oks[k] and (not oks[best] or keys[k] > keys[best]):
            best = k
    return best


@pytest.mark.parametrize("n", [1, 2, 3, 5, 9, 25])
def test_the_tree_chooses_what_a_scan_chooses(n, rng):
    m = Module()
    oks = [Signal(name=f"ok{k}") for k in range(n)]
    keys = [Signal(KEY_BITS, name=f"key{k}") for k in range(n)]
    # Each candidate's port and vc name it, so the choice shows which one won.
    candidates = [(ok, key, k % 8, k // 8) for k, (ok, key) in enumerate(zip(oks, keys))]
    best = leftmost_best(m, candidates, shapes=(1, KEY_BITS, PORT_BITS, VC_BITS), name="t")
    # Few distinct keys, so that ties (the first one wins) are common.
    cases = [(rng.random(n) < p, rng.integers(0, 3 if k % 2 else 16, n))
             for k, p in enumerate(np.tile([0.0, 0.2, 0.5, 1.0], 50))]
    # And each candidate the one ok, or ok and keyed above the others.
    cases += [(np.arange(n) == k, rng.integers(0, 16, n)) for k in range(n)]
    cases += [(rng.random(n) < 0.7, np.where(np.arange(n) == k, 15, rng.integers(0, 15, n)))
              for k in range(n)]
    seen = set()

    async def bench(ctx):
        for ok_bits, key_values in cases:
            for ok, key, o, v in zip(oks, keys, ok_bits, key_values):
                ctx.set(ok, int(o))
                ctx.set(key, int(v))
            want = scan(ok_bits, key_values)
            got = [ctx.get(x) for x in best]
            assert got == [int(ok_bits.any()), int(key_values[want]), want % 8, want // 8], \
                (ok_bits, key_values)
            seen.add(want)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    # Every candidate won some case: the test reaches each leaf of the tree.
    assert seen == set(range(n))
