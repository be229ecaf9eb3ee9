"""Golden model of the SparseCore (SPEC section 4.6): embedding lookups and sum-then-apply updates.

Input is CSR: a flat integer array ``indices`` (N ids, rows of ``table``) and
``offsets`` of length B+1, so that bag ``b`` is ``indices[offsets[b]:offsets[b+1]]``.
``offsets`` must start at 0, never decrease, and end at N; an empty bag is
allowed. Every id must lie in ``[0, V)``: an id outside it is never clamped,
wrapped (negative ids included) or dropped; it raises :class:`IndexOutOfRange`,
which carries every bad position, for comparison with the RTL's error flag and
position register (the first bad position, in flat order).

The order of every sum is part of the contract, and the RTL follows it bit for bit.
Every arithmetic step is one correctly rounded fp32 operation (``add``,
``mul``, ``div``, ``sqrt``; ``a - b`` is ``a + (-b)``) under SPEC section 3's
``numerics``: in "tpu" mode a subnormal operand is read as a zero of the same
sign and a subnormal result becomes one; in both modes a NaN result is
0x7FC00000. Words that no operation touches keep their bits.

Lookup, element ``out[b, d]`` (every column independently, as the 8-wide
scVPU does lane by lane)
--------------------------------------------------------------------------
::

    acc = +0.0
    for k in offsets[b] .. offsets[b+1]-1, increasing:
        term = table[indices[k], d]                  # unweighted
        term = mul(weights[k], table[indices[k], d]) # weighted
        acc = add(acc, term)

* ``sum``: ``out = acc``.
* ``mean``: ``out = div(acc, den)``; ``den`` is the bag length as fp32 (exact
  up to 2**24) without weights, and with weights the fold ``den = add(den,
  weights[k])`` from +0.0 in the same order (TensorFlow's weighted mean).
* ``sqrtn``: ``out = div(acc, sqrt(den))``; ``den`` is the bag length as fp32
  without weights, and with weights the fold ``den = add(den, mul(weights[k],
  weights[k]))`` from +0.0 in the same order (TensorFlow's sqrtn).
* An empty bag gives a +0.0 row for every combiner (no division happens). A
  non-empty bag whose weights sum to zero divides by zero, by IEEE rules.

Because the fold starts from +0.0, a bag of one ``-0.0`` sums to ``+0.0``.
Without weights every output equals the weighted one with all weights 1.0
(for bags of at most 2**24 ids), so the RTL may feed 1.0 as the weight.

Update (SPEC section 6; the backward of the sum combiner)
--------------------------------------------------------
Every occurrence ``k`` of bag ``b`` receives ``grads[b]``. The unique ids are
taken in first-occurrence order (:func:`dedup`); for each, per column::

    G = +0.0
    for every k with indices[k] == id, in increasing k:
        G = add(G, grads[bag of k, d])

and then the optimizer is applied once to the row:

* ``sgd``: ``row = sub(row, mul(lr, G))``. No state.
* ``adagrad`` (state fp32 [V, D], one accumulator per element)::

      acc = add(acc, mul(G, G))
      row = sub(row, div(mul(lr, G), sqrt(acc)))      # no epsilon

* ``rowwise_adagrad`` (state fp32 [V], one accumulator per row; FBGEMM's
  variant, without epsilon). Lane ``j`` of the 8-wide scVPU owns columns
  ``d = j, j+8, j+16, ...``::

      p[j] = +0.0; p[j] = add(p[j], mul(G[d], G[d])) for d = j, j+8, ..., increasing
      s = p[0]; s = add(s, p[j]) for j = 1..7      # then across lanes, in lane order
      acc = add(acc, div(s, D))                    # D as fp32, exact up to 2**24
      r = sqrt(acc)
      row[d] = sub(row[d], div(mul(lr, G[d]), r)) for every d

``state=None`` starts every accumulator at ``initial_accumulator`` (default
0.1, rounded to fp32). A zero accumulator with a zero gradient gives
``0/0 = NaN``: that is the no-epsilon contract, not a special case.

Rows are independent, so the order in which unique rows are processed
changes no value; first-occurrence order is stated because the RTL's flush
writes back in that order. Each unique row is read from HBM once and written
once (``Dedup.hbm_reads`` rows of the table); rows that no id names, and
their state, keep their bits.

This is not ``np.add.at``, which applies one update per occurrence and so
rounds once per occurrence.
"""

