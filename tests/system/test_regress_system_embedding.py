"""The ``system_embedding`` regression suite (``verif.suites.system_embedding``): seeds 1 to
4 deal every coverage bin (checked here from the cases' configurations and golden's
capacity verdicts, without a simulator), every case fits its seed's one build, and an
overflow case raises on both sides before a build; on Verilator one case passes and, with
the golden fault injected, fails naming its seed, build, case and the command to rerun it.
Whole seeds run in ``tpu-rtl regress system_embedding``."""

import numpy as np
import pytest

from golden import embedding as ge
from sim import system
from verif.regress.worker import run_seed
from verif.suites.system_embedding import coverage, stimulus


def _bins(seed):
    b = stimulus.build(seed)
    for c in stimulus.cases(seed):
        table, indices, offsets, kwargs = stimulus.inputs_of(c, b)
        try:
            ge.step(table, indices, offsets, **kwargs)
            capacity = "none" if c.capacity == "none" else "tight"
        except ge.CapacityOverflow:
            capacity = "overflow"
        yield dict(topology=coverage.topology_bin(b.shape, c.failed), combiner=c.combiner,
                   weighted=c.weighted, backward=c.backward, alpha=c.alpha, rows=c.rows,
                   width=c.width, capacity=capacity, edge=c.edge, numerics=b.numerics,
                   failed=c.failed, hbm="jitter" if b.jitter else "fixed", router=b.router)


def test_seeds_1_to_4_reach_every_bin_and_fit_one_build_each():
    seen = {}
    for seed in range(1, 5):
        for sample in _bins(seed):
            for name, value in sample.items():
                seen.setdefault(name, set()).add(value)
    assert seen["topology"] == set(coverage.TOPOLOGIES)
    assert {(c, w) for c in ("sum", "mean", "sqrtn") for w in (False, True)} <= \
        {(c, w) for c in seen["combiner"] for w in seen["weighted"]}
    assert seen["backward"] == set(stimulus.BACKWARDS)
    assert seen["alpha"] == set(stimulus.ALPHAS)
    assert seen["rows"] == set(stimulus.ROW_CLASSES)
    assert seen["width"] == set(stimulus.WIDTHS)
    assert seen["capacity"] == set(stimulus.CAPACITIES)
    assert seen["edge"] == set(stimulus.EDGES)
    assert seen["numerics"] == {"tpu", "ieee"}
    assert seen["failed"] == {None, 0, 1, 2, 3}
    assert seen["hbm"] == set(coverage.HBM_LATENCIES)
    assert seen["router"] == set(coverage.ROUTER_BINS) == \
        {"dor", "adaptive", "adaptive, speed-up 4"}     # the benchmark's routers among them
    # One build a seed: the cases are sized to fit its fixed chips (stimulus.case shrinks
    # them until stimulus.fits), and the fit is exact: a plan of the build's own sizes.
    b = stimulus.build(1)
    c = stimulus.case(1, 0)
    assert stimulus.fits(c, b)
    assert not stimulus.fits(c, _smaller(b))


def _smaller(b):
    """Build ``b`` with a SparseCore of fewer rows than the cases need."""
    class Smaller(stimulus.Build):
        @property
        def chip(self):
            chip = stimulus.build_chip(self.numerics, self.jitter)
            chip["sparsecore"] = dict(chip["sparsecore"], rows=1)
            return chip
    return Smaller(b.shape, b.numerics)


def test_an_overflow_case_raises_on_both_sides_before_a_build():
    seed = 1
    b = stimulus.build(seed)
    # case09 is dealt an overflow, and its largest pair holds more than one unique id.
    c = stimulus.case(seed, 9)
    assert c.capacity == "overflow"
    table, indices, offsets, kwargs = stimulus.inputs_of(c, b)
    with pytest.raises(ge.CapacityOverflow):
        ge.step(table, indices, offsets, **kwargs)
    # The RTL's step raises the same error before anything is built (the amaranth backend
    # would take minutes to build); the suite then runs the step without a capacity.
    with pytest.raises(ge.CapacityOverflow) as raised:
        system.embedding_step(table, indices, offsets, backend="amaranth", chip=b.chip,
                              **kwargs)
    with pytest.raises(ge.CapacityOverflow) as expected:
        ge.step(table, indices, offsets, **kwargs)
    assert str(raised.value) == str(expected.value)
    assert "capacity overflow on the pair rank" in str(raised.value)


@pytest.mark.slow
def test_one_case_passes_and_a_golden_fault_fails(tmp_path):
    record = run_seed("system_embedding", 1, "verilator", tmp_path, only="case00.")
    assert record["status"] == "pass", record
    (case,) = [c for c in record["cases"] if c["checked"]]
    assert case["mismatches"] == 0 and case["cycles"] > 0
    bad = run_seed("system_embedding", 1, "verilator", tmp_path / "bad", inject="golden-fault",
                   only="case00.")
    assert bad["status"] == "fail"
    message = [c for c in bad["cases"] if c["checked"]][0]["first_mismatch"]
    assert message.startswith("system_embedding seed 1 (2x2"), message
    assert "tpu-rtl regress system_embedding --backend verilator --seed 1 --only case00." \
        in message
    assert np.isfinite(case["cycles"])
