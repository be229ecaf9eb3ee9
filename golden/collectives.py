"""Collectives on multi-chip tori (SPEC 4.8, 6): values in the chips' exact summation order,
the transfer schedule the chip programs run, and NCCL-style bandwidth accounting.

Kinds and shapes (SPEC 6), for C live chips
    ``all_reduce`` [C, n] -> [C, n], every row the sum; ``all_gather`` [C, n] -> [C, C*n],
    every row the concatenation; ``reduce_scatter`` [C, n] -> [C, n/C] (n % C == 0), row c
    the c-th slice of the sum; ``all_to_all`` [C, C, m] -> [C, C, m], ``out[d, c] =
    inputs[c, d]``. Rank r (row r) is the r-th live chip in chip-id order.

dtypes and numerics
    ``dtype="float32"``: inputs are float32 values or uint32 bit patterns; every sum is a
    chain of ``golden.arith.fp32_add`` in the order below, under ``numerics`` ("tpu", the
    default as in SPEC 3, or "ieee"). ``dtype="int32"``: int32 or uint32, wrapping adds.
    ``out`` has the dtype of ``inputs``. Gathers and all-to-all only move words: no flush,
    no NaN canonicalization. A sum starts from its first term, not from +0.0, so -0.0 on
    every chip sums to -0.0. fp32 addition is commutative bit for bit (canonical NaN, RNE
    signed zeros), so only the association of a chain matters, not operand order.

Rings
    A *ring dimension* partitions the live chips into rings of equal length. Without failed
    chips there is one per torus axis of size >= 2, in axis order; the ring of chip p along
    axis a is the chips whose coordinates equal p's except along a, by increasing coordinate
    a, and p's *position* in it is its coordinate. That holds for regular and twisted tori
    and for meshes alike, so their values are identical. With failed chips (one or more)
    there is one ring dimension: a single ring of every live chip, in boustrophedon order
    (axis 0 slowest; the sub-order of the later axes reversed whenever the earlier
    coordinates have an odd sum, so consecutive intact chips are neighbours).
    ``K`` is the number of ring dimensions, ``R_k`` their lengths, and ``key_k(r)`` rank r's
    position in dimension k; the keys fill the grid R_0 x ... x R_{K-1} once each, so the
    rings of dimension k are the ranks whose keys agree except in k.

Physical hops
    Direction ``d = +1`` moves from position i to i+1 (mod R), ``d = -1`` to i-1. A hop along
    torus axis a goes out of port ``+a`` (d = +1) or ``-a`` (d = -1) when that link leads to
    the receiver: every hop of a regular torus, including the two parallel links of a ring of
    2, one per direction. Any other hop (a mesh line's wrap, the wrap of a twisted axis, the
    live-chip ring) follows the routing tables, ``golden.topology.routing_tables(topology)``
    unless ``schedule`` is given ``tables``, which then carry every hop. (Destination-routed
    packets cannot use both links of a 2-ring; the port choice above needs the sender to pick
    its output port.)

Blocks
    The buffer (below) is cut into C *slices*, each slice into K *shards*, each shard into 2
    *halves*, always by one rule: part i of [lo, hi) cut into m parts is ``[lo + i*(hi-lo)//m,
    lo + (i+1)*(hi-lo)//m)``. Block (c, s, h) is half h of shard s of slice c. Half 0 travels
    in direction +1 and half 1 in direction -1 (the bidirectional ring); shard s visits the
    ring dimensions in the order ``o_s = (s, s+1, ..., s+K-1) mod K`` when reducing and in
    reverse when gathering, so that in each phase the K shards keep all K dimensions busy
    (one dimension at a time would reach only 1/K of the link bound).

    - all_reduce and reduce_scatter: the buffer is the chip's n-word vector, reduced in place;
      slice c is ``[c*n//C, (c+1)*n//C)`` and rank c ends up owning it.
    - all_gather: the buffer is the chip's C*n-word output row; slice c is ``[c*n, (c+1)*n)``,
      where rank c first copies its own input (a local copy, not a transfer).

Reduce-scatter schedule
    For shard s, phase p = 0..K-1 on dimension k = o_s[p] (ring length R), half h (d = +1 or
    -1) and ring step t = 0..R-2: every rank q, at position i = key_k(q), sends chunk
    ``j = (i - d*(t+1)) mod R`` to the rank at position i+d of its ring, which adds it word by
    word: ``own = add(received, own)``. Chunk j holds the (s, h) blocks of the slices c with
    ``key_k(c) == j`` and ``key_k'(c) == key_k'(q)`` for the dimensions k' in o_s[:p] already
    reduced. So, after phase p, a word of slice c is, at the rank owning it,
    ``acc = v[j+d]; acc = add(acc, v[j+2d]); ...; acc = add(acc, v[j])`` over the ring
    positions (mod R) with j = key_k(c), where v are the ring members' values after phase p-1
    (the inputs before phase 0). Example, ring 1x4, d = +1, chunk 0: ``((x1 + x2) + x3) + x0``.
    Example, 2x2, slice c = (1, 0), chips x(a, b): shard 0 (x then y) gives
    ``(x(0,1) + x(1,1)) + (x(0,0) + x(1,0))``, shard 1 (y then x) ``(x(0,1) + x(0,0)) +
    (x(1,1) + x(1,0))``, which can round differently.

All-gather schedule
    For shard s, phase p on dimension k = reversed(o_s)[p], half h, step t = 0..R-2: rank q at
    position i sends chunk ``j = (i - d*t) mod R`` to position i+d, which copies it. Chunk j
    holds the (s, h) blocks of the slices c with ``key_k(c) == j`` and ``key_k'(c) ==
    key_k'(q)`` for the dimensions k' in reversed(o_s)[p+1:] not yet gathered.

All-reduce schedule
    Reduce-scatter, then all-gather of the same blocks (each gathers the dimensions in
    reverse). The result is the reduce-scatter value of each word, on every rank.

All-to-all schedule
    Copies only; rank c copies ``inputs[c, c]`` locally. A rank's all-to-all buffer is its
    send buffer, words ``[0, C*m)`` (the flattened [C, m] input: slot d, ``[d*m, (d+1)*m)``,
    is for rank d), its receive buffer ``[C*m, 2*C*m)`` (slot c receives from rank c), and
    relay areas ``[(2+p)*C*m, (3+p)*C*m)`` of C slots each, p = 0..K-2.

    *By dimensions*, with K >= 2 ring dimensions of 3 or more chips each and no failed
    chip (on rings of two, relaying cost more than it saved: a 2x2's all-to-all of 4 KiB
    took 795 cycles by dimensions against 636 direct, of 16 KiB 2,381 against 2,229): the
    data crosses the
    torus one ring dimension at a time, as the reduce's shards do, so that no packet turns
    in a router (the routers saturate at about half their links when the 15 flows of a
    4x4's direct all-to-all mix in every one). Each block is cut into K shards by the block
    rule; shard s visits the dimensions in the order o_s (above), phase p moving it along
    o_s[p] to the ring member whose position there is the destination's. A block skips a
    phase whose dimension it need not cross. Phase p is step p. A move reads the shard where
    it is: the send buffer's slot d before its first move, else the relay area of its last
    move, slot ``key^-1(u)`` where u takes the source's positions on the dimensions o_s[:p'+1]
    already crossed and the destination's on the others (so every holder's C slots are
    distinct). It writes the receive buffer's slot c if it is the shard's last move, else
    the relay area p.

    *Direct*, otherwise: sends over the routing tables.
    Without failed chips, each step sends every chip p's block for chip (p + v) mod dims, for
    one nonzero offset vector v (coordinates wrap); with failed chips, rank r's block for
    rank (r + t) mod C, for one shift t. The offsets (shifts) are taken in row-major order
    over the grid of ``dims`` (1 to C - 1), each followed by its opposite, -v mod dims
    (C - t): a chip's network ports take its pushes in turn, so the two that leave together
    go opposite ways round, and arrive on opposite inputs (which the routers eject apart).
    Send slot d goes to the receiver's receive slot c.

Steps
    Each reduce or gather phase lasts ``max(R_k) - 1`` steps; ring step t of phase p is step
    ``p*(max(R_k) - 1) + t`` (all-reduce's gather phases follow its K reduce phases). No
    transfer in a step writes a word that another transfer of the same step reads or writes,
    so the transfers of one step may run in any order or all at once.

Bandwidth (nccl-tests definitions, bytes per cycle)
    S (``message_bytes``): all_reduce 4n, reduce_scatter 4n (its input), all_gather 4Cn (its
    output), all_to_all 4Cm (what a rank sends, its own block included). algbw = S / cycles;
    busbw = algbw * 2(C-1)/C (all_reduce) or (C-1)/C (the others).

Link-bandwidth bound on busbw (``bus_bound``), B = link bytes per cycle per direction
    - reduce_scatter, all_gather: every word must cross a link at least C-1 times (a slice
      needs one message from each of the C-1 other chips; a gathered word must reach C-1
      chips), so the links carry >= (C-1)S bytes; with L directed live links,
      cycles >= (C-1)S / (L*B) and busbw <= L*B/C. all_reduce: >= 2(C-1) transmissions per
      word (one-way gossip), cycles >= 2(C-1)S / (L*B), again busbw <= L*B/C. L/C is the
      ports per chip P on a torus: 2B on a ring, 4B on a 2-D torus, 6B on a 3-D one.
    - all_to_all: ``B * golden.topology.all_to_all_bound(topology)``, the fluid bound with every
      pair's traffic spread over its shortest paths: each rank sends (C-1)S/C bytes at most at
      that rate. On a 4x4 torus it is 15/8 B, i.e. cycles >= S/(2B), the bisection bound.
    The ring schedule meets the first bound on regular tori with K sides of R, latency aside:
    in phase p of a reduce-scatter each ring sends R-1 chunks of S/(K*R^(p+1)) bytes, half
    each way, in (R-1)*S / (2K*R^(p+1)*B) cycles; over the K phases that sums to
    S(C-1) / (2K*C*B), so busbw = 2K*B = P*B (all-gather and all-reduce alike). Unequal
    sides leave some links idle part of the time. With failed chips the one live-chip ring
    reaches at most 2B, less where its routed hops share links with its other hops.

Cost models
    ``alpha_beta_cycles``: lockstep steps, each ``alpha`` plus its busiest directed link's
    bytes / B. ``pipelined_cycles`` (``golden.collective_cost``, re-exported here): the chip
    programs' pieces, issue, ports, links and reduce, for any number of chunks.
"""

