"""The end every floating-point unit shares: round, then let the special cases override.

Whatever a unit computes, its datapath ends the same way (SPEC section 3): the
value, with its leading one, guard and sticky bits, is rounded to nearest even
(in "ieee" numerics into the subnormal range, in "tpu" numerics flushing what
would be subnormal), and then the cases the rounded value does not cover
override it: the canonical NaN, infinities, exact zeros, overflow to inf and
the flush to a signed zero. As coreblocks keeps one rounding module and one
error module for all its FPU operations, these are written once here:

* :func:`keep_significand`, the bits of a product or quotient that rounding needs;
* :func:`round_nearest_even`, the increment of a packed exponent-and-fraction
  field, and :func:`round_result`, which puts a value of any exponent into that
  field and returns the :class:`Rounded` value with its overflow and flush flags;
* :func:`override_special_cases`, the priority of the special cases over the
  rounded value;
* :func:`finish`, both placed at a unit's last two candidate cut points.

They are helpers that add combinational logic to the unit's module, not
components: the unit's :class:`~hdl.lib.stager.Stager` places the registers
(at cut points the unit numbers, under the unit's clock enable), so every unit
keeps its cut points, latency and stall behaviour, and a register is named
after the value it holds, as everywhere else in the datapath.
"""

from typing import NamedTuple

from amaranth.hdl import Cat, Const, Mux, Signal, Value, signed

from .float_ops import exceeds_finite, not_positive, shift_right_sticky

__all__ = ["Kept", "keep_significand", "Rounded", "round_nearest_even", "round_result",
           "override_special_cases", "finish"]


def round_nearest_even(m, packed, guard, sticky, *, name):
    """Round a packed exponent-and-fraction field to nearest, ties to even.

    ``packed`` holds the biased exponent above the fraction with the hidden
    bit already added into the exponent's LSB. Incrementing it therefore
    carries a fraction overflow into the exponent, turns the largest
    subnormal into the smallest normal, and the largest finite into inf.
    (It rounds an integer too: ``packed`` is then the integer part.)
    """
    rounded = Signal(len(packed), name=name)
    m.d.comb += rounded.eq(packed + (guard & (sticky | packed[0])))
    return rounded


class Kept(NamedTuple):
    """The bits of a value that rounding needs (see :func:`keep_significand`).

    The field names are the names its registers take at a cut point.
    """
    frac: Value        # the fraction bits below the leading one
    guard: Value       # the bit below them
    sticky: Value      # the OR of every bit below the guard bit
    exponent: Value    # the exponent of the leading one


def keep_significand(m, value, exponent, fmt, *, sticky=None, name):
    """Normalize by at most one bit: keep ``fmt.fbits`` + 1 bits of ``value`` from its leading one.

    Combinational: no register, no latency.

    Parameters
    ----------
    value : Value
        A product or quotient of significands in [1, 2): its leading one is its
        MSB or the bit below (it is at least ``fmt.fbits + 3`` bits wide).
    exponent : Value
        Signed: the exponent of the bit below the MSB.
    fmt : FloatFormat
    sticky : Value or None
        Joins the bits below the guard bit (a divider's remainder is not zero).
    name : str
        Prefix of the signals' names.

    Returns
    -------
    Kept
        The fraction below the leading one, the guard and sticky bits, and the
        exponent of the leading one (``exponent`` + 1 when it is the MSB), ready
        for :func:`round_result` as ``Cat(frac, 1)``.
    """
    width, fbits = len(value), fmt.fbits
    top = value[-1]
    kept = Kept(frac=Signal(fbits, name=f"{name}_frac"), guard=Signal(name=f"{name}_guard"),
                sticky=Signal(name=f"{name}_sticky"),
                exponent=Signal(exponent.shape(), name=f"{name}_exp"))
    below = value[:width - fbits - 3]        # below the guard bit, whichever bit leads
    with m.If(top):
        m.d.comb += [kept.frac.eq(value[width - 1 - fbits:width - 1]),
                     kept.guard.eq(value[width - 2 - fbits])]
    with m.Else():
        m.d.comb += [kept.frac.eq(value[width - 2 - fbits:width - 2]),
                     kept.guard.eq(value[width - 3 - fbits])]
    lost = top & value[width - 3 - fbits]   # the guard bit of the other case
    if len(below):
        lost = lost | below.any()
    if sticky is not None:
        lost = lost | sticky
    m.d.comb += [kept.sticky.eq(lost), kept.exponent.eq(exponent + top)]
    return kept


