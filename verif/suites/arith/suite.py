"""Regression suite ``arith``: every arithmetic unit, both numerics, one seed at a time.

A seed runs each unit in each mode once: the named corner cases, a random
sample of the TestFloat-style corpus, every pairing of operand classes, for
the fp32 multiplier, divider and square root generated rounding cases, and
constrained-random operands go through the RTL with seeded random
valid/ready gaps; a streaming scoreboard checks every result against golden
as it arrives, and the results are sampled into the functional coverage
model.
"""

import functools

import numpy as np
from cocotb_coverage.coverage import coverage_db

from golden import arith as golden
from golden.formats import BF16, FP32, NUMERICS, OperandClass, classify
from sim.arith import UNITS
from sim.transactors import run_transactors

from . import corpus
from ...agents import Driver, Monitor
from .coverage import classify_ops, sampler
from ...scoreboard import Scoreboard

__all__ = ["CASES", "COUNTS", "seed_operands", "check_unit"]

#: What one seed runs: (block, numerics) pairs. The transcendental units (no
#: ``golden.arith`` model) have their own exhaustive suite instead.
CASES = [(unit, numerics) for unit in UNITS if hasattr(golden, unit) for numerics in NUMERICS]

#: The format of each operand of each unit, for ``--inject starve-nan``.
_OPERAND_FORMATS = {"fp32_add": (FP32, FP32), "bf16_mul": (BF16, BF16),
                    "fp32_to_bf16": (FP32,), "fp32_mul": (FP32, FP32),
                    "fp32_div": (FP32, FP32), "fp32_sqrt": (FP32,)}

GAPS = (0.0, 0.1, 0.5)          # idle/stall probabilities a seed picks from

#: Generated rounding cases per family a seed adds (fp32 multiplier, divider, square root).
N_ROUNDING = 30

#: (corpus, random) operations a seed runs of each unit. The fp32 multiplier,
#: divider and square root are slower to simulate (the divider about twice the
#: adder a cycle), and their generated rounding cases already reach every
#: coverage bin, so they run half as many to keep a seed short (the default
#: test suite runs two).
COUNTS = {"fp32_mul": (500, 500), "fp32_div": (500, 500), "fp32_sqrt": (500, 500)}
DEFAULT_COUNTS = (1000, 1000)


def seed_operands(unit, rng, *, n_corpus, n_random, n_rounding=N_ROUNDING):
    """The named cases, every class pairing, ``n_corpus`` corpus operations, for the
    units that have them ``n_rounding`` of each family of generated rounding cases
    (:func:`.corpus.rounding_cases`), and ``n_random`` random ones."""
    named = len([c for c in corpus.NAMED_CASES.values() if c[0] == unit])
    rounding = unit in corpus.ROUNDING_OPS
    if unit in corpus.UNARY_OPS:
        pool = corpus.unary_corpus(unit, rng, 0)
        pick = np.concatenate([np.arange(named),
                               rng.choice(np.arange(named, pool.size), n_corpus)])
        classes, _ = corpus.class_cross(rng, corpus.FP32)
        generated = list(corpus.rounding_cases(unit, rng, n_rounding)) if rounding else []
        return (np.concatenate([pool[pick], classes, *generated,
                                corpus.random_values(rng, corpus.FP32, n_random)]),)
    fmt = corpus.BINARY_OPS[unit]
    a, b = corpus.binary_corpus(unit, rng, n_random)
    body = rng.choice(np.arange(named, a.size - n_random), n_corpus)
    pick = np.concatenate([np.arange(named), body, np.arange(a.size - n_random, a.size)])
    parts = [(a[pick], b[pick]), corpus.class_cross(rng, fmt)]
    if rounding:
        parts.append(corpus.rounding_cases(unit, rng, n_rounding))
    return tuple(np.concatenate([part[i] for part in parts]) for i in (0, 1))


def _expected(unit, numerics, operands, inject):
    if inject == "golden-no-flush":     # a deliberately broken golden model
        numerics = "ieee"
    return getattr(golden, unit)(*operands, numerics=numerics)


async def check_unit(bench, *, unit, numerics, seed, n_corpus=1000, n_random=1000,
                     coverage=None, inject=None):
    """Test program: run one unit for one seed; returns a summary dict.

    ``coverage`` is a path to export the functional coverage to (XML).
    """
    rng = np.random.default_rng([seed, CASES.index((unit, numerics))])
    operands = seed_operands(unit, rng, n_corpus=n_corpus, n_random=n_random)
    if inject == "starve-nan":          # a coverage hole on purpose: no NaN operand
        keep = np.all([classify(x, fmt) != OperandClass.NAN
                       for x, fmt in zip(operands, _OPERAND_FORMATS[unit])], axis=0)
        operands = tuple(x[keep] for x in operands)
    info = UNITS[unit]
    beats = info.pack(operands)
    board = Scoreboard(f"{unit}/{numerics}", _expected(unit, numerics, operands, inject),
                       dict(zip("ab", operands)))
    idle, stall = rng.choice(GAPS), rng.choice(GAPS)
    driver = Driver("operands", beats, rng=rng, idle=idle)
    monitor = Monitor("result", len(beats), rng=rng, stall=stall,
                      on_beat=lambda index, payload, _cycle: board.check(index, payload))
    await run_transactors(bench, [driver, monitor])
    if coverage is not None:
        coverage_db.clear()
        sample = sampler(unit, numerics)
        results = np.array(monitor.beats, dtype=info.result)
        for sample_tuple in classify_ops(unit, numerics, operands, results):
            sample(sample_tuple)
        coverage_db.export_to_xml(str(coverage))
    return {"case": f"{unit}/{numerics}", "checked": board.checked,
            "mismatches": board.mismatches, "first_mismatch": board.first_mismatch,
            "cycles": bench.cycles, "idle": float(idle), "stall": float(stall)}


def runs(seed, *, inject=None):
    """The simulator runs of one seed: (block, params, program factory) per case."""
    for unit, numerics in CASES:
        n_corpus, n_random = COUNTS.get(unit, DEFAULT_COUNTS)
        yield unit, {"numerics": numerics}, f"{unit}-{numerics}", functools.partial(
            check_unit, unit=unit, numerics=numerics, seed=seed, inject=inject,
            n_corpus=n_corpus, n_random=n_random)

#: The broken golden model ``--inject`` can switch on in this suite.
GOLDEN_INJECTION = "golden-no-flush"
#: Stimulus taken away by ``--inject`` (a known coverage hole, to test the reports).
STIMULUS_INJECTIONS = ("starve-nan",)
