"""``tpu-rtl demo``: odd-shaped matmuls and arithmetic corner cases on the RTL, against golden."""

import numpy as np

from golden import arith as golden_arith
from golden.formats import NUMERICS
from sim import arith as sim_arith

from .suites.arith import corpus
from .suites.mxu.matmul_check import check_matmul
from .suites.mxu.scenarios import bf16_matrix, fp32_matrix
from .scoreboard import Scoreboard

__all__ = ["mxu_demo", "arith_demo", "MXU_CASES"]

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
#: The demo's chips: ``sim.system.SYSTEM_CHIP`` with 4 lanes, whose 2x2 build takes about
#: 3 minutes where the 8-lane chip's takes 5 (the demo has 5 minutes, builds included);
#: at 4 KiB the programs' reduce rate is not what bounds them.
DEMO_CHIP = dict(lanes=4, vmem_lines=1024)


def system_demo(*, seed, backend="verilator", out=print, plots=None):
    """On a 2x2 torus of TensorCore chips: a data-parallel step, then an all-reduce and an
    all-to-all, each checked bit for bit against golden; True if all are.

    The data-parallel step: each chip's shard of a batch is multiplied by the shared
    weights on the 8x8 MXU RTL (``sim.mxu.matmul``, the shards stacked in one run), and
    the chips all-reduce the fp32 products (``sim.system.collective``); golden is
    ``golden.collectives.collective`` of ``golden.mxu.matmul``'s products. Writes the
    all-reduce's link heat map under ``plots`` (default ``build/system``).
    """
    from pathlib import Path

    from golden import collectives, mxu
    from golden import topology as topo
    from sim import mxu as sim_mxu
    from sim import system

    from .system_cli import collective_table, plot_links, random_inputs

    topology = topo.torus(tuple(int(x) for x in SYSTEM_TOPOLOGY.split("x")))
    chips = topology.n_chips
    rng = np.random.default_rng(seed)
    out(f"System {SYSTEM_TOPOLOGY}: {chips} TensorCore chips, ICI routers and the OCS "
        f"(seed {seed}, backend {backend}; the first run builds the system, a few minutes)")
    rows, verdicts, runs = [], [], {}

    def check(label, kind, inputs, golden_out):
        run = system.collective(kind, inputs, topology=topology, backend=backend, seed=seed,
                                chip=DEMO_CHIP)
        wrong = int(np.count_nonzero(run.out.view(np.uint32) != golden_out.view(np.uint32)))
        rows.append(dict(size=collectives.message_bytes(kind, inputs.shape), cycles=run.cycles,
                         algbw=run.algbw, busbw=run.busbw, fraction=run.busbw / run.bus_bound,
                         wrong=wrong))
        verdicts.append(label)
        runs[label] = run
        return wrong == 0

    # Data-parallel step: 4 shards of 16 rows, K = N = 8 (the products, 128 words a chip,
    # are whole 8-word VMEM lines in every reduce block: C*K*2*lanes = 4*2*2*8).
    w = bf16_matrix(rng, (8, 8), special_density=0.05)
    shards = [bf16_matrix(rng, (16, 8), special_density=0.05) for _ in range(chips)]
    # One MXU run of the stacked shards: a row's products depend on that row alone,
    # and one simulation costs a quarter of four.
    products = sim_mxu.matmul(np.concatenate(shards), w, backend="amaranth").out \
        .view(np.uint32).reshape(chips, -1)
    golden_products = np.stack([mxu.matmul(x, w).view(np.uint32)
                                for x in shards]).reshape(chips, -1)
    ok = bool((products == golden_products).all())
    ok &= check("data-parallel step", "all_reduce", products,
                collectives.collective("all_reduce", golden_products, topology=topology))
    for kind in ("all_reduce", "all_to_all"):
        inputs = random_inputs(kind, chips, SYSTEM_BYTES, "float32", rng)
        ok &= check(kind, kind, inputs, collectives.collective(kind, inputs, topology=topology))
    lines = collective_table(rows)
    # collective_table's lines start with a 2-space indent: the label column replaces it.
    out(f"  {'step':<20}" + lines[0][2:] + "  verdict")
    for label, line, row in zip(verdicts, lines[1:], rows):
        out(f"  {label:<20}" + line[2:] + ("  bit-exact" if not row["wrong"] else "  MISMATCH"))
    if not (products == golden_products).all():
        out("  the MXU products differ from golden.mxu.matmul")
    path = plot_links(runs["all_reduce"].link_utilization, topology,
                      Path(plots or "build/system") / f"links_all_reduce_{SYSTEM_TOPOLOGY}.png",
                      f"all_reduce {SYSTEM_BYTES:,} B")
    out(f"  busbw in bytes/cycle (a link carries {system.LINK_BYTES_PER_CYCLE} each way); "
        f"link heat map: {path}")
    return ok
