"""Running a test program on exported Verilog under Verilator or Icarus, through cocotb.

A run exports the block (:mod:`sim.verilog.export`), builds the simulator once per
distinct Verilog, simulator and build flags (:mod:`sim.toolchain.build_cache`),
and runs the pickled test program in a folder of its own, so parallel runs
never collide. The program's value comes back through a pickle, and so does
any exception it raised (a hang, say), which is raised again here.

Verilator builds keep only the top module's ports visible to cocotb (a
generated control file), instead of the runner's ``--public-flat-rw``, which
makes every signal public and slows the model down about twofold.
"""

import os
import pickle
import shutil
import tempfile
from pathlib import Path

from ..checks import wave_format
from ..verilog.export import export, module_ports
from ..verilog.lint import WAIVERS
from ..transactors import SimulationHang
from ..toolchain.build_cache import build_root, cached_build
from . import coverage_build
from .icarus_source import icarus_source
from ..toolchain import ToolMissing, check_fst_tracing, iverilog, tool_env, verilator_version

__all__ = ["SimulationError", "simulate"]

SIMULATORS = ("verilator", "icarus")
_COVERAGE_FLAGS = ["--coverage-line", "--coverage-toggle"]
#: Time: 1 ns a unit, 1 fs precision, as the whole runs' testbench and Amaranth's simulator
#: (a waveform's ``$timescale`` is 1 fs on every backend).
TIMESCALE = ("1ns", "1fs")


class SimulationError(RuntimeError):
    """The simulator could not build or run the design, or the test program failed."""


def _runner(simulator, *, public_flat_rw=False, waves=None):
    """cocotb's runner for ``simulator``; on Icarus one whose ``vvp`` writes the waveform
    format ``waves`` ("vcd" or "fst"; cocotb's always asks for FST)."""
    if simulator == "icarus" and iverilog() is None:
        raise ToolMissing("backend 'icarus' needs Icarus Verilog (iverilog), which is not "
                          "installed; use backend 'verilator' or install iverilog")
    os.environ.update(tool_env())          # cocotb's runner calls plain `verilator`
    from cocotb_tools.runner import Icarus, Verilator, get_runner
    if simulator == "icarus":
        class FormatIcarus(Icarus):
            def _test_command(self):
                commands = super()._test_command()
                return [[f"-{waves}" if arg == "-fst" and waves else arg for arg in command]
                        for command in commands]
        return FormatIcarus()
    if public_flat_rw:
        return get_runner(simulator)

    class PortsOnlyVerilator(Verilator):
        def _build_command(self):
            commands = super()._build_command()
            commands[0] = [arg for arg in commands[0] if arg != "--public-flat-rw"]
            return commands

    return PortsOnlyVerilator()


def _public_ports(verilog, top):
    """A Verilator control file that makes the top module's ports, and only they, public."""
    lines = ["`verilator_config"]
    lines += [f'public_flat_rw -module "{top}" -var "{name.lstrip(chr(92)).strip()}"'
              for _direction, _width, name in module_ports(verilog, top)]
    return "\n".join(lines) + "\n"


def _build(block, verilog, simulator, *, waves, coverage, public_flat_rw=False):
    if simulator == "icarus":
        verilog = icarus_source(verilog)
    # cocotb's runner adds --trace for any waves; a later --trace-fst makes them FST.
    flags = ["-Wno-fatal"] + (_COVERAGE_FLAGS if coverage else []) \
        + (["--trace-fst"] if waves == "fst" else []) if simulator == "verilator" else []

    def build(folder):
        source = folder / f"{block}.v"
        source.write_text(verilog)
        sources = [source]
        if simulator == "verilator" and not public_flat_rw:
            ports = folder / "public_ports.vlt"
            ports.write_text(_public_ports(verilog, block))
            sources += [WAIVERS, ports]
        elif simulator == "verilator":
            sources.append(WAIVERS)
        try:
            _runner(simulator, public_flat_rw=public_flat_rw).build(
                sources=sources, hdl_toplevel=block, build_dir=folder, build_args=flags,
                waves=bool(waves), always=True, log_file=folder / "build.log",
                timescale=TIMESCALE)
        except (RuntimeError, SystemExit) as error:
            # The folder goes away with the failed build; its log stays beside it.
            log = folder.parent / f"{folder.name}.failed.log"
            if (folder / "build.log").exists():
                shutil.copy(folder / "build.log", log)
            raise SimulationError(f"{simulator} build of {block} failed ({error}); "
                                  f"log: {log}") from None

    return cached_build(f"cocotb-{simulator}", block,
                        [verilog, " ".join(flags), waves, verilator_version(),
                         "all public" if public_flat_rw else "ports only"],
                        build)


