"""``tpu-rtl bench embedding``: the multi-chip embedding step of issue 41 on a 4x4 torus with
Zipf(1.05) ids, on the compiled path, written to docs/system.md between its ``<!-- bench
embedding -->`` markers.

Every run is checked bit for bit against ``golden.embedding.step`` (the table, every
chip's lookups), and the figures are:

* the step's cycles split by phase (:data:`sim.kernels.embedding.PHASES`): each phase's
  cycles are the difference between runs of the programs cut after it and after the phase
  before (``EmbeddingPlan.programs_until``), so they include the waits that end it;
* each all-to-all phase against the bisection bound: the most words that cross either
  half-way cut of either axis in one direction, over the links that cut has in that
  direction (a torus ring crosses it twice), one word a link a cycle; the fraction is that
  bound over the phase's cycles (goal >= 0.80). Beside it, the HBM lines the busiest
  chip's one HBM port must move in the phase at least: the words it pushes (read by its
  DMA) and the words that land on it (written by its receive engines), over the words a
  line; the bound over those lines is the most of the bisection bound the phase could
  reach with that port alone. And the busiest link's share of the phase's cycles (the
  most flits one link direction sent in it, over its cycles): near 1, that link, on the
  routes the routers took, held the phase whatever the cut;
* the gather against the HBM bandwidth: the rows the busiest owner read into its Spmem, in
  HBM lines, over the cycles of its own gather (one line a cycle is the port's bandwidth;
  goal >= 0.90): from the end of its ids ``wait`` to the end of its gather ``wait``, which
  are its sequencer's stall cycles between the two runs plus the 3 bundles it issues
  (the doorbell's two and the ``wait``). The gather phase of the split is the system's,
  from the last chip's ids to the last chip's gather, so an owner whose ids came early
  starts its gather before the phase does;
* ``hbm_reads`` (the RTL's count, each owner's gather flag) against the unique ids each
  owner serves, counted here, and each pair's pushed words (from the programs'
  descriptors) against ``golden.embedding.traffic``'s formula;
* dedup's speed-up: the same step planned without dedup (``plan_embedding(dedup=False)``:
  every occurrence sent and read), its cycles and ICI words against the step's;
* the step in ``mode="prereduced"`` (each source sends one partial gradient per unique id
  it holds): its backward phases, its gradients' all-to-all as above, its cycles and ICI
  words. Its forward is the step's (the same programs until the combine).

The three plans share one build: the chip's memories and SparseCore are sized for the
largest.
"""

import time
from pathlib import Path

import numpy as np

from verif.report import write_marked

__all__ = ["measure", "SHAPE", "ALPHA", "ROWS", "DIM", "BATCH", "BAG", "GOALS",
           "bisection_bound", "hbm_lines"]

#: The benchmark's topology and step.
SHAPE, ALPHA, ROWS, DIM, BATCH, BAG = "4x4", 1.05, 16384, 16, 128, 8
#: The chips' changes to ``sim.system.EMBEDDING_CHIP``, and the routers' routing and input
#: speed-up: four push ports (a chip with a SparseCore has at most 5, as its flag bank takes
#: 8 adders), pushes dealt to the first push port whose queue is empty
#: (``push_dealing="empty"``), adaptive routing (its default 4 VCs), and each router input
#: sending up to four flits a cycle, one a VC (docs/system.md has what each did).
CHIP = dict(network_ports=4, push_dealing="empty")
ROUTING, SPEEDUP = "adaptive", 4
#: The bundles an owner issues between its ids ``wait`` and the end of its gather ``wait``:
#: the doorbell's ``li`` and ``sw``, and the ``wait`` (``sim.kernels.embedding``).
GATHER_BUNDLES = 3
#: The goals: all-to-all phases against the bisection bound, gather against HBM bandwidth.
GOALS = dict(all_to_all=0.80, gather=0.90)
BEGIN, END = "<!-- bench embedding -->", "<!-- /bench embedding -->"


def bisection_bound(topology, words):
    """Cycles no all-to-all of ``words`` (int [C, C], rank c to rank o) can beat: the most
    words crossing a half-way cut of an axis in one direction, over the links crossing it
    that way (two a ring of the axis on a torus), one word a link a cycle."""
    live = np.flatnonzero(topology.alive)
    coords = topology.coords[live]
    best = 0.0
    for axis, k in enumerate(topology.dims):
        if k < 2:
            continue
        side = coords[:, axis] < k // 2
        rings = topology.n_chips // k
        links = rings * (2 if topology.wrap and k > 2 else 1)
        for a, b in ((side, ~side), (~side, side)):
            best = max(best, words[np.ix_(a, b)].sum() / links)
    return best


