"""Golden model of the multi-chip embedding step (SPEC sections 4.9 and 6), on top of
``golden.sparsecore`` (lookups and sum-then-apply updates) and ``golden.collectives`` (the
all-to-alls, which move bits only).

Sharding
    One table fp32 [V, D] is split by rows over the C live chips in rank order (rank r is
    the r-th live chip in chip-id order, as in ``golden.collectives``): ``owner(v) = v mod
    C``, ``local(v) = v div C``, so owner o's shard is ``table[o::C]`` and its local row l
    is the global row ``l*C + o``. Optimizer state is split the same way.

Inputs
    ``indices[c]``, ``offsets[c]`` (and ``weights[c]``, ``grads[c]``) are rank c's CSR
    batch, exactly as ``golden.sparsecore`` takes one. Every argument is checked before
    anything moves; then every id of every chip, in rank order: the first one outside ``[0,
    V)`` raises :class:`IdOutOfRange` naming the chip, its rank and the position; then the
    capacity (below) raises :class:`CapacityOverflow`. Both are ``ValueError`` s, raised
    before any transfer, so nothing is written anywhere.

Forward
    1. *Partition and dedup at the source.* Chip c's ids owned by o, deduplicated in
       first-occurrence order, are the pair's ``U[c, o]`` unique ids (``Plan.sends``).
       ``capacity`` (None: no limit) bounds every ``U[c, o]``, the pair c == o included;
       the first pair over it in (source rank, owner rank) order raises.
    2. *Ids all-to-all.* Message c -> o: ``[U, local(id_0), ..., local(id_{U-1})]``.
    3. *Owner's gather.* Owner o concatenates what it received in source-rank order,
       deduplicates it in first-occurrence order (``Plan.served``) and reads each of those
       rows from its shard once: ``hbm_reads[o]`` rows.
    4. *Rows all-to-all.* Message o -> c: the U rows of the pair's ids, in their order
       (``U*D`` words).
    5. *Combine at the source.* Chip c holds the rows it received, owners in rank order,
       and combines its bags with ``golden.sparsecore.lookup`` on them (each id renamed to
       its row there). Renaming rows changes no operand and no order, so ``out[c]`` equals
       ``golden.sparsecore.lookup`` of chip c's batch on the whole table, bit for bit.

Backward (with ``grads``; every occurrence of bag b receives ``grads[c][b]``, the sum
combiner's backward, whatever ``combiner`` and ``weights`` the forward used)
    - ``mode="exact"`` (the default). Message c -> o: ``[B]``, then for each of the B bags
      of chip c holding an id owned by o, in bag order: its count L of such ids, its
      gradient row (D words) and the L slots (the occurrence's index in the pair's ids
      message), in position order. Owner o runs ``golden.sparsecore.update`` on its shard
      with those sub-bags, sources in rank order: every occurrence of a row is summed from
      +0.0 in global order (chip-major, then bag, then position) and the optimizer applied
      once per row. The whole table and state equal ``golden.sparsecore.update`` on the
      concatenated batch (chip-major), bit for bit.
    - ``mode="prereduced"``. Chip c first sums each of its ids' gradients
      (``golden.sparsecore.row_gradients`` of its own batch: from +0.0, in position order);
      message c -> o is those partials of the pair's U ids, in the ids message's order
      (``U*D`` words). Owner o sums the partials of each row from +0.0 in source-rank
      order, ``G = add(...add(add(+0.0, P_c0), P_c1)..., P_ck)`` over the sources that hold
      it, and applies the optimizer once (``golden.sparsecore.update`` with one bag of one
      id per partial). Deterministic, and not equal to ``"exact"`` in general: it
      associates the sum by chip (``(a0 + a1) + (b0 + b1)`` against ``((a0 + a1) + b0) +
      b1``).

ICI words (``ici_words``; ``traffic`` gives them per pair and phase)
    The words of the messages between different chips, each counted once, however many
    links it crosses (the link loads are the system's heat map); a chip's message to
    itself is a local copy. For a pair c != o with U unique ids, N occurrences and B bags
    holding an id owned by o::

        ids        1 + U             rows        D*U
        exact      1 + B*(1 + D) + N prereduced  D*U

    and a step without dedup (every occurrence sent and read; the comparison of the
    benchmarks) carries ``1 + N`` and ``D*N`` in its forward, the backward unchanged.
    None of this depends on the topology, only on C and the ranks.
"""

import dataclasses

import numpy as np

from . import collectives, sparsecore
from .formats import check_numerics
from .sparsecore import COMBINERS, OPTIMIZERS, check_choice, fp32_array
from .topology import Topology, torus

