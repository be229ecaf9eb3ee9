"""One batch of Zipf-distributed ids over a random table, and its bit-exact checks.

:func:`make_batch` draws the batch; :func:`check_lookup` and :func:`check_update` run
:func:`sim.sparsecore.lookup` and :func:`sim.sparsecore.update` on it and score every
output word against :mod:`golden.sparsecore`, and the tile's HBM row reads against the
number of unique ids, exactly. ``tpu-rtl sparsecore`` and ``tpu-rtl bench sparsecore`` both
use them.
"""

from dataclasses import dataclass

import numpy as np

from golden import sparsecore as golden
from sim import sparsecore as sim_sparsecore

from verif.scoreboard import Scoreboard
from verif.suites.mxu.scenarios import fp32_matrix
from verif.suites.sparsecore.stimulus import zipf_ids

__all__ = ["Batch", "make_batch", "OpCheck", "shared_tile", "check_lookup", "check_update"]


@dataclass(frozen=True)
class Batch:
    """A SparseCore batch: ``table`` fp32 [V, D], CSR ``indices`` int32 [N] and ``offsets``
    int64 [B+1], per-id ``weights`` fp32 [N] (None: unweighted), ``grads`` fp32 [B, D]."""
    table: np.ndarray
    indices: np.ndarray
    offsets: np.ndarray
    weights: np.ndarray | None
    grads: np.ndarray

    @property
    def unique(self):
        """Distinct ids, the HBM row reads after dedup (golden's count)."""
        return golden.dedup(self.indices).hbm_reads


def make_batch(rng, *, rows, width, batch, bag, alpha, weighted=False, special_density=0.0):
    """``batch`` bags of ``bag`` Zipf ids
    (:func:`~verif.suites.sparsecore.stimulus.zipf_ids`) over a random ``rows x width``
    table; table, weights and gradients hold a ``special_density`` fraction of special
    values (signed zeros, infinities, NaNs, subnormals)."""
    table = fp32_matrix(rng, (rows, width), special_density=special_density)
    indices = zipf_ids(rng, batch * bag, rows, alpha)
    offsets = np.arange(0, batch * bag + 1, bag, dtype=np.int64)
    weights = fp32_matrix(rng, (batch * bag,), special_density=special_density) \
        if weighted else None
    grads = fp32_matrix(rng, (batch, width), special_density=special_density)
    return Batch(table, indices, offsets, weights, grads)


@dataclass
class OpCheck:
    """One operation on the RTL: its :class:`~sim.sparsecore.SparseRun`, a scoreboard per
    output array, and the unique ids its ``hbm_reads`` must equal."""
    name: str
    run: sim_sparsecore.SparseRun
    boards: list
    unique: int

    @property
    def reads_exact(self):
        return self.run.hbm_reads == self.unique

    @property
    def passed(self):
        return self.reads_exact and all(board.passed for board in self.boards)

    def failures(self):
        """One line per failed check."""
        lines = [board.summary() for board in self.boards if not board.passed]
        if not self.reads_exact:
            lines.append(f"{self.name}: the tile read {self.run.hbm_reads} rows from HBM for "
                         f"{self.unique} unique ids")
        return lines

    def figures(self):
        stats = self.run.stats
        return {"bit_exact": all(board.passed for board in self.boards),
                "results": sum(board.checked for board in self.boards),
                "mismatches": sum(board.mismatches for board in self.boards),
                "first_mismatch": next((board.first_mismatch for board in self.boards
                                        if board.first_mismatch), None),
                "cycles": self.run.cycles, "hbm_reads": self.run.hbm_reads,
                "hbm_reads_exact": self.reads_exact,
                "gather_bandwidth": stats.gather_bandwidth, "lane_busy": stats.lane_busy}


def _board(name, want, got, label):
    """A scoreboard of ``got`` against ``want`` (float32 [rows, D], positions ``label[r, d]``,
    or [rows], positions ``label[r]``: rowwise Adagrad's state)."""
    want = np.asarray(want).view(np.uint32)
    if want.ndim == 1:
        board = Scoreboard(name, want, where=lambda i: f"{label}[{i}]")
    else:
        width = want.shape[1]
        board = Scoreboard(name, want, where=lambda i: f"{label}[{i // width}, {i % width}]")
    board.check_all(np.asarray(got).view(np.uint32))
    return board


def shared_tile(combiner, optimizer):
    """The ``tile`` under which a lookup with ``combiner`` and an update with ``optimizer``
    share one build: a tile with both operations, which takes the cycles of tiles built
    for either alone. One Verilator build serves both (minutes each); Amaranth's serves
    both while the batch fits its harness' smallest memories, and compiles twice, each time
    a little more than a one-operation tile, for larger batches."""
    return {"combiners": combiner, "optimizers": optimizer}


def check_lookup(batch, *, combiner="sum", numerics="tpu", backend="amaranth", **timing):
    """Run the lookup of ``batch`` on the RTL and score it against golden; an :class:`OpCheck`.

    ``timing``: the runner's keywords that change only the cycles (``seed``, ``jitter``,
    ``read_latency``, ``words_per_cycle``, ``idle``, ``stall``, ``waves``, ``tile``).
    """
    want = golden.lookup(batch.table, batch.indices, batch.offsets, combiner=combiner,
                         weights=batch.weights, numerics=numerics)
    run = sim_sparsecore.lookup(batch.table, batch.indices, batch.offsets, combiner=combiner,
                                weights=batch.weights, numerics=numerics, backend=backend,
                                **timing)
    name = f"lookup {combiner}/{numerics}"
    return OpCheck(name, run, [_board(name, want, run.out, "out")], batch.unique)


def check_update(batch, *, optimizer="sgd", lr=0.01, numerics="tpu", backend="amaranth",
                 **timing):
    """Run the update of ``batch`` on the RTL and score the whole table (and either
    Adagrad's accumulators, from golden's default initial value) against golden; an
    :class:`OpCheck`.
    ``timing`` as for :func:`check_lookup`, without ``stall`` (an update has no output stream).
    """
    want_table, want_state = golden.update(batch.table, batch.indices, batch.offsets,
                                           batch.grads, optimizer=optimizer, lr=lr,
                                           numerics=numerics)
    run = sim_sparsecore.update(batch.table, batch.indices, batch.offsets, batch.grads,
                                optimizer=optimizer, lr=lr, numerics=numerics, backend=backend,
                                **timing)
    name = f"update {optimizer}/{numerics}"
    boards = [_board(f"{name} table", want_table, run.table, "table")]
    if want_state is not None:
        boards.append(_board(f"{name} state", want_state, run.state, "state"))
    return OpCheck(name, run, boards, batch.unique)
