"""sim.system.embedding_step: the embedding step's programs on the system RTL, bit-exact
against golden.embedding (itself checked against the single-chip golden.sparsecore) on
several topologies (the 3-D and twisted ones on the regression's Verilator builds), in both
backward modes; the programs' pushes carry exactly golden's ICI words and each owner posts
one gather of its served rows (counted from the plan, quickly); on the RTL, hbm_reads (each
owner's gather flag) equals the unique ids it owns, counted in the test; what the RTL does
not do is refused before anything is built."""

import numpy as np
import pytest

from golden import embedding as ge
from golden import tensorcore as tc
from golden.topology import torus
from sim import system
from hdl.sparsecore import WORK_FIELDS
from hdl.tensorcore.sparse_issue import work_address
from sim.kernels.embedding import FLAGS, plan_embedding
from verif.bench.embedding import GATHER_BUNDLES

from ..sparsecore import stimulus
from ..support import assert_bits


def _step(rng, chips, *, rows=29, width=8, bags=3, longest=4, specials=0.15):
    table = stimulus.table(rng, rows, width, special_density=specials)
    indices, offsets, weights, grads = [], [], [], []
    for _ in range(chips):
        lengths = stimulus.bag_lengths(rng, bags, longest=longest)
        offs = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        indices.append(stimulus.ids(rng, int(offs[-1]), rows, zipf=1.05))
        offsets.append(offs)
        weights.append(stimulus.fp32_values(rng, int(offs[-1]), special_density=specials))
        grads.append(stimulus.fp32_values(rng, (bags, width), special_density=specials))
    return table, indices, offsets, weights, grads


def _descriptors(plan, chip):
    """The (descriptor, SMEM address) pairs chip ``chip``'s program issues, in order."""
    smem = plan.smem[chip]
    found = []
    for line in plan.programs[chip].splitlines():
        if line.startswith("dma "):
            at = int(line.split()[1])
            found.append(tc.descriptor_from_words(smem[at:at + tc.DESCRIPTOR_WORDS]))
    return found


@pytest.mark.parametrize("name, topology", [
    ("2x2", torus("2x2")), ("1x5-failed", torus("1x5", failed=[2])),
    ("2x2x2", torus("2x2x2"))])
def test_the_programs_push_golden_s_words_and_gather_each_row_once(name, topology, rng):
    chips = int(topology.alive.sum())
    table, indices, offsets, weights, grads = _step(rng, chips, rows=40, bags=4)
    want = ge.step(table, indices, offsets, grads=grads, weights=weights, topology=topology,
                   optimizer="adagrad")
    plan = plan_embedding(table, indices, offsets, grads=grads, weights=weights,
                          topology=topology, optimizer="adagrad",
                          chip=dict(system.EMBEDDING_CHIP))
    pushed = 0
    for chip in plan.chips:
        for d in _descriptors(plan, chip):
            if d.remote:
                assert d.dst[1] != chip
                pushed += int(np.prod(d.counts))
            assert d.flag != FLAGS["gather"]             # the SparseCore gathers, not DMA
    assert pushed == want.ici_words == plan.ici_words
    # Each line of the programs is one bundle (the regression sizes IMEM by lines).
    assert all(len(tc.program_words(text)) == len(text.splitlines())
               for text in plan.programs if text is not None)
    # Each owner posts one gather item (when it serves a row) of its served rows.
    served = []
    for chip in plan.chips:
        items = [dict(zip(WORK_FIELDS, item)) for item in _items(plan, chip)]
        gathers = [item for item in items if item["control"] >> 6 & 1
                   and item["flag"] == FLAGS["gather"]]
        assert len(gathers) <= 1 and int(gathers[0]["table"]) == 0 if gathers else True
        served.append(int(gathers[0]["n_ids"]) if gathers else 0)
    assert served == want.hbm_reads.tolist()


