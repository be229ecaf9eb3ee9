# amaranth: UnusedElaboratable=no
# (Cores are built to read their latency.)
"""hdl.vpu: the decoder against golden.vpu, the ALU slot, issue timing and program errors.

Whole programs on every backend, and the MXU link, are tested through sim.vpu
(tests/vpu/test_sim_vpu.py) and the co-simulation regression (verif/suites/vpu).
"""

import re

import numpy as np
import pytest
from amaranth.back import rtlil, verilog
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from golden import vpu as golden
from golden.formats import NUMERICS
from hdl.arith import FP32ExpCore, FP32RcpCore, FP32RsqrtCore
from hdl.vpu import ERRORS, VPU, VPUSystem, isa
from hdl.vpu.vector_alu import VectorALU
from sim.backends.kept_simulations import KeptSimulation, design_key, kept_simulation, run_kept
from sim.verilog.export import export, vpu_of_instances
from sim.verilog.lint import lint

from .operands import FLOAT_BINARY, INT_BINARY, float_pairs, int_pairs, unary_inputs

ALU_UNARY = ("f32_to_bf16", "bf16_to_f32", "f32_to_i32", "i32_to_f32")


# ---------------------------------------------------------------- the decoder

def test_encoding_tables_match_golden():
    assert isa.FIELD_BITS == golden.FIELDS
    assert set(isa.OPS) == set(golden.OPS)
    for name, spec in golden.OPS.items():
        mine = isa.OPS[name]
        assert mine.opcode == spec.opcode, name
        assert mine.fields == spec.operands, name
        # The RTL gives pop a unit of its own (it waits on results; pushes send them).
        assert mine.unit == ("pop" if name == "pop" else spec.unit), name


class _Decoder(wiring.Component):
    word: In(32)
    legal: Out(1)
    opcode_hit: Out(6)

    def elaborate(self, platform):
        m = Module()
        d = isa.decode(m, self.word, name="d")
        m.d.comb += self.legal.eq(d.legal)
        for op in isa.OPS.values():
            with m.If(d.is_op[op.name]):
                m.d.comb += self.opcode_hit.eq(op.opcode)
        return m


def test_decoder_accepts_exactly_the_words_golden_decodes(rng):
    words = [golden.encode(golden.decode(golden.assemble(f"{op} " + ", ".join(
        f"v{i + 1}" if f.startswith("v") else "3" for i, f in enumerate(spec.operands)))[0]))
        for op, spec in golden.OPS.items()]
    stray = [(spec.opcode << 26) | (1 << bit) for spec in golden.OPS.values() for bit in range(26)]
    unassigned = [code << 26 for code in range(64) if code not in {s.opcode for s in golden.OPS.values()}]
    random = rng.integers(0, 1 << 32, 500, dtype=np.uint64).tolist()
    words += stray + unassigned + random
    dut = _Decoder()
    got = []

    async def bench(ctx):
        for word in words:
            ctx.set(dut.word, int(word))
            got.append((ctx.get(dut.legal), ctx.get(dut.opcode_hit)))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    for word, (legal, opcode) in zip(words, got):
        try:
            expected = golden.decode(word).spec.opcode
        except golden.IllegalInstruction:
            expected = None
        assert legal == (expected is not None), f"{int(word):#010x}"
        if expected is not None:
            assert opcode == expected, f"{int(word):#010x}"


# ---------------------------------------------------------------- one ALU slot

def _alu_cases(rng, n=64):
    """``n`` operand sets per operation, drawn from the corner-case corpora.

    Amaranth's simulator evaluates a vreg's ALUs slowly, so this is a sample;
    sim.vpu runs the whole corpora through the compiled RTL.
    """
    def sample(*operands):
        pick = rng.choice(operands[0].size, min(n, operands[0].size), replace=False)
        return tuple(x[pick] for x in operands)

    for op in FLOAT_BINARY + INT_BINARY:
        yield op, sample(*(float_pairs if op in FLOAT_BINARY else int_pairs)(rng, 0))
    for op in ALU_UNARY:
        yield op, sample(unary_inputs(op, rng, 0))
    a, b = float_pairs(rng, 0)
    yield "select", sample(a, b, rng.integers(0, 3, a.size).astype(np.uint32))


