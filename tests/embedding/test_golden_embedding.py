"""golden.embedding: the multi-chip step equals the single-chip golden.sparsecore (forward per
chip on the whole table, the exact update on the concatenated batch) on every topology and in
both numerics; the prereduced mode follows its own documented order (a SoftFloat oracle and a
hand-derived case); ICI words follow the documented formula (counted by hand); bad ids and
capacity overflows raise naming chip, position and pair before anything moves."""

import numpy as np
import pytest
import softfloatpy as sf

from golden import embedding as emb
from golden import sparsecore as sc
from golden.formats import NUMERICS
from golden.topology import torus

from ..sparsecore import oracle_sparsecore as oracle
from ..sparsecore import stimulus
from ..support import assert_bits

NEG_ZERO, ONE = 0x80000000, 0x3F800000

TOPOLOGIES = {
    "1x4": lambda: torus("1x4"),
    "2x2": lambda: torus("2x2"),
    "2x2x2": lambda: torus("2x2x2"),
    "2x2x4-twisted": lambda: torus("2x2x4", twist=True),
    "2x3-failed": lambda: torus("2x3", failed=[(0, 1)]),
}


@pytest.fixture(autouse=True)
def _round_to_nearest_even():
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)


def _live(topology):
    return int(topology.alive.sum())


def _batches(rng, chips, rows, width, *, n_bags=6, longest=8, zipf=None, specials=0.15):
    """Per-chip CSR batches, weights and gradients (bit patterns), specials mixed in."""
    indices, offsets, weights, grads = [], [], [], []
    for _ in range(chips):
        lengths = stimulus.bag_lengths(rng, n_bags, longest=longest)
        offs = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        n = int(offs[-1])
        indices.append(stimulus.ids(rng, n, rows, zipf=zipf))
        offsets.append(offs)
        weights.append(stimulus.fp32_values(rng, n, special_density=specials))
        grads.append(stimulus.fp32_values(rng, (n_bags, width), special_density=specials))
    return indices, offsets, weights, grads


def _concatenated(indices, offsets, grads):
    """The whole batch, chip-major: what the exact mode must equal."""
    shift = np.cumsum([0] + [len(i) for i in indices])
    offs = np.concatenate([[0]] + [np.asarray(o[1:]) + shift[c] for c, o in enumerate(offsets)])
    return np.concatenate(indices), offs, np.concatenate(grads)


def _state(rng, optimizer, rows, width):
    if optimizer == "sgd":
        return None
    shape = (rows,) if optimizer == "rowwise_adagrad" else (rows, width)
    bits = stimulus.fp32_values(rng, shape)
    return np.where(rng.random(shape) < 0.8, bits & np.uint32(0x7FFFFFFF), bits).astype(np.uint32)


# ---------------------------------------------------------------- against golden.sparsecore

@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("name", TOPOLOGIES)
def test_forward_equals_single_chip_lookup(name, numerics, rng):
    topology = TOPOLOGIES[name]()
    chips = _live(topology)
    for combiner in sc.COMBINERS:
        for weighted in (False, True):
            rows, width = int(rng.integers(1, 40)), int(rng.choice([1, 3, 8]))
            table = stimulus.table(rng, rows, width)
            indices, offsets, weights, _ = _batches(rng, chips, rows, width,
                                                    zipf=rng.choice([None, 1.05]))
            run = emb.step(table, indices, offsets, topology=topology, combiner=combiner,
                           weights=weights if weighted else None, numerics=numerics)
            assert run.cycles is None and len(run.out) == chips
            for c in range(chips):
                want = sc.lookup(table, indices[c], offsets[c], combiner=combiner,
                                 weights=weights[c] if weighted else None, numerics=numerics)
                assert_bits(run.out[c], want, f"{name} {combiner} weighted={weighted} rank {c}")
            assert_bits(run.table, table, "the table after a forward")
            assert run.state is None


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("optimizer", sc.OPTIMIZERS)
@pytest.mark.parametrize("name", TOPOLOGIES)
def test_exact_update_equals_update_on_the_concatenated_batch(name, optimizer, numerics, rng):
    topology = TOPOLOGIES[name]()
    chips = _live(topology)
    for trial in range(2):
        rows, width = int(rng.integers(1, 48)), int(rng.choice([1, 8, 16]))
        table = stimulus.table(rng, rows, width)
        indices, offsets, _, grads = _batches(rng, chips, rows, width, zipf=1.05)
        state = None if trial == 0 else _state(rng, optimizer, rows, width)
        run = emb.step(table, indices, offsets, grads=grads, topology=topology,
                       optimizer=optimizer, lr=0.25, state=state, numerics=numerics)
        want_table, want_state = sc.update(table, *_concatenated(indices, offsets, grads),
                                           optimizer=optimizer, lr=0.25, state=state,
                                           numerics=numerics)
        assert_bits(run.table, want_table, f"{name} {optimizer} table, trial {trial}")
        if optimizer == "sgd":
            assert run.state is None
        else:
            assert_bits(run.state, want_state, f"{name} {optimizer} state, trial {trial}")


