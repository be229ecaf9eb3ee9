"""sim.board over the simulated board: the board's RTL (the UARTBone bridge and the proto
chip) fed UART bytes in a whole run. A VPU program loaded over the UART ends as the ISS
does, and a corrupt frame and a frame cut off mid-word are dropped and counted while the
bridge goes on, on a small chip in Amaranth (the default suite); a matmul with ReLU and the
VPU program come back bit-exact on the proto chip in Verilator (slow: its build takes 5 to
15 minutes on a shared 2-core machine, then it is cached)."""

import numpy as np
import pytest

from golden import tensorcore as tc
from golden import uartbone
from hdl.board.board_core import BoardSim
from hdl.board.proto_chip import REGIONS, REGISTERS, Register
from hdl.tensorcore.presets import preset
from sim import board
from sim.board import BoardClient, SimulatedTransport
from verif.cli import main

from ..chip.operands import expected, operands

PROTO = dict(preset("proto"), n_flags=16)
#: A chip without an MXU, small memories, and the VPU options of the proto chip: quick to
#: elaborate for Amaranth.
SMALL = dict(lanes=1, imem_depth=16, smem_words=64, vmem_lines=64, hbm_words=64,
             words_per_cycle=1, ops=("xor", "max"), mxu_results=8, regfile="ram")


@pytest.mark.slow
def test_matmul_with_relu_over_the_simulated_uart_is_bit_exact(rng):
    x, w = operands(rng, 8, 8, 8, special=0.25)
    run = board.matmul(x, w, activation="relu")
    assert run.out.dtype == np.float32 and run.out.shape == (8, 8)
    np.testing.assert_array_equal(run.out.view(np.uint32),
                                  expected(x, w, activation="relu", numerics="tpu"))
    assert run.cycles > 0 and 0 < run.utilization < 1


#: Vector and scalar work over VMEM and SMEM: loads, the ALU ops the proto VPU has (max,
#: xor: its only options), stores, and a scalar store.
VPU_PROGRAM = """
    vld v1, 0, 1
    vld v2, 8, 1
    max v3, v1, v2
    xor v4, v1, v2
    max v5, v3, v4
    xor v6, v5, v1
    vst v3, 16, 1
    vst v5, 24, 1
    vst v6, 32, 1
    addi s1, s0, 1234
    sw s1, 5(s0)
    halt
"""


def _vpu_program_run(rng, chip, backend):
    lanes = chip["lanes"]
    vmem = rng.normal(size=16 * lanes).astype(np.float32).view(np.uint32)
    smem = rng.integers(0, 1 << 32, 8, dtype=np.uint32)
    whole = np.zeros(chip["vmem_lines"] * lanes, np.uint32)     # the ISS's VMEM, zeros
    whole[:vmem.size] = vmem                                    # as the board's after reset
    iss = tc.run(VPU_PROGRAM, vmem=whole, smem=smem, lanes=lanes, mxu=lanes % 8 == 0)
    assert iss.halted
    with SimulatedTransport(chip=chip, backend=backend) as transport:
        done = BoardClient(transport, dict(chip, n_flags=16)).run(
            VPU_PROGRAM, vmem=vmem, smem=smem,
            reads=[("vmem", 0, 40 * lanes), ("smem", 0, 8)])
    assert done.status["halted"] and done.status["done"]
    np.testing.assert_array_equal(done.reads[("vmem", 0)], iss.vmem[:40 * lanes])
    np.testing.assert_array_equal(done.reads[("smem", 0)], iss.smem[:8])
    assert done.reads[("smem", 0)][5] == 1234
    assert done.counters["bundles"] == 12


# Slow for make test's budget (22 s): the corrupt-frame test below keeps the bridge there.
@pytest.mark.slow
def test_a_vpu_program_over_the_simulated_uart_ends_as_the_iss(rng):
    _vpu_program_run(rng, SMALL, "amaranth")


