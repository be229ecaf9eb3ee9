"""The TensorCore's VLIW instruction set (SPEC section 4.7): slots, op tables, bit fields,
the instruction and bundle classes, bundle encoding and decoding, the fault codes, and the
DMA descriptor record in SMEM. ``docs/isa.md``'s tables are generated from the tables here;
``hdl.tensorcore.encoding`` restates them for the RTL.

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
"""

import dataclasses
import functools

import numpy as np

from .. import memory, vpu

__all__ = [
    "BUNDLE_WORDS", "SLOTS", "VECTOR_SLOTS", "SREGS", "SCALAR_FIELDS", "MISC_FIELDS",
    "VADDR_FIELDS", "ScalarOp", "SCALAR_OPS", "MiscOp", "MISC_OPS", "VECTOR_SLOT_UNITS",
    "ERRORS", "ERROR_NOTES", "SCALAR_FORMATS", "DESCRIPTOR_WORDS", "DESCRIPTOR_LAYOUT",
    "CONTROL_FIELDS",
    "ScalarInstruction", "MiscInstruction", "Bundle", "IllegalBundle",
    "encode_bundle", "decode_bundle", "descriptor_words", "descriptor_from_words",
]

BUNDLE_WORDS = 10
SLOTS = ("scalar0", "scalar1", "vld", "valu0", "valu1", "push", "pop", "vst", "vaddr", "misc")
#: The slots holding golden.vpu words, in the order the VPU executes them.
VECTOR_SLOTS = ("vld", "valu0", "valu1", "push", "pop", "vst")
SREGS = 32
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
    w = np.asarray(words, np.uint32).ravel().tolist()
    if len(w) != DESCRIPTOR_WORDS:
        raise ValueError(f"a descriptor is {DESCRIPTOR_WORDS} words, not {len(w)}")
    return _descriptor(tuple(w))


@functools.lru_cache(maxsize=4096)
def _descriptor(w):
    # A Descriptor is immutable, and programs issue the same records over and over.
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
    return _decode_words(tuple(words.tolist()))


@functools.lru_cache(maxsize=4096)
def _decode_words(words):
    # A Bundle is immutable and a function of its words alone, and programs repeat the
    # same bundles many times over (per chip, per run).
    w = dict(zip(SLOTS, words))
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
