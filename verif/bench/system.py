"""``tpu-rtl system bench``: the goals of issue 15 measured on the RTL system, written to
``docs/system.md`` between its ``<!-- bench -->`` markers.

Every figure comes from one run of this command (the doc names the command and seed):
collectives at the largest message size on 1x4 and 4x4; the cost model's constants, measured
by microbenchmarks (``verif.bench.calibration``); the RTL against the model
(``golden.collective_cost``) over chunks per transfer for every kind on the 1x4 ring, and
against the lockstep alpha-beta model of ``golden.collectives`` over message sizes; and
simulation speed. Every run is checked bit for bit against golden.
"""

import dataclasses
import time
from pathlib import Path

import numpy as np

from verif.report import write_marked

__all__ = ["measure", "BENCH_CHIP", "RING_CHIP", "TORUS_CHIP", "ALL_TO_ALL_CHIP", "CHUNK_SWEEP"]

#: Memories that hold the largest benchmark messages (32 KiB per chip and its staging),
#: the same for every size, so that each topology is built once.
BENCH_CHIP = dict(vmem_lines=4096, smem_words=4096, imem_depth=1024, n_flags=64)

#: The 4x4 torus's chip: a network port per torus link (4 on a 2-D torus; two ports cap
#: busbw at 2B, half the 4x4 bound), and 16 lanes, so that the DMA's VMEM port (a line a
#: cycle) carries four push and four receive engines with room to spare; 128K words of
#: VMEM, which hold a 128 KiB all-reduce and its staging, and a 128 KiB all-to-all by
#: dimensions with its receive buffer and relay area. (32 lanes reached 0.938 and
#: 0.897 of the bound in all-reduce and reduce-scatter, against 16 lanes' 0.915 and 0.861,
#: at half the simulation speed: docs/system.md.)
TORUS_CHIP = dict(BENCH_CHIP, lanes=16, network_ports=4, vmem_lines=8192)
#: Words a chip of the 4x4 goals (S = 128 KiB: the largest all-reduce its VMEM holds with
#: its staging), and their chunks per transfer: 4, so that a reduce piece is 8 VMEM lines
#: of 16 lanes (the VPU moves 8 lines a vld/vst, and a smaller piece costs as much). At
#: 64 KiB in 2 chunks, the largest size of the 32K-word VMEM before, the all-reduce
#: reached 0.823 and the reduce-scatter 0.733: a ring step's pieces then pipeline over
#: half as many chunks.
TORUS_WORDS, TORUS_CHUNKS = 32768, 4
#: The 4x4 all-to-all's chunks: its phases pipeline (at 64 KiB, 0.620 of the bound in one
#: chunk, 0.657 in 4, 0.728 in 8, 0.693 in 16).
TORUS_ALL_TO_ALL_CHUNKS = 8
#: The 4x4 all-to-all's chip: :data:`TORUS_CHIP` with two more network ports (6). The
#: programs deal an all-to-all's pushes to the push ports by direction, and a port sends
#: one push at a time: a 2-hop push whose packet waits at the next router (wormhole, 66
#: flits over 8-flit buffers) holds its port, and that direction's link idles. The two
#: ports past the four directions take pushes of the direction with the most left, so a
#: direction has a second sender (128 KiB in 8 chunks: 22,879 cycles with 4 ports, 18,178
#: with 6). The ring collectives stay on :data:`TORUS_CHIP`: their pushes go one hop, and
#: the extra ports, which mix directions, made them slower (all-reduce 18,779 cycles
#: against 16,782, reduce-scatter 10,448 against 8,918: docs/system.md).
ALL_TO_ALL_CHIP = dict(TORUS_CHIP, network_ports=6)

#: The 1x4 ring's chip: flags and IMEM for every chunking swept. (A 4x4 system reads out
#: 16 x 64 flags of 32 bits; 128 flags a chip would pass Amaranth's 65,536-bit limit on
#: one port.)
RING_CHIP = dict(BENCH_CHIP, imem_depth=2048, n_flags=128)

