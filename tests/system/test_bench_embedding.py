"""``tpu-rtl bench embedding``'s arithmetic, without a simulator: the bisection bound of an
all-to-all, counted by hand on a ring and a 4x4 torus, a chip's HBM lines in one, and each
pair's pushed words read from the programs' descriptors, equal to
golden.embedding.traffic's formula (the runs themselves are the benchmark's: ``tpu-rtl
bench embedding``)."""

import numpy as np

from golden import embedding as ge
from golden.topology import torus
from sim.kernels.embedding import FLAGS, plan_embedding
from sim.system import EMBEDDING_CHIP
from verif.bench.embedding import _pair_words, bisection_bound, hbm_lines
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


def test_each_pair_pushes_the_formula_s_words(rng):
    topology = torus("2x2")
    table, indices, offsets, _, grads = embedding_inputs(rng, 4, rows=64, dim=5, batch=4,
                                                         bag=3, alpha=1.05)
    plan = plan_embedding(table, indices, offsets, grads=grads, topology=topology,
                          chip=dict(EMBEDDING_CHIP))
    want = ge.traffic(ge.plan(indices, offsets, num_rows=64, n_chips=4), 5, backward=True)
    for phase in ("ids", "rows", "grads"):
        assert np.array_equal(_pair_words(plan, {FLAGS[phase]}), getattr(want, phase))
