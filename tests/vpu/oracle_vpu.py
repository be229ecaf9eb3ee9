"""Independent oracle for the VPU's elementwise operations: SoftFloat and plain integers.

One element at a time, no numpy and nothing from ``golden``. The "tpu"
rules (flush subnormal operands and results, canonical NaN) are restated
on integers, as in ``tests/oracle.py``, whose fp32 add and fp32 -> bf16
are reused. rcp uses SoftFloat's correctly rounded division, rsqrt MPFR,
and exp (faithful, not correctly rounded) the hardware's documented
algorithm restated on integers (:mod:`.oracle_transcendental`).
"""

import softfloatpy as sf

from .. import oracle as base
from . import oracle_transcendental as transcendental

QNAN, SIGN, MASK = 0x7FC00000, 0x80000000, 0xFFFFFFFF
_ONE = 0x3F800000


def _f32(bits):
    return sf.Float32.from_bytes(int(bits).to_bytes(4, "big"))


def _bits(value):
    return int.from_bytes(value.to_bytes(), "big")


def _is_nan(bits):
    return bits & 0x7F800000 == 0x7F800000 and bits & 0x7FFFFF != 0


def _flush(bits):
    return bits & SIGN if bits & 0x7F800000 == 0 else bits


def _in(bits, numerics):
    return _flush(bits) if numerics == "tpu" else bits


def _out(bits, numerics):
    if _is_nan(bits):
        return QNAN
    return _flush(bits) if numerics == "tpu" else bits


def _signed(bits):
    return bits - (1 << 32) if bits & SIGN else bits


def _arith(fn):
    def apply(a, b, numerics):
        return _out(_bits(fn(_f32(_in(a, numerics)), _f32(_in(b, numerics)))), numerics)
    return apply


def _extremum(want_max):
    def apply(a, b, numerics):
        a, b = _in(a, numerics), _in(b, numerics)
        if _is_nan(a) or _is_nan(b):
            return QNAN
        if (a | b) & 0x7FFFFFFF == 0:            # two zeros: -0 < +0
            both_negative = a & b & SIGN
            either_negative = (a | b) & SIGN
            return (both_negative if want_max else either_negative) and SIGN
        a_less = sf.f32_lt(_f32(a), _f32(b))
        return (b if a_less else a) if want_max else (a if a_less else b)
    return apply


def _compare(fn):
    def apply(a, b, numerics):
        return int(bool(fn(_f32(_in(a, numerics)), _f32(_in(b, numerics)))))
    return apply


def _bf16_to_f32(a, numerics):
    a &= 0xFFFF
    if numerics == "tpu" and a & 0x7F80 == 0:
        a &= 0x8000
    widened = _bits(sf.bf16_to_f32(sf.BFloat16.from_bytes(a.to_bytes(2, "big"))))
    return QNAN if _is_nan(widened) else widened


def _f32_to_i32(a, numerics):
    a = _in(a, numerics)
    if _is_nan(a):
        return 0
    # SoftFloat saturates out-of-range values to INT32_MAX / INT32_MIN.
    return sf.f32_to_i32(_f32(a), sf.RoundingMode.NEAR_EVEN, False).to_int() & MASK


def _i32_to_f32(a, numerics):
    return _bits(sf.i32_to_f32(sf.Int32.from_int(_signed(a))))


def _rcp(a, numerics):
    return _out(_bits(sf.f32_div(_f32(_ONE), _f32(_in(a, numerics)))), numerics)


BINARY = {
    "add": lambda a, b, n: base.fp32_add(a, b, n),
    "sub": _arith(sf.f32_sub),
    "mul": _arith(sf.f32_mul),
    "max": _extremum(True),
    "min": _extremum(False),
    "eq": _compare(sf.f32_eq),
    "lt": _compare(sf.f32_lt_quiet),
    "le": _compare(sf.f32_le_quiet),
    "iadd": lambda a, b, n: (a + b) & MASK,
    "isub": lambda a, b, n: (a - b) & MASK,
    "and": lambda a, b, n: a & b,
    "or": lambda a, b, n: a | b,
    "xor": lambda a, b, n: a ^ b,
    "shl": lambda a, b, n: (a << (b % 32)) & MASK,
    "shr": lambda a, b, n: a >> (b % 32),
    "sra": lambda a, b, n: (_signed(a) >> (b % 32)) & MASK,
}
UNARY = {
    "f32_to_bf16": lambda a, n: base.fp32_to_bf16(a, n),
    "bf16_to_f32": _bf16_to_f32,
    "f32_to_i32": _f32_to_i32,
    "i32_to_f32": _i32_to_f32,
    "rcp": _rcp,
    "rsqrt": transcendental.MPFR["rsqrt"],
    "exp": transcendental.ALGORITHM["exp"],
}


def select(a, b, c, numerics):
    return a if c == 1 else b


def elementwise(op, numerics, *operands):
    """``op`` over equal-length integer sequences; returns a list of ints."""
    if op == "select":
        fn = select
    else:
        fn = BINARY.get(op) or UNARY[op]
    return [fn(*(int(x) for x in ops), numerics) for ops in zip(*operands)]


def reduce(op, rows, numerics):
    """Fold each row left to right with ``add``, ``max`` or ``min``."""
    fn = BINARY[{"sum": "add", "max": "max", "min": "min"}[op]]
    out = []
    for row in rows:
        acc = int(row[0])
        for x in row[1:]:
            acc = fn(acc, int(x), numerics)
        out.append(acc)
    return out
