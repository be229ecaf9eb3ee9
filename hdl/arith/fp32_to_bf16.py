"""fp32 -> bf16 converter with the numerics of SPEC section 3."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .float_ops import BF16, FP32, unpack
from .rounding import finish, round_nearest_even
from ..lib.stager import Stager, check_stages
from ..lib.stream_pipeline import StreamPipeline
from ..lib.params import check_numerics

__all__ = ["FP32ToBF16Core", "FP32ToBF16"]

# Cut points: 0 after rounding, 1 output.
_CUT_PREFERENCE = (1, 0)
MAX_STAGES = len(_CUT_PREFERENCE)


class FP32ToBF16Core(wiring.Component):
    """fp32 -> bf16 datapath with a shared clock enable.

    bf16 has fp32's exponent, so conversion keeps the top 16 bits and rounds
    to nearest even on the 16 bits dropped: incrementing the 15-bit
    exponent-and-fraction field carries into the exponent and turns the
    largest finite values into inf. In "tpu" numerics a subnormal input is a
    signed zero; no other input can round to a bf16 subnormal, so the output
    needs no flush.

    Parameters
    ----------
    numerics : "tpu" or "ieee"
    stages : int
        Pipeline registers, 1 or 2: the latency in cycles.

    Ports
    -----
    a : In(32)
        fp32 bit pattern.
    en : In(1)
        Clock enable of every pipeline register.
    result : Out(16)
        The bf16 pattern, ``stages`` enabled cycles after the operand.
    """

    def __init__(self, *, numerics="tpu", stages=1):
        self.numerics = check_numerics(numerics)
        self.latency = check_stages(stages, MAX_STAGES)
        super().__init__({"a": In(32), "en": In(1), "result": Out(16)})

    def elaborate(self, platform):
        m = Module()
        stage = Stager(m, enable=self.en, preference=_CUT_PREFERENCE,
                       stages=self.latency, prefix="cvt")

        a = unpack(m, self.a, FP32, self.numerics, name="a")
        kept = a.mag[16:]                  # bf16 exponent and fraction fields
        dropped = a.mag[:16]
        rounded = round_nearest_even(m, kept, dropped[15], dropped[:15].any(), name="rounded")
        # inf drops only zeros, so rounding leaves it alone; a NaN could round to
        # anything, and is the only case to override.
        result = finish(m, stage, BF16, cuts=(0, 1), rounded=rounded, sign=a.sign,
                        nan=a.is_nan)
        m.d.comb += self.result.eq(result)
        return m


class FP32ToBF16(StreamPipeline):
    """Streamed fp32 -> bf16 converter, one conversion per cycle.

    Parameters
    ----------
    numerics : "tpu" (default) or "ieee"
        "tpu" reads subnormal inputs as signed zeros; "ieee" rounds them to
        bf16 subnormals. Round to nearest even, overflow to inf, NaN to the
        canonical 0x7FC0.
    stages : int
        Pipeline depth, 1 or 2 (default 1).

    Ports
    -----
    operands : In(stream.Signature(StructLayout({"a": 32})))
    result : Out(stream.Signature(16))

    Latency ``stages`` cycles; throughput one per cycle. Backpressure on
    ``result`` stalls the pipeline and ``operands.ready``; nothing is lost.
    """

    def __init__(self, *, numerics="tpu", stages=1):
        # Check before building the core, so a rejected call leaves no orphan behind.
        check_numerics(numerics)
        check_stages(stages, MAX_STAGES)
        super().__init__(FP32ToBF16Core(numerics=numerics, stages=stages))