import functools
import itertools
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from . import arith
from .collective_cost import WORD_BYTES, CostParams, pipelined_cycles
from .formats import check_numerics
from .topology import Topology, all_to_all_bound, route, routing_tables, torus

__all__ = ["KINDS", "DTYPES", "WORD_BYTES", "Transfer", "collective", "schedule",
           "link_loads", "message_bytes", "bus_factor", "bandwidth", "bus_bound",
           "alpha_beta_cycles", "CostParams", "pipelined_cycles"]

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
DTYPES = ("float32", "int32")


@dataclass(frozen=True)
class Transfer:
    """One message of a schedule: ``src`` pushes words to ``dst``.

    ``step``: transfers of one step may run at once. ``links``: the directed links crossed,
    as ``(chip, out_port)`` in order. ``axis``/``direction``: the torus axis and direction
    (+1/-1) of a ring hop; axis -1 for the live-chip ring; direction 0 for an all-to-all,
    whose axis is its move's by dimensions, -1 direct. ``shard``: the shard (0 for a direct
    all-to-all). ``op``: "reduce" (the receiver adds the words
    into its own) or "copy". ``src_ranges``/``dst_ranges``: ``(start, stop)`` word ranges of
    the sender's and receiver's buffers, in order, of equal total length.
    """
    step: int
    src: int
    dst: int
    links: tuple
    axis: int
    direction: int
    shard: int
    op: str
    src_ranges: tuple
    dst_ranges: tuple

    @property
    def words(self):
        return sum(b - a for a, b in self.src_ranges)


