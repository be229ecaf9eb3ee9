"""The multi-chip embedding step (SPEC 4.9) as one TensorCore program per chip, on chips with
a SparseCore (``hdl.tensorcore.TensorCoreSystem(sparsecores=1)``).

The step is :func:`golden.embedding.step`'s, message for message; its plan (who sends which
ids to whom, each owner's deduplicated rows, the bags of each gradient message) is
``golden.embedding.plan``, made here on the host, as TPU embedding input pipelines
partition and deduplicate ids on the host. Each chip's program then runs, with DMA pushes
over the ICI and sync flags:

1. *Ids all-to-all.* Chip c pushes its message to each owner o != c: ``[U, local ids]``
   (``1 + U`` words), on the owner's flag ``F_IDS``; each owner waits for every source's.
   Every all-to-all of the step pushes in :func:`_push_order`: the farthest partners
   first, and among those from the next rank round.
2. *Gather.* Owner o posts a gather work item to its SparseCore, which copies each row
   it serves (its deduplicated ids) once from its table shard into its Spmem
   (``to_spmem``), bits unchanged, and adds the rows it read to ``F_GATHER``: that flag,
   read back after the run, is ``hbm_reads[o]``. The HBM port does nothing else, so the
   rows come at a line a cycle.
3. *Pack and rows all-to-all.* Owner o's SparseCore copies the staged rows from its Spmem
   into an outbox in the HBM, in each source's message order (sources in rank order;
   another gather item, ``from_spmem``, on ``F_PACK``: no table row is read again), and the
   owner pushes each source its rows (``D`` words a row, strided over the padded rows)
   into the source's *received table* (its own rows locally), on the source's flag
   ``F_ROWS``, in pieces of half what a push port's queue holds (:data:`PIECE_BEATS`),
   dealt round (:func:`_dealt`).
4. *Combine.* Chip c's SparseCore runs a lookup on its received table, each id renamed to
   its row there (owners in rank order, then the id's place in the owner's message),
   writing the bags' rows: ``golden.sparsecore.lookup`` on the whole table, bit for bit.
5. *Gradients all-to-all* (with ``grads``). ``mode="exact"``: chip c pushes to each owner
   o != c the header ``[B, lengths, slots]`` (``1 + B + N`` words) and the gradient row of
   each of its B bags holding an id of o (``D`` words each, its own locally; packed by
   its SparseCore, owners in rank order, on ``F_PACK_GRADS``: the bag rows staged in its
   Spmem, then copied into the messages from there; pushed as the rows are), into the
   owner's gradient area, sources in rank order, on ``F_GRADS``. ``mode="prereduced"``:
   chip c's SparseCore first sums each of its unique ids' gradients with a lookup on its
   gradient rows (a bag per unique id, owners in rank order, of the bags its occurrences
   are in, in position order: ``golden.sparsecore.row_gradients``' sums, from +0.0), and
   chip c pushes each owner the partials of its ids (``D`` words each, pushed as the
   rows are).
6. *Sum-then-apply.* Owner o's SparseCore runs an update of its table shard with every
   source's sub-bags (``"exact"``) or one bag of one id per partial (``"prereduced"``),
   sources in rank order: ``golden.embedding.step``'s update, restricted to o's rows.

Each work item is stored in SMEM below the SparseCore's item slot; the program copies it
into the slot, rings the doorbell and waits on the item's flag. The gather's item, the
step's first, is copied before the ids ``wait``, so that only the doorbell is left after
it.

The owners' update batch (their local ids and bag ends) is planned from the same
``golden.embedding`` plan as the messages carry; the headers land but the SparseCore reads
the planned copy. Rows are padded to the tile's row width (a multiple of 8 words) in the
tables the SparseCore reads; the all-to-alls carry the ``D`` real words.

Memory of every chip, in words (each area starts at a multiple of 8): the tile's table
region (shard rows, then their optimizer state) at 0, the received table after it, then
the areas the plan sizes (:class:`EmbeddingPlan`). Flags ``F_IDS`` .. ``F_PACK_GRADS`` are 1 to
9 (:data:`FLAGS`).
"""

from dataclasses import dataclass

import numpy as np

from golden import embedding as ge
from golden import memory as gm
from golden import sparsecore as gs
from golden import tensorcore as tc
from golden import topology as topo
from hdl.memory.dma_push_ports import DEFAULT_PUSH_BEATS
from hdl.sparsecore import LANES, WORK_FIELDS, control_word
from hdl.tensorcore.sparse_issue import doorbell_address, work_address

