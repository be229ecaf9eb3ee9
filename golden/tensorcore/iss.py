"""The TensorCore's instruction-set simulator (ISS): :func:`run` executes a program of
:mod:`golden.tensorcore.isa` bundles to its end, :class:`Session` runs one in pieces for a
multi-chip model, and :class:`CoreState` is what they return.

State
-----
32 scalar registers ``s0..s31`` of 32 bits (``s0`` reads 0, writes to it are dropped), the
pc (a bundle index), SMEM (words), the VPU's 32 vregs, VMEM and MXU link
(``golden.vpu``), HBM, and ``n_flags`` 32-bit sync flags (``golden.memory``).

One bundle
----------
1. Fetch IMEM[pc]: a pc outside IMEM stops the core (``imem_range``); decode: a bad
   opcode, a non-zero unused field, or an op in a slot that cannot hold it (``illegal``).
2. A ``wait``/``waitc`` is the bundle's precondition: the bundle issues only once
   ``flags[flag] >= operand`` (unsigned). ``waitc`` then subtracts ``operand``.
3. Every slot reads its operands (scalar registers, SMEM, the DMA descriptor in SMEM) as
   they were before the bundle: no slot sees another slot's scalar or SMEM write.
4. The vector words go to the VPU in slot order (vld, valu0, valu1, push, pop, vst), which
   executes them in order, as ``golden.vpu.execute`` does: a vst stores what the same
   bundle's valu computed. ``vld``/``vst`` address line ``base + s[r]`` (``r`` from vaddr),
   which must fit the 16-bit base field; the VPU then range-checks all 8 lines.
5. The misc op acts after the vector words: a DMA sees the bundle's vst.
6. Writes land: scalar slot 0 then slot 1 (so slot 1 wins a register both write), the
   ``sw``, the flags. A taken branch or ``loop`` sets the next pc, else pc + 1.

A bundle that faults does nothing at all and the core stops there: ``error`` names the
fault (:data:`ERRORS`, whose index is the RTL's error code), ``error_pc`` the bundle.
Faults are checked in the order above (fetch, decode, wait flag, scalar slots, vector slots
in order, misc), the first one wins.

DMA and the memory-ordering contract
------------------------------------
``dma`` reads a :data:`DESCRIPTOR_WORDS`-word record at SMEM ``operand`` (layout
:data:`~golden.tensorcore.isa.DESCRIPTOR_LAYOUT`) and the ISS performs the transfer at once,
whole, with ``golden.memory.run``; the flag gains the word count. Hardware runs it in the
background, so a program is well formed only if, between the issue and a wait that covers
it, the core neither reads (``vld``) a VMEM word the DMA writes nor writes (``vst``) a VMEM
word the DMA reads or writes, and does not ``fset`` its flag. A successful wait on flag
``f`` for ``v`` covers an outstanding DMA of ``w`` words on ``f`` when ``v > F - w``, ``F``
being the flag with every issued DMA done (the ISS's value): then no order of completions
passes the wait without it. With ``races="error"`` the ISS stops a program that breaks the
contract (``race``; the RTL has no such check). DMAs among themselves need no care: the DMA
engine keeps their order. The ISS treats flag values as unbounded here: a flag that wraps
past 2**32 while DMAs are outstanding is outside what it checks.

A rejected descriptor (``golden.memory.validate``) or one no Descriptor can hold stops the
core (``dma_*``). ``halt`` stops it; the chip is done once its DMAs are idle too. A wait
no DMA can satisfy blocks forever: ``run`` returns ``status == "blocked"``.
"""

import copy
import dataclasses

import numpy as np

from .. import memory, vpu
from ..formats import check_numerics
from .asm import program_words
from .isa import (_M32, BUNDLE_WORDS, DESCRIPTOR_WORDS, ERRORS, SLOTS, SREGS, VECTOR_SLOTS,
                  IllegalBundle, decode_bundle, descriptor_from_words)

__all__ = ["CoreState", "run", "Session", "DEFAULT_HBM_WORDS", "DEFAULT_SMEM_WORDS"]

DEFAULT_HBM_WORDS = 1 << 16
DEFAULT_SMEM_WORDS = 1024


def _s32(x):
    return x - (1 << 32) if x >> 31 else x


