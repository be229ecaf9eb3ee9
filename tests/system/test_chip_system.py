# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct ChipNodes whose __init__ raises.)
"""The multi-chip system top (``hdl.system.ChipSystem``) through ``sim.system.run_programs``:
remote pushes between chips through routers and the OCS, the run's end, the watchdog's
message, and bad arguments.

The expected memories are written out here by hand from the programs (a ring of pushes),
not computed by any code under test.
"""

import numpy as np
import pytest

from golden import tensorcore as tc
from golden import topology as topo
from golden.memory import Descriptor
from hdl.system import ChipNode
from sim import system

#: One build serves every run here (and the collectives on 2x2): ``sim.system.SYSTEM_CHIP``.
CHIP = {}
WORDS = 16


def _ring_push(n, *, step=1, wait=True):
    """Chip c pushes VMEM words 0..15 to chip (c + step) % n at word 64, flag 1, and waits
    for its own incoming words (f1) and its sent words (f0)."""
    programs, vmem, smem = [], [], []
    for c in range(n):
        d = Descriptor(("vmem", 0), ("remote", (c + step) % n, "vmem", 64), (WORDS,), (1,),
                       (1,), 1, sent_flag=0)
        smem.append(np.array(tc.descriptor_words(d), np.uint32))
        vmem.append(np.arange(WORDS, dtype=np.uint32) + 1000 * c + 7)
        programs.append("dma s0+0\n" + (f"wait f1, {WORDS}\n" if wait else "")
                        + f"wait f0, {WORDS}\nhalt\n")
    return programs, vmem, smem


@pytest.mark.slow
@pytest.mark.parametrize("shape, step", [("2x2", 1), ("2x2", 3), ("1x4", 2)])
def test_ring_of_pushes_lands_on_every_chip(shape, step):
    n = 4
    programs, vmem, smem = _ring_push(n, step=step)
    run = system.run_programs(shape, programs, vmem=vmem, smem=smem, chip=CHIP)
    for c in range(n):
        sender = (c - step) % n
        assert list(run.vmem[c][64:64 + WORDS]) == [1000 * sender + 7 + j for j in range(WORDS)]
        assert list(run.vmem[c][:WORDS]) == [1000 * c + 7 + j for j in range(WORDS)]
        assert run.flags[c][0] == WORDS and run.flags[c][1] == WORDS
    # A one-word flit per cycle: each push is 18 flits (route word, target word, 16 data).
    assert run.link_flits.sum() >= 4 * (WORDS + 2)
    assert run.cycles > WORDS


@pytest.mark.slow
def test_stall_counters_say_why_each_chip_waited():
    """Chip 0 idles 100 cycles (``delay``), then pushes to chip 1, which waits for the
    words meanwhile; chips 2 and 3 halt at once."""
    programs, vmem, smem = _ring_push(4)
    programs = ["delay 100\ndma s0+0\nwait f0, 16\nhalt\n", "wait f1, 16\nhalt\n",
                "halt\n", "halt\n"]
    run = system.run_programs("2x2", programs, vmem=vmem, smem=smem, chip=CHIP)
    assert list(run.vmem[1][64:64 + WORDS]) == [7 + j for j in range(WORDS)]
    assert set(run.stalls) == {"fetch", "delay", "dma", "wait", "smem", "vector"}
    assert list(run.stalls["delay"]) == [100, 0, 0, 0]
    assert run.stalls["wait"][1] >= 100 and list(run.stalls["wait"][2:]) == [0, 0]
    assert run.stalls["dma"][0] > 0 and list(run.stalls["dma"][1:]) == [0, 0, 0]


@pytest.mark.slow
def test_the_flat_build_runs_as_the_hierarchical_one(monkeypatch):
    """Every chip loads and dumps its own memories, so that Verilator can build the chip as
    a hierarchical block (``sim.system._hierarchical``); a flat build of the same system
    (as a traced run gets) must run the same cycles and leave the same memories."""
    programs, vmem, smem = _ring_push(4)
    hierarchical = system.run_programs("2x2", programs, vmem=vmem, smem=smem, chip=CHIP)
    monkeypatch.setattr(system, "_hierarchical", lambda waves: ())
    flat = system.run_programs("2x2", programs, vmem=vmem, smem=smem, chip=CHIP)
    assert flat.cycles == hierarchical.cycles
    for c in range(4):
        assert list(flat.vmem[c]) == list(hierarchical.vmem[c])
        assert list(flat.flags[c]) == list(hierarchical.flags[c])
    assert (flat.link_flits == hierarchical.link_flits).all()


@pytest.mark.slow
def test_failed_chip_takes_no_program_and_traffic_routes_around_it():
    topology = topo.torus((2, 2), failed=(3,))
    programs, vmem, smem = [], [], []
    live = [0, 1, 2]
    for i, c in enumerate(live):
        dst = live[(i + 1) % 3]
        d = Descriptor(("vmem", 0), ("remote", dst, "vmem", 64), (WORDS,), (1,), (1,), 1,
                       sent_flag=0)
        smem.append(np.array(tc.descriptor_words(d), np.uint32))
        vmem.append(np.full(WORDS, 50 + c, np.uint32))
        programs.append(f"dma s0+0\nwait f1, {WORDS}\nwait f0, {WORDS}\nhalt\n")
    programs.insert(3, None)
    vmem.insert(3, None)
    smem.insert(3, None)
    run = system.run_programs(topology, programs, vmem=vmem, smem=smem, chip=CHIP)
    assert run.vmem[3] is None
    assert list(run.vmem[0][64:64 + WORDS]) == [52] * WORDS
    assert list(run.vmem[1][64:64 + WORDS]) == [50] * WORDS
    assert list(run.vmem[2][64:64 + WORDS]) == [51] * WORDS
    assert run.link_flits[3].sum() == 0


