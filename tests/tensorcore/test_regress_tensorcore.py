"""Regression suite ``tensorcore``: registered, its programs alone reach every bin that
does not need the chip, and a chip run of one program matches the ISS word for word but
for the one word a broken golden flips."""

from dataclasses import replace

import numpy as np
import pytest

from golden import tensorcore as tc
from sim import chip
from verif.suites import SUITES
from verif.suites.tensorcore import suite
from verif.suites.tensorcore.coverage import Tracer


def test_is_registered():
    assert SUITES["tensorcore"] is suite
    assert [case.name for case in suite.runs(1)] == ["tensorcore-tpu", "tensorcore-ieee",
                                                    "tensorcore-proto-ieee"]
    assert [case.name for case in suite.runs(2)][-1] == "tensorcore-proto-tpu"


def test_stimulus_alone_reaches_every_bin_but_the_stalls():
    """The first Verilator seed's programs, on the ISS: every slot kind, pair, hazard and
    stop (the stall bins come from the chip's counters, which the regression reads), so
    that ``regress all --until-covered`` closes the suite with one seed."""
    missing = suite.stimulus_coverage([1])
    assert missing and all(hole.startswith("tensorcore.stall: ") for hole in missing), missing


@pytest.mark.parametrize("seed", [2, 7])
def test_rare_faults_are_dealt_to_every_seed(seed):
    """``faulty`` program 4 stops on ``results_full``, programs 2 and 5 on the DMA check's
    reason dealt for their index and mode: two reasons a mode, all four in a seed."""
    stops = {(numerics, index): suite.expected(suite.make_program(seed, numerics, index,
                                                                  "faulty"), numerics).error
             for numerics in ("tpu", "ieee") for index in (2, 4, 5)}
    assert stops == {("tpu", 2): "dma_count", ("tpu", 4): "results_full",
                     ("tpu", 5): "dma_flag", ("ieee", 2): "dma_src_range",
                     ("ieee", 4): "results_full", ("ieee", 5): "dma_dst_range"}


def test_a_descriptor_told_to_break_for_no_reason_is_refused():
    from verif.suites.tensorcore.programs import random_descriptor_words
    with pytest.raises(ValueError, match="reject must be one of count, flag"):
        random_descriptor_words(np.random.default_rng(0), hbm_words=256, vmem_words=512,
                                n_flags=8, reject="size")


def test_programs_are_reproducible_and_never_race():
    one = suite.make_program(3, "ieee", 1, "dma")
    two = suite.make_program(3, "ieee", 1, "dma")
    assert one.text == two.text and one.seed == two.seed
    assert np.array_equal(one.hbm, two.hbm) and np.array_equal(one.vregs, two.vregs)
    assert suite.expected(one, "ieee").error != "race"


def _as_chip_run(state):
    """The ISS's final state dressed as the chip's (``sim.chip.CoreRun``), copied."""
    return chip.CoreRun(
        status=state.status, error=state.error, error_pc=state.error_pc, pc=state.pc,
        bundles=state.bundles, **{name: np.array(getattr(state, name), np.uint32) for name in
                                  ("sregs", "vregs", "smem", "vmem", "hbm", "flags")},
        cycles=0, counters={}, vpu_error=0, dma_rejected=0, seconds=0.0, message="")


def test_differences_names_the_first_differing_word():
    program = suite.make_program(1, "tpu", 0, "mxu")
    want = suite.expected(program, "tpu")
    got = _as_chip_run(want)
    assert suite.differences(got, want) == []
    got.vmem[5] ^= 1 << 31
    found = suite.differences(replace(got, pc=got.pc + 1), want)
    assert len(found) == 2 and found[0].startswith("pc: chip ")
    assert found[1].startswith("vmem[5]: chip ") and "(1 words differ)" in found[1]
    # What the ISS has no counterpart of is a difference on its own.
    assert suite.differences(replace(_as_chip_run(want), dma_rejected=1), want) == [
        "the DMA engine rejected 1 descriptors"]


def test_the_tracer_sees_a_load_use_hazard_and_a_taken_loop():
    tracer = Tracer()
    program = "li s31, 2\nL: lw s1, 0(s0)\naddi s2, s1, 1 | loop s31, L\nhalt"
    state = tc.run(program, trace=tracer)
    samples = tracer.bundles(state.pc)
    assert samples[0][0] == {"scalar0": "alu"} and samples[1][0] == {"scalar0": "lw"}
    assert [s[0].get("scalar1") for s in samples] == [
        None, None, "loop_taken", None, "loop_exit", None]
    assert "load_use" in samples[2][2] and "load_use" in samples[4][2]
    assert "load_use" not in samples[1][2] and samples[0][2] == []


@pytest.mark.slow
def test_a_program_matches_the_iss_but_for_a_broken_golden_on_amaranth():
    """One program on the chip RTL (the suite's chip, elaborated in Amaranth: about 40 s
    here): with the golden's one flipped scalar register, that word is the only
    difference the check reports."""
    program = suite.make_program(1, "tpu", 0, "dense")
    tally = suite._Tally()
    suite._check_program(tally, "tensorcore seed 1", program, "tpu", backend="amaranth",
                         waves=None, inject="golden-fault", samplers=None)
    assert tally.programs == 1 and tally.mismatches == 1
    assert tally.first.startswith("tensorcore seed 1: sregs[") and ";" not in tally.first
