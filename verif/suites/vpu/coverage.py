"""Functional coverage of the VPU (cocotb-coverage), sampled from what each program did.

A program is stepped through ``golden.vpu`` (:func:`trace`), so every sample is
of an instruction that executed, with the operand values it read. Items, named
``vpu.*``:

* ``op``: every instruction executed, by name;
* ``value.*``: op x numerics x operand class (:data:`~.stimulus.OPERAND_CLASSES`)
  for every register operation (ALU, transcendental, reduction), one sample
  per class among the words it read (``bf16_to_f32``: the low halves, as bf16);
* ``dual.*``: the unit classes of the two words of a beat that do not depend on
  each other (the second neither reads nor writes the first's destination, nor
  touches VMEM lines a store of the pair writes): the pairs the VPU may issue
  together, first x second;
* ``hazard.*``: a register read after write at distance 1 to 4 (instructions
  apart) by producer unit (``store``: a load of a line a store wrote) and by
  consumer unit, and each hazard kind (read after write, write after write,
  write after read) x distance;
* ``memory.*``: loads and stores x line stride (0, 1, more);
* ``mxu.*``: each MXU event (weights loaded while results wait, an LHS push that
  swaps the shadow tile in, one that does not, a pop);
* ``trans.<function>``: every special case of :func:`trans_cases` x numerics;
* ``error.*``: each program error x the word of its beat (first, second);
* ``run.*``: builds (lanes x numerics) and program stream gaps.
"""

import numpy as np
from cocotb_coverage.coverage import CoverCross, CoverPoint, coverage_db, coverage_section

from golden import transcendental
from golden import vpu as golden_vpu
from golden.formats import BF16, FP32, OperandClass, classify

from .stimulus import CONSUMERS, DISTANCES, ERROR_KINDS, OPERAND_CLASSES, PRODUCERS, SLOTS, \
    UNIT_CLASSES, unit_class

__all__ = ["VALUE_OPS", "TRANS_CASES", "HAZARD_KINDS", "STRIDES", "MXU_EVENTS", "trace",
           "operand_classes", "trans_cases", "sampler", "sample_program", "uncovered"]

#: Operations whose operand classes are covered: every register operation.
VALUE_OPS = (*golden_vpu.ELEMENTWISE_OPS, "rsum", "rmax", "rmin")
_COMMON_CASES = ("+zero", "-zero", "+inf", "-inf", "nan", "subnormal", "normal")
#: Special cases of each transcendental function's input (:func:`trans_cases`).
TRANS_CASES = {
    "rcp": _COMMON_CASES + ("exact", "subnormal_result", "overflow"),
    "rsqrt": _COMMON_CASES + ("negative", "exact", "hardest"),
    "exp": _COMMON_CASES + ("overflow", "subnormal_result", "zero_result", "one"),
}
HAZARD_KINDS = ("raw", "waw", "war")
STRIDES = ("zero", "one", "more")
MXU_EVENTS = ("weights_while_queued", "weights", "lhs_swap", "lhs", "lhs_acc_swap", "lhs_acc",
              "pop")
#: rsqrt's hardest input: 2**-28.5 ULP from a rounding midpoint.
RSQRT_HARDEST = 0x403A18E3

_SUBLANES = golden_vpu.SUBLANES


# ---------------------------------------------------------------- what ran

def trace(program, *, vregs, vmem, lanes, numerics, mxu):
    """Step ``golden.vpu`` through ``program`` (words); returns ``(steps, final)``.

    ``steps`` holds, per instruction that executed, ``(index, instruction,
    sources, mxu_before)``: the words it read (a list of arrays) and the MXU's
    ``(shadow rows, queued rows)`` before it (None without an MXU). ``final`` is
    the ``golden.vpu.VPUState`` at the end, the error that stopped it included.
    ``mxu`` is the MXUState to start from (updated in place), or False.
    """
    state = golden_vpu.VPUState(np.asarray(vregs, np.uint32).copy(),
                                np.asarray(vmem, np.uint32).copy(), mxu or None, 0)
    steps = []
    for index, word in enumerate(program):
        try:
            ins = golden_vpu.decode(word)
        except golden_vpu.IllegalInstruction:
            ins = None
        before = None if state.mxu is None else (len(state.mxu.shadow), len(state.mxu.results))
        sources = [] if ins is None else _sources(ins, state)
        step = golden_vpu.execute([word], vregs=state.vregs, vmem=state.vmem, lanes=lanes,
                                  numerics=numerics, mxu=state.mxu or False, on_error="stop")
        if step.error is not None:
            state = golden_vpu.VPUState(state.vregs, state.vmem, state.mxu, state.executed,
                                        index, step.error_kind)
            return steps, state
        state = golden_vpu.VPUState(step.vregs, step.vmem, step.mxu, state.executed + 1)
        steps.append((index, ins, sources, before))
    return steps, state


