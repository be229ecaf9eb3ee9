"""Golden model of the TensorCore (SPEC section 4.7): its VLIW instruction set, assembler,
disassembler and instruction-set simulator (ISS). ``docs/isa.md`` is the programmer's guide;
its tables are generated from the tables here.

Bundle
------
A bundle is :data:`BUNDLE_WORDS` (10) 32-bit words, one per slot (:data:`SLOTS`), 320 bits:

==  ========  ===============================================================
 0  scalar0   scalar ALU op, ``lw`` or ``sw``
 1  scalar1   scalar ALU op, branch or ``loop``
 2  vld       ``golden.vpu`` word: ``vld`` or ``nop``
 3  valu0     ``golden.vpu`` word: an ALU, transcendental or reduce op, or ``nop``
 4  valu1     as valu0
 5  push      ``golden.vpu`` word: ``push_weights``, ``push_lhs``, ``push_lhs_acc``, ``nop``
 6  pop       ``golden.vpu`` word: ``pop`` or ``nop``
 7  vst       ``golden.vpu`` word: ``vst`` or ``nop``
 8  vaddr     base registers of vld (bits 4..0) and vst (bits 9..5); bits 31..10 zero
 9  misc      DMA issue, flag wait / set / add, delay, halt, ``nop``
==  ========  ===============================================================

An empty slot holds its nop word. Opcode 0 is unassigned in every slot (and vaddr 0 means
"no base register"), so zeroed IMEM never executes: the all-zero bundle is illegal.

Scalar words (:data:`SCALAR_OPS`, fields :data:`SCALAR_FIELDS`) have the opcode in bits
31..26, ``rd`` 25..21, ``ra`` 20..16, ``rb`` 15..11 and ``imm`` 15..0; misc words
(:data:`MISC_OPS`, :data:`MISC_FIELDS`) the opcode in 31..28, ``flag`` 27..21, ``ra`` 20..16
and ``imm`` 15..0. Fields an op does not use must be zero. Vector slots carry ``golden.vpu``
words unchanged.

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
:data:`DESCRIPTOR_LAYOUT`) and the ISS performs the transfer at once, whole, with
``golden.memory.run``; the flag gains the word count. Hardware runs it in the background,
so a program is well formed only if, between the issue and a wait that covers it, the core
neither reads (``vld``) a VMEM word the DMA writes nor writes (``vst``) a VMEM word the
DMA reads or writes, and does not ``fset`` its flag. A successful wait on flag ``f`` for
``v`` covers an outstanding DMA of ``w`` words on ``f`` when ``v > F - w``, ``F`` being the
flag with every issued DMA done (the ISS's value): then no order of completions passes
the wait without it. With ``races="error"`` the ISS stops a program that breaks the
contract (``race``; the RTL has no such check). DMAs among themselves need no care:
the DMA engine keeps their order. The ISS treats flag values as unbounded here: a flag that
wraps past 2**32 while DMAs are outstanding is outside what it checks.

A rejected descriptor (``golden.memory.validate``) or one no Descriptor can hold stops the
core (``dma_*``). ``halt`` stops it; the chip is done once its DMAs are idle too. A wait
no DMA can satisfy blocks forever: ``run`` returns ``status == "blocked"``.
"""

import copy
import dataclasses
import re

import numpy as np

from . import memory, vpu
from .formats import check_numerics

__all__ = [
    "BUNDLE_WORDS", "SLOTS", "VECTOR_SLOTS", "SREGS", "SCALAR_FIELDS", "MISC_FIELDS",
    "VADDR_FIELDS", "ScalarOp", "SCALAR_OPS", "MiscOp", "MISC_OPS", "VECTOR_SLOT_UNITS",
    "ERRORS", "ERROR_NOTES", "SCALAR_FORMATS", "DESCRIPTOR_WORDS", "DESCRIPTOR_LAYOUT",
    "CONTROL_FIELDS",
    "ScalarInstruction", "MiscInstruction", "Bundle", "IllegalBundle",
    "encode_bundle", "decode_bundle", "descriptor_words", "descriptor_from_words",
    "assemble", "disassemble", "program_words", "CoreState", "run", "Session",
    "DEFAULT_HBM_WORDS", "DEFAULT_SMEM_WORDS",
]

BUNDLE_WORDS = 10
SLOTS = ("scalar0", "scalar1", "vld", "valu0", "valu1", "push", "pop", "vst", "vaddr", "misc")
#: The slots holding golden.vpu words, in the order the VPU executes them.
VECTOR_SLOTS = ("vld", "valu0", "valu1", "push", "pop", "vst")
SREGS = 32
DEFAULT_HBM_WORDS = 1 << 16
DEFAULT_SMEM_WORDS = 1024
_M32 = 0xFFFFFFFF

#: Bit fields, name -> (lowest bit, width).
SCALAR_FIELDS = {"opcode": (26, 6), "rd": (21, 5), "ra": (16, 5), "rb": (11, 5),
                 "imm": (0, 16)}
MISC_FIELDS = {"opcode": (28, 4), "flag": (21, 7), "ra": (16, 5), "imm": (0, 16)}
VADDR_FIELDS = {"vld_reg": (0, 5), "vst_reg": (5, 5)}

#: The golden.vpu units each vector slot accepts (every one also takes ``nop``).
VECTOR_SLOT_UNITS = {"vld": ("load",), "valu0": ("alu", "trans", "reduce"),
                     "valu1": ("alu", "trans", "reduce"), "push": ("push",),
                     "pop": ("pop",), "vst": ("store",)}


