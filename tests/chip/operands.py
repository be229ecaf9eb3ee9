"""Matmul operands and the expected result, from the golden MXU and an independent ReLU."""

import numpy as np

from golden import mxu

#: bf16 patterns every special class: +-0, +-inf, NaN, +-subnormal, +-1, +-max.
SPECIALS = np.array([0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x0001, 0x8001, 0x007F, 0x3F80,
                     0xBF80, 0x7F7F, 0xFF7F], np.uint16)


def operands(rng, m, k, n, *, special=0.0):
    """bf16 patterns ``x`` [m, k] and ``w`` [k, n]: normal values, with a ``special``
    fraction of :data:`SPECIALS`."""
    def matrix(rows, cols):
        values = rng.normal(size=(rows, cols)).astype(np.float32)
        bits = (values.view(np.uint32) >> 16).astype(np.uint16)
        mask = rng.random((rows, cols)) < special
        bits[mask] = rng.choice(SPECIALS, int(mask.sum()))
        return bits
    return matrix(m, k), matrix(k, n)


def relu_bits(words):
    """``max(v, +0.0)`` on fp32 patterns by SPEC section 3, written out independently of
    the VPU: NaN stays (golden results carry only the canonical NaN), any other value with
    the sign bit set becomes +0.0."""
    words = np.asarray(words, np.uint32)
    nan = (words & 0x7FFFFFFF) > 0x7F800000
    negative = (words >> 31) == 1
    return np.where(nan | ~negative, words, np.uint32(0)).astype(np.uint32)


def expected(x, w, *, activation, numerics):
    out = mxu.matmul(x, w, numerics=numerics).view(np.uint32)
    return relu_bits(out) if activation == "relu" else out