@dataclass(frozen=True, eq=False)
class _Plan:
    """Ring dimensions: ``chips[r]`` is rank r's chip, ``axes[k]`` dimension k's torus axis
    (-1: the live-chip ring), ``key[r, k]`` rank r's position, ``grid[key] = r``."""
    chips: np.ndarray
    axes: tuple
    key: np.ndarray
    grid: np.ndarray


def _topology(topology):
    if isinstance(topology, str):
        return torus(topology)
    if not isinstance(topology, Topology):
        raise ValueError(f"topology must be a golden.topology.Topology or a shape such as "
                         f"'4x4', not {type(topology).__name__}")
    if topology.alive.sum() < 2:
        raise ValueError(f"{topology!r} has fewer than 2 live chips: nothing to communicate")
    return topology


def _kind(kind):
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    return kind


def _snake(dims):
    """Boustrophedon order of the coordinates of ``dims``: consecutive ones are neighbours."""
    if not dims:
        return [()]
    rest = _snake(dims[1:])
    return [(x,) + c for x in range(dims[0]) for c in (rest if x % 2 == 0 else rest[::-1])]


@functools.lru_cache(maxsize=32)
def _plan(topology):
    if topology.failed:
        order = [topology.chip(c) for c in _snake(topology.dims)]
        order = [c for c in order if topology.alive[c]]
        chips = np.flatnonzero(topology.alive)
        rank = {int(c): r for r, c in enumerate(chips)}
        grid = np.array([rank[c] for c in order])
        key = np.argsort(grid)[:, None]
        return _Plan(chips, (-1,), key, grid)
    axes = tuple(a for a, n in enumerate(topology.dims) if n >= 2)
    key = topology.coords[:, list(axes)]
    grid = np.arange(topology.n_chips).reshape([topology.dims[a] for a in axes])
    return _Plan(np.arange(topology.n_chips), axes, key, grid)


