"""Bit-level view of the two floating-point formats: bf16 and IEEE binary32.

RTL carries raw bit patterns, so every golden function works on ``uint16``
(bf16) and ``uint32`` (fp32) arrays. The helpers here convert between those
patterns and ``ml_dtypes.bfloat16`` / ``np.float32`` values, classify
patterns, and apply the two rules that "tpu" numerics add to IEEE arithmetic:
flushing subnormals to a zero of the same sign, and canonical NaN.
"""

from dataclasses import dataclass

import ml_dtypes
import numpy as np

__all__ = [
    "NUMERICS", "Format", "BF16", "FP32",
    "check_numerics", "as_bits", "to_values",
    "OperandClass", "classify", "is_nan", "is_subnormal",
    "flush_subnormal", "canonicalize_nan",
]

#: The two numerics modes every arithmetic block implements (SPEC section 3).
NUMERICS = ("tpu", "ieee")


@dataclass(frozen=True)
class Format:
    """A binary floating-point format: 1 sign bit, ``ebits`` exponent, ``fbits`` fraction."""
    name: str
    ebits: int
    fbits: int
    bits_dtype: type
    value_dtype: type

    @property
    def width(self):
        return 1 + self.ebits + self.fbits

    @property
    def bias(self):
        return (1 << (self.ebits - 1)) - 1

    @property
    def sign_mask(self):
        return 1 << (self.width - 1)

    @property
    def exp_mask(self):
        return ((1 << self.ebits) - 1) << self.fbits

    @property
    def frac_mask(self):
        return (1 << self.fbits) - 1

    @property
    def qnan(self):
        """The canonical quiet NaN: positive, quiet bit set, nothing else."""
        return self.exp_mask | (1 << (self.fbits - 1))

    @property
    def inf(self):
        return self.exp_mask


BF16 = Format("bf16", 8, 7, np.uint16, ml_dtypes.bfloat16)
FP32 = Format("fp32", 8, 23, np.uint32, np.float32)


def check_numerics(numerics):
    """Return ``numerics`` if it names a mode, else raise a ``ValueError`` listing the modes."""
    if numerics not in NUMERICS:
        raise ValueError(f"numerics must be one of {', '.join(map(repr, NUMERICS))}, "
                         f"not {numerics!r}")
    return numerics


def as_bits(x, fmt, *, name="operand"):
    """View ``x`` as an array of ``fmt`` bit patterns.

    ``x`` may hold values (``ml_dtypes.bfloat16`` for bf16, ``np.float32`` for
    fp32) or bit patterns (``np.uint16`` / ``np.uint32``). Anything else is a
    ``ValueError`` naming ``name``, because silently casting, say, float64 to
    bf16 would round the caller's data before the model ever sees it.
    """
    x = np.asarray(x)
    if x.dtype == fmt.bits_dtype:
        return x
    if x.dtype == fmt.value_dtype:
        return x.view(fmt.bits_dtype)
    raise ValueError(f"{name} must be a {np.dtype(fmt.value_dtype).name} array or a "
                     f"{np.dtype(fmt.bits_dtype).name} bit-pattern array, not {x.dtype}")


def to_values(bits, fmt):
    """Reinterpret ``fmt`` bit patterns as values (bf16 or float32)."""
    return np.asarray(bits, dtype=fmt.bits_dtype).view(fmt.value_dtype)


class OperandClass:
    """Class codes returned by :func:`classify` (sign is not part of the class)."""
    ZERO, SUBNORMAL, NORMAL, INF, NAN = range(5)
    NAMES = ("zero", "subnormal", "normal", "inf", "nan")


def classify(bits, fmt):
    """Return the :class:`OperandClass` code of each pattern in ``bits``."""
    bits = np.asarray(bits, dtype=fmt.bits_dtype)
    exp = bits & fmt.exp_mask
    frac = bits & fmt.frac_mask
    max_exp = exp == fmt.exp_mask
    return np.select(
        [(exp == 0) & (frac == 0), exp == 0, max_exp & (frac == 0), max_exp],
        [OperandClass.ZERO, OperandClass.SUBNORMAL, OperandClass.INF, OperandClass.NAN],
        OperandClass.NORMAL).astype(np.uint8)


def is_nan(bits, fmt):
    bits = np.asarray(bits, dtype=fmt.bits_dtype)
    return ((bits & fmt.exp_mask) == fmt.exp_mask) & ((bits & fmt.frac_mask) != 0)


def is_subnormal(bits, fmt):
    bits = np.asarray(bits, dtype=fmt.bits_dtype)
    return ((bits & fmt.exp_mask) == 0) & ((bits & fmt.frac_mask) != 0)


def flush_subnormal(bits, fmt):
    """Replace every subnormal pattern by the zero of the same sign ("tpu" numerics)."""
    bits = np.asarray(bits, dtype=fmt.bits_dtype)
    return np.where(is_subnormal(bits, fmt), bits & fmt.bits_dtype(fmt.sign_mask), bits)


def canonicalize_nan(bits, fmt):
    """Replace every NaN pattern by the canonical quiet NaN (both numerics modes)."""
    bits = np.asarray(bits, dtype=fmt.bits_dtype)
    return np.where(is_nan(bits, fmt), fmt.bits_dtype(fmt.qnan), bits)
