"""Golden model of the MXU: the sequential bf16 MAC loop over K (SPEC sections 3 and 5)."""

import numpy as np

from .arith import mac_sequence
from .formats import BF16, FP32, as_bits, check_numerics

__all__ = ["matmul"]


def matmul(x, w, *, numerics="tpu", acc=None):
    """``out[m, n]``: start from ``acc[m, n]`` (default +0.0), add ``x[m, k] * w[k, n]``
    for k = 0, 1, ..., K-1 in that order, each step ``round32(acc + round32(x * w))``.

    Parameters
    ----------
    x : bf16 array [M, K] (``ml_dtypes.bfloat16`` values or ``uint16`` patterns)
    w : bf16 array [K, N]
    numerics : "tpu" or "ieee"
    acc : optional fp32 array [M, N] (``np.float32`` values or ``uint32`` patterns)

    Returns
    -------
    np.ndarray of float32, shape [M, N]
    """
    check_numerics(numerics)
    x = as_bits(x, BF16, name="x")
    w = as_bits(w, BF16, name="w")
    if x.ndim != 2 or w.ndim != 2:
        raise ValueError(f"x and w must be 2-D, not {x.ndim}-D and {w.ndim}-D")
    if x.shape[1] != w.shape[0]:
        raise ValueError(f"x is {x.shape[0]}x{x.shape[1]} but w is {w.shape[0]}x{w.shape[1]}: "
                         f"their K differ")
    if acc is not None:
        acc = as_bits(acc, FP32, name="acc")
        if acc.shape != (x.shape[0], w.shape[1]):
            raise ValueError(f"acc must be {x.shape[0]}x{w.shape[1]}, not {acc.shape}")
    out = mac_sequence(x[:, None, :], w.T[None, :, :], numerics=numerics, acc=acc)
    return out.view(np.float32)
