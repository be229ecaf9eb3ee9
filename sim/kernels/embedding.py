"""The multi-chip embedding step (SPEC 4.9) as one TensorCore program per chip, on chips with
a SparseCore (``hdl.tensorcore.TensorCoreSystem(sparsecores=1)``).

The step is :func:`golden.embedding.step`'s, message for message; its plan (who sends which
ids to whom, each owner's deduplicated rows, the bags of each gradient message) is
``golden.embedding.plan``, made here on the host, as TPU embedding input pipelines
partition and deduplicate ids on the host. Each chip's program then runs, with DMA pushes
over the ICI and sync flags:

1. *Ids all-to-all.* Chip c pushes its message to each owner o != c: ``[U, local ids]``
   (``1 + U`` words), on the owner's flag ``F_IDS``; each owner waits for every source's.
2. *Gather.* Owner o copies each row it serves (its deduplicated ids) once from its table
   shard into a staging area (one local DMA per row, ``D`` words): ``hbm_reads[o]`` rows.
3. *Rows all-to-all.* For each source, in the order of the source's ids message, the owner
   pushes each row from the staging area into the source's *received table* (its own rows
   locally), on the source's flag ``F_ROWS`` (``D`` words a row).
4. *Combine.* Chip c's SparseCore runs a lookup on its received table, each id renamed to
   its row there (owners in rank order, then the id's place in the owner's message),
   writing the bags' rows: ``golden.sparsecore.lookup`` on the whole table, bit for bit.
5. *Gradients all-to-all* (with ``grads``; ``mode="exact"``). Chip c pushes to each owner
   o != c the header ``[B, lengths, slots]`` (``1 + B + N`` words) and the gradient row of
   each of its B bags holding an id of o (``D`` words each, its own locally), into the
   owner's gradient area, sources in rank order, on ``F_GRADS``.
6. *Sum-then-apply.* Owner o's SparseCore runs an update of its table shard with every
   source's sub-bags, sources in rank order: ``golden.sparsecore.update`` on the
   concatenated batch, restricted to o's rows.

The owners' update batch (their local ids and bag ends) is planned from the same
``golden.embedding`` plan as the messages carry; the headers land but the SparseCore reads
the planned copy. Rows are padded to the tile's row width (a multiple of 8 words) in the
tables the SparseCore reads; the all-to-alls carry the ``D`` real words.

Memory of every chip, in words (each area starts at a multiple of 8): the tile's table
region (shard rows, then their optimizer state) at 0, the received table after it, then
the areas the plan sizes (:class:`EmbeddingPlan`). Flags ``F_IDS`` .. ``F_UPDATE`` are 1 to
6.
"""

from dataclasses import dataclass

import numpy as np

from golden import embedding as ge
from golden import memory as gm
from golden import sparsecore as gs
from golden import tensorcore as tc
from hdl.sparsecore import LANES, WORK_FIELDS
from hdl.tensorcore.sparse_issue import doorbell_address, work_address

__all__ = ["EmbeddingPlan", "plan_embedding", "FLAGS"]

#: The flags of the step's programs.
FLAGS = dict(ids=1, gather=2, rows=3, lookup=4, grads=5, update=6)
_IMM = 1 << 15            # a wait's operand and an SMEM address are signed 16-bit
_MIN = 16                 # the smallest tile capacity, so that small steps share a build


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
        return out, new_table.view(np.float32), \
            None if new_state is None else new_state.view(np.float32)


class _Chip:
    """One chip's images and program text, filled area by area."""

    def __init__(self, base):
        self.next, self.hbm, self.smem, self.lines, self.descriptors = base, {}, [], [], 0
        self.areas = {}

    def area(self, name, words, values=None):
        at = self.areas[name] = self.next
        self.next = _align(at + max(int(words), 0))
        if values is not None:
            self.hbm[at] = np.asarray(values, np.int64).astype(np.uint32)
        return at

    def dma(self, descriptor):
        self.smem.append(tc.descriptor_words(descriptor))
        self.lines.append(f"dma {tc.DESCRIPTOR_WORDS * (len(self.smem) - 1)}")

    def wait(self, flag, value):
        if value:
            if value >= _IMM:
                raise ValueError(f"a wait for {value} words does not fit an immediate: use a "
                                 f"smaller step")
            self.lines.append(f"wait f{flag}, {value}")


def _item(*, op, combiner=0, optimizer=0, weighted=0, lr=0, n_rows, n_ids, n_bags, table,
          ids, weights, ends, grads, out, flag, per_line):
    words = dict(control=op | combiner << 1 | optimizer << 3 | weighted << 4, lr=lr,
                 n_rows=n_rows, n_ids=n_ids, n_bags=n_bags, flag=flag,
                 **{name: value // per_line for name, value in dict(
                     table=table, ids=ids, weights=weights, ends=ends, grads=grads,
                     out=out).items()})
    return np.array([words[name] for name in WORK_FIELDS], np.uint32)


