"""Whole runs on Verilator and Icarus: a compiled simulator, no Python per cycle.

The block's exported Verilog, the :class:`~hdl.testbench.run_harness.RunHarness`
around it and the generated testbench (:mod:`sim.backends.testbench`) are
built once (Verilator: a C++ model with ``harness/whole_run_main.cpp``;
Icarus: a vvp image) and cached (:mod:`sim.toolchain.build_cache`). A run
writes its stream data as hex files, starts the simulator with plusargs, and
reads back the status and recorded beats it writes.

The harness is built ``streamed``: its players and recorders are rings of
:data:`~sim.backends.whole_run.RING_DEPTH` entries that the testbench refills
from the files and empties into them as the run goes, between clock edges.
So nothing about the data is built in: the cache key is taken from the
sources that determine the Verilog (every file of the ``hdl`` package, the
export, harness and testbench code), the block's parameters, the shape of the
run (loopbacks, ``until``, ``busy``, memories loaded) and the tool versions,
and one build of a design serves any amount of data. A cached build is found
without exporting the design again.
"""

import hashlib
import inspect
import re
import shutil
import subprocess
import tempfile
import time
from functools import cache
from pathlib import Path

from amaranth.back import verilog as amaranth_verilog

import hdl
from hdl.lib.blackbox import BlackBox

from ..blocks import BLOCKS
from ..verilog.export import export
from ..verilog.repeated import emit
from ..toolchain.build_cache import build_root, cached_build
from . import coverage_build
from .icarus_source import icarus_source
from .testbench import TOP, testbench_verilog
from ..checks import wave_format
from ..toolchain import (amaranth_version, check_fst_tracing, iverilog, model_opt,
                         model_threads, tool_env, verilator, verilator_version)

__all__ = ["simulate_whole", "run_built", "build", "compile_harness", "VERILATOR_FLAGS",
           "CompiledRunError"]

MAIN = Path(__file__).with_name("harness") / "whole_run_main.cpp"
HARNESS_MODULE = "harness"

#: Verilator's fast options: -O3 for the model, no X handling beyond zeros.
#: No --public-flat-rw: nothing outside the testbench looks inside the model.
VERILATOR_FLAGS = ("--cc", "--exe", "-O3", "--x-assign", "fast", "--x-initial", "fast",
                   "-Wno-fatal", "-Wno-lint", "-Wno-style", "--top-module", TOP, "-j", "2")
#: The model's C++ compile: two jobs, the hot code at ``model_opt()`` (-O3 unless
#: ``$TPU_RTL_OPT`` says otherwise). It runs after Verilator has exited (not through
#: ``--build``, under which Verilator keeps its memory while g++ runs): a 4x4 system
#: of 16-lane chips peaks at 12 GB in Verilator, then 6 GB a g++ job.
MAKE_FLAGS = ("-j", "2")
ICARUS_FLAGS = ("-g2012", "-s", TOP)
#: Designs with more Verilog than this verilate without Verilator's DFG
#: optimizer. Verilator copies every instance's logic (one per PE, out of
#: line or not) before it merges them again, so its memory grows with an
#: array's area, and DFG is its peak: without it a 32x32 MXU harness peaks
#: at 1.9 GB instead of 3.4 GB (`tpu-rtl bench` has the figures).
LARGE_DESIGN_BYTES = 2_000_000

#: Cycles between progress lines, when progress is asked for.
PROGRESS_EVERY = 100_000


class CompiledRunError(RuntimeError):
    """The compiled simulator failed to build or to run; the message names the log."""


@cache
def _source_digest():
    """A digest of every source the exported Verilog and testbench depend on."""
    digest = hashlib.sha256()
    roots = [Path(hdl.__file__).parent]
    files = sorted(p for root in roots for p in root.rglob("*.py"))
    files += [Path(inspect.getfile(export)), Path(inspect.getfile(emit)),
              Path(__file__).with_name("testbench.py"),
              Path(__file__), Path(__file__).with_name("icarus_source.py"),
              Path(__file__).with_name("whole_run.py"), MAIN]     # whole_run: make_harness
    for path in files:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _design(run):
    """(Verilog text, signature, repeated modules) of the block's export."""
    exported = export(run.block, run.params)
    return exported.verilog, exported.signature, exported.modules[:-1]


