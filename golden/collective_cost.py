"""A pipelined cost model of a collective cut into chunks: an event model of the chip
programs that run it (``sim.kernels.collective``), with their timing and without their data.

``golden.collectives.alpha_beta_cycles`` charges each lockstep step ``alpha`` plus its
busiest link's bytes over B. That fits one chunk per transfer and no arithmetic. This model
keeps alpha and B, cuts the transfers into ``chunks`` pieces, and runs the programs the
planner writes: each chip sends, then for each of its receive events in order waits for the
words, reduces them and sends what depended on them. The pieces pipeline as the programs let
them. Its constants (:class:`CostParams`) are the chip's: all but ``event_cycles`` measured
by ``tpu-rtl system bench`` on the RTL with microbenchmarks, ``event_cycles`` fitted to the
bench's runs.

Model
-----
- **Pieces.** Piece k of a transfer covers part k of each of its ranges by the planner's
  rule: ``[lo + k*L//chunks, lo + (k+1)*L//chunks)`` in VMEM lines for a reduce (so that
  pieces stay whole lines), in words for a copy. Empty pieces are dropped. The pieces of one
  step and chunk that reach a chip are one receive event.
- **Program order.** A chip first sends the pieces that read only its input. Then, for each
  of its receive events in (step, chunk) order, it waits until every word has landed, spends
  ``event_cycles``, reduces the reduce pieces and sends what depended on them. A send depends
  on the latest earlier step's event that writes a word it reads. Sends after the same event
  leave together, their pushes dealt as :func:`dealing_order` says (an all-to-all by
  dimensions' by direction). A direct all-to-all's pieces are one receive event at each chip (its program
  waits once); an all-to-all by dimensions has one per phase and chunk.
- **Issue.** A piece's ranges leave as pushes of at most ``push_words`` words. The core
  issues a push unless ``dma_slots`` pushes hold a slot of the DMA; then it waits for the
  oldest to free its slot. The DMA takes one push at a time, ``descriptor_cycles`` apart.
  Without ``queue_words`` a push holds its slot until it has left. With it (a chip with
  several push ports), the DMA moves the push's words into its port's queue, a VMEM line
  a cycle, once that queue has room for them (the pushes ahead of it on the port hold
  their words there until they have left), frees its slot then, and only then takes the
  next push: one full queue stalls the pushes of every port.
- **Sending.** A chip deals its pushes to its ``ports`` push ports in turn. A port sends a
  packet only once it holds all of it, so a push starts ``fill_cycles`` per word of its first
  packet after the DMA took it, or when its port is free, whichever is later. It sends its
  words as packets of at most ``packet_words`` words, each behind ``header_flits`` header
  flits, one flit per ``4 / B`` cycles. Each link of its route, and the receive port it
  ejects on, carries those flits in its first idle cycles from the push's start, around
  what the pushes booked before it took (work-conserving: packets of several pushes
  interleave on a link, so a push may fill several gaps; two pushes do not share a cycle).
  The port is free again when the last of them has carried the push: a route that is
  busy backs up into the port (wormhole), and it has left then.
- **Landing.** A push's last word lands when the last of its resources is done, plus a
  latency set so that a one-word push to a neighbour lands ``alpha`` cycles after its issue,
  plus ``hop_cycles`` for every hop after the first.
- **Ejection.** A packet leaves the router on the receive port of the torus input it arrives
  on: input ``p`` on port ``golden.routing.eject_port(p)`` (``hdl.ici.Router``).
- **Reduce.** The VPU adds 8 VMEM lines of a range in ``group_cycles``, and each line left
  over in ``line_cycles`` (a ``vld``/``vst`` moves 8 lines; one left over is loaded alone).
  With ``reduce_align`` lines above 1, a reduce's pieces are cut in whole groups of that
  many lines, and a piece's last group is padded to it (the programs' layout pads every
  reduce block to whole groups), so it costs whole groups.
  Before a reduce overwrites words one of the chip's own pushes still reads, the chip waits
  until all its pushes so far have left.
- **The end.** A chip waits for all its pushes to leave, then halts; the run ends when the
  last chip halts, plus ``end_cycles``.

Not modelled: a push's hops one after another (every resource of its route is booked from
its start); the DMA's reads of HBM; router pipeline stalls, credit waits and head-of-line
blocking. The model is checked against the RTL
by ``tpu-rtl system bench`` (docs/system.md).
"""

import bisect
import heapq
import itertools
from collections import defaultdict
from dataclasses import dataclass, fields

import numpy as np

from .routing import eject_port
from .vpu import SUBLANES

