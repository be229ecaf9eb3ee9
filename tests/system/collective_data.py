"""Inputs for the system's collective tests: uint32 bit patterns of the shape a kind takes,
fp32 values over a wide range of exponents with special values mixed in, or any int32."""

import numpy as np

__all__ = ["SPECIALS", "collective_inputs"]

#: Signed zeros, infinities, quiet and signalling-payload NaNs, subnormals, the largest
#: finite value.
SPECIALS = np.array([0x0000_0000, 0x8000_0000, 0x7F80_0000, 0xFF80_0000, 0x7FC0_0000,
                     0xFFC0_0001, 0x0000_0001, 0x807F_FFFF, 0x7F7F_FFFF], np.uint32)


def collective_inputs(kind, chips, row, dtype, rng, *, specials=0.15):
    """Inputs of ``kind`` for ``chips`` chips, ``row`` words a chip ([C, row], all_to_all
    [C, C, row // C]); float32 with a fraction ``specials`` of :data:`SPECIALS`."""
    shape = (chips, chips, row // chips) if kind == "all_to_all" else (chips, row)
    if dtype == "int32":
        return rng.integers(0, 1 << 32, size=shape, dtype=np.uint64).astype(np.uint32)
    values = (rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 20, shape)) \
        .astype(np.float32).view(np.uint32)
    pick = rng.random(shape) < specials
    values[pick] = rng.choice(SPECIALS, size=int(pick.sum()))
    return values
