"""Regression suite ``sparsecore``: a seed passes on the RTL, a broken golden is caught, and
the stimulus alone reaches every coverage bin and keeps Verilator to its few builds."""

import json

import numpy as np
import pytest
from cocotb_coverage.coverage import coverage_db

from golden import sparsecore as golden
from sim.backends.whole_run import MIN_DEPTH, memory_depth
from verif.regress import functional_summary
from verif.regress.worker import run_seed
from verif.suites import SUITES
from verif.suites.sparsecore import suite
from verif.suites.sparsecore.coverage import sampler, uncovered
from verif.suites.sparsecore.stimulus import HUGE


def test_is_registered():
    assert SUITES["sparsecore"] is suite
    assert [case.name for case in suite.runs(1)] == ["sparsecore-tpu", "sparsecore-ieee"]


@pytest.mark.slow
def test_one_seed_passes_on_amaranth(seed, tmp_path):
    record = run_seed("sparsecore", seed, "amaranth", tmp_path)
    assert record["status"] == "pass", f"seed {seed}: {record}"
    for case in record["cases"]:
        # Each mode ran a batch with a result (checked word by word) and one that must stop.
        assert case["runs"] == 2 and case["error_runs"] == 1, case
        assert case["checked"] > 2 and case["mismatches"] == 0 and case["cycles"] > 0, case
        percent, _ = functional_summary(tmp_path / f"{case['case']}.cov.xml")
        assert 0 < percent < 100
    assert json.loads((tmp_path / "result.json").read_text())["status"] == "pass"


@pytest.mark.slow      # a tile build of its own; the regress tests catch a broken golden
def test_golden_fault_is_caught(seed, tmp_path):
    record = run_seed("sparsecore", seed, "amaranth", tmp_path, inject="golden-fault",
                      only="sparsecore-tpu")
    assert record["status"] == "fail"
    [case] = record["cases"]
    # One word of the one result is flipped: exactly one mismatch, named in full.
    assert case["mismatches"] == 1, f"seed {seed}: {case}"
    assert f"sparsecore seed {seed} tpu batch" in case["first_mismatch"]
    assert ": expected 0x" in case["first_mismatch"]


def test_stimulus_alone_reaches_every_bin(seed):
    """One Verilator seed covers the whole model: every bin is made by the stimulus, so a
    run that completes reaches 100%."""
    coverage_db.clear()
    samplers = sampler()
    for steps in suite.plan(seed, "verilator").values():
        for step in steps:
            for operation in step.batch.card.operations:
                suite.sample(samplers, step, operation)
    assert uncovered() == [], f"seed {seed}"
    assert coverage_db["sparsecore"].cover_percentage == 100.0


def test_batches_are_what_their_cards_say(seed):
    for backend in ("verilator", "amaranth"):
        for steps in suite.plan(seed, backend).values():
            for step in steps:
                b, card = step.batch, step.batch.card
                lengths = np.diff(b.offsets)
                bags = np.split(b.indices, b.offsets[1:-1])
                for kind, length, bag in zip(b.kinds, lengths, bags):
                    assert {"empty": length == 0, "one": length == 1,
                            "few": 2 <= length <= 8, "duplicate": 2 <= length <= 8,
                            "huge": length >= HUGE}[kind], (seed, kind, length)
                    if kind == "duplicate" and not card.bad:
                        assert len(set(bag.tolist())) == 1
                assert {"empty", "one", "few", "huge"} <= set(b.kinds)
                num_rows = b.table.shape[0]
                assert golden.bad_positions(b.indices, num_rows).tolist() == \
                    list(b.bad_positions)
                if card.bad:
                    first = b.bad_positions[0]
                    where = "first" if first == 0 else \
                        "last" if first == len(b.indices) - 1 else "inside"
                    assert where == card.bad_place[0], (seed, step.index, first)
                    assert (len(b.bad_positions) > 1) == (card.bad_place[1] == "several")
                    continue
                unique = golden.dedup(b.indices).hbm_reads
                if card.distribution == "distinct":
                    assert unique == len(b.indices)
                elif card.distribution == "single":
                    assert unique == 1


def test_a_verilator_seed_needs_four_builds(seed):
    """Builds are keyed by the tile's parameters and the harness' stream memory depths:
    every batch of a build keeps those depths, whatever its sizes and operation."""
    builds = set()
    for steps in suite.plan(seed, "verilator").values():
        for step in steps:
            b = step.batch
            chunks = step.row_words // 8
            n_bags = len(b.offsets) - 1
            depths = {"ids": memory_depth(len(b.indices)), "ends": memory_depth(n_bags),
                      "rows": memory_depth(n_bags * chunks)}
            assert depths == {"ids": suite.TILE["max_ids"], "ends": MIN_DEPTH,
                              "rows": MIN_DEPTH}, (seed, step.index, depths)
            assert b.table.shape[0] <= suite.TILE["rows"]
            builds.add((step.numerics, step.row_words, step.jitter))
    assert len(builds) == 4
