"""The MXU regression's scenario generator deals every scenario bin within one seed."""

import pytest

from golden.formats import NUMERICS
from verif.suites.mxu.coverage import tiling
from verif.suites.mxu.suite import ROWS, COLS, SCENARIOS_PER_RUN, seed_scenarios


@pytest.mark.parametrize("seed", range(1, 21))
def test_one_seed_deals_every_scenario_bin(seed):
    scenarios = [s for mode in seed_scenarios(seed, SCENARIOS_PER_RUN) for s in mode]
    assert len(scenarios) == SCENARIOS_PER_RUN * len(NUMERICS)
    every = {"smaller", "equal", "multiple", "ragged"}
    assert {tiling(s.k, ROWS) for s in scenarios} == every
    assert {tiling(s.n, COLS) for s in scenarios} == every
    # The acc bins: user acc or not, crossed with one K-tile or several (chained).
    assert {(s.acc, s.k > ROWS) for s in scenarios} == {(False, False), (False, True),
                                                        (True, False), (True, True)}
    assert {s.transpose for s in scenarios} == {False, True}
    assert {s.idle for s in scenarios} == {0.0, 0.5}
    # Back-to-back tiles need a gap-free LHS over several tiles of many rows.
    assert any(s.idle == 0.0 and s.stall == 0.0 and s.n > COLS and s.m >= 32
               for s in scenarios)
    assert {s.stall for s in scenarios} == {0.0, 0.3, 0.95}
    # Backpressure only shows behind a long result stream.
    assert all(s.m >= 16 for s in scenarios if s.stall > 0)


def test_seeds_differ():
    assert seed_scenarios(1, SCENARIOS_PER_RUN) != seed_scenarios(2, SCENARIOS_PER_RUN)
