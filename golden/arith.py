"""Golden arithmetic: the operations every RTL unit is held to, bit for bit.

Each function is numpy float32 arithmetic (IEEE binary32, round to nearest
even, subnormals) wrapped by the rules of SPEC section 3:

* ``"tpu"``: subnormal inputs are read as a zero of the same sign, and a result
  that is subnormal after IEEE rounding becomes a zero of the same sign.
* ``"ieee"``: nothing more than IEEE.
* In both modes every NaN produced is the canonical quiet NaN.

Operands are bit-pattern arrays (``uint16`` bf16, ``uint32`` fp32) or the
matching value arrays; results are always bit patterns. Operands broadcast
against each other like numpy operands do.
"""

import numpy as np

from .formats import BF16, FP32, as_bits, canonicalize_nan, check_numerics, flush_subnormal

__all__ = ["bf16_mul", "fp32_add", "fp32_mul", "fp32_div", "fp32_sqrt", "fp32_to_bf16", "mac",
           "mac_sequence"]


def _inputs(numerics, fmt, *operands):
    check_numerics(numerics)
    names = "ab" if len(operands) > 1 else ("a",)
    bits = [as_bits(x, fmt, name=n) for x, n in zip(operands, names)]
    if numerics == "tpu":
        bits = [flush_subnormal(b, fmt) for b in bits]
    return bits


def _output(bits, fmt, numerics):
    bits = canonicalize_nan(bits, fmt)
    if numerics == "tpu":
        bits = flush_subnormal(bits, fmt)
    return bits


def _bf16_to_fp32_bits(bits):
    # Widening is exact: bf16 is the top half of a binary32 pattern.
    return bits.astype(np.uint32) << 16


def bf16_mul(a, b, *, numerics="tpu"):
    """bf16 x bf16 -> fp32 product, rounded to fp32 once.

    In the normal range the product of two 8-bit significands is exact in
    fp32; only underflow (into the subnormal range) and overflow round.
    """
    a, b = _inputs(numerics, BF16, a, b)
    with np.errstate(all="ignore"):
        product = (_bf16_to_fp32_bits(a).view(np.float32)
                   * _bf16_to_fp32_bits(b).view(np.float32))
    return _output(product.view(np.uint32), FP32, numerics)


def fp32_add(a, b, *, numerics="tpu"):
    """fp32 + fp32 -> fp32, round to nearest even."""
    a, b = _inputs(numerics, FP32, a, b)
    with np.errstate(all="ignore"):
        total = a.view(np.float32) + b.view(np.float32)
    return _output(total.view(np.uint32), FP32, numerics)


def fp32_mul(a, b, *, numerics="tpu"):
    """fp32 x fp32 -> fp32, round to nearest even, overflow to inf."""
    a, b = _inputs(numerics, FP32, a, b)
    with np.errstate(all="ignore"):
        product = a.view(np.float32) * b.view(np.float32)
    return _output(product.view(np.uint32), FP32, numerics)


def fp32_div(a, b, *, numerics="tpu"):
    """fp32 / fp32 -> fp32, correctly rounded to nearest even.

    x/0 is inf and 0/x is 0, with the sign of the quotient; 0/0 and inf/inf
    are NaN. In "tpu" numerics a subnormal divisor is a zero, so
    x/subnormal is inf.
    """
    a, b = _inputs(numerics, FP32, a, b)
    with np.errstate(all="ignore"):
        quotient = a.view(np.float32) / b.view(np.float32)
    return _output(quotient.view(np.uint32), FP32, numerics)


def fp32_sqrt(a, *, numerics="tpu"):
    """Square root of fp32, correctly rounded to nearest even.

    sqrt(-0) is -0 and sqrt(+inf) is +inf; any other negative operand gives
    NaN. In "tpu" numerics a negative subnormal is -0, so its root is -0.
    """
    (a,) = _inputs(numerics, FP32, a)
    with np.errstate(all="ignore"):
        root = np.sqrt(a.view(np.float32))
    return _output(root.view(np.uint32), FP32, numerics)


def fp32_to_bf16(a, *, numerics="tpu"):
    """fp32 -> bf16, round to nearest even, overflow to inf."""
    (a,) = _inputs(numerics, FP32, a)
    with np.errstate(all="ignore"):
        narrowed = a.view(np.float32).astype(BF16.value_dtype)
    return _output(narrowed.view(np.uint16), BF16, numerics)


def mac(acc, x, w, *, numerics="tpu"):
    """One multiply-accumulate step, not fused: ``round32(acc + round32(x * w))``.

    ``acc`` is fp32, ``x`` and ``w`` are bf16.
    """
    return fp32_add(as_bits(acc, FP32, name="acc"), bf16_mul(x, w, numerics=numerics),
                    numerics=numerics)


def mac_sequence(x, w, *, numerics="tpu", acc=None):
    """The sequential MAC loop the MXU is held to.

    Starting from ``acc`` (default +0.0), accumulate ``x[..., k] * w[..., k]``
    for k = 0, 1, ..., K-1 in increasing order, one :func:`mac` at a time.
    ``x`` and ``w`` are bf16 with K on the last axis; the leading axes
    broadcast, and so does ``acc`` against them. Returns fp32 bit patterns.
    """
    check_numerics(numerics)
    x = as_bits(x, BF16, name="x")
    w = as_bits(w, BF16, name="w")
    if x.shape[-1] != w.shape[-1]:
        raise ValueError(f"x and w disagree on K: {x.shape[-1]} != {w.shape[-1]}")
    shape = np.broadcast_shapes(x.shape[:-1], w.shape[:-1])
    total = np.zeros(shape, np.uint32) if acc is None else \
        np.broadcast_to(as_bits(acc, FP32, name="acc"), shape).copy()
    for k in range(x.shape[-1]):
        total = mac(total, x[..., k], w[..., k], numerics=numerics)
    return total