__all__ = ["MODES", "PHASES", "EmbeddingRun", "IdOutOfRange", "CapacityOverflow", "Plan",
           "Traffic", "live_chips", "owner", "local", "plan", "traffic", "step"]

#: Backward modes (module docstring).
MODES = ("exact", "prereduced")
#: The step's all-to-alls, in order: ids, rows (forward), grads (backward).
PHASES = ("ids", "rows", "grads")


@dataclasses.dataclass(frozen=True)
class EmbeddingRun:
    """An embedding step's results (SPEC section 6).

    Attributes
    ----------
    out : list of np.ndarray float32 [B_c, D]
        Each live chip's lookups, in rank order.
    table : np.ndarray float32 [V, D]
        The whole table after the update (the input's bits without ``grads``).
    state : np.ndarray float32 ([V, D] or [V]) or None
        The whole optimizer state after the update (as given without ``grads``).
    cycles : int or None
        None for the golden model.
    hbm_reads : np.ndarray int64 [C]
        Rows each owner read in the forward gather: the unique ids it serves.
    ici_words : int
        Words the step's all-to-alls carried between chips (module docstring).
    """
    out: list
    table: np.ndarray
    state: object
    cycles: object
    hbm_reads: np.ndarray
    ici_words: int


class IdOutOfRange(ValueError):
    """An id outside ``[0, V)``: the first in rank order, then position order.

    Attributes: ``rank``, ``chip`` (its chip id), ``position`` (in ``indices[rank]``),
    ``value``, ``num_rows``.
    """

    def __init__(self, *, rank, chip, position, value, num_rows):
        self.rank, self.chip, self.position = rank, chip, position
        self.value, self.num_rows = value, num_rows
        super().__init__(f"index out of range on {chip} (rank {rank}) at position {position}: "
                         f"id {value} is not in [0, {num_rows})")


class CapacityOverflow(ValueError):
    """A pair's unique ids exceed ``capacity``: the first pair in (source, owner) rank order.

    Attributes: ``source``, ``owner`` (ranks), ``count``, ``capacity``.
    """

    def __init__(self, *, source, owner, count, capacity, names):
        self.source, self.owner, self.count, self.capacity = source, owner, count, capacity
        super().__init__(f"capacity overflow on the pair rank {source} -> rank {owner} "
                         f"({names[source]} -> {names[owner]}): {count} unique ids, capacity "
                         f"{capacity}")


def owner(ids, n_chips):
    """The rank owning each id: ``ids mod C``."""
    return np.asarray(ids, np.int64) % n_chips


def local(ids, n_chips):
    """Each id's row in its owner's shard: ``ids div C``."""
    return np.asarray(ids, np.int64) // n_chips


def live_chips(topology):
    """``(topology, chips)``: a :class:`~golden.topology.Topology` (from a shape string such
    as ``"2x2"``) and its live chip ids in rank order."""
    if isinstance(topology, str):
        topology = torus(topology)
    if not isinstance(topology, Topology):
        raise ValueError(f"topology must be a golden.topology.Topology or a shape such as "
                         f"'4x4', not {type(topology).__name__}")
    return topology, np.flatnonzero(topology.alive)


# ---------------------------------------------------------------- the plan

@dataclasses.dataclass(frozen=True)
class Plan:
    """Who sends which ids to whom: everything of a step but the values.

    Attributes
    ----------
    n_chips : int
    sends : tuple of C tuples of C int64 arrays
        ``sends[c][o]``: chip c's ids owned by o (global ids), first-occurrence order.
    owners, slots : tuple of C int64 arrays [N_c]
        For each position of chip c: its owner's rank, and the id's index in
        ``sends[c][owner]``.
    served : tuple of C int64 arrays
        ``served[o]``: the local rows owner o reads, first-occurrence order over the ids it
        received concatenated in source-rank order.
    unique, occurrences, bags : np.ndarray int64 [C, C]
        ``[c, o]``: U, N and B of the pair (module docstring).
    """
    n_chips: int
    sends: tuple
    owners: tuple
    slots: tuple
    served: tuple
    unique: np.ndarray
    occurrences: np.ndarray
    bags: np.ndarray

    @property
    def hbm_reads(self):
        """int64 [C]: rows each owner reads in the forward gather."""
        return np.array([len(s) for s in self.served], np.int64)

    def sub_bags(self, c, o, offsets):
        """Chip c's bags holding an id owned by o: ``(bags, ends)``, the bag indices and
        the cumulative counts of those ids (positions in order) as the exact message's."""
        lengths = np.diff(np.asarray(offsets, np.int64))
        bag_of = np.repeat(np.arange(len(lengths)), lengths)
        mine = self.owners[c] == o
        counts = np.bincount(bag_of[mine], minlength=len(lengths))
        bags = np.flatnonzero(counts)
        return bags, np.cumsum(counts[bags])