def test_results_do_not_depend_on_the_topology(rng):
    """The same 4-chip batch on a ring, a torus, a mesh and a 5-chip box with a failed chip."""
    rows, width = 29, 8
    table = stimulus.table(rng, rows, width)
    indices, offsets, weights, grads = _batches(rng, 4, rows, width, zipf=1.05)
    state = _state(rng, "adagrad", rows, width)
    for mode in emb.MODES:
        runs = [emb.step(table, indices, offsets, grads=grads, weights=weights, topology=t,
                         combiner="sqrtn", optimizer="adagrad", state=state, mode=mode)
                for t in (torus("1x4"), torus("2x2"), torus("2x2", wrap=False),
                          torus("1x5", failed=[2]))]
        for run in runs[1:]:
            for c in range(4):
                assert_bits(run.out[c], runs[0].out[c], f"{mode} out rank {c}")
            assert_bits(run.table, runs[0].table, f"{mode} table")
            assert_bits(run.state, runs[0].state, f"{mode} state")
            assert run.ici_words == runs[0].ici_words
            assert np.array_equal(run.hbm_reads, runs[0].hbm_reads)


# ---------------------------------------------------------------- prereduced: its own golden

def _oracle_prereduced(table, indices, offsets, grads, optimizer, lr, state, numerics, chips):
    """SoftFloat: each chip sums its ids' gradients in position order from +0.0; each owner
    sums the partials from +0.0 in source-rank order, then applies the optimizer once."""
    width = len(table[0])
    partials = []                                  # [(source, id, partial)], source-major
    for c in range(chips):
        sums = {}
        for b in range(len(offsets[c]) - 1):
            for k in range(offsets[c][b], offsets[c][b + 1]):
                row = sums.setdefault(indices[c][k], [0] * width)
                for d in range(width):
                    row[d] = oracle.add(row[d], grads[c][b][d], numerics)
        partials += [(c, i, g) for i, g in sums.items()]
    # One bag of one id per partial, sources in rank order: oracle.update folds each id's
    # bags from +0.0 in that order.
    ids = [i for _, i, _ in partials]
    return oracle.update(table, ids, list(range(len(ids) + 1)), [g for _, _, g in partials],
                         optimizer, lr, state, numerics)


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("optimizer", sc.OPTIMIZERS)
def test_prereduced_matches_its_oracle(optimizer, numerics, rng):
    topology = torus("2x2")
    for trial in range(3):
        rows, width = int(rng.integers(1, 20)), int(rng.choice([1, 8, 9]))
        table = stimulus.table(rng, rows, width)
        indices, offsets, _, grads = _batches(rng, 4, rows, width, n_bags=4, longest=5,
                                              zipf=1.05)
        state = _state(rng, optimizer, rows, width)
        lr = 0.125
        run = emb.step(table, indices, offsets, grads=grads, topology=topology,
                       optimizer=optimizer, lr=lr, state=state, mode="prereduced",
                       numerics=numerics)
        want_table, want_state, _ = _oracle_prereduced(
            table.tolist(), [i.tolist() for i in indices], [o.tolist() for o in offsets],
            [g.tolist() for g in grads], optimizer, int(sc.fp32_scalar(lr)),
            None if state is None else state.tolist(), numerics, 4)
        assert_bits(run.table, np.array(want_table, np.uint32), f"{optimizer} table {trial}")
        if state is not None:
            assert_bits(run.state, np.array(want_state, np.uint32), f"{optimizer} state {trial}")


