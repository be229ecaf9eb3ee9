"""Regression suite ``dma``: random descriptor batches on one memory system, whole runs.

Each seed runs :data:`BATCHES` batches of random descriptors (see
:mod:`.stimulus`) through ``sim.dma.run`` and compares the **whole** HBM and
VMEM images, every flag, the list of rejected descriptors and the bus error
records against ``golden.memory.run`` followed by ``golden.memory.land`` of
its pushes (remote pushes loop back to this chip). The HBM has two injected
error ranges (:attr:`Geometry.error_ranges`), in every build; descriptors
dealt a fault read from or write into them. Batches alternate between a
fixed HBM latency and seeded jitter (two Verilator builds, each shared by
every batch of every seed), and between a clean descriptor stream and
random gaps on it and stalls on the error stream; the last batch is shorter
than the DMA's queue, and has no faults. On Verilator a seed moves 2,403
descriptors (42 seeds pass 100,000); the other simulators, being slower by
orders of magnitude, run a few dozen small ones.
"""

from dataclasses import replace

import numpy as np
from cocotb_coverage.coverage import coverage_db

from golden import memory as golden_memory
from sim import dma as sim_dma

from ..case import WholeCase
from .coverage import alignment, sampler
from .stimulus import Geometry, deal, descriptor_for, local_of
from ...scoreboard import Scoreboard

__all__ = ["GEOMETRY", "BATCHES", "DESCRIPTORS", "DEPTH", "batch", "expected", "check_seed", "runs"]

#: 256 KiB of HBM and 128 KiB of VMEM: room for tens of KiB per transfer, less the top
#: 16 KiB of each, where pushes land, and 16 KiB of HBM below that, the fault zone.
GEOMETRY = Geometry(hbm_words=1 << 16, vmem_words=1 << 15, lanes=8, n_flags=16,
                    landing=1 << 12, fault_zone=1 << 12)
HBM_PARAMS = dict(outstanding=4, read_latency=8, words_per_cycle=1)
JITTER = 6
BATCHES = 4
#: Descriptors per batch by simulator: Verilator runs the full load. The last batch of a
#: seed is short, fewer than the DMA's ``outstanding``, so the queue never fills.
DESCRIPTORS = {"verilator": 800, "icarus": 12, "amaranth": 12}
SHORT_BATCH = 3
#: Size classes kept for the slow simulators (a "large" transfer takes minutes there).
SLOW_SIZES = ("word", "small")
#: Harness memory depth of every stream, by simulator (``sim.dma.run``'s ``depth``): on
#: Verilator one depth for every batch, so that each HBM latency setting needs one build.
#: Export time and Verilog grow with it (every entry is initialised), so it is kept to
#: what a batch of 800 needs: descriptors, error records (rejections and bus errors)
#: and push flits, each well under it; a batch is held within it (see :func:`batch`).
#: The slower simulators size each run's own.
DEPTH = {"verilator": 1 << 12, "icarus": None, "amaranth": None}


def batch(seed, index, count, *, sizes=None, depth=None):
    """Batch ``index`` of ``seed``: (hbm, vmem, descriptors, cards, settings).

    With a ``depth``, a card whose packets or error records would overflow the harness
    memories is made local and fault-free instead (at the expected volumes, a rare
    event), so that every stream of the run fits.
    """
    rng = np.random.default_rng([seed, index, 0xD3A])
    cards = deal(rng, count, faults=count > SHORT_BATCH)
    if sizes is not None:
        cards = [card if card.size in sizes else replace(card, size=sizes[i % len(sizes)])
                 for i, card in enumerate(cards)]
    made = []
    used = {"descriptors": 0, "errors": 0, "push": 0}
    for card in cards:
        descriptor, got = descriptor_for(rng, card, GEOMETRY)
        if depth is not None:
            beats = _beats(descriptor)
            if any(used[k] + beats[k] > depth for k in used):
                card = replace(card, direction=local_of(card.direction), fault="none")
                descriptor, got = descriptor_for(rng, card, GEOMETRY)
                beats = _beats(descriptor)
            used = {k: used[k] + beats[k] for k in used}
        made.append((descriptor, got))
    hbm = rng.integers(0, 1 << 32, GEOMETRY.hbm_words, dtype=np.uint32)
    vmem = rng.integers(0, 1 << 32, GEOMETRY.vmem_words, dtype=np.uint32)
    settings = dict(jitter=JITTER if index % 2 else 0,
                    idle=0.3 if index // 2 % 2 else 0.0, stall=0.5 if index // 2 % 2 else 0.0,
                    seed=int(rng.integers(0, 1 << 31)))
    return hbm, vmem, [d for d, _ in made], [card for _, card in made], settings


def _beats(descriptor):
    return sim_dma.stream_beats(GEOMETRY.hbm_words, GEOMETRY.vmem_words, [descriptor],
                                n_flags=GEOMETRY.n_flags, error_ranges=GEOMETRY.error_ranges)


