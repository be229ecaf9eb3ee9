# amaranth: UnusedElaboratable=no
"""The proto chip's wrapper on the word bus, in Amaranth simulation on a small chip: every
memory written and read back through the host's share of its port, a program loaded,
started, waited for and its results read, the registers, and the map's holes."""

import numpy as np
from amaranth.sim import Simulator

from golden import tensorcore as tc
from hdl.board.proto_chip import (CONFIG, CONTROL_RESET, CONTROL_START, FLAGS_OFFSET, REGIONS,
                                  REGISTERS, STATUS_BITS, ProtoChip, Register)
from hdl.board.word_memory import ID_WORD
from hdl.tensorcore.presets import PRESETS, preset

#: A chip without an MXU, small memories and one VPU option: quick to elaborate.
SMALL = dict(lanes=1, imem_depth=16, smem_words=64, vmem_lines=16, hbm_words=64,
             words_per_cycle=1, ops=("xor",), mxu_results=8)

PROGRAM = """
    addi s1, s0, 77
    sw s1, 3(s0)
    lw s2, 9(s0)
    addi s2, s2, 1
    sw s2, 10(s0)
    fadd f2, s0+5
    halt
"""


def _session(script):
    """Run ``script(write, read)`` (async functions of word addresses) against a
    ProtoChip of SMALL; returns what the script returns."""
    dut = ProtoChip(chip=SMALL, wait_cycles=2000)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    result = {}

    async def write(ctx, addr, word):
        ctx.set(dut.bus.request.payload, {"addr": addr, "write": 1, "data": word})
        ctx.set(dut.bus.request.valid, 1)
        await ctx.tick().until(dut.bus.request.ready)
        ctx.set(dut.bus.request.valid, 0)

    async def read(ctx, addr):
        ctx.set(dut.bus.request.payload, {"addr": addr, "write": 0, "data": 0})
        ctx.set(dut.bus.request.valid, 1)
        await ctx.tick().until(dut.bus.request.ready)
        ctx.set(dut.bus.request.valid, 0)
        ctx.set(dut.bus.response.ready, 1)
        *_, word = await ctx.tick().sample(dut.bus.response.payload).until(
            dut.bus.response.valid)
        ctx.set(dut.bus.response.ready, 0)
        return word

    async def bench(ctx):
        result["value"] = await script(ctx, write, read)

    sim.add_testbench(bench)
    sim.run()
    return result["value"]


def test_the_memories_the_program_and_the_registers_over_the_bus():
    bundles = tc.program_words(PROGRAM)

    async def script(ctx, write, read):
        got = {}
        await write(ctx, REGISTERS + Register.CONTROL, CONTROL_RESET)
        for b, bundle in enumerate(np.asarray(bundles).reshape(-1, tc.BUNDLE_WORDS)):
            for j, word in enumerate(bundle):
                await write(ctx, REGIONS["imem"] + 16 * b + j, int(word))
        await write(ctx, REGIONS["smem"] + 9, 41)
        await write(ctx, REGIONS["vmem"] + 5, 0x1234_5678)
        await write(ctx, REGIONS["hbm"] + 63, 0xCAFE_F00D)
        got["imem"] = [await read(ctx, REGIONS["imem"] + 16 + j) for j in range(10)]
        got["vmem"] = await read(ctx, REGIONS["vmem"] + 5)
        got["hbm"] = await read(ctx, REGIONS["hbm"] + 63)
        got["holes"] = [await read(ctx, addr) for addr in (
            REGIONS["hbm"] + 64, REGIONS["imem"] + 10, REGIONS["smem"] + 64, 0x0400_0000,
            REGISTERS + 0x80)]
        got["before"] = await read(ctx, REGISTERS + Register.STATUS)
        await write(ctx, REGISTERS + Register.CONTROL, CONTROL_START)
        got["wait"] = await read(ctx, REGISTERS + Register.WAIT)
        got["smem"] = [await read(ctx, REGIONS["smem"] + i) for i in (3, 10)]
        got["flag2"] = await read(ctx, REGISTERS + FLAGS_OFFSET + 2)
        got["regs"] = {r: await read(ctx, REGISTERS + r) for r in (
            Register.ID, Register.CONTROL, Register.PC, Register.CYCLES, Register.BUNDLES)}
        got["config"] = [await read(ctx, REGISTERS + Register.CONFIG + i)
                         for i in range(len(CONFIG))]
        # A reset clears start and the chip's state, and leaves the memories.
        await write(ctx, REGISTERS + Register.CONTROL, CONTROL_RESET)
        got["after_reset"] = (await read(ctx, REGISTERS + Register.STATUS),
                              await read(ctx, REGISTERS + Register.CYCLES),
                              await read(ctx, REGIONS["smem"] + 3))
        return got

    got = _session(script)
    assert got["imem"] == [int(w) for w in np.asarray(bundles).reshape(-1, 10)[1]]
    assert (got["vmem"], got["hbm"]) == (0x1234_5678, 0xCAFE_F00D)
    assert got["holes"] == [0] * 5
    assert got["before"] == 0
    done = 1 << STATUS_BITS["done"] | 1 << STATUS_BITS["halted"] | 1 << STATUS_BITS["started"]
    assert got["wait"] == done | 3 << 8                  # the sequencer's HALTED
    assert got["smem"] == [77, 42]
    assert got["flag2"] == 5
    regs = got["regs"]
    assert regs[Register.ID] == ID_WORD and regs[Register.CONTROL] == CONTROL_START
    assert regs[Register.PC] == 6 and regs[Register.BUNDLES] == 7
    assert 7 <= regs[Register.CYCLES] < 200
    assert got["config"] == [1, 16, 64, 16, 64, 1, 16, 8]
    assert got["after_reset"] == (0, 0, 77)


def test_the_proto_preset_is_what_the_doc_says():
    chip = preset("proto")
    assert chip == PRESETS["proto"] and chip is not PRESETS["proto"]
    assert (chip["lanes"], chip["hbm_words"], chip["vmem_lines"]) == (8, 24 << 10, 512)
    assert chip["regfile"] == "block_ram" and chip["ram_ports"] == 1
    assert chip["mxu_fold"] == 8 and chip["alu_width"] == 1
