"""Regression suite ``mxu``: random matmul scenarios on a 4x4 MXU, both numerics.

A scenario is a random shape (K and N smaller than, equal to, a multiple
of, or ragged against the array), optionally transposed weight loads, an
optional user ``acc``, a special-value density and a backpressure pattern.
A seed runs a few scenarios back to back on one MXU per numerics mode; each
is scored against golden and sampled into the MXU coverage model.
"""

import functools
from dataclasses import dataclass

import numpy as np
from cocotb_coverage.coverage import coverage_db

from golden import mxu as golden_mxu
from golden.formats import NUMERICS
from sim.blocks import block_params
from sim.mxu import plan_matmul, stream_matmul

from ...agents import Driver, Monitor
from .coverage import sampler, special_samples, tiling
from .scenarios import bf16_matrix, fp32_matrix
from ...scoreboard import Scoreboard

__all__ = ["ROWS", "COLS", "Scenario", "seed_scenarios", "check_scenarios", "runs"]

ROWS = COLS = 4
SCENARIOS_PER_RUN = 3
FIFO_DEPTH = block_params("mxu")["fifo_depth"]    # the suite runs the default MXU


@dataclass(frozen=True)
class Scenario:
    m: int
    k: int
    n: int
    transpose: bool
    acc: bool
    special_density: float
    idle: float
    stall: float


TILINGS = ("smaller", "equal", "multiple", "ragged")
# K tiling and a user acc are dealt as pairs: the acc bins cross "user acc"
# with "several K-tiles" (chained), so the first four cards cover every K
# bin and every acc bin at once.
_K_AND_ACC = (("smaller", False), ("equal", True), ("multiple", True), ("ragged", False),
              ("equal", False), ("ragged", True))


def _size(rng, tile, kind):
    """A size of tiling ``kind`` against ``tile`` (see :func:`~.coverage.tiling`)."""
    if kind == "smaller" and tile > 1:
        return int(rng.integers(1, tile))
    if kind == "multiple":
        return tile * int(rng.integers(2, 4))
    if kind == "ragged" and tile > 1:
        return tile * int(rng.integers(1, 3)) + int(rng.integers(1, tile))
    return tile


def seed_scenarios(seed, count, rows=ROWS, cols=COLS):
    """The ``count`` scenarios of each numerics mode of one seed, stratified over the bins.

    Drawing each choice independently leaves rare combinations (a short K
    with a user ``acc``, a long stall on a long result stream) to luck, and
    a regression needs seeds to find them. Here every seed deals each bin of
    K tiling, N tiling, acc source, backpressure and LHS gaps over its
    scenarios from shuffled decks, so one seed covers the scenario bins.
    """
    rng = np.random.default_rng([seed, 0x5CE7])
    total = count * len(NUMERICS)

    def deck(values):
        cards = [values[i % len(values)] for i in range(total)]
        return [cards[i] for i in rng.permutation(total)]

    k_deck = deck(_K_AND_ACC)
    n_deck, stall_deck = deck(TILINGS), deck((0.0, 0.3, 0.95))
    idle_deck, density_deck = deck((0.0, 0.5)), deck((0.05, 0.5, 0.2))
    scenarios = []
    # Tiles enter back to back only with no LHS gaps, no result backpressure, several
    # tiles and enough rows per tile to hide the next weight load: the scenario with
    # the first "multiple" N card gets all of that (its stall card swapped for a 0).
    stream_at = n_deck.index("multiple")
    calm = next(j for j in range(total) if stall_deck[j] == 0.0)
    stall_deck[stream_at], stall_deck[calm] = stall_deck[calm], stall_deck[stream_at]
    for j in range(total):
        (k_kind, use_acc), stall = k_deck[j], stall_deck[j]
        streaming = j == stream_at
        idle = 0.0 if streaming else idle_deck[j]
        scenarios.append(Scenario(
            # Backpressure only shows behind a long result stream.
            m=int(rng.integers(4 * (rows + cols) + 8 * rows, 40 + 8 * rows) if streaming
                  else rng.integers(16, 40) if stall > 0 or rng.random() < 0.5
                  else rng.integers(1, 6)),
            k=_size(rng, rows, k_kind), n=_size(rng, cols, n_deck[j]),
            transpose=bool(rows == cols and j % 2), acc=use_acc,
            special_density=density_deck[j], idle=idle, stall=stall))
    return [scenarios[i * count:(i + 1) * count] for i in range(len(NUMERICS))]


