"""``tpu-rtl sparsecore``: a lookup and an update on the SparseCore tile RTL, against golden.

One batch of Zipf-distributed ids (:func:`zipf_ids`) over a random table goes through
:func:`sim.sparsecore.lookup` and :func:`sim.sparsecore.update`. Every output word (the
lookup's rows; the whole table and the accumulators after the update) is scored bit for
bit against :mod:`golden.sparsecore`, and the tile's count of HBM row reads against the
number of unique ids, exactly. The figures are the RTL's own: cycles, row reads before
dedup (one per id) and after (the tile's count), the gather's bandwidth as a fraction of
the HBM model's ``words_per_cycle``, and the scVPU lanes' busy fraction during the combine.

:func:`run_command` is the command; :func:`make_batch`, :func:`check_lookup` and
:func:`check_update` are what ``tpu-rtl bench`` reuses.
"""

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from golden import sparsecore as golden
from sim import sparsecore as sim_sparsecore

from .scoreboard import Scoreboard
from .suites.mxu.scenarios import fp32_matrix

__all__ = ["Batch", "OpCheck", "SparseCheck", "zipf_ids", "make_batch", "check_lookup",
           "check_update", "run_command", "reproduce_command"]

#: The options that shape a run, in the order the reproduce command lists them.
RUN_OPTIONS = ("rows", "width", "batch", "bag", "alpha", "combiner", "weighted", "optimizer",
               "lr", "numerics", "special_density", "words_per_cycle", "read_latency", "jitter",
               "idle", "stall", "backend", "seed")


def zipf_ids(rng, n, rows, alpha):
    """``n`` ids in ``[0, rows)`` following Zipf's law truncated to the table.

    The row of popularity rank ``r`` (1-based) is drawn with probability proportional
    to ``r ** -alpha``; ranks are dealt to rows by a random permutation, so the hot rows
    are scattered over the table as in a real embedding. ``alpha = 0`` is uniform.
    Truncating (rather than folding numpy's unbounded ``zipf`` into range) keeps the
    law's shape, so the dedup savings it gives are the textbook ones.
    """
    if not (np.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be a finite number >= 0, not {alpha}")
    if rows < 1:
        raise ValueError(f"rows must be at least 1, not {rows}")
    weights = np.arange(1, rows + 1, dtype=np.float64) ** -float(alpha)
    ranks = rng.choice(rows, size=n, p=weights / weights.sum())
    return rng.permutation(rows)[ranks].astype(np.int32)


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
    """``batch`` bags of ``bag`` Zipf ids (:func:`zipf_ids`) over a random ``rows x width``
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
    """A scoreboard of ``got`` against ``want`` (float32 [rows, D]), positions ``label[r, d]``."""
    want = np.asarray(want).view(np.uint32)
    width = want.shape[1]
    board = Scoreboard(name, want, where=lambda i: f"{label}[{i // width}, {i % width}]")
    board.check_all(np.asarray(got).view(np.uint32))
    return board


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
    """Run the update of ``batch`` on the RTL and score the whole table (and the Adagrad
    accumulators, from golden's default initial value) against golden; an :class:`OpCheck`.
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


@dataclass
class SparseCheck:
    """The command's outcome: both :class:`OpCheck` s, the batch, and how to reproduce it."""
    batch: Batch
    lookup: OpCheck
    update: OpCheck
    reproduce: str

    @property
    def passed(self):
        return self.lookup.passed and self.update.passed

    def failures(self):
        return self.lookup.failures() + self.update.failures()


def reproduce_command(args):
    """The ``tpu-rtl sparsecore`` command line that repeats the run ``args`` describes,
    every option spelled out so that later changes of the defaults do not alter it."""
    words = ["tpu-rtl", "sparsecore"]
    for name in RUN_OPTIONS:
        value = getattr(args, name)
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            words += [flag] if value else []
        else:
            words += [flag, str(value)]
    return shlex.join(words)


def _waves(path, op):
    """``build/sc.vcd`` -> ``build/sc.lookup.vcd``: one file per run."""
    if path is None:
        return None
    path = Path(path)
    return str(path.with_name(f"{path.stem}.{op}{path.suffix or '.vcd'}"))


def _row(check, out, *, wpc):
    stats = check.run.stats
    verdict = "bit-exact" if check.passed else "MISMATCH"
    results = sum(board.checked for board in check.boards)
    out(f"  {check.name:<20}{results:>8} words {verdict:<9}  cycles {check.run.cycles:>7,}  "
        f"rows read {check.run.hbm_reads:>5,}  gather {stats.gather_bandwidth:6.1%} of "
        f"{wpc} words/cycle  lanes busy {stats.lane_busy:6.1%}")


def _report(args, check):
    batch = check.batch
    ids, unique = len(batch.indices), batch.unique
    return {
        "command": "sparsecore", "passed": check.passed, "reproduce": check.reproduce,
        "options": {name: getattr(args, name) for name in RUN_OPTIONS},
        "ids": ids, "unique": unique,
        "hbm_reads": {"before_dedup": ids, "after_dedup": unique,
                      "saved": 1 - unique / ids if ids else 0.0},
        "lookup": check.lookup.figures(), "update": check.update.figures(),
        "failures": check.failures(),
    }


def run_command(args, *, out=print):
    """Run ``tpu-rtl sparsecore`` as ``args`` (its argparse namespace) asks; returns the
    :class:`SparseCheck`, whose ``passed`` decides the exit status. Prints the figures,
    and writes them to ``args.json`` when given, failed or not."""
    rng = np.random.default_rng(args.seed)
    batch = make_batch(rng, rows=args.rows, width=args.width, batch=args.batch, bag=args.bag,
                       alpha=args.alpha, weighted=args.weighted,
                       special_density=args.special_density)
    ids, unique = len(batch.indices), batch.unique
    out(f"sparsecore: {args.batch} bags of {args.bag} ids ({ids:,} ids, {unique:,} unique, "
        f"Zipf alpha {args.alpha:g}) over a {args.rows}x{args.width} table (numerics "
        f"{args.numerics}, seed {args.seed}, backend {args.backend})")
    hbm = dict(seed=args.seed, jitter=args.jitter, read_latency=args.read_latency,
               words_per_cycle=args.words_per_cycle, idle=args.idle)
    lookup = check_lookup(batch, combiner=args.combiner, numerics=args.numerics,
                          backend=args.backend, stall=args.stall,
                          waves=_waves(args.waves, "lookup"), **hbm)
    _row(lookup, out, wpc=args.words_per_cycle)
    update = check_update(batch, optimizer=args.optimizer, lr=args.lr, numerics=args.numerics,
                          backend=args.backend, waves=_waves(args.waves, "update"), **hbm)
    _row(update, out, wpc=args.words_per_cycle)
    saved = 1 - unique / ids
    out(f"  HBM row reads: {ids:,} before dedup (one per id), {unique:,} after (the unique "
        f"ids; the tile read {lookup.run.hbm_reads:,} in the lookup, "
        f"{update.run.hbm_reads:,} in the update): {saved:.1%} saved")
    if args.waves:
        out(f"  waves: {_waves(args.waves, 'lookup')}, {_waves(args.waves, 'update')}")
    check = SparseCheck(batch, lookup, update, reproduce_command(args))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(_report(args, check), indent=2) + "\n")
        out(f"  figures: {args.json}")
    if not check.passed:
        for line in check.failures():
            out(f"  FAILED {line}")
        out(f"  seed {args.seed}; reproduce: {check.reproduce}")
    return check
