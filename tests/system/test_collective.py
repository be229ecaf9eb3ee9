"""``sim.system.collective`` on the RTL system: every collective bit for bit against
``golden.collectives.collective`` (itself checked against an independent oracle in
``tests/collectives``), fp32 with special values and int32, regular, twisted and with a
failed chip; the bandwidth figures' definitions; bad input.

The RTL runs are marked slow (``-m slow``): the 2x2 torus (one build, shared with the other
system tests), then 1x4, 2x2x2, 4x4 and a twisted 2x2x4. The default suite keeps the
checks of bad input, which need no build; ``make demo`` runs collectives on the 2x2 RTL
and fails on any wrong word.
"""

import numpy as np
import pytest

from golden import collectives
from golden import topology as topo
from sim import system

from .collective_data import collective_inputs

def _check(kind, topology, n, dtype="float32", seed=1, **kwargs):
    chips = int(topology.alive.sum())
    inputs = collective_inputs(kind, chips, n, dtype, np.random.default_rng(seed))
    # The system chip unless a test says otherwise: one build per topology with the other
    # system tests.
    kwargs = dict(chip=system.SYSTEM_CHIP, chunks=1) | kwargs
    run = system.collective(kind, inputs, topology=topology, dtype=dtype, seed=seed, **kwargs)
    want = collectives.collective(kind, inputs, topology=topology, dtype=dtype)
    got = run.out.view(np.uint32)
    assert got.shape == want.shape
    wrong = np.flatnonzero(got.ravel() != want.view(np.uint32).ravel())
    assert wrong.size == 0, (f"{kind} {dtype} on {topology.shape}: {wrong.size} words differ, "
                             f"first at {wrong[:5]} (seed {seed})")
    return run


@pytest.mark.slow
@pytest.mark.parametrize("kind", collectives.KINDS)
def test_every_collective_on_a_2x2_torus(kind):
    run = _check(kind, topo.torus((2, 2)), 256)
    # nccl-tests, by hand for 4 chips of 256 words: S and busbw/algbw.
    size, factor = NCCL_2X2_256[kind]
    assert run.algbw == pytest.approx(size / run.cycles)
    assert run.busbw == pytest.approx(size / run.cycles * factor)
    # 16 directed links of 4 bytes/cycle over 4 chips; all-to-all: each chip sends 3
    # blocks of S/4 over 1, 1 and 2 hops, S link-bytes a chip over 16 links, so
    # time >= S/(4B) and busbw <= 3/4 * 4B = 12.
    assert run.bus_bound == (12.0 if kind == "all_to_all" else 16.0)
    # Every chip sends on its links, and no link carries more than a flit per cycle.
    assert run.link_utilization.shape == (4, 4)
    assert 0 < run.link_utilization.max() <= 1
    assert (run.link_utilization.sum(axis=1) > 0).all()


#: kind -> (S in bytes, busbw / algbw) for 4 chips with 256-word rows.
NCCL_2X2_256 = {"all_reduce": (1024, 1.5), "reduce_scatter": (1024, 0.75),
                "all_gather": (4096, 0.75), "all_to_all": (1024, 0.75)}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["all_reduce", "all_to_all"])
def test_int32_sums_wrap_and_words_move_exactly(kind):
    _check(kind, topo.torus((2, 2)), 128, dtype="int32", seed=3)


@pytest.mark.slow
def test_all_reduce_with_a_failed_chip_runs_on_the_live_ring():
    run = _check("all_reduce", topo.torus((2, 2), failed=(2,)), 96)
    assert run.link_utilization[2].sum() == 0


@pytest.mark.slow
def test_pipelined_chunks_give_the_same_bits():
    _check("all_reduce", topo.torus((2, 2)), 512, chunks=2, seed=5)


@pytest.mark.slow
def test_float32_values_are_accepted_and_returned_as_float32():
    x = np.linspace(-1, 1, 4 * 128, dtype=np.float32).reshape(4, 128)
    run = system.collective("all_reduce", x, topology="2x2", chip=system.SYSTEM_CHIP)
    assert run.out.dtype == np.float32
    assert run.out.view(np.uint32).tobytes() == \
        collectives.collective("all_reduce", x, topology="2x2").view(np.uint32).tobytes()


@pytest.mark.parametrize("kwargs, message", [
    (dict(kind="broadcast"), "kind"),
    (dict(dtype="float16"), "dtype"),
    (dict(topology="2by2"), "dims must look like '4x4x8', not '2by2'"),
    (dict(inputs=np.zeros((3, 32), np.uint32)), "4"),
    (dict(inputs=np.zeros((4, 32), np.int64)), "int64"),
    (dict(routing="minimal"), "routing must be one of 'dor', 'adaptive', not 'minimal'"),
    (dict(routing="adaptive", vcs=2), "routing='adaptive' needs vcs above 2"),
    (dict(buffer_flits=64), "buffer_flits must hold the chips' longest packet \\(66 flits\\)"),
    (dict(speedup=5), "speedup must be at most 4, not 5"),
    (dict(routing="dor", speedup=0), "speedup must be at least 1, not 0"),
])
def test_bad_input_is_refused_with_a_reason(kwargs, message):
    args = dict(kind="all_reduce", inputs=np.zeros((4, 32), np.uint32), topology="2x2",
                dtype="float32") | kwargs
    with pytest.raises(ValueError, match=message):
        system.collective(args.pop("kind"), args.pop("inputs"), **args)


@pytest.mark.slow
@pytest.mark.parametrize("shape, twist, failed", [
    ((1, 4), False, ()), ((2, 2, 2), False, ()), ((4, 4), False, ()),
    ((2, 2, 4), True, ()), ((4, 4), False, (5,)),
])
@pytest.mark.parametrize("kind", collectives.KINDS)
def test_every_collective_on_larger_systems(shape, twist, failed, kind):
    topology = topo.torus(shape, twist=twist, failed=failed)
    chips = int(topology.alive.sum())
    n = 2 * 2 * 3 * 2 * 16 * chips if kind in ("all_reduce", "reduce_scatter") else 16 * chips
    _check(kind, topology, n)


@pytest.mark.slow
@pytest.mark.parametrize("kind, n, dtype", [
    ("all_reduce", 7, "float32"), ("all_reduce", 1000, "int32"),
    ("reduce_scatter", 4 * 7, "float32"), ("all_gather", 7, "float32"),
    ("all_to_all", 4 * 7, "int32"),
])
def test_defaults_take_any_size_on_the_default_chip(kind, n, dtype):
    """The public defaults on the RTL: no chip, no chunks; sizes whose reduce blocks are not
    whole lines; one build (the 1x4's default chip) for every case."""
    topology = topo.torus((1, 4))
    rng = np.random.default_rng(7)
    inputs = collective_inputs(kind, 4, n, dtype, rng)
    run = system.collective(kind, inputs, topology=topology, dtype=dtype, seed=7)
    want = collectives.collective(kind, inputs, topology=topology, dtype=dtype)
    assert run.out.view(np.uint32).tobytes() == want.view(np.uint32).tobytes(), \
        f"{kind} {dtype} n={n} on 1x4 with the defaults (seed 7)"
    # The 1x4's default chip (2 ports, 8 lanes) and a chunking the model chose.
    assert (run.chip["network_ports"], run.chip["lanes"]) == (2, 8)
    assert run.chunks >= 1 and run.predicted_cycles > 0
