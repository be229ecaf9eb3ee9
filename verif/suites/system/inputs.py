"""Random collective inputs of a given nccl-tests size, with special values; random
embedding-step inputs on Zipf ids."""

import numpy as np

__all__ = ["random_inputs", "embedding_inputs"]


def random_inputs(kind, chips, size, dtype, rng):
    """Random inputs of ``kind`` whose nccl-tests size S is ``size`` bytes (rounded down to
    whole words per chip): uint32 bit patterns, with special values for float32."""
    words = size // 4
    if kind == "all_to_all":
        shape = (chips, chips, max(1, words // chips))
    elif kind == "all_gather":
        shape = (chips, max(1, words // chips))
    else:
        shape = (chips, words)
    if dtype == "int32":
        return rng.integers(0, 1 << 32, size=shape, dtype=np.uint64).astype(np.uint32)
    values = rng.standard_normal(shape).astype(np.float32).view(np.uint32)
    specials = np.array([0x0000_0000, 0x8000_0000, 0x7F80_0000, 0xFF80_0000, 0x7FC0_0000,
                         0x0000_0001, 0x807F_FFFF], np.uint32)
    pick = rng.random(shape) < 0.02
    values[pick] = rng.choice(specials, size=int(pick.sum()))
    return values


def embedding_inputs(rng, chips, *, rows, dim, batch, bag, alpha):
    """A table fp32 [rows, dim] and, per chip, ``batch`` bags of ``bag`` Zipf(``alpha``) ids
    (truncated to the table: ``verif.suites.sparsecore.stimulus.zipf_ids``), their
    weights and the bags' gradients: ``(table, indices, offsets, weights, grads)`` as
    ``golden.embedding.step`` takes them, about 2% of every value special."""
    from verif.suites.sparsecore.stimulus import fp32_values, zipf_ids
    table = fp32_values(rng, (rows, dim), special_density=0.02).view(np.float32)
    # One draw for all chips: they share the hot rows.
    indices = list(zipf_ids(rng, chips * batch * bag, rows, alpha).astype(np.int64)
                   .reshape(chips, batch * bag))
    offsets = [np.arange(0, batch * bag + 1, bag, dtype=np.int64) for _ in range(chips)]
    weights = [fp32_values(rng, batch * bag, special_density=0.02).view(np.float32)
               for _ in range(chips)]
    grads = [fp32_values(rng, (batch, dim), special_density=0.02).view(np.float32)
             for _ in range(chips)]
    return table, indices, offsets, weights, grads
