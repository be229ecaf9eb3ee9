"""Embedding lookups and updates on the SparseCore tile RTL (SPEC sections 4.6 and 6).

::

    >>> run = sim.sparsecore.lookup(table, indices, offsets, combiner="mean")
    >>> run.out, run.cycles, run.hbm_reads
    >>> run = sim.sparsecore.update(table, indices, offsets, grads, optimizer="adagrad", lr=0.1)
    >>> run.table, run.state, run.cycles, run.hbm_reads

Each call is one whole run (:mod:`sim.backends.whole_run`) of a
:class:`~hdl.sparsecore.SparseCoreTile`: the table (and the accumulators) are
loaded into its HBM model, the CSR ids, bag ends and gradients are played in as
streams, the lookup's rows are recorded and the update's table read back from
the HBM. Results equal :mod:`golden.sparsecore` bit for bit, whatever the HBM
jitter, the stream gaps and the backend; ``hbm_reads`` is the tile's own count of
table rows read, one per unique id.

Rows of ``D`` words are padded with zeros to the tile's row width, a multiple of 8
(every lane is independent, so padding changes no real column, though the tile
updates the padding too: Adagrad leaves NaN there; rowwise Adagrad's mean divides by
``D``, not the padded width). The tile's capacities are the
batch's sizes rounded up to powers of two (at least 16), and so are the harness's
stream memories (from each stream's beats), so batches whose sizes and stream lengths
round alike share one compiled build; the tile is built with just the
combiner or optimizer the call uses (a smaller design that compiles faster); ``tile=``
fixes any of these. :func:`gather_curve` measures the gather's bandwidth and the scVPU's
lane use. The long random check against golden is the regression suite
(``tpu-rtl regress sparsecore``, :mod:`verif.suites.sparsecore`).
"""

from dataclasses import dataclass

import numpy as np

from golden.formats import check_numerics
from golden.sparsecore import DEFAULT_INITIAL_ACCUMULATOR, check_choice, check_csr, \
    check_table, fp32_array, fp32_scalar
from hdl.sparsecore import COMBINERS, LANES, ONE, OPTIMIZERS, STAMPS

from .backends import check_backend, run_whole
from .backends.whole_run import WholeRun, pack_words, unpack_words

__all__ = ["lookup", "update", "hbm_image", "SparseRun", "SparseStats", "IndexOutOfRange", "GatherPoint",
           "gather_curve", "BLOCK"]

#: The tile's name in the block catalogue.
BLOCK = "sparsecore"
#: Smallest capacity of a build, so that small batches share one.
_MIN_CAPACITY = 16
#: Tile parameters a caller may fix (``tile=``), so that batches of different sizes or
#: features share one build.
_TILE_OVERRIDES = {"rows", "max_ids", "max_bags", "combiners", "optimizers", "add_stages",
                   "sqrt_stages", "div_stages"}


class IndexOutOfRange(ValueError):
    """The tile's error flag: an id outside ``[0, V)``.

    The message is golden.sparsecore's for the same batch; ``position`` is the RTL's
    first-bad-position register, ``count`` its count of bad ids.
    """

    def __init__(self, position, value, count, num_rows):
        self.position, self.value, self.count, self.num_rows = position, value, count, num_rows
        more = f" ({count} bad ids in all)" if count > 1 else ""
        super().__init__(f"index out of range at position {position}: id {value} is not in "
                         f"[0, {num_rows}){more}")


@dataclass(frozen=True)
class SparseStats:
    """What the tile measured: cycle stamps of the gather (HBM reads accepted) and of the
    combine (slots the ring took), and the unique ids found."""
    unique: int
    words_per_cycle: int
    gather_first: int
    gather_last: int
    gather_lines: int
    combine_first: int
    combine_last: int
    combine_slots: int

    @property
    def gather_bandwidth(self):
        """Words read per cycle while gathering, as a fraction of ``words_per_cycle``
        (one line a cycle): lines read / cycles from the first read accepted to the last."""
        span = self.gather_last - self.gather_first + 1
        return self.gather_lines / span if self.gather_lines else 0.0

    @property
    def lane_busy(self):
        """Fraction of the combine's cycles in which the 8 scVPU lanes took a term chunk."""
        span = self.combine_last - self.combine_first + 1
        return self.combine_slots / span if self.combine_slots else 0.0


