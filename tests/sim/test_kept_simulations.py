"""Kept Amaranth simulations (``sim.backends.kept_simulations``): a run on a kept simulation
starts from exactly the state a new one would, one design is compiled once, and what
must not be kept (a run that raised, waves, an unkeyable design) is not."""

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from sim import blocks
from sim.backends import kept_simulations as kept
from sim.backends.kept_simulations import KeptSimulation, design_key, kept_simulation, run_kept


class Counter(wiring.Component):
    """Counts cycles with ``enable`` high from ``start``, and writes the count to a memory
    initialised with ``start + i``; counts the instances made."""
    made = 0

    def __init__(self, *, start=5):
        Counter.made += 1
        self.start = start
        super().__init__({"enable": In(1), "count": Out(8, init=start)})
        self.mem = memory.Memory(shape=8, depth=4, init=[start + i for i in range(4)])

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = self.mem
        write = self.mem.write_port()
        with m.If(self.enable):
            m.d.sync += self.count.eq(self.count + 1)
        m.d.comb += [write.addr.eq(self.count[:2]), write.data.eq(self.count),
                     write.en.eq(self.enable)]
        return m


def _job(dut, seen, cycles):
    async def job(ctx):
        seen.append((ctx.get(dut.count), [ctx.get(dut.mem.data[i]) for i in range(4)]))
        ctx.set(dut.enable, 1)
        await ctx.tick().repeat(cycles)
        seen.append((ctx.get(dut.count), [ctx.get(dut.mem.data[i]) for i in range(4)]))
    return job


def _run(key, seen, cycles=3, **params):
    sim = kept_simulation(key, lambda: KeptSimulation(Counter(**params)))
    run_kept(key, sim, _job(sim.top, seen, cycles))
    return sim


@pytest.fixture(autouse=True)
def _empty():
    kept._kept.clear()
    Counter.made = 0
    yield
    kept._kept.clear()


def test_a_kept_run_starts_where_a_new_one_does():
    key = design_key(Counter, {"start": 5})
    fresh, again = [], []
    first = _run(key, fresh, start=5)
    second = _run(key, again, start=5)
    assert second is first and Counter.made == 1
    # Signals and memories back at their initial values; the counter counts again, and
    # writes 5, 6, 7 to entries 1, 2, 3.
    assert fresh == again == [(5, [5, 6, 7, 8]), (8, [5, 5, 6, 7])]


def test_each_design_is_its_own_and_the_oldest_goes_first():
    sims = {start: _run(design_key(Counter, {"start": start}), [], start=start)
            for start in range(kept.KEEP + 1)}
    assert Counter.made == kept.KEEP + 1 and len(set(map(id, sims.values()))) == kept.KEEP + 1
    assert design_key(Counter, {"start": 0}) not in kept._kept        # the oldest
    _run(design_key(Counter, {"start": kept.KEEP}), [], start=kept.KEEP)
    assert Counter.made == kept.KEEP + 1


def test_a_run_that_raises_is_not_kept():
    key = design_key(Counter, {"start": 1})
    sim = kept_simulation(key, lambda: KeptSimulation(Counter(start=1)))

    async def broken(ctx):
        await ctx.tick()
        raise RuntimeError("the test program failed")
    with pytest.raises(RuntimeError, match="the test program failed"):
        run_kept(key, sim, broken)
    assert key not in kept._kept
    seen = []
    assert _run(key, seen, start=1) is not sim and seen[0] == (1, [1, 2, 3, 4])


def test_what_is_not_kept(monkeypatch, tmp_path):
    assert design_key(Counter, {"start": 1, "table": [1, 2]}) is not None
    assert design_key(Counter, {"start": 1, "table": object()}) is None
    _run(None, [], start=2)
    _run(None, [], start=2)
    assert Counter.made == 2 and not kept._kept
    key = design_key(Counter, {"start": 2})
    waves = tmp_path / "w" / "run.vcd"
    sim = kept_simulation(key, lambda: KeptSimulation(Counter(start=2)), waves=waves)
    run_kept(key, sim, _job(sim.top, [], 2), waves=waves)
    assert b"$enddefinitions" in waves.read_bytes() and not kept._kept
    monkeypatch.setenv("TPU_RTL_KEEP_SIMULATIONS", "0")
    _run(key, [], start=2)
    _run(key, [], start=2)
    assert Counter.made == 5 and not kept._kept


def test_a_blocks_interface_is_read_once_per_design(monkeypatch):
    """``block_interface`` builds a block once for each block and plain parameters (each
    build ends in a full garbage collection), and every caller gets its own images."""
    built = []
    real_build = blocks.build
    monkeypatch.setattr(blocks, "build", lambda block, params: built.append(block) or
                        real_build(block, params))
    params = {"lanes": 1, "vmem_lines": 24}     # a size no other test asks for: built here
    signature, images = blocks.block_interface("vpu", params)
    assert built == ["vpu"] and "vmem" in images
    images.clear()
    again, images = blocks.block_interface("vpu", dict(params))
    assert built == ["vpu"] and again is signature and "vmem" in images
    blocks.block_interface("vpu", {**params, "lanes": 2})
    assert built == ["vpu", "vpu"]


def test_answers_for_parameters_that_are_not_plain_are_not_kept():
    calls = []

    @blocks.kept_by_params
    def probe(name, params):
        calls.append(name)
        return len(calls)

    assert probe("a", {"n": 1}) == probe("a", {"n": 1}) == 1
    assert probe("b", {"n": 1}) == 2                        # the other arguments count too
    table = np.arange(4)
    assert probe("a", {"n": 1, "table": table}) == 3
    assert probe("a", {"n": 1, "table": table}) == 4
    assert blocks.params_key({"n": 1, "ops": ("add",)}) is not None
    assert blocks.params_key({"n": object()}) is None