def _check_capacity(capacity):
    if capacity is None:
        return None
    if isinstance(capacity, (bool, np.bool_)) or not isinstance(capacity, (int, np.integer)) \
            or capacity < 1:
        raise ValueError(f"capacity must be None or an int >= 1, not {capacity!r}")
    return int(capacity)


def _csr(indices, offsets, n_chips):
    for name, value in (("indices", indices), ("offsets", offsets)):
        if not isinstance(value, (list, tuple)) or len(value) != n_chips:
            raise ValueError(f"{name} must be a list with one entry per live chip "
                             f"({n_chips}), not {_describe(value)}")
    out = []
    for c in range(n_chips):
        try:
            ids, offs, _ = sparsecore.check_csr(indices[c], offsets[c])
        except ValueError as error:
            raise ValueError(f"rank {c}: {error}") from None
        out.append((ids, offs))
    return out


def _describe(value):
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)}"
    return type(value).__name__


def plan(indices, offsets, *, num_rows, n_chips, capacity=None, names=None):
    """The :class:`Plan` of a step, after checking every id and the capacity.

    Parameters
    ----------
    indices, offsets : lists of C CSR arrays, as :func:`step` takes them
    num_rows : int
        V, the table's rows.
    n_chips : int
        C, the live chips.
    capacity : int or None
    names : list of C str, optional
        How errors name each rank's chip (default ``"chip r"``).

    Raises
    ------
    IdOutOfRange, CapacityOverflow, ValueError
    """
    if isinstance(n_chips, bool) or not isinstance(n_chips, (int, np.integer)) or n_chips < 1:
        raise ValueError(f"n_chips must be an int >= 1, not {n_chips!r}")
    capacity = _check_capacity(capacity)
    names = names or [f"chip {r}" for r in range(n_chips)]
    batches = _csr(indices, offsets, n_chips)
    for c, (ids, _) in enumerate(batches):
        bad = sparsecore.bad_positions(ids, num_rows)
        if len(bad):
            raise IdOutOfRange(rank=c, chip=names[c], position=int(bad[0]),
                               value=int(ids[bad[0]]), num_rows=num_rows)
    C = n_chips
    sends, owners, slots = [], [], []
    unique = np.zeros((C, C), np.int64)
    occurrences = np.zeros((C, C), np.int64)
    bags = np.zeros((C, C), np.int64)
    for c, (ids, offs) in enumerate(batches):
        own = owner(ids, C)
        slot = np.zeros(len(ids), np.int64)
        row = []
        bag_of = np.repeat(np.arange(len(offs) - 1), np.diff(offs))
        for o in range(C):
            mine = np.flatnonzero(own == o)
            dd = sparsecore.dedup(ids[mine])
            row.append(dd.ids)
            slot[mine] = dd.inverse
            unique[c, o], occurrences[c, o] = len(dd.ids), len(mine)
            bags[c, o] = len(np.unique(bag_of[mine]))
        sends.append(tuple(row))
        owners.append(own)
        slots.append(slot)
    if capacity is not None:
        over = np.argwhere(unique > capacity)
        if len(over):
            c, o = map(int, over[0])
            raise CapacityOverflow(source=c, owner=o, count=int(unique[c, o]),
                                   capacity=capacity, names=names)
    served = tuple(sparsecore.dedup(local(np.concatenate(
        [np.zeros(0, np.int64)] + [sends[c][o] for c in range(C)]), C)).ids for o in range(C))
    return Plan(C, tuple(sends), tuple(owners), tuple(slots), served, unique, occurrences,
                bags)


@dataclasses.dataclass(frozen=True)
class Traffic:
    """Words each pair's message carries, per phase: int64 [C, C] matrices, ``[c, o]`` the
    words from rank c to rank o (zero on the diagonal: local copies). ``grads`` is None for a
    forward-only step."""
    ids: np.ndarray
    rows: np.ndarray
    grads: object

    @property
    def total(self):
        """All the step's words between chips."""
        return int(self.ids.sum() + self.rows.sum()
                   + (0 if self.grads is None else self.grads.sum()))