__all__ = ["CostParams", "pipelined_cycles", "piece_range", "overlap", "receive_event",
           "send_order", "dealing_order", "waits_once", "deals_by_direction"]

#: Bytes a word (``golden.collectives`` re-exports it).
WORD_BYTES = 4

_AT_LEAST_ONE = ("ports", "torus_ports", "lanes", "push_words", "packet_words",
                 "reduce_align")
_WHOLE = _AT_LEAST_ONE + ("header_flits", "dma_slots", "queue_words")


@dataclass(frozen=True)
class CostParams:
    """The model's constants (module docstring); cycles unless said.

    alpha : a one-word push's issue to its flag at a neighbour
    link_bytes_per_cycle : B, one link's bandwidth in one direction, bytes a cycle
    ports : push ports (and receive ports) a chip
    torus_ports : the routers' torus ports, 2 x the topology's dimensions
    lanes : words a VMEM line
    push_words : words a push at most, or None for one push a range
    packet_words, header_flits : words a packet at most, and the header flits before them
    group_cycles, line_cycles : the VPU's reduce of 8 lines, and of a line left over
    reduce_align : lines a reduce piece is cut in and padded to (1: lines; 8: whole
        ``vld``/``vst`` groups, the collective programs' layout)
    descriptor_cycles : the DMA's time for a push before it takes the next
    fill_cycles : a push port's read of a word of a push's first packet
    dma_slots : pushes holding a slot of the DMA at once (0: no limit)
    queue_words : words a push port's queue holds (0: none; a push then holds its DMA slot
        until it has left)
    event_cycles : a receive event's own cost (its wait, and setting up the reduce)
    hop_cycles : a hop after the first
    end_cycles : the last halt to the end of the run
    """
    alpha: float
    link_bytes_per_cycle: float
    ports: int = 1
    torus_ports: int = 4
    lanes: int = 8
    push_words: int = None
    packet_words: int = 64
    header_flits: int = 2
    group_cycles: float = 0.0
    line_cycles: float = 0.0
    descriptor_cycles: float = 0.0
    fill_cycles: float = 0.0
    dma_slots: int = 0
    event_cycles: float = 0.0
    hop_cycles: float = 0.0
    end_cycles: float = 0.0
    queue_words: int = 0
    reduce_align: int = 1

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "push_words" and value is None:
                continue
            whole = f.name in _WHOLE
            kinds = (int, np.integer) if whole else (int, float, np.integer, np.floating)
            if isinstance(value, bool) or not isinstance(value, kinds):
                raise TypeError(f"{f.name} must be {'an integer' if whole else 'a number'}, "
                                f"not {value!r}")
            if f.name == "link_bytes_per_cycle":
                ok, need = value > 0, "> 0"
            else:
                least = 1 if f.name in _AT_LEAST_ONE else 0
                ok, need = value >= least, f">= {least}"
            if not ok:
                raise ValueError(f"{f.name} must be {need}, not {value!r}")


@dataclass(frozen=True, eq=False)
class _Piece:
    key: tuple          # (step, chunk): the receive event at dst
    src: int
    dst: int
    op: str
    links: tuple
    parts: tuple        # (src word, dst word, words)