@dataclass(frozen=True)
class SparseRun:
    """Result of :func:`lookup` (``out``) or :func:`update` (``table``, ``state``).

    ``out``: float32 [B, D]; ``table``: float32 [V, D]; ``state``: the accumulators
    (None for SGD); ``hbm``: an update's whole final HBM image, uint32 words laid out by
    :func:`hbm_image` with the tile's ``rows`` (``capacity``); ``cycles``: the whole run's cycles; ``hbm_reads``: table rows read
    from HBM (the tile's count); ``stats``: :class:`SparseStats`.
    """
    cycles: int
    hbm_reads: int
    out: np.ndarray | None = None
    table: np.ndarray | None = None
    state: np.ndarray | None = None
    stats: SparseStats | None = None
    hbm: np.ndarray | None = None
    capacity: int | None = None


# ---------------------------------------------------------------- operands

def _capacity(n):
    return max(_MIN_CAPACITY, 1 << max(0, n - 1).bit_length())


def _padded(bits, width):
    """[rows, D] patterns as [rows, width] with zero columns added."""
    out = np.zeros((bits.shape[0], width), np.uint32)
    out[:, :bits.shape[1]] = bits
    return out


def hbm_image(table, state=None, *, rows, row_words, size=None):
    """The tile's HBM image of ``table`` and the optimizer ``state``, uint32 patterns, as
    flat uint32 words: table row ``r`` (``table`` is [V, D]) at ``r * row_words``, state row
    ``r`` at ``(rows + r) * row_words``, zero columns padding each row to ``row_words`` and
    zeros everywhere else, up to ``size`` words (default: just past the last region).
    Adagrad's ``state`` is [V, D] like the table; rowwise Adagrad's is [V], one word a row,
    which fills every word of its state row (padding included: the tile's lanes each read
    their own). A run loads this; after an update the whole HBM must equal it for the
    updated table and state, so comparing whole images catches a stray write anywhere,
    padding included."""
    n_rows, width = table.shape
    regions = 1 if state is None else 2
    image = np.zeros(size if size is not None else regions * rows * row_words, np.uint32)
    for region, bits in enumerate((table, state)[:regions]):
        base = region * rows * row_words
        rows_view = image[base:base + n_rows * row_words].reshape(n_rows, row_words)
        if bits.ndim == 1:
            rows_view[:] = bits[:, None]
        else:
            rows_view[:, :width] = bits
    return image


# ---------------------------------------------------------------- the run

