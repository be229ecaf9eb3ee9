"""fp32 exp: a table-driven fixed-point datapath, faithful (error below 0.519 ULP).

The algorithm and its error analysis are documented once, in
``golden.transcendental`` (whose ``exp`` is this datapath's bit-exact model).
In short: ``t = x log2(e)`` in fixed point with 32 fraction bits,
``t = n + f``, ``2**f`` from two 256-entry tables and one linear term, then
one rounding of ``2**f * 2**n`` to binary32.
"""

import decimal
import functools

from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .float_ops import FP32, balanced_cuts, unpack
from .rounding import finish, round_result
from ..lib.stager import Stager, check_stages
from ..lib.stream_pipeline import StreamPipeline
from ..lib.params import check_numerics

__all__ = ["FP32ExpCore", "FP32Exp", "exp_tables"]


# hdl may not import golden, so the table generator of
# golden.transcendental.exp_tables is restated here; a test holds the two equal.
def _nearest(value, frac_bits):
    scaled = value * (1 << frac_bits)
    nearest = int(scaled.to_integral_value(decimal.ROUND_HALF_EVEN))
    if abs(abs(scaled - nearest) - decimal.Decimal("0.5")) < decimal.Decimal(10) ** -40:
        raise RuntimeError(f"{value} is too close to a rounding tie at {frac_bits} bits")
    return nearest


def exp_tables():
    """The datapath's constants and ROM contents, each exact value rounded to nearest.

    ``log2e`` = log2(e) * 2**39 (40 bits), ``ln2`` = ln(2) * 2**32 (32 bits),
    ``hi[i]`` = 2**(i/256) * 2**31 (32 bits), ``lo[j]`` = (2**(j/65536) - 1)
    * 2**32 (24 bits), from Python's ``decimal`` at 60 digits.
    """
    return dict(_exp_tables())     # a copy: the cached one stays as generated


@functools.cache
def _exp_tables():
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        two = decimal.Decimal(2)
        ln2 = two.ln()
        return {
            "log2e": _nearest(1 / ln2, 39),
            "ln2": _nearest(ln2, 32),
            "hi": tuple(_nearest(two ** (decimal.Decimal(i) / 256), 31) for i in range(256)),
            "lo": tuple(_nearest(two ** (decimal.Decimal(j) / 65536) - 1, 32)
                        for j in range(256)),
        }


#: Largest biased exponent the datapath takes: from 134 on, |x| >= 128 and the
#: result is inf (x > 0) or +0 (x < 0) outright.
LAST_EXPONENT = 133

# Cut points: 0 after unpack, 1 after the partial products of the log2(e) product,
# 2 after their sum, 3 after the alignment shift, 4 after the sign, 5 after the
# table reads and the linear term, 6 the table words again (a block RAM's output is
# slow), 7 after the partial products of H * G, 8 after their sum, 9 after the sum
# P, 10 to 12 the same for P * Y and S, 13 after the "ieee" subnormal shift, 14
# after rounding, 15 output. Estimated logic depths in units of an 8-bit add; "ieee" rounding has a
# subnormal shifter. A product and its sum are apart so that on an FPGA each can
# have a cycle: together (a 32 x 24 product in DSPs and a 44-bit carry chain) they
# held the unit to 45 MHz.
_DELAYS = {
    "tpu": (1, 1, 3, 2, 2, 3, 1, 1, 2, 2, 1, 2, 2, 0, 2, 1),
    "ieee": (1, 1, 3, 2, 2, 3, 1, 1, 2, 2, 1, 2, 2, 2, 2, 1),
}
MAX_STAGES = len(_DELAYS["tpu"])


def _pieces(value, cuts):
    bounds = (0, *cuts, len(value))
    return [(value[lo:hi], lo) for lo, hi in zip(bounds, bounds[1:])]


