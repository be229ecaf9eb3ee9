"""The simulators, and the two ways a test talks to them.

``"amaranth"`` simulates the Amaranth design in this process, with no extra
tools; ``"verilator"`` and ``"icarus"`` simulate the exported Verilog.

- **Whole runs** (:mod:`.whole_run`): stimulus in, run to completion,
  results out, with no Python per cycle. Every runner of a block
  (``sim.mxu``, ``sim.arith``) uses them; on Verilator the harness is a
  compiled C++ model (:mod:`.compiled`).
- **Interactive programs** (:func:`run_program`): an async test program that
  drives and samples ports every cycle through the :mod:`.bench` interface,
  in this process (Amaranth) or through cocotb (:mod:`.cocotb_sim`), for
  agents that react cycle by cycle.

Either way, all three backends give bit-identical results, cycle for cycle.
"""

from . import amaranth_sim
from ..blocks import component_class
from .toolchain import ToolMissing, iverilog

__all__ = ["BACKENDS", "check_backend", "run_program"]

#: Every backend name the public API accepts (SPEC section 5).
BACKENDS = ("amaranth", "verilator", "icarus")


def check_backend(backend):
    """Return ``backend`` if it names a backend that can run here; raise otherwise."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, "
                         f"not {backend!r}")
    if backend == "icarus" and iverilog() is None:
        raise ToolMissing("backend 'icarus' needs Icarus Verilog (iverilog), which is not "
                          "installed; use backend 'verilator' or install iverilog")
    return backend


def run_program(block, params, program, *, backend="amaranth", waves=None, coverage=None,
                run_dir=None):
    """Run the test program ``program`` (an async callable taking a Bench) on ``block``.

    ``program`` must be picklable (a ``functools.partial`` of a module-level
    function) for the cocotb backends, which run it in the simulator's process.
    ``coverage`` (a path for Verilator's coverage.dat) and ``run_dir`` apply
    to the cocotb backends only.
    """
    check_backend(backend)
    if backend == "amaranth":
        return amaranth_sim.simulate_block(component_class(block), params or {}, program,
                                           waves=waves)
    from . import cocotb_sim
    return cocotb_sim.simulate(block, params, program, simulator=backend, waves=waves,
                                   coverage=coverage, run_dir=run_dir)
