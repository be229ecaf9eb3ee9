"""fp32 x fp32 -> fp32 multiplier with the numerics of SPEC section 3."""

from amaranth.hdl import Cat, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .float_ops import FP32, normalize_significand, unpack
from .rounding import finish, keep_significand, round_result
from ..lib.stager import Stager, check_stages
from ..lib.stream_pipeline import StreamPipeline
from ..lib.params import check_numerics

__all__ = ["FP32MulCore", "FP32Multiplier"]

# Cut points: 0 after unpack (the multiplier's input registers), 1 after the
# 24x24 multiply (its output registers), 2 after normalizing, 3 after
# rounding, 4 output. Three stages register the multiply on both sides, so
# synthesis can fold both registers into the FPGA's DSP blocks.
_CUT_PREFERENCE = (4, 1, 0, 2, 3)
MAX_STAGES = len(_CUT_PREFERENCE)


class FP32MulCore(wiring.Component):
    """fp32 x fp32 -> fp32 datapath with a shared clock enable.

    Both significands enter the multiplier normalized (leading one at bit
    23), so the 48-bit product has its leading one at bit 47 or 46 and a
    one-bit shift normalizes it in either numerics. The bits below the 24
    kept are guard and sticky, and :func:`~.rounding.round_result` rounds
    to nearest even: in "ieee" numerics after shifting a product below
    2^-126 into the subnormal range; in "tpu" numerics by flushing it,
    unless it rounds up to 2^-126. "ieee" numerics normalize a subnormal
    operand with a leading-zero count before the multiply; "tpu" numerics
    read it as a zero and need no such logic.

    Parameters
    ----------
    numerics : "tpu" or "ieee"
    stages : int
        Pipeline registers, 1 to 5: the latency in cycles.

    Ports
    -----
    a, b : In(32)
        Operand bit patterns.
    en : In(1)
        Clock enable of every pipeline register.
    result : Out(32)
        ``a * b``, ``stages`` enabled cycles after the operands.

    Throughput one product per enabled cycle.
    """

    def __init__(self, *, numerics="tpu", stages=3):
        self.numerics = check_numerics(numerics)
        self.latency = check_stages(stages, MAX_STAGES)
        super().__init__({"a": In(32), "b": In(32), "en": In(1), "result": Out(32)})

    def elaborate(self, platform):
        m = Module()
        stage = Stager(m, enable=self.en, preference=_CUT_PREFERENCE,
                       stages=self.latency, prefix="mul")

        # 0: classify and normalize.
        a = unpack(m, self.a, FP32, self.numerics, name="a")
        b = unpack(m, self.b, FP32, self.numerics, name="b")
        a_sig, a_exp = normalize_significand(m, a, FP32, self.numerics, name="a")
        b_sig, b_exp = normalize_significand(m, b, FP32, self.numerics, name="b")
        flags = dict(
            sign=a.sign ^ b.sign,
            nan=a.is_nan | b.is_nan | (a.is_inf & b.is_zero) | (a.is_zero & b.is_inf),
            inf=a.is_inf | b.is_inf,
            zero=a.is_zero | b.is_zero,
        )
        # The product's biased exponent if its leading one is at bit 46 (may be <= 0).
        exp_base = Signal(signed(10))
        m.d.comb += exp_base.eq(a_exp + b_exp - FP32.bias)
        # The hidden bits are 1 (zeros go through the flags), so only the
        # fractions are registered and the constant joins after the cut: a
        # registered constant would be one merged flip-flop feeding every
        # multiplier of an array.
        (a_frac, b_frac, exp_base, *flag_values) = stage(
            0, a_frac=a_sig[:23], b_frac=b_sig[:23], exp_base=exp_base, **flags)
        flags = dict(zip(flags, flag_values))

        # 1: multiply.
        product = Signal(48)
        m.d.comb += product.eq(Cat(a_frac, 1) * Cat(b_frac, 1))
        (product, exp_base, *flag_values) = stage(1, product=product, exp_base=exp_base,
                                                   **flags)
        flags = dict(zip(flags, flag_values))

        # 2: keep 24 bits from the leading one (bit 47 or 46), then guard and sticky.
        kept = keep_significand(m, product, exp_base, FP32, name="product")
        (frac, guard, sticky, exponent, *flag_values) = stage(2, **kept._asdict(), **flags)
        flags = dict(zip(flags, flag_values))

        # 3: round (ieee: into the subnormal range where needed); 4: special cases override.
        rounding = round_result(m, Cat(frac, 1), guard, sticky, exponent, FP32, self.numerics,
                                name="rounded")
        result = finish(m, stage, FP32, cuts=(3, 4), **rounding._asdict(), **flags)
        m.d.comb += self.result.eq(result)
        return m


class FP32Multiplier(StreamPipeline):
    """Streamed fp32 x fp32 -> fp32 multiplier, one operation per cycle.

    Parameters
    ----------
    numerics : "tpu" (default) or "ieee"
        "tpu" reads subnormal operands as signed zeros and flushes subnormal
        products to signed zeros; "ieee" keeps subnormals. Both round to
        nearest even and overflow to inf; inf x 0 and NaN operands give the
        canonical NaN 0x7FC00000.
    stages : int
        Pipeline depth, 1 to 5 (default 3, the multiply registered on both sides).

    Ports
    -----
    operands : In(stream.Signature(StructLayout({"a": 32, "b": 32})))
    result : Out(stream.Signature(32))

    Latency ``stages`` cycles from ``operands`` accepted to ``result`` valid;
    throughput one per cycle. Backpressure on ``result`` stalls the whole
    pipeline and ``operands.ready`` with it; nothing is lost.
    """

    def __init__(self, *, numerics="tpu", stages=3):
        # Check before building the core, so a rejected call leaves no orphan behind.
        check_numerics(numerics)
        check_stages(stages, MAX_STAGES)
        super().__init__(FP32MulCore(numerics=numerics, stages=stages))
