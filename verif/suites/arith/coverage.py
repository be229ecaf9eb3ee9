"""Functional coverage of the arithmetic units (cocotb-coverage).

One model per unit and numerics mode, named ``arith.<unit>.<numerics>.*``:

* ``a_class``, ``b_class`` and their cross: zero, subnormal, normal, inf, NaN, both signs;
* ``result``: the class of the result (every NaN out is the one canonical NaN);
* ``exp_diff`` (adder): exponent difference of finite operands, 0, 1, 2-22, 23, 24, 25, 26+;
* ``significand`` (fp32 multiplier, divider, square root), the case that decides
  normalization: whether the product of the significands reaches 2, how the
  dividend's significand compares with the divisor's, the parity of the
  square root operand's exponent (finite non-zero operands);
* ``rounding``: exact, tie-even (a tie that stays), tie-odd (a tie that rounds up),
  sticky (inexact, not a tie), carry into the exponent, overflow by rounding;
* ``flush`` ("tpu" only): an operand read as zero, a result flushed to zero.

Bins a unit cannot reach are left out, so 100% is attainable and means
something: a bf16 product is exact except in the subnormal range, which
"tpu" numerics flush, so the multiplier's "tpu" rounding bins are just "exact".
A quotient of fp32 values is never within half an ulp of a power of two
unless exact or a tie, and a tie only where the result is subnormal (or
rounds up to 2^-126): the divider has no carry bin, and no tie-even bin in
"tpu". A square root is never a tie, never rounds up to a power of two,
never overflows and is never subnormal, and only sqrt(-0) is negative.
Events are classified from the operands with exact rational arithmetic and
the IEEE result before any flush.
"""

from fractions import Fraction

import numpy as np
from cocotb_coverage.coverage import CoverCross, CoverPoint, coverage_section

from golden import arith as golden
from golden.formats import BF16, FP32, OperandClass, classify, flush_subnormal, is_subnormal

__all__ = ["CLASSES", "ROUNDING", "SIGNIFICAND", "sampler", "classify_ops"]

CLASSES = [f"{sign}{name}" for name in OperandClass.NAMES for sign in "+-"]
ROUNDING = ["exact", "tie-even", "tie-odd", "sticky", "carry", "overflow"]
EXP_DIFF = ["0", "1", "2-22", "23", "24", "25", "26+"]

SIGNIFICAND = {"fp32_mul": ["below 2", "2 or more"], "fp32_div": ["a < b", "a = b", "a > b"],
               "fp32_sqrt": ["even exponent", "odd exponent"]}

_FORMATS = {"fp32_add": (FP32, FP32), "bf16_mul": (BF16, FP32), "fp32_to_bf16": (FP32, BF16),
            "fp32_mul": (FP32, FP32), "fp32_div": (FP32, FP32), "fp32_sqrt": (FP32, FP32)}


def _result_bins(unit, numerics):
    if unit == "fp32_sqrt":
        return ["+zero", "-zero", "+normal", "+inf", "nan"]
    names = ["zero", "subnormal", "normal", "inf"] if numerics == "ieee" else \
        ["zero", "normal", "inf"]
    return [f"{s}{n}" for n in names for s in "+-"] + ["nan"]


def _rounding_bins(unit, numerics):
    if unit == "bf16_mul":
        return ["exact"] if numerics == "tpu" else ROUNDING[:4]
    if unit == "fp32_div":
        return ["exact", *(["tie-even"] if numerics == "ieee" else []), "tie-odd", "sticky",
                "overflow"]
    if unit == "fp32_sqrt":
        return ["exact", "sticky"]
    return ROUNDING


def _flush_bins(unit):
    return ["none", "operand"] + ([] if unit in ("fp32_to_bf16", "fp32_sqrt") else ["result"])


def _class_names(bits, fmt):
    signs = (np.asarray(bits).astype(np.uint64) >> np.uint64(fmt.width - 1)).astype(int)
    codes = classify(bits, fmt)
    return [f"{'+-'[s]}{OperandClass.NAMES[c]}" for s, c in zip(signs, codes)]


def _value(bits, fmt):
    return Fraction(*float(np.asarray(bits, fmt.bits_dtype).view(fmt.value_dtype)
                           .astype(np.float64)).as_integer_ratio())


def _against(exact):
    """``compare`` for :func:`_rounding_event`: the sign of abs(v) - abs(exact)."""
    return lambda v: (abs(v) > abs(exact)) - (abs(v) < abs(exact))


def _against_root(square):
    """``compare`` for the square root of the Fraction ``square`` >= 0, without the root."""
    return lambda v: (v * v > square) - (v * v < square)


def _rounding_event(compare, result_bits, fmt):
    """How IEEE rounding took an exact result to the pattern ``result_bits`` (finite operands).

    ``compare(v)`` is the sign of abs(v) - abs(exact result) for a Fraction ``v``.
    """
    mag = result_bits & (fmt.sign_mask - 1)
    if mag != fmt.inf and compare(_value(result_bits, fmt)) == 0:
        return "exact"
    # Toward zero from the result is one step down in magnitude (inf steps to max finite).
    rounded_up = mag == fmt.inf or compare(_value(result_bits, fmt)) > 0
    low = result_bits - 1 if rounded_up else result_bits
    high = low + 1
    low_value = _value(low, fmt)
    high_value = _value(high, fmt) if (high & (fmt.sign_mask - 1)) != fmt.inf else None
    if high_value is not None and compare((low_value + high_value) / 2) == 0:
        return "tie-odd" if rounded_up else "tie-even"
    if rounded_up and mag == fmt.inf:
        return "overflow"
    if rounded_up and (result_bits ^ low) & fmt.exp_mask:
        return "carry"
    return "sticky"


