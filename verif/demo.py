"""``tpu-rtl demo``: odd-shaped matmuls and arithmetic corner cases on the RTL, against golden."""

import numpy as np

from golden import arith as golden_arith
from golden.formats import NUMERICS
from sim import arith as sim_arith

from .suites.arith import corpus
from .suites.mxu.matmul_check import check_matmul
from .suites.mxu.scenarios import bf16_matrix, fp32_matrix
from .progress import ProgressLine
from .scoreboard import Scoreboard

__all__ = ["mxu_demo", "arith_demo", "embedding_demo", "MXU_CASES"]

#: (M, K, N, numerics, start from acc, special-value density) on the demo array.
MXU_CASES = (
    (16, 8, 8, "tpu", False, 0.0),      # one tile
    (13, 20, 11, "ieee", True, 0.1),    # 3 K-tiles x 2 N-tiles, chained through acc_in
    (5, 17, 9, "tpu", True, 0.25),      # few rows a tile: the chain waits on its results
    (1, 1, 1, "ieee", False, 0.0),
)


def mxu_demo(*, seed, rows=8, cols=8, backend="amaranth", out=print):
    """Run :data:`MXU_CASES` on a ``rows x cols`` MXU; True if every output is bit-exact."""
    rng = np.random.default_rng(seed)
    out(f"MXU {rows}x{cols}: bf16 x bf16 -> fp32 matmuls vs golden (seed {seed}, "
        f"backend {backend})")
    out(f"  {'M x K x N':<12}{'numerics':<10}{'acc':<5}{'specials':>9}{'cycles':>8}"
        f"{'util':>7}  verdict")
    ok = True
    for m, k, n, numerics, use_acc, density in MXU_CASES:
        x = bf16_matrix(rng, (m, k), special_density=density)
        w = bf16_matrix(rng, (k, n), special_density=density)
        acc = fp32_matrix(rng, (m, n), special_density=density) if use_acc else None
        check = check_matmul(x, w, acc=acc, rows=rows, cols=cols, numerics=numerics,
                             backend=backend)
        ok &= check.passed
        verdict = "bit-exact" if check.passed else "MISMATCH"
        out(f"  {f'{m}x{k}x{n}':<12}{numerics:<10}{'yes' if use_acc else 'no':<5}"
            f"{density:>9.0%}{check.run.cycles:>8}{check.run.utilization:>7.2f}  {verdict}")
        if not check.passed:
            out(f"    {check.board.summary()}")
    return ok


def _arith_cases(rng, n_random):
    """Operands per unit: TestFloat-style corpus plus ``n_random`` random operations."""
    add = corpus.binary_corpus("fp32_add", rng, n_random)
    mul = corpus.binary_corpus("bf16_mul", rng, n_random)
    cvt = (corpus.unary_corpus("fp32_to_bf16", rng, n_random),)
    return {"fp32_add": add, "bf16_mul": mul, "fp32_to_bf16": cvt}


def arith_demo(*, seed, n_random=500, backend="amaranth", out=print):
    """Run every arithmetic unit on corner cases in both numerics; True if all bit-exact."""
    rng = np.random.default_rng(seed)
    out(f"Arithmetic units vs golden (seed {seed}, backend {backend})")
    out(f"  {'unit':<14}{'numerics':<10}{'vectors':>8}{'mismatches':>12}  verdict")
    ok = True
    for name, operands in _arith_cases(rng, n_random).items():
        names = [n for n, _ in sim_arith.UNITS[name].operands]
        for numerics in NUMERICS:
            got = getattr(sim_arith, name)(*operands, numerics=numerics, backend=backend)
            expected = getattr(golden_arith, name)(*operands, numerics=numerics)
            board = Scoreboard(f"{name}/{numerics}", expected, dict(zip(names, operands)))
            board.check_all(got)
            ok &= board.passed
            verdict = "bit-exact" if board.passed else "MISMATCH"
            out(f"  {name:<14}{numerics:<10}{board.checked:>8}{board.mismatches:>12}  {verdict}")
            if not board.passed:
                out(f"    first mismatch: {board.first_mismatch}")
    return ok