def _swap_kind(plan, lhs_cycles):
    """Whether each tile after the first entered right behind the one before it."""
    m = plan.shape[0]
    starts = range(m, len(plan.lhs_beats), m)
    kinds = {"back-to-back" if lhs_cycles[i] - lhs_cycles[i - 1] == 1 else "after-bubble"
             for i in starts}
    return sorted(kinds)


def _backpressure(stalls):
    longest = max(stalls, default=0)
    return "none" if not longest else "short" if longest < FIFO_DEPTH else "fills-fifo"


async def check_scenarios(bench, *, numerics, seed, rows=ROWS, cols=COLS,
                          count=SCENARIOS_PER_RUN, coverage=None, inject=None):
    """Test program: ``count`` random scenarios back to back; returns a summary dict."""
    rng = np.random.default_rng([seed, NUMERICS.index(numerics)])
    scenarios = seed_scenarios(seed, count, rows, cols)[NUMERICS.index(numerics)]
    if coverage is not None:
        coverage_db.clear()
        sample_scenario, sample_special = sampler(rows, cols)
    checked = mismatches = 0
    first = None
    for index, s in enumerate(scenarios):
        x = bf16_matrix(rng, (s.m, s.k), special_density=s.special_density)
        w = bf16_matrix(rng, (s.k, s.n), special_density=s.special_density)
        acc = fp32_matrix(rng, (s.m, s.n), special_density=s.special_density) if s.acc else None
        plan = plan_matmul(x.view(np.uint16), w.view(np.uint16),
                           None if acc is None else acc.view(np.uint32), rows=rows, cols=cols,
                           transpose_load=s.transpose)
        agents = {}

        def source(port, beats, total=None):
            agents[port] = Driver(port, beats, total=total, rng=rng, idle=s.idle)
            return agents[port]

        def sink(port, count, on_beat=None):
            agents[port] = Monitor(port, count, rng=rng, stall=s.stall, on_beat=on_beat)
            return agents[port]

        final, _spans = await stream_matmul(bench, **plan.stream_args, source=source, sink=sink)
        expected = golden_mxu.matmul(x, w, acc=acc, numerics="ieee" if inject ==
                                     "golden-no-flush" else numerics).view(np.uint32)
        board = Scoreboard(f"mxu/{numerics} scenario {index} {s}", expected,
                           where=lambda i, n=s.n: f"out[{i // n}, {i % n}]")
        board.check_all(plan.assemble(final).view(np.uint32))
        checked += board.checked
        mismatches += board.mismatches
        first = first or board.first_mismatch
        if coverage is not None:
            acc_kind = {(False, False): "none", (True, False): "user", (False, True): "chained",
                        (True, True): "user+chained"}[s.acc, plan.k_tiles > 1]
            swaps = _swap_kind(plan, agents["lhs"].transfers) or [None]
            for swap in swaps:
                sample_scenario((numerics, tiling(s.k, rows), tiling(s.n, cols), acc_kind,
                                 "transposed" if s.transpose else "normal", swap,
                                 _backpressure(agents["result"].stalls)))
            for pair in special_samples(x.view(np.uint16), w.view(np.uint16), rows):
                sample_special(pair)
    if coverage is not None:
        coverage_db.export_to_xml(str(coverage))
    return {"case": f"mxu/{numerics}", "checked": checked, "mismatches": mismatches,
            "first_mismatch": first, "cycles": bench.cycles}


def runs(seed, *, inject=None):
    """The simulator runs of one seed: (block, params, name, program) per numerics mode."""
    for numerics in NUMERICS:
        yield "mxu", {"rows": ROWS, "cols": COLS, "numerics": numerics}, f"mxu-{numerics}", \
            functools.partial(check_scenarios, numerics=numerics, seed=seed, inject=inject)

#: The broken golden model ``--inject`` can switch on in this suite.
GOLDEN_INJECTION = "golden-no-flush"
