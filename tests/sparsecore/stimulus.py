"""Random and adversarial SparseCore batches for the golden-model tests.

Every function takes a ``numpy.random.Generator`` derived from the test's seed. The
fp32 values, tables and ids are the regression suite's (:mod:`verif.suites.sparsecore`).
"""

import dataclasses

import numpy as np

from verif.suites.sparsecore.stimulus import SPECIAL_FP32, fp32_values, ids, table

__all__ = ["SPECIAL_FP32", "fp32_values", "table", "ids", "bag_lengths", "Batch", "batch"]


def bag_lengths(rng, n_bags, *, longest=12):
    """Bag lengths with empty bags and bags of one over-represented."""
    lengths = rng.integers(0, longest + 1, n_bags)
    shape = rng.random(n_bags)
    lengths[shape < 0.15] = 0
    lengths[(shape >= 0.15) & (shape < 0.3)] = 1
    return lengths


@dataclasses.dataclass
class Batch:
    table: np.ndarray       # uint32 [V, D]
    indices: np.ndarray     # int32 [N]
    offsets: np.ndarray     # int64 [B+1]
    weights: np.ndarray     # uint32 [N]
    grads: np.ndarray       # uint32 [B, D]


def batch(rng, *, rows=None, width=None, n_bags=None, longest=12, special_density=0.15):
    rows = rows or int(rng.integers(1, 24))
    width = width or int(rng.choice([1, 3, 8, 16]))
    n_bags = n_bags if n_bags is not None else int(rng.integers(1, 9))
    lengths = bag_lengths(rng, n_bags, longest=longest)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    n = int(offsets[-1])
    zipf = None if rng.random() < 0.5 else float(rng.choice([1.05, 1.5, 3.0]))
    weights = fp32_values(rng, n, special_density=special_density)
    weights[rng.random(n) < 0.1] = 0                         # zero weights
    return Batch(table(rng, rows, width, special_density=special_density),
                 ids(rng, n, rows, zipf=zipf), offsets, weights,
                 fp32_values(rng, (n_bags, width), special_density=special_density))
