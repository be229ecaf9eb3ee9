"""``tpu-rtl bench collectives``: the collectives as users call them, through
``sim.system.collective``'s defaults only (no ``chip=``, no ``chunks=``), written to
docs/system.md between its ``<!-- bench collectives -->`` markers, with the busbw curve of
the 4x4 all-reduce against message size as a plot.

Every run is checked bit for bit against ``golden.collectives``. The default chip and the
chunking each run chose are reported beside the figures, with the cycles the cost model
predicted for that choice.
"""

import time
from pathlib import Path

import numpy as np

from verif.report import write_marked

__all__ = ["measure", "GOALS", "COMPARED", "SWEEP_BYTES"]

#: (label, topology, kind, message bytes S, the goal's fraction of the link bound).
GOALS = (("1x4 ring all-reduce", "1x4", "all_reduce", 32 << 10, 0.90),
         ("4x4 all-reduce", "4x4", "all_reduce", 256 << 10, 0.85),
         ("4x4 reduce-scatter", "4x4", "reduce_scatter", 256 << 10, 0.85),
         ("4x4 all-gather", "4x4", "all_gather", 256 << 10, 0.85),
         ("2x2x2 all-reduce", "2x2x2", "all_reduce", 64 << 10, 0.80))
#: Beside the goals, the same runs with another routing than the default's: (label of the
#: goal, routing).
COMPARED = (("2x2x2 all-reduce", "dor"),)
#: The 4x4 all-reduce's sizes, 1 KiB to 1 MiB, doubling (nccl-tests' S).
SWEEP_BYTES = tuple(1 << e for e in range(10, 21))

BEGIN, END = "<!-- bench collectives -->", "<!-- /bench collectives -->"


def _run(kind, topology, size, *, backend, seed, rng, routing=None):
    """One checked collective through the defaults: its row. A progress line on stderr
    names the build or run it waits on, with a heartbeat (a build takes minutes)."""
    from golden import collectives
    from sim import system

    from verif.progress import ProgressLine
    from verif.suites.system.inputs import random_inputs
    chips = int(topology.alive.sum())
    inputs = random_inputs(kind, chips, size, "float32", rng)
    started = time.perf_counter()
    line = ProgressLine(f"{kind} {topology.shape} {size:,} B")

    def progress(cycle, status):
        line.update(text=f"cycle {cycle:,}: {status}")
    try:
        run = system.collective(kind, inputs, topology=topology, backend=backend, seed=seed,
                                routing=routing, progress=progress)
    finally:
        line.close()
    want = collectives.collective(kind, inputs, topology=topology)
    wrong = int(np.count_nonzero(run.out.view(np.uint32) != want.view(np.uint32)))
    if wrong:
        raise RuntimeError(f"{kind} on {topology.shape}, S = {size:,} B: {wrong} words differ "
                           f"from golden (seed {seed}; reproduce: tpu-rtl system collective "
                           f"{kind} --topology {topology.shape} --size {size} --seed {seed}"
                           f"{f' --routing {routing}' if routing else ''})")
    return dict(size=collectives.message_bytes(kind, inputs.shape), cycles=run.cycles,
                busbw=run.busbw, bound=run.bus_bound, fraction=run.busbw / run.bus_bound,
                chunks=run.chunks, predicted=run.predicted_cycles,
                ports=run.chip["network_ports"], lanes=run.chip["lanes"], routing=run.routing,
                seconds=time.perf_counter() - started)


