"""The assembler: syntax, slot placement, pseudo-ops, labels, and errors with line numbers."""

import numpy as np
import pytest

from golden import tensorcore as tc, vpu


def _one(text):
    image = tc.assemble(text)
    assert image.shape == (1, tc.BUNDLE_WORDS) and image.dtype == np.uint32
    return tc.decode_bundle(image[0])


def S(op, **fields):
    return tc.ScalarInstruction(op, **fields)


def test_slots_are_placed_by_kind():
    b = _one("add v1, v2, v3 | lw s1, -4(s2) | loop s3, 0 | fadd f5, s6-7")
    assert b.scalar0 == S("lw", rd=1, ra=2, imm=-4)
    assert b.scalar1 == S("loop", rd=3, imm=0)
    assert b.valu0 == vpu.Instruction("add", vd=1, va=2, vb=3)
    assert b.misc == tc.MiscInstruction("fadd", flag=5, ra=6, imm=-7)
    b = _one("bne s1, s2, +3 | add s4, s5, s6")         # the ALU op takes what is free
    assert b.scalar0 == S("add", rd=4, ra=5, rb=6) and b.scalar1 == S("bne", rd=1, ra=2, imm=3)
    b = _one("xor s1, s2, s3 | sra s4, s5, s6")          # ALU ops in the order written
    assert b.scalar0.op == "xor" and b.scalar1.op == "sra"
    b = _one("snop | ori s1, s2, 0xFFFF")
    assert b.scalar0.op == "nop" and b.scalar1 == S("ori", rd=1, ra=2, imm=0xFFFF)
    b = _one("vnop | exp v1, v2")
    assert b.valu0.op == "nop" and b.valu1 == vpu.Instruction("exp", vd=1, va=2)


def test_vector_slots_and_base_registers():
    b = _one("vld v1, s2+3, 4 | rsum v2, v1 | sub v3, v2, v1 | push_weights v3 | pop v4 "
             "| vst v4, s31")
    assert (b.vld, b.vld_reg) == (vpu.Instruction("vld", vr=1, base=3, stride=4), 2)
    assert b.valu0.op == "rsum" and b.valu1.op == "sub"
    assert b.push.op == "push_weights" and b.pop == vpu.Instruction("pop", vd=4)
    assert (b.vst, b.vst_reg) == (vpu.Instruction("vst", vr=4, base=0, stride=1), 31)
    b = _one("vld v0, 65535, 31")
    assert b.vld.base == 65535 and b.vld_reg == 0


def test_pseudo_ops_labels_comments_and_raw_bundles():
    text = """
    # a comment line
    start:                       # a label alone
    li s1, -32768                # addi s1, s0, -32768
    mv s2, s1 | j start
    again: loop s2, again ; halt
    """
    with pytest.raises(ValueError, match="line 6: separate slots with '|'"):
        tc.assemble(text)
    image = tc.assemble(text.replace(" ; halt", " | halt"))
    b = [tc.decode_bundle(w) for w in image]
    assert b[0].scalar0 == S("addi", rd=1, ra=0, imm=-32768)
    assert b[1].scalar0 == S("addi", rd=2, ra=1, imm=0)
    assert b[1].scalar1 == S("beq", rd=0, ra=0, imm=-1)
    assert b[2].scalar1 == S("loop", rd=2, imm=0) and b[2].misc.op == "halt"
    raw = tc.assemble(".bundle " + ", ".join(["0"] * 10) + "\nnop")
    assert not raw[0].any() and tc.decode_bundle(raw[1]) == tc.Bundle()
    assert "illegal" in tc.disassemble(raw).splitlines()[0]
    assert np.array_equal(tc.assemble(tc.disassemble(raw)), raw)