def test_without_dedup_every_occurrence_is_pushed_and_read_and_phases_cut_programs(rng):
    topology = torus("2x2")
    table, indices, offsets, weights, grads = _step(rng, 4, rows=12, bags=4)
    indices[1][:3] = indices[2][:3] = 5                  # duplicates within and across chips
    plan = plan_embedding(table, indices, offsets, grads=grads, topology=topology,
                          chip=dict(system.EMBEDDING_CHIP), dedup=False)
    occurrences = np.zeros((4, 4), np.int64)
    for c, ids in enumerate(indices):
        np.add.at(occurrences[c], np.asarray(ids) % 4, 1)
    pushed = np.zeros((4, 4), np.int64)
    for chip in plan.chips:
        for d in _descriptors(plan, chip):
            if d.remote and d.flag == FLAGS["ids"]:
                pushed[chip, d.dst[1]] += int(np.prod(d.counts))
    off = ~np.eye(4, dtype=bool)
    assert np.array_equal(pushed[off], (1 + occurrences)[off])      # [N, every id]
    served = []
    for chip in plan.chips:
        items = [dict(zip(WORK_FIELDS, item)) for item in _items(plan, chip)]
        served.append(sum(int(i["n_ids"]) for i in items if i["control"] >> 6 & 1
                          and i["flag"] == FLAGS["gather"]))
    assert served == occurrences.sum(axis=0).tolist()
    want = ge.traffic(ge.plan(indices, offsets, num_rows=12, n_chips=4), 8, backward=True,
                      dedup=False)
    assert plan.ici_words == want.total
    # The phases cut each program after its phase's wait, and halt.
    for phase in ("ids", "gather", "pack", "rows", "combine", "pack_grads", "grads",
                  "update"):
        cut = plan.programs_until(phase)
        assert all(text.endswith("halt") and len(text) <= len(full)
                   for text, full in zip(cut, plan.programs))
    assert plan.programs_until("update") == plan.programs
    # The gradients' pack issues no push: their all-to-all is the grads phase alone.
    pushes = {phase: [text.count("dma ") for text in plan.programs_until(phase)]
              for phase in ("combine", "pack_grads", "grads")}
    assert pushes["combine"] == pushes["pack_grads"]
    assert all(a < b for a, b in zip(pushes["pack_grads"], pushes["grads"]))
    with pytest.raises(ValueError, match="prereduced"):
        plan_embedding(table, indices, offsets, grads=grads, topology=topology,
                       mode="prereduced", chip=dict(system.EMBEDDING_CHIP), dedup=False)


def test_pushes_go_farthest_first_in_pieces_of_half_a_push_queue(rng):
    # Messages larger than half a push port's queue (a queue is 64 beats of 4 words on
    # EMBEDDING_CHIP) are cut into pieces of at most 128 words, every message's first
    # piece before any second; each chip's ids go first to the chip across the 2x2 (two
    # hops: 3 - c), then round from the next rank, not all to rank 0; the rows go through
    # the owner's Spmem (the gather to it, the pack from it).
    topology = torus("2x2")
    table, indices, offsets, _, grads = _step(rng, 4, rows=400, width=16, bags=48, longest=8)
    plan = plan_embedding(table, indices, offsets, grads=grads, topology=topology,
                          chip=dict(system.EMBEDDING_CHIP))
    cut = 0
    for chip in plan.chips:
        descriptors = _descriptors(plan, chip)
        ids = [d.dst[1] for d in descriptors if d.remote and d.flag == FLAGS["ids"]]
        across = 3 - chip
        assert ids == [across] + [(chip + k) % 4 for k in (1, 2, 3) if (chip + k) % 4 != across]
        for flag in (FLAGS["rows"], FLAGS["grads"]):
            heads = {at for name, at in plan.areas[chip].items()
                     if name.startswith("send_head")}
            pieces = [d for d in descriptors if d.flag == flag and d.src[1] not in heads]
            assert all(np.prod(d.counts) <= 128 for d in pieces)
            to = [d.dst[1] if d.remote else chip for d in pieces]
            ordinal = [to[:k].count(t) for k, t in enumerate(to)]
            assert ordinal == sorted(ordinal), ordinal
            cut += max(ordinal, default=0)
        items = [dict(zip(WORK_FIELDS, item)) for item in _items(plan, chip)]
        spmem = {int(i["flag"]): (int(i["control"]) >> 24) & 3 for i in items
                 if int(i["control"]) >> 6 & 1}
        assert spmem[FLAGS["gather"]] == 1 and spmem[FLAGS["pack"]] == 2   # to, from
    assert cut                                  # some message was cut into pieces


def test_the_gather_item_waits_in_its_slot_for_the_ids(rng):
    # The step's first item is copied into the slot before the ids wait, so that the
    # gather phase starts with the doorbell alone (docs/system.md, bench embedding).
    table, indices, offsets, _, _ = _step(rng, 4, rows=24, bags=4)
    plan = plan_embedding(table, indices, offsets, topology=torus("2x2"),
                          chip=dict(system.EMBEDDING_CHIP))
    slot = work_address(len(plan.smem[0]))
    for chip in plan.chips:
        lines = plan.programs[chip].splitlines()
        ids = next(i for i, line in enumerate(lines) if line.startswith(f"wait f{FLAGS['ids']},"))
        gather = lines.index(next(line for line in lines
                                  if line.startswith(f"wait f{FLAGS['gather']},")))
        stores = [line for line in lines[:ids] if line.startswith("sw s2, ")]
        assert stores == [f"sw s2, {slot + i}(s0)" for i in range(len(WORK_FIELDS))]
        assert lines[ids + 1:gather] == ["li s1, 1", f"sw s1, {len(plan.smem[chip]) - 1}(s0)"]
        # The benchmark times the owner's gather by these bundles and the wait.
        assert len(lines[ids + 1:gather + 1]) == GATHER_BUNDLES


