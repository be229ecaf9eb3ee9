"""Regression suite ``sparsecore``: random embedding batches on the SparseCore tile, whole runs.

A seed runs, per numerics mode (one case each: ``sparsecore-tpu`` and
``sparsecore-ieee``), batches of random CSR ids (see :mod:`.stimulus`)
through ``sim.sparsecore.lookup`` and ``update``. Each result is checked
against ``golden.sparsecore`` bit for bit, **whole**: every word of a lookup's
output, and every word of the final table (and Adagrad accumulators) after an
update, so a stray write to a table row no id names is caught; ``hbm_reads`` must
equal the batch's unique ids. A batch with an out-of-range id must stop every
run with :class:`sim.sparsecore.IndexOutOfRange` at golden's first bad
position, with golden's count and message: there the check is the error, not
a result.

On Verilator a clean batch runs every combiner (weighted and not) and every
update (SGD; Adagrad and rowwise Adagrad each from the initial and from given
accumulators), a bad one a lookup and an update, and a seed runs 48 batches, 420
runs. Verilator builds are few and shared by every seed: each numerics
mode has two (:data:`BUILDS`), one row of 8 words and one of 16, one with HBM
jitter and one without, so every pair of those is covered; the tile's
capacities and features are fixed (:data:`TILE`), and the batch sizes are held
where the run harness' stream memories keep their depths (see :func:`limits`).
The other simulators, slower by orders of magnitude, run two small batches per
mode with one operation each, on tiles built for just that operation.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from cocotb_coverage.coverage import coverage_db

from golden import arith
from golden import sparsecore as golden
from golden.formats import NUMERICS
from hdl.sparsecore import COMBINERS, LANES, OPTIMIZERS
from sim import sparsecore as sim_sparsecore
from sim.backends.whole_run import MIN_DEPTH
from sim.transactors import SimulationHang

from ..case import WholeCase
from .coverage import sampler, value_kinds
from .stimulus import UPDATES, Batch, Limits, deal, make_batch
from ...scoreboard import Scoreboard, Tally

__all__ = ["TILE", "HBM", "JITTER", "BUILDS", "BATCHES", "Step", "limits", "plan", "sample",
           "check_case", "runs"]

#: The Verilator tile: capacities and every feature fixed, so all batches share its builds.
TILE = dict(rows=128, max_ids=128, max_bags=16, combiners=",".join(COMBINERS),
            optimizers=",".join(OPTIMIZERS))
HBM = dict(read_latency=8, words_per_cycle=8)
JITTER = 6
#: Per numerics mode, its two builds' (row_words, HBM jitter).
BUILDS = {"tpu": ((8, 0), (16, JITTER)), "ieee": ((8, JITTER), (16, 0))}
#: Batches per build and seed, by simulator; one in four (Verilator) or two (others) bad.
BATCHES = {"verilator": 12, "icarus": 1, "amaranth": 1}
GAPS = dict(idle=0.3, stall=0.5)


@dataclass(frozen=True)
class Step:
    """Batch ``index`` of a case: its build (``row_words``, ``jitter``) and run timing
    (``seed`` of the jitter and gaps, ``idle``/``stall`` probabilities)."""
    index: int
    numerics: str
    row_words: int
    jitter: int
    batch: Batch
    timing: dict


def limits(backend, row_words):
    """The :class:`~.stimulus.Limits` of a batch on ``backend``.

    A Verilator build is keyed by the tile's parameters and by the depth of each of
    its harness' stream memories: the beats of that stream rounded up to a power of
    two, at least ``MIN_DEPTH``. So its batches hold between half and all of
    ``max_ids`` ids, and at most ``MIN_DEPTH`` beats of bag ends, gradients and
    output rows: then a lookup and an update, clean or bad, all share one build.
    """
    if backend == "verilator":
        return Limits(rows=TILE["rows"], ids=(TILE["max_ids"] // 2 + 1, TILE["max_ids"]),
                      bags=MIN_DEPTH // (row_words // LANES), row_words=row_words)
    return Limits(rows=48, ids=(37, 48), bags=6, row_words=row_words)


def plan(seed, backend):
    """The batches of ``seed`` on ``backend``: ``{numerics: [Step, ...]}``."""
    full = backend == "verilator"
    steps = {}
    for mode, numerics in enumerate(NUMERICS):
        rng = np.random.default_rng([seed, mode, 0x5C0E])
        count = BATCHES[backend] * len(BUILDS[numerics])
        cards = deal(rng, count, bad=count // 4 if full else count // 2, every_operation=full)
        steps[numerics] = []
        for index, card in enumerate(cards):
            row_words, jitter = BUILDS[numerics][index % len(BUILDS[numerics])]
            batch_rng = np.random.default_rng([seed, mode, index, 0x5C0E])
            batch = make_batch(batch_rng, card, limits(backend, row_words))
            timing = dict(seed=int(batch_rng.integers(1 << 31)),
                          **{k: v if card.gaps else 0.0 for k, v in GAPS.items()})
            steps[numerics].append(Step(index, numerics, row_words, jitter, batch, timing))
    return steps


def sample(samplers, step, operation):
    """Sample the bins run ``operation`` of ``step`` exercises (from its stimulus alone)."""
    sample_run, sample_bag, sample_update, sample_value, sample_error = samplers
    b, card = step.batch, step.batch.card
    family = "update" if operation in UPDATES else "lookup"
    if card.bad:
        sample_error((card.bad, family, *card.bad_place))
        return
    sample_run((step.numerics, operation, step.row_words // LANES, card.width,
                "jitter" if step.jitter else "fixed", "gaps" if card.gaps else "none",
                card.distribution))
    for kind in b.kinds:
        sample_bag((operation, kind))
    named = np.unique(b.indices)
    operands = {"table": b.table[named]}
    if family == "update":
        sample_update((operation, card.lr))
        operands["grad"] = b.grads[np.diff(b.offsets) > 0]
        state = _update_args(b, operation)["state"]
        if state is not None:
            operands["state"] = state[named]
    elif operation.endswith("-weighted"):
        operands["weight"] = b.weights
    for operand, bits in operands.items():
        for kind in value_kinds(bits):
            sample_value((step.numerics, operand, kind))


def _expected(b, operation, numerics):
    """Golden's results (the lookup's output, or the updated table and the state, None for
    SGD) as uint32 patterns, or its IndexOutOfRange."""
    try:
        if operation in UPDATES:
            table, state = golden.update(b.table, b.indices, b.offsets, b.grads,
                                         **_update_args(b, operation), numerics=numerics)
            return [table.view(np.uint32), None if state is None else state.view(np.uint32)]
        return [golden.lookup(b.table, b.indices, b.offsets, **_lookup_args(b, operation),
                              numerics=numerics).view(np.uint32)]
    except golden.IndexOutOfRange as error:
        return error


def _flat_output(out):
    """A lookup's expected output as flat words, and where each word is."""
    width = out.shape[1]
    return out.ravel(), lambda i: f"out[{i // width}, {i % width}]"