__all__ = ["EmbeddingPlan", "plan_embedding", "FLAGS", "PHASES"]

#: The flags of the step's programs.
FLAGS = dict(ids=1, gather=2, rows=3, lookup=4, grads=5, update=6, partials=7, pack=8,
             pack_grads=9)
#: The step's phases, in program order (the last three with ``grads`` only). As the rows'
#: ``pack`` is apart from their all-to-all, ``pack_grads`` is the gradients' messages made
#: before any is pushed (with ``mode="exact"`` the bag rows packed by owner, with
#: ``"prereduced"`` the partials' lookup), and ``grads`` their all-to-all alone.
PHASES = ("ids", "gather", "pack", "rows", "combine", "pack_grads", "grads", "update")
_IMM = 1 << 15            # a wait's operand and an SMEM address are signed 16-bit
_MIN = 16                 # the smallest tile capacity, so that small steps share a build
#: Beats of a push piece (``_dealt``): half a push port's queue, as the collectives' pushes
#: (``sim.system_chip``). With the whole queue, a 4x4 benchmark step's rows all-to-all
#: took 5,284 cycles; with half, 4,818 (docs/system.md, "Benchmarks"): a port's
#: queue then holds a piece while the one before it leaves, and the messages' pieces go
#: round finer, so a long message holds a port for less.
PIECE_BEATS = DEFAULT_PUSH_BEATS // 2


def _pow2(n, least=_MIN):
    return max(least, 1 << max(0, int(n) - 1).bit_length())


