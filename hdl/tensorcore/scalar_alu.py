"""The scalar slot's datapath: ALU results and branch conditions (``docs/isa.md``)."""

from amaranth.hdl import Mux, Signal

__all__ = ["scalar_result", "branch_taken"]

# An immediate op computes what its register form does, with ``imm`` for ``rb``.
_REGISTER_FORM = {"addi": "add", "andi": "and", "ori": "or", "xori": "xor", "slli": "sll",
                  "srli": "srl", "srai": "sra", "slti": "slt", "sltiu": "sltu"}


def _alu(op, a, b):
    shift = b[:5]
    return {
        "add": a + b, "sub": a - b, "and": a & b, "or": a | b, "xor": a ^ b,
        "sll": a << shift, "srl": a >> shift, "sra": a.as_signed() >> shift,
        "slt": a.as_signed() < b.as_signed(), "sltu": a < b,
    }[op]


def scalar_result(m, s, *, a, b, d, loaded, name):
    """The 32-bit value a scalar slot writes to ``rd`` (meaningful when ``s.writes``).

    ``s`` is a :class:`~hdl.tensorcore.isa.ScalarDecoded`; ``a``, ``b`` and ``d`` the
    values of its ``ra``, ``rb`` and ``rd`` registers as they were before the bundle;
    ``loaded`` the SMEM word of an ``lw``. Arithmetic wraps modulo 2**32; register
    shifts use ``rb mod 32``.
    """
    result = Signal(32, name=f"{name}_result")
    with m.If(s.is_op["lui"]):
        m.d.comb += result.eq(s.imm << 16)
    with m.Elif(s.load):
        m.d.comb += result.eq(loaded)
    with m.Elif(s.loop):
        m.d.comb += result.eq(d - 1)
    for op, hit in s.is_op.items():
        base = _REGISTER_FORM.get(op, op)
        if base in ("add", "sub", "and", "or", "xor", "sll", "srl", "sra", "slt", "sltu"):
            operand = b if base == op else s.imm
            with m.Elif(hit):
                m.d.comb += result.eq(_alu(base, a, operand))
    return result


def branch_taken(s, *, a, d):
    """Whether scalar slot ``s`` (slot 1) transfers control: a compare-and-branch of
    ``rd`` with ``ra`` that holds, or a ``loop`` whose decremented counter is not 0."""
    conditions = {"beq": d == a, "bne": d != a, "blt": d.as_signed() < a.as_signed(),
                  "bge": d.as_signed() >= a.as_signed(), "bltu": d < a, "bgeu": d >= a}
    taken = s.loop & (d != 1)
    for op, condition in conditions.items():
        if op in s.is_op:
            taken = taken | (s.is_op[op] & condition)
    return Mux(taken, 1, 0)
