"""``tpu-rtl system bench``: the goals of issue 15 measured on the RTL system, written to
``docs/system.md`` between its ``<!-- bench -->`` markers.

Every figure comes from one run of this command (the doc names the command and seed):
collectives at the largest message size on 1x4 and 4x4, an all-reduce size sweep against
the alpha-beta model of ``golden.collectives`` (and a variant that also charges each chip's
injection and ejection ports), alpha itself (a one-word push between neighbours, issue to the
remote flag), and simulation speed. Every run is checked bit for bit against golden.
"""

import math
import time
from pathlib import Path

import numpy as np

__all__ = ["measure", "BENCH_CHIP", "port_bound_cycles"]

#: Memories that hold the largest benchmark messages (32 KiB per chip and its staging),
#: the same for every size, so that each topology is built once.
BENCH_CHIP = dict(vmem_lines=4096, smem_words=4096, imem_depth=1024, n_flags=64)

BEGIN, END = "<!-- bench -->", "<!-- /bench -->"


def port_bound_cycles(transfers, topology, *, alpha, link_bytes_per_cycle, ports=1):
    """The alpha-beta cost with each chip's injection and ejection ports charged too: per
    lockstep step, ``alpha`` plus the larger of the busiest link's bytes over B and the
    most bytes any chip sends or receives over ``ports`` x B (a chip pushes and lands a
    link's worth a cycle on each of its ``ports`` network ports)."""
    from golden import collectives
    steps = {}
    for tr in transfers:
        steps.setdefault(tr.step, []).append(tr)
    total = 0.0
    for group in steps.values():
        sent, received = {}, {}
        for tr in group:
            nbytes = tr.words * collectives.WORD_BYTES
            sent[tr.src] = sent.get(tr.src, 0) + nbytes
            received[tr.dst] = received.get(tr.dst, 0) + nbytes
        link = collectives.link_loads(group, topology).max()
        chip = max(max(sent.values()), max(received.values())) / ports
        total += alpha + max(link, chip) / link_bytes_per_cycle
    return total


def _alpha(backend):
    """Cycles from a one-word push's issue to its flag at the neighbour: a run with the
    push and its wait, minus the same run without either (start and halt overheads)."""
    from golden import tensorcore as tc
    from golden.memory import Descriptor
    from sim import system
    d = Descriptor(("vmem", 0), ("remote", 1, "vmem", 64), (1,), (1,), (1,), 1, sent_flag=0)
    record = np.array(tc.descriptor_words(d), np.uint32)
    idle = ["halt\n"] * 4
    push = ["dma s0+0\nwait f0, 1\nhalt\n", "wait f1, 1\nhalt\n", "halt\n", "halt\n"]
    images = [np.zeros(2, np.uint32)] * 4
    smem = [record] * 4
    runs = [system.run_programs("1x4", programs, vmem=images, smem=smem, chip=BENCH_CHIP,
                                backend=backend).cycles for programs in (idle, push)]
    return runs[1] - runs[0]


def _inputs(kind, chips, words, rng):
    from .system_cli import random_inputs
    return random_inputs(kind, chips, 4 * words, "float32", rng)


def measure(path=Path("docs/system.md"), *, backend="verilator", seed=1, quick=False,
            out=print):
    """Run the benchmarks, print them, and write them into ``path``; return the rows.
    ``quick`` leaves out the 4x4 torus (its build takes 10 to 20 minutes)."""
    from golden import collectives
    from golden import topology as topo
    from sim import system

    rng = np.random.default_rng(seed)
    b = system.LINK_BYTES_PER_CYCLE
    rows, sweep, speed, pieces = [], [], {}, []

    def run(kind, topology, words, chunks=1):
        chips = int(topology.alive.sum())
        inputs = _inputs(kind, chips, words, rng)
        started = time.perf_counter()
        result = system.collective(kind, inputs, topology=topology, backend=backend,
                                   seed=seed, chip=BENCH_CHIP, chunks=chunks)
        want = collectives.collective(kind, inputs, topology=topology)
        wrong = int(np.count_nonzero(result.out.view(np.uint32) != want.view(np.uint32)))
        if wrong:
            raise RuntimeError(f"{kind} on {topology.shape}: {wrong} words differ from golden "
                               f"(seed {seed})")
        out(f"  {kind} {topology.shape} S={collectives.message_bytes(kind, inputs.shape):,} B, "
            f"chunks {chunks}: "
            f"{result.cycles:,} cycles, busbw {result.busbw:.3f} of {result.bus_bound:.1f} "
            f"({time.perf_counter() - started:.1f} s)")
        return inputs.shape, result

    alpha = _alpha(backend)
    out(f"  alpha: {alpha} cycles")
    ring, torus = topo.torus((1, 4)), topo.torus((4, 4))
    goals = [("1x4 ring all-reduce", ring, "all_reduce", 8192, 4),
             ("1x4 reduce-scatter", ring, "reduce_scatter", 8192, 4),
             ("1x4 all-gather", ring, "all_gather", 8192, 4),
             ("1x4 all-to-all", ring, "all_to_all", 8192, 1)]
    if not quick:
        # Chunks 2, not 4: a 4x4 reduce piece of 32 KiB in 4 chunks is 4 VMEM lines, and
        # the VPU moves 8 lines a vld/vst, so pieces under 8 lines cost as much as 8.
        goals += [("4x4 torus all-reduce", torus, "all_reduce", 8192, 2),
                  ("4x4 reduce-scatter", torus, "reduce_scatter", 8192, 2),
                  ("4x4 all-gather", torus, "all_gather", 8192, 2),
                  ("4x4 all-to-all", torus, "all_to_all", 8192, 1)]
    for label, topology, kind, words, chunks in goals:
        shape, result = run(kind, topology, words, chunks)
        rows.append((label, kind, topology, shape, result, chunks))
        speed[topology.shape] = (result.cycles, result.seconds)
    for chunks in (1, 2, 4, 8):
        _, result = run("all_reduce", ring, 8192, chunks)
        pieces.append((chunks, result.cycles, result.busbw))
    for words in (64, 128, 256, 1024, 4096, 8192):
        shape, result = run("all_reduce", ring, words)
        transfers = collectives.schedule("all_reduce", ring, shape)
        model = collectives.alpha_beta_cycles(transfers, ring, alpha=alpha,
                                              link_bytes_per_cycle=b)
        ports = port_bound_cycles(transfers, ring, alpha=alpha, link_bytes_per_cycle=b,
                                  ports=system.SYSTEM_CHIP["network_ports"])
        sweep.append((shape, result.cycles, model, ports))
    inputs = _inputs("all_reduce", 4, 1024, rng)
    small = system.collective("all_reduce", inputs, topology="2x2", backend=backend, seed=seed)
    speed["2x2"] = (small.cycles, small.seconds)
    text = _markdown(rows, sweep, speed, pieces, alpha, seed=seed, backend=backend, quick=quick)
    _write(Path(path), text)
    out(text)
    return rows