def hbm_lines(words, words_per_line):
    """The most HBM lines one chip's port moves in an all-to-all of ``words`` (int [C, C],
    rank c to rank o): the words it pushes (its DMA reads them) and the words that land on
    it (its receive engines write them), ``words_per_line`` a line, whole lines each way."""
    per_line = int(words_per_line)
    out = -(-words.sum(axis=1) // per_line)
    landed = -(-words.sum(axis=0) // per_line)
    return int((out + landed).max())


def _pair_words(plan, flags):
    """Words each program pushes from rank c to rank o on ``flags``, from the descriptors
    in its SMEM."""
    from golden import tensorcore as tc
    rank = {chip: r for r, chip in enumerate(plan.chips)}
    words = np.zeros((len(plan.chips),) * 2, np.int64)
    for chip in plan.chips:
        smem = plan.smem[chip]
        for line in plan.programs[chip].splitlines():
            if line.startswith("dma "):
                at = int(line.split()[1])
                d = tc.descriptor_from_words(smem[at:at + tc.DESCRIPTOR_WORDS])
                if d.remote and d.flag in flags:
                    words[rank[chip], rank[d.dst[1]]] += int(np.prod(d.counts))
    return words


def _run(label, topology, programs, plan, *, seed):
    from sim import system
    from verif.progress import ProgressLine
    line = ProgressLine(label)

    def progress(cycle, status):
        line.update(text=f"cycle {cycle:,}: {status}")
    try:
        return system.run_programs(topology, programs, vmem=[None] * topology.n_chips,
                                   smem=plan.smem, hbm=plan.hbm, chip=plan.chip, seed=seed,
                                   routing=ROUTING, speedup=SPEEDUP, progress=progress)
    finally:
        line.close()


def _check(run, plan, want, inputs, what):
    table, indices, offsets = inputs
    out, new_table, _ = plan.results(run.hbm, table=np.asarray(table).view(np.uint32),
                                     state=None, optimizer="sgd")
    bad = [f"out of rank {r}" for r, (a, b) in enumerate(zip(out, want.out))
           if not np.array_equal(a.view(np.uint32), b.view(np.uint32))]
    if not np.array_equal(new_table.view(np.uint32), want.table.view(np.uint32)):
        bad.append("the table")
    if bad:
        raise RuntimeError(f"bench embedding, {what}: {', '.join(bad)} differ from golden")


def _phase_runs(topology, plan, phases, *, seed, out, mode=None):
    """The runs of ``plan``'s programs cut after each of ``phases``, by phase, each
    printed as it ends; ``mode`` names a plan other than the step's."""
    runs = {}
    for phase in phases:
        runs[phase] = run = _run(f"embedding {SHAPE} {mode + ' ' if mode else ''}until "
                                 f"{phase}", topology, plan.programs_until(phase), plan,
                                 seed=seed)
        out(f"  {mode + ', ' if mode else ''}until the end of {phase}: {run.cycles:,} cycles")
    return runs


def _split(phases, cycles, flits):
    """Each phase's own cycles, and the busiest link's share of them: the cycles and link
    flits of the run cut after it, less those of the run cut after the phase before."""
    split, busiest = {}, {}
    for before, phase in zip((None, *phases), phases):
        split[phase] = cycles[phase] - (cycles[before] if before else 0)
        own = flits[phase] - (flits[before] if before else 0)
        busiest[phase] = float(own.max()) / max(split[phase], 1)
    return split, busiest


def _descriptors(plan, phase):
    """The most DMA descriptors a chip issues in ``phase``."""
    from sim.kernels.embedding import PHASES
    at = PHASES.index(phase)
    return max(plan.programs_until(phase)[chip].count("dma ") -
               (plan.programs_until(PHASES[at - 1])[chip].count("dma ") if at else 0)
               for chip in plan.chips)


def _all_to_all(topology, plan, phase, cycles, busiest, formula):
    """The figures of ``plan``'s all-to-all ``phase`` (module docstring), which took
    ``cycles`` with its busiest link sending a flit in ``busiest`` of them."""
    from sim.kernels.embedding import FLAGS
    pushed = _pair_words(plan, {FLAGS[phase]})
    bound = bisection_bound(topology, pushed)
    return dict(words=int(pushed.sum()), bound=bound,
                hbm_lines=hbm_lines(pushed, plan.chip["words_per_cycle"]),
                descriptors=_descriptors(plan, phase), cycles=cycles,
                fraction=bound / max(cycles, 1), busiest_link=busiest,
                formula=bool(np.array_equal(pushed, formula)))


def measure(path=Path("docs/system.md"), *, seed=1, out=print):
    """Run the benchmark (module docstring), print its rows, write the section into
    ``path``; returns the figures as a dict."""
    from golden import embedding as ge
    from golden import tensorcore as tc
    from golden import topology as topo
    from sim.backends.whole_run import memory_depth
    from sim.kernels.embedding import FLAGS, PHASES, plan_embedding
    from sim.system import EMBEDDING_CHIP
    from verif.suites.system.inputs import embedding_inputs

    rng = np.random.default_rng(seed)
    topology = topo.torus(SHAPE)
    chips = int(topology.alive.sum())
    table, indices, offsets, _, grads = embedding_inputs(
        rng, chips, rows=ROWS, dim=DIM, batch=BATCH, bag=BAG, alpha=ALPHA)
    kwargs = dict(grads=grads, topology=topology, optimizer="sgd", lr=0.125)
    want = ge.step(table, indices, offsets, **kwargs)
    want_prereduced = ge.step(table, indices, offsets, mode="prereduced", **kwargs)
    # The three plans: the step, the step without dedup, and the step in "prereduced" mode.
    variants = (dict(dedup=True), dict(dedup=False), dict(mode="prereduced"))

    # One build for the three plans: the largest of each size.
    chip = dict(EMBEDDING_CHIP, **CHIP)
    first = [plan_embedding(table, indices, offsets, chip=chip, **v, **kwargs)
             for v in variants]
    tile = {k: max(p.chip["sparsecore"][k] for p in first)
            for k in ("rows", "row_words", "max_ids", "max_bags", "spmem_rows")}
    chip |= dict(sparsecore=dict(first[0].chip["sparsecore"], **tile),
                 hbm_words=max(p.chip["hbm_words"] for p in first),
                 smem_words=max(p.chip["smem_words"] for p in first),
                 imem_depth=max(memory_depth(len(tc.program_words(text)))
                                for p in first for text in p.programs))
    plan, flat, prereduced = (plan_embedding(table, indices, offsets, chip=chip, **v,
                                             **kwargs) for v in variants)
    assert plan.chip == flat.chip == prereduced.chip

    started = time.perf_counter()
    runs = _phase_runs(topology, plan, PHASES, seed=seed, out=out)
    run = runs[PHASES[-1]]
    cycles = {phase: r.cycles for phase, r in runs.items()}
    stalls = {phase: sum(r.stalls.values()) for phase, r in runs.items()}
    _check(run, plan, want, (table, indices, offsets), "the step")
    hbm_reads = run.flags[plan.chips, FLAGS["gather"]].astype(np.int64)
    utilization = run.link_flits / max(run.cycles, 1)
    flat_run = _run(f"embedding {SHAPE} without dedup", topology, flat.programs, flat,
                    seed=seed)
    _check(flat_run, flat, want, (table, indices, offsets), "the step without dedup")
    flat_reads = flat_run.flags[flat.chips, FLAGS["gather"]].astype(np.int64)
    # "prereduced" differs from the step from its gradients on: its forward is the step's.
    # Its runs start with the combine's, the forward's end, so that the phases after it are
    # split from it; the combine's own split would be the whole forward, and is not given.
    backward = PHASES[PHASES.index("combine"):]
    pre_runs = _phase_runs(topology, prereduced, backward, seed=seed, out=out,
                           mode="prereduced")
    pre_cycles = {phase: r.cycles for phase, r in pre_runs.items()}
    _check(pre_runs[backward[-1]], prereduced, want_prereduced, (table, indices, offsets),
           "the step in prereduced mode")

    split, link_busy = _split(PHASES, cycles, {p: r.link_flits for p, r in runs.items()})
    pre_split, pre_link_busy = _split(backward, pre_cycles,
                                      {p: r.link_flits for p, r in pre_runs.items()})
    served = [len({int(v) for ids in indices for v in ids if v % chips == o})
              for o in range(chips)]
    golden_plan = ge.plan(indices, offsets, num_rows=ROWS, n_chips=chips)
    traffic = ge.traffic(golden_plan, DIM, backward=True)
    pre_traffic = ge.traffic(golden_plan, DIM, backward=True, mode="prereduced")
    a2a = {phase: _all_to_all(topology, plan, phase, split[phase], link_busy[phase],
                              getattr(traffic, phase))
           for phase in ("ids", "rows", "grads")}
    a2a["grads, prereduced"] = _all_to_all(topology, prereduced, "grads", pre_split["grads"],
                                           pre_link_busy["grads"], pre_traffic.grads)
    wpc = plan.chip["words_per_cycle"]
    busiest = int(np.argmax(hbm_reads))
    lines = int(hbm_reads[busiest]) * plan.row_words // wpc
    chip_id = plan.chips[busiest]
    own = int(stalls["gather"][chip_id] - stalls["ids"][chip_id]) + GATHER_BUNDLES
    gather = dict(owner=busiest, rows=int(hbm_reads[busiest]), lines=lines,
                  id_lines=-(-int(hbm_reads[busiest]) // wpc), cycles=own,
                  phase=split["gather"], fraction=lines / max(own, 1))
    result = dict(
        cycles=cycles["update"], split=split, a2a=a2a, gather=gather,
        hbm_reads=hbm_reads.tolist(), served=served,
        reads_exact=hbm_reads.tolist() == served, ids=int(sum(len(i) for i in indices)),
        ici_words=plan.ici_words, flat_cycles=flat_run.cycles, flat_ici_words=flat.ici_words,
        flat_reads=int(flat_reads.sum()), link_peak=float(utilization.max()),
        prereduced=dict(split={phase: pre_split[phase] for phase in backward[1:]},
                        cycles=pre_cycles["update"], ici_words=prereduced.ici_words),
        seconds=time.perf_counter() - started, seed=seed, chip=plan.chip)
    text = _markdown(result)
    write_marked(Path(path), text, begin=BEGIN, end=END)
    out(text)
    return result


def _markdown(r):
    split, pre = r["split"], r["prereduced"]
    lines = [
        f"`tpu-rtl bench embedding --seed {r['seed']}` ({SHAPE} torus, a table of {ROWS} x "
        f"{DIM} fp32, {BATCH} bags of {BAG} Zipf({ALPHA}) ids a chip, SGD, `mode=\"exact\"`, "
        f"`EMBEDDING_CHIP` with {CHIP['network_ports']} network ports, pushes dealt to an "
        f"empty queue and HBM lines of {r['chip']['words_per_cycle']} words, {ROUTING} "
        f"routing with input speed-up {SPEEDUP}, Verilator; "
        f"bit-exact against `golden.embedding.step`, with and without dedup):",
        "",
        "| phase | cycles | share |",
        "|---|---:|---:|",
        *(f"| {phase} | {split[phase]:,} | {split[phase] / r['cycles']:.0%} |"
          for phase in split),
        f"| **step** | **{r['cycles']:,}** | |",
        "",
        "| all-to-all | words between chips | bisection bound (cycles) | phase cycles | "
        f"fraction (goal {GOALS['all_to_all']}) | busiest link busy | HBM lines, busiest "
        "chip (the most the fraction could be) | most descriptors a chip | words per pair "
        "= formula |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        *(f"| {phase} | {a['words']:,} | {a['bound']:.0f} | {a['cycles']:,} | "
          f"{a['fraction']:.3f} | {a['busiest_link']:.2f} | {a['hbm_lines']:,} "
          f"({min(1, a['bound'] / max(a['hbm_lines'], 1)):.2f})"
          f" | {a['descriptors']} | {'yes' if a['formula'] else 'NO'} |"
          for phase, a in r["a2a"].items()),
        "",
        f"- `mode=\"prereduced\"` (each source sends one partial gradient per unique id, "
        f"bit-exact against its golden): the same forward, then "
        + ", ".join(f"{phase} {cycles:,}" for phase, cycles in pre["split"].items())
        + f" cycles; the step {pre['cycles']:,} cycles and {pre['ici_words']:,} ICI "
        f"words, against {r['cycles']:,} and {r['ici_words']:,} in `\"exact\"` mode.",
        f"- Gather: the busiest owner (rank {r['gather']['owner']}) read "
        f"{r['gather']['rows']} rows, {r['gather']['lines']:,} HBM lines, into its Spmem in "
        f"{r['gather']['cycles']:,} cycles from its ids to its gather flag (the system's "
        f"gather phase: {r['gather']['phase']:,}): {r['gather']['fraction']:.3f} of one line "
        f"a cycle (goal {GOALS['gather']}); the same port read its "
        f"{r['gather']['id_lines']} lines of ids.",
        f"- HBM row reads per owner (the RTL's count): {r['hbm_reads']}; unique ids each "
        f"owner serves, counted from the ids: {r['served']}: "
        f"{'equal' if r['reads_exact'] else 'NOT equal'}; {sum(r['hbm_reads'])} reads for "
        f"{r['ids']} ids.",
        f"- Dedup: {r['cycles']:,} cycles and {r['ici_words']:,} ICI words, against "
        f"{r['flat_cycles']:,} cycles and {r['flat_ici_words']:,} words (and "
        f"{r['flat_reads']} row reads) sending every occurrence: "
        f"{r['flat_cycles'] / r['cycles']:.2f}x the cycles, "
        f"{r['flat_ici_words'] / r['ici_words']:.2f}x the words.",
        "",
    ]
    return "\n".join(lines)
