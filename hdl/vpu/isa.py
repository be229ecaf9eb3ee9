"""The vector instruction encoding as the RTL decodes it.

``golden.vpu`` defines the encoding (SPEC section 4.2); ``hdl`` does not import
``golden``, so the few facts the decoder needs are restated here, and
``tests/vpu/test_vpu_rtl.py`` checks them against ``golden.vpu.OPS`` and
``golden.vpu.FIELDS`` entry by entry.
"""

from dataclasses import dataclass

from amaranth.hdl import Mux, Signal
from amaranth.lib import enum

from ..lib.logic import any_of

__all__ = ["Opcode", "OPS", "UNITS", "FIELD_BITS", "OPCODE_BITS", "Decoded", "decode",
           "pushes_lhs", "check_ops"]

#: Bit fields: name -> (lowest bit, width).
FIELD_BITS = {
    "opcode": (26, 6),
    "vd": (21, 5), "va": (16, 5), "vb": (11, 5), "vc": (6, 5),
    "vr": (21, 5), "base": (5, 16), "stride": (0, 5),
}
OPCODE_BITS = FIELD_BITS["opcode"][1]


class Opcode(enum.IntEnum, shape=OPCODE_BITS):
    """The opcode field of a vector instruction: the shape of the ALU's ``op`` port.

    ``golden.vpu.OPS`` assigns the codes; they are restated here (``hdl`` does not import
    ``golden``) and held equal by ``tests/vpu/test_vpu_rtl.py``. An ``IntEnum``, because
    the decoder compares the opcode bits of a raw instruction word with it.
    """
    #: No instruction has opcode 0, so zeroed memory never executes; the member is the
    #: reset value of an ``op`` port, and decodes as illegal.
    UNASSIGNED = 0
    NOP = 1
    ADD = 2
    SUB = 3
    MUL = 4
    MAX = 5
    MIN = 6
    EQ = 7
    LT = 8
    LE = 9
    SELECT = 10
    IADD = 11
    ISUB = 12
    AND = 13
    OR = 14
    XOR = 15
    SHL = 16
    SHR = 17
    SRA = 18
    F32_TO_BF16 = 19
    BF16_TO_F32 = 20
    F32_TO_I32 = 21
    I32_TO_F32 = 22
    RCP = 23
    RSQRT = 24
    EXP = 25
    RSUM = 26
    RMAX = 27
    RMIN = 28
    VLD = 29
    VST = 30
    PUSH_WEIGHTS = 31
    PUSH_LHS = 32
    POP = 33
    PUSH_LHS_ACC = 34


_BINARY = ("vd", "va", "vb")
_UNARY = ("vd", "va")


@dataclass(frozen=True)
class Op:
    """One instruction: its name, opcode, the unit that runs it, and its fields."""
    name: str
    opcode: Opcode
    unit: str
    fields: tuple


def _table():
    rows = [("nop", "none", ())]
    rows += [(op, "alu", _BINARY) for op in ("add", "sub", "mul", "max", "min", "eq", "lt", "le")]
    rows += [("select", "alu", ("vd", "va", "vb", "vc"))]
    rows += [(op, "alu", _BINARY) for op in
             ("iadd", "isub", "and", "or", "xor", "shl", "shr", "sra")]
    rows += [(op, "alu", _UNARY) for op in
             ("f32_to_bf16", "bf16_to_f32", "f32_to_i32", "i32_to_f32")]
    rows += [(op, "trans", _UNARY) for op in ("rcp", "rsqrt", "exp")]
    rows += [(op, "reduce", _UNARY) for op in ("rsum", "rmax", "rmin")]
    rows += [("vld", "load", ("vr", "base", "stride")), ("vst", "store", ("vr", "base", "stride")),
             ("push_weights", "mxu", ("va",)), ("push_lhs", "mxu", ("va",)),
             ("pop", "pop", ("vd",)), ("push_lhs_acc", "mxu", ("va", "vb"))]
    return {name: Op(name, Opcode[name.upper()], unit, fields) for name, unit, fields in rows}


#: Every instruction by name.
OPS = _table()
#: The units, in the order of :attr:`Decoded.unit`'s one-hot bits.
UNITS = ("alu", "trans", "reduce", "load", "store", "mxu", "pop", "none")


