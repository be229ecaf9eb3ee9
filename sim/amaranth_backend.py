"""Running a test program under Amaranth's own simulator (no extra tools)."""

import os

from amaranth.sim import Simulator

from .bench import AmaranthBench

__all__ = ["simulate"]

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
    if waves is None:
        sim.run()
    else:
        os.makedirs(os.path.dirname(os.path.abspath(waves)), exist_ok=True)
        with sim.write_vcd(os.fspath(waves)):
            sim.run()
    return outcome["value"]