_ALU_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "and": lambda a, b: a & b,
    "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b, "sll": lambda a, b: a << (b & 31),
    "srl": lambda a, b: a >> (b & 31), "sra": lambda a, b: _s32(a) >> (b & 31),
    "slt": lambda a, b: int(_s32(a) < _s32(b)), "sltu": lambda a, b: int(a < b),
}
_IMM_ALU = {"addi": "add", "andi": "and", "ori": "or", "xori": "xor", "slli": "sll",
            "srli": "srl", "srai": "sra", "slti": "slt", "sltiu": "sltu"}
_BRANCHES = {"beq": lambda a, b: a == b, "bne": lambda a, b: a != b,
             "blt": lambda a, b: _s32(a) < _s32(b), "bge": lambda a, b: _s32(a) >= _s32(b),
             "bltu": lambda a, b: a < b, "bgeu": lambda a, b: a >= b}


@dataclasses.dataclass
class CoreState:
    """What :func:`run` returns: the final architectural state and why the core stopped.

    ``status`` is "halted" (a ``halt`` issued), "error" (``error`` names the fault,
    :data:`ERRORS`, and ``error_pc`` its bundle, which did nothing), "blocked" (a wait no
    DMA can satisfy; ``waiting`` is ``(flag, value)``) or "watchdog" (``max_bundles``
    issued). ``pc`` is the bundle the core stopped at (the halt, the faulting or waiting
    bundle, or the next to issue); ``message`` says in words what the core was doing.
    ``bundles`` counts issued bundles, ``delay_cycles`` the cycles ``delay`` asked for,
    ``dmas`` the DMAs issued; ``pushes`` lists the remote pushes sent
    (``golden.memory.Push``, for the system model to land).
    """
    sregs: np.ndarray
    vregs: np.ndarray
    smem: np.ndarray
    vmem: np.ndarray
    hbm: np.ndarray
    flags: np.ndarray
    mxu: vpu.MXUState | None
    pc: int
    status: str
    bundles: int
    delay_cycles: int
    dmas: int
    pushes: list
    error: str = "none"
    error_pc: int | None = None
    waiting: tuple | None = None
    message: str = ""

    @property
    def halted(self):
        return self.status == "halted"

    @property
    def error_code(self):
        """The RTL's error code: the index of ``error`` in :data:`ERRORS`."""
        return ERRORS.index(self.error)


class _Fault(Exception):
    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


@dataclasses.dataclass(frozen=True)
class _Stop:
    """Why :meth:`_Core.step` stopped the core."""
    status: str
    message: str
    error: str = "none"
    waiting: tuple | None = None


