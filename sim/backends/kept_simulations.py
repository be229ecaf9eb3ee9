"""Amaranth simulations kept between runs of the same design in one process.

Building a :class:`~amaranth.sim.Simulator` elaborates the design and compiles it to
Python: seconds for a VPU, tens of seconds for a TensorCore chip, while a short run of
it takes a fraction of that. A kept simulation is built once and, before each later run,
:meth:`~amaranth.sim.Simulator.reset`: every signal and memory back to its initial
value, the clock and the testbench restarted. A run on a kept simulation therefore sees
exactly what it would on a new one.

The simulation's testbenches await the current run's jobs, ``job(ctx)`` each. The
:data:`KEEP` most recently used designs are kept, each under a key the caller derives
from everything that shapes the design (its class and parameters); a run that raises is
not kept, nor is one that writes waves (a new simulation writes them from time zero).
Set ``TPU_RTL_KEEP_SIMULATIONS=0`` to build every simulation afresh.
"""

import os
from collections import OrderedDict

from amaranth.sim import Simulator

from ..blocks import params_key

__all__ = ["KEEP", "KeptSimulation", "kept_simulation", "run_kept", "design_key"]

#: Designs kept per process. A run of a small chip (``sim.chip.run``, a VPU of one op)
#: raised the process' peak memory from 45 MB to 157 MB.
KEEP = 3

CLOCK_PERIOD = 10e-9     # 100 MHz; only the waveform's time axis sees it

_kept = OrderedDict()


class KeptSimulation:
    """A compiled simulation of ``top`` whose testbenches run the jobs of each run.

    ``context`` holds what the caller built with ``top`` and needs again on a later
    run (the handles of its memories, say).
    """

    def __init__(self, top, **context):
        self.top = top
        self.context = context
        self._jobs = ()
        self._testbenches = 0
        self._fresh = True
        self.sim = Simulator(top)
        self.sim.add_clock(CLOCK_PERIOD)

    def _testbench(self, index):
        async def testbench(ctx):
            # Read when the run starts (a reset restarts it): this run's job, if it has one.
            if index < len(self._jobs):
                await self._jobs[index](ctx)
        return testbench

    def run(self, *jobs, waves=None):
        """Run ``await job(ctx)`` for each of ``jobs``, side by side as testbenches in that
        order, from the initial state until they all end."""
        if not self._fresh:
            self.sim.reset()
        self._fresh = False
        self._jobs = jobs
        while self._testbenches < len(jobs):
            self.sim.add_testbench(self._testbench(self._testbenches))
            self._testbenches += 1
        try:
            if waves is None:
                self.sim.run()
            else:
                os.makedirs(os.path.dirname(os.path.abspath(waves)), exist_ok=True)
                with self.sim.write_vcd(os.fspath(waves)):
                    self.sim.run()
        finally:
            self._jobs = ()


def design_key(component_class, params):
    """A key for ``component_class(**params)``, or None if a parameter is not a plain value
    (:func:`sim.blocks.params_key`)."""
    key = params_key(params)
    return None if key is None else (component_class, key)


def kept_simulation(key, make, *, waves=None):
    """The :class:`KeptSimulation` for ``key``, made by ``make()`` if none is kept.

    With ``key`` None, or ``waves`` asked for, or keeping turned off, it is a new one
    that is not kept. Pair with :func:`run_kept`.
    """
    if key is None or waves is not None or os.environ.get("TPU_RTL_KEEP_SIMULATIONS") == "0":
        return make()
    kept = _kept.pop(key, None)
    if kept is None:
        kept = make()
    _kept[key] = kept
    while len(_kept) > KEEP:
        _kept.popitem(last=False)
    return kept


def run_kept(key, kept, *jobs, waves=None):
    """``kept.run(*jobs, waves=waves)``; a run that raises leaves its simulation unkept."""
    try:
        kept.run(*jobs, waves=waves)
    except BaseException:
        if key is not None and _kept.get(key) is kept:
            del _kept[key]
        raise
