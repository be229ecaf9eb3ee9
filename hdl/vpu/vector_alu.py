"""One vector ALU slot: every ``alu`` instruction on a whole vreg, with a 1-cycle result register."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arith.float_ops import BF16, FP32, unpack
from ..arith.fp32_adder import FP32AddCore
from ..arith.fp32_compare import compare, extremum
from ..arith.fp32_multiplier import FP32MulCore
from ..arith.fp32_to_bf16 import FP32ToBF16Core
from ..arith.int_convert import fp32_to_int32, int32_to_fp32
from ..lib.params import check_int, check_numerics
from .isa import OPS, Opcode, check_ops

__all__ = ["WordALU", "VectorALU", "ALU_OPS"]

#: The instructions an ALU slot executes.
ALU_OPS = tuple(op.name for op in OPS.values() if op.unit == "alu")


class WordALU(wiring.Component):
    """Every ``alu`` instruction of SPEC section 4.2 on one 32-bit word.

    Parameters
    ----------
    numerics : "tpu" or "ieee"
    ops : collection of str, optional
        The operations to build (default all of :data:`ALU_OPS`); a smaller set
        makes a smaller design, which compiles faster.

    Ports
    -----
    op : In(Opcode)
        The instruction's opcode; opcodes of other units,
        and operations not built, give an unspecified result.
    a, b, c : In(32)
        Operand words (``c`` only for ``select``).
    result : Out(32)
        The result, one cycle after the operands: every path ends in a
        register (the fp32 adder's, multiplier's and converter's own, or this
        component's), so the ALU has a 1-cycle latency and a throughput of one
        operation per cycle, and never stalls.
    """

    def __init__(self, *, numerics="tpu", ops=None):
        self.numerics = check_numerics(numerics)
        self.ops = check_ops(ops, ALU_OPS, what="ops")
        super().__init__({"op": In(Opcode), "a": In(32), "b": In(32), "c": In(32),
                          "result": Out(32)})

    def elaborate(self, platform):
        m = Module()
        n = self.numerics
        a, b, c = self.a, self.b, self.c
        ops = self.ops
        # Operations whose result comes from a pipelined core's own register.
        cores = {}
        if {"add", "sub"} & set(ops):
            m.submodules.adder = adder = FP32AddCore(numerics=n, stages=1)
            # a - b is exactly a + (-b), NaNs and signed zeros included.
            flip = Mux(self.op == Opcode.SUB, 1 << 31, 0)
            m.d.comb += [adder.en.eq(1), adder.a.eq(a), adder.b.eq(b ^ flip)]
            cores |= {op: adder for op in ("add", "sub") if op in ops}
        if "mul" in ops:
            m.submodules.multiplier = multiplier = FP32MulCore(numerics=n, stages=1)
            m.d.comb += [multiplier.en.eq(1), multiplier.a.eq(a), multiplier.b.eq(b)]
            cores["mul"] = multiplier
        if "f32_to_bf16" in ops:
            m.submodules.to_bf16 = to_bf16 = FP32ToBF16Core(numerics=n, stages=1)
            m.d.comb += [to_bf16.en.eq(1), to_bf16.a.eq(a)]
            cores["f32_to_bf16"] = to_bf16             # bf16 in the low half, 0 above

        # The others: combinational here, registered below. Each is built only if used.
        shift = b[:5]

        def widened():
            bf16 = unpack(m, a[:16], BF16, n, name="bf16")
            return Mux(bf16.is_nan, FP32.qnan, Cat(Const(0, 16), bf16.mag, bf16.sign))

        logic = {
            "max": lambda: extremum(m, a, b, n, maximum=True, name="max"),
            "min": lambda: extremum(m, a, b, n, maximum=False, name="min"),
            "select": lambda: Mux(c == 1, a, b),
            "iadd": lambda: a + b, "isub": lambda: a - b,
            "and": lambda: a & b, "or": lambda: a | b, "xor": lambda: a ^ b,
            "shl": lambda: a << shift, "shr": lambda: a >> shift,
            "sra": lambda: a.as_signed() >> shift,
            "bf16_to_f32": widened,
            "f32_to_i32": lambda: fp32_to_int32(m, a, n, name="to_i32"),
            "i32_to_f32": lambda: int32_to_fp32(m, a, name="to_f32"),
        }
        if {"eq", "lt", "le"} & set(ops):         # one comparator serves all three
            eq, lt, le = compare(m, a, b, n, name="cmp")
            logic |= {"eq": lambda: eq, "lt": lambda: lt, "le": lambda: le}
        values = {name: logic[name]() for name in ops if name not in cores}
        picked = Signal(32)
        with m.Switch(self.op):
            for name, value in values.items():
                with m.Case(OPS[name].opcode):
                    m.d.comb += picked.eq(value)
            with m.Default():
                m.d.comb += picked.eq(0)
        registered = Signal(32, reset_less=True)
        op = Signal(Opcode, reset_less=True)
        m.d.sync += [registered.eq(picked), op.eq(self.op)]

        with m.Switch(op):
            for name, core in cores.items():
                with m.Case(OPS[name].opcode):
                    m.d.comb += self.result.eq(core.result)
            with m.Default():
                m.d.comb += self.result.eq(registered)
        return m


class VectorALU(wiring.Component):
    """One ALU slot of the VPU: a :class:`WordALU` per word of a vreg.

    Parameters
    ----------
    words : int
        Words per vreg (``8 * lanes``).
    numerics : "tpu" or "ieee"
    ops : collection of str, optional
        The operations to build, as for :class:`WordALU`.

    Ports
    -----
    op : In(Opcode)
        The opcode, as for :class:`WordALU`.
    a, b, c : In(32 * words)
        Operand vregs, word ``i`` in bits ``32*i .. 32*i + 31``.
    result : Out(32 * words)
        ``op`` applied word by word, one cycle after the operands (latency 1,
        one vreg operation per cycle, no stalls).
    """

    def __init__(self, *, words, numerics="tpu", ops=None):
        self.words = check_int("words", words, least=1)
        self.numerics = check_numerics(numerics)
        self.ops = check_ops(ops, ALU_OPS, what="ops")
        width = 32 * words
        super().__init__({"op": In(Opcode), "a": In(width), "b": In(width),
                          "c": In(width), "result": Out(width)})

    def make_word(self):
        """One word's ALU. Export overrides this to emit the word ALU module once."""
        return WordALU(numerics=self.numerics, ops=self.ops)

    def elaborate(self, platform):
        m = Module()
        for i in range(self.words):
            word = slice(32 * i, 32 * i + 32)
            alu = self.make_word()
            m.submodules[f"word{i}"] = alu
            m.d.comb += [alu.op.eq(self.op), alu.a.eq(self.a[word]), alu.b.eq(self.b[word]),
                         alu.c.eq(self.c[word]), self.result[word].eq(alu.result)]
        return m
