"""sim.vpu: whole programs, elementwise operations and reductions on the VPU RTL, against golden.

Amaranth and Icarus runs use 1-lane VPUs (a run costs seconds of elaboration, whatever its
length). Verilator runs use two "tpu" builds: the full 1-lane VPU (every op; the
elementwise passes run on it rather than on a build per op as
``sim.vpu.elementwise`` makes), and an 8-lane VPU with its 8x8 MXU but only the
ops its programs need (a full 8-lane VPU takes many minutes to compile). Every op's corpus
on the 1-lane build, the 8-lane build's tests and the Icarus runs are marked slow; the
default suite has every ALU op in both numerics modes (test_vpu_rtl.py), the generated
programs on golden (here), the 1-lane build through a regression program
(test_regress_vpu.py), and the 8-lane VPU and its MXU on Amaranth (test_vpu_rtl.py,
test_vpu_throughput.py).
"""

import numpy as np
import pytest
from amaranth.lib import data

from golden import vpu as golden
from golden.mxu import matmul
from hdl.vpu import ERRORS as RTL_ERRORS
from hdl.vpu import PROGRAM_LAYOUT
from sim import vpu
from verif.scoreboard import Scoreboard

from ..simulators import needs_icarus
from .corpus import SPECIAL, check_elementwise_corpus, check_reduce_corpus



def _state(rng, lanes, lines):
    """Registers and VMEM: every special value in every register, shuffled, then random."""
    vregs = rng.choice(SPECIAL, (golden.VREGS, 8, lanes))
    vregs[::3] = rng.integers(0, 1 << 32, vregs[::3].shape, dtype=np.uint64).astype(np.uint32)
    vregs[5] = rng.integers(0, 3, (8, lanes))                 # a mask for select
    vmem = rng.choice(SPECIAL, lines * lanes)
    return vregs, vmem


def _same_state(got, want, label):
    board = Scoreboard(label, np.concatenate([want.vregs.ravel(), want.vmem]))
    board.check_all(np.concatenate([got.vregs.ravel(), got.vmem]))
    assert board.passed, board.summary()
    assert (got.error, got.error_index) == (want.error_kind, want.error), label
    assert got.executed == want.executed, label


# ---------------------------------------------------------------- golden's stop mode

ERROR_PROGRAMS = {     # kind -> (program, index of the fault); v1 holds data
    "illegal": ("add v2, v1, v1\n.word 0x00000001\nadd v3, v1, v1", 1),
    "vmem_range": ("add v2, v1, v1\nvst v2, 4, 1\nvld v3, 250, 1\nadd v4, v1, v1", 2),
    "weights_full": ("push_weights v1\nadd v2, v1, v1\npush_weights v2\npush_lhs v1", 2),
    "results_full": ("push_lhs v1\npush_lhs v1\nadd v2, v1, v1\npush_lhs v1\npop v3", 3),
    "pop_empty": ("push_lhs v1\npop v2\nadd v3, v2, v1\npop v4\nadd v5, v1, v1", 3),
    "no_mxu": ("add v2, v1, v1\npush_lhs v1\nadd v3, v1, v1", 1),
}


@pytest.mark.parametrize("kind", golden.ERRORS)
def test_golden_stops_before_the_fault(kind, rng):
    program, index = ERROR_PROGRAMS[kind]
    vregs = rng.integers(0, 1 << 32, (golden.VREGS, 8, 8), dtype=np.uint64).astype(np.uint32)
    mxu = False if kind == "no_mxu" else golden.MXUState(lanes=8, capacity=16)
    state = golden.execute(program, vregs=vregs, vmem=np.zeros(256 * 8, np.uint32), mxu=mxu,
                           on_error="stop")
    assert (state.error, state.error_kind, state.executed) == (index, kind, index)
    words = golden.assemble(program)
    mxu = False if kind == "no_mxu" else golden.MXUState(lanes=8, capacity=16)
    before = golden.execute(words[:index], vregs=vregs, vmem=np.zeros(256 * 8, np.uint32),
                            mxu=mxu)
    np.testing.assert_array_equal(state.vregs, before.vregs)
    np.testing.assert_array_equal(state.vmem, before.vmem)
    if kind == "illegal":      # always a stop, as before
        assert golden.execute(program, vregs=vregs, mxu=False).error == index
        return
    mxu = False if kind == "no_mxu" else golden.MXUState(lanes=8, capacity=16)
    with pytest.raises(golden.ProgramError, match=rf"^instruction {index} \(") as raised:
        golden.execute(program, vregs=vregs, vmem=np.zeros(256 * 8, np.uint32), mxu=mxu)
    assert (raised.value.kind, raised.value.index) == (kind, index)
    assert isinstance(raised.value, ValueError)


