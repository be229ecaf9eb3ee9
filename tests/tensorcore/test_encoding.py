"""Bundle encoding: every field at its extremes, the bit layout, illegal words, descriptors."""

import dataclasses

import numpy as np
import pytest

from golden import memory, tensorcore as tc, vpu

# The layout of docs/isa.md, restated: (lowest bit, width).
SCALAR = {"opcode": (26, 6), "rd": (21, 5), "ra": (16, 5), "rb": (11, 5), "imm": (0, 16)}
MISC = {"opcode": (28, 4), "flag": (21, 7), "ra": (16, 5), "imm": (0, 16)}
FORMAT_FIELDS = {"n": (), "r": ("rd", "ra", "rb"), "i": ("rd", "ra", "imm"),
                 "u": ("rd", "imm"), "l": ("rd", "ra", "imm"), "s": ("rd", "ra", "imm"),
                 "b": ("rd", "ra", "imm"), "loop": ("rd", "imm")}
IMM_RANGE = {"s16": (-32768, 32767), "u16": (0, 65535), "shamt": (0, 31), None: (0, 0)}
VECTOR_UNITS = {"vld": {"load"}, "valu0": {"alu", "trans", "reduce"},
                "valu1": {"alu", "trans", "reduce"}, "push": {"mxu"}, "pop": {"mxu"},
                "vst": {"store"}}


def _word(layout, **fields):
    word = 0
    for name, value in fields.items():
        low, width = layout[name]
        word |= (value & ((1 << width) - 1)) << low
    return word


def test_tables_match_the_documented_layout():
    assert tc.SCALAR_FIELDS == SCALAR and tc.MISC_FIELDS == MISC
    assert tc.BUNDLE_WORDS == 10 and len(tc.SLOTS) == 10
    assert tc.SLOTS == ("scalar0", "scalar1", "vld", "valu0", "valu1", "push", "pop", "vst",
                        "vaddr", "misc")
    codes = [op.opcode for op in tc.SCALAR_OPS.values()]
    assert 0 not in codes and len(set(codes)) == len(codes) and max(codes) < 64
    codes = [op.opcode for op in tc.MISC_OPS.values()]
    assert 0 not in codes and len(set(codes)) == len(codes) and max(codes) < 16
    assert tc.ERRORS[0] == "none" and len(set(tc.ERRORS)) == len(tc.ERRORS)


def _extremes(spec):
    """Instructions of one scalar op with every field at its lowest, then its highest."""
    names = FORMAT_FIELDS[spec.fmt]
    lo, hi = IMM_RANGE[spec.imm]
    for pick in (0, 1):
        yield {n: (lo, hi)[pick] if n == "imm" else (0, 31)[pick] for n in names}
    yield {n: lo if n == "imm" else 31 for n in names}     # mixed
    yield {n: hi if n == "imm" else 0 for n in names}


@pytest.mark.parametrize("op", list(tc.SCALAR_OPS))
def test_scalar_fields_at_extremes_round_trip(op):
    spec = tc.SCALAR_OPS[op]
    slot = spec.slots[0]
    for fields in _extremes(spec):
        ins = tc.ScalarInstruction(op, **fields)
        words = tc.encode_bundle(tc.Bundle(**{slot: ins}))
        expected = _word(SCALAR, opcode=spec.opcode, **fields)
        assert int(words[tc.SLOTS.index(slot)]) == expected, (op, fields)
        assert tc.decode_bundle(words) == tc.Bundle(**{slot: ins})


@pytest.mark.parametrize("op", list(tc.MISC_OPS))
def test_misc_fields_at_extremes_round_trip(op):
    spec = tc.MISC_OPS[op]
    for flag, ra, imm in ((0, 0, -32768), (127, 31, 32767), (127, 0, -1), (0, 31, 0)):
        fields = ({"flag": flag} if spec.flag else {}) | \
            ({"ra": ra, "imm": imm} if spec.operand else {})
        ins = tc.MiscInstruction(op, **fields)
        words = tc.encode_bundle(tc.Bundle(misc=ins))
        assert int(words[9]) == _word(MISC, opcode=spec.opcode, **fields)
        assert tc.decode_bundle(words).misc == ins


def test_vector_slots_carry_vpu_words_unchanged_and_vaddr():
    b = tc.Bundle(vld=vpu.Instruction("vld", vr=31, base=65535, stride=31),
                  valu0=vpu.Instruction("select", vd=31, va=1, vb=2, vc=3),
                  valu1=vpu.Instruction("rsum", vd=0, va=31),
                  push=vpu.Instruction("push_lhs", va=7), pop=vpu.Instruction("pop", vd=9),
                  vst=vpu.Instruction("vst", vr=0, base=0, stride=0), vld_reg=31, vst_reg=1)
    words = tc.encode_bundle(b)
    for i, slot in enumerate(tc.VECTOR_SLOTS, start=2):
        assert int(words[i]) == vpu.encode(getattr(b, slot))
    assert int(words[8]) == 31 | 1 << 5
    assert tc.decode_bundle(words) == b
    words[7] = vpu.encode(vpu.Instruction("nop"))
    with pytest.raises(tc.IllegalBundle, match="vaddr: a base register s1 for the empty vst slot"):
        tc.decode_bundle(words)
    with pytest.raises(ValueError, match="vaddr"):
        tc.encode_bundle(tc.Bundle(vst_reg=1))