def measure(path=Path("docs/system.md"), *, backend="verilator", seed=1, out=print,
            plot=None):
    """Run the goals and the 4x4 sweep, print each row, write the section into ``path``
    and the busbw plot to ``plot`` (default: ``img/busbw_4x4.png`` beside ``path``).
    Returns ``(goal rows, sweep rows)``."""
    from golden import topology as topo
    rng = np.random.default_rng(seed)
    tori = {}
    goals = []
    runs = [(label, shape, kind, size, goal, None) for label, shape, kind, size, goal in GOALS]
    runs += [(label, shape, kind, size, None, routing) for label, shape, kind, size, _ in GOALS
             for compared, routing in COMPARED if compared == label]
    for label, shape, kind, size, goal, routing in runs:
        topology = tori.setdefault(shape, topo.torus(shape))
        row = _run(kind, topology, size, backend=backend, seed=seed, rng=rng, routing=routing)
        goals.append(dict(row, label=label, goal=goal))
        out(f"  {label}, S = {row['size']:,} B, {row['routing']} routing: {row['cycles']:,} "
            f"cycles in {row['chunks']} chunks, {row['fraction']:.3f} of the bound"
            f"{f' (goal {goal})' if goal else ''} ({row['seconds']:.0f} s)")
    sweep = []
    for size in SWEEP_BYTES:
        row = _run("all_reduce", tori["4x4"], size, backend=backend, seed=seed, rng=rng)
        sweep.append(row)
        out(f"  4x4 all-reduce S = {size:,} B: {row['cycles']:,} cycles in {row['chunks']} "
            f"chunks, busbw {row['busbw']:.3f} ({row['seconds']:.0f} s)")
    path = Path(path)
    plot = Path(plot) if plot is not None else path.parent / "img" / "busbw_4x4.png"
    _plot(sweep, plot)
    text = _markdown(goals, sweep, plot.relative_to(path.parent) if plot.is_relative_to(
        path.parent) else plot, seed=seed, backend=backend)
    write_marked(path, text, begin=BEGIN, end=END)
    out(text)
    return goals, sweep


def _plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    sizes = [r["size"] for r in rows]
    ax.plot(sizes, [r["busbw"] for r in rows], "o-", label="busbw (RTL)")
    ax.axhline(rows[0]["bound"], color="grey", linestyle="--", label="link bound")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size S (bytes)")
    ax.set_ylabel("bytes / cycle")
    ax.set_title("4x4 all-reduce through sim.system.collective's defaults")
    ax.legend(loc="lower right")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _markdown(goals, sweep, plot, *, seed, backend):
    lines = [f"Measured by `tpu-rtl bench collectives --seed {seed}` ({backend}): "
             f"`sim.system.collective(kind, x, topology=...)` with no `chip=` and no `chunks=`, "
             f"every run bit-exact against `golden.collectives`. Chips and routing: the default "
             f"of each topology; chunks: what `chunks=\"auto\"` chose, and the cycles the cost "
             f"model predicted for it. A row without a goal repeats a goal's run with "
             f"another `routing=`, for comparison.", "",
             "| goal | S (bytes) | chip (ports, lanes) | routing | chunks | cycles | model | "
             "busbw | link bound | fraction | goal |",
             "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in goals:
        met = "" if r["goal"] is None else \
            f">= {r['goal']:.2f} {'met' if r['fraction'] >= r['goal'] else '**not met**'}"
        lines.append(f"| {r['label']} | {r['size']:,} | {r['ports']}, {r['lanes']} | "
                     f"{r['routing']} | {r['chunks']} | {r['cycles']:,} | "
                     f"{r['predicted']:,.0f} | {r['busbw']:.3f} | {r['bound']:.2f} | "
                     f"{r['fraction']:.3f} | {met} |")
    lines += ["", "The 4x4 all-reduce against message size, as nccl-tests prints it "
              f"(bytes per cycle; plot: `{plot}`):", "",
              "| size (B) | chunks | cycles | algbw | busbw | of bound |",
              "|---:|---:|---:|---:|---:|---:|"]
    for r in sweep:
        algbw = r["size"] / max(r["cycles"], 1)
        lines.append(f"| {r['size']:,} | {r['chunks']} | {r['cycles']:,} | {algbw:.3f} | "
                     f"{r['busbw']:.3f} | {r['fraction']:.3f} |")
    lines += ["", f"![busbw of the 4x4 all-reduce against message size]({plot})", ""]
    return "\n".join(lines)