def expected(hbm, vmem, descriptors):
    """``golden.memory.run`` of a batch on :data:`GEOMETRY`, its pushes landed back here:
    ``(hbm, vmem, flags, rejected indices, bus error records)``."""
    sent = golden_memory.run(hbm, vmem, descriptors, n_flags=GEOMETRY.n_flags,
                             lanes=GEOMETRY.lanes, error_ranges=GEOMETRY.error_ranges,
                             words_per_cycle=HBM_PARAMS["words_per_cycle"])
    landed = golden_memory.land(sent.hbm, sent.vmem, sent.flags, sent.pushes,
                                error_ranges=GEOMETRY.error_ranges)
    return (*landed, sent.errors, sent.bus_errors)


def _where(hbm_words, vmem_words):
    def where(index):
        if index < hbm_words:
            return f"hbm[{index}]"
        if index < hbm_words + vmem_words:
            return f"vmem[{index - hbm_words}]"
        return f"flag[{index - hbm_words - vmem_words}]"
    return where


def _compare_records(board, what, got, want, *, checked):
    """Add ``checked`` results to ``board``, and a mismatch if the record lists ``got`` and
    ``want`` differ, describing the first difference."""
    board.checked += checked
    if got == want:
        return
    board.mismatches += 1
    k = next((k for k, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
    board.first_mismatch = board.first_mismatch or (
        f"{board.name}: {what} {k}: got {got[k] if k < len(got) else 'none'}, expected "
        f"{want[k] if k < len(want) else 'none'} ({len(got)} got, {len(want)} expected)")


def check_seed(seed, *, backend, coverage=None, waves=None, inject=None):
    """Run every batch of ``seed`` on ``backend``; returns the case record."""
    count = DESCRIPTORS[backend]
    sizes = None if backend == "verilator" else SLOW_SIZES
    if coverage is not None:
        coverage_db.clear()
        sample_descriptor, sample_batch = sampler()
    checked = mismatches = cycles = descriptors = pushes = bus_errors = 0
    first = None
    for index in range(BATCHES):
        size = SHORT_BATCH if index == BATCHES - 1 else count
        hbm, vmem, batch_descriptors, cards, settings = batch(seed, index, size, sizes=sizes,
                                                              depth=DEPTH[backend])
        *images, rejected, bus = expected(hbm, vmem, batch_descriptors)
        got = sim_dma.run(hbm, vmem, batch_descriptors, lanes=GEOMETRY.lanes,
                          n_flags=GEOMETRY.n_flags, backend=backend, waves=waves,
                          error_ranges=GEOMETRY.error_ranges, depth=DEPTH[backend],
                          **HBM_PARAMS, **settings)
        want = np.concatenate(images)
        if inject == "golden-fault":
            want[int(np.random.default_rng(seed).integers(want.size))] ^= 1
        board = Scoreboard(f"dma seed {seed} batch {index} {settings}", want,
                           where=_where(GEOMETRY.hbm_words, GEOMETRY.vmem_words))
        board.check_all(np.concatenate([got.hbm, got.vmem, got.flags]))
        # Every descriptor's verdict, and every bus error record, in order.
        _compare_records(board, "rejected descriptor", list(got.errors), list(rejected),
                         checked=len(batch_descriptors))
        _compare_records(board, "bus error", [tuple(e) for e in got.bus_errors],
                         [tuple(e) for e in bus], checked=len(bus))
        checked += board.checked
        mismatches += board.mismatches
        first = first or board.first_mismatch
        cycles += got.cycles
        descriptors += len(batch_descriptors)
        pushes += sum(d.remote for d in batch_descriptors)
        bus_errors += len(bus)
        if coverage is not None:
            for descriptor, card in zip(batch_descriptors, cards):
                sample_descriptor((card.direction, card.dims, card.size, card.stride,
                                   card.legality, card.overlap,
                                   alignment(descriptor.src[1], GEOMETRY.lanes),
                                   alignment(descriptor.dst[-1], GEOMETRY.lanes),
                                   card.fault, card.sent))
            sample_batch(("gaps" if settings["idle"] else "none",
                          "jitter" if settings["jitter"] else "fixed",
                          "fills" if size > HBM_PARAMS["outstanding"] else "within",
                          "reported" if bus else "none"))
    if coverage is not None:
        coverage_db.export_to_xml(str(coverage))
    return {"case": "dma", "checked": checked, "mismatches": mismatches,
            "first_mismatch": first, "cycles": cycles, "descriptors": descriptors,
            "pushes": pushes, "bus_errors": bus_errors}


def runs(seed, *, inject=None):
    """The one whole-run case of a seed."""
    def check(*, backend, coverage=None, waves=None):
        return check_seed(seed, backend=backend, coverage=coverage, waves=waves, inject=inject)
    yield WholeCase("dma", check)

#: The broken golden model ``--inject`` can switch on in this suite.
GOLDEN_INJECTION = "golden-fault"