@pytest.mark.parametrize("numerics", NUMERICS)
def test_vector_alu_matches_golden(numerics, rng):
    words = 8
    dut = VectorALU(words=words, numerics=numerics)
    cases = list(_alu_cases(rng))
    results = {}

    async def bench(ctx):
        for op, operands in cases:
            n = operands[0].size
            out = np.zeros(n, np.uint32)
            for lo in range(0, n, words):
                chunk = [np.resize(x[lo:lo + words], words) for x in operands]
                ctx.set(dut.op, isa.OPS[op].opcode)
                for port, value in zip((dut.a, dut.b, dut.c), chunk):
                    ctx.set(port, sum(int(w) << (32 * i) for i, w in enumerate(value)))
                await ctx.tick()
                packed = ctx.get(dut.result)
                got = [(packed >> (32 * i)) & 0xFFFFFFFF for i in range(words)]
                out[lo:lo + words] = got[:min(words, n - lo)]
            results[op] = out

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    for op, operands in cases:
        expected = golden.elementwise(op, *operands, numerics=numerics).astype(np.uint32)
        bad = np.flatnonzero(results[op] != expected)
        assert bad.size == 0, (f"{op}/{numerics}: {bad.size} of {expected.size} differ, first "
                               + ", ".join(f"{[hex(int(x[i])) for x in operands]} -> "
                                           f"{int(results[op][i]):#x}, expected "
                                           f"{int(expected[i]):#x}" for i in bad[:3]))


# ---------------------------------------------------------------- issue timing