@dataclasses.dataclass(frozen=True)
class ScalarOp:
    """A scalar op: opcode, format, the slots that take it, and how ``imm`` reads.

    Formats and their assembly operands: ``n`` none; ``r`` rd, ra, rb; ``i`` rd, ra, imm;
    ``u`` rd, imm; ``l``/``s`` rd, imm(ra) (for ``sw`` rd is the data, read);
    ``b`` rd, ra, target (both read); ``loop`` rd, target. ``imm`` is ``s16`` (signed),
    ``u16`` (zero-extended), ``shamt`` (0..31) or None (zero). ``note`` is the semantics.
    """
    name: str
    opcode: int
    fmt: str
    slots: tuple
    imm: str | None
    note: str


_ALU, _MEM, _CTRL = ("scalar0", "scalar1"), ("scalar0",), ("scalar1",)


def _scalar_table():
    rows = [("nop", "n", _ALU, None, "nothing")]
    rows += [(op, "r", _ALU, None, note) for op, note in (
        ("add", "rd = ra + rb"), ("sub", "rd = ra - rb"), ("and", "rd = ra & rb"),
        ("or", "rd = ra | rb"), ("xor", "rd = ra ^ rb"), ("sll", "rd = ra << (rb mod 32)"),
        ("srl", "rd = ra >> (rb mod 32), logical"), ("sra", "rd = ra >> (rb mod 32), arithmetic"),
        ("slt", "rd = 1 if ra < rb signed, else 0"),
        ("sltu", "rd = 1 if ra < rb unsigned, else 0"))]
    rows += [(op, "i", _ALU, kind, note) for op, kind, note in (
        ("addi", "s16", "rd = ra + imm"), ("andi", "u16", "rd = ra & imm"),
        ("ori", "u16", "rd = ra | imm"), ("xori", "u16", "rd = ra ^ imm"),
        ("slli", "shamt", "rd = ra << imm"), ("srli", "shamt", "rd = ra >> imm, logical"),
        ("srai", "shamt", "rd = ra >> imm, arithmetic"),
        ("slti", "s16", "rd = 1 if ra < imm signed, else 0"),
        ("sltiu", "s16", "rd = 1 if ra < (imm sign-extended) unsigned, else 0"))]
    rows += [("lui", "u", _ALU, "u16", "rd = imm << 16"),
             ("lw", "l", _MEM, "s16", "rd = SMEM[ra + imm]"),
             ("sw", "s", _MEM, "s16", "SMEM[ra + imm] = rd")]
    rows += [(op, "b", _CTRL, "s16", f"if rd {cmp} ra{how}: pc = pc + imm")
             for op, cmp, how in (("beq", "==", ""), ("bne", "!=", ""), ("blt", "<", " signed"),
                                  ("bge", ">=", " signed"), ("bltu", "<", " unsigned"),
                                  ("bgeu", ">=", " unsigned"))]
    rows += [("loop", "loop", _CTRL, "s16", "rd = rd - 1; if rd != 0: pc = pc + imm")]
    # Opcode 0 stays unassigned: a zero word is illegal.
    return {name: ScalarOp(name, code, *rest) for code, (name, *rest) in enumerate(rows, 1)}


#: Every scalar op by name.
SCALAR_OPS = _scalar_table()
_SCALAR_BY_CODE = {op.opcode: op for op in SCALAR_OPS.values()}
#: Assembly operands of each scalar format.
SCALAR_FORMATS = {"n": "", "r": "rd, ra, rb", "i": "rd, ra, imm", "u": "rd, imm",
                  "l": "rd, imm(ra)", "s": "rd, imm(ra)", "b": "rd, ra, target",
                  "loop": "rd, target"}
_FMT_FIELDS = {"n": (), "r": ("rd", "ra", "rb"), "i": ("rd", "ra", "imm"), "u": ("rd", "imm"),
               "l": ("rd", "ra", "imm"), "s": ("rd", "ra", "imm"), "b": ("rd", "ra", "imm"),
               "loop": ("rd", "imm")}


@dataclasses.dataclass(frozen=True)
class MiscOp:
    """A misc op: opcode, whether it names a flag, whether it has an operand
    (``s[ra] + imm``, imm signed), and its semantics."""
    name: str
    opcode: int
    flag: bool
    operand: bool
    note: str


#: Every misc op by name (opcode 0 unassigned).
MISC_OPS = {op.name: op for op in (
    MiscOp("nop", 1, False, False, "nothing"),
    MiscOp("halt", 2, False, False, "stop the core"),
    MiscOp("dma", 3, False, True, "issue the DMA whose descriptor is at SMEM[operand]"),
    MiscOp("wait", 4, True, True, "issue this bundle once flag >= operand (unsigned)"),
    MiscOp("waitc", 5, True, True, "as wait, then flag -= operand (consume)"),
    MiscOp("fset", 6, True, True, "flag = operand"),
    MiscOp("fadd", 7, True, True, "flag += operand (wrapping)"),
    MiscOp("delay", 8, False, True, "wait operand cycles after this bundle (unsigned)"),
)}
_MISC_BY_CODE = {op.opcode: op for op in MISC_OPS.values()}

