"""Floating-point building blocks shared by the arithmetic units and the PE.

Each helper adds combinational logic to a module and returns named signals,
so the generated Verilog and waveforms stay readable (the rounding and the
special cases every unit ends with are in :mod:`.rounding`). The formats are the
two of SPEC section 3; ``hdl`` may not import ``golden``, so they are restated
here in the few numbers the logic needs.
"""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Mux, Signal, signed

from ..lib.stager import check_stages

__all__ = ["FloatFormat", "FP32", "BF16", "unpack", "leading_zeros", "shift_right_sticky",
           "shift_out_leading_zeros", "not_positive", "exceeds_finite", "normalize_significand",
           "balanced_cuts"]


@dataclass(frozen=True)
class FloatFormat:
    ebits: int
    fbits: int

    @property
    def width(self):
        return 1 + self.ebits + self.fbits

    @property
    def exp_max(self):
        return (1 << self.ebits) - 1

    @property
    def bias(self):
        return (1 << (self.ebits - 1)) - 1

    def inf(self, sign):
        return Cat(Const(0, self.fbits), Const(self.exp_max, self.ebits), sign)

    @property
    def qnan(self):
        return Const(((self.exp_max << 1) | 1) << (self.fbits - 1), self.width)

    def zero(self, sign):
        return Cat(Const(0, self.width - 1), sign)


FP32 = FloatFormat(8, 23)
BF16 = FloatFormat(8, 7)


@dataclass(frozen=True)
class Unpacked:
    """Fields and classes of one operand (see :func:`unpack`)."""
    sign: Signal
    exp: Signal       # biased exponent, with subnormals (and zero) moved to 1
    sig: Signal       # significand with the hidden bit: fbits + 1 wide
    mag: Signal       # exponent and fraction fields: orders like the magnitude
    is_zero: Signal
    is_inf: Signal
    is_nan: Signal


def unpack(m, bits, fmt, numerics, *, name):
    """Split ``bits`` into sign, effective exponent and significand, and classify it.

    In "tpu" numerics a subnormal operand is read as a zero of the same sign.
    """
    sign = Signal(name=f"{name}_sign")
    exp_field = bits[fmt.fbits:fmt.width - 1]
    frac = Signal(fmt.fbits, name=f"{name}_frac")
    m.d.comb += sign.eq(bits[-1])
    if numerics == "tpu":
        m.d.comb += frac.eq(Mux(exp_field.any(), bits[:fmt.fbits], 0))
    else:
        m.d.comb += frac.eq(bits[:fmt.fbits])

    u = Unpacked(
        sign=sign,
        exp=Signal(fmt.ebits, name=f"{name}_exp"),
        sig=Signal(fmt.fbits + 1, name=f"{name}_sig"),
        mag=Signal(fmt.width - 1, name=f"{name}_mag"),
        is_zero=Signal(name=f"{name}_is_zero"),
        is_inf=Signal(name=f"{name}_is_inf"),
        is_nan=Signal(name=f"{name}_is_nan"),
    )
    subnormal_or_zero = ~exp_field.any()
    m.d.comb += [
        # A subnormal has exponent emin, like the smallest normal, but no hidden bit.
        u.exp.eq(exp_field | subnormal_or_zero),
        u.sig.eq(Cat(frac, ~subnormal_or_zero)),
        u.mag.eq(Cat(frac, exp_field)),
        u.is_zero.eq(subnormal_or_zero & ~frac.any()),
        u.is_inf.eq(exp_field.all() & ~frac.any()),
        u.is_nan.eq(exp_field.all() & frac.any()),
    ]
    return u


def _lzc_tree(bits):
    """Leading zeros of a power-of-two-wide value, as a balanced tree.

    The count is meaningful only when the value is not zero. A node whose halves are both
    zero is zero itself, so its parent never selects its count, and :func:`leading_zeros`
    pads its operand so that the whole is never zero.

    Each node tests its high half with one OR of those bits, rather than with a flag
    built from its children's: synthesis shares the OR trees (the fp32 adder and multiplier
    map to a few LUT4s fewer), and the expression stays shallow for the simulator, whose
    compile time grows with the depth of what it compiles.
    """
    if len(bits) == 1:
        return Const(0, 0)
    half = len(bits) // 2
    high_zero = ~bits[half:].any()
    return Mux(high_zero, Cat(_lzc_tree(bits[:half]), Const(1, 1)),
               Cat(_lzc_tree(bits[half:]), Const(0, 1)))


def leading_zeros(m, value, *, name):
    """Number of leading zeros of ``value`` (its width when it is zero)."""
    width = len(value)
    tree_width = 1 << width.bit_length()       # strictly wider, so padding stops the count
    padded = Cat(Const((1 << (tree_width - width)) - 1, tree_width - width), value)
    count = _lzc_tree(padded)
    result = Signal(range(width + 1), name=name)
    m.d.comb += result.eq(count)
    return result


