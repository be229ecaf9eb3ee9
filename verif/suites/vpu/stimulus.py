"""Constrained-random VPU programs for the ``vpu`` regression.

A program is written *move* by move, each move aiming at bins of
:mod:`.coverage` (which samples what was made, not what was meant):

* ``chain``: a producer of one unit class, then ``distance - 1`` independent
  instructions, then a consumer of the producer's register (or, for a store,
  of its VMEM lines): a read-after-write hazard at that distance;
* ``pair``: two independent instructions of given unit classes in one beat
  (an even position), which the RTL may issue together;
* ``memory``: a load or a store at a random base and line stride, 0 included;
* ``mxu``: a push and pop sequence: the shadow tile filled, swapped in by an
  LHS push while more weights load, results popped;
* ``single``: any register instruction.

Moves are dealt from shuffled decks (:func:`deal`) so that one seed reaches
every chain (unit x distance) and every unit pair. A program may end in a
program error (:data:`ERROR_KINDS`), at the first or the second word of a
beat, followed by a few words the VPU must drop; otherwise it pops every MXU
result it queued, so all of them reach a register. The registers and VMEM
start as a mix of operand classes (:data:`OPERAND_CLASSES`), transcendental
corner inputs and bf16 patterns (:func:`vreg_values`). Every choice comes
from the ``numpy`` generator the caller seeds.
"""

from dataclasses import dataclass

import numpy as np

from golden import vpu as golden_vpu

__all__ = ["Build", "Program", "OPERAND_CLASSES", "UNIT_CLASSES", "PRODUCERS", "CONSUMERS",
           "DISTANCES", "ERROR_KINDS", "SLOTS", "unit_class", "error_kinds", "units",
           "vreg_values", "TRANS_CORNERS", "deal", "make_program"]

#: Operand classes of SPEC section 3's coverage (``max``: the largest finite magnitude).
OPERAND_CLASSES = ("zero", "subnormal", "normal", "inf", "nan", "max")
#: Unit classes of instructions, as the VPU's units take them (``push``: push_weights,
#: push_lhs and push_lhs_acc; ``pop``: pop).
UNIT_CLASSES = ("alu", "trans", "reduce", "load", "store", "push", "pop")
#: Units whose result a hazard waits for (``store``: through VMEM, to a load).
PRODUCERS = ("alu", "trans", "reduce", "load", "pop", "store")
#: Units that read a register an earlier instruction writes.
CONSUMERS = ("alu", "trans", "reduce", "store", "push")
DISTANCES = (1, 2, 3, 4)
ERROR_KINDS = golden_vpu.ERRORS
SLOTS = ("first", "second")

_OPS = golden_vpu.OPS
_LHS_OPS = ("push_lhs", "push_lhs_acc")
_ALU = tuple(name for name, spec in _OPS.items() if spec.unit == "alu")
_TRANS = tuple(name for name, spec in _OPS.items() if spec.unit == "trans")
_REDUCE = tuple(name for name, spec in _OPS.items() if spec.unit == "reduce")
_COMPUTE = {"alu": _ALU, "trans": _TRANS, "reduce": _REDUCE}
_SUBLANES = golden_vpu.SUBLANES
_VREGS = golden_vpu.VREGS


def unit_class(op):
    """The :data:`UNIT_CLASSES` entry of instruction ``op`` (None for ``nop``)."""
    unit = _OPS[op].unit
    if unit == "mxu":
        return "pop" if op == "pop" else "push"
    return None if unit == "none" else unit


@dataclass(frozen=True)
class Build:
    """One VPU build of the regression: lanes, an MXU or not, VMEM lines, result rows (by
    default ``sim.vpu``'s, so the regression's builds are the ones its users make)."""
    lanes: int
    mxu: bool
    vmem_lines: int = 256
    mxu_results: int = 16

    @property
    def params(self):
        return dict(lanes=self.lanes, mxu=self.mxu, vmem_lines=self.vmem_lines,
                    mxu_results=self.mxu_results)


def units(build):
    """The unit classes ``build`` has."""
    return UNIT_CLASSES if build.mxu else tuple(u for u in UNIT_CLASSES
                                                if u not in ("push", "pop"))


