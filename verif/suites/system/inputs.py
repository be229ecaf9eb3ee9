"""Random collective inputs of a given nccl-tests size, with special values."""

import numpy as np

__all__ = ["random_inputs"]


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
