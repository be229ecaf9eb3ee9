"""bf16 x bf16 -> fp32 multiplier with the numerics of SPEC section 3."""

from amaranth.hdl import Cat, Const, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .float_ops import BF16, FP32, exceeds_finite, leading_zeros, \
    not_positive, unpack
from .rounding import Rounded, finish, round_result
from ..lib.stager import Stager, check_stages
from ..lib.stream_pipeline import StreamPipeline
from ..lib.params import check_numerics

__all__ = ["BF16MulCore", "BF16Multiplier"]

# Cut points: 0 after unpack, 1 after the 8x8 multiply, 2 after normalizing,
# 3 after rounding, 4 output. Registering the product early lets synthesis
# fold the register into the FPGA's DSP block; cuts 2 and 3 split the
# subnormal handling of "ieee" numerics.
_CUT_PREFERENCE = (4, 1, 2, 3, 0)
MAX_STAGES = len(_CUT_PREFERENCE)


class BF16MulCore(wiring.Component):
    """bf16 x bf16 -> fp32 datapath with a shared clock enable.

    The 8-bit significands multiply into a 16-bit product, which fp32 holds
    exactly, so a normal result needs no rounding. Only "ieee" numerics can
    produce a product below 2^-126; it is shifted right into the subnormal
    range with a sticky bit and rounded to nearest even. In "tpu" numerics
    operands are never subnormal, the product's leading one is at bit 15 or
    14, and a result below 2^-126 flushes to a signed zero, so that logic
    is not generated at all.

    Parameters
    ----------
    numerics : "tpu" or "ieee"
    stages : int
        Pipeline registers, 1 to 5: the latency in cycles.

    Ports
    -----
    a, b : In(16)
        bf16 operand bit patterns.
    en : In(1)
        Clock enable of every pipeline register.
    result : Out(32)
        The fp32 product, ``stages`` enabled cycles after the operands.
    """

    def __init__(self, *, numerics="tpu", stages=2):
        self.numerics = check_numerics(numerics)
        self.latency = check_stages(stages, MAX_STAGES)
        super().__init__({"a": In(16), "b": In(16), "en": In(1), "result": Out(32)})

    def elaborate(self, platform):
        m = Module()
        stage = Stager(m, enable=self.en, preference=_CUT_PREFERENCE,
                       stages=self.latency, prefix="mul")
        ieee = self.numerics == "ieee"

        # 0: classify. In "tpu" numerics a zero or subnormal operand makes the
        # result a zero through the flags, so the multiplier can take the raw
        # fraction with a constant hidden bit, straight from the operand bits.
        a = unpack(m, self.a, BF16, self.numerics, name="a")
        b = unpack(m, self.b, BF16, self.numerics, name="b")
        flags = dict(
            sign=a.sign ^ b.sign,
            nan=a.is_nan | b.is_nan | (a.is_inf & b.is_zero) | (a.is_zero & b.is_inf),
            inf=a.is_inf | b.is_inf,
            zero=a.is_zero | b.is_zero,
        )
        # "tpu" numerics registers only the fraction and appends the constant
        # hidden bit after the cut: a registered constant would be one flip-flop
        # (Yosys merges them) driving every DSP block of an array.
        a_sig, b_sig = (a.sig, b.sig) if ieee else (self.a[:7], self.b[:7])
        # The product's biased exponent if its leading one is at bit 14 (may be <= 0).
        exp_base = Signal(signed(10))
        m.d.comb += exp_base.eq(a.exp + b.exp - (2 * BF16.bias - FP32.bias))
        (a_sig, b_sig, exp_base, *flag_values) = stage(
            0, a_sig=a_sig, b_sig=b_sig, exp_base=exp_base, **flags)
        flags = dict(zip(flags, flag_values))
        if not ieee:
            a_sig, b_sig = Cat(a_sig, 1), Cat(b_sig, 1)

        # 1: multiply.
        product = Signal(16)
        m.d.comb += product.eq(a_sig * b_sig)
        (product, exp_base, *flag_values) = stage(1, product=product, exp_base=exp_base,
                                                   **flags)
        flags = dict(zip(flags, flag_values))

        # 2: move the leading one to bit 15. The value is then
        # 1.f x 2^(exponent - 127) with this biased exponent (may be <= 0):
        if ieee:
            lz = leading_zeros(m, product, name="product_lz")
        else:
            lz = ~product[15]
        normalized = Signal(16)
        exponent = Signal(signed(10))
        below = Signal(signed(10))      # 1 - exponent, computed beside it, not after it
        m.d.comb += [
            normalized.eq(product << lz),
            exponent.eq(exp_base + 1 - lz),
            below.eq(lz - exp_base),
        ]
        (normalized, exponent, below, *flag_values) = stage(
            2, normalized=normalized, exponent=exponent, below=below, **flags)
        flags = dict(zip(flags, flag_values))

        # 3: round; 4: special cases override. In "ieee" numerics a tiny product is
        # shifted into the subnormal range and rounded there, by ``below`` places.
        # In "tpu" numerics the product is exact: it is packed as it stands
        # (exponent field + hidden bit, see round_nearest_even), or flushed.
        if ieee:
            rounding = round_result(m, Cat(Const(0, 8), normalized), Const(0), Const(0),
                                    exponent, FP32, "ieee", below=below, name="rounded")
        else:
            rounded = Signal(31)
            m.d.comb += rounded.eq(Cat(Const(0, 8), normalized[:15], exponent[:8]))
            rounding = Rounded(rounded, exceeds_finite(exponent, FP32), not_positive(exponent))
        result = finish(m, stage, FP32, cuts=(3, 4), **rounding._asdict(), **flags)
        m.d.comb += self.result.eq(result)
        return m


class BF16Multiplier(StreamPipeline):
    """Streamed bf16 x bf16 -> fp32 multiplier, one operation per cycle.

    Parameters
    ----------
    numerics : "tpu" (default) or "ieee"
        "tpu" reads subnormal operands as signed zeros and flushes subnormal
        products to signed zeros; "ieee" keeps subnormals. inf x 0 and NaN
        operands give the canonical NaN 0x7FC00000.
    stages : int
        Pipeline depth, 1 to 5 (default 2).

    Ports
    -----
    operands : In(stream.Signature(StructLayout({"a": 16, "b": 16})))
    result : Out(stream.Signature(32))

    Latency ``stages`` cycles from ``operands`` accepted to ``result`` valid;
    throughput one per cycle. Backpressure on ``result`` stalls the whole
    pipeline and ``operands.ready`` with it; nothing is lost.
    """

    def __init__(self, *, numerics="tpu", stages=2):
        # Check before building the core, so a rejected call leaves no orphan behind.
        check_numerics(numerics)
        check_stages(stages, MAX_STAGES)
        super().__init__(BF16MulCore(numerics=numerics, stages=stages))