def error_kinds(build):
    """The program errors ``build`` can meet: the MXU's with an MXU, else ``no_mxu``."""
    mxu = ("weights_full", "results_full", "pop_empty")
    return tuple(k for k in ERROR_KINDS if (k in mxu) == build.mxu and
                 (k != "no_mxu" or not build.mxu))


@dataclass(frozen=True)
class Program:
    """A program and its initial state: ``words`` (uint32), ``vregs`` [32, 8, lanes],
    ``vmem`` (flat), the error it was dealt (None, or a kind and a slot) and its run timing
    (``idle``, the program stream's gap probability, and the gap ``seed``)."""
    words: np.ndarray
    vregs: np.ndarray
    vmem: np.ndarray
    error: tuple | None
    idle: float
    seed: int


# ---------------------------------------------------------------- values

#: Inputs at the transcendental units' corners: rsqrt's hardest case (2**-28.5 ULP from a
#: midpoint), powers of two and four (exact results), exp's overflow, subnormal-result
#: and zero-result edges, tiny arguments (exp rounds to 1), magnitudes whose reciprocal is
#: subnormal (above 2**126) or overflows (subnormals below 2**-128), negative normals
#: (rsqrt gives NaN).
TRANS_CORNERS = np.array([
    0x403A18E3, 0x3F800000, 0x40800000, 0x3E800000, 0x40000000, 0x00800000,
    0x42B17217, 0x42B17218, 0x42B20000, 0xC2AEAC4F, 0xC2AEAC50, 0xC2B00000, 0xC2CFF1B4,
    0xC2CFF1B5, 0xC2D00000, 0xC3000000, 0x33000000, 0xB3000000, 0x2F800000,
    0x7E800000, 0x7F000001, 0xFE800001, 0x00200000, 0x00000001, 0x801FFFFF,
    0xBF800000, 0xC0490FDB,
], dtype=np.uint32)

_SIGN = np.uint32(0x80000000)


def _class_words(rng, cls, n):
    """``n`` fp32 patterns of operand class ``cls``, random signs."""
    sign = rng.integers(0, 2, n).astype(np.uint32) << np.uint32(31)
    frac = rng.integers(1, 1 << 23, n).astype(np.uint32)
    if cls == "zero":
        mag = np.zeros(n, np.uint32)
    elif cls == "subnormal":
        mag = np.where(rng.random(n) < 0.2, rng.choice(np.uint32([1, 0x7FFFFF, 0x400000]), n),
                       frac)
    elif cls == "normal":
        # Half near 1 (sums that cancel and round), half anywhere in the normal range.
        near = rng.integers(100, 155, n)
        anywhere = rng.integers(1, 255, n)
        exp = np.where(rng.random(n) < 0.5, near, anywhere).astype(np.uint32)
        mag = (exp << np.uint32(23)) | np.where(rng.random(n) < 0.2, 0, frac)
    elif cls == "inf":
        mag = np.full(n, 0x7F800000, np.uint32)
    elif cls == "nan":
        mag = np.where(rng.random(n) < 0.5, np.uint32(0x7FC00000),
                       np.uint32(0x7F800000) | frac)
    else:
        mag = np.full(n, 0x7F7FFFFF, np.uint32)
    return (sign | mag.astype(np.uint32)).astype(np.uint32)


def _bf16_words(rng, n):
    """Words whose low halves are bf16 patterns of every class (upper halves zero or random:
    conversions and MXU pushes read only the low half)."""
    # bf16's largest finite magnitude (0x7F7F) is no fp32 class's high half: weigh it in.
    high = np.where(rng.random(n) < 0.2, np.uint32(0x7F7F) | (rng.integers(0, 2, n) << 15),
                    _mixed(rng, n) >> np.uint32(16)).astype(np.uint32)
    upper = np.where(rng.random(n) < 0.5, 0, rng.integers(0, 1 << 16, n)).astype(np.uint32)
    return (upper << np.uint32(16)) | high