def _compare_exact(unit, ops):
    """``compare`` for the exact result of ``unit`` on Fractions ``ops``; None if there is
    no rounding (x/0 is inf by definition, the root of a negative number is NaN)."""
    if unit == "fp32_add":
        return _against(ops[0] + ops[1])
    if unit in ("bf16_mul", "fp32_mul"):
        return _against(ops[0] * ops[1])
    if unit == "fp32_div":
        return _against(ops[0] / ops[1]) if ops[1] else None
    if unit == "fp32_sqrt":
        return _against_root(ops[0]) if ops[0] >= 0 else None
    return _against(ops[0])


def _significand_cases(unit, flushed):
    """The :data:`SIGNIFICAND` bin of each operation, None where it does not apply."""
    codes = [classify(x, FP32) for x in flushed]
    applies = np.all([(c == OperandClass.NORMAL) | (c == OperandClass.SUBNORMAL) for c in codes],
                     axis=0)
    if unit == "fp32_sqrt":
        applies &= flushed[0] < FP32.sign_mask
    # Magnitudes, with ones where the bin does not apply (float64 conversion of a
    # signalling NaN would raise), then v = m x 2^e with m in [0.5, 1), exactly.
    values = [np.where(applies, x & (FP32.sign_mask - 1), 0x3F800000).astype(np.uint32)
              .view(np.float32).astype(np.float64) for x in flushed]
    mants, exps = zip(*(np.frexp(v) for v in values))
    if unit == "fp32_mul":
        case = (mants[0] * mants[1] >= 0.5).astype(int)       # 24 x 24 bits: exact in float64
    elif unit == "fp32_div":
        case = np.sign(mants[0] - mants[1]).astype(int) + 1
    else:
        case = (exps[0] - 1) % 2
    return [SIGNIFICAND[unit][c] if ok else None for ok, c in zip(applies, case)]


def classify_ops(unit, numerics, operands, result):
    """Coverage sample tuples for ``result = unit(*operands)``, one per operation."""
    in_fmt, out_fmt = _FORMATS[unit]
    tpu = numerics == "tpu"
    flushed = [flush_subnormal(x, in_fmt) if tpu else x for x in operands]
    ieee = getattr(golden, unit)(*flushed, numerics="ieee")
    a_cls = _class_names(operands[0], in_fmt)
    b_cls = _class_names(operands[1], in_fmt) if len(operands) == 2 else [None] * len(a_cls)
    res_cls = ["nan" if c.endswith("nan") else c for c in _class_names(result, out_fmt)]
    finite = np.all([classify(x, in_fmt) <= OperandClass.NORMAL for x in flushed], axis=0)
    flush_in = np.any([is_subnormal(x, in_fmt) for x in operands], axis=0) if tpu else None
    flush_out = is_subnormal(ieee, out_fmt) if tpu else None
    if unit == "fp32_add":
        exps = [np.maximum((x >> 23) & 0xFF, 1).astype(int) for x in flushed]
        nonzero = np.all([(x & 0x7FFFFFFF) != 0 for x in flushed], axis=0)
    sig = _significand_cases(unit, flushed) if unit in SIGNIFICAND else [None] * len(a_cls)
    samples = []
    for i in range(len(a_cls)):
        rounding = diff = flush = None
        if finite[i] and not (tpu and flush_out[i]):
            compare = _compare_exact(unit, [_value(x[i], in_fmt) for x in flushed])
            if compare is not None:
                rounding = _rounding_event(compare, int(ieee[i]), out_fmt)
        if unit == "fp32_add" and finite[i] and nonzero[i]:
            d = abs(int(exps[0][i]) - int(exps[1][i]))
            diff = str(d) if d in (0, 1, 23, 24, 25) else "2-22" if d < 23 else "26+"
        if tpu:
            flush = "result" if flush_out[i] else "operand" if flush_in[i] else "none"
        samples.append((a_cls[i], b_cls[i], res_cls[i], diff, rounding, flush, sig[i]))
    return samples


def sampler(unit, numerics):
    """A coverage model for ``unit`` in ``numerics``; returns its sampling function.

    Call it with a tuple from :func:`classify_ops`. Building it twice in one
    process reuses the same coverage items (cocotb-coverage keys them by name).
    """
    name = f"arith.{unit}.{numerics}"
    items = [CoverPoint(f"{name}.a_class", xf=lambda s: s[0], bins=CLASSES)]
    if unit not in ("fp32_to_bf16", "fp32_sqrt"):
        items += [CoverPoint(f"{name}.b_class", xf=lambda s: s[1], bins=CLASSES),
                  CoverCross(f"{name}.a_x_b", items=[f"{name}.a_class", f"{name}.b_class"])]
    items.append(CoverPoint(f"{name}.result", xf=lambda s: s[2],
                            bins=_result_bins(unit, numerics)))
    if unit == "fp32_add":
        items.append(CoverPoint(f"{name}.exp_diff", xf=lambda s: s[3], bins=EXP_DIFF))
    if unit in SIGNIFICAND:
        items.append(CoverPoint(f"{name}.significand", xf=lambda s: s[6],
                                bins=SIGNIFICAND[unit]))
    items.append(CoverPoint(f"{name}.rounding", xf=lambda s: s[4],
                            bins=_rounding_bins(unit, numerics)))
    if numerics == "tpu":
        items.append(CoverPoint(f"{name}.flush", xf=lambda s: s[5], bins=_flush_bins(unit)))

    @coverage_section(*items)
    def sample(sample_tuple):
        pass
    return sample
