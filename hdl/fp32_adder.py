"""IEEE binary32 adder with the "tpu" and "ieee" numerics of SPEC section 3."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .float_ops import FP32, check_numerics, leading_zeros, round_nearest_even, \
    shift_right_sticky, unpack
from .stager import Stager, check_stages
from .stream_pipeline import StreamPipeline

__all__ = ["FP32AddCore", "FP32Adder"]

# Candidate cut points, in the order ``stages`` brings them into use:
# 5 output, 1 after alignment, 3 after leading-zero count, 4 after the
# normalizing shift, 0 after unpack/compare, 2 after the add.
_CUT_PREFERENCE = (5, 1, 3, 4, 0, 2)
MAX_STAGES = len(_CUT_PREFERENCE)


class FP32AddCore(wiring.Component):
    """fp32 + fp32 -> fp32 datapath with a shared clock enable.

    Single path: the operands are ordered by magnitude, the smaller one is
    aligned with guard, round and sticky bits, added or subtracted, normalized
    by a leading-zero count (the left shift is capped so the exponent stays at
    emin, which produces subnormals), rounded to nearest even by incrementing
    the packed exponent-and-fraction field (so a rounding carry lands in the
    exponent, and overflow lands on inf), and finally the special cases
    (NaN, inf, exact zero, flush) select the output.

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

        # 0: classify, order by magnitude, exponent difference.
        a = unpack(m, self.a, FP32, self.numerics, name="a")
        b = unpack(m, self.b, FP32, self.numerics, name="b")
        swap = Signal()
        m.d.comb += swap.eq(b.mag > a.mag)
        big_sig, small_sig = Mux(swap, b.sig, a.sig), Mux(swap, a.sig, b.sig)
        big_exp = Mux(swap, b.exp, a.exp)
        exp_diff = Signal(8)
        m.d.comb += exp_diff.eq(big_exp - Mux(swap, a.exp, b.exp))
        sign = Mux(swap, b.sign, a.sign)
        subtract = a.sign ^ b.sign
        nan = a.is_nan | b.is_nan | (a.is_inf & b.is_inf & subtract)
        inf = a.is_inf | b.is_inf
        inf_sign = Mux(a.is_inf, a.sign, b.sign)
        zero_sign = a.sign & b.sign      # the sign of an exact zero sum under RNE
        (big_sig, small_sig, big_exp, exp_diff, sign, subtract, nan, inf, inf_sign,
         zero_sign) = stage(0, big_sig=big_sig, small_sig=small_sig, big_exp=big_exp,
                            exp_diff=exp_diff, sign=sign, subtract=subtract, nan=nan,
                            inf=inf, inf_sign=inf_sign, zero_sign=zero_sign)
        flags = dict(sign=sign, nan=nan, inf=inf, inf_sign=inf_sign, zero_sign=zero_sign)

        # 1: align the smaller significand; three extra bits are guard, round, sticky.
        shifted, lost = shift_right_sticky(m, Cat(Const(0, 3), small_sig), exp_diff,
                                           name="aligned")
        aligned = Cat(shifted[0] | lost, shifted[1:])
        big_ext = Cat(Const(0, 3), big_sig)
        (big_ext, aligned, big_exp, subtract, *flag_values) = stage(
            1, big_ext=big_ext, aligned=aligned, big_exp=big_exp, subtract=subtract, **flags)
        flags = dict(zip(flags, flag_values))

        # 2: add or subtract. |big| >= |small|, so the difference is never negative.
        total = Signal(28)
        m.d.comb += total.eq(Mux(subtract, big_ext - aligned, big_ext + aligned))
        (total, big_exp, *flag_values) = stage(2, total=total, big_exp=big_exp, **flags)
        flags = dict(zip(flags, flag_values))

        # 3: normalize so the leading one sits at bit 27, but never below emin.
        lz = leading_zeros(m, total, name="lz")
        shift = Signal(5)
        m.d.comb += shift.eq(Mux(lz > big_exp, big_exp, lz))
        zero_sum = ~total.any()
        (total, big_exp, shift, zero_sum, *flag_values) = stage(
            3, total=total, big_exp=big_exp, shift=shift, zero_sum=zero_sum, **flags)
        flags = dict(zip(flags, flag_values))

        # 4: shift, then pack: biased exponent minus one, plus the significand
        # with its hidden bit, gives the exponent field (0 for a subnormal).
        normalized = Signal(28)
        m.d.comb += normalized.eq(total << shift)
        packed = Signal(9)
        m.d.comb += packed.eq(big_exp - shift + normalized[27])
        mantissa = normalized[4:27]
        guard = normalized[3]
        sticky = normalized[:3].any()
        (packed, mantissa, guard, sticky, zero_sum, *flag_values) = stage(
            4, packed=packed, mantissa=mantissa, guard=guard, sticky=sticky,
            zero_sum=zero_sum, **flags)
        flags = dict(zip(flags, flag_values))

        # 5: round, then let the special cases override.
        rounded = round_nearest_even(m, Cat(mantissa, packed[:8]), guard, sticky, name="rounded")
        overflow = packed >= FP32.exp_max
        result = Signal(32)
        with m.If(flags["nan"]):
            m.d.comb += result.eq(FP32.qnan)
        with m.Elif(flags["inf"]):
            m.d.comb += result.eq(FP32.inf(flags["inf_sign"]))
        with m.Elif(zero_sum):
            m.d.comb += result.eq(FP32.zero(flags["zero_sign"]))
        with m.Elif(overflow):
            m.d.comb += result.eq(FP32.inf(flags["sign"]))
        with m.Elif(~rounded[23:].any() if tpu else Const(0)):
            m.d.comb += result.eq(FP32.zero(flags["sign"]))     # flush a subnormal result
        with m.Else():
            m.d.comb += result.eq(Cat(rounded, flags["sign"]))
        (result,) = stage(5, result=result)
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
