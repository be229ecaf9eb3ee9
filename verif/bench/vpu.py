"""The VPU benchmarks of issue 10, measured on the RTL: the dual-issue rate of a program
without dependences, and simulated cycles per second on every backend.

::

    .venv/bin/python -m verif.bench.vpu            # the table (8 lanes, every backend)

* **ALU rate**: ALU instructions / cycles of a whole run of ``n`` independent ALU
  instructions (no instruction reads another's result, and a destination is
  reused only after 24 instructions, 12 cycles, beyond the ALU's latency of 2). The
  run's cycles include its start and the last write-back, so the rate is a little
  under the 2 the two slots allow.
* **speed**: simulated cycles per second of a program that keeps every unit busy
  (loads, ALU pairs, reciprocals, reductions and stores): its cycles over the wall time
  of :func:`sim.vpu.run` after a warm-up run (the build excluded; loading, read-back and
  the simulator's start included).
"""

import argparse
import sys
import time
from dataclasses import dataclass

import numpy as np

from golden import vpu as golden

from sim.toolchain import iverilog
from sim.vpu import run

__all__ = ["independent_alu_program", "mixed_program", "alu_rate", "speed", "SpeedRow",
           "SPEED_BLOCKS",
           "format_table", "main"]

# ALU instructions the rate program cycles through: every operand shape (binary, unary,
# select) and every datapath (adder, multiplier, converters, compare, integer).
_RATE_OPS = ("add", "mul", "max", "iadd", "xor", "lt", "sub", "f32_to_i32", "select",
             "sra", "i32_to_f32", "f32_to_bf16")


def independent_alu_program(n):
    """``n`` ALU instructions, none reading another's result (sources ``v0..v7``,
    destinations ``v8..v31`` in turn)."""
    lines = []
    for i in range(n):
        op = _RATE_OPS[i % len(_RATE_OPS)]
        operands = golden.OPS[op].operands
        regs = {"vd": 8 + i % 24, "va": i % 4, "vb": 4 + i % 4, "vc": (i + 1) % 4}
        lines.append(f"{op} " + ", ".join(f"v{regs[f]}" for f in operands))
    return "\n".join(lines)


def mixed_program(blocks):
    """``blocks`` repetitions of a block that uses every unit: a load, three ALU pairs,
    a reciprocal, a reduction and a store, each block on its own registers."""
    lines = []
    for b in range(blocks):
        r = 8 + (b % 3) * 8                     # v8.., v16.., v24..: three blocks in flight
        line = (b * 8) % 64
        lines += [f"vld v{r}, {line}, 1",
                  f"add v{r + 1}, v0, v1", f"mul v{r + 2}, v2, v3",
                  f"max v{r + 3}, v{r}, v0", f"iadd v{r + 4}, v1, v2",
                  f"rcp v{r + 5}, v{r + 1}", f"rsum v{r + 6}, v{r + 2}",
                  f"sub v{r + 7}, v{r + 3}, v1", "nop",
                  f"vst v{r + 7}, {line + 64}, 1"]
    return "\n".join(lines)


def _operands(lanes, seed):
    rng = np.random.default_rng(seed)
    vregs = np.zeros((golden.VREGS, golden.SUBLANES, lanes), np.uint32)
    vregs[:8] = rng.standard_normal((8, golden.SUBLANES, lanes)).astype(np.float32).view(
        np.uint32)
    vmem = rng.standard_normal(256 * lanes).astype(np.float32).view(np.uint32)
    return vregs, vmem


def alu_rate(*, lanes=8, backend="verilator", n=4096, seed=1):
    """(ALU instructions per cycle, cycles, dual-issue cycles) of :func:`independent_alu_program`."""
    vregs, vmem = _operands(lanes, seed)
    result = run(independent_alu_program(n), vregs=vregs, vmem=vmem, lanes=lanes,
                 backend=backend)
    if result.error is not None or result.executed != n:
        raise RuntimeError(f"the rate program stopped: {result.error} at {result.error_index}")
    return n / result.cycles, result.cycles, result.dual


@dataclass(frozen=True)
class SpeedRow:
    backend: str
    cycles: int
    seconds: float

    @property
    def rate(self):
        return self.cycles / self.seconds


#: Blocks of :func:`mixed_program` per backend: runs of a minute or less on each.
SPEED_BLOCKS = {"amaranth": 20, "verilator": 400, "icarus": 40}


def speed(*, lanes=8, backends=None, blocks=None, seed=1, repeats=3, progress=None):
    """Median simulated cycles per second of :func:`mixed_program` per backend.

    ``blocks`` per backend defaults to :data:`SPEED_BLOCKS`. The first run of
    each builds (not timed); then ``repeats`` runs. ``progress``, if given, is
    called with each backend's :class:`SpeedRow` as soon as it is measured.
    """
    backends = backends or ["amaranth", "verilator"] + (["icarus"] if iverilog() else [])
    blocks = SPEED_BLOCKS | (blocks or {})
    vregs, vmem = _operands(lanes, seed)
    rows = []
    for backend in backends:
        program = mixed_program(blocks[backend])
        run(program, vregs=vregs, vmem=vmem, lanes=lanes, backend=backend)   # build, warm
        times, cycles = [], 0
        for _ in range(repeats):
            began = time.perf_counter()
            cycles = run(program, vregs=vregs, vmem=vmem, lanes=lanes, backend=backend).cycles
            times.append(time.perf_counter() - began)
        rows.append(SpeedRow(backend, cycles, float(np.median(times))))
        if progress:
            progress(rows[-1])
    return rows


def _rate(value):
    return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"


def format_table(rate, rows, *, lanes):
    """Markdown lines of the VPU benchmarks."""
    per_cycle, cycles, dual = rate
    lines = [f"| {lanes}-lane VPU | cycles | seconds (median) | cycles per second |",
             "|---|---:|---:|---:|"]
    lines += [f"| {row.backend} | {row.cycles:,} | {row.seconds:.2f} | {_rate(row.rate)} |"
              for row in rows]
    return [f"ALU instructions per cycle without dependences: **{per_cycle:.3f}** of 2 "
            f"({cycles:,} cycles, {dual:,} of them dual-issue; goal >= 1.9).", ""] + lines


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m verif.bench.vpu", description=__doc__)
    parser.add_argument("--lanes", type=int, default=8)
    parser.add_argument("--backend", action="append", choices=("amaranth", "verilator", "icarus"))
    args = parser.parse_args(argv)
    rate = alu_rate(lanes=args.lanes)
    print(f"ALU rate: {rate[0]:.3f} per cycle", file=sys.stderr, flush=True)
    rows = speed(lanes=args.lanes, backends=args.backend,
                 progress=lambda row: print(f"{row.backend}: {row.cycles:,} cycles, "
                                            f"{row.seconds:.2f} s, {_rate(row.rate)} per second",
                                            file=sys.stderr, flush=True))
    print("\n".join(format_table(rate, rows, lanes=args.lanes)))


if __name__ == "__main__":
    main()