def check_ops(ops, allowed, *, what):
    """``ops`` as a tuple in ``allowed``'s order; ``None`` means all of ``allowed``."""
    if ops is None:
        return tuple(allowed)
    if isinstance(ops, str) or not all(isinstance(op, str) for op in ops):
        raise TypeError(f"{what} must be a collection of operation names, not {ops!r}")
    unknown = sorted(set(ops) - set(allowed))
    if unknown:
        raise ValueError(f"{what} has unknown operations {', '.join(unknown)}; "
                         f"known: {' '.join(allowed)}")
    return tuple(op for op in allowed if op in ops)


def _field(word, name):
    low, width = FIELD_BITS[name]
    return word[low:low + width]


@dataclass(frozen=True)
class Decoded:
    """Decoder outputs for one word (see :func:`decode`).

    ``is_op[name]`` is 1 when the word is that instruction (legal or not);
    ``unit[u]`` says which unit runs it; ``reads_a/b/c`` and ``writes`` say
    which register fields it uses (``a`` is ``va``, or ``vr`` for a store);
    ``src_a``, ``src_b``, ``src_c`` and ``dest`` are those register numbers.
    """
    legal: Signal
    is_op: dict
    unit: dict
    reads_a: Signal
    reads_b: Signal
    reads_c: Signal
    writes: Signal
    src_a: Signal
    src_b: Signal
    src_c: Signal
    dest: Signal
    base: Signal
    stride: Signal


def decode(m, word, *, name):
    """Decode a 32-bit ``word`` with combinational logic in ``m``.

    A word is legal when its opcode is assigned and every field the
    instruction does not use is zero, exactly as ``golden.vpu.decode``.
    """
    # A signal of the enum's shape, so a waveform shows the opcode by name.
    opcode = Signal(Opcode, name=f"{name}_opcode")
    m.d.comb += opcode.eq(_field(word, "opcode"))
    is_op = {op.name: Signal(name=f"{name}_is_{op.name}") for op in OPS.values()}
    m.d.comb += [is_op[op.name].eq(opcode == op.opcode) for op in OPS.values()]
    unit = {u: Signal(name=f"{name}_unit_{u}") for u in UNITS}
    for u in UNITS:
        members = [is_op[op.name] for op in OPS.values() if op.unit == u]
        m.d.comb += unit[u].eq(any_of(members))
    legal = Signal(name=f"{name}_legal")
    terms = []
    for op in OPS.values():
        used = 0
        for field in op.fields:
            low, width = FIELD_BITS[field]
            used |= ((1 << width) - 1) << low
        stray = ((1 << FIELD_BITS["opcode"][0]) - 1) & ~used
        terms.append(is_op[op.name] & ~(word & stray).any())
    m.d.comb += legal.eq(any_of(terms))

    def uses(field, *, exclude=()):
        return any_of([is_op[op.name] for op in OPS.values()
                       if field in op.fields and op.name not in exclude])

    reads = {n: Signal(name=f"{name}_reads_{n}") for n in "abc"}
    writes = Signal(name=f"{name}_writes")
    m.d.comb += [
        reads["a"].eq(uses("va") | is_op["vst"]),
        reads["b"].eq(uses("vb")),
        reads["c"].eq(uses("vc")),
        writes.eq(uses("vd") | is_op["vld"]),
    ]
    src_a = Signal(5, name=f"{name}_src_a")
    m.d.comb += src_a.eq(Mux(is_op["vst"], _field(word, "vr"), _field(word, "va")))
    return Decoded(legal=legal, is_op=is_op, unit=unit, reads_a=reads["a"], reads_b=reads["b"],
                   reads_c=reads["c"], writes=writes, src_a=src_a, src_b=_field(word, "vb"),
                   src_c=_field(word, "vc"), dest=_field(word, "vd"), base=_field(word, "base"),
                   stride=_field(word, "stride"))


def pushes_lhs(decoded):
    """``push_lhs`` or ``push_lhs_acc``: the word queues 8 MXU result rows."""
    return decoded.is_op["push_lhs"] | decoded.is_op["push_lhs_acc"]