#: The system demo's torus, and its collectives' message size S in bytes.
SYSTEM_TOPOLOGY = "2x2"
SYSTEM_BYTES = 4096
#: The demo's chips, for the step and the collectives alike (one build): the data-parallel
#: step's (``sim.system.STEP_CHIP``: 8 lanes and an 8x8 MXU) with only the ALU operations
#: the demo runs (fp32 ``add``; ``xor``, the matmul's zeroing).
DEMO_CHIP = dict(mxu=True, ops=("add", "xor"), mxu_results=16)
#: The data-parallel step's shapes: each chip's shard of the batch is M x K, the weights
#: K x N (the products, M*N = 128 words a chip, are whole reduce blocks on a 2x2:
#: C*shards*2*lanes = 4*2*2*8).
STEP_SHAPE = (16, 24, 8)


def system_demo(*, seed, backend="verilator", out=print, plots=None):
    """On a 2x2 torus of TensorCore chips: a data-parallel step, then an all-reduce and an
    all-to-all, each checked bit for bit against golden; True if all are.

    The data-parallel step is one program per chip (``sim.system.data_parallel_step``):
    each chip multiplies its shard of a batch by the shared weights on its MXU, from HBM
    to HBM, then the chips all-reduce the fp32 products; golden is
    ``golden.collectives.collective`` of ``golden.mxu.matmul``'s products. Writes the
    all-reduce's link heat map under ``plots`` (default ``build/system``).
    """
    from pathlib import Path

    from golden import collectives, mxu
    from golden import topology as topo
    from sim import system

    from verif.report import collective_table, plot_links
    from verif.suites.system.inputs import random_inputs

    topology = topo.torus(tuple(int(x) for x in SYSTEM_TOPOLOGY.split("x")))
    chips = topology.n_chips
    rng = np.random.default_rng(seed)
    out(f"System {SYSTEM_TOPOLOGY}: {chips} TensorCore chips with an 8x8 MXU each, ICI routers "
        f"and the OCS (seed {seed}, backend {backend}; the first run builds the system, a few "
        f"minutes)")
    rows, verdicts, runs = [], [], {}

    def check(label, inputs, golden_out, run):
        """A row of the table; the step's has no bandwidth (its cycles hold the matmul)."""
        wrong = int(np.count_nonzero(run.out.view(np.uint32).reshape(golden_out.shape)
                                     != golden_out.view(np.uint32)))
        kind = label if label in collectives.KINDS else "all_reduce"
        row = dict(size=collectives.message_bytes(kind, inputs.shape), cycles=run.cycles,
                   algbw=None, busbw=None, fraction=None, wrong=wrong)
        if kind == label:
            row |= dict(algbw=run.algbw, busbw=run.busbw, fraction=run.busbw / run.bus_bound)
        rows.append(row)
        verdicts.append(label)
        runs[label] = run
        return wrong == 0

    m, k, n = STEP_SHAPE
    w = bf16_matrix(rng, (k, n), special_density=0.05)
    shards = np.stack([bf16_matrix(rng, (m, k), special_density=0.05) for _ in range(chips)])
    products = np.stack([mxu.matmul(x, w).view(np.uint32).ravel() for x in shards])
    # The first run builds the system for minutes: the line names the build and beats.
    line = ProgressLine("demo")

    def progress(cycle, status):
        line.update(text=f"cycle {cycle:,}: {status}")
    try:
        line.update(text="data-parallel step")
        step = system.data_parallel_step(shards, w, topology=topology, backend=backend,
                                         seed=seed, chip=DEMO_CHIP, progress=progress)
        ok = check("data-parallel step", products,
                   collectives.collective("all_reduce", products, topology=topology), step)
        for kind in ("all_reduce", "all_to_all"):
            line.update(text=kind)
            inputs = random_inputs(kind, chips, SYSTEM_BYTES, "float32", rng)
            run = system.collective(kind, inputs, topology=topology, backend=backend,
                                    seed=seed, chip=DEMO_CHIP, progress=progress)
            ok &= check(kind, inputs, collectives.collective(kind, inputs, topology=topology),
                        run)
    finally:
        line.close()
    lines = collective_table(rows)
    # collective_table's lines start with a 2-space indent: the label column replaces it.
    out(f"  {'step':<20}" + lines[0][2:] + "  verdict")
    for label, line, row in zip(verdicts, lines[1:], rows):
        out(f"  {label:<20}" + line[2:] + ("  bit-exact" if not row["wrong"] else "  MISMATCH"))
    out(f"  data-parallel step: a {m}x{k} @ {k}x{n} matmul on each chip's MXU, then the "
        f"all-reduce of the products")
    path = plot_links(runs["all_reduce"].link_utilization, topology,
                      Path(plots or "build/system") / f"links_all_reduce_{SYSTEM_TOPOLOGY}.png",
                      f"all_reduce {SYSTEM_BYTES:,} B")
    out(f"  busbw in bytes/cycle (a link carries {system.LINK_BYTES_PER_CYCLE} each way); "
        f"link heat map: {path}")
    return ok