#: Stop reasons: ``ERRORS[code]``, code 0 none; the RTL's error codes are these indices.
#: :data:`ERROR_NOTES` says when each happens.
ERRORS = ("none", "illegal", "imem_range", "smem_range", "vmem_range", "flag_range",
          "weights_full", "results_full", "pop_empty", "no_mxu", "dma_format",
          *(f"dma_{reason}" for reason in memory.REASONS), "race")
ERROR_NOTES = {
    "none": "no error",
    "illegal": "bad opcode, non-zero unused field, or an op its slot cannot hold",
    "imem_range": "the pc is outside IMEM (error_pc is that pc)",
    "smem_range": "lw/sw address, or a DMA descriptor word, outside SMEM",
    "vmem_range": "a vld/vst base line over 16 bits, or a line outside VMEM",
    "flag_range": "wait/waitc/fset/fadd names a flag >= n_flags",
    "weights_full": "golden.vpu: push_weights into a full shadow tile",
    "results_full": "golden.vpu: push_lhs(_acc) beyond the MXU result queue",
    "pop_empty": "golden.vpu: pop with fewer than 8 result rows queued",
    "no_mxu": "golden.vpu: MXU op on a core without an MXU",
    "dma_format": "descriptor words no golden.memory.Descriptor can hold",
    "race": "ISS only: the memory-ordering contract is broken",
}
ERROR_NOTES.update({f"dma_{r}": f"golden.memory.validate rejects the descriptor: {r}"
                     for r in memory.REASONS})

# ---------------------------------------------------------------- DMA descriptors

DESCRIPTOR_WORDS = 12
#: SMEM word offset -> (field, meaning). Bases and counts are 24-bit (bits 31..24 zero);
#: strides are int32 with ``|stride| < 2**24``.
DESCRIPTOR_LAYOUT = (
    ("control", "spaces, flags and chip: CONTROL_FIELDS"),
    ("src_base", "source base word"), ("dst_base", "destination base word"),
    ("count0", "innermost count"), ("count1", "middle count (1 if unused)"),
    ("count2", "outer count (1 if unused)"),
    *((f"{side}_stride{i}", f"{side} stride of dimension {i}, int32")
      for side in ("src", "dst") for i in range(3)),
)
#: Bits of the control word, name -> (lowest bit, width); bits 31..26 are zero.
CONTROL_FIELDS = {"src_vmem": (0, 1), "dst_vmem": (1, 1), "remote": (2, 1), "has_sent": (3, 1),
                  "flag": (4, memory.FLAG_BITS), "sent_flag": (11, memory.FLAG_BITS),
                  "chip": (18, memory.CHIP_BITS)}
_CONTROL_USED = sum(((1 << w) - 1) << lo for lo, w in CONTROL_FIELDS.values())


def _put(fields, name, value):
    lo, width = fields[name]
    return (value & ((1 << width) - 1)) << lo


def _get(fields, name, word):
    lo, width = fields[name]
    return (word >> lo) & ((1 << width) - 1)


def descriptor_words(descriptor):
    """The SMEM record of a ``golden.memory.Descriptor``: ``uint32 [DESCRIPTOR_WORDS]``."""
    if not isinstance(descriptor, memory.Descriptor):
        raise TypeError(f"expected a golden.memory.Descriptor, not {type(descriptor).__name__}")
    d = descriptor
    control = (_put(CONTROL_FIELDS, "src_vmem", d.src[-2] == "vmem")
               | _put(CONTROL_FIELDS, "dst_vmem", d.dst[-2] == "vmem")
               | _put(CONTROL_FIELDS, "flag", d.flag))
    if d.remote:
        control |= _put(CONTROL_FIELDS, "remote", 1) | _put(CONTROL_FIELDS, "chip", d.chip)
        if d.sent_flag is not None:
            control |= (_put(CONTROL_FIELDS, "has_sent", 1)
                        | _put(CONTROL_FIELDS, "sent_flag", d.sent_flag))
    words = [control, d.src[-1], d.dst[-1], *d.counts, *d.src_strides, *d.dst_strides]
    return np.array([w & _M32 for w in words], np.uint32)


def descriptor_from_words(words):
    """The ``golden.memory.Descriptor`` an SMEM record holds.

    Raises ``ValueError`` if none can (reserved bits set, a base or count over 24 bits, a
    stride out of range, a chip or sent flag on a local transfer, too many words): the
    ISS's ``dma_format``.
    """
    w = [int(x) for x in np.asarray(words, np.uint32).ravel()]
    if len(w) != DESCRIPTOR_WORDS:
        raise ValueError(f"a descriptor is {DESCRIPTOR_WORDS} words, not {len(w)}")
    control = w[0]
    if control & ~_CONTROL_USED:
        raise ValueError(f"control word {control:#010x} has reserved bits set")
    remote = _get(CONTROL_FIELDS, "remote", control)
    chip, has_sent = _get(CONTROL_FIELDS, "chip", control), _get(CONTROL_FIELDS, "has_sent",
                                                                  control)
    sent = _get(CONTROL_FIELDS, "sent_flag", control)
    if not remote and (chip or has_sent or sent):
        raise ValueError("a local transfer has no chip and no sent flag")
    if not has_sent and sent:
        raise ValueError("sent_flag is set but has_sent is not")
    for name, value in zip(("src_base", "dst_base", "count0", "count1", "count2"), w[1:6]):
        if value >> memory.ADDRESS_BITS:
            raise ValueError(f"{name} {value:#x} does not fit {memory.ADDRESS_BITS} bits")
    strides = [x - (1 << 32) if x >> 31 else x for x in w[6:12]]
    space = ("hbm", "vmem")
    src = (space[_get(CONTROL_FIELDS, "src_vmem", control)], w[1])
    dst_space = space[_get(CONTROL_FIELDS, "dst_vmem", control)]
    dst = ("remote", chip, dst_space, w[2]) if remote else (dst_space, w[2])
    return memory.Descriptor(src, dst, tuple(w[3:6]), tuple(strides[:3]), tuple(strides[3:]),
                             _get(CONTROL_FIELDS, "flag", control),
                             sent_flag=sent if has_sent else None)


