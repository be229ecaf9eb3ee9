"""Correctly rounded fp32 square root with the numerics of SPEC section 3."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .float_ops import FP32, balanced_cuts, normalize_significand, unpack
from .rounding import finish, round_nearest_even
from ..lib.stager import Stager, check_stages
from ..lib.stream_pipeline import StreamPipeline
from ..lib.params import check_numerics

__all__ = ["FP32SqrtCore", "FP32Sqrt"]

#: Root bits: 24 significant and a guard bit. The first is always 1 and
#: costs no logic, so the recurrence has one step fewer.
ROOT_BITS = 25
STEPS = ROOT_BITS - 1

# Cut points: 0 after unpack, 1 to 24 after each recurrence step, 25 after
# rounding, 26 output. Estimated logic depths, in units of half a recurrence
# step (a subtract of up to 27 bits and a select).
_DELAYS = {
    "tpu": (1, *(2,) * STEPS, 2, 1),
    "ieee": (3, *(2,) * STEPS, 2, 1),
}
MAX_STAGES = len(_DELAYS["tpu"])


class FP32SqrtCore(wiring.Component):
    """fp32 -> fp32 square root datapath with a shared clock enable.

    The operand is ``m x 2^u`` with ``m`` in [1, 2); the radicand is ``m``
    if ``u`` is even and ``2m`` if it is odd, in [1, 4), so its root lies in
    [1, 2) and has exponent ``floor(u / 2)``. Every result is normal: the
    root of the smallest subnormal is about 2^-74.5, of the largest finite
    value below 2^64.

    Radix-2 restoring digit recurrence, fully pipelined and unrolled: with
    root ``q`` so far and remainder ``r = X - q^2`` (of the radicand ``X``
    read two bits at a time from the top), each step forms ``4r + next two
    bits`` and subtracts ``4q + 1`` in one carry chain: not negative means
    root bit 1 and the difference is the new remainder; negative means root
    bit 0 and ``4r + next two bits`` is. The subtraction grows by one bit per step,
    from 4 to 27 bits. The 25 root bits are the exact root truncated, and the
    root is correctly rounded to nearest even by adding the last (guard)
    bit: a root is never halfway between two fp32 values, so when the
    guard bit is 1 the sticky bit is too, and no remainder test is needed.
    (With the guard bit 1 the 25-bit root Q is odd, so Q^2 is 1 modulo 8,
    while the scaled radicand is a multiple of 2^24: their difference, the
    remainder, is 7 modulo 8 and never zero.)

    ``stages`` registers are spread over the steps so that the slowest stage
    is as short as possible (:func:`~.float_ops.balanced_cuts`). The default,
    14, puts at most two recurrence steps in a stage.

    Special cases: sqrt(+-0) = +-0, sqrt(+inf) = +inf, and NaN or any value
    below zero (-inf included) gives the canonical NaN. In "tpu" numerics a
    subnormal operand is a zero of the same sign, so its root is that zero.

    Parameters
    ----------
    numerics : "tpu" or "ieee"
    stages : int
        Pipeline registers, 1 to 27: the latency in cycles.

    Ports
    -----
    a : In(32)
        Operand bit pattern.
    en : In(1)
        Clock enable of every pipeline register.
    result : Out(32)
        ``sqrt(a)``, ``stages`` enabled cycles after the operand.

    Throughput one square root per enabled cycle.
    """

    def __init__(self, *, numerics="tpu", stages=14):
        self.numerics = check_numerics(numerics)
        self.latency = check_stages(stages, MAX_STAGES)
        super().__init__({"a": In(32), "en": In(1), "result": Out(32)})

    def elaborate(self, platform):
        m = Module()
        stage = Stager(m, enable=self.en,
                       preference=balanced_cuts(_DELAYS[self.numerics], self.latency),
                       stages=self.latency, prefix="sqrt")

        # 0: classify, normalize, halve the exponent: the root's biased
        # exponent is floor((e - 127) / 2) + 127 = (e + 127) >> 1 for a
        # biased exponent e, and e is even exactly when u = e - 127 is odd.
        a = unpack(m, self.a, FP32, self.numerics, name="a")
        sig, exp = normalize_significand(m, a, FP32, self.numerics, name="a")
        biased_twice = Signal(signed(11))
        m.d.comb += biased_twice.eq(exp + FP32.bias)    # at least 105: never negative
        exponent = biased_twice[1:9]
        odd_u = ~exp[0]
        flags = dict(
            sign=a.sign,
            nan=a.is_nan | (a.sign & ~a.is_zero),
            inf=a.is_inf,
            zero=a.is_zero,
        )
        # The radicand X = sig x 2^-23 (u even) or twice that (u odd), as a
        # 26-bit field whose top two bits are X's integer part. The first root
        # bit is 1 and the first remainder is X's integer part minus 1; the
        # other 24 bits (the last is a constant 0) wait to be brought down.
        radicand = Mux(odd_u, Cat(Const(0, 2), sig), Cat(Const(0, 1), sig, Const(0, 1)))
        remainder = Signal(2)
        m.d.comb += remainder.eq(radicand[24:] - 1)
        (remainder, pending, exponent, *flag_values) = stage(
            0, remainder=remainder, pending=radicand[1:24], exponent=exponent, **flags)
        flags = dict(zip(flags, flag_values))
        pending = Cat(0, pending)

        # 1 to 24: one root bit per step, MSB first. The root's leading 1 is a
        # constant, added after each cut rather than registered. After the
        # radicand's bits come only zeros.
        root_low = Cat()
        for step in range(STEPS):
            if len(pending):
                pair, pending = pending[-2:], pending[:-2]
            else:
                pair = Const(0, 2)
            widened = Cat(pair, remainder)                       # 4r + two bits
            trial = Cat(Const(1, 2), root_low, 1)                # 4q + 1
            diff = Signal(max(len(widened), len(trial)) + 1, name=f"step{step}_diff")
            remainder = Signal(len(trial), name=f"step{step}_rem")   # at most twice the new root
            m.d.comb += [
                diff.eq(widened - trial),
                remainder.eq(Mux(diff[-1], widened, diff)),
            ]
            root_low = Cat(~diff[-1], root_low)
            values = dict(remainder=remainder, root_low=root_low, exponent=exponent, **flags)
            if len(pending):
                values["pending"] = pending
            (remainder, root_low, exponent, *rest) = stage(1 + step, **values)
            flag_values = rest[:len(flags)]
            flags = dict(zip(flags, flag_values))
            if len(pending):
                pending = rest[-1]

        # 25: round. root_low holds the 23 fraction bits and the guard bit; the
        # sticky bit is 1 whenever the guard bit is (see above), so the last
        # remainder is not needed. Every root is normal: no overflow, no flush.
        rounded = round_nearest_even(m, Cat(root_low[1:], exponent), root_low[0], Const(1),
                                     name="rounded")
        # 26: special cases override. A root is never negative, but the root of -0 is -0.
        result = finish(m, stage, FP32, cuts=(25, 26), rounded=rounded, nan=flags["nan"],
                        inf=flags["inf"], zero=flags["zero"], zero_sign=flags["sign"])
        m.d.comb += self.result.eq(result)
        return m


class FP32Sqrt(StreamPipeline):
    """Streamed, correctly rounded fp32 square root, one per cycle.

    Parameters
    ----------
    numerics : "tpu" (default) or "ieee"
        "tpu" reads a subnormal operand as a signed zero; "ieee" takes its
        root (every root is normal, so nothing is flushed). Round to nearest
        even; sqrt(-0) = -0, sqrt(+inf) = +inf, sqrt(x < 0) and NaN give the
        canonical NaN 0x7FC00000.
    stages : int
        Pipeline depth, 1 to 27 (default 14, two recurrence steps per stage).

    Ports
    -----
    operands : In(stream.Signature(StructLayout({"a": 32})))
    result : Out(stream.Signature(32))

    Latency ``stages`` cycles from ``operands`` accepted to ``result`` valid;
    throughput one per cycle (fully pipelined). Backpressure on ``result``
    stalls the whole pipeline and ``operands.ready`` with it; nothing is lost.
    """

    def __init__(self, *, numerics="tpu", stages=14):
        # Check before building the core, so a rejected call leaves no orphan behind.
        check_numerics(numerics)
        check_stages(stages, MAX_STAGES)
        super().__init__(FP32SqrtCore(numerics=numerics, stages=stages))