def _verilator_config(modules, hierarchical=()):
    """A Verilator control file that keeps the block's repeated modules out of line, and
    verilates each of ``hierarchical`` on its own.

    Verilator inlines every module by default, so a 32x32 MXU becomes one
    flat netlist of 1,024 PEs (3.5 GB, and a C++ compile of many minutes per
    file). Kept out of line, the PE and the PE row are verilated and
    compiled once each and instantiated many times, so the build grows with
    the array's edge rather than its area.

    Out of line is not enough for a large module: Verilator still schedules every
    instance's logic as C++ of its own (a 4x4 network's 16 nodes: 16 MB of C++ for one
    module). A hierarchical block is verilated once, as a library of its own that every
    instance calls, so its code does not grow with the instances at all; each call has a
    cost, so it is for modules of thousands of lines, not a PE.
    """
    lines = ["`verilator_config"]
    lines += [f'no_inline -module "{module}"' for module in modules if module not in hierarchical]
    lines += [f'hier_block -module "{module}"' for module in hierarchical]
    return "\n".join(lines) + "\n"


_INTERNAL = re.compile(r"\\\$(\S*)")


def _hide_internal_names(text):
    """``text`` with every escaped identifier that starts with ``$`` (Amaranth's unnamed
    wires, ``$12``; yosys' ``$auto$...``) renamed to a plain one that starts with ``_``,
    which Verilator leaves out of its traces (no ``--trace-underscore``): most of a
    design's wires, and of its waveform."""
    names = {}

    def plain(match):
        name = names.get(match[1])
        if name is None:
            name = base = "_$" + re.sub(r"[^A-Za-z0-9_$]", "_", match[1])
            while name in taken:
                name = f"{base}_{len(taken)}"
            names[match[1]] = name
            taken.add(name)
        return name
    taken = set()
    return _INTERNAL.sub(plain, text)


def _tool_version(simulator):
    if simulator == "verilator":
        return f"verilator {verilator_version()}"
    proc = subprocess.run([iverilog(), "-V"], capture_output=True, text=True)
    return (proc.stdout.splitlines() or ["iverilog"])[0]


def _trace_flags(waves):
    """Verilator's flags for a build that traces in format ``waves``: None, ``"vcd"`` or
    ``"fst"`` (``True`` is ``"vcd"``)."""
    waves = "vcd" if waves is True else waves or None
    if waves not in (None, "vcd", "fst"):
        raise ValueError(f"waves must be 'vcd' or 'fst' (the format), not {waves!r}")
    return {None: (), "vcd": ("--trace",), "fst": ("--trace-fst",)}[waves]


def build(run, *, simulator, images=None, waves=None, waves_scope=None, threads=None):
    """The cached build folder of ``run``'s harness on ``simulator``, built if need be.

    ``images`` maps the block's memories to their :class:`~sim.blocks.MemoryImage`
    (the testbench loads and dumps them); ``waves`` (``"vcd"`` or ``"fst"``) adds tracing
    in that format, limited to ``waves_scope`` if given; ``threads`` (by default
    :func:`~sim.toolchain.model_threads`) builds a multi-threaded Verilator model.
    """
    # The block's own source too: a block registered from outside ``hdl`` (a test's) counts.
    block_source = Path(inspect.getsourcefile(BLOCKS[run.block])).read_bytes()
    return build_top(run, simulator=simulator, design=lambda: _design(run), key=[block_source],
                     images=images, waves=waves, waves_scope=waves_scope, threads=threads,
                     what=f"the {run.block} whole-run harness")


