"""The TensorCore bundle decoder: ten words into slot controls and a ``legal`` bit.

The encoding is ``golden.tensorcore``'s (SPEC section 4.7, ``docs/isa.md``), from the
tables of :mod:`.encoding` (held equal to golden's by a test); the other hdl.tensorcore
modules take them from here. The vector slots hold ``golden.vpu`` words, decoded by
:func:`hdl.vpu.isa.decode`.
"""

import re
from dataclasses import dataclass

from amaranth.hdl import Cat, Signal

from .encoding import (BUNDLE_WORDS, CONTROL_FIELDS, DEFAULT_HBM_WORDS, DESCRIPTOR_FIELDS,
                       DESCRIPTOR_WORDS, MISC_FIELDS, MISC_OPS, SCALAR_FIELDS,
                       SCALAR_FORMATS, SCALAR_OPS, SLOTS, SREGS, VADDR_FIELDS, VECTOR_SLOTS,
                       VECTOR_SLOT_UNITS, Error, MiscOpcode, ScalarOpcode)
from ..lib.logic import any_of
from ..vpu import isa as vpu_isa

__all__ = ["BUNDLE_WORDS", "SLOTS", "VECTOR_SLOTS", "SREGS", "ERROR_CODES", "DESCRIPTOR_WORDS",
           "DESCRIPTOR_FIELDS", "CONTROL_FIELDS", "DEFAULT_HBM_WORDS", "ScalarDecoded",
           "MiscDecoded", "BundleDecoded", "decode_bundle", "slot_word"]

#: Error name -> its :class:`.encoding.Error` member (the code), for lookups by name.
ERROR_CODES = {member.name.lower(): member for member in Error}

# golden.tensorcore names the MXU push slot's unit "push"; hdl.vpu.isa calls it "mxu".
_HDL_UNIT = {"push": "mxu"}


def slot_word(words, slot):
    """The 32-bit word of ``slot`` in a bundle value (word ``k`` in bits ``32k..``)."""
    k = SLOTS.index(slot)
    return words[32 * k:32 * (k + 1)]


def _field(word, fields, name):
    low, width = fields[name]
    return word[low:low + width]


def _mask(fields, names):
    mask = 0
    for name in names:
        low, width = fields[name]
        mask |= ((1 << width) - 1) << low
    return mask


def _scalar_fields(spec):
    """The fields a scalar op uses: the registers its format names, and ``imm`` when it
    has an immediate kind."""
    regs = set(re.findall(r"\b(r[dab])\b", SCALAR_FORMATS[spec.fmt]))
    return tuple(sorted(regs)) + (("imm",) if spec.imm is not None else ())


@dataclass(frozen=True)
class ScalarDecoded:
    """One scalar slot. ``is_op[name]`` is 1 for that op (only ops the slot may hold);
    ``legal`` says the word is a valid instruction for the slot. ``imm`` is the immediate
    as the op reads it: sign- or zero-extended to 32 bits (``rb`` ops: 0).
    ``writes`` (rd is written; s0 included), ``load``, ``store``, ``branch``
    (a compare-and-branch), ``loop`` classify it."""
    legal: Signal
    is_op: dict
    rd: Signal
    ra: Signal
    rb: Signal
    imm: Signal
    writes: Signal
    load: Signal
    store: Signal
    branch: Signal
    loop: Signal


@dataclass(frozen=True)
class MiscDecoded:
    """The misc slot: ``is_op[name]`` per :data:`golden.tensorcore.MISC_OPS`, ``flag``,
    ``ra``, and ``imm`` sign-extended to 32 bits; ``names_flag`` for ops with a flag."""
    legal: Signal
    is_op: dict
    flag: Signal
    ra: Signal
    imm: Signal
    names_flag: Signal


@dataclass(frozen=True)
class BundleDecoded:
    """A whole bundle: ``legal``, the two :class:`ScalarDecoded`, ``vector[slot]`` (an
    :class:`hdl.vpu.isa.Decoded` per vector slot, in :data:`VECTOR_SLOTS` order),
    ``vector_words[slot]``, ``vector_used[slot]`` (not a nop), ``vld_reg``, ``vst_reg``
    and the :class:`MiscDecoded`."""
    legal: Signal
    scalar: tuple
    vector: dict
    vector_words: dict
    vector_used: dict
    vld_reg: Signal
    vst_reg: Signal
    misc: MiscDecoded


