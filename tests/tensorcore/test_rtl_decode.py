"""hdl.tensorcore.isa: the encoding tables equal golden's, and the bundle decoder against
golden.tensorcore.decode_bundle, on every opcode in every slot, single-bit corruptions of
legal bundles and random words."""

import numpy as np
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from golden import tensorcore as tc
from golden import vpu
from hdl.tensorcore import encoding, isa

from .test_encoding import random_bundle

M32 = 0xFFFFFFFF
SCALAR_NAMES = list(tc.SCALAR_OPS)
MISC_NAMES = list(tc.MISC_OPS)


def test_the_rtl_tables_are_golden_s():
    for name in ("BUNDLE_WORDS", "SLOTS", "VECTOR_SLOTS", "SREGS", "SCALAR_FIELDS", "MISC_FIELDS",
                 "VADDR_FIELDS", "SCALAR_FORMATS", "VECTOR_SLOT_UNITS", "ERRORS",
                 "DESCRIPTOR_WORDS", "CONTROL_FIELDS", "DEFAULT_HBM_WORDS"):
        assert getattr(encoding, name) == getattr(tc, name), name
    assert encoding.DESCRIPTOR_FIELDS == tuple(name for name, _ in tc.DESCRIPTOR_LAYOUT)
    assert {n: (op.opcode, op.fmt, op.slots, op.imm) for n, op in encoding.SCALAR_OPS.items()} \
        == {n: (op.opcode, op.fmt, op.slots, op.imm) for n, op in tc.SCALAR_OPS.items()}
    assert {n: (op.opcode, op.flag, op.operand) for n, op in encoding.MISC_OPS.items()} \
        == {n: (op.opcode, op.flag, op.operand) for n, op in tc.MISC_OPS.items()}


class _Decoder(wiring.Component):
    """The decoder's outputs as plain numbers: op indices (+1; 0 is "none"), fields."""
    words: In(32 * tc.BUNDLE_WORDS)
    legal: Out(1)
    s0_op: Out(8)
    s1_op: Out(8)
    s0_fields: Out(5 * 3 + 32)
    s1_fields: Out(5 * 3 + 32)
    vused: Out(6)
    vregs: Out(10)
    misc_op: Out(8)
    misc_fields: Out(7 + 5 + 32)

    def elaborate(self, platform):
        m = Module()
        d = isa.decode_bundle(m, self.words, name="d")
        m.d.comb += self.legal.eq(d.legal)
        for k, (s, op, fields) in enumerate(zip(d.scalar, (self.s0_op, self.s1_op),
                                                (self.s0_fields, self.s1_fields))):
            for name, hit in s.is_op.items():
                with m.If(hit):
                    m.d.comb += op.eq(SCALAR_NAMES.index(name) + 1)
            m.d.comb += fields.eq(s.rd | (s.ra << 5) | (s.rb << 10) | (s.imm << 15))
        for k, slot in enumerate(tc.VECTOR_SLOTS):
            m.d.comb += self.vused[k].eq(d.vector_used[slot])
        m.d.comb += self.vregs.eq(d.vld_reg | (d.vst_reg << 5))
        for name, hit in d.misc.is_op.items():
            with m.If(hit):
                m.d.comb += self.misc_op.eq(MISC_NAMES.index(name) + 1)
        m.d.comb += self.misc_fields.eq(d.misc.flag | (d.misc.ra << 7) | (d.misc.imm << 12))
        return m


def _value(words):
    return sum(int(w) << (32 * k) for k, w in enumerate(words))


def _decode_all(bundles):
    dut, got = _Decoder(), []

    async def bench(ctx):
        for words in bundles:
            ctx.set(dut.words, _value(words))
            got.append({name: ctx.get(getattr(dut, name)) for name in (
                "legal", "s0_op", "s1_op", "s0_fields", "s1_fields", "vused", "vregs",
                "misc_op", "misc_fields")})

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return got