@pytest.mark.slow
def test_a_wait_nothing_can_end_is_named_with_its_chip_and_flag():
    programs, vmem, smem = _ring_push(4)
    programs[2] = f"dma s0+0\nwait f5, 3\nhalt\n"       # f5 never gets a word
    with pytest.raises(system.SystemRunError, match=r"chip 2 at pc 1 \(.*wait f5, 3.*\) waits"):
        system.run_programs("2x2", programs, vmem=vmem, smem=smem, chip=CHIP, watchdog=2000)


@pytest.mark.slow
def test_a_fault_names_the_chip_and_the_error():
    programs, vmem, smem = _ring_push(4)
    programs[1] = "dma s0+100\nhalt\n"                   # a zero record: no words to move
    with pytest.raises(system.SystemRunError,
                       match=r"stopped on a fault: chip 1 at pc 0 \(dma 100\) stopped with "
                             r"dma_count; chip 2 at pc 1 \(wait f1, 16\) waits"):
        system.run_programs("2x2", programs, vmem=vmem, smem=smem, chip=CHIP, watchdog=2000)


@pytest.mark.parametrize("change, message", [
    (lambda p: p[:3], "has 4 chips"),
    (lambda p: p[:3] + [None], "chip 3 is alive"),
])
def test_bad_program_lists_are_refused(change, message):
    programs, vmem, smem = _ring_push(4)
    with pytest.raises(ValueError, match=message):
        system.run_programs("2x2", change(programs), vmem=vmem, smem=smem, chip=CHIP)


def test_more_network_ports_than_the_router_has_local_ports_is_refused():
    # A 3-D router has 6 torus ports of its 8: 2 local ports at most.
    with pytest.raises(ValueError, match="network_ports must be at most 10"):
        ChipNode(dims=3, n_nodes=8, chip=dict(system.SYSTEM_CHIP, network_ports=11))


def test_a_speedup_past_the_vcs_is_refused():
    # Each of an input's speed-up groups needs a VC of its own.
    with pytest.raises(ValueError, match="speedup must be at most 2, not 3"):
        ChipNode(dims=2, n_nodes=4, vcs=2, speedup=3, chip=system.SYSTEM_CHIP)


@pytest.mark.parametrize("latency, error, message", [
    ((2, 2, 6), ValueError, r"one latency per torus port \(4\), not 3"),
    ((2, -1, 2, 2), ValueError, r"link_latency\[1\] must be at least 0"),
    ((2, 2.0, 2, 2), TypeError, r"link_latency\[1\] must be an integer"),
    (-1, ValueError, "link_latency must be at least 0"),
])
def test_bad_link_latencies_are_refused(latency, error, message):
    with pytest.raises(error, match=message):
        ChipNode(dims=2, n_nodes=4, link_latency=latency, chip=system.SYSTEM_CHIP)


def test_a_system_too_large_to_read_out_is_refused():
    # 128 chips: 120,178 bits of flags, pcs, states, link and stall counters, built for no run.
    with pytest.raises(ValueError, match=r"system 4x4x8: its read-out .* is 120,178 bits"):
        system.run_programs("4x4x8", ["halt\n"] * 128, vmem=[None] * 128,
                            chip={"n_flags": 16})


def test_bad_topology_and_backend_are_refused():
    programs, vmem, smem = _ring_push(4)
    with pytest.raises(ValueError, match="dims must look like '4x4x8', not '2by2'"):
        system.run_programs("2by2", programs, vmem=vmem, smem=smem, chip=CHIP)
    with pytest.raises(ValueError, match="backend"):
        system.run_programs("2x2", programs, vmem=vmem, smem=smem, chip=CHIP, backend="spice")


@pytest.mark.slow
def test_hbm_jitter_is_seeded_per_run_and_changes_no_value():
    """Chips with HBM jitter (``chip={"jitter": 8}``) push 64 words from their HBM to the
    next chip: the words land as without jitter, and the run's seed (the system's
    ``hbm_seed``) changes when they land, while a seed run twice lands them alike."""
    n, words = 4, 64
    hbm = [np.arange(words, dtype=np.uint32) * 3 + 100 * c for c in range(n)]
    smem = [np.array(tc.descriptor_words(Descriptor(
        ("hbm", 0), ("remote", (c + 1) % n, "vmem", 64), (words,), (1,), (1,), 1,
        sent_flag=0)), np.uint32) for c in range(n)]
    programs = [f"dma s0+0\nwait f1, {words}\nwait f0, {words}\nhalt\n"] * n
    vmem = [np.zeros(128, np.uint32)] * n
    chip = {"jitter": 8}
    cycles = []
    for seed in (1, 2, 1):
        run = system.run_programs("2x2", programs, vmem=vmem, smem=smem, hbm=hbm, chip=chip,
                                  seed=seed)
        for c in range(n):
            assert list(run.vmem[c][64:128]) == [3 * j + 100 * ((c - 1) % n)
                                                 for j in range(words)]
        cycles.append(run.cycles)
    assert cycles[0] == cycles[2] != cycles[1]


def test_hbm_jitter_is_checked_before_anything_is_built():
    with pytest.raises(ValueError, match="jitter"):
        system.run_programs("2x2", ["halt\n"] * 4, vmem=[None] * 4, chip={"jitter": -1})