# ---------------------------------------------------------------- instructions and bundles

class IllegalBundle(ValueError):
    """Words that are not a valid bundle; the message names the slot."""


def _signed16(value):
    return value - (1 << 16) if value & 0x8000 else value


def _imm_range(kind):
    return {"s16": (-1 << 15, (1 << 15) - 1), "u16": (0, (1 << 16) - 1), "shamt": (0, 31),
            None: (0, 0)}[kind]


def _check_int(name, value, lo, hi):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer in {lo}..{hi}, not {value!r}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class ScalarInstruction:
    """A scalar slot's instruction; ``imm`` holds its value (signed for ``s16`` ops),
    fields the op does not use are 0."""
    op: str
    rd: int = 0
    ra: int = 0
    rb: int = 0
    imm: int = 0

    @property
    def spec(self):
        return SCALAR_OPS[self.op]

    def __str__(self):
        return self.text()

    def text(self, target=None):
        """Assembly text; ``target`` (a label) replaces a branch's offset."""
        s, fmt = self.spec, self.spec.fmt
        if fmt == "n":
            return s.name
        if fmt in ("l", "s"):
            return f"{s.name} s{self.rd}, {self.imm}(s{self.ra})"
        parts = [f"s{getattr(self, f)}" if f != "imm" else str(self.imm)
                 for f in _FMT_FIELDS[fmt]]
        if fmt in ("b", "loop"):
            parts[-1] = target or f"{self.imm:+d}"      # an offset in bundles from this one
        return f"{s.name} " + ", ".join(parts)


@dataclasses.dataclass(frozen=True)
class MiscInstruction:
    """The misc slot's instruction: ``operand = s[ra] + imm`` (imm signed 16-bit)."""
    op: str
    flag: int = 0
    ra: int = 0
    imm: int = 0

    @property
    def spec(self):
        return MISC_OPS[self.op]

    def __str__(self):
        s = self.spec
        parts = [f"f{self.flag}"] if s.flag else []
        if s.operand:
            parts.append(_reg_plus(self.ra, self.imm))
        return s.name + (" " + ", ".join(parts) if parts else "")


def _reg_plus(reg, imm):
    if not reg:
        return str(imm)
    return f"s{reg}" + (f"{imm:+d}" if imm else "")


_SCALAR_NOP, _MISC_NOP = ScalarInstruction("nop"), MiscInstruction("nop")
_VPU_NOP = vpu.Instruction("nop")


@dataclasses.dataclass(frozen=True)
class Bundle:
    """A decoded bundle: one instruction per slot (the nop when empty), and the base
    registers of ``vld`` and ``vst`` (0: none, since s0 reads 0)."""
    scalar0: ScalarInstruction = _SCALAR_NOP
    scalar1: ScalarInstruction = _SCALAR_NOP
    vld: vpu.Instruction = _VPU_NOP
    valu0: vpu.Instruction = _VPU_NOP
    valu1: vpu.Instruction = _VPU_NOP
    push: vpu.Instruction = _VPU_NOP
    pop: vpu.Instruction = _VPU_NOP
    vst: vpu.Instruction = _VPU_NOP
    vld_reg: int = 0
    vst_reg: int = 0
    misc: MiscInstruction = _MISC_NOP

    def __str__(self):
        return self.text()

    def text(self, target=None):
        """Assembly text, slots in order; ``target`` (a label) replaces a branch's offset."""
        parts = [str(self.scalar0), self.scalar1.text(target), str(self.misc)]
        if self.scalar0.op == "nop" != self.scalar1.op and len(self.scalar1.spec.slots) == 2:
            parts[0] = "snop"                           # keeps the ALU op in scalar1
        for slot in VECTOR_SLOTS:
            ins = getattr(self, slot)
            text = str(ins)
            if slot == "valu0" and ins.op == "nop" and self.valu1.op != "nop":
                text = "vnop"                           # keeps the ALU op in valu1
            reg = {"vld": self.vld_reg, "vst": self.vst_reg}.get(slot, 0)
            if reg:
                text = f"{ins.op} v{ins.vr}, s{reg}" + (f"+{ins.base}" if ins.base else "") \
                    + f", {ins.stride}"
            parts.append(text)
        parts = [p for p in parts if p != "nop"]
        return " | ".join(parts) or "nop"


def _vector_unit(ins):
    unit = ins.spec.unit
    if unit == "mxu":
        return "pop" if ins.op == "pop" else "push"
    return unit


def _check_slot(slot, ins):
    """``IllegalBundle`` unless ``ins`` may sit in ``slot``."""
    if ins.op == "nop":
        return
    if slot in VECTOR_SLOTS:
        if _vector_unit(ins) not in VECTOR_SLOT_UNITS[slot]:
            raise IllegalBundle(f"{slot}: {ins.op} cannot sit in this slot")
    elif slot.startswith("scalar") and slot not in ins.spec.slots:
        raise IllegalBundle(f"{slot}: {ins.op} only sits in {' or '.join(ins.spec.slots)}")