def _cut(lo, hi, parts):
    """[..., parts + 1] boundaries of ``[lo, hi)`` cut into ``parts`` (module docstring)."""
    lo, hi = np.asarray(lo)[..., None], np.asarray(hi)[..., None]
    return lo + np.arange(parts + 1) * (hi - lo) // parts


def _blocks(slice_lo, slice_hi, shards):
    """``(lo, hi)``, each int [C, shards, 2]: the word range of block (c, s, h)."""
    s = _cut(slice_lo, slice_hi, shards)
    h = _cut(s[:, :-1], s[:, 1:], 2)
    return h[..., :-1], h[..., 1:]


def _slices(kind, n, chips):
    if kind == "all_gather":
        lo = np.arange(chips) * n
        return lo, lo + n
    bounds = _cut(0, n, chips)
    return bounds[:-1], bounds[1:]


# ------------------------------------------------------------------------------ values

def _check_inputs(kind, inputs, chips, dtype):
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    x = np.asarray(inputs)
    allowed = (np.float32, np.uint32) if dtype == "float32" else (np.int32, np.uint32)
    if x.dtype not in allowed:
        names = " or ".join(np.dtype(t).name for t in allowed)
        raise ValueError(f"dtype={dtype} inputs must be {names}, not {x.dtype}")
    _check_shape(kind, x.shape, chips)
    return x


def _check_shape(kind, shape, chips):
    shape = tuple(shape)
    want = 3 if kind == "all_to_all" else 2
    if len(shape) != want or shape[0] != chips or (want == 3 and shape[1] != chips) or \
            shape[-1] < 1:
        form = "[C, C, m]" if want == 3 else "[C, n]"
        raise ValueError(f"{kind} inputs must be {form} with C = {chips} live chips and "
                         f"{'m' if want == 3 else 'n'} >= 1, not {list(shape)}")
    if kind == "reduce_scatter" and shape[1] % chips:
        raise ValueError(f"reduce_scatter needs n divisible by C: n = {shape[1]}, C = {chips}")
    return shape


def _fold(values, axis, j, sign, add):
    """Each word's ring fold along ``axis``: v[j+d], v[j+2d], ..., v[j] (module docstring),
    broadcast back along the axis (only the owner's copy is used later)."""
    ring = values.shape[axis]
    index_shape = [1] * values.ndim
    index_shape[-1] = j.size

    def at(i):
        idx = ((j + sign * i) % ring).reshape(index_shape)
        return np.take_along_axis(values, idx, axis=axis)

    acc = at(1)
    for i in range(2, ring + 1):
        acc = add(acc, at(i))
    return np.broadcast_to(acc, values.shape)


def _reduce(bits, plan, add):
    """[n] the reduce-scatter value of every word (the all-reduce result)."""
    chips, n = bits.shape
    shards = len(plan.axes)
    lo, hi = _blocks(*_slices("all_reduce", n, chips), shards)
    labels = np.indices(lo.shape).reshape(3, -1)
    owner, shard, half = (np.repeat(lab, (hi - lo).ravel()) for lab in labels)
    values = bits[plan.grid]
    out = np.empty(n, dtype=np.uint32)
    for s, h in itertools.product(range(shards), range(2)):
        sel = np.flatnonzero((shard == s) & (half == h))
        if not sel.size:
            continue
        sub, keys = values[..., sel], plan.key[owner[sel]]
        for p in range(shards):
            k = (s + p) % shards
            sub = _fold(sub, k, keys[:, k], 1 - 2 * h, add)
        out[sel] = sub[(0,) * shards]
    return out


