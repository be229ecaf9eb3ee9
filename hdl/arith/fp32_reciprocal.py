"""Correctly rounded fp32 reciprocal with the numerics of SPEC section 3: the divider, 1 / a."""

from amaranth.hdl import Const, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_numerics
from .fp32_divider import MAX_STAGES, FP32DivCore
from ..lib.stager import check_stages
from ..lib.stream_pipeline import StreamPipeline

__all__ = ["FP32RcpCore", "FP32Rcp"]

ONE = Const(0x3F800000, 32)


class FP32RcpCore(wiring.Component):
    """fp32 -> fp32 reciprocal datapath with a shared clock enable.

    A correctly rounded reciprocal is a correctly rounded division with the
    dividend 1.0, special cases and "tpu" flushing included (1/+-0 = +-inf,
    1/+-inf = +-0, a subnormal operand in "tpu" numerics is a zero, a
    subnormal result is flushed there), so this is
    :class:`~.fp32_divider.FP32DivCore` with its dividend tied to 1.0.
    Synthesis propagates the constant: the dividend's registers and its
    classification logic disappear, and the recurrence stays.

    Parameters
    ----------
    numerics : "tpu" or "ieee"
    stages : int
        Pipeline registers, 1 to 30: the latency in cycles (default 16, at
        most two recurrence steps per stage).

    Ports
    -----
    a : In(32)
        Operand bit pattern.
    en : In(1)
        Clock enable of every pipeline register.
    result : Out(32)
        ``1 / a``, ``stages`` enabled cycles after the operand.

    Throughput one reciprocal per enabled cycle.
    """

    #: ``stages`` when not given, so a unit reads the latency without building a core.
    DEFAULT_STAGES = 16

    def __init__(self, *, numerics="tpu", stages=DEFAULT_STAGES):
        self.numerics = check_numerics(numerics)
        self.latency = check_stages(stages, MAX_STAGES)
        super().__init__({"a": In(32), "en": In(1), "result": Out(32)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.divide = divide = FP32DivCore(numerics=self.numerics, stages=self.latency)
        m.d.comb += [
            divide.a.eq(ONE),
            divide.b.eq(self.a),
            divide.en.eq(self.en),
            self.result.eq(divide.result),
        ]
        return m


class FP32Rcp(StreamPipeline):
    """Streamed, correctly rounded fp32 reciprocal: ``result = 1 / a``, one per cycle.

    Parameters
    ----------
    numerics : "tpu" (default) or "ieee"
        "tpu" reads a subnormal operand as a signed zero and flushes a
        subnormal result to a signed zero; "ieee" keeps subnormals. Round to
        nearest even, 0 ULP, overflow to inf; 1/+-0 = +-inf, 1/+-inf = +-0,
        NaN gives the canonical NaN 0x7FC00000.
    stages : int
        Pipeline depth, 1 to 30 (default 16, two recurrence steps per stage).

    Ports
    -----
    operands : In(stream.Signature(StructLayout({"a": 32})))
    result : Out(stream.Signature(32))

    Latency ``stages`` cycles from ``operands`` accepted to ``result`` valid;
    throughput one per cycle (fully pipelined). Backpressure on ``result``
    stalls the whole pipeline and ``operands.ready`` with it; nothing is lost.
    """

    def __init__(self, *, numerics="tpu", stages=FP32RcpCore.DEFAULT_STAGES):
        # Check before building the core, so a rejected call leaves no orphan behind.
        check_numerics(numerics)
        check_stages(stages, MAX_STAGES)
        super().__init__(FP32RcpCore(numerics=numerics, stages=stages))
