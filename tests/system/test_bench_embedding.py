"""``tpu-rtl bench embedding``'s arithmetic, without a simulator: the bisection bound of an
all-to-all, counted by hand on a ring and a 4x4 torus, a chip's HBM lines in one, each
pair's pushed words read from the programs' descriptors, equal to
golden.embedding.traffic's formula in both modes, and a phase's cycles and busiest link
from the runs cut around it (the runs themselves are the benchmark's: ``tpu-rtl bench
embedding``)."""

import numpy as np
import pytest

from golden import embedding as ge
from golden.topology import torus
from sim.kernels.embedding import FLAGS, plan_embedding
from sim.system import EMBEDDING_CHIP
from verif.bench.embedding import _pair_words, _split, bisection_bound, hbm_lines
from verif.suites.system.inputs import embedding_inputs


def test_the_bisection_bound_of_uniform_all_to_alls():
    ones = np.ones((16, 16), np.int64) - np.eye(16, dtype=np.int64)
    # 4x4: 8 chips a side, 8 x 8 words cross each way over 2 links of each of 4 rings.
    assert bisection_bound(torus("4x4"), ones) == 64 / 8
    # A ring of 4: 2 chips a side, 4 words each way over its 2 links each way.
    assert bisection_bound(torus("1x4"), ones[:4, :4]) == 4 / 2
    # One pair only, across the cut: its words over the links of that direction.
    one = np.zeros((16, 16), np.int64)
    one[0, 15] = 80
    assert bisection_bound(torus("4x4"), one) == 80 / 8


def test_a_chip_s_hbm_lines_count_what_it_pushes_and_what_lands_on_it():
    words = np.array([[0, 8, 1], [4, 0, 0], [0, 3, 0]])
    # Chip 0 pushes 9 words (3 lines of 4) and lands 4 (1); chip 1 pushes 4 (1) and lands
    # 11 (3); chip 2 pushes 3 (1) and lands 1 (1).
    assert hbm_lines(words, 4) == 4
    assert hbm_lines(words, 1) == 4 + 11


@pytest.mark.parametrize("mode", ["exact", "prereduced"])
def test_each_pair_pushes_the_formula_s_words(mode, rng):
    topology = torus("2x2")
    table, indices, offsets, _, grads = embedding_inputs(rng, 4, rows=64, dim=5, batch=4,
                                                         bag=3, alpha=1.05)
    plan = plan_embedding(table, indices, offsets, grads=grads, topology=topology,
                          chip=dict(EMBEDDING_CHIP), mode=mode)
    want = ge.traffic(ge.plan(indices, offsets, num_rows=64, n_chips=4), 5, backward=True,
                      mode=mode)
    for phase in ("ids", "rows", "grads"):
        assert np.array_equal(_pair_words(plan, {FLAGS[phase]}), getattr(want, phase))


def test_a_phase_s_cycles_and_busiest_link_are_its_run_less_the_run_before():
    # Cumulative runs cut after each phase: cycles and [chip, port] link flits.
    cycles = {"a": 10, "b": 50, "c": 60}
    flits = {"a": np.array([[4, 10], [0, 2]]), "b": np.array([[40, 10], [30, 2]]),
             "c": np.array([[40, 10], [30, 7]])}
    split, busiest = _split(("a", "b", "c"), cycles, flits)
    assert split == {"a": 10, "b": 40, "c": 10}
    # a: the busiest link sent 10 flits in 10 cycles; b: 36 (chip 0 port 0) of 40;
    # c: 5 (chip 1 port 1) of 10.
    assert busiest == {"a": 1.0, "b": 0.9, "c": 0.5}
