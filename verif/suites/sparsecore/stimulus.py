"""Random SparseCore batches for the ``sparsecore`` regression, each with the bins it exercises.

A batch is drawn from a *card*: its id distribution, its row width (a whole
number of 8-word chunks or padded), stream gaps or none, its learning rate,
the operations it is run with, and, for some batches, the out-of-range id it
carries (kind, where the first one is, one or several). Cards are
dealt from shuffled decks so that one seed covers every value (see
:func:`deal`). Every batch holds a bag of each :data:`BAG_KINDS` (an empty
bag, a bag of one, a few ids, one id repeated, a huge bag; a batch of
distinct ids repeats none) and mixes
:data:`SPECIAL_FP32` patterns and zeros into its table, weights, gradients
and Adagrad state. Every choice comes from the ``numpy`` generator the caller
seeds.
"""

from dataclasses import dataclass

import numpy as np

from golden.sparsecore import COMBINERS

__all__ = ["SPECIAL_FP32", "fp32_values", "table", "zipf_ids", "ids", "BAG_KINDS", "HUGE",
           "DISTRIBUTIONS", "LEARNING_RATES", "BAD_IDS", "BAD_PLACES", "LOOKUPS", "UPDATES",
           "OPERATIONS", "Limits", "Card", "Batch", "deal", "make_batch"]

#: fp32 patterns every arithmetic path must survive: signed zeros, infinities,
#: NaNs (quiet, signalling, negative, with payloads), subnormals (smallest,
#: largest, both signs), the smallest normal, the largest finite values (whose
#: sums overflow), and exact powers of two (whose sums round to even).
SPECIAL_FP32 = np.array([
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000,
    0x7FC00000, 0xFFC00001, 0x7F800001, 0x7FA00000,
    0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00400000,
    0x00800000, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF,
    0x3F800000, 0xBF800000, 0x33800000, 0x33000000, 0x4B800000,
], dtype=np.uint32)


def fp32_values(rng, shape, *, special_density=0.15, spread=6):
    """Normal values within ``spread`` octaves of 1, a ``special_density`` fraction of them
    replaced by :data:`SPECIAL_FP32` patterns and as many by uniformly random bits."""
    base = (rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread + 1, shape)))
    bits = base.astype(np.float32).view(np.uint32)
    pick = rng.random(shape)
    bits = np.where(pick < special_density, rng.choice(SPECIAL_FP32, shape), bits)
    uniform = rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32)
    bits = np.where((pick >= special_density) & (pick < 2 * special_density), uniform, bits)
    return bits.astype(np.uint32)


def table(rng, rows, width, *, special_density=0.15):
    """A table where some rows are the negation of others, so bags cancel exactly."""
    t = fp32_values(rng, (rows, width), special_density=special_density)
    mirror = rng.random(rows) < 0.3
    src = rng.integers(0, rows, rows)
    t[mirror] = t[src[mirror]] ^ np.uint32(0x80000000)
    return t