def _run(table, indices, offsets, *, op, combiner=0, optimizer=0, lr=0, weights=None,
         grads=None, state=None, backend, numerics, seed, jitter, read_latency,
         words_per_cycle, max_unique, idle, stall, waves, tile):
    n_rows, width = table.shape
    row_words = -(-width // LANES) * LANES
    chunks = row_words // LANES
    n_ids, n_bags = len(indices), len(offsets) - 1
    # The tile is built with just the feature the batch uses: the smaller design
    # compiles faster, and every build is exercised by the batches that need it.
    params = dict(rows=_capacity(n_rows), row_words=row_words, words_per_cycle=words_per_cycle,
                  max_ids=_capacity(n_ids), max_bags=_capacity(n_bags), read_latency=read_latency,
                  jitter=jitter, numerics=numerics, combiners="" if op else COMBINERS[combiner],
                  optimizers=OPTIMIZERS[optimizer] if op else "")
    if max_unique is not None:
        params["max_unique"] = max_unique
    if tile:
        unknown = sorted(set(tile) - _TILE_OVERRIDES)
        if unknown:
            raise ValueError(f"tile may set {', '.join(sorted(_TILE_OVERRIDES))}, not "
                             f"{', '.join(unknown)}")
        params.update(tile)
    rows = params["rows"]
    for what, need, name in (("table rows", n_rows, "rows"), ("ids", n_ids, "max_ids"),
                             ("bags", n_bags, "max_bags")):
        if need > params[name]:
            raise ValueError(f"{need} {what} do not fit a tile built with {name} = "
                             f"{params[name]}")
    # An id beyond 32 bits is out of range whatever it is; -1 carries that to the tile
    # (the error message reports the caller's id, from its position).
    wide = (indices < -(1 << 31)) | (indices >= 1 << 31)
    ids = np.where(wide, -1, indices) & 0xFFFFFFFF
    if weights is None:
        weights = np.full(n_ids, ONE, np.uint32)      # golden: unweighted = all 1.0
    hbm = hbm_image(table, state, rows=rows, row_words=row_words)
    play = {
        "ids": [int(i) | int(w) << 32 for i, w in zip(ids, weights)],
        "ends": [int(e) for e in offsets[1:]],
        "grads": [] if grads is None else pack_words(_padded(grads, row_words).reshape(-1), LANES),
    }
    whole = WholeRun(
        BLOCK, params, play=play, record={"out": 0 if op else n_bags * chunks},
        until="finished", busy="busy", seed=seed,
        gaps={"ids": idle, "ends": idle, "grads": idle, "out": stall},
        inputs=dict(op=op, combiner=combiner, optimizer=optimizer, lr=int(lr), n_rows=n_rows,
                    n_ids=n_ids, n_bags=n_bags, columns=width, seed=seed),
        load={"hbm": pack_words(hbm, words_per_cycle)}, dump=("hbm",) if op else (),
        watchdog=1000 + 4 * (read_latency + jitter))
    result = run_whole(whole, backend=backend, waves=waves)
    outputs = result.outputs
    if outputs["unsupported"]:
        raise ValueError(f"the tile was built without this batch's operation (combiners "
                         f"{params['combiners']!r}, optimizers {params['optimizers']!r})")
    if outputs["bad"]:
        position = outputs["bad_position"]
        raise IndexOutOfRange(position, int(indices[position]), outputs["bad_count"], n_rows)
    if outputs["overflow"]:
        capacity = params.get("max_unique", min(params["max_ids"], rows))
        raise ValueError(f"more unique ids than the tile holds (max_unique = {capacity}): "
                         f"the first that did not fit is at position "
                         f"{outputs['overflow_position']}")
    stats = SparseStats(outputs["unique"], words_per_cycle,
                        *(outputs[name] for name in STAMPS))
    return result, stats, outputs["hbm_reads"], rows * row_words


def _check_common(numerics, backend):
    check_numerics(numerics)
    check_backend(backend)


def lookup(table, indices, offsets, *, combiner="sum", weights=None, backend="amaranth",
           numerics="tpu", seed=0, jitter=0, read_latency=4, words_per_cycle=8,
           max_unique=None, idle=0.0, stall=0.0, waves=None, tile=None):
    """:func:`golden.sparsecore.lookup` on the tile RTL; returns :class:`SparseRun` with ``out``.

    ``jitter`` (extra HBM latency, up to that many cycles, seeded by ``seed``),
    ``idle`` and ``stall`` (gap probabilities of the input and output streams) and
    ``read_latency``/``words_per_cycle`` (the HBM model) change only the cycles.
    ``max_unique`` shrinks the tile's unique-id capacity; ``tile`` fixes other
    parameters of the build (capacities, features, stages), which by default fit the
    batch. Raises
    :class:`IndexOutOfRange` (a ValueError) when the tile flags an id, ValueError
    when its unique ids overflow or an argument is bad.
    """
    _check_common(numerics, backend)
    combiner = COMBINERS.index(check_choice(combiner, COMBINERS, "combiner"))
    table = check_table(table)
    indices, offsets, _ = check_csr(indices, offsets)   # ids are the tile's to check
    if weights is not None:
        weights = fp32_array(weights, "weights", (len(indices),))
    result, stats, hbm_reads, _ = _run(
        table, indices, offsets, op=0, combiner=combiner, weights=weights, backend=backend,
        numerics=numerics, seed=seed, jitter=jitter, read_latency=read_latency,
        words_per_cycle=words_per_cycle, max_unique=max_unique, idle=idle, stall=stall,
        waves=waves, tile=tile)
    row_words = -(-table.shape[1] // LANES) * LANES
    out = unpack_words(result.recorded["out"], LANES).reshape(len(offsets) - 1, row_words)
    return SparseRun(result.cycles, hbm_reads, out=out[:, :table.shape[1]].view(np.float32),
                     stats=stats)


def update(table, indices, offsets, grads, *, optimizer="sgd", lr, state=None,
           initial_accumulator=DEFAULT_INITIAL_ACCUMULATOR, backend="amaranth", numerics="tpu",
           seed=0, jitter=0, read_latency=4, words_per_cycle=8, max_unique=None, idle=0.0,
           waves=None, tile=None):
    """:func:`golden.sparsecore.update` on the tile RTL; returns :class:`SparseRun` with
    ``table`` and ``state`` (None for SGD; [V] for rowwise Adagrad), and ``hbm``, the whole
    final HBM image (:func:`hbm_image`'s layout with ``capacity`` rows). Options as for
    :func:`lookup`.
    """
    _check_common(numerics, backend)
    code = OPTIMIZERS.index(check_choice(optimizer, OPTIMIZERS, "optimizer"))
    table = check_table(table)
    n_rows, width = table.shape
    indices, offsets, _ = check_csr(indices, offsets)   # ids are the tile's to check
    grads = fp32_array(grads, "grads", (len(offsets) - 1, width))
    given, lr = lr, fp32_scalar(lr, name="lr")
    if not np.isfinite(lr.view(np.float32)):
        raise ValueError(f"lr must be a finite fp32 number, not {given!r} (it would write NaN "
                         f"or inf into every row it updates)")
    if optimizer == "sgd":
        if state is not None:
            raise ValueError("sgd keeps no state: state must be None")
    else:
        shape = (n_rows,) if optimizer == "rowwise_adagrad" else (n_rows, width)
        if state is None:
            init = fp32_scalar(initial_accumulator, name="initial_accumulator")
            state = np.full(shape, init, np.uint32)
        else:
            state = fp32_array(state, "state", shape)
    result, stats, hbm_reads, state_base = _run(
        table, indices, offsets, op=1, optimizer=code, lr=lr, grads=grads, state=state,
        backend=backend, numerics=numerics, seed=seed, jitter=jitter,
        read_latency=read_latency, words_per_cycle=words_per_cycle, max_unique=max_unique,
        idle=idle, stall=0.0, waves=waves, tile=tile)
    words = unpack_words(result.memories["hbm"], words_per_cycle)
    row_words = -(-width // LANES) * LANES

    def region(base):
        return words[base:base + n_rows * row_words].reshape(n_rows, row_words)[:, :width]

    new_state = None if state is None else region(state_base)
    if state is not None and state.ndim == 1:
        new_state = new_state[:, 0]            # every word of a row's state is its accumulator
    return SparseRun(result.cycles, hbm_reads, table=region(0).view(np.float32),
                     state=None if new_state is None else new_state.view(np.float32),
                     stats=stats, hbm=words, capacity=state_base // row_words)


# ---------------------------------------------------------------- measurements

@dataclass(frozen=True)
class GatherPoint:
    """One point of :func:`gather_curve`: the row width, the gather's bandwidth as a fraction
    of the HBM's ``words_per_cycle``, the scVPU lanes' busy fraction during the combine,
    the run's cycles, and whether the output matched golden bit for bit."""
    row_words: int
    bandwidth: float
    lane_busy: float
    cycles: int
    bit_exact: bool


def gather_curve(row_widths=(8, 16, 32, 64), *, ids=256, bag=8, words_per_cycle=8,
                 read_latency=8, jitter=0, backend="verilator", seed=0):
    """Measure a ``sum`` lookup of ``ids`` distinct ids (bags of ``bag``) per row width.

    Every id is unique, so each is one row gathered; a list of :class:`GatherPoint`.
    Each row width is its own build: minutes on Verilator the first time.
    """
    from golden.sparsecore import lookup as golden_lookup
    rng = np.random.default_rng(seed)
    points = []
    for row_words in row_widths:
        table = rng.integers(0, 1 << 32, (ids, row_words), dtype=np.uint64).astype(np.uint32)
        indices = rng.permutation(ids).astype(np.int32)
        offsets = np.minimum(np.arange(0, ids + bag, bag), ids)
        run = lookup(table, indices, offsets, backend=backend, words_per_cycle=words_per_cycle,
                     read_latency=read_latency, jitter=jitter, seed=seed)
        exact = np.array_equal(run.out.view(np.uint32),
                               golden_lookup(table, indices, offsets).view(np.uint32))
        points.append(GatherPoint(row_words, run.stats.gather_bandwidth, run.stats.lane_busy,
                                  run.cycles, exact))
    return points