def _random_scalar(rng, slot):
    specs = [s for s in tc.SCALAR_OPS.values() if slot in s.slots]
    spec = specs[rng.integers(len(specs))]
    lo, hi = IMM_RANGE[spec.imm]
    return tc.ScalarInstruction(spec.name, **{
        n: int(rng.integers(lo, hi + 1)) if n == "imm" else int(rng.integers(32))
        for n in FORMAT_FIELDS[spec.fmt]})


def _random_vector(rng, slot):
    specs = [s for s in vpu.OPS.values() if s.unit in VECTOR_UNITS[slot]
             and (slot != "pop" or s.name == "pop") and (slot != "push" or s.name != "pop")]
    spec = specs[rng.integers(len(specs))] if rng.random() < 0.8 else vpu.OPS["nop"]
    limit = {"base": 1 << 16, "stride": 32}
    return vpu.Instruction(spec.name, **{f: int(rng.integers(limit.get(f, 32)))
                                         for f in spec.operands})


def random_bundle(rng):
    misc = list(tc.MISC_OPS.values())[rng.integers(len(tc.MISC_OPS))]
    fields = ({"flag": int(rng.integers(128))} if misc.flag else {}) | \
        ({"ra": int(rng.integers(32)), "imm": int(rng.integers(-32768, 32768))}
         if misc.operand else {})
    vector = {s: _random_vector(rng, s) for s in tc.VECTOR_SLOTS}
    regs = {f"{s}_reg": int(rng.integers(32)) for s in ("vld", "vst") if vector[s].op != "nop"}
    return tc.Bundle(scalar0=_random_scalar(rng, "scalar0"),
                     scalar1=_random_scalar(rng, "scalar1"), **vector, **regs,
                     misc=tc.MiscInstruction(misc.name, **fields))


def test_random_bundles_round_trip_through_words_and_text(rng):
    bundles = [random_bundle(rng) for _ in range(300)]
    image = np.array([tc.encode_bundle(b) for b in bundles])
    assert [tc.decode_bundle(w) for w in image] == bundles
    text = tc.disassemble(image)
    assert np.array_equal(tc.assemble(text), image)


def _illegal(words, match):
    with pytest.raises(tc.IllegalBundle, match=match):
        tc.decode_bundle(np.array(words, np.uint32))


def _nop_words():
    return [int(w) for w in tc.encode_bundle(tc.Bundle())]


def test_zero_and_unassigned_words_are_illegal():
    _illegal([0] * 10, "scalar0: .* opcode 0")
    for slot in range(10):
        if slot == 8:
            continue                                   # vaddr 0 is "no base register"
        words = _nop_words()
        words[slot] = 0
        _illegal(words, f"{tc.SLOTS[slot]}: ")
    words = _nop_words()
    words[0] = 63 << 26
    _illegal(words, "scalar0: .* opcode 63 is not assigned")
    words = _nop_words()
    words[9] = 15 << 28
    _illegal(words, "misc: .* opcode 15 is not assigned")


@pytest.mark.parametrize("slot, word, match", [
    (0, _word(SCALAR, opcode=tc.SCALAR_OPS["nop"].opcode, imm=1), "non-zero unused"),
    (1, _word(SCALAR, opcode=tc.SCALAR_OPS["add"].opcode, imm=1), "non-zero unused"),
    (0, _word(SCALAR, opcode=tc.SCALAR_OPS["lui"].opcode, ra=1), "non-zero unused"),
    (1, _word(SCALAR, opcode=tc.SCALAR_OPS["loop"].opcode, ra=3), "non-zero unused"),
    (0, _word(SCALAR, opcode=tc.SCALAR_OPS["slli"].opcode, imm=32), "shifts by 32"),
    (1, _word(SCALAR, opcode=tc.SCALAR_OPS["lw"].opcode), "scalar1: lw only sits in scalar0"),
    (1, _word(SCALAR, opcode=tc.SCALAR_OPS["sw"].opcode), "scalar1: sw only"),
    (0, _word(SCALAR, opcode=tc.SCALAR_OPS["beq"].opcode), "scalar0: beq only sits in scalar1"),
    (0, _word(SCALAR, opcode=tc.SCALAR_OPS["loop"].opcode), "scalar0: loop"),
    (2, vpu.encode(vpu.Instruction("add")), "vld: add cannot sit"),
    (3, vpu.encode(vpu.Instruction("vld")), "valu0: vld cannot sit"),
    (4, vpu.encode(vpu.Instruction("pop")), "valu1: pop cannot sit"),
    (5, vpu.encode(vpu.Instruction("pop")), "push: pop cannot sit"),
    (6, vpu.encode(vpu.Instruction("push_weights")), "pop: push_weights cannot sit"),
    (7, vpu.encode(vpu.Instruction("vld")), "vst: vld cannot sit"),
    (3, vpu.encode(vpu.Instruction("nop")) | 1, "valu0: .*unused"),
    (8, 1 << 10, "vaddr: .* above bit 9"),
    (9, _word(MISC, opcode=tc.MISC_OPS["halt"].opcode, imm=1), "misc: .*unused"),
    (9, _word(MISC, opcode=tc.MISC_OPS["dma"].opcode, flag=1), "misc: .*unused"),
    (9, _word(MISC, opcode=tc.MISC_OPS["delay"].opcode, flag=127), "misc: .*unused"),
])
def test_illegal_fields_name_their_slot(slot, word, match):
    words = _nop_words()
    words[slot] = word
    _illegal(words, match)


