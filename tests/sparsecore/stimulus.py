"""Random and adversarial SparseCore batches for the golden-model tests.

Every function takes a ``numpy.random.Generator`` derived from the test's seed.
"""

import dataclasses

import numpy as np

#: fp32 patterns every arithmetic path must survive: signed zeros, infinities,
#: NaNs (quiet, signalling, negative, with payloads), subnormals (smallest,
#: largest, both signs), the smallest normal, the largest finite values (whose
#: sums overflow), and exact powers of two (whose sums round to even).
SPECIAL_FP32 = np.array([
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000,
    0x7FC00000, 0xFFC00001, 0x7F800001, 0x7FA00000,
    0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00400000,
    0x00800000, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF,
    0x3F800000, 0xBF800000, 0x33800000, 0x33000000, 0x4B800000,
], dtype=np.uint32)


def fp32_values(rng, shape, *, special_density=0.15, spread=6):
    """Normal values within ``spread`` octaves of 1, a ``special_density`` fraction of them
    replaced by :data:`SPECIAL_FP32` patterns and as many by uniformly random bits."""
    base = (rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread + 1, shape)))
    bits = base.astype(np.float32).view(np.uint32)
    pick = rng.random(shape)
    bits = np.where(pick < special_density, rng.choice(SPECIAL_FP32, shape), bits)
    uniform = rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32)
    bits = np.where((pick >= special_density) & (pick < 2 * special_density), uniform, bits)
    return bits.astype(np.uint32)


def table(rng, rows, width, *, special_density=0.15):
    """A table where some rows are the negation of others, so bags cancel exactly."""
    t = fp32_values(rng, (rows, width), special_density=special_density)
    mirror = rng.random(rows) < 0.3
    src = rng.integers(0, rows, rows)
    t[mirror] = t[src[mirror]] ^ np.uint32(0x80000000)
    return t


def bag_lengths(rng, n_bags, *, longest=12):
    """Bag lengths with empty bags and bags of one over-represented."""
    lengths = rng.integers(0, longest + 1, n_bags)
    shape = rng.random(n_bags)
    lengths[shape < 0.15] = 0
    lengths[(shape >= 0.15) & (shape < 0.3)] = 1
    return lengths


def ids(rng, n, rows, *, zipf=None):
    """``n`` ids in ``[0, rows)``: uniform, or Zipf with exponent ``zipf`` (folded into range)."""
    if zipf is None:
        return rng.integers(0, rows, n).astype(np.int32)
    return ((rng.zipf(zipf, n) - 1) % rows).astype(np.int32)


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
