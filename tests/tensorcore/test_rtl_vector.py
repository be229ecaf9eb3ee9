# amaranth: UnusedElaboratable=no
# (Module-scoped runners are built once; a test run that deselects them never elaborates.)
"""hdl.tensorcore: the vector slots, forwarded through the queue into the VPU, co-simulated
with golden.tensorcore.run: vaddr patching and the 16-bit rule, slot order within a
bundle, faults known at issue (VMEM range, the MXU counts), and the decoupled queue.

The whole MXU data path (an 8-lane VPU with its MXU) is slow to build, so here the MXU
faults are checked on a sequencer without a VPU; ``tpu-rtl regress tensorcore`` runs
random programs through the real MXU on the whole chip."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden import tensorcore as tc
from hdl.tensorcore.vector_queue import VectorQueue
from verif.suites.tensorcore.programs import (
    initial_sregs, mxu_program, scalar_program, vector_slots)

from .rtl_harness import CoreRunner, LocalCore, SequencerTop, compare

SMEM, IMEM, VMEM_LINES, N_FLAGS = 64, 64, 32, 8
OPS = ("add", "mul", "max", "iadd", "xor", "select", "f32_to_bf16", "rsum")
PARAMS = dict(imem_depth=IMEM, smem_words=SMEM, n_flags=N_FLAGS, vmem_lines=VMEM_LINES)
SPECIALS = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001,
                     0x807FFFFF, 0x3F800000, 0xFFFFFFFF, 0x7F7FFFFF], np.uint32)


@pytest.fixture(scope="module", params=[False, True], ids=["issue", "fpga_stages"])
def runner(request):
    """The core as simulated, and with the FPGA prototype's stages: the sequencer's
    decode stage and the vector queue's beat register."""
    return CoreRunner(LocalCore(**PARAMS, lanes=1, ops=OPS, decode_stage=request.param,
                                vector_register=request.param))


def _data(rng, n):
    words = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    special = rng.random(n) < 0.3
    words[special] = rng.choice(SPECIALS, int(special.sum()))
    return words


def cosim(runner, program, *, lanes=1, rng=None, sregs=None, context="", mxu_results=16):
    rng = rng or np.random.default_rng(0)
    smem = _data(rng, SMEM)
    vmem = _data(rng, VMEM_LINES * lanes)
    vregs = _data(rng, 32 * 8 * lanes).reshape(32, 8, lanes)
    rtl = runner.run(program, smem=smem, sregs=sregs, vmem=vmem, vregs=vregs)
    iss = tc.run(program, smem=smem, sregs=sregs, vmem=vmem, vregs=vregs, imem_bundles=IMEM,
                 lanes=lanes, n_flags=N_FLAGS, mxu_results=mxu_results)
    compare(rtl, iss, context=context)
    return rtl, iss


@pytest.mark.parametrize("registered", [False, True])
def test_queue_keeps_the_used_words_in_order(rng, registered):
    """Random entries (words 0..5, some unused) under random stalls on both sides leave as
    the used words in order, two a beat except a bundle's odd last one; ``empty`` never
    while a beat is offered."""
    entries = [(int(rng.integers(1, 64)), [int(w) for w in rng.integers(0, 1 << 32, 6)])
               for _ in range(60)]
    expected = []
    for used, words in entries:
        mine = [w for k, w in enumerate(words) if used >> k & 1]
        expected += [tuple(mine[i:i + 2]) for i in range(0, len(mine), 2)]
    dut, got = VectorQueue(depth=3, registered=registered), []
    stalls = (rng.random((2, 2000)) < 0.4).tolist()

    async def writer(ctx):
        for k, (used, words) in enumerate(entries):
            ctx.set(dut.bundles.payload.used, used)
            for j, w in enumerate(words):
                ctx.set(dut.bundles.payload.words[j], w)
            while stalls[0][k % 2000]:
                k += 1
                await ctx.tick()
            ctx.set(dut.bundles.valid, 1)
            await ctx.tick().until(dut.bundles.ready)
            ctx.set(dut.bundles.valid, 0)

    async def reader(ctx):
        cycle = 0
        while len(got) < len(expected):
            ready = not stalls[1][cycle % 2000]
            ctx.set(dut.program.ready, ready)
            assert not (ctx.get(dut.empty) and ctx.get(dut.program.valid))
            if ready and ctx.get(dut.program.valid):
                beat = dut.program.payload
                got.append(tuple(ctx.get(beat.words[j]) for j in range(ctx.get(beat.count))))
            await ctx.tick()
            cycle += 1
        assert ctx.get(dut.empty)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(writer)
    sim.add_testbench(reader)
    sim.run()
    assert got == expected


