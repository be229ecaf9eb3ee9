"""golden.collectives bandwidth accounting: nccl-tests sizes and bus factors, the
link-bandwidth bounds worked out by hand on small tori, and the lockstep cost model."""

import pytest

from golden import collectives as gc
from golden.topology import torus


@pytest.mark.parametrize("kind,shape,size,factor", [
    ("all_reduce", (4, 100), 400, 2 * 3 / 4),
    ("reduce_scatter", (4, 100), 400, 3 / 4),
    ("all_gather", (4, 100), 1600, 3 / 4),
    ("all_to_all", (8, 8, 10), 320, 7 / 8),
])
def test_sizes_and_factors_follow_nccl_tests(kind, shape, size, factor):
    assert gc.message_bytes(kind, shape) == size
    assert gc.bus_factor(kind, shape[0]) == pytest.approx(factor)
    algbw, busbw = gc.bandwidth(kind, shape, 50)
    assert algbw == pytest.approx(size / 50) and busbw == pytest.approx(size / 50 * factor)


@pytest.mark.parametrize("topology,kind,bound", [
    # L directed links / C chips: a ring has 2 per chip, a 2-D torus 4 (a 2-ring's two
    # parallel links both count), a 3-D torus 6.
    ("1x4", "all_reduce", 2), ("2x2", "reduce_scatter", 4), ("4x4", "all_reduce", 4),
    ("2x2x2", "all_gather", 6),
    (torus("2x3", wrap=False), "all_reduce", (2 * 3 + 2 * 2 * 2) / 6),
    # chip 5 of 4x4 fails: its 4 ports and its neighbours' 4 ports to it go dark.
    (torus("4x4", failed=[5]), "all_reduce", (64 - 8) / 15),
    # all-to-all: 4-ring cut in 2 links per direction carries 2 x 2 x S/4 -> busbw 1.5 B;
    # 4x4 bisection (8 links per direction, 64 blocks of S/16): cycles >= S/(2B), busbw
    # 2 B x 15/16; 2x2: 16 links carry the 16 distance-units of the 12 pairs -> 3 B.
    ("1x4", "all_to_all", 1.5), ("4x4", "all_to_all", 15 / 8), ("2x2", "all_to_all", 3),
])
def test_bus_bound_by_hand(topology, kind, bound):
    assert gc.bus_bound(kind, topology, 1) == pytest.approx(bound)
    assert gc.bus_bound(kind, topology, 16) == pytest.approx(16 * bound)


def test_ring_schedule_meets_the_bound_on_square_tori():
    """Latency aside (alpha = 0), the rotated-shard rings reach busbw = P*B on 1x4, 4x4 and
    2x2x2, and one ring over the live chips reaches 2B."""
    for shape, n in (("1x4", 64), ("4x4", 512), ("2x2x2", 192)):
        t = torus(shape)
        c = t.n_chips
        for kind in ("all_reduce", "reduce_scatter", "all_gather"):
            cycles = gc.alpha_beta_cycles(gc.schedule(kind, t, (c, n)), t, alpha=0,
                                          link_bytes_per_cycle=4)
            _, busbw = gc.bandwidth(kind, (c, n), cycles)
            assert busbw == pytest.approx(gc.bus_bound(kind, t, 4)), (shape, kind)
    t = torus("3x3", failed=[4])
    cycles = gc.alpha_beta_cycles(gc.schedule("all_reduce", t, (8, 64)), t, alpha=0,
                                  link_bytes_per_cycle=4)
    assert gc.bandwidth("all_reduce", (8, 64), cycles)[1] == pytest.approx(4)


def test_alpha_beta_by_hand_on_a_4_ring():
    """1x4 all-reduce of 32 words: 6 steps, each a 4-word half (16 bytes) per link."""
    t = torus("1x4")
    s = gc.schedule("all_reduce", t, (4, 32))
    assert gc.alpha_beta_cycles(s, t, alpha=10, link_bytes_per_cycle=4) == 6 * (10 + 16 / 4)


@pytest.mark.parametrize("call,match", [
    (lambda: gc.bus_bound("all_reduce", "4x4", 0), "positive number"),
    (lambda: gc.bus_bound("all_reduce", "4x4", True), "positive number"),
    (lambda: gc.bus_bound("scan", "4x4", 4), "kind must be one of"),
    (lambda: gc.bandwidth("all_reduce", (4, 8), 0), "positive number"),
    (lambda: gc.message_bytes("all_to_all", (4, 8)), r"\[C, C, m\]"),
    (lambda: gc.bus_factor("all_reduce", 1), ">= 2"),
    (lambda: gc.alpha_beta_cycles([], "2x2", alpha=-1, link_bytes_per_cycle=4), ">= 0"),
])
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()
