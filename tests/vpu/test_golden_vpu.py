"""golden.vpu: elementwise ops and reductions against SoftFloat, and the instruction set."""

import ml_dtypes
import numpy as np
import pytest
import softfloatpy as sf

from golden import vpu
from golden.formats import FP32, NUMERICS, OperandClass, classify
from golden.mxu import matmul
from verif.scoreboard import Scoreboard
from verif.suites.arith import corpus

from . import oracle_vpu as oracle
from .operands import FLOAT_BINARY, INT_BINARY, UNARY, float_pairs, int_pairs, unary_inputs


@pytest.fixture(autouse=True)
def _round_to_nearest_even():
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)


def _check(name, operands, got, expected):
    board = Scoreboard(name, np.asarray(expected, got.dtype), operands)
    board.check_all(got)
    assert board.passed, board.summary()


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("op", FLOAT_BINARY + INT_BINARY)
def test_binary_ops_match_softfloat(op, numerics, rng):
    a, b = (float_pairs if op in FLOAT_BINARY else int_pairs)(rng, 3000)
    got = vpu.elementwise(op, a, b, numerics=numerics)
    assert got.dtype == np.uint32
    _check(f"{op}/{numerics}", {"a": a, "b": b}, got, oracle.elementwise(op, numerics, a, b))


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("op", UNARY)
def test_unary_ops_match_softfloat(op, numerics, rng):
    a = unary_inputs(op, rng, 3000)
    got = vpu.elementwise(op, a, numerics=numerics)
    assert got.dtype == (np.uint16 if op == "f32_to_bf16" else np.uint32)
    _check(f"{op}/{numerics}", {"a": a}, got, oracle.elementwise(op, numerics, a))


def test_select(rng):
    a = rng.integers(0, 1 << 32, 500, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 1 << 32, 500, dtype=np.uint64).astype(np.uint32)
    c = rng.choice(np.array([0, 1, 2, 3, 0xFFFFFFFF, 0x80000001], np.uint32), 500)
    a[:4] = [0x7F800001, 0x00000001, 0xFFC00001, 0x80000000]     # moved, never canonicalized
    c[:4] = 1
    for numerics in NUMERICS:
        got = vpu.elementwise("select", a, b, c, numerics=numerics)
        _check(f"select/{numerics}", {"a": a, "b": b, "c": c}, got,
               oracle.elementwise("select", numerics, a, b, c))


