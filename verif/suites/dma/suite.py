"""Regression suite ``dma``: random descriptor batches on one memory system, whole runs.

Each seed runs :data:`BATCHES` batches of random descriptors (see
:mod:`.stimulus`) through ``sim.dma.run`` and compares the **whole** HBM and
VMEM images, every flag and the list of rejected descriptors against
``golden.memory.run``, so a stray write anywhere is caught. Batches alternate
between a fixed HBM latency and seeded jitter (two builds, each shared by
every seed), and between a clean descriptor stream and random gaps on it
and stalls on the error stream; the last batch is shorter than the DMA's
queue. On Verilator a seed moves 2,403 descriptors (42 seeds pass 100,000);
the other simulators, being slower by orders of magnitude, run a few dozen
small ones.
"""

from dataclasses import replace

import numpy as np
from cocotb_coverage.coverage import coverage_db

from golden import memory as golden_memory
from sim import dma as sim_dma

from ..case import WholeCase
from .coverage import alignment, sampler
from .stimulus import Geometry, deal, descriptor_for
from ...scoreboard import Scoreboard

__all__ = ["GEOMETRY", "BATCHES", "DESCRIPTORS", "batch", "check_seed", "runs"]

#: 256 KiB of HBM and 128 KiB of VMEM: room for tens of KiB per transfer.
GEOMETRY = Geometry(hbm_words=1 << 16, vmem_words=1 << 15, lanes=8, n_flags=16)
HBM_PARAMS = dict(outstanding=4, read_latency=8, words_per_cycle=1)
JITTER = 6
BATCHES = 4
#: Descriptors per batch by simulator: Verilator runs the full load. The last batch of a
#: seed is short, fewer than the DMA's ``outstanding``, so the queue never fills.
DESCRIPTORS = {"verilator": 800, "icarus": 12, "amaranth": 12}
SHORT_BATCH = 3
#: Size classes kept for the slow simulators (a "large" transfer takes minutes there).
SLOW_SIZES = ("word", "small")


def batch(seed, index, count, *, sizes=None):
    """Batch ``index`` of ``seed``: (hbm, vmem, descriptors, cards, settings)."""
    rng = np.random.default_rng([seed, index, 0xD3A])
    cards = deal(rng, count)
    if sizes is not None:
        cards = [card if card.size in sizes else replace(card, size=sizes[i % len(sizes)])
                 for i, card in enumerate(cards)]
    made = [descriptor_for(rng, card, GEOMETRY) for card in cards]
    hbm = rng.integers(0, 1 << 32, GEOMETRY.hbm_words, dtype=np.uint32)
    vmem = rng.integers(0, 1 << 32, GEOMETRY.vmem_words, dtype=np.uint32)
    settings = dict(jitter=JITTER if index % 2 else 0,
                    idle=0.3 if index // 2 % 2 else 0.0, stall=0.5 if index // 2 % 2 else 0.0,
                    seed=int(rng.integers(0, 1 << 31)))
    return hbm, vmem, [d for d, _ in made], [card for _, card in made], settings


def _where(hbm_words, vmem_words):
    def where(index):
        if index < hbm_words:
            return f"hbm[{index}]"
        if index < hbm_words + vmem_words:
            return f"vmem[{index - hbm_words}]"
        return f"flag[{index - hbm_words - vmem_words}]"
    return where


def check_seed(seed, *, backend, coverage=None, waves=None, inject=None):
    """Run every batch of ``seed`` on ``backend``; returns the case record."""
    count = DESCRIPTORS[backend]
    sizes = None if backend == "verilator" else SLOW_SIZES
    if coverage is not None:
        coverage_db.clear()
        sample_descriptor, sample_batch = sampler()
    checked = mismatches = cycles = descriptors = 0
    first = None
    for index in range(BATCHES):
        size = SHORT_BATCH if index == BATCHES - 1 else count
        hbm, vmem, batch_descriptors, cards, settings = batch(seed, index, size, sizes=sizes)
        expected = golden_memory.run(hbm, vmem, batch_descriptors, n_flags=GEOMETRY.n_flags,
                                     lanes=GEOMETRY.lanes)
        got = sim_dma.run(hbm, vmem, batch_descriptors, lanes=GEOMETRY.lanes,
                          n_flags=GEOMETRY.n_flags, backend=backend, waves=waves,
                          **HBM_PARAMS, **settings)
        want = np.concatenate([expected.hbm, expected.vmem, expected.flags])
        if inject == "golden-fault":
            want[int(np.random.default_rng(seed).integers(want.size))] ^= 1
        board = Scoreboard(f"dma seed {seed} batch {index} {settings}", want,
                           where=_where(GEOMETRY.hbm_words, GEOMETRY.vmem_words))
        board.check_all(np.concatenate([got.hbm, got.vmem, got.flags]))
        if list(got.errors) != list(expected.errors):
            board.mismatches += 1
            board.first_mismatch = board.first_mismatch or (
                f"dma seed {seed} batch {index}: rejected descriptors {list(got.errors)}, "
                f"expected {list(expected.errors)}")
        checked += board.checked + len(batch_descriptors)
        mismatches += board.mismatches
        first = first or board.first_mismatch
        cycles += got.cycles
        descriptors += len(batch_descriptors)
        if coverage is not None:
            for descriptor, card in zip(batch_descriptors, cards):
                sample_descriptor((card.direction, card.dims, card.size, card.stride,
                                   card.legality, card.overlap,
                                   alignment(descriptor.src[1], GEOMETRY.lanes),
                                   alignment(descriptor.dst[1], GEOMETRY.lanes)))
            sample_batch(("gaps" if settings["idle"] else "none",
                          "jitter" if settings["jitter"] else "fixed",
                          "fills" if size > HBM_PARAMS["outstanding"] else "within"))
    if coverage is not None:
        coverage_db.export_to_xml(str(coverage))
    return {"case": "dma", "checked": checked, "mismatches": mismatches,
            "first_mismatch": first, "cycles": cycles, "descriptors": descriptors}


def runs(seed, *, inject=None):
    """The one whole-run case of a seed."""
    def check(*, backend, coverage=None, waves=None):
        return check_seed(seed, backend=backend, coverage=coverage, waves=waves, inject=inject)
    yield WholeCase("dma", check)