def _sources(ins, state):
    spec = ins.spec
    if spec.unit in ("alu", "trans", "reduce"):
        return [state.vregs[getattr(ins, f)] for f in spec.reads]
    return []


def operand_classes(op, words):
    """The :data:`~.stimulus.OPERAND_CLASSES` among the words an ``op`` reads (for
    ``bf16_to_f32`` their low halves, as bf16); ``max`` is the largest finite magnitude,
    not counted as ``normal``."""
    words = np.asarray(words, np.uint32).ravel()
    if op == "bf16_to_f32":
        fmt, bits = BF16, (words & np.uint32(0xFFFF)).astype(np.uint16)
    else:
        fmt, bits = FP32, words
    magnitude = bits & fmt.bits_dtype(fmt.sign_mask - 1)
    is_max = magnitude == fmt.bits_dtype(fmt.exp_mask - 1)
    found = {OperandClass.NAMES[int(c)] for c in np.unique(classify(bits[~is_max], fmt))}
    if is_max.any():
        found.add("max")
    return [c for c in OPERAND_CLASSES if c in found]


def trans_cases(function, words):
    """The :data:`TRANS_CASES` of ``function`` among fp32 input ``words``.

    The result-based cases (overflow, a subnormal or zero result, exactly 1) are
    judged from ``golden.transcendental`` in "ieee" numerics, so that they name the
    same inputs in both modes (where "tpu" flushes the result, the case is its
    flush).
    """
    words = np.asarray(words, np.uint32).ravel()
    mag, negative = words & np.uint32(0x7FFFFFFF), (words >> np.uint32(31)) == 1
    cls = classify(words, FP32)
    finite = (cls != OperandClass.INF) & (cls != OperandClass.NAN)
    found = {
        "+zero": np.any(words == 0), "-zero": np.any(words == 0x80000000),
        "+inf": np.any(words == 0x7F800000), "-inf": np.any(words == 0xFF800000),
        "nan": np.any(cls == OperandClass.NAN), "subnormal": np.any(cls == OperandClass.SUBNORMAL),
        "normal": np.any(cls == OperandClass.NORMAL),
    }
    normal = cls == OperandClass.NORMAL
    power_of_two = normal & ((mag & np.uint32(0x7FFFFF)) == 0)
    with np.errstate(all="ignore"):
        result = transcendental.apply(function, words, numerics="ieee")
    result_cls = classify(result, FP32)
    nonzero = finite & (cls != OperandClass.ZERO)
    if function == "rcp":
        found["exact"] = np.any(power_of_two)
        found["subnormal_result"] = np.any(result_cls == OperandClass.SUBNORMAL)
        found["overflow"] = np.any(nonzero & (result_cls == OperandClass.INF))
    elif function == "rsqrt":
        found["negative"] = np.any(negative & nonzero)
        # An even unbiased exponent: the biased one is odd.
        found["exact"] = np.any(power_of_two & ~negative & (((mag >> np.uint32(23)) & 1) == 1))
        found["hardest"] = np.any(words == RSQRT_HARDEST)
    else:
        found["overflow"] = np.any(finite & (result_cls == OperandClass.INF))
        found["subnormal_result"] = np.any(result_cls == OperandClass.SUBNORMAL)
        found["zero_result"] = np.any(finite & (result_cls == OperandClass.ZERO))
        found["one"] = np.any(nonzero & (result == 0x3F800000))
    return [case for case in TRANS_CASES[function] if found[case]]


# ---------------------------------------------------------------- static analysis

def _effects(ins, lanes):
    """(registers read, register written or None, VMEM lines read, VMEM lines written)."""
    spec = ins.spec
    reads = {getattr(ins, f) for f in spec.reads}
    written = getattr(ins, spec.writes[0]) if spec.writes else None
    lines = set()
    if spec.fmt == "m":
        lines = set(int(line) for line in ins.base + ins.stride * np.arange(_SUBLANES))
    return reads, written, lines if ins.op == "vld" else set(), lines if ins.op == "vst" \
        else set()


