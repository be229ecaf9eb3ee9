"""IEEE binary32 adder with the "tpu" and "ieee" numerics of SPEC section 3."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .float_ops import FP32, exceeds_finite, leading_zeros, not_positive, \
    shift_out_leading_zeros, shift_right_sticky, unpack
from .rounding import finish, round_nearest_even
from ..lib.stager import Stager, check_stages
from ..lib.stream_pipeline import StreamPipeline
from ..lib.params import check_numerics

__all__ = ["FP32AddCore", "FP32Adder"]

# Candidate cut points, in the order ``stages`` brings them into use:
# 5 output, 1 after alignment, 3 after the first half of normalization,
# 0 after compare/swap, 4 after normalization, 2 after the add.
_CUT_PREFERENCE = (5, 1, 3, 0, 4, 2)
MAX_STAGES = len(_CUT_PREFERENCE)


class FP32AddCore(wiring.Component):
    """fp32 + fp32 -> fp32 datapath with a shared clock enable.

    Single path: the operands are ordered by magnitude (a compare of the raw
    exponent-and-fraction fields), the smaller significand is aligned with
    guard, round and sticky bits, added or subtracted (one carry chain: the
    subtrahend is inverted and the carry-in set), normalized so its leading
    one is the MSB, rounded to nearest even by incrementing the packed
    exponent-and-fraction field (so a rounding carry lands in the exponent,
    and overflow lands on inf), and finally the special cases (NaN, inf,
    exact zero, flush) select the output.

    "ieee" numerics normalize with a leading-zero count and cap the shift so
    the exponent stays at emin, which produces subnormals. "tpu" numerics need
    no cap: with normal (or zero) operands every sum is a multiple of 2^-149,
    so a sum below 2^-126 is an exact subnormal, which the flush replaces by
    zero, and rounding can never lift it to the smallest normal. There the
    normalization tests and shifts by 16, 8, 4, 2, 1 in turn, with no
    separate counter, and a subnormal operand is a zero by zeroing the
    smaller significand (if the larger operand is subnormal, so is the other
    one, and the result is a zero).

    Parameters
    ----------
    numerics : "tpu" or "ieee"
    stages : int
        Pipeline registers, 1 to 6: the latency in cycles.

    Ports
    -----
    a, b : In(32)
        Operand bit patterns.
    en : In(1)
        Clock enable of every pipeline register.
    result : Out(32)
        ``a + b``, ``stages`` enabled cycles after the operands.

    Throughput one addition per enabled cycle. Six stages reach 100 MHz on an
    ECP5 at speed grade 6 (docs/fpga.md).
    """

    def __init__(self, *, numerics="tpu", stages=2):
        self.numerics = check_numerics(numerics)
        self.latency = check_stages(stages, MAX_STAGES)
        super().__init__({"a": In(32), "b": In(32), "en": In(1), "result": Out(32)})

    def elaborate(self, platform):
        m = Module()
        stage = Stager(m, enable=self.en, preference=_CUT_PREFERENCE,
                       stages=self.latency, prefix="add")
        tpu = self.numerics == "tpu"

        # 0: classify, order by magnitude, exponent difference. Both
        # differences are computed beside the compare, not after it.
        a = unpack(m, self.a, FP32, "ieee", name="a")
        b = unpack(m, self.b, FP32, "ieee", name="b")
        swap = Signal()
        m.d.comb += swap.eq((a.mag - b.mag)[-1])     # a subtraction maps to one carry chain
        a_normal, b_normal = a.sig[-1], b.sig[-1]
        diff_ab, diff_ba = Signal(8), Signal(8)
        m.d.comb += [diff_ab.eq(a.exp - b.exp), diff_ba.eq(b.exp - a.exp)]
        exp_diff = Mux(swap, diff_ba, diff_ab)
        big_sig = Mux(swap, b.sig, a.sig)
        small_sig = Mux(swap, a.sig, b.sig)
        if tpu:
            # The hidden bit, a constant, joins after the cuts: registered, it
            # would be one merged flip-flop feeding every adder of an array.
            big_sig = big_sig[:-1]
            small_sig = Mux(small_sig[-1], small_sig, 0)
        flags = dict(
            sign=Mux(swap, b.sign, a.sign),
            nan=a.is_nan | b.is_nan | (a.is_inf & b.is_inf & (a.sign ^ b.sign)),
            inf=a.is_inf | b.is_inf,
            inf_sign=Mux(a.is_inf, a.sign, b.sign),
            zero_sign=a.sign & b.sign,      # the sign of an exact zero sum under RNE
            zero=~(a_normal | b_normal) if tpu else Const(0),
        )
        (big_sig, small_sig, big_exp, exp_diff, subtract, *flag_values) = stage(
            0, big_sig=big_sig, small_sig=small_sig, big_exp=Mux(swap, b.exp, a.exp),
            exp_diff=exp_diff, subtract=a.sign ^ b.sign, **flags)
        flags = dict(zip(flags, flag_values))

        # 1: align the smaller significand; three extra bits are guard, round,
        # sticky. Inverting it here for a subtraction shares the shifter's LUTs.
        shifted, lost = shift_right_sticky(m, Cat(Const(0, 3), small_sig), exp_diff,
                                           name="aligned")
        addend = Cat(shifted[0] | lost, shifted[1:]) ^ subtract.replicate(27)
        (big_sig, addend, big_exp, subtract, *flag_values) = stage(
            1, big_sig=big_sig, addend=addend, big_exp=big_exp, subtract=subtract, **flags)
        flags = dict(zip(flags, flag_values))
        if tpu:
            big_sig = Cat(big_sig, 1)

        # 2: add or subtract in one chain: big + (aligned ^ -sub) + sub, the
        # carry-in entering as an extra LSB on both sides. |big| >= |small|,
        # so the difference is never negative.
        total_x2 = Signal(29)
        m.d.comb += total_x2.eq(Cat(subtract, Const(0, 3), big_sig, 0)
                                + Cat(subtract, addend, subtract))
        total = total_x2[1:]
        (total, big_exp, *flag_values) = stage(2, total=total, big_exp=big_exp, **flags)
        flags = dict(zip(flags, flag_values))

        # 3 and 4: normalize so the leading one sits at the MSB (ieee: never below
        # emin). Bit 27 is the carry, so a shift by 3 or more needs a
        # cancellation, hence exponents at most 1 apart, and then the lowest bit
        # of the sum is zero: it is not shifted, it only adds to the sticky bit.
        top, low_sticky = total[1:], total[0]
        if tpu:
            top, coarse = shift_out_leading_zeros(m, top, (16, 8), name="coarse")
            (top, coarse, low_sticky, big_exp, *flag_values) = stage(
                3, top=top, coarse=coarse, low_sticky=low_sticky, big_exp=big_exp, **flags)
            flags = dict(zip(flags, flag_values))
            normalized, fine = shift_out_leading_zeros(m, top, (4, 2, 1), name="normalized")
            shift = coarse | fine
            zero_sum = ~normalized[-1]
        else:
            lz = leading_zeros(m, top, name="lz")
            capped = Signal(5)
            m.d.comb += capped.eq(Mux((big_exp - lz)[-1], big_exp, lz))
            (top, capped, lz, low_sticky, big_exp, *flag_values) = stage(
                3, top=top, capped=capped, lz=lz, low_sticky=low_sticky, big_exp=big_exp,
                **flags)
            flags = dict(zip(flags, flag_values))
            normalized = Signal(27)
            m.d.comb += normalized.eq(top << capped)
            shift = capped
            zero_sum = lz == len(top)
        # The exponent field plus the hidden bit (0 for a subnormal or a zero sum).
        # In "tpu" numerics a negative or zero value means the sum is below 2^-126.
        packed = Signal(signed(10))
        m.d.comb += packed.eq(big_exp - shift + normalized[-1])
        (packed, mantissa, guard, sticky, zero_sum, *flag_values) = stage(
            4, packed=packed, mantissa=normalized[3:26], guard=normalized[2],
            sticky=normalized[:2].any() | low_sticky, zero_sum=zero_sum, **flags)
        flags = dict(zip(flags, flag_values))

        # 5: round, then let the special cases override, in one stage. The sum is
        # normalized already (ieee: subnormal where it is), so rounding needs no
        # shift and "tpu" flushes every sum below 2^-126 (see the class docstring).
        rounded = round_nearest_even(m, Cat(mantissa, packed[:8]), guard, sticky, name="rounded")
        result = finish(m, stage, FP32, cuts=(None, 5), rounded=rounded,
                        overflow=exceeds_finite(packed, FP32),
                        flush=not_positive(packed) if tpu else None,     # a subnormal sum
                        **{**flags, "zero": zero_sum | flags["zero"]})
        m.d.comb += self.result.eq(result)
        return m


class FP32Adder(StreamPipeline):
    """Streamed fp32 adder: ``result = a + b``, one operation per cycle.

    Parameters
    ----------
    numerics : "tpu" (default) or "ieee"
        "tpu" reads subnormal operands as signed zeros and flushes subnormal
        results to signed zeros; "ieee" keeps subnormals. Both round to
        nearest even and produce the canonical NaN 0x7FC00000.
    stages : int
        Pipeline depth, 1 to 6 (default 2).

    Ports
    -----
    operands : In(stream.Signature(StructLayout({"a": 32, "b": 32})))
    result : Out(stream.Signature(32))

    Latency ``stages`` cycles from ``operands`` accepted to ``result`` valid;
    throughput one per cycle. Backpressure on ``result`` stalls the whole
    pipeline and ``operands.ready`` with it; nothing is lost.
    """

    def __init__(self, *, numerics="tpu", stages=2):
        # Check before building the core, so a rejected call leaves no orphan behind.
        check_numerics(numerics)
        check_stages(stages, MAX_STAGES)
        super().__init__(FP32AddCore(numerics=numerics, stages=stages))
