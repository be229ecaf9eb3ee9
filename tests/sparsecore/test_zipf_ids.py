"""The Zipf id sampler every SparseCore and embedding stimulus draws from
(``verif.suites.sparsecore.stimulus.zipf_ids``): the truncated law, whichever table and
chip count it feeds."""

import numpy as np
import pytest

from verif.suites.sparsecore.stimulus import zipf_ids
from verif.suites.system.inputs import embedding_inputs


def _rank_counts_within_the_law(ids, rows, alpha):
    """Whether the count of each popularity rank is within 5 sigma of the truncated law
    (which fixes the frequency of each rank, whichever row holds it)."""
    counts = np.sort(np.bincount(ids, minlength=rows))[::-1]
    law = np.arange(1, rows + 1, dtype=np.float64) ** -alpha
    expected = len(ids) * law / law.sum()
    return np.all(np.abs(counts - expected) < 5 * np.sqrt(expected) + 1)


@pytest.mark.parametrize("alpha", [0.0, 1.05, 1.5])
def test_zipf_ids_follow_the_truncated_law(alpha, rng):
    rows, n = 20, 200_000
    ids = zipf_ids(rng, n, rows, alpha)
    assert ids.dtype == np.int32 and ids.min() >= 0 and ids.max() < rows
    assert _rank_counts_within_the_law(ids, rows, alpha)


def test_zipf_ids_reject_a_negative_exponent(rng):
    with pytest.raises(ValueError, match="alpha must be a finite number >= 0, not -1"):
        zipf_ids(rng, 4, 8, -1)


def test_embedding_inputs_draw_their_ids_from_the_truncated_law(rng):
    # Folding numpy's unbounded zipf into 64 rows gave id 63 (numpy's huge draws are
    # multiples of high powers of two) far more than the law's share for its rank.
    rows, alpha = 64, 1.05
    _, indices, offsets, _, _ = embedding_inputs(rng, 16, rows=rows, dim=1, batch=256,
                                                 bag=8, alpha=alpha)
    ids = np.concatenate(indices)
    assert all(len(i) == o[-1] == 256 * 8 for i, o in zip(indices, offsets))
    assert _rank_counts_within_the_law(ids, rows, alpha)
    folded = (rng.zipf(alpha, ids.size) - 1) % rows
    assert not _rank_counts_within_the_law(folded, rows, alpha)


def test_draws_that_share_rows_by_rank_share_their_hottest_row(rng):
    by_rank = rng.permutation(50)
    for _ in range(3):
        ids = zipf_ids(rng, 5000, 50, 1.5, rows_by_rank=by_rank)
        assert np.argmax(np.bincount(ids, minlength=50)) == by_rank[0]
    with pytest.raises(ValueError, match="rows_by_rank must hold the 50 rows, not 49"):
        zipf_ids(rng, 4, 50, 1.5, rows_by_rank=by_rank[:49])
