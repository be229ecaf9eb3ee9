"""The ``dma`` regression suite without a simulator: its stimulus closes coverage in one
Verilator-sized seed, keeps every batch runnable, and its checks catch wrong records.

``sim.dma.run`` is replaced by a stand-in that answers from ``golden.memory`` (and checks
what the suite hands it), so these tests take seconds; ``test_regress.py`` runs the suite
on a simulator.
"""

import numpy as np
import pytest

from golden import memory as golden
from sim import dma as sim_dma
from verif.regress import functional_summary
from verif.suites.dma import stimulus, suite


def _stand_in(calls, *, spoil=None):
    """A ``sim.dma.run`` that checks its arguments and returns golden's result, spoiled
    by ``spoil(DmaRun) -> DmaRun`` if given."""
    stream_beats = sim_dma.stream_beats         # the real one, whatever is patched later

    def run(hbm, vmem, descriptors, *, error_ranges, depth, lanes, n_flags, words_per_cycle,
            **_):
        assert error_ranges == suite.GEOMETRY.error_ranges and len(error_ranges) == 2
        # The landing rule holds (else a ValueError), and every stream fits the harness.
        beats = stream_beats(len(hbm), len(vmem), descriptors, n_flags=n_flags,
                             error_ranges=error_ranges)
        assert depth is None or max(beats.values()) <= depth, beats
        sent = golden.run(hbm, vmem, descriptors, n_flags=n_flags, lanes=lanes,
                          error_ranges=error_ranges, words_per_cycle=words_per_cycle)
        landed = golden.land(sent.hbm, sent.vmem, sent.flags, sent.pushes,
                             error_ranges=error_ranges)
        calls.append(beats)
        result = sim_dma.DmaRun(*landed, sent.errors, 1, sent.bus_errors)
        return spoil(result) if spoil else result
    return run


def test_one_verilator_seed_closes_coverage(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(sim_dma, "run", _stand_in(calls))
    record = suite.check_seed(3, backend="verilator", coverage=tmp_path / "dma.cov.xml")
    assert record["mismatches"] == 0 and record["descriptors"] == 2403
    assert record["pushes"] > 150 and record["bus_errors"] > 500
    percent, text = functional_summary(tmp_path / "dma.cov.xml")
    assert percent == 100.0, text
    # Every full batch pushes and reports bus errors; the short one does neither.
    assert [c["descriptors"] for c in calls] == [800, 800, 800, 3]
    assert all(c["push"] > 0 and c["errors"] > 800 for c in calls[:3])


def test_descriptors_keep_to_their_zones():
    g = suite.GEOMETRY
    landing = {space: g.landing_zone(space) for space in ("hbm", "vmem")}
    fault_lo, fault_hi = g.fault_range
    seen = set()
    for index in range(3):
        _, _, descriptors, cards, _ = suite.batch(5, index, 800, depth=suite.DEPTH["verilator"])
        for d, card in zip(descriptors, cards):
            if card.legality != "ok":
                continue
            src, dst = golden.addresses(d)
            seen.add((card.direction in stimulus.REMOTE, card.fault))
            assert src.max() < landing[d.src[0]][0], d          # no source in a landing zone
            if d.remote:
                lo, hi = landing[d.dst[-2]]
                assert lo <= dst.min() and dst.max() < hi, d
            else:
                assert dst.max() < landing[d.dst[0]][0], d
            if card.fault == "none" and not d.remote:
                assert src.max() < g.work(d.src[0]) and dst.max() < g.work(d.dst[0]), d
            assert card.fault == stimulus.fault_of(d, g)
            if card.fault == "read":
                assert ((src >= fault_lo) & (src < fault_hi)).any()
    assert seen == {(remote, fault) for remote in (False, True) for fault in stimulus.FAULTS}


@pytest.mark.parametrize("spoil, what", [
    (lambda r: sim_dma.DmaRun(r.hbm, r.vmem, r.flags, r.errors, r.cycles, r.bus_errors[:-1]),
     "bus error"),
    (lambda r: sim_dma.DmaRun(r.hbm, r.vmem, r.flags, r.errors, r.cycles,
                              [e._replace(address=e.address + 1) for e in r.bus_errors]),
     "bus error 0: got ("),
    (lambda r: sim_dma.DmaRun(r.hbm, r.vmem, r.flags, r.errors[1:], r.cycles, r.bus_errors),
     "rejected descriptor 0"),
    (lambda r: sim_dma.DmaRun(r.hbm, r.vmem ^ np.uint32(1), r.flags, r.errors, r.cycles,
                              r.bus_errors), "vmem[0]"),
])
def test_wrong_results_are_mismatches(spoil, what, monkeypatch):
    calls = []
    monkeypatch.setattr(sim_dma, "run", _stand_in(calls, spoil=spoil))
    record = suite.check_seed(1, backend="amaranth")
    assert record["mismatches"] >= 1
    assert record["first_mismatch"].startswith("dma seed 1 batch 0") and what in \
        record["first_mismatch"], record["first_mismatch"]