def build_top(run, *, simulator, design, key, images=None, waves=None, waves_scope=None,
              threads=None, what, hierarchical=()):
    """The cached build folder of ``run``'s harness around a top exported by ``design()``,
    built if need be: it returns the Verilog text of the top (module ``run.block``) and of
    the modules it instantiates, the top's signature, and the names of the modules that
    repeat (kept out of line). ``key`` lists what else shapes that text (a runner's export
    code); ``images``, ``waves``, ``waves_scope`` and ``threads`` as in :func:`build`.
    Verilator builds each module of ``hierarchical`` (repeated ones) as a block of its own
    (see :func:`_verilator_config`); ``images`` cannot name memories inside them. Icarus
    ignores ``hierarchical`` and ``threads``, and its build is the same for either trace
    format (``vvp`` picks it when it runs). Inside
    :func:`sim.backends.coverage_build.collecting` (a regression asking for code coverage)
    Verilator's build is a coverage build, cached apart from the plain one.
    """
    from .whole_run import RING_DEPTH, make_harness
    images = images or {}
    verilating = simulator == "verilator"
    hierarchical = tuple(hierarchical) if verilating else ()
    threads = model_threads(threads) if verilating else 1
    if verilating and waves == "fst":
        check_fst_tracing()
    # Icarus takes the scope in the testbench; Verilator's main at run time (+waves_scope).
    waves_scope = waves_scope if waves and not verilating else None
    covering = verilating and coverage_build.active() is not None
    opt = (model_opt(coverage_build.OPT) if covering else model_opt()) if verilating else None
    flags = (VERILATOR_FLAGS + _trace_flags(waves)
             + (("--threads", str(threads)) if threads > 1 else ())
             + (("--hierarchical",) if hierarchical else ())
             + (coverage_build.FLAGS if covering else ())) if verilating else ICARUS_FLAGS
    key = [_source_digest(), *key, run.block, sorted(run.params.items()), sorted(images),
           # No depth, no count: the harness is streamed, the same for any data.
           run.until, run.busy, sorted((*run.play, *run.record)), RING_DEPTH,
           sorted((player, recorder) for player, (recorder, _) in run.loopbacks.items()),
           flags, waves_scope, opt, _tool_version(simulator),
           amaranth_version()]
    if covering:        # what a coverage build adds (not in the plain builds' key)
        key += coverage_build.build_key()

    def make(folder):
        text, signature, repeated = design()
        harness = make_harness(run, BlackBox(run.block, signature), streamed=True)
        if covering:        # the block's lines to hdl/ lines; none in the test equipment
            coverage_build.source_map_of(folder, text, design)
            text = coverage_build.without_temporaries(text)
        text += "\n" + (coverage_build.HARNESS_OFF if covering else "") + \
            amaranth_verilog.convert(harness, name=HARNESS_MODULE, emit_src=False,
                                     strip_internal_attrs=True)
        if not verilating:
            text = icarus_source(text)
        elif waves:
            text = _hide_internal_names(text)
        (folder / "design.v").write_text(text)
        if set(hierarchical) - set(repeated):
            raise ValueError(f"hierarchical blocks {sorted(set(hierarchical) - set(repeated))} "
                             f"are not among the repeated modules {repeated}")
        (folder / "config.vlt").write_text(_verilator_config(repeated, hierarchical))
        (folder / "tb.v").write_text((coverage_build.HARNESS_OFF if covering else "")
                                     + testbench_verilog(harness, module=HARNESS_MODULE,
                                                         images=images, waves_scope=waves_scope))
        compile_harness(folder, simulator=simulator, flags=flags, opt=opt,
                        large=len(text) > LARGE_DESIGN_BYTES, what=what)

    return cached_build(f"whole-{simulator}", run.block, key, make)


def compile_harness(folder, *, simulator, flags, large, what, opt):
    """Compile ``folder``'s ``design.v``, ``tb.v`` (and ``config.vlt``) for ``simulator``,
    Verilator's model with its hot code at the g++ optimization ``opt``.

    ``large`` designs verilate without Verilator's DFG optimizer (see
    :data:`LARGE_DESIGN_BYTES`). A failure raises :class:`CompiledRunError` with
    the compiler's last lines, and keeps its whole log beside the folder.
    """
    if simulator == "verilator":
        shutil.copy(MAIN, folder / "main.cpp")
        commands = [[verilator(), *flags, *(("-fno-dfg",) if large else ()), "-Mdir", "obj",
                     "config.vlt", "main.cpp", "design.v", "tb.v"],
                    # A hierarchical build verilates its blocks, then the top, under make.
                    ["make", "-C", "obj", *MAKE_FLAGS, f"OPT_FAST={opt}",
                     *((f"-fV{TOP}_hier.mk", "hier_build") if "--hierarchical" in flags
                       else (f"-fV{TOP}.mk",))]]
    else:
        commands = [[iverilog(), *flags, "-o", "tb.vvp", "design.v", "tb.v"]]
    output = ""
    for command in commands:
        proc = subprocess.run(command, cwd=folder, env=tool_env(), capture_output=True,
                              text=True)
        output += proc.stdout + proc.stderr
        if proc.returncode:
            log = folder.parent / f"{folder.name}.failed.log"
            log.write_text(output)
            tail = " | ".join(output.strip().splitlines()[-3:])
            raise CompiledRunError(f"{simulator} build of {what} failed (exit status "
                                   f"{proc.returncode}): {tail} (full log: {log})")


_CYCLES = re.compile(r"whole-run: (\d+) cycles in ([\d.]+) s")