def collective(kind, inputs, *, topology, dtype="float32", numerics="tpu"):
    """A collective's result, bit for bit what the chips compute (module docstring).

    Parameters
    ----------
    kind : "all_reduce", "all_gather", "reduce_scatter" or "all_to_all"
    inputs : [C, n] (all_to_all [C, C, m]); float32 or uint32 for dtype float32, int32 or
        uint32 for int32; row r belongs to the r-th live chip
    topology : golden.topology.Topology, or a shape such as "4x4"
    dtype : "float32" or "int32"
    numerics : "tpu" or "ieee", for float32 sums

    Returns
    -------
    np.ndarray with the dtype of ``inputs``: [C, n], [C, C*n], [C, n/C] or [C, C, m]
    """
    kind = _kind(kind)
    topology = _topology(topology)
    check_numerics(numerics)
    chips = int(topology.alive.sum())
    x = _check_inputs(kind, inputs, chips, dtype)
    bits = x.view(np.uint32)
    if kind == "all_to_all":
        out = bits.transpose(1, 0, 2).copy()
    elif kind == "all_gather":
        out = np.tile(bits.reshape(1, -1), (chips, 1))
    else:
        if dtype == "float32":
            def add(a, b):
                return arith.fp32_add(a, b, numerics=numerics)
        else:
            def add(a, b):
                return np.add(a, b, dtype=np.uint32)   # wraps: two's complement
        total = _reduce(bits, _plan(topology), add)
        out = np.tile(total, (chips, 1)) if kind == "all_reduce" else \
            total.reshape(chips, -1)
    return out.view(x.dtype)


# ------------------------------------------------------------------------------ schedule

class _Hops:
    """Directed links of a hop: the ring-direction port when it leads there, else a route."""

    def __init__(self, topology, tables):
        self.topology, self.tables, self.routes = topology, tables, {}
        self.direct = tables is None

    def __call__(self, src, dst, port=None):
        nb = self.topology.neighbor
        if self.direct and port is not None and nb[src, port] == dst:
            return ((src, port),)
        if (src, dst) not in self.routes:
            if self.tables is None:
                self.tables = routing_tables(self.topology)
            self.routes[src, dst] = tuple(
                (c, p) for c, p, _ in route(self.topology, self.tables, src, dst))
        return self.routes[src, dst]


def _merge(lo, hi):
    ranges = []
    for a, b in sorted(zip(lo.tolist(), hi.tolist())):
        if a == b:
            continue
        if ranges and ranges[-1][1] == a:
            ranges[-1] = (ranges[-1][0], b)
        else:
            ranges.append((a, b))
    return tuple(ranges)


def _ring_transfers(plan, hops, lo, hi, *, gather, first_step):
    shards, rings = len(plan.axes), plan.grid.shape
    span = max(rings) - 1
    out = []
    for s in range(shards):
        order = [(s + p) % shards for p in range(shards)]
        if gather:
            order = order[::-1]
        for p, k in enumerate(order):
            fixed = order[p + 1:] if gather else order[:p]
            ring, axis = rings[k], plan.axes[k]
            for h, t in itertools.product(range(2), range(ring - 1)):
                d = 1 - 2 * h
                port = None if axis < 0 else 2 * axis + h
                for q in range(plan.key.shape[0]):
                    i = plan.key[q, k]
                    j = (i - d * (t if gather else t + 1)) % ring
                    owners = (plan.key[:, k] == j) & \
                        (plan.key[:, fixed] == plan.key[q, fixed]).all(1)
                    ranges = _merge(lo[owners, s, h], hi[owners, s, h])
                    if not ranges:
                        continue
                    nxt = plan.key[q].copy()
                    nxt[k] = (i + d) % ring
                    src, dst = int(plan.chips[q]), int(plan.chips[plan.grid[tuple(nxt)]])
                    out.append(Transfer(first_step + p * span + t, src, dst,
                                        hops(src, dst, port), axis, d, s,
                                        "copy" if gather else "reduce", ranges, ranges))
    return out