def zipf_ids(rng, n, rows, alpha, *, rows_by_rank=None):
    """``n`` ids in ``[0, rows)`` following Zipf's law truncated to the table.

    The row of popularity rank ``r`` (1-based) is drawn with probability proportional
    to ``r ** -alpha``; ranks are dealt to rows by a random permutation, so the hot rows
    are scattered over the table as in a real embedding (``rows_by_rank``, the rows in
    order of popularity, gives that permutation: draws that share it share their hot
    rows, as every chip's ids of one embedding step do). ``alpha = 0`` is uniform.
    Truncating (rather than folding numpy's unbounded ``zipf`` into range) keeps the
    law's shape, so the dedup savings it gives are the textbook ones. Folding does not:
    near ``alpha = 1`` most draws land past the table and fold to near-uniform ids, and
    the largest (doubles past ``2**53``, multiples of a high power of two) all fold to
    ids one below a multiple of it: with 16384 rows and ``alpha = 1.05``, 56% of the
    draws fold, and 10.4% of the ids are ``15 mod 16`` (one owner of 16 chips) against
    6.25%.
    """
    if not (np.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be a finite number >= 0, not {alpha}")
    if rows < 1:
        raise ValueError(f"rows must be at least 1, not {rows}")
    if rows_by_rank is not None and len(rows_by_rank) != rows:
        raise ValueError(f"rows_by_rank must hold the {rows} rows, not {len(rows_by_rank)}")
    weights = np.arange(1, rows + 1, dtype=np.float64) ** -float(alpha)
    ranks = rng.choice(rows, size=n, p=weights / weights.sum())
    if rows_by_rank is None:
        rows_by_rank = rng.permutation(rows)
    return np.asarray(rows_by_rank)[ranks].astype(np.int32)


def ids(rng, n, rows, *, zipf=None):
    """``n`` ids in ``[0, rows)``: uniform, or Zipf with exponent ``zipf``
    (:func:`zipf_ids`)."""
    if zipf is None:
        return rng.integers(0, rows, n).astype(np.int32)
    return zipf_ids(rng, n, rows, zipf)


#: Bags every batch holds at least one of: no id, one id, 2 to 8 ids, 2 to 8 copies
#: of one id, and a huge bag (at least :data:`HUGE` ids, most of the batch).
BAG_KINDS = ("empty", "one", "few", "duplicate", "huge")
HUGE = 32
#: How a batch's ids are drawn: uniform over the table, Zipf (a few hot rows),
#: every id different (no dedup), or every id the same (one row read, many updates).
DISTRIBUTIONS = ("uniform", "zipf", "distinct", "single")
ZIPF_EXPONENTS = (1.05, 1.5, 3.0)
#: Learning-rate classes and their values: a subnormal rate is zero in "tpu" numerics,
#: and a huge one overflows the step.
LEARNING_RATES = {"normal": (0.01, 0.125, 0.5), "negative": (-2.0, -0.25),
                  "subnormal": (1e-40,), "huge": (1e30,)}
#: Out-of-range ids: negative, the table's size, beyond it (up to 2**31 - 1), and ids
#: that do not fit 32 bits at all.
BAD_IDS = ("negative", "past_end", "beyond", "wide")
#: Where the first out-of-range id is (what the tile's position register must hold)
#: and whether more follow it. A last one has none after it.
BAD_PLACES = (("first", "one"), ("first", "several"), ("inside", "one"),
              ("inside", "several"), ("last", "one"))
#: A lookup per combiner, weighted or not, and the updates: SGD, and Adagrad and rowwise
#: Adagrad each from the initial accumulator or from given (random, specials included)
#: accumulators (rowwise: the first column of the batch's).
LOOKUPS = tuple(f"{c}{w}" for c in COMBINERS for w in ("", "-weighted"))
UPDATES = ("sgd", "adagrad", "adagrad-state", "rowwise_adagrad", "rowwise_adagrad-state")
OPERATIONS = LOOKUPS + UPDATES


@dataclass(frozen=True)
class Limits:
    """What a batch must fit: at most ``rows`` table rows, between ``ids[0]`` and ``ids[1]``
    ids, at most ``bags`` bags, rows of ``row_words`` words (a multiple of 8: a full row
    is that wide, a padded one 1 to 7 words narrower)."""
    rows: int
    ids: tuple
    bags: int
    row_words: int

    def __post_init__(self):
        low, high = self.ids
        if not (self.bags >= len(BAG_KINDS) and low >= HUGE + 5 and high >= low
                and self.rows >= high and self.row_words % 8 == 0 and self.row_words > 0):
            raise ValueError(f"no batch of every bag kind fits {self}")


@dataclass(frozen=True)
class Card:
    """What one batch exercises; ``operations`` are the runs it is checked with (see
    :data:`OPERATIONS`). ``bad`` is None or a :data:`BAD_IDS` kind, with ``bad_place``
    one of :data:`BAD_PLACES`: then every run must stop on the error."""
    distribution: str
    width: str
    gaps: bool
    lr: str
    operations: tuple
    bad: str | None = None
    bad_place: tuple = ("first", "one")


@dataclass
class Batch:
    """A batch and its card. Bit patterns are uint32; ``indices`` are int64 (a ``wide``
    bad id does not fit 32 bits). ``kinds[b]`` is bag ``b``'s kind; ``bad_positions``
    the out-of-range positions (increasing; empty when none)."""
    card: Card
    table: np.ndarray
    indices: np.ndarray
    offsets: np.ndarray
    weights: np.ndarray
    grads: np.ndarray
    state: np.ndarray
    lr: float
    kinds: tuple
    bad_positions: tuple = ()


def deal(rng, count, *, bad, every_operation):
    """``count`` cards, ``bad`` of them with an out-of-range id, every field's values dealt
    evenly over them (shuffled decks).

    With ``every_operation`` a clean batch runs every operation and a bad one a lookup and
    an update; otherwise each batch runs one operation, from a deck of them.
    """
    if count < 1 or not 0 <= bad <= count:
        raise ValueError(f"need count >= 1 and 0 <= bad <= count, not count = {count}, "
                         f"bad = {bad}")

    def deck(values, size=count):
        # From a random value on: a deck shorter than ``values`` still draws any of them.
        start = int(rng.integers(len(values)))
        cards = [values[(start + i) % len(values)] for i in range(size)]
        return [cards[i] for i in rng.permutation(size)]

    is_bad = deck([True] * bad + [False] * (count - bad))
    distributions, widths = deck(DISTRIBUTIONS), deck(("full", "padded"))
    gaps, rates = deck((False, True)), deck(tuple(LEARNING_RATES))
    singles = deck(OPERATIONS)
    kinds, places = deck(BAD_IDS, bad), deck(BAD_PLACES, bad)
    lookups, updates = deck(LOOKUPS, bad), deck(UPDATES, bad)
    cards, j = [], 0
    for i in range(count):
        if every_operation:
            operations = (lookups[j], updates[j]) if is_bad[i] else OPERATIONS
        else:
            operations = (singles[i],)
        fields = dict(bad=kinds[j], bad_place=places[j]) if is_bad[i] else {}
        j += is_bad[i]
        cards.append(Card(distributions[i], widths[i], gaps[i], rates[i], operations,
                          **fields))
    return cards


def _kinds(rng, card, limits, n):
    """Bag kinds: one of each (no duplicate bag in a distinct batch), then random extras
    while the ids left beside the huge bag still fit them; shuffled."""
    base = [k if card.distribution != "distinct" or k != "duplicate" else "few"
            for k in BAG_KINDS]
    extras = [str(k) for k in rng.choice(["empty", "one", "few", "duplicate"],
                                         int(rng.integers(0, limits.bags - len(base) + 1)))]
    extras = [k if card.distribution != "distinct" or k != "duplicate" else "one"
              for k in extras]
    kinds = base + extras

    def least(kinds):
        return sum({"one": 1, "few": 2, "duplicate": 2}.get(k, 0) for k in kinds)
    while least(kinds) > n - HUGE:
        kinds.pop()
    return [kinds[i] for i in rng.permutation(len(kinds))]


def _lengths(rng, kinds, n):
    """Bag lengths of ``n`` ids in all: few and duplicate bags 2 to 8, the rest in the huge one."""
    lengths = np.array([{"one": 1, "few": 2, "duplicate": 2}.get(k, 0) for k in kinds])
    flexible = [b for b, k in enumerate(kinds) if k in ("few", "duplicate")]
    spare = min(n - HUGE - int(lengths.sum()), 6 * len(flexible))
    for _ in range(int(rng.integers(0, spare + 1))):
        room = [b for b in flexible if lengths[b] < 8]
        lengths[room[int(rng.integers(len(room)))]] += 1
    lengths[kinds.index("huge")] = n - lengths.sum()
    return lengths


def _bag_ids(rng, card, kinds, lengths, num_rows):
    """The ids of every bag, drawn as the card's distribution says."""
    n = int(lengths.sum())
    if card.distribution == "distinct":
        flat = rng.permutation(num_rows)[:n]
    elif card.distribution == "single":
        flat = np.full(n, rng.integers(num_rows))
    elif card.distribution == "zipf":
        flat = ids(rng, n, num_rows, zipf=float(rng.choice(ZIPF_EXPONENTS)))
    else:
        flat = ids(rng, n, num_rows)
    bags = np.split(flat.astype(np.int64), np.cumsum(lengths)[:-1])
    for kind, bag in zip(kinds, bags):
        if kind == "duplicate":
            bag[:] = bag[0]
    return np.concatenate(bags)


def _bad_id(rng, kind, num_rows):
    if kind == "negative":
        return -1 if rng.random() < 0.3 else -int(rng.integers(1, 1 << 31, endpoint=True))
    if kind == "past_end":
        return num_rows
    if kind == "beyond":
        # Just past the table (ids the tile's capacity still holds), or anywhere up to 2**31 - 1.
        return num_rows + int(rng.integers(1, 16)) if rng.random() < 0.5 else \
            int(rng.integers(num_rows + 1, 1 << 31))
    return int(rng.choice([1 << 31, (1 << 32) + 5, -(1 << 31) - 1, 1 << 40]))


def _place_bad(rng, card, indices, num_rows):
    """Out-of-range ids per ``card``, in place; returns their positions."""
    n = len(indices)
    where, count = card.bad_place
    first = {"first": 0, "last": n - 1}.get(where) if where != "inside" else \
        int(rng.integers(1, n - 1))
    positions = [first]
    if count == "several":
        more = min(int(rng.integers(1, 4)), n - 1 - first)
        positions += sorted(int(p) for p in rng.choice(np.arange(first + 1, n), more,
                                                        replace=False))
    for i, position in enumerate(positions):
        kind = card.bad if i == 0 else str(rng.choice(BAD_IDS))
        indices[position] = _bad_id(rng, kind, num_rows)
    return tuple(positions)


def make_batch(rng, card, limits):
    """A :class:`Batch` for ``card`` within ``limits``."""
    n = int(rng.integers(limits.ids[0], limits.ids[1] + 1))
    # A distinct batch needs a row per id; the others use tables of any size.
    num_rows = int(rng.integers(n if card.distribution == "distinct" else 1, limits.rows + 1))
    width = limits.row_words if card.width == "full" else \
        int(rng.integers(limits.row_words - 7, limits.row_words))
    kinds = _kinds(rng, card, limits, n)
    lengths = _lengths(rng, kinds, n)
    indices = _bag_ids(rng, card, kinds, lengths, num_rows)
    bad = _place_bad(rng, card, indices, num_rows) if card.bad else ()
    weights = fp32_values(rng, n)
    weights[rng.random(n) < 0.1] = 0
    state = fp32_values(rng, (num_rows, width))
    # Accumulators are mostly non-negative; the rest keep every special, negatives too.
    state = np.where(rng.random(state.shape) < 0.8, state & np.uint32(0x7FFFFFFF), state)
    return Batch(card, table(rng, num_rows, width), indices,
                 np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64), weights,
                 fp32_values(rng, (len(kinds), width)), state.astype(np.uint32),
                 float(rng.choice(LEARNING_RATES[card.lr])), tuple(kinds), bad)