def _hazards(instructions, lanes):
    """``(kind, producer unit, consumer unit, distance)`` of every hazard at distance 1..4
    among ``instructions`` (those that executed, in order; None for none)."""
    found = []
    effects = [_effects(ins, lanes) for ins in instructions]
    for j, (reads, written, lines_read, _) in enumerate(effects):
        consumer = unit_class(instructions[j].op)
        for d in DISTANCES:
            i = j - d
            if i < 0:
                break
            earlier_reads, earlier_written, _, earlier_stored = effects[i]
            producer = unit_class(instructions[i].op)
            # Only the nearest writer of a register is the hazard.
            between = [effects[k][1] for k in range(i + 1, j)]
            if earlier_written is not None and earlier_written not in between:
                if earlier_written in reads:
                    found.append(("raw", producer, consumer, d))
                if written == earlier_written:
                    found.append(("waw", producer, consumer, d))
            if written is not None and written in earlier_reads:
                found.append(("war", producer, consumer, d))
            if lines_read & earlier_stored:
                found.append(("raw", "store", consumer, d))
    return found


def _independent(first, second, lanes):
    reads, written, lines_read, lines_written = _effects(first, lanes)
    reads2, written2, lines_read2, lines_written2 = _effects(second, lanes)
    if written is not None and (written in reads2 or written == written2):
        return False
    return not (lines_written & (lines_read2 | lines_written2) or lines_read & lines_written2)


def _stride(ins):
    return "zero" if ins.stride == 0 else "one" if ins.stride == 1 else "more"


# ---------------------------------------------------------------- the model

def _field(index):
    return lambda sample: sample[index]


def sampler():
    """A fresh model (after ``coverage_db.clear()``): the sampling functions, by name."""
    value_ops = list(VALUE_OPS)

    @coverage_section(CoverPoint("vpu.op", xf=lambda op: op, bins=list(golden_vpu.OPS)))
    def op(name):
        pass

    @coverage_section(
        CoverPoint("vpu.value.op", xf=_field(0), bins=value_ops),
        CoverPoint("vpu.value.numerics", xf=_field(1), bins=["tpu", "ieee"]),
        CoverPoint("vpu.value.class", xf=_field(2), bins=list(OPERAND_CLASSES)),
        CoverCross("vpu.value.op_x_numerics_x_class",
                   items=["vpu.value.op", "vpu.value.numerics", "vpu.value.class"]))
    def value(sample):
        pass

    @coverage_section(
        CoverPoint("vpu.dual.first", xf=_field(0), bins=list(UNIT_CLASSES)),
        CoverPoint("vpu.dual.second", xf=_field(1), bins=list(UNIT_CLASSES)),
        CoverCross("vpu.dual.first_x_second", items=["vpu.dual.first", "vpu.dual.second"]))
    def dual(sample):
        pass

    @coverage_section(
        CoverPoint("vpu.hazard.kind", xf=_field(0), bins=list(HAZARD_KINDS)),
        CoverPoint("vpu.hazard.distance", xf=_field(3), bins=list(DISTANCES)),
        CoverCross("vpu.hazard.kind_x_distance",
                   items=["vpu.hazard.kind", "vpu.hazard.distance"]))
    def hazard(sample):
        pass

    @coverage_section(
        CoverPoint("vpu.hazard.raw.producer", xf=_field(1), bins=list(PRODUCERS)),
        CoverPoint("vpu.hazard.raw.consumer", xf=_field(2), bins=list(CONSUMERS) + ["load"]),
        CoverPoint("vpu.hazard.raw.distance", xf=_field(3), bins=list(DISTANCES)),
        CoverCross("vpu.hazard.raw.producer_x_distance",
                   items=["vpu.hazard.raw.producer", "vpu.hazard.raw.distance"]),
        CoverCross("vpu.hazard.raw.consumer_x_distance",
                   items=["vpu.hazard.raw.consumer", "vpu.hazard.raw.distance"]))
    def raw(sample):
        pass

    @coverage_section(
        CoverPoint("vpu.memory.unit", xf=_field(0), bins=["load", "store"]),
        CoverPoint("vpu.memory.stride", xf=_field(1), bins=list(STRIDES)),
        CoverCross("vpu.memory.unit_x_stride", items=["vpu.memory.unit", "vpu.memory.stride"]))
    def memory(sample):
        pass

    @coverage_section(CoverPoint("vpu.mxu.event", xf=lambda e: e, bins=list(MXU_EVENTS)))
    def mxu(event):
        pass

    trans = {}
    for function, cases in TRANS_CASES.items():
        @coverage_section(
            CoverPoint(f"vpu.trans.{function}.case", xf=_field(0), bins=list(cases)),
            CoverPoint(f"vpu.trans.{function}.numerics", xf=_field(1), bins=["tpu", "ieee"]),
            CoverCross(f"vpu.trans.{function}.case_x_numerics",
                       items=[f"vpu.trans.{function}.case", f"vpu.trans.{function}.numerics"]))
        def sample_trans(sample):
            pass
        trans[function] = sample_trans

    @coverage_section(
        CoverPoint("vpu.error.kind", xf=_field(0), bins=list(ERROR_KINDS)),
        CoverPoint("vpu.error.slot", xf=_field(1), bins=list(SLOTS)),
        CoverCross("vpu.error.kind_x_slot", items=["vpu.error.kind", "vpu.error.slot"]))
    def error(sample):
        pass

    @coverage_section(
        CoverPoint("vpu.run.lanes", xf=_field(0), bins=[1, 8]),
        CoverPoint("vpu.run.numerics", xf=_field(1), bins=["tpu", "ieee"]),
        CoverPoint("vpu.run.gaps", xf=_field(2), bins=["none", "idle"]),
        CoverCross("vpu.run.lanes_x_numerics", items=["vpu.run.lanes", "vpu.run.numerics"]),
        CoverCross("vpu.run.lanes_x_gaps", items=["vpu.run.lanes", "vpu.run.gaps"]))
    def run(sample):
        pass

    return dict(op=op, value=value, dual=dual, hazard=hazard, raw=raw, memory=memory, mxu=mxu,
                trans=trans, error=error, run=run)