def traffic(plan, width, *, backward=False, mode="exact", dedup=True):
    """The :class:`Traffic` of a step (module docstring's formulas).

    ``width`` is D; ``backward`` adds the gradients' all-to-all of ``mode``; ``dedup=False``
    gives the step that sends every occurrence (forward only; the backward is the same).
    """
    check_choice(mode, MODES, "mode")
    p = plan
    off = 1 - np.eye(p.n_chips, dtype=np.int64)
    sent = p.unique if dedup else p.occurrences
    ids = (1 + sent) * off
    rows = (width * sent).T * off                      # rows flow owner -> source
    grads = None
    if backward:
        if mode == "exact":
            grads = (1 + p.bags * (1 + width) + p.occurrences) * off
        else:
            grads = width * p.unique * off
    return Traffic(ids, rows, grads)


# ---------------------------------------------------------------- the all-to-alls

def _all_to_all(messages, topology):
    """Move ``messages[c][o]`` (uint32 words) from rank c to rank o through
    ``golden.collectives``' all-to-all; returns ``received[o][c]``."""
    C = len(messages)
    if C == 1:
        return [[messages[0][0].copy()]]
    m = max(1, max(len(msg) for row in messages for msg in row))
    buf = np.zeros((C, C, m), np.uint32)
    for c in range(C):
        for o in range(C):
            buf[c, o, :len(messages[c][o])] = messages[c][o]
    moved = collectives.collective("all_to_all", buf, topology=topology, dtype="int32")
    return [[moved[o, c, :len(messages[c][o])] for c in range(C)] for o in range(C)]


def _words(values):
    return np.asarray(values, np.int64).astype(np.uint32)


# ---------------------------------------------------------------- the step

def _check_list(value, name, n_chips, check):
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or len(value) != n_chips:
        raise ValueError(f"{name} must be None or a list with one entry per live chip "
                         f"({n_chips}), not {_describe(value)}")
    return [check(c, x) for c, x in enumerate(value)]


def step(table, indices, offsets, *, grads=None, weights=None, topology, combiner="sum",
         optimizer="sgd", lr=0.01, state=None, mode="exact", capacity=None, numerics="tpu"):
    """One embedding step on the live chips of ``topology`` (module docstring).

    Parameters
    ----------
    table : fp32 [V, D] (``np.float32`` values or ``uint32`` patterns), the whole table
    indices, offsets : lists of C 1-D integer arrays, rank c's CSR batch
    grads : None (forward only) or a list of C fp32 [B_c, D]
    weights : None or a list of C fp32 [N_c] (a forward's per-id weights)
    topology : golden.topology.Topology, or a shape such as ``"2x2"``
    combiner : "sum", "mean" or "sqrtn"
    optimizer : "sgd", "adagrad" or "rowwise_adagrad"
    lr : real number or uint32 pattern (``golden.sparsecore.fp32_scalar``)
    state : None, or the whole state: fp32 [V, D] (adagrad), [V] (rowwise_adagrad); None
        for sgd; None with Adagrad starts every accumulator at 0.1
    mode : "exact" or "prereduced"
    capacity : None or int >= 1, unique ids per (source, owner) pair
    numerics : "tpu" or "ieee"

    Returns
    -------
    EmbeddingRun
        With ``cycles=None``. The arguments are not modified.

    Raises
    ------
    IdOutOfRange, CapacityOverflow
        Before any transfer (``ValueError`` s).
    ValueError
        Any other bad argument, naming it.
    """
    check_numerics(numerics)
    check_choice(combiner, COMBINERS, "combiner")
    check_choice(optimizer, OPTIMIZERS, "optimizer")
    check_choice(mode, MODES, "mode")
    topology, chips = live_chips(topology)
    C = len(chips)
    names = [topology.describe(chip) for chip in chips]
    table = sparsecore.check_table(table)
    V, D = table.shape
    batches = _csr(indices, offsets, C)

    def check_weights(c, w):
        return fp32_array(w, f"weights[{c}]", (len(batches[c][0]),))

    def check_grads(c, g):
        return fp32_array(g, f"grads[{c}]", (len(batches[c][1]) - 1, D))

    weights = _check_list(weights, "weights", C, check_weights)
    grads = _check_list(grads, "grads", C, check_grads)
    lr_bits = sparsecore.fp32_scalar(lr, name="lr")
    if optimizer == "sgd":
        if state is not None:
            raise ValueError("sgd keeps no state: state must be None")
    elif state is not None:
        shape = (V,) if optimizer == "rowwise_adagrad" else (V, D)
        state = fp32_array(state, "state", shape)
    p = plan(indices, offsets, num_rows=V, n_chips=C, capacity=capacity, names=names)

    # Forward: ids out, the owners' deduplicated gather, rows back, the combine.
    got_ids = _all_to_all([[_words(np.concatenate([[len(p.sends[c][o])],
                                                   local(p.sends[c][o], C)]))
                            for o in range(C)] for c in range(C)], topology)
    replies = [[None] * C for _ in range(C)]
    for o in range(C):
        shard = table[o::C]
        received = [got_ids[o][c][1:1 + int(got_ids[o][c][0])].astype(np.int64)
                    for c in range(C)]
        served = sparsecore.dedup(np.concatenate([np.zeros(0, np.int64)] + received))
        assert np.array_equal(served.ids, p.served[o])
        rows = shard[served.ids]                         # each served row read once
        at = 0
        for c in range(C):
            replies[o][c] = rows[served.inverse[at:at + len(received[c])]].reshape(-1)
            at += len(received[c])
    got_rows = _all_to_all(replies, topology)
    out = []
    for c, (ids, offs) in enumerate(batches):
        held = [got_rows[c][o].reshape(-1, D) for o in range(C)]
        base = np.cumsum([0] + [len(h) for h in held])
        slots = base[p.owners[c]] + p.slots[c]
        out.append(sparsecore.lookup(np.concatenate(held), slots, offs, combiner=combiner,
                                     weights=None if weights is None else weights[c],
                                     numerics=numerics))
    words = traffic(p, D).total

    new_table, new_state = table.view(np.float32).copy(), \
        None if state is None else state.view(np.float32).copy()
    if grads is not None:
        new_table, new_state, grad_words = _backward(
            p, table, batches, grads, topology, optimizer=optimizer, lr=lr_bits, state=state,
            mode=mode, numerics=numerics)
        words += grad_words
    return EmbeddingRun(out, new_table, new_state, None, p.hbm_reads, words)