def test_disassembly_labels_targets_and_keeps_far_offsets():
    image = tc.assemble("a: nop\nbeq s1, s2, a | sub s3, s3, s3\nbgeu s1, s2, -9\nloop s4, +1"
                        "\nhalt")
    text = tc.disassemble(image)
    assert text.splitlines() == ["L0:", "nop", "sub s3, s3, s3 | beq s1, s2, L0",
                                 "bgeu s1, s2, -9", "loop s4, L4", "L4:", "halt"]
    assert np.array_equal(tc.assemble(text), image)


@pytest.mark.parametrize("text, line, match", [
    ("nop\nfoo s1", 2, "unknown op 'foo'"),
    ("\n\naddi s1, s2, 32768", 3, r"addi imm must be an integer in -32768\.\.32767"),
    ("ori s1, s2, -1", 1, r"ori imm must be an integer in 0\.\.65535"),
    ("slli s1, s2, 32", 1, r"slli imm must be an integer in 0\.\.31"),
    ("add s1, s2", 1, "add takes rd, ra, rb"),
    ("add s1, s2, s32", 1, "scalar register s0..s31, not 's32'"),
    ("lw s1, 4[s2]", 1, r"lw: expected imm\(sN\)"),
    ("lw s1, 0(s1) | sw s2, 0(s3)", 1, "sw: scalar0 already holds lw"),
    ("beq s1, s2, 0 | loop s3, 0", 1, "loop: scalar1 already holds beq"),
    ("add s1, s1, s1 | add s2, s2, s2 | add s3, s3, s3", 1, "do not fit the two scalar slots"),
    ("lw s1, 0(s1) | add s1, s1, s1 | add s2, s2, s2", 1, "do not fit"),
    ("x: nop\nx: nop", 2, "label 'x' is already defined"),
    ("nop\nj nowhere", 2, "unknown label 'nowhere'"),
    ("beq s1, s2, 40000", 1, "beq imm"),
    ("halt | dma 0", 1, "the misc slot already holds halt"),
    ("wait 3, 4", 1, "expected a flag"),
    ("wait f128, 4", 1, r"wait flag must be an integer in 0\.\.127"),
    ("fset f1", 1, "fset takes flag, sN\\+imm"),
    ("delay s1+x", 1, "delay operand must be an integer"),
    ("halt 1", 1, "halt takes no operands"),
    ("nop 1", 1, "nop takes no operands"),
    ("vld v1, 0 | vld v2, 8", 1, "vld: its vector slots are taken"),
    ("add v1, v2, v3 | mul v1, v2, v3 | sub v1, v2, v3", 1, "sub: its vector slots are taken"),
    ("vst v1, 0 | add v1, v2, v3", 1, "write vector ops in slot order"),
    ("pop v1 | push_lhs v1", 1, "write vector ops in slot order"),
    ("vld v1, s1+65536", 1, r"base 65536 is out of range 0\.\.65535"),
    ("vld v1, 0, 32", 1, "stride 32 is out of range"),
    ("add v1, v2", 1, "add takes 3 operands"),
    ("add v1, v2, s3", 1, "expected a register v0..v31"),
    ("nop |  | halt", 1, "empty slot"),
    (".bundle 1, 2", 1, ".bundle takes 10 words"),
    (".bundle " + ", ".join(["0x100000000"] * 10), 1, "fit 32 bits"),
])
def test_errors_give_the_line_number(text, line, match):
    with pytest.raises(ValueError, match=f"^line {line}: .*{match}"):
        tc.assemble(text)


def test_bad_arguments():
    with pytest.raises(TypeError):
        tc.assemble(b"halt")
    with pytest.raises(ValueError, match=r"integer words \[n, 10\]"):
        tc.program_words(np.zeros(7, np.uint32))
    with pytest.raises(ValueError, match="0..2\\*\\*32-1"):
        tc.program_words(np.full(10, -1))
    assert tc.program_words(np.zeros(20, np.int64)).shape == (2, 10)
    assert tc.disassemble(np.zeros((0, 10), np.uint32)) == ""