def _encode_scalar(ins):
    spec = SCALAR_OPS.get(ins.op) if isinstance(ins, ScalarInstruction) else None
    if spec is None:
        raise ValueError(f"not a scalar instruction: {ins!r}")
    used = _FMT_FIELDS[spec.fmt]
    word = spec.opcode << SCALAR_FIELDS["opcode"][0]
    for name in ("rd", "ra", "rb", "imm"):
        value = getattr(ins, name)
        if name not in used:
            if value != 0:
                raise ValueError(f"{spec.name} has no {name} field (got {value!r})")
            continue
        lo, hi = _imm_range(spec.imm) if name == "imm" else (0, SREGS - 1)
        word |= _put(SCALAR_FIELDS, name, _check_int(f"{spec.name} {name}", value, lo, hi))
    return word


def _decode_scalar(word, slot):
    spec = _SCALAR_BY_CODE.get(_get(SCALAR_FIELDS, "opcode", word))
    if spec is None:
        raise IllegalBundle(f"{slot}: {word:#010x}: opcode "
                            f"{_get(SCALAR_FIELDS, 'opcode', word)} is not assigned")
    fields, used = {}, 0
    for name in _FMT_FIELDS[spec.fmt]:
        lo, width = SCALAR_FIELDS[name]
        value = (word >> lo) & ((1 << width) - 1)
        used |= ((1 << width) - 1) << lo
        if name == "imm":
            if spec.imm == "s16":
                value = _signed16(value)
            elif spec.imm == "shamt" and value > 31:
                raise IllegalBundle(f"{slot}: {word:#010x}: {spec.name} shifts by {value}")
        fields[name] = value
    stray = word & ~used & ((1 << SCALAR_FIELDS["opcode"][0]) - 1)
    if stray:
        raise IllegalBundle(f"{slot}: {word:#010x}: {spec.name} has non-zero unused bits "
                            f"{stray:#010x}")
    return ScalarInstruction(spec.name, **fields)


def _encode_misc(ins):
    spec = MISC_OPS.get(ins.op) if isinstance(ins, MiscInstruction) else None
    if spec is None:
        raise ValueError(f"not a misc instruction: {ins!r}")
    word = spec.opcode << MISC_FIELDS["opcode"][0]
    limits = {"flag": (spec.flag, (0, memory.MAX_FLAGS - 1)),
              "ra": (spec.operand, (0, SREGS - 1)), "imm": (spec.operand, _imm_range("s16"))}
    for name, (has, (lo, hi)) in limits.items():
        value = getattr(ins, name)
        if not has:
            if value != 0:
                raise ValueError(f"{spec.name} has no {name} field (got {value!r})")
            continue
        word |= _put(MISC_FIELDS, name, _check_int(f"{spec.name} {name}", value, lo, hi))
    return word


def _decode_misc(word):
    spec = _MISC_BY_CODE.get(_get(MISC_FIELDS, "opcode", word))
    if spec is None:
        raise IllegalBundle(f"misc: {word:#010x}: opcode {_get(MISC_FIELDS, 'opcode', word)} "
                            f"is not assigned")
    names = (("flag",) if spec.flag else ()) + (("ra", "imm") if spec.operand else ())
    fields = {n: _get(MISC_FIELDS, n, word) for n in names}
    used = sum(((1 << MISC_FIELDS[n][1]) - 1) << MISC_FIELDS[n][0] for n in names)
    stray = word & ~used & ((1 << MISC_FIELDS["opcode"][0]) - 1)
    if stray:
        raise IllegalBundle(f"misc: {word:#010x}: {spec.name} has non-zero unused bits "
                            f"{stray:#010x}")
    if "imm" in fields:
        fields["imm"] = _signed16(fields["imm"])
    return MiscInstruction(spec.name, **fields)


def encode_bundle(bundle):
    """The :data:`BUNDLE_WORDS` words of a :class:`Bundle` (``uint32``); ValueError if a
    field does not fit or an instruction sits in a slot that cannot hold it."""
    if not isinstance(bundle, Bundle):
        raise TypeError(f"encode_bundle takes a Bundle, not {type(bundle).__name__}")
    words = []
    for slot in SLOTS:
        if slot == "vaddr":
            words.append(sum(_put(VADDR_FIELDS, f, _check_int(f, getattr(bundle, f), 0, 31))
                             for f in VADDR_FIELDS))
            continue
        ins = getattr(bundle, slot)
        if slot in VECTOR_SLOTS:
            if not isinstance(ins, vpu.Instruction):
                raise ValueError(f"{slot} holds a golden.vpu.Instruction, not {ins!r}")
            words.append(vpu.encode(ins))
        elif slot == "misc":
            words.append(_encode_misc(ins))
        else:
            words.append(_encode_scalar(ins))
        _check_slot(slot, ins)
    _check_vaddr(bundle.vld, bundle.vld_reg, bundle.vst, bundle.vst_reg)
    return np.array(words, np.uint32)


