# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct components whose __init__ raises.)
"""The SparseCore engine: a tile with its table in a shared HBM (hbm="port"), fed from work
items. Batch after batch on one engine (the tile reset and its dedup map wiped in between),
lookups and updates equal golden.sparsecore bit for bit, whatever the HBM jitter; words
outside the batch's regions keep their bits; a bad id or a batch too large writes nothing,
sets the status and still signals the flag."""

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from golden import sparsecore as golden
from hdl.memory import HBM
from hdl.memory.layouts import flag_add_layout
from hdl.sparsecore.engine import STATUSES, SparseCoreEngine, work_layout
from sim.sparsecore import hbm_image

from ..support import assert_bits, pack_lines, simulate, unpack_lines
from . import stimulus

HBM_WORDS = 4096
ROWS, ROW_WORDS = 32, 16
TABLE = 1024                                   # word addresses of the regions
IDS, WEIGHTS, ENDS, GRADS, OUT, OUT2 = 0, 128, 256, 384, 2048, 3072


class EngineOnHBM(wiring.Component):
    def __init__(self, *, words_per_cycle, jitter, tile, spmem_rows=0):
        self.wpc = words_per_cycle
        self.hbm = HBM(size=HBM_WORDS, words_per_cycle=words_per_cycle, read_latency=5,
                       jitter=jitter, max_outstanding=8 * words_per_cycle)
        self.engine = SparseCoreEngine(tile=dict(tile, words_per_cycle=words_per_cycle),
                                       addr_width=self.hbm.addr_width, depth=8,
                                       spmem_rows=spmem_rows)
        super().__init__({"work": In(stream.Signature(work_layout(self.hbm.addr_width))),
                          "flag_add": Out(stream.Signature(flag_add_layout))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.hbm = hbm = self.hbm
        m.submodules.engine = engine = self.engine
        wiring.connect(m, engine.hbm, hbm.port)
        wiring.connect(m, wiring.flipped(self.work), engine.work)
        wiring.connect(m, engine.flag_add, wiring.flipped(self.flag_add))
        m.d.comb += [hbm.start.eq(1), hbm.seed.eq(99)]
        return m


def _tile(rows=ROWS, combiners="sum", optimizers="sgd"):
    # Just the features a test uses: the smaller tile simulates faster.
    return dict(rows=rows, row_words=ROW_WORDS, max_ids=32, max_bags=8,
                combiners=combiners, optimizers=optimizers)


def _work(dut, *, op, combiner=0, optimizer=0, weighted=0, lr=0, n_rows, n_ids, n_bags,
          flag, out=OUT, table=TABLE, ids=IDS, gather=0, columns=0, to_spmem=0,
          from_spmem=0):
    # Spmem sides are given in lines already.
    lines = {name: word // dut.wpc for name, word in dict(
        table=table, ids=ids, weights=WEIGHTS, ends=ENDS, grads=GRADS, out=out).items()}
    lines |= {"out": out} if to_spmem else {}
    lines |= {"table": table} if from_spmem else {}
    return {"op": op, "combiner": combiner, "optimizer": optimizer, "weighted": weighted,
            "gather": gather, "columns": columns, "to_spmem": to_spmem,
            "from_spmem": from_spmem, "lr": lr, "n_rows": n_rows, "n_ids": n_ids,
            "n_bags": n_bags, **lines, "flag": flag}


def _run(dut, image, works, cycles=None):
    """Load ``image``, play ``works`` one after another (each after the last one's flag),
    and return the final image, the flag adds and the status after each; ``cycles``, a
    list if given, gets the cycles from each item's acceptance to its flag add."""
    flags, statuses = [], []
    cycles = [] if cycles is None else cycles

    async def bench(ctx):
        for index, line in enumerate(pack_lines(image, dut.wpc)):
            ctx.set(dut.hbm.words[index], line)
        for work in works:
            ctx.set(dut.work.payload, work)
            ctx.set(dut.work.valid, 1)
            await ctx.tick().until(dut.work.ready)
            ctx.set(dut.work.valid, 0)
            ctx.set(dut.flag_add.ready, 1)
            for cycle in range(20000):
                _, _, valid, payload = await ctx.tick().sample(dut.flag_add.valid,
                                                               dut.flag_add.payload)
                if valid:
                    cycles.append(cycle)
                    break
            else:
                raise AssertionError("no flag add: the engine hung")
            ctx.set(dut.flag_add.ready, 0)
            flags.append((int(payload.flag), int(payload.amount)))
            await ctx.tick()
            statuses.append(STATUSES[ctx.get(dut.engine.status)])
        final = [ctx.get(dut.hbm.words[i]) for i in range(dut.hbm.words.depth)]
        result.append(unpack_lines(final, dut.wpc))

    result = []
    simulate(dut, bench)
    return result[0], flags, statuses


def _image(table, state, indices, weights, offsets, grads):
    image = np.zeros(HBM_WORDS, np.uint32)
    region = hbm_image(table, state, rows=ROWS, row_words=ROW_WORDS)
    image[TABLE:TABLE + len(region)] = region
    image[IDS:IDS + len(indices)] = np.asarray(indices, np.int64) & 0xFFFFFFFF
    image[WEIGHTS:WEIGHTS + len(weights)] = weights
    image[ENDS:ENDS + len(offsets) - 1] = offsets[1:]
    if grads is not None:
        image[GRADS:GRADS + grads.size] = grads.reshape(-1)
    image[OUT - 8:OUT] = 0xDEADBEEF                          # guards around the outputs
    image[OUT2 - 8:OUT2] = 0xDEADBEEF
    return image


# The scVPU's dividers and square roots take the Amaranth simulator half a minute to
# compile: the default suite runs the sum and SGD tile, the slow tier the others.
@pytest.mark.parametrize("words_per_cycle, jitter, numerics, combiner, optimizer", [
    (4, 3, "ieee", "sum", "sgd"),
    pytest.param(1, 0, "tpu", "sqrtn", "adagrad", marks=pytest.mark.slow),
    pytest.param(8, 2, "ieee", "mean", "adagrad", marks=pytest.mark.slow)])
def test_lookups_and_an_update_batch_after_batch(words_per_cycle, jitter, numerics, combiner,
                                                 optimizer, rng):
    dut = EngineOnHBM(words_per_cycle=words_per_cycle, jitter=jitter,
                      tile=dict(_tile(combiners=combiner, optimizers=optimizer),
                                numerics=numerics))
    b = stimulus.batch(rng, rows=20, width=ROW_WORDS, n_bags=5, longest=4)
    b.indices[:3] = b.indices[0]                                  # a hot id
    n_bags = len(b.offsets) - 1
    state = None if optimizer == "sgd" else \
        stimulus.fp32_values(rng, (20, ROW_WORDS)) & np.uint32(0x7FFFFFFF)
    image = _image(b.table, state, b.indices, b.weights, b.offsets, b.grads)
    lr = int(golden.fp32_scalar(0.25))
    common = dict(n_rows=20, n_ids=len(b.indices), n_bags=n_bags)
    code = ("sum", "mean", "sqrtn").index(combiner)
    works = [_work(dut, op=0, combiner=code, weighted=1, flag=3, out=OUT2, **common),
             _work(dut, op=1, optimizer=int(optimizer == "adagrad"), lr=lr, flag=5, **common),
             _work(dut, op=0, combiner=code, flag=3, **common)]
    final, flags, statuses = _run(dut, image, works)
    assert flags == [(3, 1), (5, 1), (3, 1)] and statuses == ["ok"] * 3

    table, new_state = golden.update(b.table, b.indices, b.offsets, b.grads,
                                     optimizer=optimizer, lr=0.25, state=state,
                                     numerics=numerics)
    want = _image(table.view(np.uint32), None if state is None else new_state.view(np.uint32),
                  b.indices, b.weights, b.offsets, b.grads)
    # The first lookup (weighted, on the table before the update) and the last (unweighted,
    # after it) are in their output regions.
    first = golden.lookup(b.table, b.indices, b.offsets, combiner=combiner, weights=b.weights,
                          numerics=numerics)
    last = golden.lookup(table, b.indices, b.offsets, combiner=combiner, numerics=numerics)
    want[OUT2:OUT2 + first.size] = first.view(np.uint32).reshape(-1)
    want[OUT:OUT + last.size] = last.view(np.uint32).reshape(-1)
    assert_bits(final, want, "the whole HBM after a lookup, an update and a lookup")


def test_a_bad_batch_writes_nothing_and_still_signals(rng):
    dut = EngineOnHBM(words_per_cycle=1, jitter=0, tile=_tile())
    b = stimulus.batch(rng, rows=20, width=ROW_WORDS, n_bags=3, longest=4)
    indices = b.indices.astype(np.int64)
    indices[-1] = -3
    image = _image(b.table, None, indices, b.weights, b.offsets, b.grads)
    common = dict(n_ids=len(indices), n_bags=len(b.offsets) - 1, flag=1)
    works = [_work(dut, op=1, lr=int(golden.fp32_scalar(0.5)), n_rows=20, **common),
             _work(dut, op=0, n_rows=ROWS + 1, **common),
             _work(dut, op=1, n_rows=20, columns=ROW_WORDS + 1, **common)]
    final, flags, statuses = _run(dut, image, works)
    assert statuses == ["bad_id", "too_large", "too_large"]
    assert flags == [(1, 1), (1, 1), (1, 1)]
    assert_bits(final, image, "the HBM after refused batches")


@pytest.mark.parametrize("words_per_cycle, jitter", [
    (4, 3), pytest.param(1, 0, marks=pytest.mark.slow)])     # a build of its own
def test_a_gather_copies_each_row_once_bit_for_bit_and_counts_them(words_per_cycle, jitter,
                                                                    rng):
    # The owner's gather of the embedding step: rows copied unchanged (-0.0, NaN payloads
    # and subnormals included), in id order; the flag gets the rows read; a lookup after
    # it on the same engine still works.
    dut = EngineOnHBM(words_per_cycle=words_per_cycle, jitter=jitter, tile=_tile())
    table = stimulus.fp32_values(rng, (20, ROW_WORDS), special_density=0.3)
    table[5, :3] = [0x80000000, 0x7FC00001, 0x00000001]
    served = np.array([5, 0, 19, 7, 11], np.int64)
    b = stimulus.batch(rng, rows=20, width=ROW_WORDS, n_bags=3, longest=3)
    image = _image(table, None, served, served, np.array([0, len(served)]), None)
    image[ENDS:ENDS + len(b.offsets) - 1] = b.offsets[1:]
    work = _work(dut, op=0, n_rows=20, n_ids=len(served), n_bags=0, flag=4, gather=1)
    final, flags, statuses = _run(dut, image, [work])
    assert flags == [(4, len(served))] and statuses == ["ok"]
    want = image.copy()
    want[OUT:OUT + served.size * ROW_WORDS] = table[served].reshape(-1)
    assert_bits(final, want, "the HBM after a gather")
    # An id past n_rows: nothing from it on is read, the status says so.
    bad = _work(dut, op=0, n_rows=11, n_ids=len(served), n_bags=0, flag=4, gather=1)
    final, flags, statuses = _run(dut, image, [bad])
    assert statuses == ["bad_id"] and flags == [(4, 2)]


def test_a_gather_stages_rows_in_spmem_then_packs_them_into_hbm(rng):
    # The owner's gather into Spmem (nothing in the HBM changes), then a gather from Spmem
    # into messages in the HBM: rows repeat, in any order, bits unchanged, each flag
    # counting the rows read.
    dut = EngineOnHBM(words_per_cycle=4, jitter=0, tile=_tile(), spmem_rows=32)
    table = stimulus.fp32_values(rng, (20, ROW_WORDS), special_density=0.3)
    table[5, :3] = [0x80000000, 0x7FC00001, 0x00000001]
    served = rng.permutation(20)[:18].astype(np.int64)
    pack = np.array([3, 0, 17, 3, 9, 0, 12, 5], np.int64)       # rows of the staging area
    image = _image(table, None, served, served, np.array([0, len(served)]), None)
    image[WEIGHTS:WEIGHTS + len(pack)] = pack
    at = 2 * ROW_WORDS // 4                                      # Spmem line of row 0
    stage = _work(dut, op=0, n_rows=20, n_ids=len(served), n_bags=0, flag=4, gather=1,
                  out=at, to_spmem=1)
    cycles = []
    final, flags, statuses = _run(dut, image, [stage], cycles)
    assert flags == [(4, len(served))] and statuses == ["ok"]
    assert_bits(final, image, "the HBM after a gather into Spmem")
    # Back to back: 72 row lines and 5 lines of ids through one port, 5 cycles of read
    # latency and a few of hand-over; with a bubble between rows it would be 18 more.
    assert cycles[0] <= 72 + 5 + 5 + 8, cycles

    packed = _work(dut, op=0, n_rows=len(served), n_ids=len(pack), n_bags=0, flag=6,
                   gather=1, ids=WEIGHTS, table=at, from_spmem=1)
    final, flags, statuses = _run(dut, image, [stage, packed])
    assert flags == [(4, len(served)), (6, len(pack))] and statuses == ["ok", "ok"]
    want = image.copy()
    want[OUT:OUT + pack.size * ROW_WORDS] = table[served[pack]].reshape(-1)
    assert_bits(final, want, "the HBM after a gather from Spmem")


def test_spmem_items_that_cannot_run_are_refused(rng):
    # Past the Spmem, or a Spmem side on an engine without one or on a tile batch: nothing
    # written, the status says why, the flag still gets 1.
    with_spmem = EngineOnHBM(words_per_cycle=4, jitter=0, tile=_tile(), spmem_rows=4)
    without = EngineOnHBM(words_per_cycle=4, jitter=0, tile=_tile())
    b = stimulus.batch(rng, rows=20, width=ROW_WORDS, n_bags=3, longest=3)
    image = _image(b.table, None, b.indices, b.weights, b.offsets, None)
    common = dict(op=0, n_rows=20, n_ids=5, n_bags=0, flag=2, gather=1)
    final, flags, statuses = _run(with_spmem, image, [
        _work(with_spmem, **common, to_spmem=1, out=0),                      # 5 rows > 4
        _work(with_spmem, **common, to_spmem=1, out=4),
        _work(with_spmem, **dict(common, n_ids=1), table=0, from_spmem=1),   # 20 rows > 4
        _work(with_spmem, op=0, n_rows=20, n_ids=len(b.indices),
              n_bags=len(b.offsets) - 1, flag=2, to_spmem=1, out=0)])
    assert statuses == ["too_large", "too_large", "too_large", "unsupported"]
    assert flags == [(2, 1)] * 4
    assert_bits(final, image, "the HBM after refused Spmem items")
    final, flags, statuses = _run(without, image, [_work(without, **common, to_spmem=1,
                                                         out=0)])
    assert statuses == ["unsupported"] and flags == [(2, 1)]
    assert_bits(final, image, "the HBM after a Spmem item on an engine without one")


def test_parameters_are_checked():
    with pytest.raises(TypeError, match="hbm= is set here"):
        SparseCoreEngine(tile=dict(hbm="model"), addr_width=12)
    with pytest.raises(ValueError, match="addr_width"):
        SparseCoreEngine(tile=_tile(rows=64), addr_width=3)