class Rounded(NamedTuple):
    """A value rounded into a format, before the special cases (see :func:`round_result`).

    The field names are the names its registers take at a cut point:
    ``stage(i, **rounding._asdict(), ...)``.
    """
    rounded: Value     # the packed exponent-and-fraction field, without the sign
    overflow: Value    # the exponent is beyond the finite range: the result is inf
    flush: Value       # "tpu" numerics: the result is subnormal, so a signed zero


def round_result(m, sig, guard, sticky, exponent, fmt, numerics, *, below=None, between=None,
                 name):
    """Round ``sig`` (leading one at its MSB) x 2^(``exponent`` - bias) to nearest even.

    Combinational: no register, no latency, unless ``between`` adds one.

    Parameters
    ----------
    sig : Value
        The significand, ``fmt.fbits`` + 1 bits with the leading one at the MSB.
    guard, sticky : Value
        The bit below ``sig``, and the OR of everything below that.
    exponent : Value
        Signed, biased; it may lie outside the format's range.
    fmt : FloatFormat
    numerics : "tpu" or "ieee"
    below : Value or None
        ``1 - exponent``, signed, if the caller has it already ("ieee" only).
    between : callable or None
        A cut point inside the rounding: called with keyword values, it returns them
        registered, in order (a unit's ``lambda **v: stage(k, **v)``). "ieee" passes the
        subnormal shift's result through it; "tpu" has no shifter and passes its inputs.
    name : str
        Name of the rounded field; prefix of the other signals' names.

    Returns
    -------
    Rounded
        ``rounded``, the packed field (see :func:`round_nearest_even`),
        meaningless when ``overflow`` (``exponent`` exceeds the finite range)
        or ``flush`` ("tpu": the result is subnormal; constant 0 in "ieee") is set.

    Notes
    -----
    "ieee" numerics shift a value below 2^emin right into the subnormal range,
    with the bits shifted out joining the sticky bit, and round there, by
    ``1 - exponent`` places; a caller that has computed ``below = 1 -
    exponent`` beside ``exponent`` (signed, one bit wider than the shift
    needs) passes it, so the shift need not wait for a subtraction.
    "tpu" numerics need no shifter: a result is subnormal after IEEE rounding
    unless it is normal already or it rounds up to the smallest normal, and
    the latter happens exactly when the exponent is 0 and ``sig`` is all ones
    (the value is then at least 2^emin minus half a subnormal ulp, and the
    tie goes to the even smallest normal). Forcing guard and sticky then
    makes the increment carry into the exponent field.
    """
    if between is not None and numerics != "ieee":
        sig, guard, sticky, exponent = between(sig=sig, guard=guard, sticky=sticky,
                                               exponent=exponent)
    overflow = exceeds_finite(exponent, fmt)
    if numerics == "ieee":
        underflow = not_positive(exponent)
        if below is None:
            below = Signal(signed(len(exponent) + 1), name=f"{name}_below")
            m.d.comb += below.eq(1 - exponent)
            # Tested on the exponent, beside the subtraction rather than after it.
            amount = Mux(underflow, below[:-1], 0)
        else:
            # Registered already: its sign is the cheaper test (below = 0 shifts by nothing).
            amount = Mux(below[-1], 0, below[:-1])
        shifted, lost = shift_right_sticky(m, Cat(sticky, guard, sig), amount,
                                           name=f"{name}_subnormal")
        field = Mux(underflow, 0, exponent[:fmt.ebits])
        if between is not None:
            shifted, lost, field, overflow = between(shifted=shifted, lost=lost, field=field,
                                                     overflow=overflow)
        packed = Cat(shifted[2:2 + fmt.fbits], field)
        rounded = round_nearest_even(m, packed, shifted[1], shifted[0] | lost, name=name)
        return Rounded(rounded, overflow, Const(0))
    up_to_normal = Signal(name=f"{name}_up_to_normal")
    flush = Signal(name=f"{name}_flush")
    m.d.comb += [
        up_to_normal.eq(~exponent.any() & sig.all()),
        flush.eq(not_positive(exponent) & ~up_to_normal),
    ]
    rounded = round_nearest_even(m, Cat(sig[:fmt.fbits], exponent[:fmt.ebits]),
                                 guard | up_to_normal, sticky | up_to_normal, name=name)
    return Rounded(rounded, overflow, flush)