import dataclasses

import numpy as np

from . import arith
from .formats import FP32, as_bits, canonicalize_nan, check_numerics, flush_subnormal

__all__ = [
    "LANES", "COMBINERS", "OPTIMIZERS", "DEFAULT_INITIAL_ACCUMULATOR",
    "IndexOutOfRange", "Dedup", "dedup", "bad_positions", "fp32_scalar", "fp32_array",
    "check_choice", "check_csr", "check_table",
    "lookup", "row_gradients", "update",
]

#: Width of the scVPU; it fixes the rowwise Adagrad reduction order.
LANES = 8
COMBINERS = ("sum", "mean", "sqrtn")
OPTIMIZERS = ("sgd", "adagrad", "rowwise_adagrad")
DEFAULT_INITIAL_ACCUMULATOR = 0.1

_SIGN = np.uint32(FP32.sign_mask)


class IndexOutOfRange(ValueError):
    """An id outside ``[0, num_rows)``; the message names the first bad position.

    Attributes
    ----------
    positions : np.ndarray of int64
        Every bad position in ``indices``, increasing; ``positions[0]`` is what
        the RTL's error position register must hold.
    values : np.ndarray of int64
        The ids at those positions.
    num_rows : int
    """

    def __init__(self, positions, values, num_rows):
        self.positions, self.values, self.num_rows = positions, values, num_rows
        more = f" ({len(positions)} bad ids in all)" if len(positions) > 1 else ""
        super().__init__(f"index out of range at position {positions[0]}: id {values[0]} "
                         f"is not in [0, {num_rows}){more}")


# ---------------------------------------------------------------- fp32 steps

def _in(bits, numerics):
    return flush_subnormal(bits, FP32) if numerics == "tpu" else bits


def _out(bits, numerics):
    bits = canonicalize_nan(np.asarray(bits).view(np.uint32), FP32)
    return flush_subnormal(bits, FP32) if numerics == "tpu" else bits


def _float_op(fn):
    def op(*operands, numerics):
        values = [np.asarray(_in(x, numerics)).view(np.float32) for x in operands]
        with np.errstate(all="ignore"):
            return _out(np.asarray(fn(*values), dtype=np.float32), numerics)
    return op


# numpy's float32 multiply, divide and sqrt are the IEEE correctly rounded ones.
_mul = _float_op(np.multiply)
_div = _float_op(np.divide)
_sqrt = _float_op(np.sqrt)


def _add(a, b, *, numerics):
    return arith.fp32_add(a, b, numerics=numerics)


def _sub(a, b, *, numerics):
    # a - b is exactly a + (-b), signed zeros and NaN included.
    return _add(a, b ^ _SIGN, numerics=numerics)


def _count_fp32(n):
    # int -> fp32, round to nearest even (exact up to 2**24).
    return np.asarray(n, dtype=np.int64).astype(np.float32).view(np.uint32)


# ---------------------------------------------------------------- operands

def check_choice(value, choices, what):
    """``value`` if it is one of ``choices``, else a ValueError naming ``what``."""
    if value not in choices:
        raise ValueError(f"{what} must be one of {', '.join(map(repr, choices))}, not {value!r}")
    return value


def fp32_array(x, name, shape):
    """``x`` as uint32 bit patterns of ``shape`` (None entries match any size)."""
    bits = as_bits(x, FP32, name=name)
    if bits.ndim != len(shape) or any(s is not None and s != n for s, n in zip(shape, bits.shape)):
        want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
        raise ValueError(f"{name} must have shape {want}, not {list(bits.shape)}")
    return bits