def decode_bundle(words):
    """The :class:`Bundle` of :data:`BUNDLE_WORDS` words; :class:`IllegalBundle` (a
    ValueError naming the slot) if they are not one."""
    words = np.asarray(words)
    if words.shape != (BUNDLE_WORDS,) or not np.issubdtype(words.dtype, np.integer):
        raise ValueError(f"a bundle is {BUNDLE_WORDS} integer words, not {words.dtype} "
                         f"{list(words.shape)}")
    if words.min() < 0 or words.max() > _M32:
        raise ValueError("bundle words must be in 0..2**32-1")
    w = dict(zip(SLOTS, (int(x) for x in words)))
    fields = {}
    for slot in ("scalar0", "scalar1"):
        fields[slot] = _decode_scalar(w[slot], slot)
    for slot in VECTOR_SLOTS:
        try:
            fields[slot] = vpu.decode(w[slot])
        except vpu.IllegalInstruction as error:
            raise IllegalBundle(f"{slot}: {error}") from None
    if w["vaddr"] >> 10:
        raise IllegalBundle(f"vaddr: {w['vaddr']:#010x} has non-zero bits above bit 9")
    fields["vld_reg"] = _get(VADDR_FIELDS, "vld_reg", w["vaddr"])
    fields["vst_reg"] = _get(VADDR_FIELDS, "vst_reg", w["vaddr"])
    fields["misc"] = _decode_misc(w["misc"])
    for slot in SLOTS:
        if slot != "vaddr":
            _check_slot(slot, fields[slot])
    _check_vaddr(fields["vld"], fields["vld_reg"], fields["vst"], fields["vst_reg"])
    return Bundle(**fields)


def _check_vaddr(vld, vld_reg, vst, vst_reg):
    for slot, ins, reg in (("vld", vld, vld_reg), ("vst", vst, vst_reg)):
        if reg and ins.op == "nop":
            raise IllegalBundle(f"vaddr: a base register s{reg} for the empty {slot} slot")


# ---------------------------------------------------------------- assembler

_LABEL = re.compile(r"^([A-Za-z_][\w.]*)\s*:")
_SREG = re.compile(r"^s(\d+)$")
_MEM = re.compile(r"^(.*)\((\s*s\d+\s*)\)$")


def _sreg(text):
    m = _SREG.fullmatch(text.strip())
    if not m or int(m.group(1)) >= SREGS:
        raise ValueError(f"expected a scalar register s0..s{SREGS - 1}, not {text.strip()!r}")
    return int(m.group(1))


def _int(text, what):
    try:
        return int(text.strip(), 0)
    except ValueError:
        raise ValueError(f"{what} must be an integer, not {text.strip()!r}") from None


def _reg_and_imm(text, what):
    """``sN``, ``imm``, ``sN+imm`` or ``sN-imm`` -> (register, immediate)."""
    text = text.strip()
    m = re.fullmatch(r"s(\d+)\s*(?:([+-])\s*(\S+))?", text)
    if m:
        reg = _sreg(f"s{m.group(1)}")
        imm = 0 if m.group(2) is None else _int(m.group(2) + m.group(3), what)
        return reg, imm
    return 0, _int(text, what)


def _flag(text):
    m = re.fullmatch(r"f(\d+)", text.strip())
    if not m:
        raise ValueError(f"expected a flag f0..f{memory.MAX_FLAGS - 1}, not {text.strip()!r}")
    return int(m.group(1))


def _split_args(rest):
    return [a.strip() for a in rest.split(",")] if rest.strip() else []


def _expect(op, args, n, form):
    if len(args) != n or any(not a for a in args):
        raise ValueError(f"{op} takes {form}, got {', '.join(args) or 'nothing'!r}")


def _parse_scalar(op, args, target):
    spec = SCALAR_OPS[op]
    fmt = spec.fmt
    forms = {f: text or "no operands" for f, text in SCALAR_FORMATS.items()}
    if fmt in ("l", "s"):
        _expect(op, args, 2, forms[fmt])
        m = _MEM.fullmatch(args[1])
        if not m:
            raise ValueError(f"{op}: expected imm(sN), not {args[1]!r}")
        imm = _int(m.group(1), f"{op} offset") if m.group(1).strip() else 0
        return ScalarInstruction(op, rd=_sreg(args[0]), ra=_sreg(m.group(2)), imm=imm)
    n = len(_FMT_FIELDS[fmt])
    _expect(op, args, n, forms[fmt])
    fields = {}
    for name, arg in zip(_FMT_FIELDS[fmt], args):
        if name != "imm":
            fields[name] = _sreg(arg)
        elif fmt in ("b", "loop"):
            fields[name] = target(arg)
        else:
            fields[name] = _int(arg, f"{op} imm")
    return ScalarInstruction(op, **fields)


def _parse_misc(op, args):
    spec = MISC_OPS[op]
    n = spec.flag + spec.operand
    form = ", ".join((["flag"] if spec.flag else []) + (["sN+imm"] if spec.operand else []))
    _expect(op, args, n, form or "no operands")
    fields = {}
    if spec.flag:
        fields["flag"] = _flag(args[0])
    if spec.operand:
        fields["ra"], fields["imm"] = _reg_and_imm(args[-1], f"{op} operand")
    return MiscInstruction(op, **fields)


def _parse_vector(op, args):
    """(golden.vpu Instruction, base register); vld/vst may take ``sN+line`` as the base."""
    reg = 0
    if op in ("vld", "vst") and len(args) >= 2:
        reg, base = _reg_and_imm(args[1], f"{op} base")
        args = [args[0], str(base), *args[2:]]
    try:
        words = vpu.assemble(f"{op} {', '.join(args)}")
    except ValueError as error:
        raise ValueError(re.sub(r"^line \d+: ", "", str(error))) from None
    return vpu.decode(words[0]), reg