def _opposites_together(shifts, negate):
    """``shifts`` in order, each followed at once by its opposite ``negate(shift)`` (unless
    that came earlier or is itself)."""
    out = []
    for shift in shifts:
        for s in (shift, negate(shift)):
            if s not in out:
                out.append(s)
    return out


def _all_to_all_transfers(topology, plan, hops, m):
    chips = plan.chips.size
    if topology.failed:
        shifts = _opposites_together(range(1, chips), lambda t: chips - t)
        pairs = [[(r, (r + t) % chips) for r in range(chips)] for t in shifts]
    else:
        dims = np.array(topology.dims)
        offsets = _opposites_together(list(itertools.product(*map(range, dims)))[1:],
                                      lambda v: tuple(int(x) for x in -np.array(v) % dims))
        coords = topology.coords
        pairs = [list(zip(range(chips), np.ravel_multi_index(
            tuple(((coords + v) % dims).T), topology.dims).tolist())) for v in offsets]
    out = []
    receive = chips * m
    for step, group in enumerate(pairs):
        for c, d in group:
            src, dst = int(plan.chips[c]), int(plan.chips[d])
            out.append(Transfer(step, src, dst, hops(src, dst), -1, 0, 0, "copy",
                                ((d * m, (d + 1) * m),),
                                ((receive + c * m, receive + (c + 1) * m),)))
    return out


def _pair_ranges(items):
    """``(src ranges, dst ranges)`` of ``(src, dst, words)`` moves, sorted by source, with
    moves that continue each other on both sides merged."""
    src, dst = [], []
    for s, d, n in sorted(items):
        if src and src[-1][1] == s and dst[-1][1] == d:
            src[-1], dst[-1] = (src[-1][0], s + n), (dst[-1][0], d + n)
        else:
            src.append((s, s + n))
            dst.append((d, d + n))
    return tuple(src), tuple(dst)