def _int_array(x, name):
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"{name} must be 1-D, not {x.ndim}-D")
    # An empty list arrives as float64; it holds no value that could be non-integral.
    if x.dtype.kind not in "iu" and x.size:
        raise ValueError(f"{name} must be an integer array, not {x.dtype}")
    return x.astype(np.int64)


def fp32_scalar(value, *, name="lr"):
    """The fp32 bit pattern (0-d uint32) of a scalar hyperparameter such as ``lr``.

    A Python or numpy real number is rounded to the nearest fp32 (as
    ``np.float32(value)`` does; overflow gives inf); a ``np.uint32`` is taken
    as a bit pattern. The RTL receives exactly this pattern.
    """
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a real number, not a bool")
    if isinstance(value, (np.ndarray, np.generic)):
        if np.ndim(value) != 0:
            raise ValueError(f"{name} must be a scalar, not an array of shape {np.shape(value)}")
        if np.asarray(value).dtype == np.uint32:
            return np.asarray(value, dtype=np.uint32)
        if np.asarray(value).dtype.kind not in "fiu":
            raise ValueError(f"{name} must be a real number, not {np.asarray(value).dtype}")
    elif not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a real number, not {type(value).__name__}")
    with np.errstate(over="ignore"):
        return np.asarray(np.float32(value)).view(np.uint32)


@dataclasses.dataclass(frozen=True)
class Dedup:
    """The unique ids of a batch in first-occurrence order.

    Attributes
    ----------
    ids : np.ndarray of int64, [U]
        Each distinct id once, ordered by its first position in ``indices``;
        the order the RTL fetches rows and flushes updated rows in.
    first : np.ndarray of int64, [U]
        ``first[u]``: the position of the first occurrence of ``ids[u]``.
    inverse : np.ndarray of int64, [N]
        ``ids[inverse[k]] == indices[k]``.
    counts : np.ndarray of int64, [U]
        Occurrences of each id.
    """
    ids: np.ndarray
    first: np.ndarray
    inverse: np.ndarray
    counts: np.ndarray

    @property
    def hbm_reads(self):
        """Table rows read from HBM: one per unique id."""
        return len(self.ids)


