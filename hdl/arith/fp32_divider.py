"""Correctly rounded fp32 / fp32 divider with the numerics of SPEC section 3."""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .float_ops import FP32, balanced_cuts, normalize_significand, unpack
from .rounding import finish, keep_significand, round_result
from ..lib.stager import Stager, check_stages
from ..lib.stream_pipeline import StreamPipeline
from ..lib.params import check_numerics

__all__ = ["FP32DivCore", "FP32Divider"]

#: Quotient bits: 24 significant and a guard bit, plus one because the
#: quotient of two significands in [1, 2) may be below 1.
QUOTIENT_BITS = 26

# Cut points: 0 after unpack, 1 to 26 after each recurrence step, 27 after
# normalizing the quotient, 28 after rounding, 29 output. Their estimated
# logic depths, in units of half a recurrence step (a 25-bit subtract and a
# select); "ieee" numerics add leading-zero counts and the subnormal shifter.
_DELAYS = {
    "tpu": (1, *(2,) * QUOTIENT_BITS, 1, 2, 1),
    "ieee": (4, *(2,) * QUOTIENT_BITS, 1, 4, 1),
}
MAX_STAGES = len(_DELAYS["tpu"])


class FP32DivCore(wiring.Component):
    """fp32 / fp32 -> fp32 datapath with a shared clock enable.

    Radix-2 restoring division, fully pipelined: the significands, normalized
    to [1, 2), go through 26 unrolled recurrence steps. Each step doubles the
    partial remainder, subtracts the divisor in one carry chain, and keeps
    the difference if it is not negative (quotient bit 1) or the doubled
    remainder if it is (quotient bit 0). On an FPGA the select folds into the
    LUTs feeding the next step's carry chain, so a step costs one carry
    chain. The remainder stays exact, so the sticky bit is "remainder not
    zero" and the result is correctly rounded to nearest even, into the
    subnormal range in "ieee" numerics (see
    :func:`~.rounding.round_result`).

    ``stages`` registers are spread over the steps so that the slowest stage
    is as short as possible (:func:`~.float_ops.balanced_cuts`). The default,
    16, puts at most two recurrence steps in a stage.

    Special cases: x/0 = inf and 0/x = 0, with the sign of the quotient;
    0/0, inf/inf and NaN operands give the canonical NaN. In "tpu" numerics
    a subnormal operand is a zero, so x/subnormal = inf.

    Parameters
    ----------
    numerics : "tpu" or "ieee"
    stages : int
        Pipeline registers, 1 to 30: the latency in cycles.

    Ports
    -----
    a, b : In(32)
        Dividend and divisor bit patterns.
    en : In(1)
        Clock enable of every pipeline register.
    result : Out(32)
        ``a / b``, ``stages`` enabled cycles after the operands.

    Throughput one division per enabled cycle.
    """

    def __init__(self, *, numerics="tpu", stages=16):
        self.numerics = check_numerics(numerics)
        self.latency = check_stages(stages, MAX_STAGES)
        super().__init__({"a": In(32), "b": In(32), "en": In(1), "result": Out(32)})

    def elaborate(self, platform):
        m = Module()
        stage = Stager(m, enable=self.en,
                       preference=balanced_cuts(_DELAYS[self.numerics], self.latency),
                       stages=self.latency, prefix="div")

        # 0: classify and normalize. The quotient's exponent is computed for a
        # quotient below 1 and incremented if the first quotient bit is 1.
        a = unpack(m, self.a, FP32, self.numerics, name="a")
        b = unpack(m, self.b, FP32, self.numerics, name="b")
        a_sig, a_exp = normalize_significand(m, a, FP32, self.numerics, name="a")
        b_sig, b_exp = normalize_significand(m, b, FP32, self.numerics, name="b")
        exponent = Signal(signed(10))
        m.d.comb += exponent.eq(a_exp - b_exp + (FP32.bias - 1))
        flags = dict(
            sign=a.sign ^ b.sign,
            nan=a.is_nan | b.is_nan | (a.is_zero & b.is_zero) | (a.is_inf & b.is_inf),
            inf=a.is_inf | b.is_zero,
            zero=a.is_zero | b.is_inf,
        )
        # Normalized hidden bits are constant 1: registered, each would be one
        # merged flip-flop fanning out to every step; they join after the cut.
        (dividend, divisor, exponent, *flag_values) = stage(
            0, dividend=a_sig[:23], divisor=b_sig[:23], exponent=exponent, **flags)
        flags = dict(zip(flags, flag_values))

        # 1 to 26: one quotient bit per step, MSB first. The remainder stays
        # below the divisor, so it fits in 24 bits and its double in 25.
        partial = Cat(dividend, 1)
        quotient = Cat()
        for step in range(QUOTIENT_BITS):
            d = Cat(divisor, 1)
            diff = Signal(len(partial) + 1, name=f"step{step}_diff")
            remainder = Signal(24, name=f"step{step}_rem")
            m.d.comb += [
                diff.eq(partial - d),
                remainder.eq(Mux(diff[-1], partial, diff)),
            ]
            quotient = Cat(~diff[-1], quotient)
            (remainder, quotient, divisor, exponent, *flag_values) = stage(
                1 + step, remainder=remainder, quotient=quotient, divisor=divisor,
                exponent=exponent, **flags)
            flags = dict(zip(flags, flag_values))
            partial = Cat(0, remainder)

        # 27: keep 24 bits from the leading one, then guard and sticky. The
        # quotient of [1, 2) by [1, 2) lies in (1/2, 2), so its leading one
        # is bit 25 or bit 24; the remainder joins the sticky bit.
        kept = keep_significand(m, quotient, exponent, FP32, sticky=remainder.any(),
                                name="quotient")
        (frac, guard, sticky, exponent, *flag_values) = stage(27, **kept._asdict(), **flags)
        flags = dict(zip(flags, flag_values))

        # 28: round (ieee: into the subnormal range where needed); 29: special cases override.
        rounding = round_result(m, Cat(frac, 1), guard, sticky, exponent, FP32, self.numerics,
                                name="rounded")
        result = finish(m, stage, FP32, cuts=(28, 29), **rounding._asdict(), **flags)
        m.d.comb += self.result.eq(result)
        return m


class FP32Divider(StreamPipeline):
    """Streamed, correctly rounded fp32 divider: ``result = a / b``, one per cycle.

    Parameters
    ----------
    numerics : "tpu" (default) or "ieee"
        "tpu" reads subnormal operands as signed zeros and flushes subnormal
        quotients to signed zeros; "ieee" keeps subnormals. Both round to
        nearest even and overflow to inf; x/0 = inf, 0/0 and inf/inf give the
        canonical NaN 0x7FC00000.
    stages : int
        Pipeline depth, 1 to 30 (default 16, two recurrence steps per stage).

    Ports
    -----
    operands : In(stream.Signature(StructLayout({"a": 32, "b": 32})))
    result : Out(stream.Signature(32))

    Latency ``stages`` cycles from ``operands`` accepted to ``result`` valid;
    throughput one per cycle (fully pipelined). Backpressure on ``result``
    stalls the whole pipeline and ``operands.ready`` with it; nothing is lost.
    """

    def __init__(self, *, numerics="tpu", stages=16):
        # Check before building the core, so a rejected call leaves no orphan behind.
        check_numerics(numerics)
        check_stages(stages, MAX_STAGES)
        super().__init__(FP32DivCore(numerics=numerics, stages=stages))