def _whole_image(b, operation, numerics, run):
    """An update's expected whole HBM image, and where each word is.

    The tile updates all ``row_words`` columns of a row, the runner's zero padding
    included (Adagrad makes NaN there: 0 / sqrt(0)), so the expectation is golden's
    update of the padded operands, with the padded state the runner loads (the initial
    accumulator only in the real columns). Laid out as the tile's HBM, unused rows
    included, so a stray write anywhere is a mismatch."""
    n_rows, width = b.table.shape
    row_words = -(-width // LANES) * LANES

    def padded(bits):
        return np.pad(bits, ((0, 0), (0, row_words - width)))
    args = _update_args(b, operation)
    if args["optimizer"] == "rowwise_adagrad":
        table, state = _rowwise_padded(b, args, numerics, row_words)
    else:
        if args["optimizer"] == "adagrad" and args["state"] is None:
            init = golden.fp32_scalar(golden.DEFAULT_INITIAL_ACCUMULATOR, name="initial")
            args["state"] = np.full(b.table.shape, init, np.uint32)
        if args["state"] is not None:
            args["state"] = padded(args["state"])
        table, state = golden.update(padded(b.table), b.indices, b.offsets, padded(b.grads),
                                     **args, numerics=numerics)
    capacity = run.capacity
    image = sim_sparsecore.hbm_image(
        table.view(np.uint32), None if state is None else state.view(np.uint32),
        rows=capacity, row_words=row_words, size=len(run.hbm))

    def where(i):
        region, rest = divmod(i, capacity * row_words)
        row, column = divmod(rest, row_words)
        name = ("table", "state")[region] if region < 2 else "hbm"
        kind = " (padding)" if row >= n_rows or column >= width else ""
        return f"{name}[{row}, {column}]{kind}"
    return image, where


def _rowwise_padded(b, args, numerics, row_words):
    """Rowwise Adagrad's table and state as the tile holds them: golden's update of the
    real columns (the mean divides by them, not the padded width), the padding columns of
    each updated row as the tile computes them, ``+0 - div(mul(lr, +0), sqrt(acc))``
    with the row's new accumulator (NaN where that root is zero or NaN), and the state
    [V] (``hbm_image`` fills each state row with it)."""
    table, state = golden.update(b.table, b.indices, b.offsets, b.grads, **args,
                                 numerics=numerics)
    table, state = table.view(np.uint32), state.view(np.uint32)
    width = table.shape[1]
    out = np.zeros((table.shape[0], row_words), np.uint32)
    out[:, :width] = table
    ids = golden.dedup(b.indices).ids
    if width < row_words and len(ids):
        lr = golden.fp32_scalar(args["lr"], name="lr")
        step = arith.fp32_div(arith.fp32_mul(lr, np.uint32(0), numerics=numerics),
                              arith.fp32_sqrt(state[ids], numerics=numerics),
                              numerics=numerics)
        pad = arith.fp32_add(np.uint32(0), step ^ np.uint32(0x80000000), numerics=numerics)
        out[ids, width:] = pad[:, None]
    return out, state


def _lookup_args(b, operation):
    combiner, _, weighted = operation.partition("-")
    return dict(combiner=combiner, weights=b.weights if weighted else None)


def _update_args(b, operation):
    optimizer, _, given = operation.partition("-")
    state = None
    if given:
        state = b.state if optimizer == "adagrad" else b.state[:, 0]
    return dict(optimizer=optimizer, lr=b.lr, state=state)


def _simulate(step, operation, *, backend, waves):
    b = step.batch
    common = dict(backend=backend, numerics=step.numerics, seed=step.timing["seed"],
                  jitter=step.jitter, idle=step.timing["idle"], waves=waves,
                  tile=TILE if backend == "verilator" else None, **HBM)
    if operation in UPDATES:
        run = sim_sparsecore.update(b.table, b.indices, b.offsets, b.grads,
                                    **_update_args(b, operation), **common)
        return run, run.hbm
    run = sim_sparsecore.lookup(b.table, b.indices, b.offsets, stall=step.timing["stall"],
                                **_lookup_args(b, operation), **common)
    return run, run.out.view(np.uint32).ravel()


class _Tally(Tally):
    """A case's checks, mismatches and first mismatch, and its cycles."""

    def __init__(self):
        super().__init__()
        self.cycles = 0


def _check_run(tally, seed, step, operation, *, backend, waves, inject):
    b = step.batch
    label = (f"sparsecore seed {seed} {step.numerics} batch {step.index} {operation} "
             f"(row_words {step.row_words}, jitter {step.jitter}, {step.timing})")
    want = _expected(b, operation, step.numerics)
    try:
        run, got = _simulate(step, operation, backend=backend, waves=waves)
    except (ValueError, SimulationHang) as error:
        if isinstance(want, golden.IndexOutOfRange) \
                and isinstance(error, sim_sparsecore.IndexOutOfRange):
            tally.check((error.position, error.count, str(error))
                        == (want.positions[0], len(want.positions), str(want)),
                        f"{label}: the tile said {error} (position {error.position}, count "
                        f"{error.count}); expected {want}")
        else:
            tally.check(False, f"{label}: {type(error).__name__}: {error}")
        return
    if isinstance(want, golden.IndexOutOfRange):
        tally.check(False, f"{label}: expected {want}, but the tile finished without an error")
        return
    tally.cycles += run.cycles
    want, where = _whole_image(b, operation, step.numerics, run) if operation in UPDATES \
        else _flat_output(*want)
    want = want.copy()
    if inject == "golden-fault":
        want[int(np.random.default_rng([seed, step.index]).integers(want.size))] ^= 1
    board = Scoreboard(label, want, where=where)
    board.check_all(got)
    tally.board(board)
    unique = golden.dedup(b.indices).hbm_reads
    tally.check(run.hbm_reads == unique, f"{label}: {run.hbm_reads} table rows read from HBM, "
                                         f"expected {unique}, one per unique id")


def check_case(seed, numerics, *, backend, coverage=None, waves=None, inject=None):
    """Run every batch of ``seed`` in ``numerics`` on ``backend``; returns the case record."""
    steps = plan(seed, backend)[numerics]
    if coverage is not None:
        coverage_db.clear()
        samplers = sampler()
    tally = _Tally()
    runs = errors = 0
    for step in steps:
        for operation in step.batch.card.operations:
            wave = None if waves is None else \
                Path(waves).with_name(f"{Path(waves).stem}-{step.index}-{operation}"
                                      f"{Path(waves).suffix}")
            _check_run(tally, seed, step, operation, backend=backend, waves=wave, inject=inject)
            runs += 1
            errors += bool(step.batch.card.bad)
            if coverage is not None:
                sample(samplers, step, operation)
    if coverage is not None:
        coverage_db.export_to_xml(str(coverage))
    return {"case": f"sparsecore-{numerics}", "checked": tally.checked,
            "mismatches": tally.mismatches, "first_mismatch": tally.first,
            "cycles": tally.cycles, "batches": len(steps), "runs": runs, "error_runs": errors}


def runs(seed, *, inject=None):
    """The whole-run cases of a seed, one per numerics mode."""
    for numerics in NUMERICS:
        def check(*, backend, coverage=None, waves=None, numerics=numerics):
            return check_case(seed, numerics, backend=backend, coverage=coverage, waves=waves,
                              inject=inject)
        yield WholeCase(f"sparsecore-{numerics}", check)

#: The broken golden model ``--inject`` can switch on in this suite.
GOLDEN_INJECTION = "golden-fault"