def shift_right_sticky(m, value, amount, *, name):
    """Shift ``value`` right by ``amount``; returns (shifted, sticky).

    ``sticky`` is the OR of every bit shifted out. It is gathered level by
    level of the barrel shifter rather than with a second, masking shifter.
    Each level's output is a signal, read twice by the next level (the shift and the
    sticky bits), so that the expression a simulator compiles grows with the levels, not
    with two to their power.
    """
    width = len(value)
    levels = (width - 1).bit_length()           # shifts below this width are real shifts
    shifted = Signal(width, name=f"{name}")
    sticky = Signal(name=f"{name}_sticky")
    cur, lost = value, Const(0, 1)
    if len(amount) > levels:
        too_far = amount[levels:].any()
        cur, lost = Mux(too_far, 0, cur), too_far & value.any()
    for level in reversed(range(min(levels, len(amount)))):
        step = 1 << level
        take = amount[level]
        stage = Signal(width, name=f"{name}_by{step}")
        m.d.comb += stage.eq(cur)
        lost = lost | (take & stage[:step].any())
        cur = Mux(take, stage[step:], stage)
    m.d.comb += [shifted.eq(cur), sticky.eq(lost)]
    return shifted, sticky


def shift_out_leading_zeros(m, value, sizes, *, name):
    """Normalize ``value`` step by step: shift left by each of ``sizes`` whose top bits are zero.

    With ``sizes`` the descending powers of two below the width, the leading
    one ends at the MSB (unless ``value`` is zero) and the returned count is
    the leading-zero count. Each step tests only the bits it would shift out,
    so no separate leading-zero counter is needed, and the steps may be split
    over pipeline stages (the count's bits come out MSB first). Returns
    (shifted, count), ``count`` as wide as the largest size needs.
    """
    width = len(value)
    cur, count = value, Const(0, max(sizes).bit_length())
    for size in sizes:
        top_zero = ~cur[width - size:].any()
        cur = Mux(top_zero, Cat(Const(0, size), cur[:width - size]), cur)
        count = count | Mux(top_zero, size, 0)
    shifted = Signal(width, name=name)
    shift = Signal(len(count), name=f"{name}_count")
    m.d.comb += [shifted.eq(cur), shift.eq(count)]
    return shifted, shift


# Comparisons of a signed exponent with constants, as plain logic: written as
# ``<`` or ``>=`` they would each cost a carry chain (and inverter LUTs) on an FPGA.

def not_positive(exponent):
    """``exponent <= 0`` for a signed value."""
    return exponent[-1] | ~exponent.any()


def exceeds_finite(exponent, fmt):
    """``exponent >= fmt.exp_max`` for a signed value wider than the exponent field."""
    return ~exponent[-1] & (exponent[fmt.ebits:-1].any() | exponent[:fmt.ebits].all())


def normalize_significand(m, u, fmt, numerics, *, name):
    """Move the leading one of an :func:`unpack` ed significand to its MSB.

    Returns (sig, exp): ``sig`` with the leading one at its MSB and ``exp``,
    signed, such that the operand is ``sig / 2^fbits * 2^(exp - bias)``. In
    "tpu" numerics no operand is subnormal, so this is only a renaming; in
    "ieee" numerics a subnormal's exponent goes below 1. A zero's values are
    meaningless (callers handle zeros through ``is_zero``).
    """
    sig = Signal(fmt.fbits + 1, name=f"{name}_norm_sig")
    exp = Signal(signed(fmt.ebits + 2), name=f"{name}_norm_exp")
    if numerics == "tpu":
        m.d.comb += [sig.eq(u.sig), exp.eq(u.exp)]
    else:
        lz = leading_zeros(m, u.sig, name=f"{name}_lz")
        m.d.comb += [sig.eq(u.sig << lz), exp.eq(u.exp - lz)]
    return sig, exp


# Placing the pipeline registers of a long chain of identical steps (the
# digit recurrences of the divider and the square root). It is not float
# logic; it sits here beside its only users.

def balanced_cuts(delays, stages):
    """A :class:`~hdl.lib.stager.Stager` preference that balances a chain of steps.

    Cut point ``i`` follows step ``i``, whose logic depth is estimated as
    ``delays[i]``; the last cut is the output. Of the partitions of the chain
    into ``stages`` pipeline stages, this picks one whose slowest stage is as
    fast as possible (ties broken deterministically), so one datapath serves
    any depth without a hand-written preference per depth. Returns the chosen
    cuts, output first, then the unused ones.
    """
    n = len(delays)
    check_stages(stages, n)
    prefix = [0]
    for delay in delays:
        prefix.append(prefix[-1] + delay)
    # worst[k][i]: slowest stage of the best split of steps 0..i into k + 1 stages.
    worst = [[prefix[i + 1] for i in range(n)]]
    choice = [[None] * n]
    for k in range(1, stages):
        row, picks = [None] * n, [None] * n
        for i in range(k, n):
            for j in range(k - 1, i):
                cost = max(worst[k - 1][j], prefix[i + 1] - prefix[j + 1])
                if row[i] is None or cost < row[i]:
                    row[i], picks[i] = cost, j
        worst.append(row)
        choice.append(picks)
    cuts, i = [], n - 1
    for k in reversed(range(stages)):
        cuts.append(i)
        i = choice[k][i]
    return (*cuts, *(i for i in range(n) if i not in cuts))