def _partial_products(a, b, *, a_cuts, b_cuts):
    """``a * b`` as partial products, ``[(product, shift)]``: ``a`` and ``b`` cut at their
    bits ``a_cuts`` and ``b_cuts``, each piece at most 18 bits."""
    a_parts, b_parts = _pieces(a, a_cuts), _pieces(b, b_cuts)
    assert all(len(x) <= 18 for x, _ in a_parts + b_parts), "a piece wider than 18 bits"
    return [(x * y, i + j) for x, i in a_parts for y, j in b_parts]


def _sum_of(parts, width):
    """The sum of registered partial products ``[(value, (product, shift))]``, ``width``
    bits, as a balanced tree of adds (a chain of them would be as deep as the terms)."""
    terms = [value << shift for value, (_, shift) in parts]
    while len(terms) > 1:
        terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0][:width]


class FP32ExpCore(wiring.Component):
    """fp32 -> fp32 exp datapath with a shared clock enable.

    For ``x = (-1)**s * m * 2**(e - 150)`` (``m`` the 24-bit significand,
    ``e >= 1``; a subnormal needs no normalizing):

    1. ``|t| * 2**32 = floor(m * L * 2**(e - 157))``, ``L = log2(e) * 2**39``
       (a 24 x 40 product, aligned by a right shift of 24 to 63);
       ``t = n + f`` in two's complement, ``f`` of 32 bits.
    2. ``S = P + round(P * Y / 2**48)`` with ``P = H[f1] + round(H[f1] *
       G[f2] / 2**32)`` and ``Y = floor(f3 * ln2 / 2**16)`` (``f`` split
       8 + 8 + 16 bits; two 256-entry ROMs of 32 and 24 bits, see
       :func:`exp_tables`): ``2**f`` with 31 fraction bits, in [2**31, 2**32).
    3. ``S * 2**(n - 31)`` rounded to nearest even, subnormals at 2**-149
       ("ieee") or flushed to +0 ("tpu"), overflow to inf.

    Error below 0.519 ULP of the exact exp (the analysis is in
    ``golden.transcendental``); never more than 1 ULP from the correctly
    rounded result.

    Special cases: NaN gives 0x7FC00000; a biased exponent of 134 or more
    (``|x| >= 128``, infinities included) gives +inf for ``x > 0`` and +0 for
    ``x < 0``; ``exp(+-0) = 1``, as is exp of a "tpu" subnormal.

    ``stages`` registers are placed at the cut points so that the slowest
    stage is as short as possible (:func:`~.float_ops.balanced_cuts`). The
    default, 6, keeps the block's latency of before the cut points were added;
    all 16 give each product's partial products, their sum and each sum after
    it a stage of its own, which places at 100 MHz on an ECP5 (docs/fpga.md).
    The VPU's transcendental unit builds 16, hidden under rsqrt's latency
    (``hdl.vpu.transcendental_unit.core_depths``).

    Parameters
    ----------
    numerics : "tpu" or "ieee"
    stages : int
        Pipeline registers, 1 to 16 (``MAX_STAGES``): the latency in cycles.

    Ports
    -----
    a : In(32)
        Operand bit pattern.
    en : In(1)
        Clock enable of every pipeline register.
    result : Out(32)
        ``exp(a)``, ``stages`` enabled cycles after the operand.

    Throughput one exp per enabled cycle.
    """

    #: ``stages`` when not given, so a unit reads the latency without building a core.
    DEFAULT_STAGES = 6

    def __init__(self, *, numerics="tpu", stages=DEFAULT_STAGES):
        self.numerics = check_numerics(numerics)
        self.latency = check_stages(stages, MAX_STAGES)
        super().__init__({"a": In(32), "en": In(1), "result": Out(32)})

    def elaborate(self, platform):
        m = Module()
        tables = exp_tables()
        stage = Stager(m, enable=self.en,
                       preference=balanced_cuts(_DELAYS[self.numerics], self.latency),
                       stages=self.latency, prefix="exp")

        # 0: classify. In "tpu" numerics unpack reads a subnormal as zero,
        # whose exp is 1 like any tiny input's.
        a = unpack(m, self.a, FP32, self.numerics, name="a")
        outright = Signal()
        align = Signal(range(LAST_EXPONENT))
        m.d.comb += [
            outright.eq(a.exp > LAST_EXPONENT),
            align.eq(LAST_EXPONENT - a.exp),        # meaningless when outright
        ]
        flags = dict(sign=a.sign, nan=a.is_nan, outright=outright)
        (sig, align, *values) = stage(0, sig=a.sig, align=align, **flags)
        flags = dict(zip(flags, values))

        # 1, 2: |x| log2(e), its partial products and their sum. Alignment drops at
        # least the product's low 24 bits.
        parts = _partial_products(sig, Const(tables["log2e"], 40), a_cuts=(12,),
                                  b_cuts=(18, 36))
        (align, *rest) = stage(1, align=align, **flags,
                               **{f"log2e{k}": part for k, (part, _) in enumerate(parts)})
        flags, parts = dict(zip(flags, rest)), list(zip(rest[len(flags):], parts))
        (product_hi, align, *values) = stage(2, product_hi=_sum_of(parts, 64)[24:],
                                             align=align, **flags)
        flags = dict(zip(flags, values))

        # 3, 4: t = n + f, 8 integer and 32 fraction bits, two's complement: the
        # aligned magnitude, then its sign. The result's biased exponent n + 127
        # (signed, 10 bits) may lie far outside the format: rounding deals with it.
        (magnitude, *values) = stage(3, magnitude=(product_hi >> align)[:40], **flags)
        flags = dict(zip(flags, values))
        t = Signal(signed(41))
        exponent = Signal(signed(10))
        m.d.comb += [
            t.eq(Mux(flags["sign"], -magnitude, magnitude)),
            exponent.eq(t[32:].as_signed() + FP32.bias),
        ]
        (fraction, exponent, *values) = stage(4, fraction=t[:32], exponent=exponent, **flags)
        flags = dict(zip(flags, values))

        # 5: the table factors of 2**f and the linear term ln(2) f3 of the last.
        m.submodules.hi_rom = hi_rom = Memory(shape=32, depth=256, init=tables["hi"])
        m.submodules.lo_rom = lo_rom = Memory(shape=24, depth=256, init=tables["lo"])
        hi_read, lo_read = hi_rom.read_port(domain="comb"), lo_rom.read_port(domain="comb")
        linear = Signal(48)
        m.d.comb += [
            hi_read.addr.eq(fraction[24:]),
            lo_read.addr.eq(fraction[16:24]),
            linear.eq(fraction[:16] * tables["ln2"]),
        ]
        (hi, lo, linear, exponent, *values) = stage(
            5, hi=hi_read.data, lo=lo_read.data, linear=linear[16:], exponent=exponent, **flags)
        flags = dict(zip(flags, values))
        (hi, lo, linear, exponent, *values) = stage(
            6, table_hi=hi, table_lo=lo, linear=linear, exponent=exponent, **flags)
        flags = dict(zip(flags, values))

        # 7 to 12: P = H (1 + G), S = P (1 + Y), each product rounded to 31
        # fraction bits. S < 2**32 (a test checks the largest case), so the
        # sums fit. Each product is its partial products of at most 18 x 18 bits
        # (what one FPGA multiplier takes), then their sum, then the rounded sum.
        parts = _partial_products(hi, lo, a_cuts=(16,), b_cuts=(12,))
        (hi, linear, exponent, *rest) = stage(
            7, hi=hi, linear=linear, exponent=exponent, **flags,
            **{f"hg{k}": part for k, (part, _) in enumerate(parts)})
        flags, parts = dict(zip(flags, rest)), list(zip(rest[len(flags):], parts))
        (hi, product, linear, exponent, *values) = stage(
            8, hi=hi, hg=_sum_of(parts, 56), linear=linear, exponent=exponent, **flags)
        flags = dict(zip(flags, values))
        partial = Signal(32)
        m.d.comb += partial.eq(hi + ((product + (1 << 31)) >> 32))
        (partial, linear, exponent, *values) = stage(
            9, partial=partial, linear=linear, exponent=exponent, **flags)
        flags = dict(zip(flags, values))
        parts = _partial_products(partial, linear, a_cuts=(16,), b_cuts=(16,))
        (partial, exponent, *rest) = stage(
            10, partial=partial, exponent=exponent, **flags,
            **{f"py{k}": part for k, (part, _) in enumerate(parts)})
        flags, parts = dict(zip(flags, rest)), list(zip(rest[len(flags):], parts))
        (partial, product, exponent, *values) = stage(
            11, partial=partial, py=_sum_of(parts, 64), exponent=exponent, **flags)
        flags = dict(zip(flags, values))
        power = Signal(32)
        m.d.comb += power.eq(partial + ((product + (1 << 47)) >> 48))
        # "ieee" rounding shifts a subnormal right by 1 - exponent: computed here, so the
        # rounding stage does not wait for a subtraction before its shifter.
        below = Signal(signed(len(exponent) + 1))
        m.d.comb += below.eq(1 - exponent)
        (power, exponent, below, *values) = stage(12, power=power, exponent=exponent,
                                                  below=below, **flags)
        flags = dict(zip(flags, values))

        # 13, 14: round S * 2**(n - 31) (the leading one is S's bit 31), the "ieee"
        # subnormal shift before cut 13, the rounding after it.
        passed = {}

        def between(**values):
            out = stage(13, **values, **flags)
            passed.update(zip(flags, out[len(values):]))
            return out[:len(values)]
        rounding = round_result(m, power[8:], power[7], power[:7].any(), exponent, FP32,
                                self.numerics, below=below if self.numerics == "ieee" else None,
                                between=between, name="rounded")
        flags = passed
        # 15: special cases override. exp is never negative: an outright input
        # gives +inf (x > 0) or +0 (x < 0), and a flushed result is +0.
        result = finish(m, stage, FP32, cuts=(14, 15), **rounding._asdict(), nan=flags["nan"],
                        inf=flags["outright"] & ~flags["sign"],
                        zero=flags["outright"] & flags["sign"])
        m.d.comb += self.result.eq(result)
        return m