def simulate_whole(run, images, *, simulator, waves=None, waves_scope=None, threads=None,
                   progress=None):
    """Run a :class:`~sim.backends.whole_run.WholeRun` on ``simulator`` ("verilator" or "icarus").

    ``images`` maps the block's memories to their :class:`~sim.blocks.MemoryImage`;
    ``waves`` is a path whose suffix (.vcd or .fst) names the format.
    """
    folder = build(run, simulator=simulator, images=images, waves=wave_format(waves),
                   waves_scope=waves_scope, threads=threads)
    return run_built(folder, run, images, simulator=simulator, waves=waves,
                     waves_scope=waves_scope, progress=progress)


def run_built(folder, run, images, *, simulator, waves=None, waves_scope=None, progress=None):
    """:func:`simulate_whole` on ``folder``, a harness already built for ``run``'s block
    (by :func:`build`, or by a runner with a top of its own, as ``sim.network``)."""
    from .whole_run import finish
    (build_root() / "runs").mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{run.block}-", dir=build_root() / "runs"))
    try:
        args = [f"+{name}={value:x}" for name, value in run.settings().items()]
        for name, words in [*run.play.items(), *(("mem_" + n, w) for n, w in run.load.items())]:
            if words:
                (work / f"{name}.hex").write_text("".join(f"{word:x}\n" for word in words))
                args.append(f"+{name}_in={work / f'{name}.hex'}")
        args += [f"+{port}_out={work / f'{port}.out.hex'}" for port in run.record]
        args += [f"+mem_{name}_out={work / f'mem_{name}.out.hex'}" for name in run.dump]
        args.append(f"+status={work / 'status.txt'}")
        if progress is not None:
            args.append(f"+progress={PROGRESS_EVERY}")
        covering = (simulator == "verilator" and coverage_build.active() is not None
                    and (folder / coverage_build.SOURCE_MAP).exists())
        if covering:
            args.append(f"+coverage={work / 'coverage.dat'}")
        if waves:
            Path(waves).parent.mkdir(parents=True, exist_ok=True)
            args.append(f"+waves={Path(waves).resolve()}")
            if waves_scope:
                args.append(f"+waves_scope={waves_scope}")
        # vvp's extended arguments follow the image: the trace format (-vcd, -fst) is one.
        command = [str(folder / "obj" / f"V{TOP}")] if simulator == "verilator" else \
            ["vvp", "-n", str(folder / "tb.vvp"), f"-{wave_format(waves) or 'none'}"]
        seconds = _execute(command + args, work, simulator, run, progress)
        if covering:
            coverage_build.add_run(folder, work / "coverage.dat")
        status = _read_status(work / "status.txt", simulator, run)
        recorded = {port: _read_hex(work / f"{port}.out.hex", status[f"{port}_transfers"])
                    for port in run.record}
        memories = {name: _read_hex(work / f"mem_{name}.out.hex", images[name].depth)
                    for name in run.dump}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return finish(run, status, recorded, seconds, memories)


def _execute(command, work, simulator, run, progress):
    """Run the simulator; return its own time for the run (Icarus: the process' wall time)."""
    started = time.perf_counter()
    output = []
    with subprocess.Popen(command, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=tool_env()) as proc:
        try:
            for line in proc.stdout:
                output.append(line.rstrip("\n"))
                if progress is not None and line.startswith("progress "):
                    cycle, *streams = line.split()[1:]
                    progress(int(cycle), "; ".join(s.replace("=", ": ") for s in streams))
        except BaseException:
            proc.kill()
            raise
    wall = time.perf_counter() - started
    if proc.returncode:
        tail = " | ".join(output[-3:]) or "no output"
        raise CompiledRunError(f"{simulator} run of the {run.block} whole-run harness failed "
                               f"(exit status {proc.returncode}): {tail}")
    found = next((_CYCLES.search(line) for line in reversed(output) if _CYCLES.search(line)),
                 None)
    return float(found[2]) if found else wall


def _read_status(path, simulator, run):
    if not path.exists():
        raise CompiledRunError(f"{simulator} run of the {run.block} whole-run harness ended "
                               f"without writing its status")
    status = {}
    for line in path.read_text().splitlines():
        name, value = line.split()
        status[name] = _hex(value, path)
    return status


def _hex(word, path):
    if not re.fullmatch(r"[0-9a-fA-F]+", word):
        raise CompiledRunError(f"{word!r} in {path.name} is not a number (X or Z reached "
                               f"a result)")
    return int(word, 16)


def _read_hex(path, count):
    if count == 0:
        return []
    words = [line.split("//")[0].strip() for line in path.read_text().splitlines()]
    values = [_hex(word, path) for word in words if word and not word.startswith("@")]
    if len(values) != count:
        raise CompiledRunError(f"{path.name} holds {len(values)} entries, expected {count}")
    return values