def _align(n):
    return -(-int(n) // 8) * 8


@dataclass(frozen=True)
class EmbeddingPlan:
    """The step's programs and images, per chip id (None for a failed chip).

    ``programs`` (assembly), ``hbm`` and ``smem`` (flat uint32 images); ``chip``, the
    TensorCore parameters every chip needs (the SparseCore's included); ``plan``, the
    ``golden.embedding.Plan``; ``width`` (D), ``row_words`` (the tile's padded rows),
    ``rows`` (the tile's rows); ``areas[c]``: the word address of each area on chip c;
    ``ici_words``: what the pushes between chips carry (``golden.embedding.traffic``).
    """
    programs: list
    hbm: list
    smem: list
    chip: dict
    plan: object
    chips: list
    width: int
    row_words: int
    rows: int
    areas: list
    ici_words: int
    backward: bool
    phases: dict = None

    def programs_until(self, phase):
        """Every chip's program cut after ``phase`` (:data:`PHASES`; one the step does not
        have is refused) and halted: a run of it times the step up to that phase's end."""
        if phase not in self.phases:
            raise ValueError(f"phase must be one of {', '.join(self.phases)}, not {phase!r}")
        return self.phases[phase]

    def results(self, hbms, *, table, state, optimizer):
        """``(out, table, state)`` from the final HBM images of every chip id."""
        C, D, Dp = len(self.chips), self.width, self.row_words
        out = []
        for r, chip in enumerate(self.chips):
            a = self.areas[chip]
            words = hbms[chip][a["out"]:a["out"] + a["bags"] * Dp]
            out.append(words.reshape(a["bags"], Dp)[:, :D].copy().view(np.float32))
        new_table = np.array(table, np.uint32, copy=True)
        new_state = None if state is None else np.array(state, np.uint32, copy=True)
        if self.backward:
            for o, chip in enumerate(self.chips):
                n = len(new_table[o::C])
                region = hbms[chip][:2 * self.rows * Dp].reshape(2, self.rows, Dp)
                new_table[o::C] = region[0, :n, :D]
                if new_state is not None and optimizer == "adagrad":
                    new_state[o::C] = region[1, :n, :D]
                elif new_state is not None and optimizer == "rowwise_adagrad":
                    new_state[o::C] = region[1, :n, 0]      # every word of the row holds it
        return out, new_table.view(np.float32), \
            None if new_state is None else new_state.view(np.float32)


class _Chip:
    """One chip's images and program text, filled area by area."""

    def __init__(self, base):
        self.next, self.hbm, self.smem, self.lines, self.descriptors = base, {}, [], [], 0
        self.areas, self.items, self.marks, self.staged = {}, [], {}, None

    def mark(self, phase):
        """The program so far ends ``phase``."""
        self.marks[phase] = len(self.lines)

    def area(self, name, words, values=None):
        at = self.areas[name] = self.next
        self.next = _align(at + max(int(words), 0))
        if values is not None:
            self.hbm[at] = np.asarray(values, np.int64).astype(np.uint32)
        return at

    def dma(self, descriptor):
        self.smem.append(tc.descriptor_words(descriptor))
        self.lines.append(f"dma {tc.DESCRIPTOR_WORDS * (len(self.smem) - 1)}")

    def stage(self, item):
        """Copy work ``item`` into the SparseCore's item slot, to be posted later by
        :meth:`ring`; returns its number. The slot is free: every item before it has been
        waited for (``post`` waits at once)."""
        if self.staged is not None:
            raise RuntimeError(f"item {self.staged} is staged and not yet rung")
        self.staged = len(self.items)
        self.lines.append(("copy", self.staged))
        self.items.append(item)
        return self.staged

    def ring(self, k, flag, value):
        """Post staged item ``k`` (the doorbell counts it) and wait until ``flag`` reaches
        ``value``."""
        if self.staged != k:
            raise RuntimeError(f"item {k} is not the staged one ({self.staged})")
        self.staged = None
        self.lines.append(("ring", k))
        self.wait(flag, value)

    def post(self, item, flag, value):
        """Post work ``item`` to the SparseCore (copied below the doorbell, which then
        counts it) and wait until ``flag`` reaches ``value``."""
        self.ring(self.stage(item), flag, value)

    def wait(self, flag, value):
        if value:
            if value >= _IMM:
                raise ValueError(f"a wait for {value} words does not fit an immediate: use a "
                                 f"smaller step")
            self.lines.append(f"wait f{flag}, {value}")


def _rows(src_at, dst, n, width, row_words, flag):
    """One descriptor moving ``n`` rows of ``width`` words, ``row_words`` apart on both
    sides, from HBM word ``src_at`` to ``dst``: ``n * width`` words."""
    if width == row_words or n == 1:
        return gm.Descriptor(("hbm", src_at), dst, (n * width,), (1,), (1,), flag)
    return gm.Descriptor(("hbm", src_at), dst, (width, n), (1, row_words), (1, row_words),
                         flag)


def _push_order(c, C, hops):
    """Rank ``c``'s partners in push order: the farthest (``hops[c, o]`` links away) first,
    and among those as far ranks ``c + 1, c + 2, ...`` around; itself last.

    From the next rank round: in rank order every chip would push to rank 0 first, then
    all to rank 1, ...: one chip's links and receive ports take every chip's first message
    while the rest idle. The farthest first: a message lands about its latency after it
    leaves, which grows with its hops, so the far ones go while the near ones wait. On the
    4x4 benchmark (2026-12-02, seeds 1 and 2, the phases of the bench's plan alone) it took
    the ids' all-to-all from 493 and 476 cycles to 430 and 437 (449 and 451 with the
    nearest first), the rows' from 4,946 and 5,164 to 4,747 and 4,895, and left the
    gradients' within 1% (docs/system.md, "Benchmarks")."""
    order = [(c + k) % C for k in range(1, C)]
    return sorted(order, key=lambda o: -hops[c, o]) + [c]


def _dealt(pushes, piece_rows):
    """:func:`_rows` descriptors for ``pushes`` (``(src_at, dst, n, width, row_words,
    flag)`` each), cut into pieces of at most ``piece_rows`` rows and dealt round: every
    push's first piece, then every push's second, and so on.

    Why: the DMA deals whole pushes to its push ports, and its burst engine holds a push
    until that port's queue has taken all of it. A push larger than the queue keeps
    the engine on one port while the others drain and idle, so a chip sends at one port's
    rate; pieces the queue can hold keep every port sending.
    """
    out = []
    for first in range(0, max((n for _, _, n, *_ in pushes), default=0), piece_rows):
        for src_at, dst, n, width, row_words, flag in pushes:
            if first < n:
                skip = first * row_words
                out.append(_rows(src_at + skip, (*dst[:-1], dst[-1] + skip),
                                 min(piece_rows, n - first), width, row_words, flag))
    return out


def _item(*, op, combiner=0, optimizer=0, weighted=0, gather=0, columns=0, lr=0, n_rows, n_ids,
          n_bags, table, ids, weights, ends, grads, out, flag, per_line, to_spmem=0,
          from_spmem=0):
    words = dict(control=control_word(op=op, combiner=combiner, optimizer=optimizer,
                                      weighted=weighted, gather=gather, columns=columns,
                                      to_spmem=to_spmem, from_spmem=from_spmem),
                 lr=lr,
                 n_rows=n_rows, n_ids=n_ids, n_bags=n_bags, flag=flag,
                 **{name: value // per_line for name, value in dict(
                     table=table, ids=ids, weights=weights, ends=ends, grads=grads,
                     out=out).items()})
    return np.array([words[name] for name in WORK_FIELDS], np.uint32)


