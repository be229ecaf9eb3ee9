"""Collective programs: all-reduce, all-gather, reduce-scatter and all-to-all as one
TensorCore program per chip, over remote-push DMAs and sync flags (SPEC 4.3, 4.7, 4.8).

Every transfer of ``golden.collectives.schedule(kind, topology, shape)`` becomes remote
pushes from its sender to its receiver; the receiver of a reduce transfer adds the words
into its own with the VPU. The values are then bit for bit
``golden.collectives.collective``'s (its summation order is the schedule's), which
``golden.system.run_system`` checks on the instruction-set simulator.

Ranks and chips
    Rank r is the r-th live chip in chip-id order (``golden.collectives``); programs, images
    and flags are per chip id, and a failed chip has no program.

VMEM (line ``l``, lane ``j`` is word ``l * lanes + j``), per chip
    - all_reduce, reduce_scatter: the chip's vector, reduced in place, laid out by
      :class:`LineLayout`: the schedule's blocks (slice, shard, half) in order, each from
      a group boundary (``align`` lines, 8 by default), so that any n works (the VPU adds
      whole groups). A block of L words is sent as ceil(L / lanes) lines and takes a slot of
      whole groups; the rest of its slot is padding, which the adds carry lane by lane and
      the result never reads, so no padding enters a sum of the vector's words, and no
      padding line is sent. Whole groups because a ``vld``/``vst`` moves 8 lines: a line
      left over costs as much as a group. When every block is whole groups (n a multiple
      of C * K * 2 * lanes * align, say) the layout is words ``[0, n)``;
    - all_gather: words ``[0, C*n)`` the output row, the chip's own input already in its
      slice ``[r*n, (r+1)*n)`` in the initial image (that is the local copy);
    - all_to_all: words ``[0, C*m)`` the send buffer (``inputs[r]`` flattened), then from
      the next line boundary ``R0`` the receive buffer ``[R0, R0 + C*m)``, where block ``c``
      (``[R0 + c*m, R0 + (c+1)*m)``) receives ``inputs[c, r]``; the own block is placed by
      the initial image. An all-to-all by dimensions has its relay areas after it, C*m
      words each (``golden.collectives``' buffer words from C*m on are at R0 + w - C*m).
    - Reduce receives land in a staging area after the buffer, from the next line boundary:
      one slot per received transfer piece, in the order the program consumes them, never
      reused (so a slot is never written while it is read). A slot holds the piece's
      ranges, each in whole groups of ``align`` lines (a reduce of a range's last group
      reads the rest of its group, which nothing writes).

Flags
    Flag 0 counts the words this chip has pushed (every push names ``sent_flag`` 0). Flag
    ``1 + t*chunks + k`` counts the words received in step t, piece k (a direct all-to-all:
    flag 1 counts every receive). ``n_flags`` is what the plan uses rounded up to a power
    of two, at least 16, at most 128.

Pieces and pipelining
    ``chunks`` cuts every range of a transfer into ``chunks`` pieces by the schedule's rule
    (part i of [lo, hi) is ``[lo + i*L//chunks, lo + (i+1)*L//chunks)`` counted in groups of
    ``align`` lines for a reduce, so pieces stay group-aligned, the last group cut at hi,
    and in words for a copy; empty pieces are dropped). Piece k of a step is one receive
    event: wait for its flag to reach the piece's words, then reduce. A send is issued as
    soon as every receive event that writes a word it reads has been done (and no sooner):
    with chunks = 1 that is lockstep (step t+1's sends follow step t's reduce); with more,
    piece k of step t+1 leaves as soon as piece k of step t is reduced, while the other
    pieces are still in flight.

The program of a chip
    - Sends: one descriptor record (12 SMEM words) per run of equal-length, equally
      spaced ranges of a piece: a 2-D push (counts ``(length, ranges)``). Three or more
      consecutive records are issued by a one-bundle loop.
    - Receive event: ``wait f0`` for every push issued so far when the event's stores would
      overwrite words an issued push may still read (a flag counts words, so only the total
      covers a given push); ``wait f<event>, words``; then per run of staged ranges a loop of
      2 bundles per 8 lines, ``vld`` staged, ``vld`` own, ``own = add(received, own)``
      (``add`` for float32, ``iadd`` for int32), ``vst`` own (stride 1), a range's last
      group padded to ``align`` lines, and with ``align`` below 8, 2 bundles per leftover
      line (``vld``/``vst`` stride 0: one line; looped when there are 3 or more). A ``vst``
      writes only the receive's own ranges and their padding.
    - The end: ``wait f0`` for all words pushed (the sources stay valid until they have
      left), ``halt``. Every receive has been waited for, so the chip's VMEM is final.

Scalar registers: s4/s5 the staged and own line, s6/s11/s7 the counts of the 8-line loop,
the leftover-line loop and the ranges loop, s8/s9 the descriptor address and count of a
send loop, s10 a large wait operand.
"""