#: The demo's embedding step: a table of EMBEDDING_TABLE rows x columns sharded over the
#: 2x2 chips, each with EMBEDDING_BAGS bags of ids from Zipf(EMBEDDING_ALPHA).
EMBEDDING_TABLE = (64, 8)
EMBEDDING_BAGS = (4, 4)
EMBEDDING_ALPHA = 1.05


def embedding_demo(*, seed, backend="verilator", out=print):
    """On a 2x2 torus of chips with a SparseCore each: one embedding step (the lookup of
    every chip's bags of Zipf ids, then the Adagrad update, sum-then-apply), checked bit
    for bit against ``golden.embedding.step`` (``sim.system.embedding_step``); True if it
    is. The line says the cycles, the HBM row reads against the ids and the ICI words
    against a step that sends every occurrence."""
    from golden import embedding as ge
    from golden import topology as topo
    from sim import system

    from verif.suites.system.inputs import embedding_inputs

    topology = topo.torus(tuple(int(x) for x in SYSTEM_TOPOLOGY.split("x")))
    chips = topology.n_chips
    (rows, dim), (batch, bag) = EMBEDDING_TABLE, EMBEDDING_BAGS
    rng = np.random.default_rng(seed)
    table, indices, offsets, _, grads = embedding_inputs(
        rng, chips, rows=rows, dim=dim, batch=batch, bag=bag, alpha=EMBEDDING_ALPHA)
    kwargs = dict(grads=grads, topology=topology, optimizer="adagrad", lr=0.1)
    out(f"Embedding step on {SYSTEM_TOPOLOGY}: chips with a SparseCore each, a {rows}x{dim} "
        f"table sharded by rows, {batch} bags of {bag} Zipf({EMBEDDING_ALPHA}) ids a chip, "
        f"Adagrad (seed {seed}, backend {backend}; the first run builds the system, minutes)")
    line = ProgressLine("demo")

    def progress(cycle, status):
        line.update(text=f"embedding step, cycle {cycle:,}: {status}")
    try:
        line.update(text="embedding step")
        run = system.embedding_step(table, indices, offsets, backend=backend, seed=seed,
                                    progress=progress, **kwargs)
    finally:
        line.close()
    want = ge.step(table, indices, offsets, **kwargs)
    wrong = sum(int(np.count_nonzero(a.view(np.uint32) != b.view(np.uint32)))
                for a, b in zip([*run.out, run.table, run.state],
                                [*want.out, want.table, want.state]))
    plan = ge.plan(indices, offsets, num_rows=rows, n_chips=chips)
    no_dedup = ge.traffic(plan, dim, backward=True, dedup=False).total
    out(f"  {'step':<20}{'cycles':>10}{'row reads':>11}{'ids':>6}{'ICI words':>11}"
        f"{'no dedup':>10}{'#wrong':>8}  verdict")
    out(f"  {'embedding step':<20}{run.cycles:>10,}{int(run.hbm_reads.sum()):>11}"
        f"{sum(len(i) for i in indices):>6}{run.ici_words:>11,}{no_dedup:>10,}{wrong:>8}"
        f"  {'bit-exact' if not wrong else 'MISMATCH'}")
    return wrong == 0
