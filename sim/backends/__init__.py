"""The simulators, and the two ways a test talks to them.

``"amaranth"`` simulates the Amaranth design in this process, with no extra
tools; ``"verilator"`` and ``"icarus"`` simulate the exported Verilog.

- **Whole runs** (:func:`run_whole`, the run model in :mod:`.whole_run`):
  stimulus in, run to completion, results out, with no Python per cycle.
  Every runner of a block (``sim.mxu``, ``sim.arith``) uses them; on
  Verilator the harness is a compiled C++ model (:mod:`.compiled`).
- **Interactive programs** (:func:`run_program`): an async test program that
  drives and samples ports every cycle through the :mod:`.bench` interface,
  in this process (Amaranth) or through cocotb (:mod:`.cocotb_sim`), for
  agents that react cycle by cycle.

Either way, all three backends give bit-identical results, cycle for cycle.

This package's ``__init__`` holds only the two dispatchers: every module
below it is a leaf that never imports the package back.
"""

from ..blocks import block_interface, component_class
from ..checks import check_tracing
from ..toolchain import BACKENDS, ToolMissing, check_backend
from .whole_run import check_run

__all__ = ["BACKENDS", "ToolMissing", "check_backend", "run_program", "run_whole"]


def run_whole(run, *, backend="amaranth", waves=None, waves_scope=None, threads=None,
              progress=None):
    """Run the :class:`~.whole_run.WholeRun` ``run`` on ``backend``.

    ``waves``: a path whose suffix names the waveform's format, ``.vcd`` or ``.fst``
    (Verilator and Icarus; Amaranth writes VCD only). ``waves_scope``: a dotted instance
    path below the harness (``"dut"`` is the block) that limits the waveform to that part
    of the design (Verilator and Icarus). ``threads``: the threads of a Verilator model
    (:func:`~sim.toolchain.model_threads`; ``$TPU_RTL_THREADS`` by default).

    Returns a :class:`~.whole_run.WholeRunResult`. Raises
    :class:`~sim.transactors.SimulationHang` naming every stream's progress if
    the watchdog expires, and ValueError for a run that does not fit the block.
    """
    check_backend(backend)
    check_tracing(backend, waves, waves_scope)
    signature, images = block_interface(run.block, run.params)
    check_run(run, signature, images)
    if backend == "amaranth":
        from .amaranth_sim import simulate_whole
        return simulate_whole(run, component_class(run.block), waves=waves, progress=progress)
    from .compiled import simulate_whole
    return simulate_whole(run, images, simulator=backend, waves=waves, waves_scope=waves_scope,
                          threads=threads, progress=progress)


def run_program(block, params, program, *, backend="amaranth", waves=None, coverage=None,
                run_dir=None):
    """Run the test program ``program`` (an async callable taking a Bench) on ``block``.

    ``program`` must be picklable (a ``functools.partial`` of a module-level
    function) for the cocotb backends, which run it in the simulator's process.
    ``coverage`` (a path for Verilator's coverage.dat) and ``run_dir`` apply
    to the cocotb backends only.
    """
    check_backend(backend)
    check_tracing(backend, waves)
    if backend == "amaranth":
        from .amaranth_sim import simulate_block
        return simulate_block(component_class(block), params or {}, program, waves=waves)
    from .cocotb_sim import simulate
    return simulate(block, params, program, simulator=backend, waves=waves,
                    coverage=coverage, run_dir=run_dir)