def _items(plan, chip):
    """The work items chip ``chip``'s SMEM holds below the SparseCore's slot, in post
    order."""
    smem = plan.smem[chip]
    slot, n = work_address(len(smem)), len(WORK_FIELDS)
    posts = sum(1 for line in plan.programs[chip].splitlines()
                if line.startswith("sw s1, ") and line.endswith(f"{len(smem) - 1}(s0)"))
    return [smem[slot - (k + 1) * n:slot - k * n] for k in range(posts)]


@pytest.mark.parametrize("kwargs, match", [
    (dict(mode="fast"), "mode must be one of"),
    (dict(capacity=1), "capacity overflow"),
])
def test_what_the_rtl_does_not_do_is_refused_before_a_build(kwargs, match, rng):
    table, indices, offsets, _, grads = _step(rng, 4, rows=16)
    indices[0], offsets[0] = np.array([0, 4, 8]), np.array([0, 3, 3, 3])  # 3 ids for rank 0
    if kwargs.pop("grads", False):
        kwargs["grads"] = grads
    with pytest.raises(ValueError, match=match):
        system.embedding_step(table, indices, offsets, topology="2x2", backend="amaranth",
                              **kwargs)


def _unique_per_owner(indices, chips):
    """The rows each owner serves, counted here: the distinct ids of every chip's batch
    that it owns (``id mod C``)."""
    rows = [set() for _ in range(chips)]
    for ids in indices:
        for v in np.asarray(ids).tolist():
            rows[v % chips].add(v)
    return [len(r) for r in rows]


def _check(run, want, what, indices):
    for c, (got, expected) in enumerate(zip(run.out, want.out)):
        assert_bits(got, expected, f"{what}: out of rank {c}")
    assert_bits(run.table, want.table, f"{what}: table")
    if want.state is not None:
        assert_bits(run.state, want.state, f"{what}: state")
    # hbm_reads is the RTL's count (each owner's gather flag): the unique ids it owns.
    assert run.hbm_reads.tolist() == _unique_per_owner(indices, len(indices))
    assert np.array_equal(run.hbm_reads, want.hbm_reads)
    assert run.ici_words == want.ici_words and run.cycles > 0


# A 4-chip system with a SparseCore on every chip takes the Amaranth simulator a minute or
# two (and a Verilator build several minutes): the slow tier.
@pytest.mark.slow
@pytest.mark.parametrize("name, topology, optimizer, combiner, numerics, mode", [
    ("2x2", torus("2x2"), "adagrad", "sum", "tpu", "exact"),
    ("1x4", torus("1x4"), "sgd", "mean", "ieee", "prereduced"),
    ("1x5-failed", torus("1x5", failed=[2]), "sgd", "sum", "tpu", "exact"),
    ("1x2", torus("1x2"), "adagrad", "sqrtn", "tpu", "prereduced"),
    ("1x2-rowwise", torus("1x2"), "rowwise_adagrad", "sum", "ieee", "exact"),
    ("1x3-rowwise", torus("1x3"), "rowwise_adagrad", "mean", "tpu", "prereduced"),
])
def test_the_step_is_bit_exact_on_the_rtl(name, topology, optimizer, combiner, numerics, mode,
                                          rng):
    chips = int(topology.alive.sum())
    table, indices, offsets, weights, grads = _step(rng, chips)
    kwargs = dict(grads=grads, weights=weights, topology=topology, combiner=combiner,
                  optimizer=optimizer, lr=0.25, numerics=numerics, mode=mode)
    run = system.embedding_step(table, indices, offsets, backend="amaranth", **kwargs)
    _check(run, ge.step(table, indices, offsets, **kwargs), name, indices)


# The 3-D tori on Verilator, with the chips, numerics and link latency of the
# system_embedding regression's seeds 3 and 4 (fixed sizes: the twisted 2x2x4 with and
# without a failed chip share one build; the tests' -Og builds are not the regression's).
@pytest.mark.slow
@pytest.mark.parametrize("seed, failed", [(3, ()), (4, ()), (4, (5,))])
def test_the_step_is_bit_exact_on_3d_and_twisted_tori(seed, failed, rng):
    from golden.topology import torus as make
    from verif.suites.system_embedding import stimulus as regress
    b = regress.build(seed)
    base = regress.topology_of(b)
    topology = make(base.shape, twist=base.twist, failed=failed)
    chips = int(topology.alive.sum())
    table, indices, offsets, weights, grads = _step(rng, chips, rows=3 * chips, bags=3,
                                                    longest=3)
    for mode, optimizer in (("exact", "adagrad"), ("prereduced", "sgd")):
        kwargs = dict(grads=grads, weights=weights, topology=topology, combiner="mean",
                      optimizer=optimizer, lr=0.25, numerics=b.numerics, mode=mode)
        run = system.embedding_step(table, indices, offsets, chip=b.chip,
                                    link_latency=b.link_latency, **kwargs)
        _check(run, ge.step(table, indices, offsets, **kwargs), f"{base.shape} {mode}",
               indices)