# Hand-worked cases of SPEC sections 3 and 4.2: (op, operands, ieee, tpu).
HAND_CHECKED = [
    ("max", (0x80000000, 0x00000000), 0x00000000, 0x00000000),         # -0 < +0
    ("max", (0x00000000, 0x80000000), 0x00000000, 0x00000000),
    ("min", (0x00000000, 0x80000000), 0x80000000, 0x80000000),
    ("max", (0x7FC00001, 0x3F800000), 0x7FC00000, 0x7FC00000),         # NaN propagates
    ("min", (0x3F800000, 0xFF800001), 0x7FC00000, 0x7FC00000),
    ("max", (0x00000001, 0x00000000), 0x00000001, 0x00000000),         # flushed in tpu
    ("min", (0x80000001, 0x00000000), 0x80000001, 0x80000000),
    ("eq", (0x00000000, 0x80000000), 1, 1),
    ("eq", (0x7FC00000, 0x7FC00000), 0, 0),
    ("lt", (0x7FC00000, 0x3F800000), 0, 0),
    ("le", (0x3F800000, 0x7FC00000), 0, 0),
    ("eq", (0x00000001, 0x00000000), 0, 1),                            # subnormal == 0 in tpu
    ("lt", (0x80000001, 0x00000000), 1, 0),
    ("sub", (0x3F800000, 0x3F800000), 0x00000000, 0x00000000),         # x - x = +0
    ("sub", (0x80000000, 0x00000000), 0x80000000, 0x80000000),         # -0 - +0 = -0
    ("mul", (0x00800000, 0x3F000000), 0x00400000, 0x00000000),         # 2**-126 / 2
    ("mul", (0x7F800000, 0x00000000), 0x7FC00000, 0x7FC00000),
    ("f32_to_i32", (0x40200000,), 2, 2),                               # 2.5 -> 2
    ("f32_to_i32", (0x40600000,), 4, 4),                               # 3.5 -> 4
    ("f32_to_i32", (0xC0200000,), 0xFFFFFFFE, 0xFFFFFFFE),             # -2.5 -> -2
    ("f32_to_i32", (0x7FC00000,), 0, 0),
    ("f32_to_i32", (0x4F000000,), 0x7FFFFFFF, 0x7FFFFFFF),             # 2**31 saturates
    ("f32_to_i32", (0xCF000000,), 0x80000000, 0x80000000),             # -2**31 fits
    ("f32_to_i32", (0xFF800000,), 0x80000000, 0x80000000),
    ("i32_to_f32", (16777217,), 0x4B800000, 0x4B800000),               # tie to even
    ("i32_to_f32", (0x7FFFFFFF,), 0x4F000000, 0x4F000000),
    ("i32_to_f32", (0x80000000,), 0xCF000000, 0xCF000000),
    ("bf16_to_f32", (0x0001,), 0x00010000, 0x00000000),
    ("bf16_to_f32", (0x8040,), 0x80400000, 0x80000000),
    ("bf16_to_f32", (0xFF81,), 0x7FC00000, 0x7FC00000),
    ("bf16_to_f32", (0xABCD3F80,), 0x3F800000, 0x3F800000),            # upper half ignored
    ("f32_to_bf16", (0x3F808000,), 0x3F80, 0x3F80),                    # tie stays even
    ("f32_to_bf16", (0x3F818000,), 0x3F82, 0x3F82),
    ("f32_to_bf16", (0x007FFFFF,), 0x0080, 0x0000),
    ("shl", (0x00000001, 33), 0x00000002, 0x00000002),                 # shift mod 32
    ("shr", (0x80000000, 31), 0x00000001, 0x00000001),
    ("sra", (0x80000000, 31), 0xFFFFFFFF, 0xFFFFFFFF),
    ("sra", (0x40000000, 62), 0x00000001, 0x00000001),
    ("iadd", (0xFFFFFFFF, 1), 0, 0),
    ("isub", (0, 1), 0xFFFFFFFF, 0xFFFFFFFF),
    ("select", (7, 9, 1), 7, 7),
    ("select", (7, 9, 2), 9, 9),                                       # only 1 selects a
    ("select", (7, 9, 0xFFFFFFFF), 9, 9),
]


@pytest.mark.parametrize("op, operands, ieee, tpu", HAND_CHECKED,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(HAND_CHECKED)])
def test_hand_checked(op, operands, ieee, tpu):
    for numerics, want in (("ieee", ieee), ("tpu", tpu)):
        dtype = np.uint16 if op == "bf16_to_f32" and operands[0] < 1 << 16 else np.uint32
        got = vpu.elementwise(op, *(np.array([x], dtype) for x in operands), numerics=numerics)
        assert int(got[0]) == want, f"{op}{operands}/{numerics}: {int(got[0]):#x} != {want:#x}"


