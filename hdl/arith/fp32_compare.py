"""fp32 compares and IEEE 754-2019 maximum/minimum, as combinational helpers.

Both work on the operands as the numerics read them ("tpu": a subnormal is a
zero of the same sign) and order values through one key: the bit pattern with
its sign bit flipped for positive values and every bit flipped for negative
ones orders like the value, with -0 just below +0 (SPEC section 3).
"""

from amaranth.hdl import Cat, Mux, Signal

from .float_ops import FP32, unpack

__all__ = ["as_read", "compare", "extremum"]


def as_read(m, bits, numerics, *, name):
    """``bits`` as ``numerics`` reads them: ``(value, unpacked)``, flushed in "tpu" mode."""
    u = unpack(m, bits, FP32, numerics, name=name)
    value = Signal(32, name=f"{name}_read")
    m.d.comb += value.eq(Cat(u.mag, u.sign))
    return value, u


def _order_key(m, value, *, name):
    key = Signal(32, name=f"{name}_key")
    m.d.comb += key.eq(Mux(value[31], ~value, Cat(value[:31], 1)))
    return key


def compare(m, a, b, numerics, *, name):
    """``(eq, lt, le)`` of fp32 ``a`` and ``b``: IEEE compares, false when either is NaN.

    The zeros compare equal whatever their signs, unlike their order keys.
    """
    av, au = as_read(m, a, numerics, name=f"{name}_a")
    bv, bu = as_read(m, b, numerics, name=f"{name}_b")
    ka = _order_key(m, av, name=f"{name}_a")
    kb = _order_key(m, bv, name=f"{name}_b")
    ordered = ~(au.is_nan | bu.is_nan)
    zeros = au.is_zero & bu.is_zero
    eq, lt, le = Signal(name=f"{name}_eq"), Signal(name=f"{name}_lt"), Signal(name=f"{name}_le")
    m.d.comb += [
        eq.eq(ordered & ((ka == kb) | zeros)),
        lt.eq(ordered & (ka < kb) & ~zeros),
        le.eq(ordered & ((ka <= kb) | zeros)),
    ]
    return eq, lt, le


def extremum(m, a, b, numerics, *, maximum, name):
    """IEEE 754-2019 ``maximum`` (or ``minimum``) of fp32 ``a`` and ``b``.

    A NaN operand gives the canonical NaN; -0 orders below +0. The result is
    the chosen operand as the numerics read it (so "tpu" returns a flushed
    subnormal as a zero); of two equal keys, ``a``.
    """
    av, au = as_read(m, a, numerics, name=f"{name}_a")
    bv, bu = as_read(m, b, numerics, name=f"{name}_b")
    ka = _order_key(m, av, name=f"{name}_a")
    kb = _order_key(m, bv, name=f"{name}_b")
    pick_a = (ka >= kb) if maximum else (ka <= kb)
    result = Signal(32, name=name)
    m.d.comb += result.eq(Mux(au.is_nan | bu.is_nan, FP32.qnan, Mux(pick_a, av, bv)))
    return result
