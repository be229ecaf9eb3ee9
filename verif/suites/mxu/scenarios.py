"""MXU stimulus: matmul operands with special values mixed in."""

import ml_dtypes
import numpy as np

__all__ = ["SPECIAL_BF16", "bf16_matrix", "fp32_matrix"]

#: bf16 patterns that exercise every special path of a MAC: signed zeros,
#: infinities, NaNs (quiet, signalling, negative), subnormals, the smallest
#: normal, and the largest finite values, whose products and sums overflow.
SPECIAL_BF16 = np.array([
    0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81,
    0x0001, 0x8001, 0x007F, 0x807F, 0x0080, 0x8080, 0x7F7F, 0xFF7F, 0x7F00,
], dtype=np.uint16)


def _magnitudes(rng, shape, spread):
    return rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread + 1, shape))


def bf16_matrix(rng, shape, *, special_density=0.0, spread=4):
    """Random bf16 values (normal, exponents within ``spread`` octaves of 1), with a
    ``special_density`` fraction replaced by :data:`SPECIAL_BF16` patterns."""
    bits = _magnitudes(rng, shape, spread).astype(ml_dtypes.bfloat16).view(np.uint16)
    special = rng.random(shape) < special_density
    bits = np.where(special, rng.choice(SPECIAL_BF16, shape), bits).astype(np.uint16)
    return bits.view(ml_dtypes.bfloat16)


def fp32_matrix(rng, shape, *, special_density=0.0, spread=4):
    """Random fp32 starting partial sums, with specials widened from :data:`SPECIAL_BF16`."""
    bits = _magnitudes(rng, shape, spread).astype(np.float32).view(np.uint32)
    special = rng.random(shape) < special_density
    widened = rng.choice(SPECIAL_BF16, shape).astype(np.uint32) << 16
    return np.where(special, widened, bits).astype(np.uint32).view(np.float32)