class FP32Exp(StreamPipeline):
    """Streamed fp32 exp, one per cycle, within 0.52 ULP (faithful).

    Bit-exact with ``golden.transcendental.exp``; see :class:`FP32ExpCore`
    for the algorithm.

    Parameters
    ----------
    numerics : "tpu" (default) or "ieee"
        "tpu" reads a subnormal operand as zero (exp = 1) and flushes a
        subnormal result to +0; "ieee" keeps subnormal results, rounded to
        nearest even at 2**-149. NaN gives 0x7FC00000, exp(+inf) = +inf,
        exp(-inf) = +0, overflow gives +inf.
    stages : int
        Pipeline depth, 1 to 8 (default 6, one multiplier per stage).

    Ports
    -----
    operands : In(stream.Signature(StructLayout({"a": 32})))
    result : Out(stream.Signature(32))

    Latency ``stages`` cycles from ``operands`` accepted to ``result`` valid;
    throughput one per cycle (fully pipelined). Backpressure on ``result``
    stalls the whole pipeline and ``operands.ready`` with it; nothing is lost.
    """

    def __init__(self, *, numerics="tpu", stages=FP32ExpCore.DEFAULT_STAGES):
        # Check before building the core, so a rejected call leaves no orphan behind.
        check_numerics(numerics)
        check_stages(stages, MAX_STAGES)
        super().__init__(FP32ExpCore(numerics=numerics, stages=stages))