def _all_to_all_by_dimensions(plan, hops, m):
    """The all-to-all one ring dimension at a time (module docstring), sorted by step."""
    chips, dims = plan.chips.size, len(plan.axes)
    shape = plan.grid.shape
    cm = chips * m
    bounds = [s * m // dims for s in range(dims + 1)]
    moves = defaultdict(list)        # (phase, shard, holder, next) -> [(src, dst, words)]
    for s in range(dims):
        lo, words = bounds[s], bounds[s + 1] - bounds[s]
        if not words:
            continue
        order = [(s + p) % dims for p in range(dims)]
        for c in range(chips):
            for d in range(chips):
                kc, kd = plan.key[c], plan.key[d]
                phases = [p for p in range(dims) if kc[order[p]] != kd[order[p]]]
                holder, src = c, d * m + lo                  # the send buffer's slot d
                for i, p in enumerate(phases):
                    key = plan.key[holder].copy()
                    key[order[p]] = kd[order[p]]
                    nxt = int(plan.grid[tuple(key)])
                    if i + 1 == len(phases):
                        dst = cm + c * m + lo                # the receive buffer's slot c
                    else:
                        slot = kd.copy()
                        slot[order[:p + 1]] = kc[order[:p + 1]]
                        dst = (2 + p) * cm + int(np.ravel_multi_index(tuple(slot), shape)) * m \
                            + lo
                    moves[p, s, holder, nxt].append((src, dst, words))
                    holder, src = nxt, dst
    out = []
    for (p, s, holder, nxt), items in sorted(moves.items()):
        src, dst = int(plan.chips[holder]), int(plan.chips[nxt])
        src_ranges, dst_ranges = _pair_ranges(items)
        out.append(Transfer(p, src, dst, hops(src, dst), plan.axes[(s + p) % dims], 0, s,
                            "copy", src_ranges, dst_ranges))
    return out


def schedule(kind, topology, shape, *, tables=None):
    """The transfers the chips run for a collective (module docstring), by step.

    Parameters
    ----------
    kind : one of ``KINDS``
    topology : Topology or a shape such as "4x4"
    shape : the inputs' shape, [C, n] or [C, C, m]
    tables : None (ring hops use their direction's port where it leads to the receiver,
        other hops ``routing_tables(topology)``), or RoutingTables that carry every hop

    Returns
    -------
    list of :class:`Transfer`, sorted by step (stable otherwise)
    """
    kind = _kind(kind)
    topology = _topology(topology)
    chips = int(topology.alive.sum())
    shape = _check_shape(kind, shape, chips)
    plan, hops = _plan(topology), _Hops(topology, tables)
    if kind == "all_to_all":
        if not topology.failed and len(plan.axes) >= 2 and min(plan.grid.shape) >= 3:
            return _all_to_all_by_dimensions(plan, hops, shape[2])
        return _all_to_all_transfers(topology, plan, hops, shape[2])
    shards = len(plan.axes)
    lo, hi = _blocks(*_slices(kind, shape[1], chips), shards)
    out = []
    if kind != "all_gather":
        out += _ring_transfers(plan, hops, lo, hi, gather=False, first_step=0)
    if kind != "reduce_scatter":
        first = shards * (max(plan.grid.shape) - 1) if kind == "all_reduce" else 0
        out += _ring_transfers(plan, hops, lo, hi, gather=True, first_step=first)
    return sorted(out, key=lambda tr: tr.step)


def link_loads(transfers, topology):
    """Bytes over every directed link: float [n_chips, 2D], indexed by (chip, out_port)."""
    topology = _topology(topology)
    load = np.zeros((topology.n_chips, topology.n_ports))
    for tr in transfers:
        for chip, port in tr.links:
            load[chip, port] += tr.words * WORD_BYTES
    return load


# ------------------------------------------------------------------------------ bandwidth

def message_bytes(kind, shape):
    """nccl-tests' size S in bytes for inputs of ``shape`` (module docstring)."""
    kind = _kind(kind)
    shape = tuple(shape)
    if len(shape) != (3 if kind == "all_to_all" else 2) or min(shape) < 1:
        raise ValueError(f"{kind} inputs have shape [C, n] (all_to_all [C, C, m]), "
                         f"not {list(shape)}")
    chips, n = shape[0], shape[-1]
    return WORD_BYTES * n * (chips if kind in ("all_gather", "all_to_all") else 1)


def bus_factor(kind, chips):
    """busbw / algbw: 2(C-1)/C for all_reduce, (C-1)/C for the others."""
    kind = _kind(kind)
    if not isinstance(chips, (int, np.integer)) or chips < 2:
        raise ValueError(f"chips must be an int >= 2, not {chips!r}")
    return (2 if kind == "all_reduce" else 1) * (chips - 1) / chips


def bandwidth(kind, shape, cycles):
    """``(algbw, busbw)`` in bytes per cycle for a run of ``cycles`` on inputs of ``shape``."""
    if not isinstance(cycles, (int, float, np.integer, np.floating)) or not cycles > 0:
        raise ValueError(f"cycles must be a positive number, not {cycles!r}")
    algbw = message_bytes(kind, shape) / cycles
    return algbw, algbw * bus_factor(kind, shape[0])


def _positive(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not value > 0:
        raise ValueError(f"{name} must be a positive number, not {value!r}")
    return float(value)


def bus_bound(kind, topology, link_bytes_per_cycle):
    """The link-bandwidth bound on busbw, bytes per cycle (derivation: module docstring).

    Parameters
    ----------
    kind : one of ``KINDS``
    topology : Topology or a shape such as "4x4"
    link_bytes_per_cycle : B, one link's bandwidth in one direction
    """
    kind = _kind(kind)
    topology = _topology(topology)
    b = _positive(link_bytes_per_cycle, "link_bytes_per_cycle")
    if kind == "all_to_all":
        return b * all_to_all_bound(topology)
    return b * int((topology.ocs >= 0).sum()) / int(topology.alive.sum())


def alpha_beta_cycles(transfers, topology, *, alpha, link_bytes_per_cycle):
    """Lockstep cost: the sum over steps of ``alpha`` + the busiest link's bytes / B."""
    topology = _topology(topology)
    b = _positive(link_bytes_per_cycle, "link_bytes_per_cycle")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)) \
            or alpha < 0:
        raise ValueError(f"alpha must be a number >= 0, not {alpha!r}")
    steps = {}
    for tr in transfers:
        steps.setdefault(tr.step, []).append(tr)
    return sum(alpha + link_loads(group, topology).max() / b for group in steps.values())
