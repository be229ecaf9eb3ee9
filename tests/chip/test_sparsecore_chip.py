# amaranth: UnusedElaboratable=no
# (The parameter tests build chips they never elaborate.)
"""A chip with a SparseCore (TensorCoreSystem(sparsecores=1)): the core posts work items in
SMEM, the SparseCore runs them on the chip's HBM (shared with the DMA engine, which moves
data in the same program) and signals their flags; the whole HBM is bit-exact against
golden.sparsecore. With sparsecores=0 (the default) the chip is built as before."""

import numpy as np
import pytest
from amaranth.back import rtlil

from golden import sparsecore as golden
from golden import tensorcore as tc
from golden.memory import Descriptor
from hdl.sparsecore import WORK_FIELDS
from hdl.tensorcore import TensorCoreSystem
from hdl.tensorcore.sparse_issue import doorbell_address, work_address
from sim import chip
from sim.sparsecore import hbm_image

from ..sparsecore import stimulus
from ..support import assert_bits

SMEM_WORDS = 1024
ROWS, ROW_WORDS = 24, 8
TABLE, IDS, WEIGHTS, ENDS, GRADS, OUT, COPY = 4096, 0, 256, 512, 1024, 2048, 3072
SECOND, DMA = 512, 256                            # SMEM words of a work item, a descriptor
#: Only the features used and a VPU of one op: a chip the Amaranth simulator compiles fast.
CHIP = {"ops": ("xor",), "sparsecores": 1,
        "sparsecore": dict(rows=ROWS, row_words=ROW_WORDS, max_ids=32, max_bags=8,
                           combiners="sum", optimizers="sgd")}


def _item(*, op, weighted=0, lr=0, n_rows, n_ids, n_bags, flag):
    fields = dict(control=op | weighted << 5, lr=lr, n_rows=n_rows, n_ids=n_ids,
                  n_bags=n_bags, table=TABLE, ids=IDS, weights=WEIGHTS, ends=ENDS,
                  grads=GRADS, out=OUT, flag=flag)
    return [fields[name] for name in WORK_FIELDS]


# Half a minute on the Amaranth simulator (most of it compiling the chip), minutes on a first
# Verilator build: the slow tier. The default suite checks the engine alone
# (tests/sparsecore/test_rtl_engine.py).
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["amaranth", "verilator"])
def test_a_lookup_then_an_update_posted_by_the_core(backend, rng):
    b = stimulus.batch(rng, rows=20, width=ROW_WORDS, n_bags=4, longest=4)
    n_bags = len(b.offsets) - 1
    hbm = np.zeros(8192, np.uint32)
    region = hbm_image(b.table, rows=ROWS, row_words=ROW_WORDS)
    hbm[TABLE:TABLE + len(region)] = region
    hbm[IDS:IDS + len(b.indices)] = b.indices.astype(np.int64) & 0xFFFFFFFF
    hbm[WEIGHTS:WEIGHTS + len(b.indices)] = b.weights
    hbm[ENDS:ENDS + n_bags] = b.offsets[1:]
    hbm[GRADS:GRADS + b.grads.size] = b.grads.reshape(-1)
    lr = int(golden.fp32_scalar(0.5))
    common = dict(n_rows=20, n_ids=len(b.indices), n_bags=n_bags)
    smem = np.zeros(SMEM_WORDS, np.uint32)
    smem[work_address(SMEM_WORDS):doorbell_address(SMEM_WORDS)] = \
        _item(op=0, weighted=1, flag=3, **common)
    smem[SECOND:SECOND + len(WORK_FIELDS)] = _item(op=1, lr=lr, flag=5, **common)
    out_words = n_bags * ROW_WORDS
    smem[DMA:DMA + tc.DESCRIPTOR_WORDS] = tc.descriptor_words(Descriptor(
        ("hbm", OUT), ("hbm", COPY), (out_words, 1, 1), (1, 0, 0), (1, 0, 0), 7))
    # Post the lookup; when its flag says it is done, copy its rows with a DMA while the
    # update (posted next, from a second item copied into place) runs on the same HBM.
    copy = [f"lw s2, {SECOND + i}(s0)\nsw s2, {work_address(SMEM_WORDS) + i}(s0)"
            for i in range(len(WORK_FIELDS))]
    program = "\n".join([
        "li s1, 1", f"sw s1, {doorbell_address(SMEM_WORDS)}(s0)", "wait f3, 1",
        f"dma s0+{DMA}", *copy, "li s1, 2", f"sw s1, {doorbell_address(SMEM_WORDS)}(s0)",
        f"wait f7, {out_words}", "wait f5, 1", "halt"])
    run = chip.run(program, hbm=hbm, smem=smem, backend=backend, chip=CHIP,
                   watchdog=4000)
    table, _ = golden.update(b.table, b.indices, b.offsets, b.grads, optimizer="sgd", lr=0.5)
    want = hbm.copy()
    want[TABLE:TABLE + len(region)] = hbm_image(table.view(np.uint32), rows=ROWS,
                                                row_words=ROW_WORDS)
    out = golden.lookup(b.table, b.indices, b.offsets, weights=b.weights)
    want[OUT:OUT + out_words] = out.view(np.uint32).reshape(-1)
    want[COPY:COPY + out_words] = out.view(np.uint32).reshape(-1)
    assert_bits(run.hbm[:len(want)], want, "the chip's HBM after a lookup and an update")
    assert run.flags[3] == 1 and run.flags[5] == 1 and run.flags[7] == out_words


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(sparsecores=2), ValueError, "sparsecores"),
    (dict(sparsecore=dict(rows=8)), ValueError, "needs sparsecores=1"),
    (dict(sparsecores=1, sparsecore=dict(numerics="ieee")), TypeError, "numerics is the chip"),
])
def test_parameters_are_checked(kwargs, error, match):
    with pytest.raises(error, match=match):
        TensorCoreSystem(**kwargs)


def test_without_a_sparsecore_the_chip_has_no_sparsecore_part():
    zero, one = TensorCoreSystem(ops=("xor",)), TensorCoreSystem(ops=("xor",), sparsecores=1)
    assert zero.engine is None and zero.sparse_issue is None and zero.system.guests == 0
    assert zero.core.smem_guests == 0
    assert set(one.signature.members) - set(zero.signature.members) == {
        "sparse_status", "sparse_batches", "sparse_hbm_reads"}


@pytest.mark.slow
def test_without_a_sparsecore_the_chip_is_unchanged():
    """sparsecores=0 (the default) builds no SparseCore part: no guest port, share or engine."""
    plain = rtlil.convert(TensorCoreSystem(ops=("xor",)))
    assert plain == rtlil.convert(TensorCoreSystem(ops=("xor",), sparsecores=0))
    assert "sparse" not in plain and "guest" not in plain