def piece_range(lo, hi, k, chunks, unit):
    """Part ``k`` of ``chunks`` of the range ``[lo, hi)``, cut in whole ``unit``s (groups of
    VMEM lines for a reduce, words for a copy): ``(start, stop)``, empty for some k when the
    range has fewer units than chunks. A last unit cut short by ``hi`` counts as one (a
    reduce block's last group, padded in VMEM)."""
    units = -(-(hi - lo) // unit)
    return (min(hi, lo + k * units // chunks * unit),
            min(hi, lo + (k + 1) * units // chunks * unit))


def _pieces(transfers, chunks, lanes, align):
    for tr in transfers:
        unit = lanes * align if tr.op == "reduce" else 1
        for k in range(chunks):
            parts = []
            for (s_lo, s_hi), (d_lo, _) in zip(tr.src_ranges, tr.dst_ranges):
                lo, hi = piece_range(s_lo, s_hi, k, chunks, unit)
                if hi > lo:
                    parts.append((lo, d_lo + lo - s_lo, hi - lo))
            if parts:
                yield _Piece((tr.step, k), tr.src, tr.dst, tr.op, tr.links, tuple(parts))


def overlap(xs, ys):
    """Whether any range of ``xs`` meets any of ``ys`` (``(start, stop)`` pairs)."""
    return any(a < d and c < b for a, b in xs for c, d in ys)


def waits_once(transfers):
    """Whether the programs of ``transfers`` (a ``golden.collectives`` schedule) wait once
    (the programs' rule): a direct all-to-all's (every transfer over the routing tables,
    axis -1 and direction 0), whose sends read only the input and all go at the start.
    An all-to-all by dimensions waits for each phase, as the ring collectives for each
    step."""
    return all(tr.axis == -1 and tr.direction == 0 for tr in transfers)


def deals_by_direction(transfers):
    """Whether the programs of ``transfers`` deal their pushes to the push ports by
    direction (:func:`dealing_order`): when every transfer goes along a torus axis, as an
    all-to-all by dimensions' and the ring collectives' on the torus's rings do, whose
    pushes go both ways along every axis at once.

    Dealt in turn instead, a port's queue mixes pushes to several neighbours, and one that
    waits for its link holds up the next; the chunked ring collectives lost most of what
    pipelining gains: the 2x2x2's all-gather of 64 KiB in 2 chunks took 4,442 cycles in
    turn and 3,582 by direction (3,183 in one chunk), its all-reduce 9,912 and 7,785
    (8,701 in one), the 2x2's all-reduce of 32 KiB in 4 chunks 3,802 and 3,586; the 1x4
    ring, whose sends already alternate its two directions, took 6,473 either way. A
    direct all-to-all (axis -1) and the rings of a topology with a failed chip (the
    live-chip ring, axis -1) are dealt in turn: a direct all-to-all took longer by
    direction on the 1x4 ring (5,348 cycles against 4,922, 32 KiB)."""
    return all(tr.axis >= 0 for tr in transfers)


def receive_event(step, chunk, *, once):
    """The receive event (the programs' rule) of the piece ``chunk`` of a step-``step``
    transfer: ``(step, chunk)``, or ``(0, 0)`` for every piece when the program waits
    ``once`` (:func:`waits_once`)."""
    return (0, 0) if once else (step, chunk)


def send_order(receives, sends, *, once):
    """When a chip's sends go (the programs' rule): ``{i: [send keys]}``, the sends issued
    right after receive event ``i`` of ``sorted(receives)`` (-1: at the start).

    ``receives`` and ``sends`` map a ``(step, chunk)`` key to the pieces the chip receives
    in that event, and sends for that key; a piece has ``parts``, ``(src word, dst word,
    words)``. A send goes after the latest earlier-step event that writes a word it reads
    (with ``once``, a direct all-to-all's, every send goes at the start)."""
    events = sorted(receives)
    writes = [[(d, d + n) for p in receives[key] for _, d, n in p.parts] for key in events]
    after = defaultdict(list)
    for skey in sorted(sends):
        reads = [(s, s + n) for p in sends[skey] for s, _, n in p.parts]
        deps = [i for i, key in enumerate(events)
                if not once and key[0] < skey[0] and overlap(reads, writes[i])]
        after[max(deps, default=-1)].append(skey)
    return after


def dealing_order(per_piece, chunks, *, ports=None, push_ports=1, dealt=0):
    """The order in which a chip issues the pushes of pieces that leave together (the
    programs' rule): chunk by chunk, so that an earlier chunk lands first and its receive
    events start while the later chunks are in flight; within a chunk, the pieces' pushes
    in turn, so that pushes to different receivers leave side by side on a chip's push
    ports (which take pushes in turn).

    By direction (``ports`` given, and several ``push_ports``): the chip's push ports take
    its pushes strictly in turn, push n on port ``n mod push_ports``, so the order can give
    each port the pushes of one class of first hops, and a push that waits for its link
    then holds up no push that would leave by another. Push ``dealt + i`` of the order
    (``dealt`` pushes went before it) is the next of class ``(dealt + i) mod push_ports``,
    the pieces whose first hop leaves by a torus port congruent to it, in turn among them;
    once a class has none left, the class with the most left gives it.

    Parameters
    ----------
    per_piece : list of lists
        Each piece's pushes, the pieces in send order.
    chunks : list of int
        Each piece's chunk (``k`` of ``chunks`` per transfer).
    ports : list of int, optional
        Each piece's first-hop torus port.
    push_ports, dealt : int
        The chip's push ports, and the pushes it issued before these.

    Returns
    -------
    list, every push once
    """
    def in_turn(lists):
        return [push for turn in itertools.zip_longest(*lists) for push in turn
                if push is not None]

    out = []
    for k in sorted(set(chunks)):
        group = [i for i, c in enumerate(chunks) if c == k]
        if ports is None or push_ports == 1:
            out += in_turn([per_piece[i] for i in group])
            continue
        classes = defaultdict(list)
        for i in group:
            classes[ports[i] % push_ports].append(per_piece[i])
        queues = {cls: in_turn(lists)[::-1] for cls, lists in classes.items()}
        while any(queues.values()):
            want = (dealt + len(out)) % push_ports
            if not queues.get(want):
                want = max(queues, key=lambda cls: len(queues[cls]))
            out.append(queues[want].pop())
    return out


def _pushes(piece, push_words):
    """``(piece, first source word, words)`` of each push of ``piece``."""
    out = []
    for src, _, n in piece.parts:
        step = push_words or n
        out += [(piece, lo, min(step, src + n - lo)) for lo in range(src, src + n, step)]
    return out


class _Chip:
    """One chip's program, as ``("send", pushes)`` and ``("receive", pieces)`` actions,
    and where it has got to."""

    def __init__(self, actions):
        self.actions = actions
        self.at = 0            # the next action
        self.time = 0.0        # when the core is free for it
        self.left = []         # per push issued so far, the time it has left
        self.freed = []        # per push issued so far, when it freed its DMA slot
        self.unfenced = []     # (source words, time it has left) of pushes not waited for


def _programs(pieces, *, once, by_direction, params):
    """{chip: _Chip}: each chip's sends and receive events in program order."""
    sends = defaultdict(lambda: defaultdict(list))
    receives = defaultdict(lambda: defaultdict(list))
    for piece in pieces:
        sends[piece.src][piece.key].append(piece)
        receives[piece.dst][receive_event(*piece.key, once=once)].append(piece)
    chips = {}
    for chip in sorted(set(sends) | set(receives)):
        events = sorted(receives[chip])
        after = send_order(receives[chip], sends[chip], once=once)
        dealt = 0

        def batch(keys):
            nonlocal dealt
            pieces = [p for key in keys for p in sends[chip][key]]
            pushes = dealing_order(
                [_pushes(p, params.push_words) for p in pieces], [p.key[1] for p in pieces],
                ports=[p.links[0][1] for p in pieces] if by_direction else None,
                push_ports=params.ports, dealt=dealt)
            dealt += len(pushes)
            return ("send", pushes)

        actions = [batch(after[-1])]
        for i, key in enumerate(events):
            actions += [("receive", receives[chip][key]), batch(after[i])]
        chips[chip] = _Chip(actions)
    return chips


class _Timing:
    """The resources' timing: the DMA, push ports, links and receive ports."""

    def __init__(self, params):
        self.p = params
        self.word_cycles = WORD_BYTES / params.link_bytes_per_cycle
        self.free = defaultdict(float)          # resource -> when it is next free
        self.landed = defaultdict(float)        # piece -> when its last word has landed
        self.booked = defaultdict(list)         # link or receive port -> busy spans
        self.queued = defaultdict(list)         # push port -> (left, words) of its pushes
        # A one-word push, issued at 0, is taken at 0, sent from fill_cycles, and lands
        # alpha after its issue: the latency after its last flit.
        self.latency = params.alpha - params.fill_cycles - \
            (1 + params.header_flits) * self.word_cycles

    def issue(self, chip, program, piece, first, words):
        """Chip ``chip`` issues a push of ``words`` words of ``piece`` from source word
        ``first``: book its DMA turn, push port, links and receive port, and move on when
        ``piece`` has landed."""
        p = self.p
        if p.dma_slots and len(program.freed) >= p.dma_slots:
            program.time = max(program.time, program.freed[-p.dma_slots])
        port = len(program.left) % p.ports
        dma, push = ("dma", chip), ("push", chip, port)
        taken = max(program.time, self.free[dma])
        queued = self._queue(push, taken, words)
        self.free[dma] = max(taken + p.descriptor_cycles, queued or 0)
        start = max(taken + min(words, p.packet_words) * p.fill_cycles, self.free[push])
        busy = (words + p.header_flits * -(-words // p.packet_words)) * self.word_cycles
        # The receiver's input is the far end of the last link (port ^ 1).
        arrive = piece.links[-1][1] ^ 1
        eject = ("eject", piece.dst,
                 eject_port(arrive, torus_ports=p.torus_ports, local_ports=p.ports))
        done = start + busy
        for r in [("link",) + link for link in piece.links] + [eject]:
            done = max(done, self._book(r, start, busy))
        self.free[push] = done
        if queued is not None:
            self.queued[push].append((done, words))
        program.left.append(done)
        program.freed.append(done if queued is None else queued)
        program.unfenced.append(((first, first + words), done))
        flag = done + self.latency + p.hop_cycles * (len(piece.links) - 1)
        self.landed[piece] = max(self.landed[piece], flag)

    def _queue(self, push, taken, words):
        """When the DMA, having taken a push of ``words`` words at ``taken``, has moved
        them into push port ``push``'s queue (None without ``queue_words``)."""
        p = self.p
        if not p.queue_words:
            return None
        # The DMA takes pushes in time order, so one that has left by now stays gone.
        ahead = self.queued[push] = [(t, n) for t, n in self.queued[push] if t > taken]
        at, held = taken + -(-words // p.lanes), words
        for left, n in sorted(ahead, reverse=True):
            held += n
            if held > p.queue_words:
                return max(at, left)
        return at

    def _book(self, resource, start, busy):
        """Book the first ``busy`` idle cycles of ``resource`` from ``start``, across as
        many gaps between its booked spans as they take; return when the last ends.
        (Work-conserving: a push issued later but ready earlier fills what the pushes
        booked before it left idle, as packets of several pushes interleave on a link.)"""
        spans = self.booked[resource]
        i = bisect.bisect_right(spans, (start, float("inf")))
        at = max(start, spans[i - 1][1]) if i else start
        left = busy
        while True:
            gap = (spans[i][0] if i < len(spans) else float("inf")) - at
            if gap > 0:
                take = min(left, gap)
                spans.insert(i, (at, at + take))
                i, at, left = i + 1, at + take, left - take
                if not left:
                    return at
            at = max(at, spans[i][1])
            i += 1

    def reduce_cycles(self, pieces):
        total = 0.0
        for piece in pieces:
            if piece.op == "reduce":
                for _, _, n in piece.parts:
                    align = self.p.reduce_align
                    groups, rest = divmod(-(-n // (self.p.lanes * align)) * align, SUBLANES)
                    total += groups * self.p.group_cycles + rest * self.p.line_cycles
        return total


def pipelined_cycles(transfers, *, chunks=1, params):
    """Cycles of the chip programs that run ``transfers`` (a ``golden.collectives.schedule``)
    in ``chunks`` pieces per transfer, by the model of the module docstring.

    Parameters
    ----------
    transfers : list of golden.collectives.Transfer
    chunks : int >= 1, pieces per transfer (``sim.kernels.collective.plan_collective``'s)
    params : CostParams

    Raises
    ------
    ValueError
        Bad ``chunks``.
    TypeError
        ``params`` is not a :class:`CostParams`.
    """
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
        raise ValueError(f"chunks must be a positive integer, not {chunks!r}")
    if not isinstance(params, CostParams):
        raise TypeError(f"params must be a CostParams, not {type(params).__name__}")
    transfers = list(transfers)
    if not transfers:
        return float(params.end_cycles)
    chips = _programs(list(_pieces(transfers, int(chunks), params.lanes, params.reduce_align)),
                      once=waits_once(transfers), by_direction=deals_by_direction(transfers),
                      params=params)
    timing = _Timing(params)
    unissued = defaultdict(int)                 # piece -> its pushes not issued yet
    for program in chips.values():
        for action, items in program.actions:
            if action == "send":
                for piece, _, _ in items:
                    unissued[piece] += 1

    # One action at a time, of the chip that is earliest, so that pushes take their
    # resources in issue order; a chip whose event lacks a push not issued yet waits.
    ready = [(0.0, chip) for chip in chips]
    blocked = {}
    while ready:
        _, chip = heapq.heappop(ready)
        program = chips[chip]
        action, items = program.actions[program.at]
        if action == "send":
            for piece, first, words in items:
                timing.issue(chip, program, piece, first, words)
                unissued[piece] -= 1
            for other, waiting in list(blocked.items()):
                if not any(unissued[p] for p in waiting):
                    del blocked[other]
                    heapq.heappush(ready, (chips[other].time, other))
        elif any(unissued[p] for p in items):
            blocked[chip] = items
            continue
        else:
            program.time = max([program.time] + [timing.landed[p] for p in items])
            own = [(d, d + n) for p in items if p.op == "reduce" for _, d, n in p.parts]
            if any(overlap([words], own) for words, _ in program.unfenced):
                program.time = max([program.time] + [t for _, t in program.unfenced])
                program.unfenced = []
            program.time += params.event_cycles + timing.reduce_cycles(items)
        program.at += 1
        if program.at < len(program.actions):
            heapq.heappush(ready, (program.time, chip))
    # A send depends only on earlier steps' events, so every wait ends.
    assert not blocked, f"chips {sorted(blocked)} wait for pieces no chip sends"
    return max(max([p.time] + p.left) for p in chips.values()) + params.end_cycles