def _backward(p, table, batches, grads, topology, *, optimizer, lr, state, mode, numerics):
    C = p.n_chips
    V, D = table.shape
    messages = [[None] * C for _ in range(C)]
    for c, (ids, offs) in enumerate(batches):
        if mode == "exact":
            for o in range(C):
                bags, ends = p.sub_bags(c, o, offs)
                mine = np.flatnonzero(p.owners[c] == o)
                parts = [[len(bags)]]
                starts = np.concatenate([[0], ends[:-1]])
                for b, lo, hi in zip(bags, starts, ends):
                    parts += [[hi - lo], grads[c][b], p.slots[c][mine[lo:hi]]]
                messages[c][o] = _words(np.concatenate(parts))
        else:
            uniq, partial = sparsecore.row_gradients(ids, offs, grads[c], numerics=numerics)
            rank = {int(v): u for u, v in enumerate(uniq)}
            bits = partial.view(np.uint32)
            for o in range(C):
                messages[c][o] = bits[[rank[int(v)] for v in p.sends[c][o]]].reshape(-1) \
                    if len(p.sends[c][o]) else np.zeros(0, np.uint32)
    got = _all_to_all(messages, topology)
    words = sum(len(messages[c][o]) for c in range(C) for o in range(C) if c != o)

    new_table = table.copy()
    new_state = None
    if optimizer != "sgd":
        shape = (V,) if optimizer == "rowwise_adagrad" else (V, D)
        init = sparsecore.fp32_scalar(sparsecore.DEFAULT_INITIAL_ACCUMULATOR,
                                      name="initial_accumulator")
        new_state = np.full(shape, init, np.uint32) if state is None else state.copy()
    for o in range(C):
        ids, lengths, rows = [], [], []
        for c in range(C):
            msg = got[o][c]
            sent = local(p.sends[c][o], C)
            if mode == "exact":
                at, n_bags = 1, int(msg[0])
                for _ in range(n_bags):
                    n = int(msg[at])
                    rows.append(msg[at + 1:at + 1 + D])
                    ids.append(sent[msg[at + 1 + D:at + 1 + D + n].astype(np.int64)])
                    lengths.append(n)
                    at += 1 + D + n
                assert at == len(msg)
            else:
                rows += list(msg.reshape(-1, D))
                ids += [sent[u:u + 1] for u in range(len(sent))]
                lengths += [1] * len(sent)
        if not ids:
            continue
        shard_state = None if new_state is None else new_state[o::C]
        shard, shard_state = sparsecore.update(
            new_table[o::C], np.concatenate(ids), np.concatenate([[0], np.cumsum(lengths)]),
            np.array(rows, np.uint32).reshape(-1, D), optimizer=optimizer, lr=lr,
            state=shard_state, numerics=numerics)
        new_table[o::C] = shard.view(np.uint32)
        if new_state is not None:
            new_state[o::C] = shard_state.view(np.uint32)
    return (new_table.view(np.float32),
            None if new_state is None else new_state.view(np.float32), words)