#: Chunks per transfer swept at 32 KiB on the 1x4 ring, from one to the most the flag bank
#: takes: a reduce or gather program uses a flag per step and chunk (1 + steps * chunks
#: <= 128: 6 steps for all_reduce, 3 for the others), a direct all_to_all one flag in all.
CHUNK_SWEEP = {"all_reduce": (1, 2, 3, 4, 6, 8, 12, 16, 21),
               "reduce_scatter": (1, 2, 4, 8, 16, 32, 42),
               "all_gather": (1, 2, 4, 8, 16, 32, 42),
               "all_to_all": (1, 2, 4, 8, 16, 32, 64)}

#: Words of a chip's all-reduce row in the size sweep (chunks = 1).
SIZES = (64, 128, 256, 1024, 4096, 8192)

#: The goal's band for the model: RTL cycles within +-5% of it.
TOLERANCE = 0.05

BEGIN, END = "<!-- bench -->", "<!-- /bench -->"


def _inputs(kind, chips, words, rng):
    from verif.suites.system.inputs import random_inputs
    return random_inputs(kind, chips, 4 * words, "float32", rng)


def measure(path=Path("docs/system.md"), *, backend="verilator", seed=1, quick=False,
            out=print):
    """Run the benchmarks, print them, and write them into ``path``; return the goal rows.
    ``quick`` leaves out the 4x4 torus (its build takes about 6 minutes)."""
    from golden import collective_cost, collectives
    from golden import topology as topo
    from sim import system

    from verif.bench.calibration import calibrate

    rng = np.random.default_rng(seed)
    b = system.LINK_BYTES_PER_CYCLE
    out("  calibrating the cost model on the 1x4 ring")
    params = calibrate(RING_CHIP, backend=backend)
    out(f"  {params}")

    ring, torus = topo.torus((1, 4)), topo.torus((4, 4))

    def run(kind, topology, words, chunks=1, chip=None):
        """(inputs' shape, CollectiveRun, model cycles, chip parameters) of one checked
        collective, on ``chip`` (default the topology's: :data:`RING_CHIP` or
        :data:`TORUS_CHIP`)."""
        chips = int(topology.alive.sum())
        inputs = _inputs(kind, chips, words, rng)
        started = time.perf_counter()
        chip = _whole(chip or (RING_CHIP if topology is ring else TORUS_CHIP))
        result = system.collective(kind, inputs, topology=topology, backend=backend,
                                   seed=seed, chip=chip, chunks=chunks)
        want = collectives.collective(kind, inputs, topology=topology)
        wrong = int(np.count_nonzero(result.out.view(np.uint32) != want.view(np.uint32)))
        if wrong:
            raise RuntimeError(f"{kind} on {topology.shape}: {wrong} words differ from golden "
                               f"(seed {seed})")
        model = collective_cost.pipelined_cycles(
            collectives.schedule(kind, topology, inputs.shape), chunks=chunks,
            params=_for_chip(params, chip, kind))
        out(f"  {kind} {topology.shape} S={collectives.message_bytes(kind, inputs.shape):,} B, "
            f"chunks {chunks}: {result.cycles:,} cycles (model {model:,.0f}), busbw "
            f"{result.busbw:.3f} of {result.bus_bound:.1f} "
            f"({time.perf_counter() - started:.1f} s)")
        return inputs.shape, result, model, chip

    goals = [("1x4 ring all-reduce", ring, "all_reduce", 8192, 4),
             ("1x4 reduce-scatter", ring, "reduce_scatter", 8192, 4),
             ("1x4 all-gather", ring, "all_gather", 8192, 4),
             ("1x4 all-to-all", ring, "all_to_all", 8192, 1)]
    if not quick:
        goals += [("4x4 torus all-reduce", torus, "all_reduce", TORUS_WORDS, TORUS_CHUNKS),
                  ("4x4 reduce-scatter", torus, "reduce_scatter", TORUS_WORDS, TORUS_CHUNKS),
                  ("4x4 all-gather", torus, "all_gather", TORUS_WORDS, TORUS_CHUNKS),
                  ("4x4 all-to-all", torus, "all_to_all", TORUS_WORDS,
                   TORUS_ALL_TO_ALL_CHUNKS, ALL_TO_ALL_CHIP)]
    rows, speed = [], {}
    for label, topology, kind, words, chunks, *given in goals:
        shape, result, model, chip = run(kind, topology, words, chunks, *given)
        rows.append((label, kind, shape, result, chunks, model, chip["network_ports"]))
        if not given:           # the speed of the topology's own chip, its first run
            speed.setdefault(topology.shape, (result.cycles, result.seconds))
    sweep = []
    for kind, counts in CHUNK_SWEEP.items():
        for chunks in counts:
            _, result, model, _ = run(kind, ring, 8192, chunks)
            sweep.append((kind, chunks, result.cycles, result.busbw, model))
    sizes = []
    for words in SIZES:
        shape, result, model, _ = run("all_reduce", ring, words)
        lockstep = collectives.alpha_beta_cycles(
            collectives.schedule("all_reduce", ring, shape), ring, alpha=params.alpha,
            link_bytes_per_cycle=b)
        sizes.append((words, result.cycles, lockstep, model))
    inputs = _inputs("all_reduce", 4, 1024, rng)
    small = system.collective("all_reduce", inputs, topology="2x2", backend=backend, seed=seed,
                              chip=system.SYSTEM_CHIP, chunks=1)
    speed["2x2"] = (small.cycles, small.seconds)
    text = _markdown(rows, params, sweep, sizes, speed, seed=seed, backend=backend,
                     quick=quick)
    write_marked(Path(path), text, begin=BEGIN, end=END)
    out(text)
    return rows


