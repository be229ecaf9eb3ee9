"""Functional coverage of the SparseCore tile (cocotb-coverage).

Items, named ``sparsecore.*``, sampled from the stimulus of every run:

* ``run.*``, per run that must produce a result: ``numerics``, ``operation``
  (:data:`~.stimulus.OPERATIONS`: each combiner weighted or not, SGD, Adagrad
  from the initial or from given accumulators), ``chunks`` (8-word chunks per
  row), ``width`` (a full row or one padded to the chunks), ``jitter`` (HBM
  latency jitter or fixed), ``gaps`` (idle input and stalled output cycles,
  or none) and ``distribution`` of the ids; crosses numerics x operation,
  operation x gaps, operation x distribution, and each pair of numerics,
  chunks, jitter (the builds) and chunks x width.
* ``bag.*``: each bag kind (:data:`~.stimulus.BAG_KINDS`) under each operation.
* ``update.*``: each learning-rate class under each update.
* ``value.*``: each special fp32 kind (+0, -0, subnormal, inf, NaN) in each
  operand a run reads (the table rows named, the weights of a weighted
  lookup, the gradients of non-empty bags, given accumulators), crossed with
  the operand and with numerics.
* ``error.*``, per run that must stop on an out-of-range id: the first bad
  id's kind (:data:`~.stimulus.BAD_IDS`) x lookup or update, and where it is
  x one or several.
"""

import numpy as np
from cocotb_coverage.coverage import CoverCross, CoverPoint, coverage_db, coverage_section

from golden.formats import FP32, OperandClass, classify

from .stimulus import BAD_IDS, BAG_KINDS, DISTRIBUTIONS, LEARNING_RATES, OPERATIONS, UPDATES

__all__ = ["VALUE_KINDS", "OPERANDS", "value_kinds", "sampler", "uncovered"]

VALUE_KINDS = ["zero", "neg_zero", "subnormal", "inf", "nan"]
OPERANDS = ["table", "weight", "grad", "state"]
_KIND_OF_CLASS = {OperandClass.SUBNORMAL: "subnormal", OperandClass.INF: "inf",
                  OperandClass.NAN: "nan"}


def value_kinds(bits):
    """The :data:`VALUE_KINDS` among fp32 patterns ``bits``, in that order."""
    bits = np.asarray(bits, np.uint32).ravel()
    codes = classify(bits, FP32)
    found = {_KIND_OF_CLASS[int(c)] for c in np.unique(codes) if int(c) in _KIND_OF_CLASS}
    found |= {"zero"} if np.any(bits == 0) else set()
    found |= {"neg_zero"} if np.any(bits == 0x80000000) else set()
    return [kind for kind in VALUE_KINDS if kind in found]


def _field(index):
    return lambda sample: sample[index]


def sampler():
    """A fresh model (after ``coverage_db.clear()``); returns (sample_run, sample_bag,
    sample_update, sample_value, sample_error).

    ``sample_run((numerics, operation, chunks, width, jitter, gaps, distribution))`` per run
    with a result; ``sample_bag((operation, kind))`` per bag of it;
    ``sample_update((operation, lr))`` per update with a result;
    ``sample_value((numerics, operand, kind))`` per special kind an operand holds;
    ``sample_error((kind, family, place, count))`` per run that must stop on a bad id.
    """
    run = "sparsecore.run"
    run_items = [("numerics", ["tpu", "ieee"]), ("operation", list(OPERATIONS)),
                 ("chunks", [1, 2]), ("width", ["full", "padded"]),
                 ("jitter", ["fixed", "jitter"]), ("gaps", ["none", "gaps"]),
                 ("distribution", list(DISTRIBUTIONS))]
    crosses = [("numerics", "operation"), ("operation", "gaps"), ("operation", "distribution"),
               ("numerics", "chunks"), ("numerics", "jitter"), ("chunks", "jitter"),
               ("chunks", "width")]

    @coverage_section(
        *(CoverPoint(f"{run}.{name}", xf=_field(i), bins=bins)
          for i, (name, bins) in enumerate(run_items)),
        *(CoverCross(f"{run}.{a}_x_{b}", items=[f"{run}.{a}", f"{run}.{b}"]) for a, b in crosses))
    def sample_run(sample):
        pass

    @coverage_section(
        CoverPoint("sparsecore.bag.operation", xf=_field(0), bins=list(OPERATIONS)),
        CoverPoint("sparsecore.bag.kind", xf=_field(1), bins=list(BAG_KINDS)),
        CoverCross("sparsecore.bag.kind_x_operation",
                   items=["sparsecore.bag.kind", "sparsecore.bag.operation"]))
    def sample_bag(sample):
        pass

    @coverage_section(
        CoverPoint("sparsecore.update.operation", xf=_field(0), bins=list(UPDATES)),
        CoverPoint("sparsecore.update.lr", xf=_field(1), bins=list(LEARNING_RATES)),
        CoverCross("sparsecore.update.lr_x_operation",
                   items=["sparsecore.update.lr", "sparsecore.update.operation"]))
    def sample_update(sample):
        pass

    @coverage_section(
        CoverPoint("sparsecore.value.numerics", xf=_field(0), bins=["tpu", "ieee"]),
        CoverPoint("sparsecore.value.operand", xf=_field(1), bins=OPERANDS),
        CoverPoint("sparsecore.value.kind", xf=_field(2), bins=VALUE_KINDS),
        CoverCross("sparsecore.value.kind_x_operand",
                   items=["sparsecore.value.kind", "sparsecore.value.operand"]),
        CoverCross("sparsecore.value.kind_x_numerics",
                   items=["sparsecore.value.kind", "sparsecore.value.numerics"]))
    def sample_value(sample):
        pass

    @coverage_section(
        CoverPoint("sparsecore.error.kind", xf=_field(0), bins=list(BAD_IDS)),
        CoverPoint("sparsecore.error.family", xf=_field(1), bins=["lookup", "update"]),
        CoverPoint("sparsecore.error.place", xf=_field(2), bins=["first", "inside", "last"]),
        CoverPoint("sparsecore.error.count", xf=_field(3), bins=["one", "several"]),
        CoverCross("sparsecore.error.kind_x_family",
                   items=["sparsecore.error.kind", "sparsecore.error.family"]),
        # The last position has nothing after it.
        CoverCross("sparsecore.error.place_x_count",
                   items=["sparsecore.error.place", "sparsecore.error.count"],
                   ign_bins=[("last", "several")]))
    def sample_error(sample):
        pass

    return sample_run, sample_bag, sample_update, sample_value, sample_error


def uncovered():
    """Every bin of the current ``sparsecore`` model not hit yet, as ``"item: bin"``."""
    return [f"{name}: {b}" for name, item in coverage_db.items()
            if name.startswith("sparsecore.") and isinstance(item, (CoverPoint, CoverCross))
            for b, hits in item.detailed_coverage.items() if hits < item.at_least]