def plan_embedding(table, indices, offsets, *, grads=None, weights=None, topology,
                   combiner="sum", optimizer="sgd", lr=0.01, state=None, mode="exact",
                   capacity=None, chip):
    """Plan the step (module docstring); returns an :class:`EmbeddingPlan`.

    Arguments as :func:`golden.embedding.step` (checked there first); ``chip`` the
    TensorCore parameters of the system's chips (``words_per_cycle``, ``numerics``, ...),
    to which the SparseCore's are added.

    Raises
    ------
    ValueError
        As ``golden.embedding.step`` does, and for what the RTL does not do: ``mode
        ="prereduced"``, ``optimizer="rowwise_adagrad"``, or a step whose waits or SMEM
        addresses do not fit an immediate.
    """
    if mode != "exact":
        raise ValueError(f"mode={mode!r} is not in the RTL programs: they run mode='exact'")
    if optimizer == "rowwise_adagrad":
        raise ValueError("optimizer 'rowwise_adagrad' is not in the SparseCore tile RTL; it "
                         "has 'sgd' and 'adagrad'")
    topology, chips = ge.live_chips(topology)
    names = [topology.describe(c) for c in chips]
    C = len(chips)
    bits = gs.check_table(table)
    V, D = bits.shape
    p = ge.plan(indices, offsets, num_rows=V, n_chips=C, capacity=capacity, names=names)
    batches = [gs.check_csr(i, o)[:2] for i, o in zip(indices, offsets)]
    Dp = -(-D // LANES) * LANES
    backward = grads is not None
    if backward:
        grads = [gs.fp32_array(g, f"grads[{c}]", (len(batches[c][1]) - 1, D))
                 for c, g in enumerate(grads)]
    if weights is not None:
        weights = [gs.fp32_array(w, f"weights[{c}]", (len(batches[c][0]),))
                   for c, w in enumerate(weights)]
    lr_bits = int(gs.fp32_scalar(lr, name="lr"))
    if optimizer == "adagrad":
        init = gs.fp32_scalar(gs.DEFAULT_INITIAL_ACCUMULATOR, name="initial_accumulator")
        state = np.full((V, D), init, np.uint32) if state is None else \
            gs.fp32_array(state, "state", (V, D))

    sub = {(c, o): p.sub_bags(c, o, batches[c][1]) for c in range(C) for o in range(C)}
    shard_rows = [len(range(o, V, C)) for o in range(C)]
    received = [int(p.unique[c].sum()) for c in range(C)]
    owner_ids = [int(p.occurrences[:, o].sum()) for o in range(C)]
    owner_bags = [int(sum(len(sub[c, o][0]) for c in range(C))) for o in range(C)]
    rows = _pow2(max(shard_rows + received))
    tile = dict(rows=rows, row_words=Dp,
                max_ids=_pow2(max([len(b[0]) for b in batches] + owner_ids)),
                max_bags=_pow2(max([len(b[1]) - 1 for b in batches] + owner_bags)),
                combiners=combiner, optimizers=optimizer if backward else "sgd")
    per_line = chip.get("words_per_cycle", 1)

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
        w.area("stage", len(p.served[c]) * D)
        if backward:
            w.area("grads", grads[c].size, grads[c].reshape(-1))
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
    hbm_words = _pow2(max(w.next for w in work), least=1024)

    for c, w in enumerate(work):
        # 1. ids out, and every source's ids in.
        for o in range(C):
            if o != c:
                w.dma(gm.Descriptor(("hbm", w.areas[f"send_ids{o}"]),
                                    ("remote", int(chips[o]), "hbm", work[o].areas[f"recv_ids{c}"]),
                                    (1 + int(p.unique[c, o]),), (1,), (1,), FLAGS["ids"]))
        w.wait(FLAGS["ids"], sum(1 + int(p.unique[s, c]) for s in range(C) if s != c))
        # 2. the gather: each served row once, table -> staging.
        for s, row in enumerate(p.served[c]):
            w.dma(gm.Descriptor(("hbm", int(row) * Dp), ("hbm", w.areas["stage"] + s * D),
                                (D,), (1,), (1,), FLAGS["gather"]))
        w.wait(FLAGS["gather"], len(p.served[c]) * D)
        # 3. rows to each source, in its message's order, into its received table.
        where = {int(v): s for s, v in enumerate(p.served[c])}
        for s in range(C):
            at = received_base + int(p.unique[s, :c].sum()) * Dp
            for u, v in enumerate(ge.local(p.sends[s][c], C)):
                src = ("hbm", w.areas["stage"] + where[int(v)] * D)
                dst = ("hbm", at + u * Dp) if s == c else \
                    ("remote", int(chips[s]), "hbm", at + u * Dp)
                w.dma(gm.Descriptor(src, dst, (D,), (1,), (1,), FLAGS["rows"]))
        w.wait(FLAGS["rows"], received[c] * D)
        # 4. the combine: a lookup on the received table.
        ids, offs = batches[c]
        lookup = _item(op=0, combiner=gs.COMBINERS.index(combiner),
                       weighted=int(weights is not None), n_rows=received[c], n_ids=len(ids),
                       n_bags=len(offs) - 1, table=received_base, ids=w.areas["slots"],
                       weights=w.areas["weights"], ends=w.areas["ends"], grads=0,
                       out=w.areas["out"], flag=FLAGS["lookup"], per_line=per_line)
        w.lines += ["li s1, 1", "sw s1, DOORBELL(s0)", f"wait f{FLAGS['lookup']}, 1"]
        update = None
        if backward:
            # 5. gradients: headers and bag rows to each owner.
            for o in range(C):
                bags, _ = sub[c, o]
                if o != c:
                    w.dma(gm.Descriptor(
                        ("hbm", w.areas[f"send_head{o}"]),
                        ("remote", int(chips[o]), "hbm", work[o].areas[f"recv_head{c}"]),
                        (1 + len(bags) + int(p.occurrences[c, o]),), (1,), (1,),
                        FLAGS["grads"]))
                first = int(sum(len(sub[s, o][0]) for s in range(c)))
                for k, b in enumerate(bags):
                    dst_at = work[o].areas["own_grads"] + (first + k) * Dp
                    dst = ("hbm", dst_at) if o == c else ("remote", int(chips[o]), "hbm", dst_at)
                    w.dma(gm.Descriptor(("hbm", w.areas["grads"] + int(b) * D), dst, (D,),
                                        (1,), (1,), FLAGS["grads"]))
            expect = sum(1 + int(p.bags[s, c]) + int(p.occurrences[s, c])
                         for s in range(C) if s != c) + owner_bags[c] * D
            w.wait(FLAGS["grads"], expect)
            # 6. the owner's sum-then-apply, every source's sub-bags in rank order.
            own_ids, own_ends = [], []
            for s in range(C):
                bags, ends = sub[s, c]
                mine = np.flatnonzero(p.owners[s] == c)
                own_ids += ge.local(batches[s][0][mine], C).tolist()
                own_ends += (ends + (own_ends[-1] if own_ends else 0)).tolist()
            w.hbm[w.areas["own_ids"]] = np.array(own_ids, np.int64).astype(np.uint32)
            w.hbm[w.areas["own_ends"]] = np.array(own_ends, np.int64).astype(np.uint32)
            update = _item(op=1, optimizer=int(optimizer == "adagrad"), lr=lr_bits,
                           n_rows=shard_rows[c], n_ids=len(own_ids), n_bags=len(own_ends),
                           table=0, ids=w.areas["own_ids"], weights=0,
                           ends=w.areas["own_ends"], grads=w.areas["own_grads"], out=0,
                           flag=FLAGS["update"], per_line=per_line)
        w.items = (lookup, update)

    # SMEM: descriptors from 0, the update's item, then the SparseCore's item and doorbell.
    smem_words = _pow2(max(len(w.smem) * tc.DESCRIPTOR_WORDS for w in work)
                       + 2 * len(WORK_FIELDS) + 1, least=1024)
    if smem_words > _IMM:
        raise ValueError(f"the step needs {smem_words} SMEM words, more than an address "
                         f"reaches: use a smaller step")
    second = work_address(smem_words) - len(WORK_FIELDS)
    programs, hbm, smem = ([None] * topology.n_chips for _ in range(3))
    for c, w in enumerate(work):
        lines = [line.replace("DOORBELL", str(doorbell_address(smem_words)))
                 for line in w.lines]
        if backward:
            lines += [f"lw s2, {second + i}(s0)\nsw s2, {work_address(smem_words) + i}(s0)"
                      for i in range(len(WORK_FIELDS))]
            lines += ["li s1, 2", f"sw s1, {doorbell_address(smem_words)}(s0)",
                      f"wait f{FLAGS['update']}, 1"]
        programs[chips[c]] = "\n".join(lines + ["halt"])
        image = np.zeros(hbm_words, np.uint32)
        shard = bits[c::C]
        image[:shard.shape[0] * Dp].reshape(-1, Dp)[:, :D] = shard
        if optimizer == "adagrad":
            at = rows * Dp
            image[at:at + shard.shape[0] * Dp].reshape(-1, Dp)[:, :D] = state[c::C]
        for at, values in w.hbm.items():
            image[at:at + len(values)] = values
        hbm[chips[c]] = image
        words = np.zeros(smem_words, np.uint32)
        if w.smem:
            words[:len(w.smem) * tc.DESCRIPTOR_WORDS] = np.concatenate(w.smem)
        words[work_address(smem_words):doorbell_address(smem_words)] = w.items[0]
        if w.items[1] is not None:
            words[second:second + len(WORK_FIELDS)] = w.items[1]
        smem[chips[c]] = words
        w.areas["bags"] = len(batches[c][1]) - 1
    params = dict(chip, hbm_words=hbm_words, smem_words=smem_words, sparsecores=1,
                  sparsecore=tile)
    ici = ge.traffic(p, D, backward=backward).total
    return EmbeddingPlan(programs=programs, hbm=hbm, smem=smem, chip=params, plan=p,
                         chips=[int(x) for x in chips], width=D, row_words=Dp, rows=rows,
                         areas=_areas_by_chip(work, chips, topology.n_chips), ici_words=ici,
                         backward=backward)


def _areas_by_chip(work, chips, n):
    areas = [None] * n
    for c, w in zip(chips, work):
        areas[int(c)] = w.areas
    return areas
