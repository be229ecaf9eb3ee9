"""The collectives' default chip and chunking (``sim.system_chip``,
``sim.kernels.collective.choose_chunks``): the rules, with choices derived by hand."""

import numpy as np
import pytest

from golden import topology as topo
from sim import system_chip
from sim.kernels import collective as kernel


@pytest.mark.parametrize("shape, failed, ports", [
    ((1, 4), (), 2),          # one ring axis: + and -
    ((4, 4), (), 4),
    ((4, 4), (5,), 4),        # a failed chip changes the rings, not the links
    ((2, 2, 2), (), 6),       # the two links of each 2-ring, one per direction
    ((1, 2, 4), (), 4),       # the axis of one chip has no links
])
def test_a_port_per_torus_link_direction(shape, failed, ports):
    assert system_chip.collective_ports(topo.torus(shape, failed=failed)) == ports


@pytest.mark.parametrize("ports, lanes", [
    # lanes >= 4 * ports (the DMA's VMEM port half busy: 2 * ports words a cycle), a
    # power of two from 8; the reduce (8 lines in 7 cycles: 9.14 words a cycle with 8
    # lanes) keeps up with all of these.
    (1, 8), (2, 8), (3, 16), (4, 16), (5, 32), (6, 32),
])
def test_lanes_keep_up_with_the_ports(ports, lanes):
    assert system_chip.collective_lanes(ports) == lanes


def test_lanes_also_keep_up_with_a_slower_reduce(monkeypatch):
    # With a reduce of 8 lines in 56 cycles, 8 lanes add 1.14 words a cycle, short of 2
    # ports' 2, though 8 >= 4 * 2; 16 lanes add 2.29.
    monkeypatch.setitem(system_chip.MEASURED_CYCLES, "group_cycles", 56.0)
    assert system_chip.collective_lanes(2) == 16
    assert system_chip.collective_lanes(4) == 32         # 16 lanes: 2.29 < 4


def test_the_default_chip_of_a_topology_and_of_given_parameters():
    chip = system_chip.collective_chip(topo.torus("4x4"))
    assert (chip["network_ports"], chip["lanes"], chip["vmem_lines"]) == (4, 16, 32768)
    assert chip["outstanding"] == 8                       # two pushes a port
    assert system_chip.collective_chip(topo.torus("1x4"))["outstanding"] == 4
    assert (chip["smem_words"], chip["imem_depth"], chip["n_flags"]) == (32768, 2048, 64)
    assert chip["ops"] == ("add", "iadd") and not chip["mxu"]
    three = system_chip.collective_chip(topo.torus("2x2x2"))
    assert (three["network_ports"], three["lanes"], three["vmem_lines"]) == (6, 32, 16384)
    # Given ports: the lanes and lines follow from them; given lanes win.
    two = system_chip.collective_chip(topo.torus("4x4"), network_ports=2)
    assert (two["network_ports"], two["lanes"], two["vmem_lines"]) == (2, 8, 65536)
    assert two["outstanding"] == 4
    wide = system_chip.collective_chip(topo.torus("4x4"), lanes=32, outstanding=2)
    assert (wide["network_ports"], wide["lanes"], wide["vmem_lines"], wide["outstanding"]) == \
        (4, 32, 16384, 2)


def test_cost_params_follow_the_chip():
    chip = system_chip.collective_chip(topo.torus("2x2x2"))
    params = system_chip.cost_params(chip, topo.torus("2x2x2"))
    # 6 ports, 32 lanes; pushes of PUSH_WORDS (256: half a 64-line queue would be 1,024);
    # the DMA's queue and flight slots, 12 each (two a port); a 3-D router's 6 torus ports.
    assert (params.ports, params.lanes, params.push_words, params.queue_words) == \
        (6, 32, 256, 2048)
    assert (params.dma_slots, params.torus_ports, params.group_cycles) == (24, 6, 7.0)


@pytest.mark.parametrize("ports, lanes, words", [
    (1, 8, None),          # one port: a descriptor per run of words
    (2, 4, 128),           # half a 64-line queue of 4 lanes
    (2, 8, 256), (4, 16, 256), (6, 32, 256),       # half a queue, at most PUSH_WORDS
])
def test_push_words_are_half_a_queue_and_at_most_push_words(ports, lanes, words):
    chip = {"network_ports": ports, "lanes": lanes}
    assert system_chip.PUSH_WORDS == 256
    assert system_chip.plan_push_words(chip) == words
    assert system_chip.plan_push_words(chip, "all_reduce") == words
    # An all-to-all keeps half a queue: 64 lines x lanes / 2.
    assert system_chip.plan_push_words(chip, "all_to_all") == (ports > 1 and 32 * lanes or None)


def test_auto_chunks_keep_the_fewest_within_one_percent_of_the_best(monkeypatch):
    table = {1: 100.0, 2: 60.0, 3: 59.7, 4: 59.0, 6: 58.5, 8: 58.6, 12: 70.0}
    monkeypatch.setattr(kernel, "pipelined_cycles", lambda transfers, *, chunks, params:
                        table.get(chunks, 1000.0))
    cost = system_chip.cost_params(system_chip.SYSTEM_CHIP, topo.torus("1x4"))
    # Best 58.5 (6 chunks); within 1%: <= 59.085, so 4 (59.0) is the fewest that is.
    assert kernel.choose_chunks([], cost=cost, most=64) == (4, 59.0)
    # At most 3 chunks (the flags): 3 (59.7) is the best, and 2 (60.0 <= 60.297) within 1%.
    assert kernel.choose_chunks([], cost=cost, most=3) == (2, 60.0)
    # At most 12, with 3 the best of the table: 3 alone is within 1% of it.
    table[3] = 50.0
    assert kernel.choose_chunks([], cost=cost, most=12) == (3, 50.0)
    assert kernel.choose_chunks([], cost=cost, most=0) == (1, 100.0)


def test_auto_chunks_need_the_chips_timing():
    with pytest.raises(ValueError, match="chunks='auto' needs cost"):
        kernel.plan_collective("all_reduce", np.zeros((4, 64), np.uint32), topology="1x4",
                               chunks="auto")


def test_auto_chunks_stay_within_the_chips_flags():
    # A 1x4 all-reduce has 6 steps: with 16 flags, 1 + 6 * chunks <= 16 allows 2 chunks.
    cost = system_chip.cost_params(system_chip.SYSTEM_CHIP, topo.torus("1x4"))
    plan = kernel.plan_collective("all_reduce", np.zeros((4, 8192), np.uint32),
                                  topology="1x4", chunks="auto", cost=cost, max_flags=16,
                                  push_words=256, push_ports=2)
    assert plan.chunks in (1, 2) and plan.n_flags <= 16
    assert plan.predicted_cycles > 0


@pytest.mark.parametrize("shape, twist, routing", [
    ((2, 2), False, "adaptive"),       # rings of two: both links to the one neighbour
    ((2, 2, 2), False, "adaptive"),
    ((2, 2, 4), True, "adaptive"),
    ((1, 4), False, "dor"),            # longer rings: one minimal route to a neighbour
    ((4, 4), False, "dor"),
])
def test_the_topologys_routing(shape, twist, routing):
    assert system_chip.collective_routing(topo.torus(shape, twist=twist)) == routing


def test_a_given_chip_routes_by_dimension_order():
    assert system_chip.collective_routing(topo.torus((2, 2)), {"lanes": 16}) == "dor"