def _markdown(rows, sweep, speed, pieces, alpha, *, seed, backend, quick):
    from golden import collectives
    from sim import system
    b = system.LINK_BYTES_PER_CYCLE
    lines = [f"Measured by `tpu-rtl system bench --seed {seed}{' --quick' if quick else ''}` "
             f"({backend}); every run "
             f"bit-exact against `golden.collectives`. B = {b} bytes/cycle (one-word flits); "
             f"busbw and bounds in bytes/cycle.", "",
             "| goal | S (bytes) | chunks | cycles | busbw | link bound | fraction | "
             "chip-port bound | fraction |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, kind, topology, shape, result, chunks in rows:
        # P push engines and P receive engines a chip, B bytes a cycle each: a chip must
        # send bus_factor * S bytes of every kind (all-reduce 2(C-1)/C, the others
        # (C-1)/C), so busbw = S * bus_factor / cycles <= P * B.
        port = system.SYSTEM_CHIP["network_ports"] * b
        lines.append(f"| {label} | {collectives.message_bytes(kind, shape):,} | {chunks} | "
                     f"{result.cycles:,} | {result.busbw:.3f} | {result.bus_bound:.2f} | "
                     f"{result.busbw / result.bus_bound:.3f} | {port:.2f} | "
                     f"{result.busbw / port:.3f} |")
    lines += ["", f"Alpha (a one-word push to a neighbour, from issue to its flag there): "
                  f"**{alpha} cycles**.", "",
              "1x4 ring all-reduce against the cost models (alpha above, chunks = 1):", "",
              "| n (words) | RTL cycles | alpha-beta (links) | RTL / model | "
              "alpha-beta (links and chip ports) | RTL / model |",
              "|---:|---:|---:|---:|---:|---:|"]
    for shape, cycles, model, ports in sweep:
        lines.append(f"| {shape[1]:,} | {cycles:,} | {model:,.0f} | {cycles / model:.3f} | "
                     f"{ports:,.0f} | {cycles / ports:.3f} |")
    lines += ["", "1x4 ring all-reduce of 32 KiB by chunks per transfer (pipelining the ring "
                  "steps):", "", "| chunks | cycles | busbw |", "|---:|---:|---:|"]
    for chunks, cycles, busbw in pieces:
        lines.append(f"| {chunks} | {cycles:,} | {busbw:.3f} |")
    lines += ["", "Simulation speed (Verilator, the compiled whole-run path; loading and "
                  "read-back included, the build not):", "",
              "| system | cycles | seconds | cycles/s |", "|---|---:|---:|---:|"]
    for shape, (cycles, seconds) in speed.items():
        lines.append(f"| {shape} | {cycles:,} | {seconds:.2f} | "
                     f"{cycles / max(seconds, 1e-9):,.0f} |")
    return "\n".join(lines) + "\n"


def _write(path, text):
    old = path.read_text() if path.exists() else f"# Multi-chip systems\n\n{BEGIN}\n{END}\n"
    if BEGIN not in old or END not in old:
        old += f"\n{BEGIN}\n{END}\n"
    head, rest = old.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{BEGIN}\n{text}{END}{tail}")
