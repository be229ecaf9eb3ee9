"""The cocotb test module every Verilator or Icarus run loads (see :mod:`sim.backends.cocotb_sim`).

It unpickles the test program named by ``TPU_RTL_JOB``, starts the clock,
resets the design, runs the program on a :class:`~sim.backends.cocotb_bench.CocotbBench`
and pickles what happened (the program's value, or its exception) to
``TPU_RTL_RESULT``. The cocotb test itself always passes: the outcome
travels through that file, so a failing check is reported by the caller
with its own message rather than by cocotb's runner.
"""

import os
import pickle
import traceback

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge

from .cocotb_bench import CocotbBench

RESET_CYCLES = 2


@cocotb.test()
async def run_job(dut):
    with open(os.environ["TPU_RTL_JOB"], "rb") as f:
        program = pickle.load(f)
    Clock(dut.clk, 10, unit="ns").start()
    dut.rst.value = 1
    for _ in range(RESET_CYCLES):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    try:
        outcome = ("ok", await program(CocotbBench(dut)))
    except Exception as error:      # reported by the caller, whatever it is
        outcome = ("error", type(error).__name__, str(error), traceback.format_exc())
    with open(os.environ["TPU_RTL_RESULT"], "wb") as f:
        pickle.dump(outcome, f)