def _expected(words):
    """What the decoder must say, from golden.tensorcore.decode_bundle (None: illegal)."""
    try:
        b = tc.decode_bundle(np.array(words, np.uint32))
    except tc.IllegalBundle:
        return None
    out = {"legal": 1, "vused": sum(1 << k for k, s in enumerate(tc.VECTOR_SLOTS)
                                    if getattr(b, s).op != "nop"),
           "vregs": b.vld_reg | (b.vst_reg << 5),
           "misc_op": MISC_NAMES.index(b.misc.op) + 1,
           "misc_fields": b.misc.flag | (b.misc.ra << 7) | ((b.misc.imm & M32) << 12)}
    for k, ins in enumerate((b.scalar0, b.scalar1)):
        out[f"s{k}_op"] = SCALAR_NAMES.index(ins.op) + 1
        out[f"s{k}_fields"] = (ins.rd | (ins.ra << 5) | (ins.rb << 10)
                               | ((ins.imm & M32) << 15))
    return out


def _check(bundles):
    for words, got in zip(bundles, _decode_all(bundles)):
        want = _expected(words)
        text = "[" + ", ".join(f"{int(w):#010x}" for w in words) + "]"
        if want is None:
            assert got["legal"] == 0, f"RTL accepts the illegal bundle {text}"
            continue
        assert got["legal"] == 1, f"RTL rejects the legal bundle {text}"
        for key, value in want.items():
            if key.endswith("_fields") and key[0] == "s":
                # rb is the top of imm: only an "r" op's rb is a field of its own
                op = SCALAR_NAMES[want[key[:2] + "_op"] - 1]
                if tc.SCALAR_OPS[op].fmt != "r":
                    value, got_value = value & ~(31 << 10), got[key] & ~(31 << 10)
                    assert got_value == value, f"{key} of {text}"
                    continue
            assert got[key] == value, f"{key} of {text}: {got[key]:#x} != {value:#x}"


def _nop_words():
    return [int(w) for w in tc.encode_bundle(tc.Bundle())]


def test_every_opcode_in_every_slot():
    """Each slot sweeps its whole opcode field (every opcode, assigned or not), with the
    op's fields zero and then all ones; the other slots hold nops."""
    bundles = []
    fields = {"scalar0": tc.SCALAR_FIELDS, "scalar1": tc.SCALAR_FIELDS, "misc": tc.MISC_FIELDS}
    fields |= {slot: vpu.FIELDS for slot in tc.VECTOR_SLOTS}
    for k, slot in enumerate(tc.SLOTS):
        if slot == "vaddr":
            continue
        low, width = fields[slot]["opcode"]
        for opcode in range(1 << width):
            for rest in (0, (1 << low) - 1, 0x5555 & ((1 << low) - 1), 1 << 5):
                words = _nop_words()
                words[k] = (opcode << low) | rest
                bundles.append(words)
    for vaddr in (0, 1, 31, 1 << 5, 31 << 5, 33, 1 << 10, 1 << 31):
        for vld, vst in ((0, 0), (1, 0), (0, 1), (1, 1)):
            words = _nop_words()
            words[2] = vpu.encode(vpu.Instruction("vld", vr=1)) if vld else words[2]
            words[7] = vpu.encode(vpu.Instruction("vst", vr=1)) if vst else words[7]
            words[8] = vaddr
            bundles.append(words)
    _check(bundles)


def test_random_and_corrupted_bundles(rng):
    legal = [tc.encode_bundle(random_bundle(rng)) for _ in range(150)]
    bundles = [list(w) for w in legal]
    for words in legal[:100]:                 # one flipped bit: often illegal, sometimes not
        flipped = [int(x) for x in words]
        bit = int(rng.integers(32 * tc.BUNDLE_WORDS))
        flipped[bit // 32] ^= 1 << (bit % 32)
        bundles.append(flipped)
    bundles += rng.integers(0, 1 << 32, (100, tc.BUNDLE_WORDS), dtype=np.uint64).tolist()
    bundles.append([0] * tc.BUNDLE_WORDS)
    _check(bundles)