def override_special_cases(m, fmt, *, rounded, sign=0, nan=None, inf=None, zero=None,
                           overflow=None, flush=None, inf_sign=None, zero_sign=None,
                           name="result"):
    """The result bit pattern: ``Cat(rounded, sign)`` unless a special case overrides it.

    Combinational: no register, no latency.

    Parameters
    ----------
    fmt : FloatFormat
        The result's format.
    rounded : Value
        The packed exponent-and-fraction field, ``fmt.width - 1`` bits.
    sign : Value or int
        The sign of the rounded value, of ``overflow`` and of ``flush``.
    nan, inf, zero, overflow, flush : Value or None
        The cases below; ``None`` leaves a case out, and its logic.
    inf_sign, zero_sign : Value, int or None
        The signs of ``inf`` and ``zero``; ``None`` is ``sign``.
    name : str
        Name of the result signal.

    Returns
    -------
    Signal
        ``fmt.width`` bits.

    Raises
    ------
    ValueError
        ``rounded`` is not ``fmt.width - 1`` bits wide.

    Notes
    -----
    The cases, in priority order:

    ``nan``
        the canonical quiet NaN (SPEC section 3: every NaN produced is it);
    ``inf``
        an infinity of ``inf_sign``: an exact infinite result (an infinite
        operand, x/0, rsqrt(0));
    ``zero``
        a zero of ``zero_sign``: an exact zero result (a zero operand, x/inf,
        an exact cancellation);
    ``overflow``
        an infinity of ``sign``: the finite computation overflowed (round to
        nearest overflows to inf);
    ``flush``
        a zero of ``sign``: the finite computation is subnormal in "tpu" numerics.

    The cases of the operands come before those of the computed value, which
    means nothing when an operand is special. The signs may differ: an adder's
    exact zero takes its sign from the rounding rule, not from the larger
    operand, and a unit whose results are never negative passes the constant 0.
    """
    if len(rounded) != fmt.width - 1:
        raise ValueError(f"rounded must be {fmt.width - 1} bits wide, not {len(rounded)}")
    inf_sign = sign if inf_sign is None else inf_sign
    zero_sign = sign if zero_sign is None else zero_sign
    # Lowest priority first: each case given wraps the value so far in a Mux.
    cases = ((flush, fmt.zero(sign)), (overflow, fmt.inf(sign)), (zero, fmt.zero(zero_sign)),
             (inf, fmt.inf(inf_sign)), (nan, fmt.qnan))
    value = Cat(rounded, sign)
    for when, then in cases:
        if when is not None:
            value = Mux(when, then, value)
    result = Signal(fmt.width, name=name)
    m.d.comb += result.eq(value)
    return result


def finish(m, stage, fmt, *, cuts, **cases):
    """The end of a unit: the rounded value through one cut point, the override through the last.

    Parameters
    ----------
    stage : Stager
        The unit's stager.
    fmt : FloatFormat
        The result's format.
    cuts : (int or None, int)
        The cut point after rounding (``None`` when rounding shares the output
        stage) and the output cut point.
    **cases
        The keyword arguments of :func:`override_special_cases` (``rounded``,
        ``sign``, ``nan``, ...), as they stand after rounding. The values among
        them (not the constants, not ``None``) go through ``cuts[0]`` under
        their own names.

    Returns
    -------
    Value
        The result after the output cut. Latency is the stager's: each cut in
        use is one register stage under the unit's clock enable, so the unit
        stalls as a whole.
    """
    round_cut, output_cut = cuts
    if round_cut is not None:
        live = {key: value for key, value in cases.items() if isinstance(value, Value)}
        cases.update(zip(live, stage(round_cut, **live)))
    (result,) = stage(output_cut, result=override_special_cases(m, fmt, **cases))
    return result
