"""Correctly rounded fp32 reciprocal square root with the numerics of SPEC section 3."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .float_ops import FP32, balanced_cuts, normalize_significand, unpack
from .rounding import finish, round_nearest_even
from ..lib.stager import Stager, check_stages
from ..lib.stream_pipeline import StreamPipeline
from ..lib.params import check_numerics

__all__ = ["FP32RsqrtCore", "FP32Rsqrt"]

#: Bits of the quotient D whose square root is taken (bits 49 to 0). Bit 49
#: is known from the exponent's parity, so the division has one step fewer.
QUOTIENT_BITS = 50
DIV_STEPS = QUOTIENT_BITS - 1
#: Root bits after the first, which is always 1: 23 fraction bits and a guard bit.
ROOT_STEPS = 24

# Cut points: 0 after unpack; 1 to 49 after each division step (quotient bit
# 48 - i after cut i + 1), the root steps running beside every second one;
# 50 after the last root step; 51 after rounding; 52 output. Estimated logic
# depths, in units of half a recurrence step (a subtract of at most 28 bits
# and a select); a division step and the root step beside it run in
# parallel. "ieee" numerics add the leading-zero count and shifter.
_DELAYS = {
    "tpu": (1, *(2,) * DIV_STEPS, 2, 2, 1),
    "ieee": (3, *(2,) * DIV_STEPS, 2, 2, 1),
}
MAX_STAGES = len(_DELAYS["tpu"])


def _carry(stage, index, state):
    """``state`` (name -> value) after cut ``index``; zero-width values pass unregistered."""
    live = {name: value for name, value in state.items() if len(value)}
    return {**state, **dict(zip(live, stage(index, **live)))}


def _root_step(m, pair, remainder, root_low, *, name):
    """One restoring square-root step: (root bit, new remainder), as in :mod:`.fp32_sqrt`.

    ``remainder`` is the radicand so far minus the root so far squared, and
    the root so far is ``root_low`` below a leading 1. Its new value is at
    most twice the new root, so it fits in the trial's width.
    """
    widened = Cat(pair, remainder)                           # 4r + two radicand bits
    trial = Cat(Const(1, 2), root_low, 1)                    # 4q + 1
    diff = Signal(max(len(widened), len(trial)) + 1, name=f"{name}_diff")
    new_remainder = Signal(len(trial), name=f"{name}_rem")
    m.d.comb += [
        diff.eq(widened - trial),
        new_remainder.eq(Mux(diff[-1], widened, diff)),
    ]
    return ~diff[-1], new_remainder


class FP32RsqrtCore(wiring.Component):
    """fp32 -> fp32 reciprocal square root datapath with a shared clock enable.

    Method: the integer square root of a reciprocal. The operand is
    ``S x 2^(u - 23)`` with ``S`` its 24-bit significand (leading one at bit
    23, subnormals normalized in "ieee" numerics) and ``u`` its unbiased
    exponent. Its reciprocal root is ``z x 2^(-25 - floor(u / 2))`` with
    ``z^2 = 2^73 / S`` (``u`` even) or ``2^72 / S`` (``u`` odd), and
    ``z`` in (2^24, 2^25]. The unit computes

    * ``D = floor((2^73 - 1) / S)`` or ``floor((2^72 - 1) / S)``, 50 bits,
      by radix-2 restoring division with the constant dividend, whose bits
      below the top are all ones; the remainder stays below ``S``, so every
      step is a 25-bit subtract. Quotient bit 49 is 1 exactly when ``u`` is
      even, so it costs no step.
    * ``Y = isqrt(D)``, 25 bits, by the restoring recurrence of
      :class:`~.fp32_sqrt.FP32SqrtCore`, two quotient bits per root bit;
      each root step runs beside the division step after its two bits, so
      the root adds one step to the chain.

    ``floor(sqrt(floor(t))) = floor(sqrt(t))``, so ``Y = floor(z)``, except
    where an integer ``k`` has ``(N - 1) / S < k^2 <= N / S`` for the
    numerator ``N``, which needs ``k^2 S = N``: only ``S = 2^23`` with ``u``
    even (the operand a power of 4), where ``z = 2^25`` and ``Y = 2^25 - 1``.
    The ``- 1`` keeps ``Y`` at 25 bits, and rounding carries it up to the
    exact power of two. ``Y`` holds the hidden bit, 23 fraction bits and the
    guard bit. The result is exact only for powers of 4 (``1/sqrt(x)``
    rational needs ``x = 2^(2n) / p^2`` with ``p`` odd, and binary32 holds
    that only for ``p = 1``), and never halfway between two fp32 values
    (that needs ``z`` an odd integer, and ``z^2`` divides a power of two),
    so the sticky bit is 1 whenever the guard bit is, and rounding to
    nearest even adds the guard bit. No remainder is tested. Every result
    is normal: the root of the largest finite value is about 2^-64, of the
    smallest subnormal 2^74.5.

    Exactness throughout: no estimate and no table, so the hardest input,
    0x403A18E3 (2^-28.5 ULP from a rounding midpoint), rounds correctly.
    Composing two rounded operations, ``1 / sqrt(x)``, would not.

    ``stages`` registers are spread over the 51 recurrence steps so that the
    slowest stage is as short as possible (:func:`~.float_ops.balanced_cuts`).
    The default, 27, puts at most two steps in a stage, like the divider's
    default.

    Special cases: rsqrt(+-0) = +-inf, rsqrt(+inf) = +0, and NaN or any value
    below zero (-inf included) gives the canonical NaN. In "tpu" numerics a
    subnormal operand is a zero of the same sign, so its result is that
    signed inf.

    Parameters
    ----------
    numerics : "tpu" or "ieee"
    stages : int
        Pipeline registers, 1 to 53: the latency in cycles.

    Ports
    -----
    a : In(32)
        Operand bit pattern.
    en : In(1)
        Clock enable of every pipeline register.
    result : Out(32)
        ``1 / sqrt(a)``, ``stages`` enabled cycles after the operand.

    Throughput one reciprocal square root per enabled cycle.
    """

    #: ``stages`` when not given, so a unit reads the latency without building a core.
    DEFAULT_STAGES = 27

    def __init__(self, *, numerics="tpu", stages=DEFAULT_STAGES):
        self.numerics = check_numerics(numerics)
        self.latency = check_stages(stages, MAX_STAGES)
        super().__init__({"a": In(32), "en": In(1), "result": Out(32)})

    def elaborate(self, platform):
        m = Module()
        stage = Stager(m, enable=self.en,
                       preference=balanced_cuts(_DELAYS[self.numerics], self.latency),
                       stages=self.latency, prefix="rsqrt")

        # 0: classify and normalize. With the biased exponent e, u = e - 127
        # is odd exactly when e is even, and the result's biased exponent
        # before rounding is 127 - 1 - floor(u / 2) = 190 - floor((e + 1) / 2):
        # between 63 and 201, so it never leaves the normal range.
        a = unpack(m, self.a, FP32, self.numerics, name="a")
        sig, exp = normalize_significand(m, a, FP32, self.numerics, name="a")
        odd_u = Signal()
        half = Signal(signed(10))
        exponent = Signal(8)
        m.d.comb += [
            odd_u.eq(~exp[0]),
            half.eq((exp + 1) >> 1),
            exponent.eq(190 - half),
        ]
        # Named by the result they force: a zero operand gives inf, inf gives zero.
        flags = dict(
            sign=a.sign,
            nan=a.is_nan | (a.sign & ~a.is_zero),
            inf=a.is_zero,
            zero=a.is_inf,
        )
        # The division's remainder after quotient bit 49: the top 24 bits of
        # the numerator, 2^24 - 1 (u even: it exceeds S once, leaving
        # 2^24 - 1 - S, the complement of S) or 2^23 - 1 (u odd: below S).
        frac = sig[:FP32.fbits]
        remainder = Signal(FP32.fbits)
        m.d.comb += remainder.eq(Mux(odd_u, (1 << FP32.fbits) - 1, ~frac))
        # The divisor's hidden bit is a constant 1, joined after each cut.
        state = _carry(stage, 0, dict(remainder=remainder, divisor=frac, pending=~odd_u,
                                      root_rem=Cat(), root_low=Cat(), exponent=exponent,
                                      **flags))

        # 1 to 49: one quotient bit per step, MSB first; pending holds the
        # quotient bits the root has not taken yet, the newest at the LSB.
        # The first root bit is 1 (D >= 2^48), leaving its pair minus 1.
        root_started = False
        for step in range(DIV_STEPS):
            pending, root_rem, root_low = state["pending"], state["root_rem"], state["root_low"]
            if len(pending) == 2:
                if not root_started:
                    root_rem = Signal(2, name="root0_rem")
                    m.d.comb += root_rem.eq(pending - 1)
                    root_started = True
                else:
                    bit, root_rem = _root_step(m, pending, root_rem, root_low,
                                               name=f"root{len(root_low) + 1}")
                    root_low = Cat(bit, root_low)
                pending = Cat()
            partial = Cat(1, state["remainder"])                   # 2r + a numerator bit
            diff = Signal(FP32.fbits + 3, name=f"div{step}_diff")
            remainder = Signal(FP32.fbits + 1, name=f"div{step}_rem")
            m.d.comb += [
                diff.eq(partial - Cat(state["divisor"], 1)),
                remainder.eq(Mux(diff[-1], partial, diff)),
            ]
            state = _carry(stage, 1 + step, {**state, "remainder": remainder,
                                             "pending": Cat(~diff[-1], pending),
                                             "root_rem": root_rem, "root_low": root_low})

        # 50: the last root bit, the guard bit; its remainder is not needed.
        bit, _ = _root_step(m, state["pending"], state["root_rem"], state["root_low"],
                            name=f"root{ROOT_STEPS}")
        flags = {name: state[name] for name in flags}
        (root_low, exponent, *flag_values) = stage(
            50, root_low=Cat(bit, state["root_low"]), exponent=state["exponent"], **flags)
        flags = dict(zip(flags, flag_values))

        # 51: round: add the guard bit (the sticky bit is 1 whenever it is, see above).
        # Every result is normal: no overflow, no flush.
        rounded = round_nearest_even(m, Cat(root_low[1:], exponent), root_low[0], Const(1),
                                     name="rounded")
        # 52: special cases override: rsqrt(+-0) = +-inf, rsqrt(+inf) = +0.
        result = finish(m, stage, FP32, cuts=(51, 52), rounded=rounded, nan=flags["nan"],
                        inf=flags["inf"], inf_sign=flags["sign"], zero=flags["zero"])
        m.d.comb += self.result.eq(result)
        return m


class FP32Rsqrt(StreamPipeline):
    """Streamed, correctly rounded fp32 reciprocal square root, one per cycle.

    Parameters
    ----------
    numerics : "tpu" (default) or "ieee"
        "tpu" reads a subnormal operand as a signed zero; "ieee" takes its
        reciprocal root (every result is normal, so nothing is flushed).
        Round to nearest even, 0 ULP; rsqrt(+-0) = +-inf, rsqrt(+inf) = +0,
        rsqrt(x < 0) and NaN give the canonical NaN 0x7FC00000.
    stages : int
        Pipeline depth, 1 to 53 (default 27, two recurrence steps per stage).

    Ports
    -----
    operands : In(stream.Signature(StructLayout({"a": 32})))
    result : Out(stream.Signature(32))

    Latency ``stages`` cycles from ``operands`` accepted to ``result`` valid;
    throughput one per cycle (fully pipelined). Backpressure on ``result``
    stalls the whole pipeline and ``operands.ready`` with it; nothing is lost.
    """

    def __init__(self, *, numerics="tpu", stages=FP32RsqrtCore.DEFAULT_STAGES):
        # Check before building the core, so a rejected call leaves no orphan behind.
        check_numerics(numerics)
        check_stages(stages, MAX_STAGES)
        super().__init__(FP32RsqrtCore(numerics=numerics, stages=stages))
