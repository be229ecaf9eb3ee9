"""Liveness of the multi-chip system under scarce link resources: every collective
completes, bit for bit ``golden.collectives.collective``'s, with the fewest credits the
routers take (one buffer flit per VC), with long links (6 cycles each way, so the credit
loop is far longer than a VC buffer is deep), with asymmetric links (one direction of an
axis 3x slower than the other, and minimum credits), and with all of that and one DMA
descriptor in flight a chip (``outstanding = 1``: a chip's pushes on every dimension leave
one after another), with 2 VCs, on a 2x2 torus (and a 1x4 ring); pieces of several
transfers are in flight at once (chunks 2 and 3), and a chip fails in one run.

A hang is ``sim.system.SystemRunError`` (the forward-progress watchdog, naming the waiting
chips and their flags), and fails the test with that message. The minimum-credit,
long-link and asymmetric sets are those of the ``system`` regression
(``verif.suites.system.stimulus.LINKS``), and the 2x2 asymmetric and the 1x4
minimum-credit runs use the numerics of its seeds 4 and 2, so that they share its
Verilator builds. All slow: each configuration is a Verilator build of a few minutes the
first time.
"""

import numpy as np
import pytest

from golden import collectives
from golden import topology as topo
from sim import system

from .collective_data import collective_inputs

#: name -> (shape, vcs, buffer_flits, link_latency, numerics, chip overrides).
CONFIGS = {
    "2x2-min-credits": ("2x2", 2, 1, 2, "tpu", {}),
    "2x2-long-links": ("2x2", 2, 4, 6, "tpu", {}),
    "1x4-min-credits": ("1x4", 2, 1, 2, "ieee", {}),
    # The links out of the + port of the ring's axis take 6 cycles, 3x the others: one
    # way round the ring is slower than the other, with the fewest credits.
    "2x2-asymmetric": ("2x2", 2, 1, (6, 2, 2, 2), "tpu", {}),
    "1x4-asymmetric": ("1x4", 2, 1, (2, 2, 6, 2), "tpu", {}),
    # As 2x2-asymmetric, and the DMA takes one descriptor at a time (queue and flight):
    # a push waits for the one before it, whichever dimension either goes on.
    "2x2-one-dma": ("2x2", 2, 1, (6, 2, 2, 2), "tpu", {"outstanding": 1}),
}
#: kind -> (words of a chip's input row, chunks): several lines per piece, pieces of more
#: than one step in flight.
SIZES = {"all_reduce": (256, 3), "reduce_scatter": (256, 2), "all_gather": (96, 3),
         "all_to_all": (96, 2)}
#: The failed-chip all_reduce's row: a multiple of C*K*2*lanes = 3*1*2*8 = 48 (3 live chips
#: on one ring).
FAILED_ROW = 240


def _live_and_exact(config, kind, seed, *, dtype="float32", failed=()):
    shape, vcs, buffer_flits, link_latency, numerics, chip = CONFIGS[config]
    topology = topo.torus(shape, failed=failed)
    row, chunks = SIZES[kind]
    chips = int(topology.alive.sum())
    if failed:
        row = FAILED_ROW
    inputs = collective_inputs(kind, chips, row, dtype, np.random.default_rng(seed))
    want = collectives.collective(kind, inputs, topology=topology, dtype=dtype,
                                  numerics=numerics).view(np.uint32)
    try:
        run = system.collective(kind, inputs, topology=topology, dtype=dtype, seed=seed,
                                numerics=numerics, chunks=chunks, vcs=vcs,
                                buffer_flits=buffer_flits, link_latency=link_latency,
                                chip=chip)
    except system.SystemRunError as error:
        pytest.fail(f"{kind} {dtype} on {config} (failed {failed}, chunks {chunks}) did not "
                    f"complete: {error} (seed {seed})")
    got = run.out.view(np.uint32)
    assert got.shape == want.shape
    wrong = np.flatnonzero(got.ravel() != want.ravel())
    assert wrong.size == 0, (f"{kind} {dtype} on {config}: {wrong.size} words differ, first "
                             f"at {wrong[:5]} (seed {seed})")
    # Every live chip sent, a failed one did not, and no link beat a flit a cycle.
    live = topology.alive.astype(bool)
    assert (run.link_utilization[live].sum(axis=1) > 0).all()
    assert (run.link_utilization[~live] == 0).all()
    assert run.link_utilization.max() <= 1
    return run


@pytest.mark.slow
@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("kind", collectives.KINDS)
def test_every_collective_completes_bit_exact(config, kind, seed):
    _live_and_exact(config, kind, seed)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["all_reduce", "all_to_all"])
def test_int32_with_minimum_credits(kind, seed):
    _live_and_exact("2x2-min-credits", kind, seed, dtype="int32")


@pytest.mark.slow
@pytest.mark.parametrize("config", ["2x2-min-credits", "2x2-long-links"])
def test_all_reduce_with_a_failed_chip(config, seed):
    _live_and_exact(config, "all_reduce", seed, failed=(1,))