@pytest.mark.slow
def test_a_vpu_program_on_the_proto_chip_over_the_simulated_uart(rng):
    _vpu_program_run(rng, preset("proto"), "verilator")


def test_a_corrupt_frame_and_a_frame_cut_mid_word_are_dropped_and_counted():
    transport = SimulatedTransport(chip=SMALL, backend="amaranth")
    base = REGIONS["smem"]
    # A corrupt frame: an unknown command byte, then what would have been its frame; the
    # bridge drops bytes until the line has idled past its timeout. Each pause is that
    # timeout and a margin.
    idle = BoardSim.TIMEOUT + 500
    transport.queue(uartbone.write(base, [11, 22, 33])
                    + bytes([0x07, 1]) + base.to_bytes(4, "big") + bytes(4), 0)
    transport.pause(idle)
    # A write cut off in its second word: the first word is written, the second is not.
    frame = uartbone.write_frame(base, [0xAAAA_AAAA, 0xBBBB_BBBB])
    transport.queue(frame[:6 + 4 + 2], 0)
    transport.pause(idle)
    answer = uartbone.words(transport.transact([
        (uartbone.read(REGISTERS + Register.ERRORS, 2), 8),
        (uartbone.read(base, 3), 12),
        (uartbone.read(REGISTERS + Register.ID, 1), 4),
        (uartbone.read(REGISTERS + 0x80, 1), 4)]))
    errors, timeouts, *words, ident, hole = (int(v) for v in answer)
    assert (errors, timeouts) == (1, 1)
    assert words == [0xAAAA_AAAA, 22, 33]
    assert ident == 0x5450_5531 and hole == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"board": "ulx3s-12f"}, "board must be one of ulx3s-85f"),
    ({"numerics": "ieee"}, "numerics: the board's chip is built with 'tpu'"),
    ({"port": "/dev/no-such-tty-here"}, "port '/dev/no-such-tty-here' cannot be opened"),
    ({"port": ""}, "port must be a serial port's name"),
])
def test_bad_arguments_are_one_line_value_errors(rng, kwargs, message):
    x, w = operands(rng, 4, 4, 4)
    with pytest.raises(ValueError, match=message) as error:
        board.matmul(x, w, **kwargs)
    assert "\n" not in str(error.value)


def test_a_matmul_past_the_proto_chips_hbm_is_refused_before_any_work(rng):
    x, w = operands(rng, 200, 200, 200)
    with pytest.raises(ValueError, match=r"x and w: a 200x200 @ 200x200 matmul needs "
                                         r"[\d,]+ words of HBM; the board's proto chip has "
                                         r"24,576"):
        board.matmul(x, w)


def test_board_run_says_in_one_line_that_the_port_cannot_be_opened(capsys):
    assert main(["board", "run", "--port", "/dev/no-such-tty-here", "--m", "4", "--k", "4",
                 "--n", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--port '/dev/no-such-tty-here' cannot be opened" in err


@pytest.mark.slow
def test_board_run_on_the_simulated_board_is_bit_exact(capsys):
    assert main(["board", "run", "--m", "8", "--k", "8", "--n", "8", "--activation",
                 "relu", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "result: bit-exact against golden.mxu.matmul" in out
    assert "on the simulated board (verilator)" in out


@pytest.mark.slow
def test_the_boards_cycle_count_is_the_chip_runs(rng):
    """The board's counter, start to done, against sim.chip's whole run of the same kernel
    on the same chip: one cycle more (measured: 273 and 272 for 8x8x8), as the whole run's
    harness starts its count a cycle after the chip's ``start`` input is set."""
    from sim import chip
    from sim.kernels import plan_matmul
    x, w = operands(rng, 8, 8, 8)
    on_board = board.matmul(x, w)
    kernel = plan_matmul(x, w, vmem_lines=PROTO["vmem_lines"])
    alone = chip.run(kernel.program, hbm=kernel.hbm, vmem=kernel.vmem, smem=kernel.smem,
                     chip=preset("proto"), backend="amaranth")
    assert on_board.cycles == alone.cycles + 1