def test_prereduced_by_hand():
    """1x2, one row (id 0, owned by rank 0), D = 1, SGD with lr 1 on a row of 0.0, "ieee".

    Rank 0: one bag [0] with gradient 2^24. Rank 1: bags [0] and [0], gradients 1 and 1.
    exact: G = ((+0 + 2^24) + 1) + 1; 2^24 + 1 ties to even, 2^24, twice: G = 2^24, row
    -16777216.0. prereduced: rank 0's partial 2^24, rank 1's 1 + 1 = 2 (exact), G = (+0 +
    2^24) + 2 = 2^24 + 2 (exact): row -16777218.0.
    ICI words (D = 1; the pair 1 -> 0 carries U = 1, N = 2, B = 2; 0 -> 1 carries nothing):
    ids 1 + 1 (1 -> 0) and 1 + 0 (0 -> 1), rows 1*1 (0 -> 1): 4 in the forward; exact grads
    1 + 2*(1 + 1) + 2 = 7 (1 -> 0) and 1 + 0 (0 -> 1): 12 in all; prereduced grads 1*1
    (1 -> 0) and 0: 5 in all.
    """
    table = np.zeros((1, 1), np.float32)
    indices = [np.array([0]), np.array([0, 0])]
    offsets = [np.array([0, 1]), np.array([0, 1, 2])]
    grads = [np.array([[2.0 ** 24]], np.float32), np.array([[1.0], [1.0]], np.float32)]
    common = dict(grads=grads, topology="1x2", lr=1.0, numerics="ieee")
    exact = emb.step(table, indices, offsets, **common)
    pre = emb.step(table, indices, offsets, mode="prereduced", **common)
    assert exact.table[0, 0] == np.float32(-16777216.0)
    assert pre.table[0, 0] == np.float32(-16777218.0)
    assert exact.ici_words == 12 and pre.ici_words == 5
    assert exact.hbm_reads.tolist() == [1, 0]