def simulate(block, params, program, *, simulator, waves=None, coverage=None, run_dir=None,
             public_flat_rw=False):
    """Run ``await program(bench)`` on ``block`` built with ``params``; return its value.

    ``waves`` and ``coverage`` are paths to receive a waveform, VCD or FST by the
    suffix, and a Verilator coverage.dat. ``run_dir`` keeps the run's
    files (logs, results) in a known place; by default a temporary folder is
    used and removed after a successful run. ``public_flat_rw`` builds the
    model the way cocotb's runner does by default (every signal public), only
    so that the bench can measure what keeping just the ports public saves.
    """
    if simulator not in SIMULATORS:
        raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)}, not {simulator!r}")
    if coverage and simulator != "verilator":
        raise ValueError("code coverage needs the verilator backend")
    fmt = wave_format(waves)
    if fmt == "fst" and simulator == "verilator":
        check_fst_tracing()
    runner = _runner(simulator, public_flat_rw=public_flat_rw, waves=fmt)
    verilog = export(block, params).verilog
    folder = _build(block, verilog, simulator, waves=fmt, coverage=bool(coverage),
                    public_flat_rw=public_flat_rw)
    keep = run_dir is not None
    if keep:
        run_dir = Path(run_dir).resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
    else:
        (build_root() / "runs").mkdir(parents=True, exist_ok=True)
        run_dir = Path(tempfile.mkdtemp(prefix=f"{block}-", dir=build_root() / "runs"))
    job, result, log = run_dir / "job.pkl", run_dir / "result.pkl", run_dir / "sim.log"
    with open(job, "wb") as f:
        pickle.dump(program, f)
    result.unlink(missing_ok=True)
    dump = run_dir / f"dump.{fmt}"
    try:
        runner.test(
            test_module="sim.backends.cocotb_entry", hdl_toplevel=block, hdl_toplevel_lang="verilog",
            build_dir=folder, test_dir=run_dir, results_xml=str(run_dir / "results.xml"),
            extra_env={"TPU_RTL_JOB": str(job), "TPU_RTL_RESULT": str(result)},
            waves=bool(waves), log_file=log,
            plusargs=[f"+dumpfile_path={dump}"] if waves and simulator == "icarus" else [],
            timescale=TIMESCALE if simulator == "icarus" else None)
    except (RuntimeError, SystemExit) as error:
        if not result.exists():
            raise SimulationError(f"{simulator} run of {block} failed ({error}); "
                                  f"log: {log}") from None
    if not result.exists():
        raise SimulationError(f"{simulator} run of {block} ended without a result; log: {log}")
    with open(result, "rb") as f:
        outcome = pickle.load(f)
    if waves:
        shutil.move(dump, waves)
    if coverage:
        coverage_build.relocate(run_dir / "coverage.dat", coverage, folder)
    if outcome[0] == "error":
        _name, message, trace = outcome[1:]
        if _name == "SimulationHang":
            raise SimulationHang(message)
        raise SimulationError(f"test program failed in {simulator}: {_name}: {message}\n{trace}")
    if not keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return outcome[1]