def dedup(indices):
    """Deduplicate ``indices`` (1-D integers) in first-occurrence order; returns :class:`Dedup`."""
    indices = _int_array(indices, "indices")
    uniq, first, inverse, counts = np.unique(indices, return_index=True, return_inverse=True,
                                             return_counts=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return Dedup(uniq[order], first[order], rank[inverse.reshape(-1)], counts[order])


def bad_positions(indices, num_rows):
    """Increasing positions ``k`` where ``indices[k]`` is outside ``[0, num_rows)``."""
    indices = _int_array(indices, "indices")
    return np.flatnonzero((indices < 0) | (indices >= num_rows))


def check_csr(indices, offsets, num_rows=None):
    """Validated (indices, offsets, bag lengths) as int64 arrays; with ``num_rows``, an
    id outside ``[0, num_rows)`` raises :class:`IndexOutOfRange`."""
    indices = _int_array(indices, "indices")
    offsets = _int_array(offsets, "offsets")
    if len(offsets) == 0:
        raise ValueError("offsets must have length B+1 >= 1, not 0")
    if offsets[0] != 0:
        raise ValueError(f"offsets must start at 0, not {offsets[0]}")
    lengths = np.diff(offsets)
    if np.any(lengths < 0):
        b = int(np.flatnonzero(lengths < 0)[0])
        raise ValueError(f"offsets must not decrease: offsets[{b}] = {offsets[b]} > "
                         f"offsets[{b + 1}] = {offsets[b + 1]}")
    if offsets[-1] != len(indices):
        raise ValueError(f"offsets must end at len(indices) = {len(indices)}, not {offsets[-1]}")
    bad = [] if num_rows is None else bad_positions(indices, num_rows)
    if len(bad):
        raise IndexOutOfRange(bad, indices[bad], num_rows)
    return indices, offsets, lengths


def check_table(table):
    """``table`` as uint32 [V, D] patterns with D >= 1."""
    table = fp32_array(table, "table", (None, None))
    if table.shape[1] == 0:
        raise ValueError("table rows must have at least one word (D >= 1)")
    return table


# ---------------------------------------------------------------- lookup

def lookup(table, indices, offsets, *, combiner="sum", weights=None, numerics="tpu"):
    """Combine the rows each bag names (SPEC section 6), in the order the module docstring states.

    Parameters
    ----------
    table : fp32 [V, D] (``np.float32`` values or ``uint32`` patterns)
    indices : 1-D integer array [N], ids in ``[0, V)``
    offsets : 1-D integer array [B+1]
    combiner : "sum", "mean" or "sqrtn"
    weights : fp32 [N], optional
        Per-index weights; each term becomes ``mul(weights[k], row)``.
    numerics : "tpu" or "ieee"

    Returns
    -------
    np.ndarray of float32, [B, D]

    Raises
    ------
    IndexOutOfRange
        An id is outside ``[0, V)`` (a ``ValueError`` naming the first position).
    ValueError
        Any other bad argument.
    """
    check_numerics(numerics)
    check_choice(combiner, COMBINERS, "combiner")
    table = check_table(table)
    indices, offsets, lengths = check_csr(indices, offsets, table.shape[0])
    if weights is not None:
        weights = fp32_array(weights, "weights", (len(indices),))
    n_bags, width = len(lengths), table.shape[1]
    acc = np.zeros((n_bags, width), np.uint32)
    den = np.zeros(n_bags, np.uint32)
    # Step t adds the t-th term of every bag longer than t: each bag still
    # folds its own terms in increasing k, only the bags run side by side.
    for t in range(int(lengths.max(initial=0))):
        live = np.flatnonzero(lengths > t)
        k = offsets[live] + t
        term = table[indices[k]]
        if weights is not None:
            w = weights[k]
            term = _mul(w[:, None], term, numerics=numerics)
            if combiner == "mean":
                den[live] = _add(den[live], w, numerics=numerics)
            elif combiner == "sqrtn":
                den[live] = _add(den[live], _mul(w, w, numerics=numerics), numerics=numerics)
        acc[live] = _add(acc[live], term, numerics=numerics)
    if combiner != "sum":
        if weights is None:
            den = _count_fp32(lengths)
        if combiner == "sqrtn":
            den = _sqrt(den, numerics=numerics)
        full = lengths > 0
        acc[full] = _div(acc[full], den[full, None], numerics=numerics)
    return acc.view(np.float32)


# ---------------------------------------------------------------- update

def _row_gradients(dd, lengths, grads, numerics):
    """[U, D] sums ``G``, each folded from +0.0 over its occurrences in flat order."""
    bag_of = np.repeat(np.arange(len(lengths)), lengths)
    by_row = np.argsort(dd.inverse, kind="stable")     # flat order kept within each id
    starts = np.cumsum(dd.counts) - dd.counts
    sums = np.zeros((len(dd.ids), grads.shape[1]), np.uint32)
    for t in range(int(dd.counts.max(initial=0))):
        live = np.flatnonzero(dd.counts > t)
        k = by_row[starts[live] + t]
        sums[live] = _add(sums[live], grads[bag_of[k]], numerics=numerics)
    return sums


def row_gradients(indices, offsets, grads, *, numerics="tpu"):
    """The deduplicated gradients the optimizer sees: ``(ids, G)``.

    ``ids`` (int64 [U]) in first-occurrence order and ``G`` (float32 [U, D]),
    ``G[u]`` the sum of ``grads[b]`` over every occurrence of ``ids[u]``,
    folded from +0.0 in increasing position. Without a table, ids need only be
    non-negative.
    """
    check_numerics(numerics)
    indices, offsets, lengths = check_csr(indices, offsets, np.iinfo(np.int64).max)
    grads = fp32_array(grads, "grads", (len(lengths), None))
    dd = dedup(indices)
    return dd.ids, _row_gradients(dd, lengths, grads, numerics).view(np.float32)


def _state(state, optimizer, shape, initial_accumulator):
    if optimizer == "sgd":
        if state is not None:
            raise ValueError("sgd keeps no state: state must be None")
        return None
    if state is None:
        init = fp32_scalar(initial_accumulator, name="initial_accumulator")
        return np.full(shape, init, np.uint32)
    return fp32_array(state, "state", shape).copy()


def update(table, indices, offsets, grads, *, optimizer="sgd", lr, state=None,
           initial_accumulator=DEFAULT_INITIAL_ACCUMULATOR, numerics="tpu"):
    """Sum duplicate gradients, then apply the optimizer once per unique row (SPEC section 6).

    The op sequences are in the module docstring. The arguments are not modified.

    Parameters
    ----------
    table : fp32 [V, D]
    indices, offsets : CSR ids, as for :func:`lookup`
    grads : fp32 [B, D], one gradient per bag
    optimizer : "sgd", "adagrad" or "rowwise_adagrad"
    lr : real number or uint32 pattern, see :func:`fp32_scalar`
    state : fp32 [V, D] ("adagrad"), fp32 [V] ("rowwise_adagrad"), None for "sgd"
        The accumulators; None starts them all at ``initial_accumulator``.
    initial_accumulator : real number, default 0.1
    numerics : "tpu" or "ieee"

    Returns
    -------
    (table, state)
        float32 [V, D] and float32 state (None for "sgd").

    Raises
    ------
    IndexOutOfRange, ValueError
        As for :func:`lookup`.
    """
    check_numerics(numerics)
    check_choice(optimizer, OPTIMIZERS, "optimizer")
    table = check_table(table)
    n_rows, width = table.shape
    indices, offsets, lengths = check_csr(indices, offsets, n_rows)
    grads = fp32_array(grads, "grads", (len(lengths), width))
    lr = fp32_scalar(lr, name="lr")
    state_shape = (n_rows,) if optimizer == "rowwise_adagrad" else (n_rows, width)
    state = _state(state, optimizer, state_shape, initial_accumulator)

    dd = dedup(indices)
    g = _row_gradients(dd, lengths, grads, numerics)
    rows = table[dd.ids]
    if optimizer == "sgd":
        step = _mul(lr, g, numerics=numerics)
    elif optimizer == "adagrad":
        acc = _add(state[dd.ids], _mul(g, g, numerics=numerics), numerics=numerics)
        state[dd.ids] = acc
        step = _div(_mul(lr, g, numerics=numerics), _sqrt(acc, numerics=numerics),
                    numerics=numerics)
    else:
        sq = _mul(g, g, numerics=numerics)
        lane = np.zeros((len(dd.ids), LANES), np.uint32)
        for d in range(width):
            lane[:, d % LANES] = _add(lane[:, d % LANES], sq[:, d], numerics=numerics)
        total = lane[:, 0]
        for j in range(1, LANES):
            total = _add(total, lane[:, j], numerics=numerics)
        acc = _add(state[dd.ids], _div(total, _count_fp32(width), numerics=numerics),
                   numerics=numerics)
        state[dd.ids] = acc
        step = _div(_mul(lr, g, numerics=numerics), _sqrt(acc, numerics=numerics)[:, None],
                    numerics=numerics)
    out = table.copy()
    out[dd.ids] = _sub(rows, step, numerics=numerics)
    return out.view(np.float32), None if state is None else state.view(np.float32)