from collections import defaultdict
from dataclasses import dataclass, replace

import numpy as np

from golden import collectives as gc
from golden.collective_cost import (CostParams, deals_by_direction, dealing_order, overlap,
                                    piece_range, pipelined_cycles, receive_event, send_order,
                                    waits_once)
from golden import memory as golden_memory
from golden import tensorcore as tc
from golden.vpu import SUBLANES

__all__ = ["CollectivePlan", "LineLayout", "plan_collective", "vmem_transfers", "choose_chunks",
           "AUTO_CHUNKS"]

#: The flag every push counts its words on at the sender.
SENT_FLAG = 0
_MIN_FLAGS = 16
_IMM = 1 << 15           # signed 16-bit immediates: |value| < 2**15


@dataclass(frozen=True)
class CollectivePlan:
    """A planned collective: per chip id the program and initial images (module docstring).

    ``programs`` (assembly text, None for a failed chip), ``vmem`` (flat uint32 images of
    ``vmem_lines * lanes`` words, a failed chip's zero), ``smem`` (flat uint32 images of
    ``smem_words`` words); ``n_flags`` the flags the programs use (a power of two, >= 16);
    ``imem_bundles`` the longest program's bundles, ``bundles`` each chip's (0 for a failed
    chip); ``kind``, ``dtype``, ``shape`` (the inputs'), ``chips`` (rank -> chip id),
    ``lanes``, ``chunks``, ``recv_base`` (all_to_all's receive buffer word, else 0), and
    ``transfers``, the ``golden.collectives`` schedule the programs run.
    """
    kind: str
    dtype: str
    shape: tuple
    chips: tuple
    lanes: int
    chunks: int
    programs: list
    vmem: list
    smem: list
    n_flags: int
    vmem_lines: int
    imem_bundles: int
    smem_words: int
    bundles: tuple
    recv_base: int
    transfers: tuple
    layout: "LineLayout" = None
    predicted_cycles: float = None

    def result(self, vmems):
        """The collective's output, uint32, shaped as ``golden.collectives.collective``'s,
        from the final flat VMEM images of every chip id (failed chips' are ignored)."""
        if not isinstance(vmems, (list, tuple)) or len(vmems) != len(self.programs):
            raise ValueError(f"vmems must be a list of {len(self.programs)} images, one per "
                             f"chip id")
        rows = []
        c, last = len(self.chips), self.shape[-1]
        for rank, chip in enumerate(self.chips):
            v = np.asarray(vmems[chip])
            if v.dtype != np.uint32 or v.ndim != 1:
                raise ValueError(f"vmems[{chip}] must be a flat uint32 array")
            if self.kind == "all_reduce":
                rows.append(v[self.layout.index])
            elif self.kind == "reduce_scatter":
                rows.append(v[self.layout.index[rank * last // c:(rank + 1) * last // c]])
            elif self.kind == "all_gather":
                rows.append(v[:c * last])
            else:
                rows.append(v[self.recv_base:self.recv_base + c * last].reshape(c, last))
        return np.array(rows, np.uint32)


@dataclass(frozen=True)
class _Piece:
    """Piece ``chunk`` of a transfer: its receive event ``key`` and ``flag``, sender,
    receiver, op, ``parts``, ``(src, dst, words)`` in the buffers (word addresses), and the
    torus ``port`` its first hop leaves by."""
    key: tuple
    flag: int
    src: int
    dst: int
    op: str
    parts: tuple
    chunk: int = 0
    port: int = 0

    @property
    def words(self):
        return sum(n for _, _, n in self.parts)


def _runs(items):
    """Group ``(a, b, length)`` items into runs ``(a, b, length, count, step_a, step_b)``:
    consecutive items of equal length whose ``a`` and ``b`` advance by constant steps."""
    runs = []
    for a, b, n in items:
        if runs:
            a0, b0, n0, count, sa, sb = runs[-1]
            if n == n0:
                if count == 1:
                    runs[-1] = (a0, b0, n0, 2, a - a0, b - b0)
                    continue
                if a == a0 + count * sa and b == b0 + count * sb:
                    runs[-1] = (a0, b0, n0, count + 1, sa, sb)
                    continue
        runs.append((a, b, n, 1, 0, 0))
    return runs


def _split(run, limit):
    """A run ``(a, b, n, count, step_a, step_b)`` as descriptor shapes ``(a, b, counts,
    a_strides, b_strides)`` of at most ``limit`` words each (None: the whole run): long
    rows cut into pieces, or groups of whole rows."""
    a, b, n, count, sa, sb = run

    def rows(first, k):
        if k == 1:
            return (a + first * sa, b + first * sb, (n,), (1,), (1,))
        return (a + first * sa, b + first * sb, (n, k), (1, sa), (1, sb))

    if limit is None or n * count <= limit:
        yield rows(0, count)
    elif n > limit:
        for r in range(count):
            for lo in range(0, n, limit):
                yield (a + r * sa + lo, b + r * sb + lo, (min(limit, n - lo),), (1,), (1,))
    else:
        per = limit // n
        for first in range(0, count, per):
            yield rows(first, min(per, count - first))


@dataclass(frozen=True)
class LineLayout:
    """Where a reduce's buffer words sit in VMEM: every block of ``golden.collectives``
    (slice, shard, half) in a slot of whole groups of ``align`` lines, sent as its lines
    (module docstring).

    ``index[w]`` is the VMEM word of buffer word ``w``; ``words`` the padded buffer's words.
    With blocks of whole groups it is the identity. Block i is sent as VMEM words
    ``[padded_starts[i], padded_stops[i])`` (whole lines) in a slot that ends at
    ``padded_starts[i+1]``. The padding shares groups with a block's last words, so the VPU
    adds it too, lane by lane: its sums land in the padding and never in a buffer word,
    and the result reads only ``index``."""
    index: np.ndarray
    words: int
    starts: np.ndarray      # buffer word of each non-empty block, ascending
    stops: np.ndarray
    padded_starts: np.ndarray
    padded_stops: np.ndarray

    @classmethod
    def of(cls, kind, n, chips, shards, lanes, align=1):
        lo, hi = gc._blocks(*gc._slices(kind, n, chips), shards)
        lo, hi = lo.ravel(), hi.ravel()
        keep = hi > lo
        lo, hi = lo[keep], hi[keep]
        sizes = -(-(hi - lo) // lanes) * lanes
        slot = lanes * align
        padded = np.concatenate([[0], np.cumsum(-(-sizes // slot) * slot)])
        index = np.concatenate([padded[i] + np.arange(hi[i] - lo[i]) for i in range(lo.size)])
        return cls(index=index.astype(np.int64), words=int(padded[-1]), starts=lo, stops=hi,
                   padded_starts=padded[:-1], padded_stops=padded[:-1] + sizes)

    @property
    def identity(self):
        return self.words == self.index.size

    def ranges(self, lo, hi):
        """The VMEM ranges of the buffer range ``[lo, hi)``, which starts and stops at
        block boundaries: the lines of the blocks it holds, a range for each run of blocks
        with no padding between them."""
        first = int(np.searchsorted(self.starts, lo))
        last = int(np.searchsorted(self.stops, hi, side="right")) - 1
        assert self.starts[first] == lo and self.stops[last] == hi, (lo, hi)
        found = []
        for start, stop in zip(self.padded_starts[first:last + 1].tolist(),
                               self.padded_stops[first:last + 1].tolist()):
            if found and found[-1][1] == start:
                found[-1] = (found[-1][0], stop)
            else:
                found.append((start, stop))
        return found

    def transfers(self, transfers):
        """``transfers`` with their ranges in VMEM words."""
        def moved(ranges):
            return tuple(r for lo, hi in ranges for r in self.ranges(lo, hi))
        return [replace(tr, src_ranges=moved(tr.src_ranges), dst_ranges=moved(tr.dst_ranges))
                for tr in transfers]


def vmem_transfers(kind, topology, shape, *, lanes, tables=None, align=SUBLANES):
    """``(transfers, layout)``: the ``golden.collectives.schedule`` of a collective with its
    ranges in VMEM words, as the programs move them (a reduce's by its :class:`LineLayout`
    of slots of ``align`` lines, else None: copies move words where the schedule puts
    them), for the cost model and the planner alike."""
    kind = gc._kind(kind)
    topology = gc._topology(topology)
    transfers = gc.schedule(kind, topology, shape, tables=tables)
    if kind not in ("all_reduce", "reduce_scatter"):
        return transfers, None
    chips = int(topology.alive.sum())
    layout = LineLayout.of(kind, shape[1], chips, len(gc._plan(topology).axes), lanes, align)
    return (transfers if layout.identity else layout.transfers(transfers)), layout


class _Writer:
    """One chip's program text and SMEM descriptor records."""

    def __init__(self, *, lanes, add_op, targets, push_words=None, push_ports=1,
                 by_direction=False, align=1):
        self.lanes, self.add_op, self.targets = lanes, add_op, targets
        self.align = align
        self.push_words, self.push_ports = push_words, push_ports
        self.by_direction = by_direction
        self.lines, self.records = [], []
        self.labels = 0
        self.pushed = 0              # words pushed so far (flag 0 with every push done)
        self.covered = 0             # pushed words a wait on flag 0 has covered
        self.outstanding = []        # source word ranges of the pushes not yet covered

    def emit(self, *ops, label=None):
        text = " | ".join(op for op in ops if op) or "nop"
        self.lines.append((f"{label}: " if label else "") + text)

    def label(self):
        self.labels += 1
        return f"L{self.labels}"

    def set_regs(self, pairs):
        """``reg = value`` for each pair, two registers a bundle (``lui``/``ori`` for values
        that do not fit a signed 16-bit immediate)."""
        first, second = [], []
        for reg, value in pairs:
            if -_IMM <= value < _IMM:
                first.append(f"li {reg}, {value}")
            else:
                first.append(f"lui {reg}, {value >> 16}")
                second.append(f"ori {reg}, {reg}, {value & 0xFFFF}")
        for ops in (first, second):
            for i in range(0, len(ops), 2):
                self.emit(*ops[i:i + 2])

    def operand(self, value):
        """A misc operand for ``value``: an immediate, or s10 loaded with it."""
        if value < _IMM:
            return str(value)
        self.set_regs([("s10", value)])
        return "s10"

    def wait_sent(self):
        """Wait until every push issued so far has read its source."""
        if self.pushed > self.covered:
            self.emit(f"wait f{SENT_FLAG}, {self.operand(self.pushed)}")
        self.covered, self.outstanding = self.pushed, []

    def send(self, pieces):
        """Issue the pushes of ``pieces`` (sent by this chip), one record per run, or with
        ``push_words`` one per at most that many words, in
        ``golden.collective_cost.dealing_order``: chunk by chunk, and within a chunk the
        pieces' records in turn (a chip with several push ports deals its pushes to them
        in turn, so pushes to different neighbours leave side by side)."""
        first = len(self.records)
        per_piece = []
        for piece in pieces:
            items = [(src, dst, n) for (src, _, n), dst in zip(piece.parts,
                                                                self.targets(piece))]
            per_piece.append([golden_memory.Descriptor(
                ("vmem", src), ("remote", piece.dst, "vmem", dst), counts, s_strides,
                d_strides, piece.flag, sent_flag=SENT_FLAG)
                for run in _runs(items)
                for src, dst, counts, s_strides, d_strides in _split(run, self.push_words)])
            self.pushed += piece.words
            self.outstanding += [(src, src + n) for src, _, n in piece.parts]
        self.records += dealing_order(
            per_piece, [piece.chunk for piece in pieces],
            ports=[piece.port for piece in pieces] if self.by_direction else None,
            push_ports=self.push_ports, dealt=first)
        records = len(self.records) - first
        words = tc.DESCRIPTOR_WORDS
        if records >= 3:
            self.set_regs([("s8", first * words), ("s9", records)])
            top = self.label()
            self.emit("dma s8", f"addi s8, s8, {words}", f"loop s9, {top}", label=top)
        else:
            for i in range(first, first + records):
                self.emit(f"dma {i * words}")

    def receive(self, pieces, flag):
        """Wait for the pieces of one receive event (flag ``flag``) and reduce them."""
        words = sum(p.words for p in pieces)
        reduce = [p for p in pieces if p.op == "reduce"]
        own = [(dst, dst + n) for p in reduce for _, dst, n in p.parts]
        if overlap(self.outstanding, own):
            self.wait_sent()
        self.emit(f"wait f{flag}, {self.operand(words)}")
        lanes = self.lanes
        for piece in reduce:
            # A part's last group is padded: its slot's padding follows it (LineLayout).
            items = [(stage // lanes, dst // lanes, -(-n // (lanes * self.align)) * self.align)
                     for (_, dst, n), stage in zip(piece.parts, self.targets(piece))]
            for run in _runs(items):
                self._reduce_run(*run)

    def _reduce_run(self, stage, own, lines, count, s_stage, s_own):
        """``own = add(staged, own)`` over ``count`` ranges of ``lines`` lines (a range at
        ``stage + i*s_stage``, ``own + i*s_own``): a loop of 2 bundles per 8 lines, then
        the leftover lines one at a time (2 bundles each, looped when 3 or more)."""
        groups, rest = divmod(lines, SUBLANES)
        add = f"{self.add_op} v3, v1, v2"
        line_loop = rest >= 3
        if count == 1 and groups <= 1 and not line_loop:
            # Straight-line code with absolute lines: no registers to set up.
            if groups:
                self.emit(f"vld v1, {stage}, 1")
                self.emit(f"vld v2, {own}, 1", add, f"vst v3, {own}, 1")
            for r in range(SUBLANES * groups, lines):
                self.emit(f"vld v1, {stage + r}, 0")
                self.emit(f"vld v2, {own + r}, 0", add, f"vst v3, {own + r}, 0")
            return
        resets = ([("s6", groups)] if groups else []) + ([("s11", rest)] if line_loop else [])
        self.set_regs([("s4", stage), ("s5", own)] + resets +
                      ([("s7", count)] if count > 1 else []))
        top = self.label()
        if groups:
            self.emit("vld v1, s4+0, 1", f"addi s4, s4, {SUBLANES}", label=top)
            self.emit("vld v2, s5+0, 1", add, "vst v3, s5+0, 1", f"addi s5, s5, {SUBLANES}",
                      f"loop s6, {top}")
        if line_loop:
            one = top if not groups else self.label()
            self.emit("vld v1, s4+0, 0", "addi s4, s4, 1", label=one)
            self.emit("vld v2, s5+0, 0", add, "vst v3, s5+0, 0", "addi s5, s5, 1",
                      f"loop s11, {one}")
        else:
            for r in range(rest):
                self.emit(f"vld v1, s4+{r}, 0", label=top if not groups and r == 0 else None)
                self.emit(f"vld v2, s5+{r}, 0", add, f"vst v3, s5+{r}, 0")
        if count > 1:
            done = SUBLANES * groups + (rest if line_loop else 0)
            self.emit(f"addi s4, s4, {s_stage - done}", f"addi s5, s5, {s_own - done}")
            ops = [f"li {reg}, {value}" for reg, value in resets]
            if len(ops) == 2:
                self.emit(*ops)
                ops = []
            self.emit(*ops, f"loop s7, {top}")

    def finish(self):
        self.wait_sent()
        self.emit("halt")
        return "\n".join(self.lines) + "\n"


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")
    return int(value)


#: The chunkings ``chunks="auto"`` weighs: one (lockstep) and the counts that cut a
#: transfer into 2 to 64 pieces by factors of 2 and 3.
AUTO_CHUNKS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
#: ``chunks="auto"`` keeps the fewest chunks whose predicted cycles are within this
#: fraction of the best: more pieces cost flags, SMEM and bundles for nothing.
AUTO_SLACK = 0.01


def choose_chunks(transfers, *, cost, most):
    """``(chunks, predicted cycles)``: the chunking of :data:`AUTO_CHUNKS` up to ``most``
    that ``golden.collective_cost.pipelined_cycles`` predicts fastest for ``transfers`` (in
    VMEM words, :func:`vmem_transfers`) on a chip of ``cost`` (a ``CostParams``), keeping
    the fewest chunks within :data:`AUTO_SLACK` of the best."""
    if isinstance(cost, bool) or not isinstance(cost, CostParams):
        raise ValueError(f"chunks='auto' needs cost, the chip's golden.collective_cost."
                         f"CostParams, not {cost!r}")
    predicted = {k: pipelined_cycles(transfers, chunks=k, params=cost)
                 for k in AUTO_CHUNKS if k <= max(1, most)}
    best = min(predicted.values())
    chunks = min(k for k, cycles in predicted.items() if cycles <= best * (1 + AUTO_SLACK))
    return chunks, predicted[chunks]


def plan_collective(kind, inputs, *, topology, dtype="float32", lanes=8, chunks=1,
                    tables=None, push_words=None, push_ports=1, cost=None,
                    max_flags=None, align=SUBLANES):
    """Plan a collective as chip programs (module docstring); returns a
    :class:`CollectivePlan`.

    Parameters
    ----------
    kind : "all_reduce", "all_gather", "reduce_scatter" or "all_to_all"
    inputs : [C, n] (all_to_all [C, C, m]) uint32 bit patterns (or float32 / int32 values),
        row r the r-th live chip's, as ``golden.collectives.collective`` takes them
    topology : golden.topology.Topology, or a shape such as "4x4"
    dtype : "float32" or "int32": the reduce's ``add`` or ``iadd``
    lanes : int, words per VMEM line
    chunks : int >= 1, pieces per transfer (pipelining; 1 = lockstep), or "auto":
        :func:`choose_chunks` with ``cost``, within ``max_flags``
    tables : optional routing tables, passed to ``golden.collectives.schedule``
    push_words : int, optional
        Words per push descriptor at most, the pushes of each send dealt by
        ``golden.collective_cost.dealing_order`` (for a chip with several push ports,
        ``hdl.memory.dma_push_ports``); default: one descriptor per run of words
    push_ports : int
        The chip's push ports, which take its pushes in turn: an all-to-all by dimensions
        deals them its pushes by direction (``golden.collective_cost.dealing_order``)
    cost : golden.collective_cost.CostParams, optional
        The chip's timing, which ``chunks="auto"`` needs
    max_flags : int, optional
        The flags ``chunks="auto"`` may use (the chip's); default the most a chip has
    align : int
        A reduce block's slot and pieces in whole groups of ``align`` lines (default 8, a
        ``vld``/``vst``'s lines); 1 keeps the blocks on lines back to back, which a
        caller that writes the buffer by words needs (:class:`LineLayout`)

    Raises
    ------
    ValueError
        With a one-line reason: bad kind, topology, dtype, shape, lanes or chunks; more
        than 128 flags needed; an SMEM or VMEM address beyond what the instructions can
        hold.
    """
    kind = gc._kind(kind)
    topo = gc._topology(topology)
    chips = np.flatnonzero(topo.alive)
    c = len(chips)
    x = gc._check_inputs(kind, inputs, c, dtype)
    bits = x.view(np.uint32)
    lanes = _positive_int("lanes", lanes)
    if chunks != "auto":
        chunks = _positive_int("chunks", chunks)
    max_flags = golden_memory.MAX_FLAGS if max_flags is None else \
        _positive_int("max_flags", max_flags)
    if push_words is not None:
        push_words = _positive_int("push_words", push_words)
    push_ports = _positive_int("push_ports", push_ports)
    align = _positive_int("align", align)
    if cost is not None:
        cost = replace(cost, reduce_align=align)
    n_ids = topo.n_chips
    reduces = kind in ("all_reduce", "reduce_scatter")
    transfers, layout = vmem_transfers(kind, topo, x.shape, lanes=lanes, tables=tables,
                                       align=align)
    once = waits_once(transfers)

    # The buffer, and all_to_all's receive buffer and relay areas.
    last = x.shape[-1]
    if kind == "all_to_all":
        recv_base = -(-c * last // lanes) * lanes
        extent = max(hi for tr in transfers for _, hi in tr.dst_ranges)
        buffer_words = recv_base + extent - c * last
    else:
        recv_base = 0
        buffer_words = c * last if kind == "all_gather" else layout.words
    buffer_lines = -(-buffer_words // lanes)

    # Pieces and their receive events.
    steps = 1 + max(tr.step for tr in transfers)
    predicted = None
    if chunks == "auto":
        most = golden_memory.MAX_FLAGS if once else (min(max_flags, golden_memory.MAX_FLAGS)
                                                     - 1) // steps
        chunks, predicted = choose_chunks(transfers, cost=cost, most=most)
    n_events = 1 if once else steps * chunks
    used_flags = 1 + n_events
    if used_flags > golden_memory.MAX_FLAGS:
        raise ValueError(f"{kind} on {topo!r} with chunks = {chunks} needs {used_flags} flags "
                         f"(1 + {steps} steps * {chunks} chunks), more than "
                         f"{golden_memory.MAX_FLAGS}: use fewer chunks")
    n_flags = max(_MIN_FLAGS, 1 << (used_flags - 1).bit_length())

    def vmem_word(w):
        """The VMEM word of the schedule's buffer word ``w``: the same, except an
        all-to-all's receive buffer and relay areas, which start at ``recv_base``."""
        return w if kind != "all_to_all" or w < c * last else recv_base + w - c * last

    sends = defaultdict(lambda: defaultdict(list))      # chip -> send key -> pieces
    receives = defaultdict(lambda: defaultdict(list))   # chip -> event key -> pieces
    for tr in transfers:
        if tr.op == "reduce":
            assert tr.src_ranges == tr.dst_ranges
        for k in range(chunks):
            parts = []
            for (s_lo, s_hi), (d_lo, d_hi) in zip(tr.src_ranges, tr.dst_ranges):
                assert s_hi - s_lo == d_hi - d_lo
                lo, hi = piece_range(s_lo, s_hi, k, chunks,
                                     lanes * align if tr.op == "reduce" else 1)
                if hi > lo:
                    parts.append((vmem_word(lo), vmem_word(d_lo + lo - s_lo), hi - lo))
            if not parts:
                continue
            key = receive_event(tr.step, k, once=once)
            piece = _Piece(key, 1 + key[0] * chunks + key[1], tr.src, tr.dst, tr.op,
                           tuple(parts), chunk=k, port=tr.links[0][1])
            sends[tr.src][(tr.step, k)].append(piece)
            receives[tr.dst][piece.key].append(piece)

    # Staging: slots in each receiver's event order, from the line after the buffer.
    stages = {}                # id(piece) -> the receiver's staging word of each part
    vmem_lines = buffer_lines
    for chip in chips.tolist():
        at = buffer_lines * lanes
        for key in sorted(receives[chip]):
            for piece in receives[chip][key]:
                if piece.op != "reduce":
                    continue
                starts = []
                for _, _, n in piece.parts:
                    starts.append(at)
                    at += -(-n // (lanes * align)) * lanes * align
                stages[id(piece)] = tuple(starts)
        vmem_lines = max(vmem_lines, -(-at // lanes))
    if vmem_lines > 1 << 16:
        raise ValueError(f"the plan needs {vmem_lines} VMEM lines, more than a vld/vst base "
                         f"line can address (65536): use a smaller n")

    def targets(piece):
        """Where a piece's parts land at the receiver: staging, or the buffer (copies)."""
        return stages.get(id(piece)) or tuple(dst for _, dst, _ in piece.parts)

    add_op = "add" if dtype == "float32" else "iadd"
    programs, smems, bundles = [None] * n_ids, [None] * n_ids, [0] * n_ids
    for chip in chips.tolist():
        w = _Writer(lanes=lanes, add_op=add_op, targets=targets, push_words=push_words,
                    push_ports=push_ports, by_direction=deals_by_direction(transfers),
                    align=align)
        events = sorted(receives[chip])
        # Each send goes right after the last earlier-step receive that writes a word it
        # reads (-1: none, at the start).
        after = send_order(receives[chip], sends[chip], once=once)
        # The sends that follow one receive (or the start) go out together, chunk by
        # chunk (all_to_all's to every destination at once).
        w.send([p for skey in after[-1] for p in sends[chip][skey]])
        for i, key in enumerate(events):
            w.receive(receives[chip][key], receives[chip][key][0].flag)
            w.send([p for skey in after[i] for p in sends[chip][skey]])
        programs[chip] = w.finish()
        smem = np.concatenate([tc.descriptor_words(d) for d in w.records]) if w.records \
            else np.zeros(0, np.uint32)
        if len(smem) > _IMM:
            raise ValueError(f"chip {chip} needs {len(smem)} SMEM words of descriptors, more "
                             f"than a dma operand reaches ({_IMM}): use fewer chunks")
        smems[chip] = smem
        bundles[chip] = len(w.lines)             # one bundle a line (labels share it)
    smem_words = max(len(s) for s in smems if s is not None)
    smems = [None if s is None else np.concatenate([s, np.zeros(smem_words - len(s), np.uint32)])
             for s in smems]

    vmem = [np.zeros(vmem_lines * lanes, np.uint32) for _ in range(n_ids)]
    for rank, chip in enumerate(chips.tolist()):
        v = vmem[chip]
        if reduces:
            v[layout.index] = bits[rank]
        elif kind == "all_gather":
            v[rank * last:(rank + 1) * last] = bits[rank]
        else:
            v[:c * last] = bits[rank].ravel()
            v[recv_base + rank * last:recv_base + (rank + 1) * last] = bits[rank, rank]
    return CollectivePlan(kind=kind, dtype=dtype, shape=tuple(x.shape),
                          chips=tuple(chips.tolist()), lanes=lanes, chunks=chunks,
                          programs=programs, vmem=vmem, smem=smems, n_flags=n_flags,
                          vmem_lines=vmem_lines, imem_bundles=max(bundles),
                          smem_words=smem_words, bundles=tuple(bundles), recv_base=recv_base,
                          transfers=tuple(transfers), layout=layout,
                          predicted_cycles=predicted)

