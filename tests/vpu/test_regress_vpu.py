"""Regression suite ``vpu``: its programs are what their cards say, its stimulus alone reaches
every bin, and a check catches a broken golden (on the 1-lane Verilator build test_sim_vpu
uses too)."""

import numpy as np
import pytest

from golden import vpu as golden
from verif.suites import SUITES
from verif.suites.vpu import suite
from verif.suites.vpu.coverage import _hazards, operand_classes, trans_cases
from verif.suites.vpu.stimulus import PRODUCERS, Build, deal, error_kinds, make_program, units


def test_is_registered():
    assert SUITES["vpu"] is suite
    assert [case.name for case in suite.runs(1)] == ["vpu-tpu", "vpu-ieee"]


def test_programs_stop_where_their_cards_say(seed):
    """Clean programs run to the end and pop every result they queued; a program dealt an
    error stops at it, in the dealt word of its beat, with words after it."""
    rng = np.random.default_rng(seed)
    for build in suite.BUILDS:
        moves, errors = deal(rng, build, 16)
        assert {e[0] for e in errors if e} == set(error_kinds(build)), seed
        for m, e in zip(moves, errors):
            program = make_program(rng, build, m, e, length=40)
            state = suite.expected(program, build, "tpu")
            if e is None:
                assert state.error is None and state.executed == len(program.words), seed
                assert not build.mxu or not state.mxu.results, seed
            else:
                assert state.error_kind == e[0], (seed, e, state.error_kind)
                assert state.error % 2 == ("first", "second").index(e[1]), (seed, e)
                assert state.error < len(program.words) - 1, seed


def test_chains_and_pairs_are_dealt_once_each(seed):
    rng = np.random.default_rng(seed)
    build = Build(lanes=8, mxu=True)
    moves, _ = deal(rng, build, 5)
    cards = [card for program in moves for card in program]
    pairs = sorted(args for move, args in cards if move == "pair")
    assert pairs == sorted((a, b) for a in units(build) for b in units(build))
    chains = sorted(args[:2] for move, args in cards if move == "chain")
    assert chains == sorted((p, d) for p in PRODUCERS for d in (1, 2, 3, 4))


def test_hazard_analysis_by_hand():
    program = golden.assemble("add v1, v2, v3\nmul v4, v1, v1\nvst v4, 0, 1\nnop\n"
                              "vld v5, 7, 0\nadd v1, v5, v2")
    found = set(_hazards([golden.decode(w) for w in program], 8))
    assert ("raw", "alu", "alu", 1) in found              # v1 into the mul
    assert ("raw", "alu", "store", 1) in found            # v4 into the store
    assert ("raw", "store", "load", 2) in found           # line 7 through VMEM
    assert ("raw", "load", "alu", 1) in found             # v5
    assert ("waw", "alu", "alu", 5) not in found          # beyond distance 4
    assert ("war", "alu", "alu", 4) in found              # v1 read by the mul, rewritten


def test_operand_classes_and_transcendental_cases():
    words = np.array([0, 0x80000001, 0x3F800000, 0xFF800000, 0x7FC00000, 0xFF7FFFFF],
                     np.uint32)
    assert operand_classes("add", words) == ["zero", "subnormal", "normal", "inf", "nan", "max"]
    assert operand_classes("add", words[-1:]) == ["max"]
    assert operand_classes("bf16_to_f32", np.array([0xFFFF7F7F, 0x0001], np.uint32)) == \
        ["subnormal", "max"]
    assert "hardest" in trans_cases("rsqrt", np.array([0x403A18E3], np.uint32))
    assert trans_cases("rsqrt", np.array([0x40800000], np.uint32)) == ["normal", "exact"]
    assert trans_cases("rsqrt", np.array([0x40000000], np.uint32)) == ["normal"]   # sqrt(2)
    assert "overflow" in trans_cases("exp", np.array([0x42B17218], np.uint32))
    assert "subnormal_result" in trans_cases("exp", np.array([0xC2B00000], np.uint32))
    assert "zero_result" in trans_cases("exp", np.array([0xC3000000], np.uint32))
    assert "subnormal_result" in trans_cases("rcp", np.array([0x7F000001], np.uint32))
    assert "overflow" in trans_cases("rcp", np.array([0x00200000], np.uint32))


def test_stimulus_alone_reaches_every_tpu_bin(seed):
    """One Verilator seed's "tpu" case covers every bin but those of "ieee" numerics (the
    other case's): coverage comes from the golden trace, so a run that matches golden
    reaches it. ``suite.stimulus_coverage(seed)`` checks both cases (twice as long)."""
    missing = suite.stimulus_coverage(seed, numerics=("tpu",))
    assert all("ieee" in hole for hole in missing), (seed, missing)


# Slow for make test's budget (20 s): tests/verif/test_regress.py catches a broken golden
# through the same runner in make test.
@pytest.mark.slow
def test_a_program_passes_and_a_broken_golden_is_caught_on_verilator(seed):
    build, program = suite.program(seed, "tpu", 1, 0)      # the 1-lane build: quick to make
    for inject, mismatches in ((None, 0), ("golden-fault", 1)):
        tally = suite._Tally()
        suite._check_program(tally, f"vpu seed {seed}", program, build, "tpu",
                             backend="verilator", waves=None, inject=inject,
                             rng=np.random.default_rng(seed))
        assert tally.mismatches == mismatches, (seed, tally.first)
        assert tally.checked > 32 * 8 and tally.executed > 0
    # The flipped word, where it is, and the instruction that wrote it (if one did).
    assert tally.first.startswith(f"vpu seed {seed} ") and ": expected 0x" in tally.first
    assert "written by" in tally.first
