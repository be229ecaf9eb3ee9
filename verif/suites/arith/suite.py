"""Regression suite ``arith``: every arithmetic unit, both numerics, one seed at a time.

A seed runs each unit in each mode once: the named corner cases, a random
sample of the TestFloat-style corpus and constrained-random operands go
through the RTL with seeded random valid/ready gaps; a streaming scoreboard
checks every result against golden as it arrives, and the results are
sampled into the functional coverage model.
"""

import functools

import numpy as np
from cocotb_coverage.coverage import coverage_db

from golden import arith as golden
from golden.formats import NUMERICS
from sim.arith import UNITS
from sim.transactors import run_transactors

from . import corpus
from ...agents import Driver, Monitor
from .coverage import classify_ops, sampler
from ...scoreboard import Scoreboard

__all__ = ["CASES", "seed_operands", "check_unit"]

#: What one seed runs: (block, numerics) pairs.
CASES = [(unit, numerics) for unit in UNITS for numerics in NUMERICS]

GAPS = (0.0, 0.1, 0.5)          # idle/stall probabilities a seed picks from


def seed_operands(unit, rng, *, n_corpus, n_random):
    """The named cases, every class pairing, ``n_corpus`` corpus operations and
    ``n_random`` random ones."""
    named = len([c for c in corpus.NAMED_CASES.values() if c[0] == unit])
    if unit == "fp32_to_bf16":
        pool = corpus.unary_corpus(unit, rng, 0)
        pick = np.concatenate([np.arange(named),
                               rng.choice(np.arange(named, pool.size), n_corpus)])
        classes, _ = corpus.class_cross(rng, corpus.FP32)
        return (np.concatenate([pool[pick], classes,
                                corpus.random_values(rng, corpus.FP32, n_random)]),)
    fmt = corpus.FP32 if unit == "fp32_add" else corpus.BF16
    a, b = corpus.binary_corpus(unit, rng, n_random)
    body = rng.choice(np.arange(named, a.size - n_random), n_corpus)
    pick = np.concatenate([np.arange(named), body, np.arange(a.size - n_random, a.size)])
    cross_a, cross_b = corpus.class_cross(rng, fmt)
    return np.concatenate([a[pick], cross_a]), np.concatenate([b[pick], cross_b])


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
        yield unit, {"numerics": numerics}, f"{unit}-{numerics}", functools.partial(
            check_unit, unit=unit, numerics=numerics, seed=seed, inject=inject)
