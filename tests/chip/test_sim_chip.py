"""sim.chip on the RTL: the matmul kernel bit-exact from HBM to HBM, and faults and hangs
reported with the pc, its bundle and the flags."""

import numpy as np
import pytest

from golden import tensorcore as tc
from hdl.tensorcore.sequencer import STALL_CAUSES
from sim import chip
from verif.cli import main

from .operands import expected, operands

#: The control tests' chip: the matmul's, whose simulation the matmul test (first, being
#: long) leaves compiled, where a smaller chip would be compiled again.
_CONTROL_CHIP = chip.MATMUL_CHIP


@pytest.mark.long
@pytest.mark.parametrize("shape, activation, numerics", [
    ((5, 13, 7), "relu", "tpu"),
    pytest.param((9, 8, 3), None, "ieee", marks=pytest.mark.slow),
])
def test_matmul_is_bit_exact_on_amaranth(rng, shape, activation, numerics):
    x, w = operands(rng, *shape, special=0.25)
    run = chip.matmul(x, w, activation=activation, numerics=numerics, backend="amaranth")
    assert run.out.dtype == np.float32 and run.out.shape == (shape[0], shape[2])
    np.testing.assert_array_equal(run.out.view(np.uint32),
                                  expected(x, w, activation=activation, numerics=numerics))
    assert 0 < run.utilization < 1 and run.cycles > 0


@pytest.mark.slow
@pytest.mark.parametrize("numerics", ["tpu", "ieee"])
def test_matmul_is_bit_exact_on_verilator(rng, numerics):
    x, w = operands(rng, 70, 45, 33, special=0.1)
    run = chip.matmul(x, w, activation="relu", numerics=numerics, backend="verilator")
    np.testing.assert_array_equal(run.out.view(np.uint32),
                                  expected(x, w, activation="relu", numerics=numerics))


@pytest.mark.slow
def test_matmul_on_the_proto_preset_is_bit_exact_and_slower(rng):
    """``preset="proto"``: the FPGA prototype's chip (its register file in RAM, VMEM and SMEM
    on one RAM port each) gives the same bits as the default chip, in more cycles."""
    x, w = operands(rng, 20, 24, 17, special=0.1)
    proto = chip.matmul(x, w, activation="relu", preset="proto")
    np.testing.assert_array_equal(proto.out.view(np.uint32),
                                  expected(x, w, activation="relu", numerics="tpu"))
    assert proto.cycles > chip.matmul(x, w, activation="relu").cycles


@pytest.mark.parametrize("kwargs, message", [
    (dict(preset="nope"), "preset must be one of proto, not 'nope'"),
    (dict(preset="proto", shape=(96, 160, 160)), r"needs [\d,]+ words of HBM; the chip has "
                                                 r"24,576 \(the proto preset\)"),
])
def test_a_bad_preset_or_a_matmul_past_its_memory_is_refused_before_any_work(rng, kwargs,
                                                                                message):
    shape = kwargs.pop("shape", (4, 4, 4))
    x, w = operands(rng, *shape)
    with pytest.raises(ValueError, match=message):
        chip.matmul(x, w, backend="amaranth", **kwargs)


def test_a_core_fault_names_the_error_and_the_bundle():
    with pytest.raises(chip.ChipError, match=r"error pop_empty: pc 1 \(pop v2\)"):
        chip.run("nop\npop v2\nhalt", backend="amaranth", chip=_CONTROL_CHIP)


def test_a_hang_names_the_wait_and_the_flags():
    program = "fadd f2, 3\nwait f3, 5\nhalt"
    with pytest.raises(chip.ChipError, match=r"hung: pc 1 \(wait f3, 5\); flags: f2=3"):
        chip.run(program, backend="amaranth", chip=_CONTROL_CHIP, watchdog=40)


def test_a_program_larger_than_imem_is_refused():
    with pytest.raises(ValueError, match="more than IMEM's 256"):
        chip.run("nop\n" * 257 + "halt", backend="amaranth")


def test_cli_rejects_an_empty_dimension(capsys):
    assert main(["chip", "matmul", "--m", "0", "--k", "2", "--n", "2"]) == 2
    assert "argument --m: must be a positive integer, not 0" in capsys.readouterr().err


def test_cli_refuses_a_matmul_past_the_presets_hbm_in_one_line(capsys):
    assert main(["chip", "matmul", "--m", "200", "--k", "300", "--n", "300",
                 "--preset", "proto"]) == 2      # bad input, as every command's
    err = capsys.readouterr().err
    assert "needs 223,744 words of HBM; the chip has 24,576 (the proto preset)" in err
    assert "Traceback" not in err


def test_cli_offers_every_preset(capsys):
    # The CLI spells the presets out (its parser imports no hdl): they must stay the same.
    from hdl.tensorcore.presets import PRESETS
    assert main(["chip", "matmul", "--preset", "nope"]) == 2
    err = capsys.readouterr().err
    assert f"(choose from {', '.join(map(repr, PRESETS))})" in err


def test_stall_counters_account_for_every_cycle():
    # Two delays (12 cycles, as the ISS counts them) and an lw whose result is used at
    # once: every cycle from start to halt either issues a bundle or names one cause.
    program = "delay 5\nnop\ndelay 7\nli s1, 3\nsw s1, 4(s0)\nlw s2, 4(s0)\naddi s3, s2, 1\nhalt"
    iss = tc.run(program)
    run = chip.execute(program, backend="amaranth", chip=_CONTROL_CHIP)
    assert run.status == "halted" and run.bundles == iss.bundles == 8
    stalls = {cause: run.counters[f"stall_{cause}"] for cause in STALL_CAUSES}
    assert stalls["delay"] == iss.delay_cycles == 12
    assert stalls["fetch"] == 1 and stalls["smem"] >= 1
    assert stalls["dma"] == stalls["wait"] == stalls["vector"] == 0
    assert run.cycles == run.bundles + sum(stalls.values())
    assert run.sregs[3] == 4
