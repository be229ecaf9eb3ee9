"""fp32 <-> int32 conversions (SPEC section 3), as combinational helpers.

* fp32 -> int32 rounds to nearest even; NaN gives 0, and values outside the
  int32 range saturate to INT32_MIN or INT32_MAX ("tpu" reads a subnormal as
  zero, which converts to 0 in either mode anyway).
* int32 -> fp32 rounds to nearest even; every int32 is in range and no result
  is subnormal, so both numerics modes agree.
"""

from amaranth.hdl import Cat, Const, Mux, Signal

from .float_ops import FP32, leading_zeros, shift_right_sticky, unpack
from .rounding import override_special_cases, round_nearest_even

__all__ = ["fp32_to_int32", "int32_to_fp32"]

_INT32_MIN = 0x8000_0000
_INT32_MAX = 0x7FFF_FFFF


def fp32_to_int32(m, bits, numerics, *, name):
    """The int32 (two's complement, 32 bits) nearest to fp32 ``bits``."""
    u = unpack(m, bits, FP32, numerics, name=name)
    # value = sig * 2^(exp - 150); only exponents 126..157 can give a non-zero in range.
    big = Signal(name=f"{name}_big")                 # |value| >= 2^31: saturate
    exact = Signal(name=f"{name}_exact")             # |value| >= 2^23: an integer already
    m.d.comb += [big.eq(u.exp >= 158), exact.eq(u.exp >= 150)]
    # Below 2^23: shift right by 150 - exp (1 .. 149) keeping one guard bit.
    right = Signal(8, name=f"{name}_right")
    m.d.comb += right.eq(150 - u.exp)
    shifted, sticky = shift_right_sticky(m, Cat(Const(0, 1), u.sig), right, name=f"{name}_shift")
    # The integer part is below 2^23 here, so rounding cannot carry out of its 24 bits.
    rounded = round_nearest_even(m, shifted[1:], shifted[0], sticky, name=f"{name}_rounded")
    left = Signal(32, name=f"{name}_left")
    m.d.comb += left.eq(u.sig << (u.exp - 150)[:3])  # exponents 150..157 here
    magnitude = Signal(32, name=f"{name}_magnitude")
    m.d.comb += magnitude.eq(Mux(exact, left, rounded))
    result = Signal(32, name=name)
    with m.If(u.is_nan):
        m.d.comb += result.eq(0)
    with m.Elif(big | u.is_inf):
        m.d.comb += result.eq(Mux(u.sign, _INT32_MIN, _INT32_MAX))
    with m.Else():
        m.d.comb += result.eq(Mux(u.sign, -magnitude, magnitude))
    return result


def int32_to_fp32(m, bits, *, name):
    """fp32 ``bits`` nearest to the int32 ``bits``."""
    sign = bits[31]
    magnitude = Signal(32, name=f"{name}_magnitude")     # 2^31 for INT32_MIN fits unsigned
    m.d.comb += magnitude.eq(Mux(sign, -bits, bits))
    lz = leading_zeros(m, magnitude, name=f"{name}_lz")
    norm = Signal(32, name=f"{name}_norm")
    m.d.comb += norm.eq(magnitude << lz)
    exponent = Signal(8, name=f"{name}_exp")
    m.d.comb += exponent.eq(158 - lz)
    # The exponent field stands for the hidden bit (norm[31]), so a carry out of the
    # fraction while rounding lands in it.
    rounded = round_nearest_even(m, Cat(norm[8:31], exponent), norm[7], norm[:7].any(),
                                 name=f"{name}_rounded")
    return override_special_cases(m, FP32, rounded=rounded, sign=sign, zero=~magnitude.any(),
                                  zero_sign=0, name=name)
