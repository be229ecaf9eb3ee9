"""Running a test program under Amaranth's own simulator (no extra tools)."""

import time

from amaranth.hdl import Const
from amaranth.lib.wiring import Out

from .bench import AmaranthBench
from .kept_simulations import KeptSimulation, design_key, kept_simulation, run_kept

__all__ = ["simulate", "simulate_block", "simulate_whole"]


def simulate(component, program, *, waves=None):
    """Run ``await program(bench)`` against ``component``; return what it returns.

    ``waves`` is a path for a VCD file of the whole run (its folder is created).
    An exception raised by the program propagates out of this call.
    """
    return _run_program(None, lambda: KeptSimulation(component), program, waves)


def simulate_block(component_class, params, program, *, waves=None):
    """:func:`simulate` on ``component_class(**params)``, whose compiled simulation is kept
    for later programs on the same design (:mod:`.kept_simulations`)."""
    return _run_program(design_key(component_class, params),
                        lambda: KeptSimulation(component_class(**params)), program, waves)


def _run_program(key, make, program, waves):
    kept = kept_simulation(key, make, waves=waves)
    outcome = {}

    async def job(ctx):
        outcome["value"] = await program(AmaranthBench(ctx, kept.top))

    run_kept(key, kept, job, waves=waves)
    return outcome["value"]


#: Cycles between progress reports of a whole run.
PROGRESS_EVERY = 1024


def simulate_whole(run, component_class, *, waves=None, progress=None):
    """Run a :class:`~sim.backends.whole_run.WholeRun` on ``component_class(**run.params)``
    in Amaranth's simulator.

    The harness memories are loaded and read back directly; the only Python
    during the run is the simulator's own, plus ``progress(cycle, status)``
    every :data:`PROGRESS_EVERY` cycles if given. The compiled simulation of the
    harness is kept for later runs of the same shape (:mod:`.kept_simulations`).
    """
    from ..blocks import memory_images
    from .whole_run import finish, make_harness

    def make():
        component = component_class(**run.params)
        return KeptSimulation(make_harness(run, component), images={
            name: memory for name, (memory, _path) in memory_images(component).items()})
    key = design_key(component_class, run.params)
    if key is not None:
        key += (run.until, run.busy, tuple(sorted(run.depths.items())),
                tuple(sorted((p, r) for p, (r, _total) in run.loopbacks.items())))
    kept = kept_simulation(key, make, waves=waves)
    harness, images = kept.top, kept.context["images"]
    finished = harness.done | harness.hung
    outcome = {}

    async def testbench(ctx):
        started = time.perf_counter()
        for port, beats in run.play.items():
            _load(ctx, harness.endpoints[port].beats.data, beats)
        for name, words in run.load.items():
            _load(ctx, images[name], words)
        for name, value in run.settings().items():
            ctx.set(getattr(harness, name), value)
        # One edge with the settings applied and start low (the gap generators
        # load their seeds), as the Verilog testbench gives them.
        await ctx.tick()
        ctx.set(harness.start, 1)
        if progress is None:
            await ctx.tick().until(finished)
        else:
            while not ctx.get(finished):
                await ctx.tick().repeat(PROGRESS_EVERY)
                progress(ctx.get(harness.cycles), _status_line(ctx, harness, run))
        status = {name: Const.cast(ctx.get(getattr(harness, name))).value
                  for name, member in harness.signature.members.items() if member.flow == Out}
        recorded = {port: _read(ctx, harness.endpoints[port].beats.data,
                                status[f"{port}_transfers"]) for port in run.record}
        memories = {name: _read(ctx, images[name], images[name].depth) for name in run.dump}
        outcome["result"] = (status, recorded, time.perf_counter() - started, memories)

    run_kept(key, kept, testbench, waves=waves)
    return finish(run, *outcome["result"])


def _load(ctx, data, words):
    for index, word in enumerate(words):
        ctx.set(data[index], word)


def _read(ctx, data, count):
    return [ctx.get(data[index]) for index in range(count)]


def _status_line(ctx, harness, run):
    return "; ".join(f"{port}: {ctx.get(getattr(harness, f'{port}_transfers'))}/"
                     f"{run.total(port)}" for port in (*run.play, *run.record))