def test_elementwise_accepts_values_and_rejects_bad_input():
    a, b = np.float32([1.5, -2.0]), np.float32([0.25, 4.0])
    np.testing.assert_array_equal(vpu.elementwise("add", a, b).view(np.float32), a + b)
    np.testing.assert_array_equal(vpu.elementwise("iadd", np.int32([-1]), np.int32([3])), [2])
    bf = np.array([1.0, -3.0], ml_dtypes.bfloat16)
    np.testing.assert_array_equal(vpu.elementwise("bf16_to_f32", bf).view(np.float32),
                                  [1.0, -3.0])
    with pytest.raises(ValueError, match="unknown op"):
        vpu.elementwise("fma", a, b)
    with pytest.raises(ValueError, match="takes a, b only"):
        vpu.elementwise("add", a)
    with pytest.raises(ValueError, match="takes a only"):
        vpu.elementwise("exp", a, b)
    with pytest.raises(ValueError, match="takes a, b, c only"):
        vpu.elementwise("select", a, b)
    with pytest.raises(ValueError, match="shapes differ"):
        vpu.elementwise("add", a, b[:1])
    with pytest.raises(ValueError, match="uint32"):
        vpu.elementwise("add", a.astype(np.float64), b)
    with pytest.raises(ValueError, match="numerics"):
        vpu.elementwise("add", a, b, numerics="fast")


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("op", vpu.REDUCE_OPS)
def test_reduce_matches_sequential_fold(op, numerics, rng):
    a, b = float_pairs(rng, 2000)
    rows = np.concatenate([a, b])[: (a.size * 2 // 8) * 8].reshape(-1, 8)
    got = vpu.reduce(op, rows, numerics=numerics)
    _check(f"reduce {op}/{numerics}", {"row": np.arange(rows.shape[0])}, got,
           oracle.reduce(op, rows, numerics))


def test_reduce_order_is_part_of_the_contract():
    # ((2**24 + 1) + 1) + ... = 2**24 (each +1 is a tie to even); any other order
    # that adds the ones first gives 2**24 + 2 or more.
    row = np.float32([2.0 ** 24, 1, 1, 0, 0, 0, 0, 0]).view(np.uint32)[None, :]
    assert vpu.reduce("sum", row).view(np.float32)[0] == 2.0 ** 24
    row = np.float32([1, 1, 2.0 ** 24, 0, 0, 0, 0, 0]).view(np.uint32)[None, :]
    assert vpu.reduce("sum", row).view(np.float32)[0] == 2.0 ** 24 + 2
    with pytest.raises(ValueError, match=r"\[N, 8\]"):
        vpu.reduce("sum", np.zeros((4, 7), np.uint32))
    with pytest.raises(ValueError, match="reduce op"):
        vpu.reduce("prod", np.zeros((4, 8), np.uint32))


def test_operand_classes_are_all_exercised(rng):
    """The float corpus covers every (class, sign) pair, so the tests above see them."""
    a, b = float_pairs(rng, 10)
    seen = {(int(ca), int(sa), int(cb), int(sb)) for ca, sa, cb, sb in
            zip(classify(a, FP32), a >> 31, classify(b, FP32), b >> 31)}
    assert len(seen) == (len(OperandClass.NAMES) * 2) ** 2


# ---------------------------------------------------------------- encoding

#: The opcode table, written out: the RTL's decoder depends on these numbers.
OPCODES = {
    "nop": 1, "add": 2, "sub": 3, "mul": 4, "max": 5, "min": 6, "eq": 7, "lt": 8, "le": 9,
    "select": 10, "iadd": 11, "isub": 12, "and": 13, "or": 14, "xor": 15, "shl": 16,
    "shr": 17, "sra": 18, "f32_to_bf16": 19, "bf16_to_f32": 20, "f32_to_i32": 21,
    "i32_to_f32": 22, "rcp": 23, "rsqrt": 24, "exp": 25, "rsum": 26, "rmax": 27, "rmin": 28,
    "vld": 29, "vst": 30, "push_weights": 31, "push_lhs": 32, "pop": 33, "push_lhs_acc": 34,
}


def test_opcode_table_is_stable():
    assert {name: spec.opcode for name, spec in vpu.OPS.items()} == OPCODES
    assert set(vpu.ELEMENTWISE_OPS) <= set(vpu.OPS)


def test_field_positions_by_hand():
    # add v1, v2, v3: 2 << 26 | 1 << 21 | 2 << 16 | 3 << 11
    assert vpu.assemble("add v1, v2, v3")[0] == 0x08221800
    # select v31, v0, v17, v9: 10 << 26 | 31 << 21 | 0 << 16 | 17 << 11 | 9 << 6
    assert vpu.assemble("select v31, v0, v17, v9")[0] == 0x2BE08A40
    # vld v5, 0x1234, 7: 29 << 26 | 5 << 21 | 0x1234 << 5 | 7
    assert vpu.assemble("vld v5, 0x1234, 7")[0] == 0x74A24687
    assert vpu.assemble("vst v2, 3")[0] == (30 << 26) | (2 << 21) | (3 << 5) | 1
    assert vpu.assemble("push_lhs v4")[0] == (32 << 26) | (4 << 16)
    assert vpu.assemble("pop v4")[0] == (33 << 26) | (4 << 21)
    assert vpu.assemble("push_lhs_acc v4, v9")[0] == (34 << 26) | (4 << 16) | (9 << 11)
    assert vpu.assemble("nop")[0] == 1 << 26


def _random_instruction(rng, spec):
    fields = {}
    for f in spec.operands:
        fields[f] = int(rng.integers(0, 1 << vpu.FIELDS[f][1]))
    return vpu.Instruction(spec.name, **fields)


def test_encode_decode_round_trip(rng):
    for spec in vpu.OPS.values():
        for _ in range(50):
            ins = _random_instruction(rng, spec)
            word = vpu.encode(ins)
            assert word >> 26 == spec.opcode
            assert vpu.decode(word) == ins
            assert vpu.assemble(str(ins))[0] == word


def test_disassemble_assemble_round_trip(rng):
    specs = list(vpu.OPS.values())
    words = [vpu.encode(_random_instruction(rng, specs[int(i)]))
             for i in rng.integers(0, len(specs), 300)]
    words += [0, 0xFFFFFFFF, (2 << 26) | 1]               # illegal ones survive as .word
    text = vpu.disassemble(words)
    np.testing.assert_array_equal(vpu.assemble(text), np.array(words, np.uint32))


def test_illegal_encodings():
    assigned = set(OPCODES.values())
    for code in range(64):
        if code not in assigned:
            with pytest.raises(vpu.IllegalInstruction, match="not assigned"):
                vpu.decode(code << 26)
    # Every unused bit of every op makes its word illegal.
    for spec in vpu.OPS.values():
        used = 0
        for f in spec.operands:
            low, width = vpu.FIELDS[f]
            used |= ((1 << width) - 1) << low
        for bit in range(26):
            if not used >> bit & 1:
                with pytest.raises(vpu.IllegalInstruction, match="unused bits"):
                    vpu.decode(spec.opcode << 26 | 1 << bit)
    assert issubclass(vpu.IllegalInstruction, ValueError)
    with pytest.raises(ValueError, match="32 bits"):
        vpu.decode(1 << 32)
    with pytest.raises(ValueError, match="no vb field"):
        vpu.encode(vpu.Instruction("exp", vd=1, va=2, vb=3))
    with pytest.raises(ValueError, match="in 0..31"):
        vpu.encode(vpu.Instruction("add", vd=32))


@pytest.mark.parametrize("text, message", [
    ("vaddd v1, v2, v3", "line 3: unknown op 'vaddd'"),
    ("add v1, v2", r"line 3: add takes 3 operands \(vd, va, vb\), got 2"),
    ("add v1, v2, v3, v4", "line 3: add takes 3 operands"),
    ("add v1, v2,", "line 3: add takes 3 operands"),
    ("add v1, v2, v32", "line 3: add: no register 'v32'"),
    ("add v1, v2, r3", "line 3: add: expected a register v0..v31 for vb, not 'r3'"),
    ("vld v1, 65536", "line 3: vld: base 65536 is out of range 0..65535"),
    ("vld v1, 0, 32", "line 3: vld: stride 32 is out of range 0..31"),
    ("vst v1, -1", "line 3: vst: base -1 is out of range"),
    ("vld v1, ten", "line 3: vld: base must be an integer, not 'ten'"),
    ("nop v1", "line 3: nop takes 0 operands"),
    ("push_lhs", "line 3: push_lhs takes 1 operands"),
    (".word 0x100000000", r"line 3: .word: 0x100000000 does not fit"),
    (".word", "line 3: .word takes one value"),
])
def test_assembler_errors_name_the_line(text, message):
    with pytest.raises(ValueError, match=message):
        vpu.assemble(f"nop  # fine\n\n{text}\nnop\n")


def test_assembler_syntax():
    words = vpu.assemble("""
        ; a comment line
        ADD  v1,v2 ,  v3   # upper case and loose spacing
        vld v0, 0x10        # stride defaults to 1
        .word 0xDEADBEEF
    """)
    np.testing.assert_array_equal(words, [0x08221800, (29 << 26) | (0x10 << 5) | 1, 0xDEADBEEF])
    assert vpu.assemble("").size == 0
    with pytest.raises(ValueError, match="program text"):
        vpu.assemble(b"nop")


# ---------------------------------------------------------------- executor

LANES = 8


def _random_state(rng, lanes=LANES, lines=64):
    regs = corpus.random_values(rng, FP32, vpu.VREGS * 8 * lanes).reshape(vpu.VREGS, 8, lanes)
    vmem = rng.integers(0, 1 << 32, lines * lanes, dtype=np.uint64).astype(np.uint32)
    return regs, vmem


@pytest.mark.parametrize("numerics", NUMERICS)
def test_every_register_op_in_a_program(numerics, rng):
    """Each op through the executor equals the oracle applied word by word to the vregs."""
    regs, vmem = _random_state(rng)
    for spec in vpu.OPS.values():
        if spec.unit not in ("alu", "trans", "reduce"):
            continue
        vd, va, vb, vc = (int(x) for x in rng.choice(32, 4, replace=False))
        regs[vc] = rng.integers(0, 3, (8, LANES))                  # a mask-ish register
        ins = vpu.Instruction(spec.name, **{f: v for f, v in zip(("vd", "va", "vb", "vc"),
                                                                  (vd, va, vb, vc))
                                            if f in spec.operands})
        state = vpu.execute([vpu.encode(ins)], vregs=regs, vmem=vmem, numerics=numerics)
        expected = regs.copy()
        if spec.unit == "reduce":
            op = spec.name[1:]
            row = oracle.reduce(op, regs[va].T, numerics)
            expected[vd] = np.array(row, np.uint32)[None, :]
        else:
            sources = [regs[r].ravel() for r, f in zip((va, vb, vc), ("va", "vb", "vc"))
                       if f in spec.reads]
            expected[vd] = np.array(oracle.elementwise(spec.name, numerics, *sources),
                                    np.uint32).reshape(8, LANES)
        np.testing.assert_array_equal(state.vregs, expected, err_msg=f"{ins}/{numerics}")
        np.testing.assert_array_equal(state.vmem, vmem)
        assert state.error is None and state.executed == 1


def test_programs_run_in_order_with_dependencies():
    vregs = np.zeros((32, 8, LANES), np.uint32)
    vregs[1] = np.float32(1.5).view(np.uint32)
    vregs[2] = np.float32(2.0).view(np.uint32)
    state = vpu.execute("""
        mul v3, v1, v2      # 3.0
        add v3, v3, v1      # 4.5, reading the mul's result
        rsqrt v4, v2
        sub v5, v3, v3
        rmax v6, v3
    """, vregs=vregs)
    assert np.all(state.vregs[3].view(np.float32) == 4.5)
    assert np.all(state.vregs[4] == 0x3F3504F3)
    assert np.all(state.vregs[5] == 0)
    assert np.all(state.vregs[6].view(np.float32) == 4.5)
    np.testing.assert_array_equal(vregs[3], 0)                         # inputs not modified


def test_loads_and_stores(rng):
    lines, lanes = 40, 4
    vmem = rng.integers(0, 1 << 32, lines * lanes, dtype=np.uint64).astype(np.uint32)
    state = vpu.execute("""
        vld v1, 3, 2        # lines 3, 5, ..., 17
        vld v2, 39, 0       # line 39 eight times
        vst v1, 20, 1       # lines 20..27
        vst v2, 0, 0        # line 0, last sublane wins
        vld v3, 20, 1
    """, vmem=vmem, lanes=lanes)
    words = vmem.reshape(lines, lanes)
    for s in range(8):                                  # independent: plain loops
        np.testing.assert_array_equal(state.vregs[1, s], words[3 + 2 * s])
        np.testing.assert_array_equal(state.vregs[2, s], words[39])
        np.testing.assert_array_equal(state.vmem[(20 + s) * lanes:(21 + s) * lanes],
                                      words[3 + 2 * s])
    np.testing.assert_array_equal(state.vregs[3], state.vregs[1])
    np.testing.assert_array_equal(state.vmem[:lanes], words[39])
    untouched = np.r_[lanes:20 * lanes, 28 * lanes:lines * lanes]
    np.testing.assert_array_equal(state.vmem[untouched], vmem[untouched])
    with pytest.raises(ValueError, match=r"instruction 1 \(vld v1, 33, 1\).*line 40 of 40"):
        vpu.execute("nop\nvld v1, 33, 1", vmem=vmem, lanes=lanes)
    with pytest.raises(ValueError, match="line 47 of 40"):
        vpu.execute("vst v1, 5, 6", vmem=vmem, lanes=lanes)


def test_illegal_word_stops_the_run():
    vregs = np.zeros((32, 8, LANES), np.uint32)
    vregs[1] = 5
    program = vpu.assemble("iadd v2, v1, v1\n.word 0x00000000\niadd v3, v1, v1")
    state = vpu.execute(program, vregs=vregs)
    assert state.error == 1 and state.executed == 1
    assert np.all(state.vregs[2] == 10) and np.all(state.vregs[3] == 0)
    stray = int(program[0]) | 1                          # a non-zero unused bit
    assert vpu.execute([stray], vregs=vregs).error == 0


def _bf16_vreg(rng, lanes):
    values = rng.normal(size=(8, lanes)).astype(ml_dtypes.bfloat16)
    return values.view(np.uint16).astype(np.uint32), values


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("lanes", [8, 16])
def test_mxu_link_matches_matmul(lanes, numerics, rng):
    vregs = np.zeros((32, 8, lanes), np.uint32)
    tiles = lanes // 8
    w = np.zeros((lanes, lanes), np.uint16)
    for t in range(tiles):                               # v0.. hold W's rows, 8 per vreg
        vregs[t], _ = _bf16_vreg(rng, lanes)
        w[8 * t:8 * t + 8] = vregs[t]
    vregs[10], _ = _bf16_vreg(rng, lanes)
    vregs[11], _ = _bf16_vreg(rng, lanes)
    # An fp32 vreg reaches the MXU through f32_to_bf16 first.
    vregs[12] = rng.normal(size=(8, lanes)).astype(np.float32).view(np.uint32)
    program = "\n".join([*(f"push_weights v{t}" for t in range(tiles)),
                         "push_lhs v10", "push_lhs v11", "f32_to_bf16 v13, v12",
                         "push_lhs v13", "pop v20", "pop v21", "pop v22"])
    state = vpu.execute(program, vregs=vregs, lanes=lanes, numerics=numerics)
    x13 = vpu.elementwise("f32_to_bf16", vregs[12], numerics=numerics)
    for reg, x in ((20, vregs[10]), (21, vregs[11]), (22, x13)):
        want = matmul(x.astype(np.uint16), w, numerics=numerics).view(np.uint32)
        np.testing.assert_array_equal(state.vregs[reg], want)
    assert len(state.mxu.results) == 0


def test_mxu_swap_takes_effect_at_the_next_lhs_push(rng):
    vregs = np.zeros((32, 8, LANES), np.uint32)
    vregs[1], _ = _bf16_vreg(rng, LANES)
    vregs[2], _ = _bf16_vreg(rng, LANES)
    vregs[3], _ = _bf16_vreg(rng, LANES)
    state = vpu.execute("""
        push_lhs v3         # before any weights: the active tile is +0.0
        push_weights v1
        push_lhs v3         # swaps v1 in
        push_weights v2     # loads the shadow while v1 computes
        push_lhs v3         # swaps v2 in
        push_lhs v3         # v2 still
        pop v10
        pop v11
        pop v12
        pop v13
    """, vregs=vregs)
    x = vregs[3].astype(np.uint16)
    zeros = np.zeros((LANES, LANES), np.uint16)
    expect = [matmul(x, w).view(np.uint32) for w in
              (zeros, vregs[1].astype(np.uint16), vregs[2].astype(np.uint16),
               vregs[2].astype(np.uint16))]
    for reg, want in zip((10, 11, 12, 13), expect):
        np.testing.assert_array_equal(state.vregs[reg], want)
    # Upper halves of the words are not part of the bf16 operand.
    high = vregs.copy()
    high[1] |= np.uint32(0xABCD0000)
    again = vpu.execute("push_weights v1\npush_lhs v3\npop v11", vregs=high)
    np.testing.assert_array_equal(again.vregs[11], expect[1])


@pytest.mark.parametrize("numerics", ["tpu", "ieee"])
def test_lhs_pushes_with_accumulators_chain_a_long_k_as_one_matmul(rng, numerics):
    # K = 24 on an 8x8 MXU: each K-tile's sums start from the previous tile's results, so
    # the program equals one matmul over the whole K (a single chain of roundings), not
    # the sum of three separately rounded products.
    tiles = 3
    x = np.concatenate([_bf16_vreg(rng, LANES)[0] for _ in range(tiles)], axis=1)
    w = np.concatenate([_bf16_vreg(rng, LANES)[0] for _ in range(tiles)], axis=0)
    vregs = np.zeros((32, 8, LANES), np.uint32)
    lines = []
    for t in range(tiles):
        vregs[t] = w[8 * t:8 * t + 8]
        vregs[10 + t] = x[:, 8 * t:8 * t + 8]
        push = "push_lhs v10" if t == 0 else f"push_lhs_acc v{10 + t}, v20"
        lines += [f"push_weights v{t}", push, "pop v20"]
    state = vpu.execute("\n".join(lines), vregs=vregs, numerics=numerics)
    want = matmul(x.astype(np.uint16), w.astype(np.uint16), numerics=numerics)
    np.testing.assert_array_equal(state.vregs[20], want.view(np.uint32))


def test_mxu_program_errors():
    with pytest.raises(ValueError, match=r"instruction 2 \(push_weights v1\).*shadow"):
        vpu.execute("push_weights v1\nnop\npush_weights v1")
    with pytest.raises(ValueError, match=r"instruction 0 \(pop v1\).*only 0"):
        vpu.execute("pop v1")
    with pytest.raises(ValueError, match="multiple of 8"):
        vpu.execute("push_lhs v1", lanes=4)
    mxu = vpu.MXUState(lanes=8, capacity=8)
    with pytest.raises(ValueError, match="result queue holds 8"):
        vpu.execute("push_lhs v1\npush_lhs v1", mxu=mxu)
    # The MXU state carries over between runs.
    mxu = vpu.MXUState(lanes=8)
    vpu.execute("push_lhs v1", mxu=mxu)
    assert vpu.execute("pop v2", mxu=mxu).executed == 1


def test_execute_rejects_bad_arguments():
    with pytest.raises(ValueError, match="lanes"):
        vpu.execute("nop", lanes=0)
    with pytest.raises(ValueError, match=r"vregs must be \[32, 8, 8\]"):
        vpu.execute("nop", vregs=np.zeros((32, 8, 4), np.uint32))
    with pytest.raises(ValueError, match="whole 8-word lines"):
        vpu.execute("nop", vmem=np.zeros(12, np.uint32))
    with pytest.raises(ValueError, match="numerics"):
        vpu.execute("nop", numerics="bf16")
    with pytest.raises(ValueError, match="1-D array of words"):
        vpu.execute(np.zeros((2, 2), np.uint32))
    with pytest.raises(ValueError, match="0..2\\*\\*32-1"):
        vpu.execute([1 << 32])
    with pytest.raises(ValueError, match="mxu must be"):
        vpu.execute("nop", mxu=vpu.MXUState(lanes=16))
    with pytest.raises(ValueError, match="line 1: unknown op"):
        vpu.execute("bogus v1")
    assert vpu.execute([]).executed == 0
    assert vpu.execute("nop").vmem.size == vpu.DEFAULT_VMEM_LINES * LANES


def test_f32_to_bf16_leaves_the_pattern_in_the_low_half():
    out = vpu.execute("f32_to_bf16 v1, v0",
                      vregs=np.full((32, 8, LANES), 0x3F808001, np.uint32))
    assert np.all(out.vregs[1] == 0x3F81)
