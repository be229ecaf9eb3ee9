"""``sim.system.data_parallel_step`` on the RTL system: each chip's matmul on its MXU, then
the all-reduce, one program per chip, bit for bit against ``golden.mxu.matmul`` and
``golden.collectives.collective`` (the programs themselves are checked on the golden
system in ``tests/collectives/test_data_parallel.py``); bad input.

The RTL run is marked slow: it shares the build of ``make demo``, which runs the step and
fails on any wrong word.
"""

import numpy as np
import pytest

from golden import collectives, mxu
from golden import topology as topo
from sim import system
from verif.demo import DEMO_CHIP

from ..chip.operands import operands


@pytest.mark.slow
def test_the_step_is_bit_exact_on_a_2x2_torus(rng):
    # 16 x 8 products: 128 words, whole reduce blocks on a 2x2; two sums a block, so the
    # MXU result queue is the demo chip's and the run shares its build.
    t = topo.torus((2, 2))
    pairs = [operands(rng, 16, 13, 8, special=0.15) for _ in range(4)]
    shards, w = np.stack([x for x, _ in pairs]), pairs[0][1]
    run = system.data_parallel_step(shards, w, topology=t, chip=DEMO_CHIP)
    products = np.stack([mxu.matmul(x, w).view(np.uint32) for x in shards])
    np.testing.assert_array_equal(run.products.view(np.uint32), products)
    want = collectives.collective("all_reduce", products.reshape(4, -1), topology=t)
    np.testing.assert_array_equal(run.out.view(np.uint32).reshape(4, -1), want.view(np.uint32))
    assert run.out.shape == (4, 16, 8) and run.cycles > 0


@pytest.mark.parametrize("chip, message", [
    (dict(lanes=4), "8 lanes with an MXU, not lanes=4, mxu=True"),
    (dict(mxu=False), "8 lanes with an MXU, not lanes=8, mxu=False"),
])
def test_a_chip_the_matmul_cannot_run_on_is_refused(chip, message):
    shards, w = np.zeros((4, 16, 8), np.uint16), np.zeros((8, 8), np.uint16)
    with pytest.raises(ValueError, match=message):
        system.data_parallel_step(shards, w, topology="2x2", chip=chip)


def test_an_hbm_image_larger_than_hbm_is_refused_before_any_build():
    with pytest.raises(ValueError, match="chip 2's HBM image has 2048 words, more than 1024"):
        system.run_programs("2x2", ["halt\n"] * 4, vmem=[None] * 4,
                            hbm=[None, None, np.zeros(2048, np.uint32), None])