#: Pseudo-ops: name -> (op, operands from the written operands).
_PSEUDO = {"j": ("beq", lambda a: ["s0", "s0", *a]),
           "mv": ("addi", lambda a: [*a, "0"]),
           "li": ("addi", lambda a: [a[0], "s0", *a[1:]] if a else a)}


def _assign_scalars(items):
    """Slots of a line's scalar instructions: memory ops take scalar0, control ops
    scalar1, ALU ops what is left in the order written."""
    placed, alu = {}, []
    for ins in items:
        if len(ins.spec.slots) == 1:
            slot = ins.spec.slots[0]
            if slot in placed:
                raise ValueError(f"{ins.op}: {slot} already holds {placed[slot].op}")
            placed[slot] = ins
        else:
            alu.append(ins)
    free = [s for s in ("scalar0", "scalar1") if s not in placed]
    if len(alu) > len(free):
        raise ValueError(f"{len(items)} scalar ops do not fit the two scalar slots")
    placed.update(zip(free, alu))
    return placed


def _parse_line(code, target):
    """The :class:`Bundle` of one line's ``|``-separated instructions."""
    slots, scalars, last_vector = {}, [], -1
    for item in code.split("|"):
        item = " ".join(item.split())
        if not item:
            raise ValueError("empty slot between '|'")
        op, _, rest = item.partition(" ")
        op, args = op.lower(), _split_args(rest)
        if op in _PSEUDO:
            op, expand = _PSEUDO[op]
            args = expand(args)
        if op in ("nop", "snop", "vnop") and args:
            raise ValueError(f"{op} takes no operands")
        if op == "nop":
            pass
        elif op == "snop":
            scalars.append(_SCALAR_NOP)
        elif op == "vnop" or op in vpu.OPS and (op not in SCALAR_OPS
                                                or args[:1] and args[0][:1] in "vV"):
            ins, reg = _parse_vector(op, args) if op != "vnop" else (_VPU_NOP, 0)
            unit = "alu" if op == "vnop" else _vector_unit(ins)
            free = [s for s in VECTOR_SLOTS if unit in VECTOR_SLOT_UNITS[s] and s not in slots]
            if not free:
                raise ValueError(f"{op}: its vector slots are taken")
            order = VECTOR_SLOTS.index(free[0])
            if order < last_vector:
                raise ValueError(f"{op} comes after a later vector slot's op: write vector "
                                 f"ops in slot order ({', '.join(VECTOR_SLOTS)})")
            last_vector = order
            slots[free[0]] = ins
            if reg:
                slots[f"{free[0]}_reg"] = reg
        elif op in MISC_OPS:
            if "misc" in slots:
                raise ValueError(f"{op}: the misc slot already holds {slots['misc'].op}")
            slots["misc"] = _parse_misc(op, args)
        elif op in SCALAR_OPS:
            scalars.append(_parse_scalar(op, args, target))
        else:
            raise ValueError(f"unknown op {op!r}")
    return Bundle(**slots, **_assign_scalars(scalars))


def assemble(text):
    """Assemble a TensorCore program; returns its IMEM image, ``uint32 [bundles, 10]``.

    One bundle per line: its instructions separated by ``|``, in any order except that
    vector ops are written in slot order (vld, ALU, ALU, push, pop, vst). ``label:`` may
    start a line (alone, or before a bundle); ``#`` starts a comment; ``nop`` alone is an
    empty bundle; ``snop``/``vnop`` keep scalar0/valu0 empty so that an op lands in
    scalar1/valu1. ``.bundle w0, ..., w9`` places raw words (an illegal bundle, say). See
    docs/isa.md for the operand syntax. Errors are ``ValueError("line N: ...")``.
    """
    if not isinstance(text, str):
        raise TypeError(f"assemble takes program text, not {type(text).__name__}")
    lines, labels = [], {}
    for number, line in enumerate(text.splitlines(), start=1):
        code = line.split("#", 1)[0].strip()
        while (m := _LABEL.match(code)):
            name = m.group(1)
            if name in labels:
                raise ValueError(f"line {number}: label {name!r} is already defined "
                                 f"(line {labels[name][1]})")
            labels[name] = (len(lines), number)
            code = code[m.end():].strip()
        if code:
            lines.append((number, code))
    image = []
    for pc, (number, code) in enumerate(lines):
        def target(arg, pc=pc):
            arg = arg.strip()
            if re.fullmatch(r"[+-]?\d+", arg):
                return int(arg)
            if arg not in labels:
                raise ValueError(f"unknown label {arg!r}")
            return labels[arg][0] - pc
        try:
            if ";" in code:
                raise ValueError("separate slots with '|' (';' is not a separator)")
            if code.lower().startswith(".bundle"):
                image.append(_raw_bundle(code[len(".bundle"):]))
            else:
                image.append(encode_bundle(_parse_line(code, target)))
        except ValueError as error:
            raise ValueError(f"line {number}: {error}") from None
    return np.array(image, np.uint32).reshape(-1, BUNDLE_WORDS)


def _raw_bundle(rest):
    args = _split_args(rest)
    if len(args) != BUNDLE_WORDS:
        raise ValueError(f".bundle takes {BUNDLE_WORDS} words, got {len(args)}")
    words = [_int(a, ".bundle word") for a in args]
    if any(not 0 <= w <= _M32 for w in words):
        raise ValueError(".bundle words must fit 32 bits")
    return np.array(words, np.uint32)


