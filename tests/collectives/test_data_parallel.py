"""The data-parallel step's chip programs (sim.kernels.data_parallel) on the golden
multi-chip system: each chip's matmul, the bridge and the all-reduce, bit-exact against
golden.mxu.matmul then golden.collectives.collective; a missing wait is caught; bad
arguments raise."""

import numpy as np
import pytest

from golden import collectives as gc
from golden.system import run_system
from golden.topology import torus
from sim.kernels.data_parallel import plan_data_parallel

from ..chip.operands import expected, operands

TOPOLOGIES = {
    "1x4": torus((1, 4)),
    "2x2": torus((2, 2)),
    "2x2x2": torus((2, 2, 2)),
    "2x4-twisted": torus((2, 4), twist=True),
    "2x4-failed3": torus((2, 4), failed=(3,)),
}


def _rows(t):
    """Batch rows a shard so that its 8-column products are whole reduce blocks: the
    all-reduce needs multiples of C * shards * 2 * lanes words."""
    c = int(t.alive.sum())
    return c * len(gc._plan(t).axes) * 2


def _operands(rng, t, *, m=None, k=11, n=8):
    c = int(t.alive.sum())
    pairs = [operands(rng, m or _rows(t), k, n, special=0.15) for _ in range(c)]
    return np.stack([x for x, _ in pairs]), pairs[0][1]


def _run(plan, programs=None, numerics="tpu"):
    return run_system(plan.programs if programs is None else programs, vmem=plan.vmem,
                      smem=plan.smem, hbm=plan.hbm, n_chips=len(plan.programs),
                      n_flags=plan.n_flags, lanes=8, vmem_lines=plan.vmem_lines,
                      numerics=numerics)


def _expected(shards, w, t, *, activation, numerics):
    products = np.stack([expected(x, w, activation=activation, numerics=numerics).ravel()
                         for x in shards])
    return gc.collective("all_reduce", products, topology=t, numerics=numerics)


@pytest.mark.parametrize("numerics", ["tpu", "ieee"])
@pytest.mark.parametrize("name", list(TOPOLOGIES))
def test_the_step_matches_golden(rng, name, numerics):
    t = TOPOLOGIES[name]
    shards, w = _operands(rng, t)
    plan = plan_data_parallel(shards, w, topology=t)
    run = _run(plan, numerics=numerics)
    want = _expected(shards, w, t, activation=None, numerics=numerics)
    got = plan.result(run.vmem)
    assert got.shape == (len(shards), _rows(t), 8)
    np.testing.assert_array_equal(got.reshape(want.shape), want.view(np.uint32))


@pytest.mark.parametrize("chunks", [2, 3])
def test_relu_and_chunks(rng, chunks):
    t = TOPOLOGIES["2x2"]
    shards, w = _operands(rng, t, m=2 * _rows(t), k=20, n=4)     # N padded to a tile
    plan = plan_data_parallel(shards, w, topology=t, activation="relu", chunks=chunks)
    want = _expected(shards, w, t, activation="relu", numerics="tpu")
    np.testing.assert_array_equal(plan.result(_run(plan).vmem).reshape(want.shape),
                                  want.view(np.uint32))


def test_the_parts_keep_to_their_own_memories(rng):
    t = TOPOLOGIES["2x2"]
    plan = plan_data_parallel(*_operands(rng, t), topology=t)
    coll, mm = plan.collective, plan.matmul
    bridge = coll.smem_words
    assert mm.out_flag == coll.n_flags + 2                  # the bridge's flag between
    assert plan.n_flags >= mm.out_flag + 1
    assert mm.vmem.size // 8 == plan.vmem_lines > coll.vmem_lines
    assert mm.smem.size == plan.smem_words > bridge
    for chip, program in enumerate(plan.programs):
        # The matmul first, the bridge, then the all-reduce's own program.
        assert program.endswith(coll.programs[chip])
        assert f"dma {bridge}\nwait f{coll.n_flags}, {_rows(t) * 8}\n" in program


def test_the_all_reduce_waits_for_the_bridge(rng):
    t = TOPOLOGIES["2x2"]
    plan = plan_data_parallel(*_operands(rng, t), topology=t)
    wait = f"wait f{plan.collective.n_flags}, {_rows(t) * 8}\n"
    skipped = [p.replace(wait, "") for p in plan.programs]
    # Reading or pushing the buffer before the bridge's DMA has landed is a race.
    with pytest.raises(ValueError, match="race"):
        _run(plan, skipped)


def test_bad_arguments_are_one_line_errors(rng):
    t = TOPOLOGIES["2x2"]
    shards, w = _operands(rng, t)
    with pytest.raises(ValueError, match=r"shards must be \[C, M, K\] with C = 4"):
        plan_data_parallel(shards[:3], w, topology=t)
    with pytest.raises(ValueError, match="the all-reduce of 3x8 products: .* M\\*N must be a multiple of C\\*K\\*2\\*lanes = 128, not 24"):
        plan_data_parallel(shards[:, :3], w, topology=t)
    with pytest.raises(ValueError, match="their K differ"):
        plan_data_parallel(shards, w[:5], topology=t)
    with pytest.raises(ValueError, match="use fewer chunks"):
        plan_data_parallel(shards, w, topology=t, chunks=60)
    with pytest.raises(ValueError, match="32768 words a chip, more than a wait operand"):
        plan_data_parallel(np.zeros((4, 4096, 8), np.uint16), w, topology=t)