def test_encode_rejects_what_does_not_fit():
    bad = [
        tc.Bundle(scalar0=tc.ScalarInstruction("addi", rd=1, ra=2, imm=32768)),
        tc.Bundle(scalar0=tc.ScalarInstruction("ori", rd=1, ra=2, imm=-1)),
        tc.Bundle(scalar0=tc.ScalarInstruction("slli", rd=1, ra=2, imm=32)),
        tc.Bundle(scalar0=tc.ScalarInstruction("add", rd=32, ra=2, rb=3)),
        tc.Bundle(scalar0=tc.ScalarInstruction("add", rd=1, ra=2, rb=3, imm=4)),
        tc.Bundle(scalar0=tc.ScalarInstruction("beq", rd=1, ra=2, imm=1)),
        tc.Bundle(scalar1=tc.ScalarInstruction("lw", rd=1, ra=2, imm=1)),
        tc.Bundle(scalar0=tc.ScalarInstruction("bogus")),
        tc.Bundle(misc=tc.MiscInstruction("wait", flag=128)),
        tc.Bundle(misc=tc.MiscInstruction("halt", flag=1)),
        tc.Bundle(misc=tc.MiscInstruction("dma", imm=-32769)),
        tc.Bundle(valu0=vpu.Instruction("vld", vr=1)),
        tc.Bundle(vld_reg=32),
        tc.Bundle(scalar0=vpu.Instruction("add")),
    ]
    for bundle in bad:
        with pytest.raises(ValueError):
            tc.encode_bundle(bundle)
    with pytest.raises(TypeError, match="takes a Bundle"):
        tc.encode_bundle([0] * 10)
    with pytest.raises(ValueError, match="10 integer words"):
        tc.decode_bundle(np.zeros(9, np.uint32))


DESCRIPTORS = [
    memory.Descriptor(("hbm", 0), ("vmem", 0), (1,), (1,), (1,), flag=0),
    memory.Descriptor(("vmem", (1 << 24) - 1), ("hbm", (1 << 24) - 1), (2, 3, 4),
                      (-(1 << 24) + 1, 0, (1 << 24) - 1), (1, -1, 5), flag=127),
    memory.Descriptor(("hbm", 5), ("remote", 255, "vmem", 7), (0, 1, 1), (1, 0, 0), (1, 0, 0),
                      flag=3, sent_flag=127),
    memory.Descriptor(("vmem", 5), ("remote", 0, "hbm", 7), (8,), (1,), (1,), flag=1),
]


@pytest.mark.parametrize("descriptor", DESCRIPTORS)
def test_descriptor_records_round_trip(descriptor):
    words = tc.descriptor_words(descriptor)
    assert words.dtype == np.uint32 and words.shape == (tc.DESCRIPTOR_WORDS,)
    assert tc.descriptor_from_words(words) == descriptor
    d = descriptor
    control = (d.src[-2] == "vmem") | (d.dst[-2] == "vmem") << 1 | d.remote << 2 \
        | (d.sent_flag is not None) << 3 | d.flag << 4 | (d.sent_flag or 0) << 11 \
        | (d.chip or 0) << 18
    assert int(words[0]) == control
    assert list(words[1:6]) == [d.src[-1], d.dst[-1], *d.counts]
    assert [int(w) - (1 << 32) if w >> 31 else int(w) for w in words[6:]] == \
        [*d.src_strides, *d.dst_strides]


@pytest.mark.parametrize("word, value, match", [
    (0, 1 << 26, "reserved"), (0, 1 << 18, "local transfer"), (0, 1 << 3, "local transfer"),
    (0, 1 << 2 | 1 << 11, "has_sent"), (1, 1 << 24, "src_base"), (5, 1 << 31, "count2"),
    (6, 1 << 24, "src_strides"), (11, (-(1 << 24)) & 0xFFFFFFFF, "dst_strides"),
    (3, 1 << 23, "words"),
])
def test_descriptor_records_no_descriptor_can_hold(word, value, match):
    words = tc.descriptor_words(dataclasses.replace(DESCRIPTORS[0], counts=(4, 4, 1)))
    words[word] = value if word else words[word] | value
    with pytest.raises(ValueError, match=match):
        tc.descriptor_from_words(words)