def _mixed(rng, n, p=None):
    """``n`` words, each of a random operand class (with probabilities ``p``)."""
    table = np.stack([_class_words(rng, cls, n) for cls in OPERAND_CLASSES])
    return table[rng.choice(len(OPERAND_CLASSES), n, p=p), np.arange(n)]


def vreg_values(rng, shape):
    """Words for registers or VMEM: each vreg-sized block (the last axis times 8) is one
    *fill*: a mix of every operand class, one class alone, transcendental corners, bf16
    patterns, small integers (shift counts, masks), or uniform bits."""
    words = np.empty(shape, np.uint32).reshape(-1, shape[-1] * _SUBLANES)
    n = words.shape[1]
    for block in words:
        fill = rng.choice(("mixed", "mixed", "class", "trans", "bf16", "bf16", "int", "bits"))
        if fill == "mixed":
            block[:] = _mixed(rng, n, p=[0.15, 0.15, 0.4, 0.1, 0.1, 0.1])
        elif fill == "class":
            block[:] = _class_words(rng, rng.choice(OPERAND_CLASSES), n)
        elif fill == "trans":
            # rsqrt's hardest input weighs as much as a few of the others.
            corner = np.where(rng.random(n) < 0.1, TRANS_CORNERS[0], rng.choice(TRANS_CORNERS, n))
            corner = corner ^ np.where(rng.random(n) < 0.2, _SIGN, np.uint32(0))
            block[:] = np.where(rng.random(n) < 0.6, corner,
                                _class_words(rng, rng.choice(OPERAND_CLASSES), n))
        elif fill == "bf16":
            block[:] = _bf16_words(rng, n)
        elif fill == "int":
            small = rng.integers(0, 64, n).astype(np.uint32)
            edges = rng.choice(np.uint32([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]), n)
            block[:] = np.where(rng.random(n) < 0.7, small, edges)
        else:
            block[:] = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    return words.reshape(shape)


# ---------------------------------------------------------------- the writer

def _mxu_after(op, shadow, queued, lanes):
    """The MXU's (shadow rows, queued result rows) after ``op`` (``golden.vpu.MXUState``)."""
    if op == "push_weights":
        return shadow + _SUBLANES, queued
    if op in _LHS_OPS:              # a whole shadow tile swaps in first
        return (0 if shadow == lanes else shadow), queued + _SUBLANES
    if op == "pop":
        return shadow, queued - _SUBLANES
    return shadow, queued