def sample_program(samplers, program, build, numerics, steps, final):
    """Sample the bins ``program`` (a :class:`~.stimulus.Program` on ``build``) reached, from
    its golden ``trace`` (``steps``, ``final``). Each distinct sample is taken once per
    program (sampling is the slow part, and a bin needs one hit)."""
    lanes = build.lanes
    samples = {name: set() for name in ("op", "value", "memory", "mxu", "hazard", "raw", "dual")}
    trans = {function: set() for function in TRANS_CASES}
    executed = [ins for _, ins, _, _ in steps]
    for (index, ins, sources, before) in steps:
        samples["op"].add(ins.op)
        if ins.op in VALUE_OPS:
            words = np.concatenate([s.ravel() for s in sources])
            samples["value"] |= {(ins.op, numerics, c) for c in operand_classes(ins.op, words)}
            if ins.op in TRANS_CASES:
                trans[ins.op] |= {(case, numerics) for case in trans_cases(ins.op, sources[0])}
        if ins.op in ("vld", "vst"):
            samples["memory"].add(("load" if ins.op == "vld" else "store", _stride(ins)))
        if before is not None and ins.spec.unit == "mxu":
            shadow, queued = before
            samples["mxu"].add({"push_weights": "weights_while_queued" if queued else "weights",
                                "push_lhs": "lhs_swap" if shadow == lanes else "lhs",
                                "push_lhs_acc": "lhs_acc_swap" if shadow == lanes else "lhs_acc",
                                "pop": "pop"}[ins.op])
    for sample in _hazards(executed, lanes):
        samples["hazard"].add(sample)
        if sample[0] == "raw":
            samples["raw"].add(sample)
    for k in range(0, len(executed) - 1, 2):      # the beats whose two words both ran
        first, second = executed[k], executed[k + 1]
        a, b = unit_class(first.op), unit_class(second.op)
        if a and b and _independent(first, second, lanes):
            samples["dual"].add((a, b))
    for name, found in samples.items():
        for sample in sorted(found, key=str):
            samplers[name](sample)
    for function, found in trans.items():
        for sample in sorted(found):
            samplers["trans"][function](sample)
    samplers["run"]((lanes, numerics, "idle" if program.idle else "none"))
    if final.error is not None:
        samplers["error"]((final.error_kind, SLOTS[final.error % 2]))


def uncovered():
    """Every bin of the current ``vpu`` model not hit yet, as ``"item: bin"``."""
    return [f"{name}: {b}" for name, item in coverage_db.items()
            if name.startswith("vpu.") and isinstance(item, (CoverPoint, CoverCross))
            for b, hits in item.detailed_coverage.items() if hits < item.at_least]