def _run(program, *, lanes=1, vregs=None, vmem_lines=64, numerics="tpu", ops=None, limit=500,
         regfile="flops", alu_width=8, vmem_window=0, vmem=None):
    """Run ``program`` on a VPUSystem in Amaranth's simulator.

    Returns (issue cycle of each instruction, final vregs, final VMEM, outputs).
    """
    words = golden.assemble(program) if isinstance(program, str) else np.asarray(program)
    params = dict(lanes=lanes, numerics=numerics, vmem_lines=vmem_lines, ops=ops)
    if regfile != "flops":
        params["regfile"] = regfile
    if alu_width != 8:
        params["alu_width"] = alu_width
    if vmem_window:
        params["vmem_window"] = vmem_window
    key = design_key(VPUSystem, params)
    sim = kept_simulation(key, lambda: KeptSimulation(VPUSystem(**params)))
    dut = sim.top
    beats = [words[i:i + 2] for i in range(0, len(words), 2)]
    issued, state = [], {}

    async def bench(ctx):
        if vregs is not None:
            for r in range(golden.VREGS):
                ctx.set(dut.vpu.regfile[r],
                        sum(int(w) << (32 * i) for i, w in enumerate(vregs[r].ravel())))
        for line in range(vmem_lines):
            words = [] if vmem is None else vmem[line * lanes:(line + 1) * lanes]
            ctx.set(dut.vmem.words[line], sum(int(w) << (32 * i) for i, w in enumerate(words)))
        counts = [ctx.get(dut.executed)]       # counts[c]: instructions issued before cycle c
        for beat in beats:
            ctx.set(dut.program.payload, {"words": [int(beat[0]), int(beat[-1])],
                                          "count": len(beat)})
            ctx.set(dut.program.valid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(dut.program.ready)
                counts.append(ctx.get(dut.executed))
                if ready:
                    break
        ctx.set(dut.program.valid, 0)
        while not ctx.get(dut.idle):
            await ctx.tick()
            counts.append(ctx.get(dut.executed))
            assert len(counts) < limit, "the VPU did not go idle"
        issued.extend(next(c for c in range(len(counts) - 1) if counts[c + 1] > i)
                      for i in range(counts[-1]))
        width = 8 * lanes
        state["vregs"] = np.array([[(ctx.get(dut.vpu.regfile[r]) >> (32 * i)) & 0xFFFFFFFF
                                    for i in range(width)] for r in range(golden.VREGS)],
                                  np.uint64).astype(np.uint32).reshape(golden.VREGS, 8, lanes)
        state["vmem"] = np.array([(ctx.get(dut.vmem.words[line]) >> (32 * i)) & 0xFFFFFFFF
                                  for line in range(vmem_lines) for i in range(lanes)],
                                 np.uint64).astype(np.uint32)
        state.update({name: ctx.get(getattr(dut, name))
                      for name in ("error", "error_index", "executed", "dual")})

    run_kept(key, sim, bench)
    return issued, state


def test_issue_timing_follows_the_documented_latencies():
    # D, the deepest transcendental core, from the cores themselves.
    deep = max(core(numerics="tpu").latency for core in (FP32RcpCore, FP32RsqrtCore, FP32ExpCore))
    program = "\n".join([
        "add v2, v0, v1", "mul v3, v0, v1",       # 0: one beat, independent: dual issue
        "add v4, v2, v3", "nop",                   # 2: reads both: ALU latency 2
        "sub v5, v4, v4", "iadd v6, v5, v0",       # 3: RAW inside the beat: one a cycle
        "rsum v7, v6", "rmax v8, v0",              # 5: one reduction unit: 8 cycles apart
        "xor v9, v8, v0", "nop",                   # 6: after rmax's latency 9
        "rcp v10, v9", "and v11, v10, v10",        # 7: after the reciprocal's 9 + D
        "vld v12, 0, 1", "or v13, v12, v0",        # 8: after the load's 10
        "vst v13, 8, 1", "vld v14, 8, 1",          # 9: one VMEM unit
    ])
    issued, state = _run(program)
    t = issued
    assert t[1] == t[0] and t[3] == t[2] == t[0] + 2
    assert t[4] == t[2] + 2 and t[5] == t[4] + 2
    assert t[6] == t[5] + 2 and t[7] == t[6] + 8
    assert t[8] == t[7] + 9 and t[9] == t[8]
    assert t[10] == t[8] + 2 and t[11] == t[10] + 9 + deep
    assert t[12] == t[11] + 1 and t[13] == t[12] + 10
    # The store's 8 lines; the load issues as the last one goes.
    assert t[14] == t[13] + 2 and t[15] == t[14] + 8
    assert state["executed"] == 16 and state["error"] == 0
    assert state["dual"] == sum(a == b for a, b in zip(t[::2], t[1::2]))


def test_whole_vreg_loads_and_stores_take_a_request_with_a_vmem_window():
    # vmem_window=8: a stride-1 vld is taken at issue, requested the next cycle and answered
    # the one after (latency 3, against 10); a stride-1 vst is one request, so the next
    # VMEM instruction issues a cycle after it; other strides go line by line as before,
    # and a load on the other port sends in the cycle the older load's last line answers.
    program = "\n".join([
        "vld v1, 0, 1", "nop",                     # 0
        "iadd v2, v1, v1", "nop",                  # 1: the load's latency 3
        "vst v2, 8, 1", "vld v3, 8, 1",            # 2: one request each: a cycle apart
        "vld v4, 16, 2", "vld v5, 24, 1",          # 3: 8 lines; the next waits for them
        "or v6, v5, v4", "nop",                    # 4
    ])
    issued, state = _run(program, vmem_window=8,
                         vmem=np.arange(64, dtype=np.uint32) + 100)
    t = issued
    assert t[2] == t[0] + 3 and t[4] == t[2] + 2 and t[5] == t[4] + 1
    # vld v4 (line by line) issues as v3's request goes; v5 (whole) as v4's last line is
    # requested, and sends as v4's last line answers; the or waits for v5.
    assert t[6] == t[5] + 1 and t[7] == t[6] + 8 and t[8] == t[7] + 3
    expected = golden.execute(golden.assemble(program),
                              vregs=np.zeros((golden.VREGS, 8, 1), np.uint32),
                              vmem=np.arange(64, dtype=np.uint32) + 100, lanes=1)
    np.testing.assert_array_equal(state["vregs"], expected.vregs)
    np.testing.assert_array_equal(state["vmem"], expected.vmem)


def test_vmem_window_runs_random_loads_and_stores_as_golden(rng):
    # Loads and stores of random strides (whole-vreg ones and line-by-line ones mixed, so
    # the two ports take turns), bases overlapping earlier stores, with adds on what they
    # load: the final registers and VMEM equal golden's, so every load saw every store
    # before it and wrote back to its own register in order.
    lines = 64
    ops = []
    for _ in range(80):
        kind = rng.integers(3)
        stride = int(rng.choice([0, 1, 1, 1, 2, 3]))
        base = int(rng.integers(0, lines - 7 * stride))
        reg = int(rng.integers(1, 8))
        if kind == 0:
            ops.append(f"vld v{reg}, {base}, {stride}")
        elif kind == 1:
            ops.append(f"vst v{reg}, {base}, {stride}")
        else:
            ops.append(f"iadd v{reg}, v{int(rng.integers(1, 8))}, v{int(rng.integers(1, 8))}")
    program = "\n".join(ops)
    vmem = rng.integers(0, 1 << 32, lines, dtype=np.uint32)
    vregs = rng.integers(0, 1 << 32, (golden.VREGS, 8, 1), dtype=np.uint64).astype(np.uint32)
    _, state = _run(program, vregs=vregs, vmem=vmem, vmem_window=8, limit=3000)
    expected = golden.execute(golden.assemble(program), vregs=vregs, vmem=vmem, lanes=1)
    np.testing.assert_array_equal(state["vregs"], expected.vregs)
    np.testing.assert_array_equal(state["vmem"], expected.vmem)
    assert state["error"] == 0 and state["executed"] == len(ops)


def test_write_after_read_in_one_beat_issues_together_and_reads_the_old_value():
    vregs = np.zeros((golden.VREGS, 8, 1), np.uint32)
    vregs[0] = 5
    vregs[1] = 7
    issued, state = _run("iadd v2, v0, v1\niadd v0, v1, v1", vregs=vregs)
    assert issued == [0, 0]
    assert (state["vregs"][2] == 12).all() and (state["vregs"][0] == 14).all()


def test_ram_register_file_issue_rules():
    # regfile="ram": one instruction at a time, each in the cycle after its sources were
    # read with nothing pending on them (so 2 cycles apart at best), and a write only
    # while no other write is pending. Expected cycles, from those rules:
    program = "\n".join([
        "add v2, v0, v1",        # 1: read in cycle 0
        "mul v3, v0, v1",        # 3: waits for the add's write (valid at 2, clear at 3)
        "add v4, v2, v3",        # 6: the mul writes at 4; read at 5, issued at 6
        "vld v5, 0, 1",          # 8: the add's write clears at 8
        "iadd v6, v0, v1",       # 18: waits for the load's write (latency 10)
        "vst v1, 8, 1",          # 20: writes no register: it does not wait for the iadd
        "or v7, v6, v5",         # 22
    ])
    issued, state = _run(program, regfile="ram")
    assert issued == [1, 3, 6, 8, 18, 20, 22]
    assert state["dual"] == 0 and state["executed"] == 7 and state["error"] == 0
    flops_issued, flops_state = _run(program)
    assert flops_issued == [0, 0, 2, 2, 3, 10, 12]
    np.testing.assert_array_equal(state["vregs"], flops_state["vregs"])
    np.testing.assert_array_equal(state["vmem"], flops_state["vmem"])


@pytest.mark.parametrize("alu_width", [pytest.param(4, marks=pytest.mark.slow),
                                       pytest.param(2, marks=pytest.mark.slow), 1])
def test_serial_alu_takes_8_over_alu_width_cycles_an_operation(alu_width):
    # With regfile="ram" the full-width ALU's result is due a cycle after issue (so
    # test_ram_register_file_issue_rules' add and mul 2 apart); a SerialALU's, 8 / alu_width
    # + 1 cycles after. The dependent add issues 2 cycles after the result is due (written,
    # then read), and the store of its result as long after it.
    due = 8 // alu_width + 1
    issued, state = _run("add v2, v0, v1\nadd v3, v2, v2\nvst v3, 8, 1", vregs=None,
                         regfile="ram", alu_width=alu_width)
    assert issued == [1, 1 + due + 2, 1 + 2 * (due + 2)]
    assert state["executed"] == 3 and state["error"] == 0


@pytest.mark.parametrize("lanes, alu_width, numerics", [
    pytest.param(2, 1, "ieee", marks=pytest.mark.slow), (1, 2, "tpu")])     # a build each
def test_serial_alu_runs_the_hazard_program_as_golden(lanes, alu_width, numerics, rng):
    # Every ALU op at RAW distances 1 to 4, WAR and WAW, a slice at a time: each slice's
    # words must land in their own sublanes, and the register file's other units keep
    # their turns around the longer ALU operations.
    from .test_sim_vpu import HAZARDS
    vregs = rng.integers(0, 1 << 32, (golden.VREGS, 8, lanes), dtype=np.uint64).astype(np.uint32)
    vregs[5] = rng.integers(0, 3, (8, lanes))                 # a mask for select
    issued, state = _run(HAZARDS, lanes=lanes, vregs=vregs, numerics=numerics, regfile="ram",
                         alu_width=alu_width, limit=4000)
    expected = golden.execute(golden.assemble(HAZARDS), vregs=vregs,
                              vmem=np.zeros(64 * lanes, np.uint32), lanes=lanes,
                              numerics=numerics)
    np.testing.assert_array_equal(state["vregs"], expected.vregs)
    np.testing.assert_array_equal(state["vmem"], expected.vmem)
    assert state["executed"] == len(issued) == len(golden.assemble(HAZARDS))


def test_ram_register_file_runs_the_hazard_program_as_golden(rng):
    # Every register op at RAW distances 1 to 4, WAR and WAW (tests/vpu/test_sim_vpu.py).
    from .test_sim_vpu import HAZARDS
    vregs = rng.integers(0, 1 << 32, (golden.VREGS, 8, 1), dtype=np.uint64).astype(np.uint32)
    vregs[5] = rng.integers(0, 3, (8, 1))                     # a mask for select
    issued, state = _run(HAZARDS, vregs=vregs, numerics="ieee", regfile="ram", limit=2000)
    expected = golden.execute(golden.assemble(HAZARDS), vregs=vregs,
                              vmem=np.zeros(64, np.uint32), lanes=1, numerics="ieee")
    np.testing.assert_array_equal(state["vregs"], expected.vregs)
    np.testing.assert_array_equal(state["vmem"], expected.vmem)
    assert state["executed"] == len(issued) == len(golden.assemble(HAZARDS))
    assert all(b - a >= 2 for a, b in zip(issued, issued[1:]))


@pytest.mark.parametrize("regfile, style", [("ram", None), ("block_ram", "block")])
def test_block_ram_marks_the_register_file_for_block_ram(regfile, style):
    # "block_ram" is "ram" (the same ports, so the same cycles and results, which the
    # "ram" tests here check) with the memory marked for Yosys' memory mapper.
    text = rtlil.convert(VPU(lanes=1, ops=("xor",), regfile=regfile))
    marks = re.findall(r'attribute \\ram_style "(\w+)"\n\s*memory .*regfile', text)
    assert marks == ([style] if style else [])


@pytest.mark.parametrize("regfile", ["flops", pytest.param("ram", marks=pytest.mark.slow)])
def test_a_weight_push_and_an_lhs_push_in_one_beat_swap_as_in_order(regfile, rng):
    # The LHS push after a weight push that fills the shadow tile swaps that tile in
    # (golden.vpu.MXUState); the two pushers are separate units, yet the pair must not
    # issue together, or the swap would be decided from the shadow before the weights.
    vregs = rng.integers(0, 1 << 16, (golden.VREGS, 8, 8), dtype=np.uint64).astype(np.uint32)
    program = "push_weights v0\npush_lhs v1\npop v2\nvst v2, 0, 1"
    issued, state = _run(program, lanes=8, vregs=vregs, ops=("xor",), limit=300,
                         regfile=regfile)
    expected = golden.execute(golden.assemble(program), vregs=vregs,
                              vmem=np.zeros(64 * 8, np.uint32), lanes=8)
    np.testing.assert_array_equal(state["vregs"], expected.vregs)
    np.testing.assert_array_equal(state["vmem"], expected.vmem)
    assert issued[1] > issued[0]


# ---------------------------------------------------------------- program errors

@pytest.mark.parametrize("kind, fault", [
    ("illegal", None),                      # opcode 0: zeroed memory
    ("vmem_range", "vld v3, 50, 2"),        # line 64 of 64
    ("no_mxu", "pop v3"),                   # lanes=1 has no MXU
    ("unsupported", "exp v3, v0"),          # built without the transcendental unit
])
@pytest.mark.parametrize("regfile", ["flops", "ram"])
def test_program_errors_stop_before_the_fault(kind, fault, regfile, rng):
    prefix = golden.assemble("add v2, v0, v1\nvst v2, 1, 3\nrsum v4, v2")
    word = 0 if fault is None else golden.assemble(fault)[0]
    suffix = golden.assemble("mul v5, v0, v0\nvst v5, 0, 1")
    vregs = rng.integers(0, 1 << 32, (golden.VREGS, 8, 1), dtype=np.uint64).astype(np.uint32)
    # The VPU is built with just what the test programs use besides the fault.
    _, state = _run(np.concatenate([prefix, [word], suffix]), vregs=vregs,
                    ops=("add", "mul", "rsum"), regfile=regfile)
    assert ERRORS[state["error"]] == kind
    assert state["error_index"] == len(prefix) == state["executed"]
    expected = golden.execute(prefix, vregs=vregs, vmem=np.zeros(64, np.uint32), lanes=1)
    np.testing.assert_array_equal(state["vregs"], expected.vregs)
    np.testing.assert_array_equal(state["vmem"], expected.vmem)


# ---------------------------------------------------------------- parameters

@pytest.mark.parametrize("params, error", [
    (dict(lanes=0), ValueError), (dict(lanes=2.0), TypeError),
    (dict(numerics="fast"), ValueError), (dict(vmem_lines=4), ValueError),
    (dict(mxu=1), TypeError), (dict(lanes=4, mxu=True), ValueError),
    (dict(mxu_results=4), ValueError), (dict(regfile="bram"), ValueError),
])
def test_bad_parameters_are_rejected(params, error):
    with pytest.raises(error):
        VPU(**params)


@pytest.mark.parametrize("params, error, message", [
    (dict(regfile="ram", alu_width=3), ValueError, r"alu_width must be one of 1, 2, 4, 8 "),
    (dict(regfile="ram", alu_width=2.0), TypeError, "alu_width must be an integer"),
    (dict(alu_width=4), ValueError, r"alu_width=4 needs regfile='ram' or 'block_ram'"),
])
def test_bad_alu_width_names_it(params, error, message):
    with pytest.raises(error, match=message):
        VPU(**params)


# ---------------------------------------------------------------- export

@pytest.mark.slow      # Verilator's lint of a whole VPU, 13 s; the next test keeps the rule
def test_export_emits_repeated_cores_once_and_is_lint_clean():
    result = export("vpu", {"lanes": 2, "ops": ("add", "exp", "rsum")})
    text = result.verilog
    modules = re.findall(r"^module\s+([^\s(]+)", text, re.M)
    assert modules.count("vpu_word_alu") == modules.count("vpu_exp") == modules.count("vpu") == 1
    assert result.modules == ["vpu_word_alu", "vpu_exp", "vpu"]
    assert len(re.findall(r"^\s*vpu_word_alu\s+\S+\s*\(", text, re.M)) == 2 * 8 * 2
    assert len(re.findall(r"^\s*vpu_exp\s+\S+\s*\(", text, re.M)) == 2
    assert lint(text, "vpu") == []


def test_a_vpu_inside_another_block_emits_its_cores_once():
    # As sim.system's export does to each chip's VPU: the word ALUs and the transcendental
    # cores become instances of the leaves returned, and the VPU's ports stay as they were.
    vpu = VPU(lanes=1, vmem_lines=16, mxu=False, ops=("add", "rcp"))
    ports = dict(vpu.signature.members)
    leaves = vpu_of_instances(vpu)
    assert sorted(leaves) == ["vpu_rcp", "vpu_word_alu"]
    assert dict(vpu.signature.members) == ports
    text = verilog.convert(vpu, name="vpu", emit_src=False)
    modules = re.findall(r"^module\s+([^\s(]+)", text, re.M)
    assert not [m for m in modules if "word" in m or "rcp" in m.lower()], modules
    assert len(re.findall(r"^\s*vpu_word_alu\s+\S+\s*\(", text, re.M)) == 2 * 8
    assert len(re.findall(r"^\s*vpu_rcp\s+\S+\s*\(", text, re.M)) == 1
    for name, leaf in leaves.items():
        assert f"module {name}(" in verilog.convert(leaf, name=name, emit_src=False)
    with pytest.raises(TypeError, match="takes a hdl.vpu.VPU, not str"):
        vpu_of_instances("vpu")