def _whole(chip):
    """Every TensorCore parameter of a benchmark chip: ``sim.system.SYSTEM_CHIP``'s, as
    ``sim.system.collective`` completes them, and ``chip``'s."""
    from sim import system
    return dict(system.SYSTEM_CHIP) | dict(chip)


def _for_chip(params, chip, kind=None):
    """``params`` (measured on :data:`RING_CHIP`) with the ports, lanes, push size (for
    collective ``kind``) and push queues of ``chip`` (all its parameters), and the
    programs' reduce groups (a reduce piece in whole groups of 8 lines,
    ``sim.kernels.collective.plan_collective``'s ``align``); the measured constants are
    cycles, which the lanes do not change."""
    from golden.vpu import SUBLANES
    from sim import system

    from sim.system_chip import queue_words
    return dataclasses.replace(params, ports=chip["network_ports"], lanes=chip["lanes"],
                               push_words=system.plan_push_words(chip, kind),
                               queue_words=queue_words(chip), reduce_align=SUBLANES)


def _ratio(cycles, model):
    """RTL / model, bold when outside the goal's band."""
    r = cycles / model
    return f"{r:.3f}" if abs(r - 1) <= TOLERANCE else f"**{r:.3f}**"


def _markdown(rows, params, sweep, sizes, speed, *, seed, backend, quick):
    from golden import collectives
    from sim import system
    b = system.LINK_BYTES_PER_CYCLE
    ring, torus, a2a = _whole(RING_CHIP), _whole(TORUS_CHIP), _whole(ALL_TO_ALL_CHIP)
    lines = [f"Measured by `tpu-rtl system bench --seed {seed}{' --quick' if quick else ''}` "
             f"({backend}); every run "
             f"bit-exact against `golden.collectives`. B = {b} bytes/cycle (one-word flits); "
             f"busbw and bounds in bytes/cycle; model: `golden.collective_cost` with the "
             f"constants below. The 1x4 ring's chips have {ring['network_ports']} network "
             f"ports and {ring['lanes']} lanes (`RING_CHIP`), the 4x4 torus's "
             f"{torus['network_ports']} and {torus['lanes']} (`TORUS_CHIP`), and its "
             f"all-to-all's {a2a['network_ports']} and {a2a['lanes']} (`ALL_TO_ALL_CHIP`).",
             "",
             "| goal | S (bytes) | chunks | cycles | busbw | link bound | fraction | "
             "chip-port bound | fraction | model | RTL / model |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, kind, shape, result, chunks, model, ports in rows:
        # P push engines and P receive engines a chip, B bytes a cycle each: a chip must
        # send bus_factor * S bytes of every kind (all-reduce 2(C-1)/C, the others
        # (C-1)/C), so busbw = S * bus_factor / cycles <= P * B.
        port = ports * b
        lines.append(f"| {label} | {collectives.message_bytes(kind, shape):,} | {chunks} | "
                     f"{result.cycles:,} | {result.busbw:.3f} | {result.bus_bound:.2f} | "
                     f"{result.busbw / result.bus_bound:.3f} | {port:.2f} | "
                     f"{result.busbw / port:.3f} | {model:,.0f} | "
                     f"{_ratio(result.cycles, model)} |")
    lines += ["", "The cost model's constants (`verif.bench.calibration`, on the 1x4 ring):",
              "", "| constant | value | from |", "|---|---:|---|"]
    sources = {
        "alpha": "a one-word push to a neighbour, issue to its flag there",
        "hop_cycles": "the same push two hops away, less alpha",
        "group_cycles": "the reduce loop, 8 lines an iteration",
        "line_cycles": "the reduce loop, one line an iteration",
        "descriptor_cycles": "back-to-back 8-word pushes",
        "fill_cycles": "a 64-word push against a 32-word one, less a flit a word",
        "event_cycles": "fitted to the chunk sweep below (the one constant not measured)",
        "dma_slots": "the DMA's queue and in-flight descriptors (`outstanding` each)",
        "push_words": "the programs' push size (`sim.system.plan_push_words`)",
        "packet_words": "the DMA's packets", "header_flits": "`golden.ici`'s write packet",
        "queue_words": "a push port's queue, 64 lines (`sim.system_chip.queue_words`)"}
    for name, source in sources.items():
        lines.append(f"| `{name}` | {getattr(params, name):g} | {source} |")
    within = sum(abs(c / m - 1) <= TOLERANCE for _, _, c, _, m in sweep)
    worst = max(sweep, key=lambda r: abs(r[2] / r[4] - 1))
    lines += ["", f"1x4 ring, S = 32 KiB, by chunks per transfer: {within} of {len(sweep)} "
                  f"runs within +-{TOLERANCE:.0%} of the model (bold: outside); the worst, "
                  f"{worst[0]} at {worst[1]} chunks, {worst[2] / worst[4] - 1:+.1%}.", "",
              "| kind | chunks | RTL cycles | busbw | model | RTL / model |",
              "|---|---:|---:|---:|---:|---:|"]
    for kind, chunks, cycles, busbw, model in sweep:
        lines.append(f"| {kind} | {chunks} | {cycles:,} | {busbw:.3f} | {model:,.0f} | "
                     f"{_ratio(cycles, model)} |")
    lines += ["", "1x4 ring all-reduce by message size (chunks = 1), against the lockstep "
                  "alpha-beta model (`golden.collectives.alpha_beta_cycles`: alpha + the "
                  "busiest link's bytes / B per step) and the model:", "",
              "| n (words) | RTL cycles | alpha-beta | RTL / alpha-beta | model | "
              "RTL / model |", "|---:|---:|---:|---:|---:|---:|"]
    for words, cycles, lockstep, model in sizes:
        lines.append(f"| {words:,} | {cycles:,} | {lockstep:,.0f} | {cycles / lockstep:.3f} | "
                     f"{model:,.0f} | {_ratio(cycles, model)} |")
    lines += ["", "Simulation speed (Verilator, the compiled whole-run path; loading and "
                  "read-back included, the build not):", "",
              "| system | cycles | seconds | cycles/s |", "|---|---:|---:|---:|"]
    for shape, (cycles, seconds) in speed.items():
        lines.append(f"| {shape} | {cycles:,} | {seconds:.2f} | "
                     f"{cycles / max(seconds, 1e-9):,.0f} |")
    return "\n".join(lines) + "\n"
