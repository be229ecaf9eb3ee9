"""sim.system.embedding_step: the embedding step's programs on the system RTL, bit-exact
against golden.embedding (itself checked against the single-chip golden.sparsecore) on
several topologies; the programs' pushes carry exactly golden's ICI words and the owners'
gathers read each served row once (counted from the descriptors, quickly); what the RTL
does not do is refused before anything is built."""

import numpy as np
import pytest

from golden import embedding as ge
from golden import tensorcore as tc
from golden.topology import torus
from sim import system
from sim.kernels.embedding import FLAGS, plan_embedding

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
    pushed, gathered = 0, []
    for chip in plan.chips:
        for d in _descriptors(plan, chip):
            words = int(np.prod(d.counts))
            if d.remote:
                assert d.dst[1] != chip
                pushed += words
            elif d.flag == FLAGS["gather"]:
                gathered.append(words // plan.width)
    assert pushed == want.ici_words == plan.ici_words
    assert gathered == [] or sum(gathered) == len(gathered)         # one row a descriptor
    reads = [sum(1 for d in _descriptors(plan, chip) if not d.remote
                 and d.flag == FLAGS["gather"]) for chip in plan.chips]
    assert reads == want.hbm_reads.tolist() == plan.plan.hbm_reads.tolist()


@pytest.mark.parametrize("kwargs, match", [
    (dict(mode="prereduced"), "mode='prereduced' is not in the RTL programs"),
    (dict(optimizer="rowwise_adagrad", grads=True), "rowwise_adagrad"),
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


def _check(run, want, what):
    for c, (got, expected) in enumerate(zip(run.out, want.out)):
        assert_bits(got, expected, f"{what}: out of rank {c}")
    assert_bits(run.table, want.table, f"{what}: table")
    if want.state is not None:
        assert_bits(run.state, want.state, f"{what}: state")
    assert np.array_equal(run.hbm_reads, want.hbm_reads)
    assert run.ici_words == want.ici_words and run.cycles > 0


# A 4-chip system with a SparseCore on every chip takes the Amaranth simulator a minute or
# two (and a Verilator build several minutes): the slow tier.
@pytest.mark.slow
@pytest.mark.parametrize("name, topology, optimizer, combiner, numerics", [
    ("2x2", torus("2x2"), "adagrad", "sum", "tpu"),
    ("1x4", torus("1x4"), "sgd", "mean", "ieee"),
    ("1x5-failed", torus("1x5", failed=[2]), "sgd", "sum", "tpu"),
])
def test_the_step_is_bit_exact_on_the_rtl(name, topology, optimizer, combiner, numerics, rng):
    chips = int(topology.alive.sum())
    table, indices, offsets, weights, grads = _step(rng, chips)
    kwargs = dict(grads=grads, weights=weights, topology=topology, combiner=combiner,
                  optimizer=optimizer, lr=0.25, numerics=numerics)
    run = system.embedding_step(table, indices, offsets, backend="amaranth", **kwargs)
    _check(run, ge.step(table, indices, offsets, **kwargs), name)