def _sizes(chip, need):
    """The SparseCore's parameters: what the step needs, raised to ``chip["sparsecore"]``'s
    sizes when it gives them (so that every step of a regression shares one build); its
    ``combiners`` and ``optimizers`` when given (they must hold the step's)."""
    given = dict(chip.get("sparsecore") or {})
    tile = dict(need)
    for name in ("rows", "max_ids", "max_bags", "row_words", "spmem_rows"):
        if name in given:
            tile[name] = max(int(given[name]), need[name])
    for name, choices in (("combiners", gs.COMBINERS), ("optimizers", gs.OPTIMIZERS)):
        if name in given:
            wanted = set(need[name].split(","))
            have = {part.strip() for part in given[name].split(",")}
            if not wanted <= have:
                raise ValueError(f"chip['sparsecore']['{name}'] is {given[name]!r}: the step "
                                 f"needs {need[name]!r}")
            tile[name] = given[name]
    tile |= {k: v for k, v in given.items() if k not in tile}
    return tile


def plan_embedding(table, indices, offsets, *, grads=None, weights=None, topology,
                   combiner="sum", optimizer="sgd", lr=0.01, state=None, mode="exact",
                   capacity=None, chip, dedup=True):
    """Plan the step (module docstring); returns an :class:`EmbeddingPlan`.

    Arguments as :func:`golden.embedding.step` (checked there first); ``chip`` the
    TensorCore parameters of the system's chips (``words_per_cycle``, ``numerics``, ...),
    to which the SparseCore's are added (``chip["sparsecore"]``, when given, sets the
    tile's least sizes, and ``hbm_words`` and ``smem_words`` are the least memories: a
    regression gives them so that its steps share one build). ``dedup=False`` plans the
    step that sends every occurrence (the benchmarks' comparison, ``mode="exact"`` only):
    each occurrence is an id of its pair's message, a row the owner reads and a row it
    sends back; the results are the same bits.

    Raises
    ------
    ValueError
        As ``golden.embedding.step`` does, and for what the RTL does not do: a step whose
        waits or SMEM addresses do not fit an immediate.
    """
    gs.check_choice(mode, ge.MODES, "mode")
    topology, chips = ge.live_chips(topology)
    names = [topology.describe(c) for c in chips]
    C = len(chips)
    hops = topo.hop_distances(topology)[np.ix_(chips, chips)]     # by rank
    bits = gs.check_table(table)
    V, D = bits.shape
    p = ge.plan(indices, offsets, num_rows=V, n_chips=C, capacity=capacity, names=names)
    batches = [gs.check_csr(i, o)[:2] for i, o in zip(indices, offsets)]
    backward = grads is not None
    prereduced = backward and mode == "prereduced"
    golden_plan = p
    if not dedup:
        if prereduced:
            raise ValueError("dedup=False plans mode='exact' only: 'prereduced' sums by id")
        p = _every_occurrence(p, batches)
    if backward:
        grads = [gs.fp32_array(g, f"grads[{c}]", (len(batches[c][1]) - 1, D))
                 for c, g in enumerate(grads)]
    if weights is not None:
        weights = [gs.fp32_array(w, f"weights[{c}]", (len(batches[c][0]),))
                   for c, w in enumerate(weights)]
    lr_bits = int(gs.fp32_scalar(lr, name="lr"))
    if optimizer != "sgd":
        init = gs.fp32_scalar(gs.DEFAULT_INITIAL_ACCUMULATOR, name="initial_accumulator")
        shape = (V,) if optimizer == "rowwise_adagrad" else (V, D)
        state = np.full(shape, init, np.uint32) if state is None else \
            gs.fp32_array(state, "state", shape)

    sub = {(c, o): p.sub_bags(c, o, batches[c][1]) for c in range(C) for o in range(C)}
    shard_rows = [len(range(o, V, C)) for o in range(C)]
    received = [int(p.unique[c].sum()) for c in range(C)]
    received_by = [int(p.unique[:, o].sum()) for o in range(C)]     # rows owner o sends
    if prereduced:
        # The owner's update: one bag of one id per partial, sources in rank order.
        owner_ids = owner_bags = [int(p.unique[:, o].sum()) for o in range(C)]
    else:
        owner_ids = [int(p.occurrences[:, o].sum()) for o in range(C)]
        owner_bags = [int(sum(len(sub[c, o][0]) for c in range(C))) for o in range(C)]
    batch_rows = [len(b[1]) - 1 for b in batches] if prereduced else []
    rows = _pow2(max(shard_rows + received + batch_rows))
    # What the Spmem stages: each owner's served rows, and in "exact" each chip's bag rows.
    staged = [len(s) for s in p.served]
    if backward and not prereduced:
        staged += [len(b[1]) - 1 for b in batches]
    tile = _sizes(chip, dict(
        rows=rows, row_words=-(-D // LANES) * LANES,
        max_ids=_pow2(max([len(b[0]) for b in batches] + owner_ids)),
        max_bags=_pow2(max([len(b[1]) - 1 for b in batches] + owner_bags + received)),
        # (the partials of "prereduced" are a lookup with the sum combiner)
        combiners=",".join(dict.fromkeys([combiner] + ["sum"] * prereduced)),
        optimizers=optimizer if backward else "sgd",
        spmem_rows=_pow2(max(staged))))
    rows, Dp = tile["rows"], tile["row_words"]
    per_line = chip.get("words_per_cycle", 1)
    # Rows a push piece carries: half what a push port's queue holds (``_dealt``); with
    # one port the DMA has no queue, and a message goes whole.
    piece_rows = V if chip.get("network_ports", 1) == 1 else \
        max(1, PIECE_BEATS * per_line // D)

    work = [_Chip(3 * rows * Dp) for _ in range(C)]
    # Every area first, so that pushes know their destinations.
    for c, w in enumerate(work):
        ids, offs = batches[c]
        base = np.cumsum([0] + [int(p.unique[c, o]) for o in range(C)])
        w.area("slots", len(ids), base[p.owners[c]] + p.slots[c])
        w.area("weights", len(ids), weights[c] if weights is not None else None)
        w.area("ends", len(offs) - 1, offs[1:])
        w.areas["bags"] = len(offs) - 1
        w.area("out", (len(offs) - 1) * Dp)
        for o in range(C):
            message = np.concatenate([[p.unique[c, o]], ge.local(p.sends[c][o], C)])
            w.area(f"send_ids{o}", len(message), message)
            w.area(f"recv_ids{o}", 1 + p.unique[o, c])
        w.area("served", len(p.served[c]), p.served[c])
        # The outbox: each source's rows in its message's order, sources in rank order.
        where = {int(v): k for k, v in enumerate(p.served[c])}
        w.area("pack_ids", received_by[c], [where[int(v)] for src in range(C)
                                            for v in ge.local(p.sends[src][c], C)])
        w.area("outbox", received_by[c] * Dp)
        if backward:
            padded = np.zeros((len(offs) - 1, Dp), np.uint32)
            padded[:, :D] = grads[c]
            w.area("grads", padded.size, padded.reshape(-1))
            if prereduced:
                # The partials' lookup: a bag per unique id (owners in rank order, then
                # the pair's order) of the bags its occurrences are in, in position order.
                bag_of = np.repeat(np.arange(len(offs) - 1), np.diff(offs))
                order, ends = [], []
                for o in range(C):
                    mine = np.flatnonzero(p.owners[c] == o)
                    for u in range(int(p.unique[c, o])):
                        order += bag_of[mine[p.slots[c][mine] == u]].tolist()
                        ends.append(len(order))
                w.area("part_ids", len(order), order)
                w.area("part_ends", len(ends), ends)
                w.area("partials", len(ends) * Dp)
            else:
                sent_bags = [int(b) for o in range(C) for b in sub[c, o][0]]
                w.area("gpack_ids", len(sent_bags), sent_bags)
                w.area("bag_ids", len(offs) - 1, np.arange(len(offs) - 1))
                w.area("gbox", len(sent_bags) * Dp)
                for o in range(C):
                    bags, ends = sub[c, o]
                    mine = np.flatnonzero(p.owners[c] == o)
                    header = np.concatenate([[len(bags)], np.diff(ends, prepend=0),
                                             p.slots[c][mine]])
                    w.area(f"send_head{o}", len(header), header)
                    w.area(f"recv_head{o}", 1 + p.bags[o, c] + p.occurrences[o, c])
            w.area("own_ids", owner_ids[c])
            w.area("own_ends", owner_bags[c])
            w.area("own_grads", owner_bags[c] * Dp)
    received_base = 2 * rows * Dp
    hbm_words = max(_pow2(max(w.next for w in work), least=1024), chip.get("hbm_words", 0))

    for c, w in enumerate(work):
        # 1. ids out, and every source's ids in.
        for o in _push_order(c, C, hops)[:-1]:
            w.dma(gm.Descriptor(("hbm", w.areas[f"send_ids{o}"]),
                                ("remote", int(chips[o]), "hbm", work[o].areas[f"recv_ids{c}"]),
                                (1 + int(p.unique[c, o]),), (1,), (1,), FLAGS["ids"]))
        # 2. the gather: the SparseCore copies each served row once from the table into
        # its Spmem (row k at Spmem line 0 + k rows), and adds the rows it read to the flag.
        # Its item is the step's first, so it is copied into the slot while the ids come,
        # and the gather starts with the doorbell.
        if len(p.served[c]):
            gather = w.stage(_item(op=0, gather=1, to_spmem=1, n_rows=shard_rows[c],
                                   n_ids=len(p.served[c]), n_bags=0, table=0,
                                   ids=w.areas["served"], weights=0, ends=0, grads=0, out=0,
                                   flag=FLAGS["gather"], per_line=per_line))
        w.wait(FLAGS["ids"], sum(1 + int(p.unique[s, c]) for s in range(C) if s != c))
        w.mark("ids")
        if len(p.served[c]):
            w.ring(gather, FLAGS["gather"], len(p.served[c]))
        w.mark("gather")
        # 3. the outbox: the SparseCore copies the staged rows from its Spmem into each
        # source's message order (no table row is read again), then the rows go to each
        # source, into its received table.
        if received_by[c]:
            w.post(_item(op=0, gather=1, from_spmem=1, n_rows=len(p.served[c]),
                         n_ids=received_by[c], n_bags=0, table=0, ids=w.areas["pack_ids"],
                         weights=0, ends=0, grads=0, out=w.areas["outbox"],
                         flag=FLAGS["pack"], per_line=per_line), FLAGS["pack"],
                   received_by[c])
        w.mark("pack")
        pushes = []
        for s in _push_order(c, C, hops):
            at = received_base + int(p.unique[s, :c].sum()) * Dp
            dst = ("hbm", at) if s == c else ("remote", int(chips[s]), "hbm", at)
            pushes.append((w.areas["outbox"] + int(p.unique[:s, c].sum()) * Dp, dst,
                           int(p.unique[s, c]), D, Dp, FLAGS["rows"]))
        for descriptor in _dealt(pushes, piece_rows):
            w.dma(descriptor)
        w.wait(FLAGS["rows"], received[c] * D)
        w.mark("rows")
        # 4. the combine: a lookup on the received table.
        ids, offs = batches[c]
        w.post(_item(op=0, combiner=gs.COMBINERS.index(combiner),
                     weighted=int(weights is not None), n_rows=received[c], n_ids=len(ids),
                     n_bags=len(offs) - 1, table=received_base, ids=w.areas["slots"],
                     weights=w.areas["weights"], ends=w.areas["ends"], grads=0,
                     out=w.areas["out"], flag=FLAGS["lookup"], per_line=per_line),
               FLAGS["lookup"], 1)
        w.mark("combine")
        if not backward:
            continue
        own_ids, own_ends = [], []
        if prereduced:
            # 5. each source's partial per unique id (a lookup on its gradients), then
            # the partials to their owners, sources in rank order.
            n_parts = received[c]
            if n_parts:
                w.post(_item(op=0, n_rows=len(offs) - 1, n_ids=len(ids), n_bags=n_parts,
                             table=w.areas["grads"], ids=w.areas["part_ids"], weights=0,
                             ends=w.areas["part_ends"], grads=0, out=w.areas["partials"],
                             flag=FLAGS["partials"], per_line=per_line),
                       FLAGS["partials"], 1)
            w.mark("pack_grads")
            pushes = []
            for o in _push_order(c, C, hops):
                dst_at = work[o].areas["own_grads"] + int(p.unique[:c, o].sum()) * Dp
                dst = ("hbm", dst_at) if o == c else ("remote", int(chips[o]), "hbm", dst_at)
                pushes.append((w.areas["partials"] + int(p.unique[c, :o].sum()) * Dp, dst,
                               int(p.unique[c, o]), D, Dp, FLAGS["grads"]))
            for descriptor in _dealt(pushes, piece_rows):
                w.dma(descriptor)
            w.wait(FLAGS["grads"], owner_bags[c] * D)
            w.mark("grads")
            for s in range(C):
                own_ids += ge.local(p.sends[s][c], C).tolist()
            own_ends = list(range(1, len(own_ids) + 1))
        else:
            # 5. gradients: the SparseCore stages the bag rows in its Spmem, then packs each
            # owner's bag rows from there (owners in rank order; a bag row goes to each
            # owner of its ids, so reading it once saves HBM cycles), then each owner gets
            # its header and its bag rows.
            packed = int(sum(len(sub[c, o][0]) for o in range(C)))
            if packed:
                n_bags = len(offs) - 1
                w.post(_item(op=0, gather=1, to_spmem=1, n_rows=n_bags, n_ids=n_bags,
                             n_bags=0, table=w.areas["grads"], ids=w.areas["bag_ids"],
                             weights=0, ends=0, grads=0, out=0, flag=FLAGS["pack_grads"],
                             per_line=per_line), FLAGS["pack_grads"], n_bags)
                w.post(_item(op=0, gather=1, from_spmem=1, n_rows=n_bags, n_ids=packed,
                             n_bags=0, table=0, ids=w.areas["gpack_ids"], weights=0,
                             ends=0, grads=0, out=w.areas["gbox"], flag=FLAGS["pack_grads"],
                             per_line=per_line), FLAGS["pack_grads"], n_bags + packed)
            w.mark("pack_grads")
            pushes = []
            for o in _push_order(c, C, hops):
                bags, _ = sub[c, o]
                if o != c:
                    w.dma(gm.Descriptor(
                        ("hbm", w.areas[f"send_head{o}"]),
                        ("remote", int(chips[o]), "hbm", work[o].areas[f"recv_head{c}"]),
                        (1 + len(bags) + int(p.occurrences[c, o]),), (1,), (1,),
                        FLAGS["grads"]))
                first = int(sum(len(sub[s, o][0]) for s in range(c)))
                dst_at = work[o].areas["own_grads"] + first * Dp
                dst = ("hbm", dst_at) if o == c else ("remote", int(chips[o]), "hbm", dst_at)
                at = int(sum(len(sub[c, k][0]) for k in range(o)))
                pushes.append((w.areas["gbox"] + at * Dp, dst, len(bags), D, Dp,
                               FLAGS["grads"]))
            for descriptor in _dealt(pushes, piece_rows):
                w.dma(descriptor)
            expect = sum(1 + int(p.bags[s, c]) + int(p.occurrences[s, c])
                         for s in range(C) if s != c) + owner_bags[c] * D
            w.wait(FLAGS["grads"], expect)
            w.mark("grads")
            for s in range(C):
                bags, ends = sub[s, c]
                mine = np.flatnonzero(p.owners[s] == c)
                own_ids += ge.local(batches[s][0][mine], C).tolist()
                own_ends += (ends + (own_ends[-1] if own_ends else 0)).tolist()
        # 6. the owner's sum-then-apply, every source's sub-bags (or partials) in rank order.
        w.hbm[w.areas["own_ids"]] = np.array(own_ids, np.int64).astype(np.uint32)
        w.hbm[w.areas["own_ends"]] = np.array(own_ends, np.int64).astype(np.uint32)
        w.post(_item(op=1, optimizer=gs.OPTIMIZERS.index(optimizer), columns=D, lr=lr_bits,
                     n_rows=shard_rows[c], n_ids=len(own_ids), n_bags=len(own_ends),
                     table=0, ids=w.areas["own_ids"], weights=0, ends=w.areas["own_ends"],
                     grads=w.areas["own_grads"], out=0, flag=FLAGS["update"],
                     per_line=per_line), FLAGS["update"], 1)
        w.mark("update")

    # SMEM: descriptors from 0; the work items, each copied below the doorbell when posted.
    n_items = max(len(w.items) for w in work)
    smem_words = max(_pow2(max(len(w.smem) * tc.DESCRIPTOR_WORDS for w in work)
                           + (n_items + 1) * len(WORK_FIELDS) + 1, least=1024),
                     chip.get("smem_words", 0))
    if smem_words > _IMM:
        raise ValueError(f"the step needs {smem_words} SMEM words, more than an address "
                         f"reaches: use a smaller step")
    slot = work_address(smem_words)
    programs, hbm, smem = ([None] * topology.n_chips for _ in range(3))
    phases = {phase: [None] * topology.n_chips for phase in PHASES
              if phase in work[0].marks}
    for c, w in enumerate(work):
        lines, ends = [], {}
        for i, line in enumerate(w.lines + [None]):
            for phase, at in w.marks.items():
                if at == i:
                    ends[phase] = len(lines)
            if line is None:
                break
            if isinstance(line, tuple) and line[0] == "copy":      # item k into the slot
                at = slot - (line[1] + 1) * len(WORK_FIELDS)
                lines += [f"lw s2, {at + i}(s0)\nsw s2, {slot + i}(s0)"
                          for i in range(len(WORK_FIELDS))]
            elif isinstance(line, tuple):                          # ring for item k
                lines += [f"li s1, {line[1] + 1}",
                          f"sw s1, {doorbell_address(smem_words)}(s0)"]
            else:
                lines.append(line)
        programs[chips[c]] = "\n".join(lines + ["halt"])
        for phase in phases:
            phases[phase][chips[c]] = "\n".join(lines[:ends[phase]] + ["halt"])
        image = np.zeros(hbm_words, np.uint32)
        shard = bits[c::C]
        image[:shard.shape[0] * Dp].reshape(-1, Dp)[:, :D] = shard
        if optimizer != "sgd":
            # Rowwise Adagrad's one accumulator a row fills the row (the tile's layout).
            at = rows * Dp
            shard_state = image[at:at + shard.shape[0] * Dp].reshape(-1, Dp)
            if optimizer == "adagrad":
                shard_state[:, :D] = state[c::C]
            else:
                shard_state[:] = state[c::C][:, None]
        for at, values in w.hbm.items():
            image[at:at + len(values)] = values
        hbm[chips[c]] = image
        words = np.zeros(smem_words, np.uint32)
        if w.smem:
            words[:len(w.smem) * tc.DESCRIPTOR_WORDS] = np.concatenate(w.smem)
        for k, item in enumerate(w.items):
            at = slot - (k + 1) * len(WORK_FIELDS)
            words[at:at + len(WORK_FIELDS)] = item
        smem[chips[c]] = words
        w.areas["bags"] = len(batches[c][1]) - 1
    params = dict(chip, hbm_words=hbm_words, smem_words=smem_words, sparsecores=1,
                  sparsecore=tile)
    ici = ge.traffic(golden_plan, D, backward=backward, mode=mode, dedup=dedup).total
    return EmbeddingPlan(programs=programs, hbm=hbm, smem=smem, chip=params, plan=p,
                         chips=[int(x) for x in chips], width=D, row_words=Dp, rows=rows,
                         areas=_areas_by_chip(work, chips, topology.n_chips), ici_words=ici,
                         backward=backward, phases=phases)


def _every_occurrence(p, batches):
    """``p`` as if no id repeated: each pair's message holds every occurrence (position
    order), and each owner reads every id it received."""
    C = p.n_chips
    sends, slots = [], []
    for c, (ids, _) in enumerate(batches):
        slot = np.zeros(len(ids), np.int64)
        row = []
        for o in range(C):
            mine = np.flatnonzero(p.owners[c] == o)
            row.append(ids[mine].astype(np.int64))
            slot[mine] = np.arange(len(mine))
        sends.append(tuple(row))
        slots.append(slot)
    served = tuple(ge.local(np.concatenate([np.zeros(0, np.int64)] +
                                           [sends[c][o] for c in range(C)]), C)
                   for o in range(C))
    return ge.Plan(C, tuple(sends), p.owners, tuple(slots), served, p.occurrences.copy(),
                   p.occurrences, p.bags)


def _areas_by_chip(work, chips, n):
    areas = [None] * n
    for c, w in zip(chips, work):
        areas[int(c)] = w.areas
    return areas