def _decode_scalar(m, word, slot, name):
    # A signal of the enum's shape, so a waveform shows the opcode by name.
    opcode = Signal(ScalarOpcode, name=f"{name}_opcode")
    m.d.comb += opcode.eq(_field(word, SCALAR_FIELDS, "opcode"))
    ops = [spec for spec in SCALAR_OPS.values() if slot in spec.slots]
    is_op = {spec.name: Signal(name=f"{name}_is_{spec.name}") for spec in ops}
    legal_terms, imm_terms = [], []
    raw_imm = _field(word, SCALAR_FIELDS, "imm")
    low_bits = (1 << SCALAR_FIELDS["opcode"][0]) - 1
    for spec in ops:
        hit = is_op[spec.name]
        m.d.comb += hit.eq(opcode == spec.opcode)
        used = _scalar_fields(spec)
        ok = ~(word & (low_bits & ~_mask(SCALAR_FIELDS, used))).any()
        if spec.imm == "shamt":
            ok = ok & (raw_imm < 32)
        legal_terms.append(hit & ok)
        if spec.imm == "s16":
            imm_terms.append((hit, raw_imm.as_signed()))
        elif spec.imm in ("u16", "shamt"):
            imm_terms.append((hit, raw_imm))
    legal = Signal(name=f"{name}_legal")
    imm = Signal(32, name=f"{name}_imm")
    m.d.comb += legal.eq(any_of(legal_terms))
    for hit, value in imm_terms:
        with m.If(hit):
            m.d.comb += imm.eq(value)

    def any_fmt(*fmts):
        return any_of(is_op[s.name] for s in ops if s.fmt in fmts)

    return ScalarDecoded(
        legal=legal, is_op=is_op, rd=_field(word, SCALAR_FIELDS, "rd"),
        ra=_field(word, SCALAR_FIELDS, "ra"), rb=_field(word, SCALAR_FIELDS, "rb"), imm=imm,
        writes=any_fmt("r", "i", "u", "l", "loop"), load=any_fmt("l"), store=any_fmt("s"),
        branch=any_fmt("b"), loop=any_fmt("loop"))


def _decode_misc(m, word, name):
    opcode = Signal(MiscOpcode, name=f"{name}_opcode")
    m.d.comb += opcode.eq(_field(word, MISC_FIELDS, "opcode"))
    is_op = {spec.name: Signal(name=f"{name}_is_{spec.name}") for spec in MISC_OPS.values()}
    low_bits = (1 << MISC_FIELDS["opcode"][0]) - 1
    terms = []
    for spec in MISC_OPS.values():
        m.d.comb += is_op[spec.name].eq(opcode == spec.opcode)
        used = (("flag",) if spec.flag else ()) + (("ra", "imm") if spec.operand else ())
        terms.append(is_op[spec.name] & ~(word & (low_bits & ~_mask(MISC_FIELDS, used))).any())
    legal = Signal(name=f"{name}_legal")
    imm = Signal(32, name=f"{name}_imm")
    m.d.comb += [legal.eq(any_of(terms)), imm.eq(_field(word, MISC_FIELDS, "imm").as_signed())]
    return MiscDecoded(legal=legal, is_op=is_op, flag=_field(word, MISC_FIELDS, "flag"),
                       ra=_field(word, MISC_FIELDS, "ra"), imm=imm,
                       names_flag=any_of(is_op[s.name] for s in MISC_OPS.values() if s.flag))


def decode_bundle(m, words, *, name="bundle"):
    """Decode a bundle (a ``32 * BUNDLE_WORDS``-bit value, slot word ``k`` in bits
    ``32k..``) with combinational logic in ``m``.

    ``legal`` is 1 exactly when ``golden.tensorcore.decode_bundle`` accepts the words:
    assigned opcodes, unused fields zero, shift amounts below 32, each op in a slot that
    may hold it, vaddr bits 31..10 zero and no base register for an empty vld/vst slot.
    """
    if len(words) != 32 * BUNDLE_WORDS:
        raise ValueError(f"a bundle is {32 * BUNDLE_WORDS} bits, not {len(words)}")
    scalar = tuple(_decode_scalar(m, slot_word(words, slot), slot, f"{name}_{slot}")
                   for slot in ("scalar0", "scalar1"))
    vector, used, vwords, vector_ok = {}, {}, {}, []
    for slot in VECTOR_SLOTS:
        word = slot_word(words, slot)
        d = vpu_isa.decode(m, word, name=f"{name}_{slot}")
        allowed = any_of(d.unit[_HDL_UNIT.get(u, u)] for u in VECTOR_SLOT_UNITS[slot])
        vector[slot], vwords[slot] = d, word
        used[slot] = Signal(name=f"{name}_{slot}_used")
        m.d.comb += used[slot].eq(~d.is_op["nop"])
        vector_ok.append(d.legal & (d.is_op["nop"] | allowed))
    vaddr = slot_word(words, "vaddr")
    vld_reg, vst_reg = (_field(vaddr, VADDR_FIELDS, f) for f in ("vld_reg", "vst_reg"))
    vaddr_ok = (~(vaddr & ~_mask(VADDR_FIELDS, VADDR_FIELDS) & 0xFFFFFFFF).any()
                & (~vld_reg.any() | used["vld"]) & (~vst_reg.any() | used["vst"]))
    misc = _decode_misc(m, slot_word(words, "misc"), f"{name}_misc")
    legal = Signal(name=f"{name}_legal")
    m.d.comb += legal.eq(Cat(scalar[0].legal, scalar[1].legal, *vector_ok, vaddr_ok,
                             misc.legal).all())
    return BundleDecoded(legal=legal, scalar=scalar, vector=vector, vector_words=vwords,
                         vector_used=used, vld_reg=vld_reg, vst_reg=vst_reg, misc=misc)