class _Writer:
    """Appends instructions, tracking the MXU's queue and shadow so that only the dealt
    error occurs."""

    def __init__(self, rng, build):
        self.rng, self.build = rng, build
        self.words = []
        self.shadow = 0         # weight rows in the shadow tile
        self.queued = 0         # result rows waiting for a pop

    def emit(self, op, **fields):
        self.words.append(golden_vpu.encode(golden_vpu.Instruction(op, **fields)))
        self.shadow, self.queued = _mxu_after(op, self.shadow, self.queued, self.build.lanes)

    def lhs_op(self):
        """``push_lhs`` or ``push_lhs_acc``, at random."""
        return str(self.rng.choice(_LHS_OPS))

    def push(self, op, va, avoid=()):
        """MXU push ``op`` of ``va``; ``push_lhs_acc`` takes its sums from a register not in
        ``avoid``."""
        if op == "push_lhs_acc":
            self.emit(op, va=va, vb=self.reg(avoid))
        else:
            self.emit(op, va=va)

    def reg(self, avoid=()):
        return int(self.rng.choice([r for r in range(_VREGS) if r not in avoid]))

    # --- register instructions

    def compute(self, unit, *, dest=None, source=None, avoid=()):
        """An ``alu``, ``trans`` or ``reduce`` instruction; ``source`` among its sources,
        ``dest`` its destination; other registers not in ``avoid``."""
        op = str(self.rng.choice(_COMPUTE[unit]))
        fields = [f for f in _OPS[op].operands]
        values = {f: self.reg(avoid) for f in fields}
        if dest is not None:
            values["vd"] = dest
        if source is not None:
            values[str(self.rng.choice([f for f in fields if f != "vd"]))] = source
        self.emit(op, **values)
        return op, values

    def filler(self, avoid):
        """An instruction that neither reads nor writes a register of ``avoid`` and touches
        no VMEM or MXU."""
        self.compute(str(self.rng.choice(("alu", "alu", "alu", "trans", "reduce"))),
                     avoid=avoid)

    def align(self, slot, avoid=()):
        """Make the next instruction the ``slot`` word of a beat."""
        if (len(self.words) % 2 == 1) != (slot == "second"):
            self.filler(avoid)

    # --- VMEM

    def lines(self, *, stride=None, overlap=None, out_of_range=False):
        """(base, stride) of a load or store: stride 0, 1 or more (as the deal says), in
        range unless ``out_of_range``; sharing a line with ``overlap`` if given."""
        last = self.build.vmem_lines - 1
        if stride is None:
            stride = int(self.rng.choice([0, 1, int(self.rng.integers(2, 32))]))
        stride = min(stride, last // (_SUBLANES - 1)) if not out_of_range else stride
        span = stride * (_SUBLANES - 1)
        if out_of_range:
            low = max(0, last - span + 1)
            return int(self.rng.integers(low, min(low + 64, 1 << 16))), stride
        if overlap is not None:
            lines = overlap[0] + overlap[1] * np.arange(_SUBLANES)
            target = int(self.rng.choice(lines))
            s = int(self.rng.integers(0, _SUBLANES))
            base = target - s * stride
            if 0 <= base <= last - span:
                return base, stride
            return overlap
        return int(self.rng.integers(0, last - span + 1)), stride

    def memory(self, op, *, reg=None, avoid=(), **where):
        base, stride = self.lines(**where)
        self.emit(op, vr=self.reg(avoid) if reg is None else reg, base=base, stride=stride)
        return base, stride

    # --- the MXU

    def _realize(self, kinds):
        """Legal ops for ``kinds`` from the current state, or (None, the kind that failed)."""
        lanes, room = self.build.lanes, self.build.mxu_results
        shadow, queued, ops = self.shadow, self.queued, []
        for kind in kinds:
            can_weights = shadow + _SUBLANES <= lanes
            can_lhs = queued + _SUBLANES <= room
            if kind == "pop":
                op = "pop" if queued >= _SUBLANES else None
            elif can_weights and (not can_lhs or self.rng.random() < 0.6):
                op = "push_weights"
            else:
                op = self.lhs_op() if can_lhs else None
            if op is None:
                return None, kind
            ops.append(op)
            shadow, queued = _mxu_after(op, shadow, queued, lanes)
        return ops, None

    def mxu_ops(self, kinds):
        """Concrete ops for MXU unit classes ``kinds`` ("push" or "pop"), legal in turn;
        the instructions that make them legal are emitted first (so before any alignment
        the caller does next)."""
        for _ in range(8):
            ops, failed = self._realize(kinds)
            if ops is not None:
                return ops
            if failed == "pop":             # too few rows queued: queue some
                self.emit("push_lhs", va=self.reg())
            else:                           # shadow and queue both full: free the queue
                self.emit("pop", vd=self.reg())
        raise AssertionError(f"no legal MXU ops for {kinds} (shadow {self.shadow}, "
                             f"queued {self.queued})")

    def drain(self):
        while self.queued >= _SUBLANES:
            self.emit("pop", vd=self.reg())


# ---------------------------------------------------------------- moves

def _instruction(w, unit, *, dest=None, source=None, avoid=(), mxu_op=None):
    """One instruction of unit class ``unit`` writing ``dest`` / reading ``source``."""
    if unit in _COMPUTE:
        w.compute(unit, dest=dest, source=source, avoid=avoid)
    elif unit in ("load", "store"):
        w.memory("vld" if unit == "load" else "vst",
                 reg=dest if unit == "load" else source, avoid=avoid)
    elif unit == "push":
        w.push(mxu_op, w.reg(avoid) if source is None else source, avoid)
    else:
        w.emit("pop", vd=w.reg(avoid) if dest is None else dest)


def _chain(w, producer, distance, consumer):
    """A read-after-write hazard at ``distance``: through a register, or (a store producer)
    through the VMEM lines a load then reads."""
    if producer == "store":
        base_stride = w.memory("vst")
        for _ in range(distance - 1):
            w.filler(())
        w.memory("vld", overlap=base_stride)
        return
    pending = ["pop"] if producer == "pop" else []
    if consumer == "push":
        pending.append("push")
    ops = w.mxu_ops(pending) if pending else []
    reg = w.reg()
    _instruction(w, producer, dest=reg, mxu_op=None)
    for _ in range(distance - 1):
        w.filler((reg,))
    _instruction(w, consumer, source=reg, mxu_op=ops[-1] if consumer == "push" else None)


def _pair(w, first, second):
    """Two independent instructions of unit classes ``first`` and ``second`` in one beat."""
    kinds = [u for u in (first, second) if u in ("push", "pop")]
    ops = iter(w.mxu_ops(kinds) if kinds else [])
    w.align("first")
    dest = w.reg()
    if first in ("load", "store") and second in ("load", "store"):
        # Disjoint lines (the two halves of VMEM), the second's register not the first's.
        half = w.build.vmem_lines // 2
        for unit, low, reg in ((first, 0, dest), (second, half, w.reg((dest,)))):
            stride = int(w.rng.integers(0, 2))
            base = low + int(w.rng.integers(0, half - stride * (_SUBLANES - 1)))
            w.emit("vld" if unit == "load" else "vst", vr=reg, base=base, stride=stride)
        return
    written = _write(w, first, dest, next(ops) if first in ("push", "pop") else None)
    avoid = (written,) if written is not None else ()
    _write(w, second, None, next(ops) if second in ("push", "pop") else None, avoid=avoid)


def _write(w, unit, dest, mxu_op, avoid=()):
    """Emit one instruction of ``unit`` (writing ``dest`` if it writes); returns the
    register it writes, or None."""
    if unit in _COMPUTE:
        _op, values = w.compute(unit, dest=dest, avoid=avoid)
        return values["vd"]
    if unit == "load":
        reg = dest if dest is not None else w.reg(avoid)
        w.memory("vld", reg=reg)
        return reg
    if unit == "store":
        w.memory("vst", avoid=avoid)
        return None
    if mxu_op == "pop":
        reg = dest if dest is not None else w.reg(avoid)
        w.emit("pop", vd=reg)
        return reg
    w.push(mxu_op, w.reg(avoid), avoid)
    return None


def _mxu_sequence(w):
    """Fill the shadow, swap it in with an LHS push while more weights load, push again,
    pop what was queued; the LHS sometimes converted to bf16 by the VPU first."""
    kinds = ["push"] * (w.build.lanes // _SUBLANES + 2) + ["pop", "push", "pop"]
    for op in w.mxu_ops(kinds):
        if op in _LHS_OPS and w.rng.random() < 0.3:
            source, bf16 = w.reg(), w.reg()
            w.emit("f32_to_bf16", vd=bf16, va=source)
            w.push(op, bf16)
        elif op == "pop":
            w.emit(op, vd=w.reg())
        else:
            w.push(op, w.reg())


def _error(w, kind, slot):
    """The dealt program error at ``slot`` of its beat, then a few words to be dropped."""
    if kind == "weights_full":
        while w.shadow + _SUBLANES <= w.build.lanes:
            w.emit("push_weights", va=w.reg())
        w.align(slot)
        w.emit("push_weights", va=w.reg())
    elif kind == "results_full":
        while w.queued + _SUBLANES <= w.build.mxu_results:
            w.emit("push_lhs", va=w.reg())
        w.align(slot)
        w.push(w.lhs_op(), w.reg())
    elif kind == "pop_empty":
        w.drain()
        w.align(slot)
        w.emit("pop", vd=w.reg())
    elif kind == "no_mxu":
        w.align(slot)
        op = str(w.rng.choice(("push_weights", *_LHS_OPS, "pop")))
        if op == "pop":
            w.emit(op, vd=w.reg())
        else:
            w.push(op, w.reg())
    elif kind == "vmem_range":
        w.align(slot)
        base, stride = w.lines(stride=int(w.rng.integers(0, 32)), out_of_range=True)
        w.emit(str(w.rng.choice(("vld", "vst"))), vr=w.reg(), base=base, stride=stride)
    else:
        w.align(slot)
        w.words.append(_illegal_word(w.rng))
    for _ in range(int(w.rng.integers(1, 6))):
        _instruction(w, str(w.rng.choice(("alu", "trans", "load", "store"))))


def _illegal_word(rng):
    """An unassigned opcode (0 among them), or a legal one with a stray bit set."""
    opcodes = {spec.opcode for spec in _OPS.values()}
    if rng.random() < 0.5:
        code = int(rng.choice([c for c in range(64) if c not in opcodes]))
        return (code << 26) | int(rng.integers(0, 1 << 26))
    spec = _OPS[str(rng.choice([n for n, s in _OPS.items() if s.fmt == "r"]))]
    free = [b for b in range(26) if not any(
        golden_vpu.FIELDS[f][0] <= b < sum(golden_vpu.FIELDS[f]) for f in spec.operands)]
    return (spec.opcode << 26) | (1 << int(rng.choice(free)))


# ---------------------------------------------------------------- dealing

def deal(rng, build, programs, *, errors=True):
    """The moves of ``programs`` programs on ``build``: a list per program of
    ``(move, args)``, every chain (producer x distance) and every unit pair dealt at least
    once over them (consumers random), and an error card per program (None, or a
    (kind, slot)): with ``errors``, each of ``build``'s kinds in each slot once if there
    are at least four programs more than those cards, else half the programs get one of
    them at random; the rest end cleanly."""
    have = units(build)
    chains = [("chain", (p, d, str(rng.choice([c for c in CONSUMERS if c in have]))))
              for p in PRODUCERS if p in have for d in DISTANCES]
    pairs = [("pair", (a, b)) for a in have for b in have]
    cards = chains + pairs
    cards = [cards[i] for i in rng.permutation(len(cards))]
    moves = [cards[k::programs] for k in range(programs)]
    faults = [(kind, slot) for kind in error_kinds(build) for slot in SLOTS] if errors else []
    # Too few programs for every fault and a few clean ones: half of them, at random.
    keep = len(faults) if programs >= len(faults) + 4 else programs // 2
    faults = [faults[i] for i in rng.permutation(len(faults))][:keep]
    dealt = faults + [None] * (programs - len(faults))
    return moves, [dealt[i] for i in rng.permutation(programs)]


def make_program(rng, build, moves, error, *, length, idle=0.0):
    """A :class:`Program` of about ``length`` words on ``build``: ``moves`` (from
    :func:`deal`) mixed with ``memory``, ``mxu`` and ``single`` moves, then ``error``."""
    w = _Writer(rng, build)
    dealt = [moves[k] for k in rng.permutation(len(moves))]
    extras = ("memory", "single", "single", "mxu") if build.mxu else ("memory", "single", "single")
    while dealt or len(w.words) < length:
        # Dealt moves spread over the program: about two words per extra move still to come.
        extra_left = max(0, (length - len(w.words)) // 2 - len(dealt))
        if dealt and rng.random() * (len(dealt) + extra_left) < len(dealt):
            move, args = dealt.pop()
        else:
            move, args = str(rng.choice(extras)), ()
        if move == "chain":
            _chain(w, *args)
        elif move == "pair":
            _pair(w, *args)
        elif move == "memory":
            w.memory(str(rng.choice(("vld", "vst"))))
        elif move == "mxu":
            _mxu_sequence(w)
        elif rng.random() < 0.05:
            w.emit("nop")
        else:
            w.compute(str(rng.choice(("alu", "alu", "trans", "reduce"))))
    if error is None:
        w.drain()
    else:
        _error(w, *error)
    lanes = build.lanes
    return Program(np.array(w.words, np.uint32),
                   vreg_values(rng, (_VREGS, _SUBLANES, lanes)),
                   vreg_values(rng, (build.vmem_lines // _SUBLANES, _SUBLANES, lanes)).ravel(),
                   error, idle, int(rng.integers(0, 1 << 31)))