def test_slot_order_and_vaddr(runner):
    sregs = np.zeros(32, np.uint32)
    sregs[5], sregs[6] = 3, 0xFFF0
    rtl, iss = cosim(runner, """
        vld v2, 8, 1 | add v3, v1, v2 | vst v3, 16, 1       # the add sees the new v2
        vld v4, s5+1, 2 | addi s5, s5, 8 | vst v4, s5+0, 0  # both read the old s5
        vld v5, s5+2, 2 | rsum v6, v5 | vnop | vst v6, s5, 1
        halt
    """, sregs=sregs)
    assert iss.halted and rtl.sregs[5] == 11


@pytest.mark.parametrize("bundle", [
    "vld v1, s6+15, 1",            # 0xFFF0 + 15 fits 16 bits but not VMEM
    "vld v1, s6+16, 0",            # 0x10000: over 16 bits
    "vst v1, s7+65535, 0",         # s7 = 2**32 - 1: the sum is not taken modulo 2**16
    "vld v1, 25, 1",               # line 32
    "vld v1, 0, 5",                # line 35
    "vld v2, 0, 1 | add v3, v2, v2 | vst v3, 31, 1",   # the vst faults: nothing is done
])
def test_vmem_range_faults_do_nothing(runner, bundle):
    sregs = np.zeros(32, np.uint32)
    sregs[6], sregs[7] = 0xFFF0, 0xFFFFFFFF
    rtl, iss = cosim(runner, f"addi s1, s0, 1\n{bundle} | addi s2, s0, 1\nhalt", sregs=sregs)
    assert iss.error == "vmem_range" and iss.error_pc == 1 and rtl.sregs[2] == 0


def test_no_mxu(runner):
    _, iss = cosim(runner, "vld v1, 0, 1\npush_lhs v1\nhalt")
    assert iss.error == "no_mxu"


def test_scalar_runs_ahead_of_the_vpu(runner):
    """Six rsum bundles (eight cycles each in the reduce unit) queue up: the core halts
    while the VPU still works through them."""
    rtl, iss = cosim(runner, "\n".join(["rsum v1, v2 | vnop"] * 6 + ["halt"]))
    assert iss.halted and rtl.stop_cycle + 10 < rtl.cycles


def test_random_vector_programs(runner, seed):
    seeds = np.random.default_rng(seed).integers(0, 1 << 32, 6).tolist()
    extra = vector_slots(OPS, vmem_lines=VMEM_LINES, fault=0.01)
    for program_seed in seeds:
        rng = np.random.default_rng(program_seed)
        sregs = initial_sregs(rng, SMEM)
        text = scalar_program(rng, smem_words=SMEM, n_flags=N_FLAGS, extra=extra, blocks=10)
        cosim(runner, text, rng=rng, sregs=sregs,
              context=f"program seed {program_seed} of test seed {seed}:\n{text}")


@pytest.fixture(scope="module", params=[False, True], ids=["issue", "decode_stage"])
def mxu_runner(request):
    """The MXU counts are among what the decode stage keeps in registers."""
    return CoreRunner(SequencerTop(**PARAMS, lanes=8, mxu=True, mxu_results=16,
                                   decode_stage=request.param))


@pytest.mark.parametrize("fault", [0.0, 0.05])
def test_mxu_counts_fault_exactly(mxu_runner, seed, fault):
    """An 8-lane sequencer with an MXU but no VPU: stops, pcs and scalar state as the
    ISS's, on programs that keep or break the MXU counts."""
    runner = mxu_runner
    seeds = np.random.default_rng(seed).integers(0, 1 << 32, 12).tolist()
    errors = set()
    for program_seed in seeds:
        rng = np.random.default_rng(program_seed)
        sregs = initial_sregs(rng, SMEM)
        text = mxu_program(rng, lanes=8, smem_words=SMEM, vmem_lines=VMEM_LINES, fault=fault,
                           n_flags=N_FLAGS)
        smem = _data(rng, SMEM)
        rtl = runner.run(text, smem=smem, sregs=sregs)
        iss = tc.run(text, smem=smem, sregs=sregs, imem_bundles=IMEM, lanes=8,
                     n_flags=N_FLAGS, mxu_results=16, vmem=np.zeros(VMEM_LINES * 8, np.uint32))
        compare(rtl, iss, context=f"program seed {program_seed} of test seed {seed}:\n{text}")
        errors.add(iss.error)
    if fault == 0:
        assert "none" in errors and not errors & {"weights_full", "results_full", "pop_empty"}
    else:
        assert errors & {"weights_full", "results_full", "pop_empty"}