@dataclasses.dataclass
class _Transfer:
    """A DMA the core has not yet seen complete: the flag that signals it and its VMEM words
    (each sorted and unique, as ``np.unique`` gives them)."""
    flag: int | None
    words: int
    reads: np.ndarray
    writes: np.ndarray
    pc: int
    source: int | None = None     # a push landed from this chip (Session.land); pc unused

    def __post_init__(self):
        # Word extents, so that most accesses are cleared without a set lookup.
        self.read_span, self.write_span = _ends(self.reads), _ends(self.writes)
        spans = [s for s in (self.read_span, self.write_span) if s is not None]
        self.span = (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None


def _ends(words):
    return (int(words[0]), int(words[-1])) if words.size else None


def _vmem_words(d, landing=False):
    """(reads, writes): the VMEM words of a DMA, or of a push as it lands, sorted and unique."""
    src, dst = memory.addresses(d)
    if landing:
        reads, writes = src[:0], dst if d.dst[2] == "vmem" else dst[:0]
    else:
        reads = src if d.src[0] == "vmem" else src[:0]
        writes = dst if d.dst == ("vmem", d.dst[-1]) else dst[:0]
    return _sorted_unique(reads), _sorted_unique(writes)


def _sorted_unique(words):
    """``np.unique(words)``: ``words`` itself when they increase already, as most DMAs'
    addresses do, since that check costs less than the sort."""
    return words if (words[1:] > words[:-1]).all() else np.unique(words)


def _members(values, words, span):
    """``np.isin(values, words)`` for sorted unique ``words`` whose extent is ``span``."""
    if span is None:
        return np.zeros(len(values), bool)
    lo, hi = span
    if hi - lo + 1 == len(words):           # a range (as DMAs mostly move): no search
        return (values >= lo) & (values <= hi)
    # Cheaper than np.isin on these small arrays.
    return words[np.searchsorted(words, values).clip(max=len(words) - 1)] == values


def _image(name, value, default_words):
    if value is None:
        return np.zeros(default_words, np.uint32)
    if not isinstance(value, np.ndarray) or value.dtype != np.uint32 or value.ndim != 1:
        raise ValueError(f"{name} must be a 1-D numpy uint32 array")
    if len(value) > memory.MAX_WORDS:
        raise ValueError(f"{name} has {len(value)} words, more than {memory.MAX_WORDS}")
    return value.copy()


def _positive(name, value, most=None):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 \
            or (most is not None and value > most):
        raise ValueError(f"{name} must be an integer in 1..{most or 'inf'}, not {value!r}")
    return value


_BASE_LOW, _BASE_WIDTH = vpu.FIELDS["base"]
_BASE_MASK = ((1 << _BASE_WIDTH) - 1) << _BASE_LOW


def _vector_words(bundle, words):
    """(slot, instruction, word) of the bundle's vector slots that are not nops, in
    execution order. Decoding accepts only the word ``golden.vpu.encode`` gives an
    instruction, so the IMEM words are the instructions' encodings."""
    words = dict(zip(SLOTS, words.tolist()))
    return [(slot, getattr(bundle, slot), words[slot]) for slot in VECTOR_SLOTS
            if getattr(bundle, slot).op != "nop"]


class _Core:
    """The ISS's mutable state and the bundle semantics of the module docstring."""

    def __init__(self, imem, *, hbm, vmem, smem, sregs, vregs, flags, numerics, lanes,
                 n_flags, n_chips, mxu, races):
        self.imem, self.hbm, self.vmem, self.smem = imem, hbm, vmem, smem
        self.sregs, self.vregs, self.flags, self.mxu = sregs, vregs, flags, mxu
        self.numerics, self.lanes, self.n_flags, self.n_chips = numerics, lanes, n_flags, n_chips
        self.races = races == "error"
        self.pc, self.bundles, self.delay_cycles, self.dmas = 0, 0, 0, 0
        self.pushes, self.transfers = [], []
        self.last_branch = None
        self.decoded = {}
        self.vector_words = {}

    def step(self):
        """Issue the bundle at pc; returns None, or a :class:`_Stop` if the core stops."""
        pc = self.pc
        if pc >= len(self.imem):
            return _Stop("error", f"pc {pc} is outside IMEM ({len(self.imem)} bundles)",
                         "imem_range")
        if pc not in self.decoded:                   # IMEM is read-only: decode once
            try:
                self.decoded[pc] = decode_bundle(self.imem[pc])
            except IllegalBundle as error:
                return _Stop("error", f"illegal bundle at pc {pc}: {error}", "illegal")
            self.vector_words[pc] = _vector_words(self.decoded[pc], self.imem[pc])
        b = self.decoded[pc]
        r = self.sregs.tolist()
        misc = b.misc
        operand = (r[misc.ra] + misc.imm) & _M32
        try:
            if misc.spec.flag and misc.flag >= self.n_flags:
                raise _Fault("flag_range", f"{misc}: there are {self.n_flags} flags")
            if misc.op in ("wait", "waitc"):
                have = int(self.flags[misc.flag])
                if have < operand:
                    return _Stop("blocked", f"blocked at pc {pc}: {misc} waits for "
                                            f"f{misc.flag} >= {operand}, which is {have} with "
                                            f"no DMA in flight to raise it",
                                 waiting=(misc.flag, operand))
                self._cover(misc.flag, operand)
            scalar = [self._scalar(ins, r, pc) for ins in (b.scalar0, b.scalar1)]
            vector = self._vector(b, r, self.vector_words[pc])
            dma = self._misc_check(misc, operand)
        except _Fault as fault:
            return _Stop("error", f"pc {pc}: {fault}", fault.kind)
        self._commit(b, pc, operand, scalar, vector, dma)
        return _Stop("halted", f"halted at pc {pc}") if misc.op == "halt" else None

    def _smem_addr(self, address, what, words=1):
        if address + words > len(self.smem):
            raise _Fault("smem_range", f"{what} reads or writes SMEM word "
                                       f"{max(address, len(self.smem))} of {len(self.smem)}")
        return address

    def _scalar(self, ins, r, pc):
        """(register write or None, SMEM store or None, branch target or None)."""
        spec, op = ins.spec, ins.op
        a, d = r[ins.ra], r[ins.rd]
        if spec.fmt == "n":
            return None, None, None
        if spec.fmt == "l":
            address = self._smem_addr((a + ins.imm) & _M32, str(ins))
            return (ins.rd, int(self.smem[address])), None, None
        if spec.fmt == "s":
            return None, (self._smem_addr((a + ins.imm) & _M32, str(ins)), d), None
        if spec.fmt == "b":
            return None, None, (pc + ins.imm) & _M32 if _BRANCHES[op](d, a) else None
        if spec.fmt == "loop":
            count = (d - 1) & _M32
            return (ins.rd, count), None, (pc + ins.imm) & _M32 if count else None
        if spec.fmt == "u":
            return (ins.rd, ins.imm << 16), None, None
        b = r[ins.rb] if spec.fmt == "r" else ins.imm & _M32
        return (ins.rd, _ALU_OPS[_IMM_ALU.get(op, op)](a, b) & _M32), None, None

    def _vector(self, b, r, vector_words):
        """The VPU state after the bundle's vector words, as golden.vpu.execute gives it,
        or None when they are all nops."""
        words, fault = [], None
        for slot, ins, word in vector_words:
            if slot in ("vld", "vst"):
                reg = b.vld_reg if slot == "vld" else b.vst_reg
                base = r[reg] + ins.base
                if base >= 1 << _BASE_WIDTH:
                    fault = _Fault("vmem_range", f"{slot}: base line s{reg} + {ins.base} = "
                                                 f"{base} does not fit 16 bits")
                    break
                word = word & ~_BASE_MASK | base << _BASE_LOW
                if self.races and self.transfers:
                    fault = self._race(ins, base)
                    if fault:
                        break
            words.append(word)
        state = None
        if words:
            try:
                state = vpu.execute(np.array(words, np.uint32), vregs=self.vregs,
                                    vmem=self.vmem, lanes=self.lanes, numerics=self.numerics,
                                    mxu=self._mxu_for(b))
            except vpu.ProgramError as error:
                raise _Fault(error.kind, f"vector slots: {error}") from None
        if fault:
            raise fault
        return state

    def _mxu_for(self, b):
        """The MXU state the bundle's vector words may change: a copy, so that a fault
        leaves the core's untouched."""
        if self.mxu is None:
            return False
        return copy.deepcopy(self.mxu) if b.push.op != "nop" or b.pop.op != "nop" else self.mxu

    def _race(self, ins, base):
        """The race fault of a vld or vst (``ins``) of base line ``base``, else None."""
        last = base + ins.stride * (vpu.SUBLANES - 1)
        if last * self.lanes >= len(self.vmem):
            return None                                 # the VPU reports vmem_range
        lo, hi = base * self.lanes, (last + 1) * self.lanes - 1         # strides are >= 0
        touched = None
        for t in self.transfers:
            span = t.write_span if ins.op == "vld" else t.span
            if span is None or span[1] < lo or span[0] > hi:
                continue
            if touched is None:
                lines = base + ins.stride * np.arange(vpu.SUBLANES)
                touched = (lines[:, None] * self.lanes + np.arange(self.lanes)).ravel()
            hit = _members(touched, t.writes, t.write_span)
            if ins.op != "vld":
                hit |= _members(touched, t.reads, t.read_span)
            hit = touched[hit]
            if hit.size:
                what = f"the DMA issued at pc {t.pc}" if t.source is None else \
                    f"a push landed from chip {t.source}"
                return _Fault("race", f"{dataclasses.replace(ins, base=base)} touches VMEM "
                                      f"word {hit[0]} of {what} before a wait covers it")
        return None

    def _misc_check(self, misc, operand):
        """The descriptor of a ``dma`` (checked), else None; faults for a bad ``fset``."""
        if misc.op == "fset" and self.races and any(t.flag == misc.flag for t in self.transfers):
            raise _Fault("race", f"{misc} while a DMA on f{misc.flag} is outstanding")
        if misc.op != "dma":
            return None
        address = self._smem_addr(operand, str(misc), DESCRIPTOR_WORDS)
        try:
            d = descriptor_from_words(self.smem[address:address + DESCRIPTOR_WORDS])
        except ValueError as error:
            raise _Fault("dma_format", f"descriptor at SMEM {address}: {error}") from None
        rejected = memory.validate(d, hbm_words=len(self.hbm), vmem_words=len(self.vmem),
                                   n_flags=self.n_flags, n_chips=self.n_chips)
        if rejected:
            raise _Fault(f"dma_{rejected.reason}", f"descriptor at SMEM {address} is rejected: "
                                                   f"{rejected.reason} ({rejected.address})")
        landed = [t for t in self.transfers if t.source is not None] if self.races else ()
        if landed:
            # A push from another chip is not ordered with this chip's DMAs: until a wait
            # covers it, a DMA must not read or write its words either.
            src, dst = memory.addresses(d)
            touched = np.concatenate([src if d.src[0] == "vmem" else src[:0],
                                      dst if d.dst == ("vmem", d.dst[-1]) else dst[:0]])
            for t in landed:
                hit = touched[_members(touched, t.writes, t.write_span)]
                if hit.size:
                    raise _Fault("race", f"{misc} touches VMEM word {hit[0]} of a push landed "
                                         f"from chip {t.source} before a wait covers it")
        return d

    def _commit(self, b, pc, operand, scalar, vector, dma):
        if vector is not None:
            self.vregs, self.vmem = vector.vregs, vector.vmem
            self.mxu = vector.mxu
        for write, store, _ in scalar:                  # slot 1 after slot 0: it wins
            if write and write[0]:
                self.sregs[write[0]] = write[1]
            if store:
                self.smem[store[0]] = store[1]
        misc = b.misc
        if misc.op == "waitc":
            self.flags[misc.flag] = (int(self.flags[misc.flag]) - operand) & _M32
        elif misc.op == "fset":
            self.flags[misc.flag] = operand
        elif misc.op == "fadd":
            self.flags[misc.flag] = (int(self.flags[misc.flag]) + operand) & _M32
        elif misc.op == "delay":
            self.delay_cycles += operand
        elif misc.op == "dma":
            self._dma(dma, pc)
        target = scalar[1][2]
        if target is not None:
            self.last_branch = (pc, target)
        self.pc = pc if misc.op == "halt" else pc + 1 if target is None else target
        self.bundles += 1

    def _dma(self, d, pc):
        result = memory.run(self.hbm, self.vmem, [d], n_flags=self.n_flags, lanes=self.lanes,
                            n_chips=self.n_chips, flags=self.flags)
        self.hbm, self.vmem, self.flags = result.hbm, result.vmem, result.flags
        self.pushes += result.pushes
        self.dmas += 1
        if self.races:
            self.transfers.append(_Transfer(d.sent_flag if d.remote else d.flag, d.words,
                                            *_vmem_words(d), pc))

    def _cover(self, flag, value):
        done = int(self.flags[flag])
        self.transfers = [t for t in self.transfers
                          if not (t.flag == flag and value > done - t.words)]


def _new_core(program, *, hbm, vmem, smem, sregs, vregs, flags, numerics, lanes, n_flags,
              n_chips, imem_bundles, mxu, mxu_results, races, max_bundles):
    """A validated :class:`_Core` at pc 0 and the checked ``max_bundles`` (``run``'s
    arguments and errors)."""
    check_numerics(numerics)
    lanes = _positive("lanes", lanes)
    n_flags = _positive("n_flags", n_flags, memory.MAX_FLAGS)
    n_chips = _positive("n_chips", n_chips, memory.MAX_CHIPS)
    max_bundles = _positive("max_bundles", max_bundles)
    if races not in ("error", "ignore"):
        raise ValueError(f"races must be 'error' or 'ignore', not {races!r}")
    if not isinstance(mxu, bool):
        raise ValueError(f"mxu must be True or False, not {mxu!r}")
    imem = program_words(program)
    if imem_bundles is not None:
        if _positive("imem_bundles", imem_bundles) < len(imem):
            raise ValueError(f"the program has {len(imem)} bundles, more than imem_bundles "
                             f"{imem_bundles}")
        imem = np.concatenate([imem, np.zeros((imem_bundles - len(imem), BUNDLE_WORDS),
                                              np.uint32)])
    vmem = _image("vmem", vmem, vpu.DEFAULT_VMEM_LINES * lanes)
    if len(vmem) % lanes:
        raise ValueError(f"vmem has {len(vmem)} words, not whole {lanes}-word lines")
    if sregs is None:
        sregs = np.zeros(SREGS, np.uint32)
    if not isinstance(sregs, np.ndarray) or sregs.dtype != np.uint32 or sregs.shape != (SREGS,):
        raise ValueError(f"sregs must be a uint32 array of shape ({SREGS},)")
    if sregs[0]:
        raise ValueError("s0 reads 0: sregs[0] must be 0")
    shape = (vpu.VREGS, vpu.SUBLANES, lanes)
    if vregs is None:
        vregs = np.zeros(shape, np.uint32)
    if not isinstance(vregs, np.ndarray) or vregs.dtype != np.uint32 or vregs.shape != shape:
        raise ValueError(f"vregs must be a uint32 array of shape {shape}")
    if flags is None:
        flags = np.zeros(n_flags, np.uint32)
    if not isinstance(flags, np.ndarray) or flags.dtype != np.uint32 or flags.shape != (n_flags,):
        raise ValueError(f"flags must be a uint32 array of shape ({n_flags},)")
    has_mxu = mxu and lanes % vpu.SUBLANES == 0
    if mxu_results is not None:
        mxu_results = _positive("mxu_results", mxu_results)
    core = _Core(imem, hbm=_image("hbm", hbm, DEFAULT_HBM_WORDS), vmem=vmem,
                 smem=_image("smem", smem, DEFAULT_SMEM_WORDS), sregs=sregs.copy(),
                 vregs=vregs.copy(), flags=flags.copy(), numerics=numerics, lanes=lanes,
                 n_flags=n_flags, n_chips=n_chips, races=races,
                 mxu=vpu.MXUState(lanes=lanes, numerics=numerics, capacity=mxu_results)
                 if has_mxu else None)
    return core, max_bundles


def run(program, *, hbm=None, vmem=None, smem=None, sregs=None, vregs=None, flags=None,
        numerics="tpu", lanes=8, n_flags=16, n_chips=1, imem_bundles=None, mxu=True,
        mxu_results=None, races="error", max_bundles=100_000, trace=None):
    """Execute a TensorCore program from pc 0 until it halts, faults, blocks or hits the
    watchdog; returns the final :class:`CoreState`.

    Parameters
    ----------
    program : str or integer words
        Assembly text, or an IMEM image ``[n, 10]`` (or flat).
    hbm, vmem, smem : 1-D uint32 arrays, optional
        Initial images (not modified); default zeros of :data:`DEFAULT_HBM_WORDS`,
        ``golden.vpu.DEFAULT_VMEM_LINES`` lines and :data:`DEFAULT_SMEM_WORDS` words.
    sregs : uint32 [32], optional
        Initial scalar registers (default 0; ``s0`` must be 0).
    vregs : uint32 [32, 8, lanes], optional
    flags : uint32 [n_flags], optional
    numerics : "tpu" or "ieee"
    lanes : int
        Words per VMEM line and vreg sublane; the MXU needs a multiple of 8.
    n_flags, n_chips : int
        Sync flags (1..128), and chips a remote push may name.
    imem_bundles : int, optional
        IMEM size in bundles (default the program's length); the rest is zero, which is
        illegal.
    mxu : bool
        Whether the core has an MXU (it needs ``lanes`` a multiple of 8).
    mxu_results : int, optional
        The MXU result queue's capacity in rows (default unbounded).
    races : "error" or "ignore"
        Whether a break of the memory-ordering contract stops the core (``race``).
    max_bundles : int
        Watchdog: the most bundles to issue.
    trace : callable, optional
        ``trace(pc, bundle, sregs)`` after each bundle issues: its decoded :class:`Bundle`
        and the scalar registers it read. For coverage of what a program did.

    Raises
    ------
    ValueError
        On bad arguments (never for a program fault: that is in the result).
    """
    core, max_bundles = _new_core(
        program, hbm=hbm, vmem=vmem, smem=smem, sregs=sregs, vregs=vregs, flags=flags,
        numerics=numerics, lanes=lanes, n_flags=n_flags, n_chips=n_chips,
        imem_bundles=imem_bundles, mxu=mxu, mxu_results=mxu_results, races=races,
        max_bundles=max_bundles)
    stop = None
    while stop is None and core.bundles < max_bundles:
        pc, issued = core.pc, core.bundles
        before = core.sregs.copy() if trace is not None else None
        stop = core.step()
        if trace is not None and core.bundles > issued:
            trace(pc, core.decoded[pc], before)
    return _result(core, stop, max_bundles)


def _result(core, stop, max_bundles):
    if stop is None:
        doing = f"at pc {core.pc}"
        if core.last_branch:
            doing += f", last branch from pc {core.last_branch[0]} to {core.last_branch[1]}"
        stop = _Stop("watchdog", f"watchdog: {max_bundles} bundles issued without a halt; "
                                 f"{doing}")
    return CoreState(sregs=core.sregs, vregs=core.vregs, smem=core.smem, vmem=core.vmem,
                     hbm=core.hbm, flags=core.flags, mxu=core.mxu, pc=core.pc,
                     status=stop.status, bundles=core.bundles, delay_cycles=core.delay_cycles,
                     dmas=core.dmas, pushes=core.pushes, error=stop.error,
                     error_pc=core.pc if stop.status == "error" else None,
                     waiting=stop.waiting, message=stop.message)


class Session:
    """One core run in pieces, for a multi-chip model (``golden.system``): :meth:`resume`
    runs like :func:`run` until the core halts, faults, blocks on a wait or has issued
    ``max_bundles`` more bundles; :meth:`land` delivers remote pushes from other chips;
    a blocked core then resumes at its waiting bundle (a blocked wait changes nothing).

    Takes :func:`run`'s keyword arguments except ``max_bundles`` and ``trace``, with the
    same defaults and errors.

    Received pushes and the memory-ordering contract: with ``races="error"`` each landed
    push is tracked like a DMA of this core on its ``flag`` whose writes are its VMEM
    words, so touching them (``vld``, ``vst``, or a ``dma`` reading or writing them)
    before a wait on that flag covers the push stops the core with ``race``: on hardware
    the push may land later, and it is not ordered with this chip's own DMAs.
    """

    def __init__(self, program, **kwargs):
        unknown = set(kwargs) - set(_SESSION_ARGS)
        if unknown:
            raise ValueError(f"Session takes run's keyword arguments except max_bundles and "
                             f"trace, not {', '.join(sorted(unknown))}")
        args = dict(_SESSION_ARGS, **kwargs)
        self._core, _ = _new_core(program, max_bundles=1, **args)
        self._final = None          # the CoreState of a halt or a fault: the core is done
        self._sent = 0              # pushes already handed out by resume

    def resume(self, max_bundles=100_000):
        """Issue bundles until a stop; returns the :class:`CoreState`, whose ``pushes`` are
        only those sent during this call (a halted or faulted core stays as it stopped,
        sending nothing more)."""
        max_bundles = _positive("max_bundles", max_bundles)
        if self._final is not None:
            return dataclasses.replace(self._final, pushes=[])
        core, limit, stop = self._core, self._core.bundles + max_bundles, None
        while stop is None and core.bundles < limit:
            stop = core.step()
        state = _result(core, stop, max_bundles)
        pushes, self._sent = core.pushes[self._sent:], len(core.pushes)
        if state.status in ("halted", "error"):
            self._final = dataclasses.replace(state, pushes=list(core.pushes))
        return dataclasses.replace(state, pushes=pushes)

    def land(self, pushes, *, source=None):
        """Deliver remote pushes (``golden.memory.Push``) to this core: each writes its
        words and adds its word count to its flag, as ``golden.memory.land`` (which raises
        ``ValueError`` for a push outside this chip's memories or flags). ``source`` is the
        sending chip, for race messages."""
        core = self._core
        core.hbm, core.vmem, core.flags = memory.land(core.hbm, core.vmem, core.flags, pushes)
        if core.races:
            for p in pushes:
                d = p.descriptor
                core.transfers.append(_Transfer(d.flag, d.words, *_vmem_words(d, landing=True),
                                                -1, source))


_SESSION_ARGS = dict(hbm=None, vmem=None, smem=None, sregs=None, vregs=None, flags=None,
                     numerics="tpu", lanes=8, n_flags=16, n_chips=1, imem_bundles=None,
                     mxu=True, mxu_results=None, races="error")