def test_prereduced_equals_exact_when_no_id_is_on_two_chips(rng):
    """Sources never share an id: each owner's fold has one partial, +0.0 + P = P (but -0.0:
    in both modes the partial itself started from +0.0, so it is never -0.0 unless its only
    term was, and then exact's fold gives +0.0 as well)."""
    rows, width = 40, 8
    table = stimulus.table(rng, rows, width)
    indices, offsets, _, grads = _batches(rng, 4, rows // 4, width, zipf=1.05)
    indices = [i.astype(np.int64) * 4 + c for c, i in enumerate(indices)]  # disjoint per chip
    for optimizer in sc.OPTIMIZERS:
        runs = [emb.step(table, indices, offsets, grads=grads, topology="2x2",
                         optimizer=optimizer, mode=mode) for mode in emb.MODES]
        assert_bits(runs[1].table, runs[0].table, f"{optimizer} table")


# ---------------------------------------------------------------- edge cases

@pytest.mark.parametrize("numerics", NUMERICS)
def test_edge_cases(numerics, rng):
    """Empty bags, a bag of one -0.0 row, duplicates within a bag and across chips, an id
    hot on every chip, untouched rows keep their bits, NaN/inf/subnormals everywhere."""
    rows, width, chips = 13, 8, 4
    table = stimulus.table(rng, rows, width, special_density=0.4)
    table[5] = NEG_ZERO
    table[11] = 0x7F800001                        # signalling NaN: canonicalized if touched
    table[12] = 0x00000001                        # subnormal: flushed in "tpu" if touched
    hot = 7
    indices = [np.array([], np.int64), np.array([5]), np.array([hot, hot, 3, hot, 3]),
               np.array([hot, 0, hot, 1, 2])]
    offsets = [np.array([0, 0, 0]), np.array([0, 1]), np.array([0, 0, 3, 5, 5]),
               np.array([0, 2, 5])]
    indices[0], offsets[0] = np.array([hot]), np.array([0, 0, 1, 1])   # empty bags around one
    weights = [stimulus.fp32_values(rng, len(i), special_density=0.5) for i in indices]
    grads = [stimulus.fp32_values(rng, (len(o) - 1, width), special_density=0.5)
             for o in offsets]
    state = _state(rng, "adagrad", rows, width)
    state[4] = 0x00000001
    for combiner in sc.COMBINERS:
        run = emb.step(table, indices, offsets, grads=grads, weights=weights, topology="2x2",
                       combiner=combiner, optimizer="adagrad", state=state, numerics=numerics)
        for c in range(chips):
            want = sc.lookup(table, indices[c], offsets[c], combiner=combiner,
                             weights=weights[c], numerics=numerics)
            assert_bits(run.out[c], want, f"{combiner} rank {c}")
        unweighted = emb.step(table, indices, offsets, topology="2x2", combiner=combiner,
                              numerics=numerics)
        assert unweighted.out[1].view(np.uint32).tolist() == [[0] * width]   # +0.0, not -0.0
        assert not unweighted.out[0].view(np.uint32)[[0, 2]].any()             # empty bags
        want_table, want_state = sc.update(table, *_concatenated(indices, offsets, grads),
                                           optimizer="adagrad", state=state, lr=0.01,
                                           numerics=numerics)
        assert_bits(run.table, want_table, "table")
        assert_bits(run.state, want_state, "state")
    untouched = np.setdiff1d(np.arange(rows), np.concatenate(indices))
    assert set(untouched) >= {4, 6, 11, 12}
    assert np.array_equal(run.table.view(np.uint32)[untouched], table[untouched])
    assert np.array_equal(run.state.view(np.uint32)[untouched], state[untouched])
    # The hot id is read once, by its owner (7 mod 4 = 3), though every chip asks for it.
    assert run.hbm_reads.tolist() == [1, 2, 1, 2]     # {0}, {5, 1}, {2}, {7, 3}


def test_inputs_are_not_modified(rng):
    table = stimulus.table(rng, 16, 8)
    indices, offsets, weights, grads = _batches(rng, 4, 16, 8)
    state = _state(rng, "rowwise_adagrad", 16, 8)
    before = [table.copy(), state.copy()] + [x.copy() for x in indices + grads + weights]
    emb.step(table, indices, offsets, grads=grads, weights=weights, topology="2x2",
             optimizer="rowwise_adagrad", state=state)
    after = [table, state] + indices + grads + weights
    assert all(np.array_equal(a, b) for a, b in zip(before, after))


# ---------------------------------------------------------------- traffic

def _count_words(indices, offsets, chips, width, *, mode, dedup=True):
    """ICI words of the documented messages, counted pair by pair with plain loops."""
    total = 0
    for c in range(chips):
        for o in range(chips):
            if c == o:
                continue
            mine = [i for i in indices[c].tolist() if i % chips == o]
            unique = list(dict.fromkeys(mine)) if dedup else mine
            bags = sum(any(i % chips == o for i in indices[c][lo:hi].tolist())
                       for lo, hi in zip(offsets[c][:-1], offsets[c][1:]))
            total += 1 + len(unique) + width * len(unique)           # ids, rows
            if mode == "exact":
                total += 1 + bags * (1 + width) + len(mine)
            elif mode == "prereduced":
                total += width * len(unique)
    return total


@pytest.mark.parametrize("name", ["1x4", "2x2x2", "2x3-failed"])
def test_ici_words_and_hbm_reads_follow_the_formula(name, rng):
    topology = TOPOLOGIES[name]()
    chips = _live(topology)
    rows, width = 64, 8
    table = stimulus.table(rng, rows, width)
    indices, offsets, _, grads = _batches(rng, chips, rows, width, n_bags=8, zipf=1.05)
    forward = emb.step(table, indices, offsets, topology=topology)
    assert forward.ici_words == _count_words(indices, offsets, chips, width, mode=None)
    for mode in emb.MODES:
        run = emb.step(table, indices, offsets, grads=grads, topology=topology, mode=mode)
        assert run.ici_words == _count_words(indices, offsets, chips, width, mode=mode)
    reads = [len({i // chips for c in range(chips) for i in indices[c].tolist()
                  if i % chips == o}) for o in range(chips)]
    assert forward.hbm_reads.tolist() == reads
    assert forward.hbm_reads.sum() <= sum(len(i) for i in indices)
    plan = emb.plan(indices, offsets, num_rows=rows, n_chips=chips)
    no_dedup = emb.traffic(plan, width, dedup=False).total
    assert no_dedup == _count_words(indices, offsets, chips, width, mode=None, dedup=False)
    assert no_dedup >= forward.ici_words


def test_traffic_per_pair_by_hand():
    """1x2, D = 2; rank 0 ids [1, 1, 3 | 0], rank 1 ids [2]. Pair 0 -> 1: U = 2 (1, 3), N = 3,
    B = 1; pair 1 -> 0: U = N = B = 1."""
    indices = [np.array([1, 1, 3, 0]), np.array([2])]
    offsets = [np.array([0, 3, 4]), np.array([0, 1])]
    plan = emb.plan(indices, offsets, num_rows=4, n_chips=2)
    assert [s.tolist() for s in plan.sends[0]] == [[0], [1, 3]]
    assert plan.slots[0].tolist() == [0, 0, 1, 0]
    assert [s.tolist() for s in plan.served] == [[0, 1], [0, 1]]   # local rows
    t = emb.traffic(plan, 2, backward=True)
    assert t.ids.tolist() == [[0, 3], [2, 0]]
    assert t.rows.tolist() == [[0, 2], [4, 0]]                     # owner -> source
    assert t.grads.tolist() == [[0, 1 + 1 * 3 + 3], [1 + 3 + 1, 0]]
    pre = emb.traffic(plan, 2, backward=True, mode="prereduced")
    assert pre.grads.tolist() == [[0, 4], [2, 0]]


# ---------------------------------------------------------------- errors, before anything moves

def test_out_of_range_id_names_chip_and_position(rng):
    topology = torus("2x3", failed=[1])
    table = stimulus.table(rng, 10, 8)
    indices = [np.array([0, 1]), np.array([2]), np.array([3, 4, 10, -1]), np.array([12]),
               np.array([0])]
    offsets = [np.array([0, len(i)]) for i in indices]
    with pytest.raises(emb.IdOutOfRange) as info:
        emb.step(table, indices, offsets, topology=topology)
    error = info.value
    assert (error.rank, error.position, error.value) == (2, 2, 10)
    assert "chip 3 (1, 0) (rank 2) at position 2: id 10 is not in [0, 10)" in str(error)
    assert isinstance(error, ValueError) and "\n" not in str(error)


def test_capacity_overflow_names_the_pair(rng):
    table = stimulus.table(rng, 16, 8)
    indices = [np.array([0, 4, 0]), np.array([1, 5, 9, 13, 2, 6, 10]), np.array([3]),
               np.array([7])]
    offsets = [np.array([0, len(i)]) for i in indices]
    emb.step(table, indices, offsets, topology="2x2", capacity=4)     # 4 unique: fits
    with pytest.raises(emb.CapacityOverflow, match=r"rank 1 -> rank 1 \(chip 1 \(0, 1\) -> "
                                                   r"chip 1 \(0, 1\)\): 4 unique ids, capacity 3"):
        emb.step(table, indices, offsets, topology="2x2", capacity=3)
    with pytest.raises(emb.CapacityOverflow) as info:
        emb.step(table, indices, offsets, topology="2x2", capacity=1)
    assert (info.value.source, info.value.owner, info.value.count) == (0, 0, 2)


def test_errors_are_raised_before_anything_is_written(monkeypatch, rng):
    """No all-to-all runs and no update is applied when an id or a capacity is bad."""
    moved = []
    monkeypatch.setattr(emb.collectives, "collective", lambda *a, **k: moved.append(1))
    monkeypatch.setattr(emb.sparsecore, "update", lambda *a, **k: moved.append(2))
    table = stimulus.table(rng, 8, 8)
    indices = [np.array([1]), np.array([2]), np.array([3]), np.array([8])]
    offsets = [np.array([0, 1])] * 4
    grads = [np.zeros((1, 8), np.float32)] * 4
    with pytest.raises(emb.IdOutOfRange):
        emb.step(table, indices, offsets, grads=grads, topology="2x2")
    indices = [np.array([3, 7])] + indices[1:3] + [np.array([3])]
    with pytest.raises(emb.CapacityOverflow):
        emb.step(table, indices, [np.array([0, 2])] + offsets[1:], grads=grads, topology="2x2",
                 capacity=1)
    assert moved == []


@pytest.mark.parametrize("kwargs, match", [
    (dict(topology="2x2", mode="fast"), "mode must be one of"),
    (dict(topology="2x2", combiner="max"), "combiner must be one of"),
    (dict(topology="2x2", optimizer="adam"), "optimizer must be one of"),
    (dict(topology="2x2", numerics="x86"), "numerics"),
    (dict(topology=4), "topology must be"),
    (dict(topology="2x2", capacity=0), "capacity must be None or an int >= 1"),
    (dict(topology="2x2", capacity=2.0), "capacity must be None or an int >= 1"),
    (dict(topology="2x2", state=np.zeros((8, 8), np.float32)), "sgd keeps no state"),
    (dict(topology="2x2", optimizer="adagrad", state=np.zeros(8, np.float32)),
     r"state must have shape \[8, 8\]"),
    (dict(topology="2x2", grads=[np.zeros((1, 8), np.float32)] * 3), "grads must be None or"),
    (dict(topology="2x2", grads=[np.zeros((2, 8), np.float32)] * 4),
     r"grads\[0\] must have shape \[1, 8\]"),
    (dict(topology="2x2", weights=[np.zeros(2, np.float32)] * 4),
     r"weights\[0\] must have shape \[1\]"),
    (dict(topology="2x2", lr="fast"), "lr must be a real number"),
    (dict(topology="2x3"), r"indices must be a list with one entry per live chip \(6\)"),
])
def test_bad_arguments_are_refused_in_one_line(kwargs, match):
    table = np.zeros((8, 8), np.float32)
    indices = [np.array([c]) for c in range(4)]
    offsets = [np.array([0, 1])] * 4
    with pytest.raises(ValueError, match=match) as info:
        emb.step(table, indices, offsets, **kwargs)
    assert "\n" not in str(info.value)


def test_bad_csr_names_the_rank():
    with pytest.raises(ValueError, match=r"rank 2: offsets must end at len\(indices\) = 1"):
        emb.step(np.zeros((8, 8), np.float32), [np.array([0])] * 4,
                 [np.array([0, 1])] * 2 + [np.array([0, 2])] + [np.array([0, 1])],
                 topology="2x2")


def test_one_live_chip_is_the_single_chip_golden(rng):
    """A 1x2 with a failed chip: one rank owns every row, nothing crosses a link."""
    table = stimulus.table(rng, 12, 8)
    indices, offsets, weights, grads = _batches(rng, 1, 12, 8, zipf=1.05)
    run = emb.step(table, indices, offsets, grads=grads, weights=weights,
                   topology=torus("1x2", failed=[1]), combiner="mean", optimizer="adagrad")
    assert_bits(run.out[0], sc.lookup(table, indices[0], offsets[0], combiner="mean",
                                      weights=weights[0]), "out")
    want_table, want_state = sc.update(table, indices[0], offsets[0], grads[0],
                                       optimizer="adagrad", lr=0.01)
    assert_bits(run.table, want_table, "table")
    assert_bits(run.state, want_state, "state")
    assert run.ici_words == 0 and run.hbm_reads.tolist() == [len(set(indices[0].tolist()))]
