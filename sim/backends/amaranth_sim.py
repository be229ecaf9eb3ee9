"""Running a test program under Amaranth's own simulator (no extra tools)."""

import os
import time

from amaranth.hdl import Const
from amaranth.lib.wiring import Out
from amaranth.sim import Simulator

from .bench import AmaranthBench

__all__ = ["simulate", "simulate_whole"]

CLOCK_PERIOD = 10e-9     # 100 MHz; only the waveform's time axis sees it


def simulate(component, program, *, waves=None):
    """Run ``await program(bench)`` against ``component``; return what it returns.

    ``waves`` is a path for a VCD file of the whole run (its folder is created).
    An exception raised by the program propagates out of this call.
    """
    outcome = {}

    async def testbench(ctx):
        outcome["value"] = await program(AmaranthBench(ctx, component))

    sim = Simulator(component)
    sim.add_clock(CLOCK_PERIOD)
    sim.add_testbench(testbench)
    _run(sim, waves)
    return outcome["value"]


#: Cycles between progress reports of a whole run.
PROGRESS_EVERY = 1024


def simulate_whole(run, component, *, waves=None, progress=None):
    """Run a :class:`~sim.backends.whole_run.WholeRun` on ``component`` in Amaranth's simulator.

    The harness memories are loaded and read back directly; the only Python
    during the run is the simulator's own, plus ``progress(cycle, status)``
    every :data:`PROGRESS_EVERY` cycles if given.
    """
    from ..blocks import memory_images
    from .whole_run import finish, make_harness
    harness = make_harness(run, component)
    images = {name: memory.data for name, (memory, _path) in memory_images(component).items()}
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

    sim = Simulator(harness)
    sim.add_clock(CLOCK_PERIOD)
    sim.add_testbench(testbench)
    _run(sim, waves)
    return finish(run, *outcome["result"])


def _load(ctx, data, words):
    for index, word in enumerate(words):
        ctx.set(data[index], word)


def _read(ctx, data, count):
    return [ctx.get(data[index]) for index in range(count)]


def _status_line(ctx, harness, run):
    return "; ".join(f"{port}: {ctx.get(getattr(harness, f'{port}_transfers'))}/"
                     f"{run.total(port)}" for port in (*run.play, *run.record))


def _run(sim, waves):
    if waves is None:
        sim.run()
    else:
        os.makedirs(os.path.dirname(os.path.abspath(waves)), exist_ok=True)
        with sim.write_vcd(os.fspath(waves)):
            sim.run()