def test_golden_error_kinds_are_the_rtl_codes():
    # A VPU built with fewer ops (hdl.vpu.OPTIONAL_OPS) has one fault more, its own.
    assert RTL_ERRORS == ("none", *golden.ERRORS, "unsupported")
    with pytest.raises(ValueError, match="on_error must be"):
        golden.execute("nop", on_error="ignore")
    with pytest.raises(ValueError, match="kind must be one of"):
        golden.ProgramError("x", kind="bogus")


# ---------------------------------------------------------------- packing, on golden

@pytest.mark.parametrize("lanes", [1, 8])
def test_plans_compute_elementwise_and_reduce_on_golden(lanes, rng):
    """The generated programs, run by the golden executor, give golden's results: the packing
    is right whatever the RTL does. Lengths cross pass boundaries."""
    per_pass = {1: vpu.VMEM_LINES * lanes, 2: vpu.VMEM_LINES // 16 * 8 * lanes,
                3: vpu.VMEM_LINES // 24 * 8 * lanes}
    for op in golden.ELEMENTWISE_OPS:
        arity = 3 if op == "select" else 1 if op in (
            "f32_to_bf16", "bf16_to_f32", "f32_to_i32", "i32_to_f32", "rcp", "rsqrt",
            "exp") else 2
        n = per_pass[arity] + int(rng.integers(1, 8 * lanes))
        operands = [rng.choice(SPECIAL, n) for _ in range(arity)]
        got = np.concatenate([
            golden.execute(p.program, vmem=p.vmem, lanes=lanes, mxu=False).vmem[p.results]
            for p in vpu.plan_elementwise(op, operands, lanes=lanes)])
        want = golden.elementwise(op, *operands)
        np.testing.assert_array_equal(got.astype(want.dtype), want, err_msg=op)
    rows = rng.choice(SPECIAL, (vpu.VMEM_LINES // 8 * lanes + 3, 8))
    for op in golden.REDUCE_OPS:
        got = np.concatenate([
            golden.execute(p.program, vmem=p.vmem, lanes=lanes, mxu=False).vmem[p.results]
            for p in vpu.plan_reduce(op, rows, lanes=lanes)])
        np.testing.assert_array_equal(got, golden.reduce(op, rows), err_msg=op)


def test_program_beats_and_vreg_images(rng):
    words = rng.integers(0, 1 << 32, 5, dtype=np.uint64).astype(np.uint32)
    beats = vpu.program_beats(words)
    unpacked = [data.Const(PROGRAM_LAYOUT, beat) for beat in beats]
    assert [b.count for b in unpacked] == [2, 2, 1]
    assert [w for b in unpacked for w in list(b.words)[:b.count]] == words.tolist()
    assert vpu.program_beats([]) == []
    vregs = rng.integers(0, 1 << 32, (32, 8, 3), dtype=np.uint64).astype(np.uint32)
    image = vpu.vreg_image(vregs)
    # Sublane s, lane j of v<r> at bits 32 * (s * lanes + j) of entry r.
    assert (image[7] >> (32 * (5 * 3 + 2))) & 0xFFFFFFFF == vregs[7, 5, 2]
    np.testing.assert_array_equal(vpu.vregs_from_image(image, 3), vregs)


# ---------------------------------------------------------------- bad input

def _golden_message(call):
    with pytest.raises(ValueError) as error:
        call()
    return str(error.value)


@pytest.mark.parametrize("args", [
    ("fma", np.zeros(3, np.uint32)),
    ("add", np.zeros(3, np.uint32)),
    ("rcp", np.zeros(3, np.uint32), np.zeros(3, np.uint32)),
    ("add", np.zeros(3, np.uint32), np.zeros(4, np.uint32)),
    ("add", np.zeros(3, np.float64), np.zeros(3, np.uint32)),
    ("bf16_to_f32", np.zeros(3, np.int16)),
])
def test_elementwise_rejects_what_golden_rejects(args):
    message = _golden_message(lambda: golden.elementwise(*args))
    with pytest.raises(ValueError) as error:
        vpu.elementwise(*args)
    assert str(error.value) == message


def test_bad_arguments_are_one_line_value_errors():
    a = np.zeros(4, np.uint32)
    cases = [
        (lambda: vpu.elementwise("add", a, a, numerics="bf16"), "numerics"),
        (lambda: vpu.elementwise("add", a, a, lanes=0), "lanes must be"),
        (lambda: vpu.elementwise("add", a, a, backend="spice"), "backend must be"),
        (lambda: vpu.reduce("prod", np.zeros((2, 8), np.uint32)), "reduce op must be"),
        (lambda: vpu.reduce("sum", np.zeros((2, 4), np.uint32)), r"a must be \[N, 8\]"),
        (lambda: vpu.run("bogus v1"), "line 1: unknown op"),
        (lambda: vpu.run(np.zeros((2, 2), np.uint32)), "1-D array of words"),
        (lambda: vpu.run("nop", vregs=np.zeros((32, 8, 4), np.uint32)), r"\[32, 8, 8\]"),
        (lambda: vpu.run("nop", vmem=np.zeros(12, np.uint32)), "whole 8-word lines"),
        (lambda: vpu.run("nop", vmem=np.zeros(64, np.uint32), vmem_lines=16), "holds 8 lines"),
        (lambda: vpu.run("nop", vmem=np.zeros(8, np.float64)), "uint32 bit-pattern"),
        (lambda: vpu.run("nop", lanes=1, mxu=True), "multiple of 8"),
        (lambda: vpu.run("nop", mxu="yes"), "mxu must be"),
        (lambda: vpu.run("nop", mxu_results=4), "mxu_results must be"),
        (lambda: vpu.run("nop", idle=1.0), "idle must be"),
        (lambda: vpu.run("nop\n" * 5, depth=2), "3 beats, more than depth 2"),
        (lambda: vpu.run("nop", vmem_lines=0), "vmem_lines must be"),
        (lambda: vpu.run("nop", vmem_lines=4), "8 to 65536 lines, not 4"),
        (lambda: vpu.run("nop", lanes=1, vmem=np.zeros(1 << 17, np.uint32)), "not 131072"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message) as error:
            call()
        assert "\n" not in str(error.value)


def test_empty_operands_give_empty_results():
    empty = np.zeros((0, 3), np.uint32)
    assert vpu.elementwise("exp", empty).shape == (0, 3)
    assert vpu.elementwise("f32_to_bf16", empty).dtype == np.uint16
    assert vpu.reduce("sum", np.zeros((0, 8), np.uint32)).shape == (0,)


# ---------------------------------------------------------------- Amaranth, 1 lane

HAZARDS = """
    add v10, v0, v1        # a pair: independent, may issue together
    mul v11, v2, v3
    sub v12, v10, v11      # RAW at distance 1 and 2
    max v13, v12, v0       # distance 1
    rcp v14, v13           # the transcendental unit, then its result at 1..4
    rsqrt v15, v14
    exp v16, v15
    min v17, v14, v16
    rsum v18, v17          # a reduction right after, and its result read back
    rmax v19, v18
    iadd v20, v19, v18
    vst v20, 3, 2          # a store, then a load of a line it wrote: through VMEM
    vld v21, 5, 0
    select v22, v21, v20, v5
    vld v23, 0, 1          # a load and an ALU op in one beat
    and v24, v1, v2
    vst v23, 20, 0         # stride 0: sublane 7 stays in line 20
    f32_to_bf16 v25, v23
    bf16_to_f32 v26, v25
    add v0, v0, v0         # write after read of v0 by the pair above; WAW below
    add v0, v26, v1
    f32_to_i32 v27, v0
    i32_to_f32 v28, v27
    shl v29, v28, v4
    shr v30, v29, v4
    sra v31, v30, v4
    eq v6, v31, v31
    lt v7, v0, v1
    le v8, v1, v0
    or v9, v6, v7
    xor v9, v9, v8
    isub v9, v9, v6
    rmin v3, v9
"""


def test_run_matches_golden_with_hazards_and_dual_issue_on_amaranth(rng):
    """Every register op, dependent at distances 1 to 4 and paired in beats, in "ieee"
    numerics (the Verilator tests run "tpu")."""
    vregs, vmem = _state(rng, 1, 32)
    got = vpu.run(HAZARDS, vregs=vregs, vmem=vmem, lanes=1, numerics="ieee")
    want = golden.execute(HAZARDS, vregs=vregs, vmem=vmem, lanes=1, numerics="ieee",
                          on_error="stop")
    _same_state(got, want, "hazards/ieee")
    assert got.executed == len(golden.assemble(HAZARDS)) and got.dual >= 1
    assert got.cycles > got.executed // 2


@pytest.mark.slow
@needs_icarus
@pytest.mark.parametrize("numerics", ["tpu", "ieee"])
def test_run_matches_golden_on_icarus(numerics, rng):
    """The hazard program on Icarus. Its first transcendental instruction feeds sublane 0
    from registers that rest at their initial values, which Icarus once left at X (see
    sim/backends/icarus_source.py). The cycle count is the Verilator build's."""
    vregs, vmem = _state(rng, 1, vpu.VMEM_LINES)
    got = vpu.run(HAZARDS, vregs=vregs, vmem=vmem, lanes=1, numerics=numerics,
                  backend="icarus")
    want = golden.execute(HAZARDS, vregs=vregs, vmem=vmem, lanes=1, numerics=numerics,
                          on_error="stop")
    _same_state(got, want, f"hazards/{numerics}/icarus")
    if numerics == "tpu":         # the full 1-lane "tpu" build the Verilator tests share
        assert got.cycles == vpu.run(HAZARDS, vregs=vregs, vmem=vmem, lanes=1,
                                     backend="verilator").cycles


def test_elementwise_and_reduce_on_amaranth(rng):
    """elementwise and reduce themselves, each on a VPU built with just its op: rsqrt of the
    special values (its hardest input among them), select (three operands, a mask), and a
    sum over a pass boundary."""
    a = np.concatenate([SPECIAL, SPECIAL ^ np.uint32(0x80000000)]).reshape(2, -1)
    got = vpu.elementwise("rsqrt", a, numerics="ieee", lanes=1)
    np.testing.assert_array_equal(got, golden.elementwise("rsqrt", a, numerics="ieee"))
    b, mask = rng.permutation(a.ravel()), rng.integers(0, 3, a.size).astype(np.uint32)
    got = vpu.elementwise("select", a.ravel(), b, mask, lanes=1)
    np.testing.assert_array_equal(got, golden.elementwise("select", a.ravel(), b, mask))
    rows = rng.choice(SPECIAL, (vpu.VMEM_LINES // 8 + 2, 8))
    np.testing.assert_array_equal(vpu.reduce("sum", rows, lanes=1), golden.reduce("sum", rows))


def test_no_mxu_stops_the_run_on_amaranth(rng):
    vregs, vmem = _state(rng, 1, 16)
    program, index = ERROR_PROGRAMS["no_mxu"]
    # Built with just the ALU's add (the program's only op): a small design, fast to elaborate.
    got = vpu.run(program + "\nvst v3, 0, 1", vregs=vregs, vmem=vmem, lanes=1, ops=("add",))
    want = golden.execute(program + "\nvst v3, 0, 1", vregs=vregs, vmem=vmem, lanes=1,
                          on_error="stop")
    _same_state(got, want, "no_mxu")
    assert (got.error, got.error_index) == ("no_mxu", index)


# ---------------------------------------------------------------- Verilator, "tpu"

#: The ops of the 8-lane build below (with its MXU): all its programs need. A full 8-lane
#: VPU is a large design, minutes to compile; this one is about a minute.
MXU_BUILD_OPS = ("add", "f32_to_bf16")


@pytest.mark.slow
def test_every_op_through_generated_programs_on_verilator(rng):
    for op in golden.ELEMENTWISE_OPS:
        board = check_elementwise_corpus(op, rng, backend="verilator")
        assert board.passed, board.summary()
    for op in golden.REDUCE_OPS:
        check_reduce_corpus(op, rng, SPECIAL, backend="verilator")


@pytest.mark.slow
@pytest.mark.parametrize("kind", [k for k in golden.ERRORS if k != "no_mxu"])
def test_program_errors_stop_the_run_on_verilator(kind, rng):
    vregs, vmem = _state(rng, 8, vpu.VMEM_LINES)
    program, index = ERROR_PROGRAMS[kind]
    got = vpu.run(program, vregs=vregs, vmem=vmem, backend="verilator", ops=MXU_BUILD_OPS)
    want = golden.execute(program, vregs=vregs, vmem=vmem,
                          mxu=golden.MXUState(lanes=8, capacity=vpu.MXU_RESULTS),
                          on_error="stop")
    _same_state(got, want, kind)
    assert (got.error, got.error_index) == (kind, index)


def _bf16_vreg(rng):
    values = rng.normal(size=(8, 8)).astype(np.float32)
    values[0, :3] = [0.0, -0.0, np.inf]
    return (values.view(np.uint32) >> np.uint32(16)) | np.uint32(0x5A5A0000)   # upper: junk


@pytest.mark.slow
def test_mxu_link_matches_matmul_on_verilator(rng):
    """Weights and LHS vregs pushed through the VPU into its 8x8 MXU and popped back: each
    pop is golden.mxu.matmul of the LHS bf16 rows and the weight tile swapped in before."""
    vregs, _ = _state(rng, 8, 1)
    w1, w2, x1, x2 = (_bf16_vreg(rng) for _ in range(4))
    vregs[1], vregs[2], vregs[3], vregs[4] = w1, w2, x1, x2
    vregs[6] = rng.normal(size=(8, 8)).astype(np.float32).view(np.uint32)
    program = """
        push_lhs v3          # the active tile is +0.0 before the first swap
        push_weights v1
        push_lhs v3          # swaps w1 in
        pop v20
        push_weights v2      # loads the shadow while w1 computes
        pop v21
        push_lhs v4          # swaps w2 in
        f32_to_bf16 v7, v6   # fp32 rows reach the MXU through the VPU's conversion
        push_lhs v7
        pop v22
        pop v23
    """
    got = vpu.run(program, vregs=vregs, backend="verilator", ops=MXU_BUILD_OPS)
    assert got.error is None and got.executed == 11

    def product(x, w):
        low = np.uint32(0xFFFF)
        return matmul((x & low).astype(np.uint16), (w & low).astype(np.uint16)).view(np.uint32)
    x7 = golden.elementwise("f32_to_bf16", vregs[6])
    zeros = np.zeros((8, 8), np.uint32)
    for reg, want in ((20, product(x1, zeros)), (21, product(x1, w1)), (22, product(x2, w2)),
                      (23, product(x7.astype(np.uint32), w2))):
        np.testing.assert_array_equal(got.vregs[reg], want, err_msg=f"v{reg}")
    want = golden.execute(program, vregs=vregs, vmem=np.zeros(vpu.VMEM_LINES * 8, np.uint32))
    np.testing.assert_array_equal(got.vregs, want.vregs)


def test_a_build_with_fewer_ops_stops_on_the_others(rng):
    vregs = rng.integers(0, 1 << 32, (golden.VREGS, 8, 1), dtype=np.uint64).astype(np.uint32)
    got = vpu.run("add v2, v0, v1\nexp v3, v0\nadd v4, v0, v0", vregs=vregs, lanes=1,
                  ops=("add",))
    assert (got.error, got.error_index, got.executed) == ("unsupported", 1, 1)
    want = golden.execute("add v2, v0, v1", vregs=vregs, lanes=1)
    np.testing.assert_array_equal(got.vregs, want.vregs)
    with pytest.raises(ValueError, match="ops has unknown operations vld"):
        vpu.run("nop", lanes=1, ops=("vld",))