def disassemble(program):
    """Assembly text of an IMEM image, one bundle a line, branch targets as labels
    ``L<pc>``; an illegal bundle becomes ``.bundle``. ``assemble(disassemble(w))`` is ``w``."""
    image = program_words(program)
    bundles = []
    for words in image:
        try:
            bundles.append(decode_bundle(words))
        except IllegalBundle as error:
            bundles.append(".bundle " + ", ".join(f"{int(w):#010x}" for w in words)
                           + f"  # illegal: {error}")
    targets = {pc + b.scalar1.imm for pc, b in enumerate(bundles)
               if isinstance(b, Bundle) and b.scalar1.spec.fmt in ("b", "loop")
               and 0 <= pc + b.scalar1.imm < len(bundles)}
    lines = []
    for pc, b in enumerate(bundles):
        if pc in targets:
            lines.append(f"L{pc}:")
        if isinstance(b, Bundle):
            target = pc + b.scalar1.imm
            lines.append(b.text(f"L{target}" if 0 <= target < len(bundles) else None))
        else:
            lines.append(b)
    return "\n".join(lines) + ("\n" if lines else "")


def program_words(program):
    """The IMEM image of a program given as text or as integer words (``[n, 10]`` or flat
    ``[10 n]``), as ``uint32 [n, 10]``; ValueError for anything else."""
    if isinstance(program, str):
        return assemble(program)
    words = np.asarray(program)
    if not (np.issubdtype(words.dtype, np.integer) or words.size == 0) or words.ndim not in (1, 2) \
            or words.size % BUNDLE_WORDS or (words.ndim == 2 and words.shape[1] != BUNDLE_WORDS):
        raise ValueError(f"a program is text or integer words [n, {BUNDLE_WORDS}], not "
                         f"{words.dtype} {list(words.shape)}")
    if words.size and (words.min() < 0 or words.max() > _M32):
        raise ValueError("program words must be in 0..2**32-1")
    return words.astype(np.uint32).reshape(-1, BUNDLE_WORDS)


# ---------------------------------------------------------------- the instruction-set simulator

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
    """A DMA the core has not yet seen complete: the flag that signals it and its VMEM words."""
    flag: int | None
    words: int
    reads: np.ndarray
    writes: np.ndarray
    pc: int
    source: int | None = None     # a push landed from this chip (Session.land); pc unused

    def __post_init__(self):
        # Word extents, so that most accesses are cleared without a set lookup.
        both = np.concatenate([self.reads, self.writes])
        self.span = (int(both.min()), int(both.max())) if both.size else None
        self.write_span = (int(self.writes.min()), int(self.writes.max())) \
            if self.writes.size else None


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
        b = self.decoded[pc]
        r = [int(x) for x in self.sregs]
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
            vector = self._vector(b, r)
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

    def _vector(self, b, r):
        """The VPU state after the bundle's vector words, as golden.vpu.execute gives it,
        or None when they are all nops."""
        words, fault = [], None
        for slot in VECTOR_SLOTS:
            ins = getattr(b, slot)
            if ins.op == "nop":
                continue
            if slot in ("vld", "vst"):
                reg = b.vld_reg if slot == "vld" else b.vst_reg
                base = r[reg] + ins.base
                if base >= 1 << vpu.FIELDS["base"][1]:
                    fault = _Fault("vmem_range", f"{slot}: base line s{reg} + {ins.base} = "
                                                 f"{base} does not fit 16 bits")
                    break
                ins = dataclasses.replace(ins, base=base)
                fault = self._race(ins)
                if fault:
                    break
            words.append(vpu.encode(ins))
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

    def _race(self, ins):
        if not (self.races and self.transfers):
            return None
        lines = ins.base + ins.stride * np.arange(vpu.SUBLANES)
        if lines[-1] * self.lanes >= len(self.vmem):
            return None                                 # the VPU reports vmem_range
        touched = (lines[:, None] * self.lanes + np.arange(self.lanes)).ravel()
        lo, hi = int(touched.min()), int(touched.max())
        for t in self.transfers:
            span = t.write_span if ins.op == "vld" else t.span
            if span is None or span[1] < lo or span[0] > hi:
                continue
            hit = touched[np.isin(touched, t.writes if ins.op == "vld"
                                  else np.concatenate([t.reads, t.writes]))]
            if hit.size:
                what = f"the DMA issued at pc {t.pc}" if t.source is None else \
                    f"a push landed from chip {t.source}"
                return _Fault("race", f"{ins} touches VMEM word {hit[0]} of {what} before a "
                                      f"wait covers it")
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
                hit = touched[np.isin(touched, t.writes)]
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
            src, dst = memory.addresses(d)
            vmem_src = src if d.src[0] == "vmem" else src[:0]
            vmem_dst = dst if d.dst == ("vmem", d.dst[-1]) else dst[:0]
            self.transfers.append(_Transfer(d.sent_flag if d.remote else d.flag, d.words,
                                            np.unique(vmem_src), np.unique(vmem_dst), pc))

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
                writes = memory.addresses(d)[1] if d.dst[2] == "vmem" else np.zeros(0, int)
                core.transfers.append(_Transfer(d.flag, d.words, np.zeros(0, np.int64),
                                                np.unique(writes), -1, source))


_SESSION_ARGS = dict(hbm=None, vmem=None, smem=None, sregs=None, vregs=None, flags=None,
                     numerics="tpu", lanes=8, n_flags=16, n_chips=1, imem_bundles=None,
                     mxu=True, mxu_results=None, races="error")
