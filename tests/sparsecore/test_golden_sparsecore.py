"""golden.sparsecore agrees with an independent SoftFloat oracle bit for bit, follows its
documented order, and rejects bad input with a one-line reason."""

import numpy as np
import pytest
import softfloatpy as sf

from golden import sparsecore as sc
from golden.formats import NUMERICS

from tools import soak_sparsecore as soak

from ..support import assert_bits
from . import oracle_sparsecore as oracle
from . import stimulus


@pytest.fixture(autouse=True)
def _round_to_nearest_even():
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)


def _lists(bits):
    return np.asarray(bits).view(np.uint32).tolist()


def _oracle_lookup(b, combiner, weighted, numerics):
    return oracle.lookup(_lists(b.table), b.indices.tolist(), b.offsets.tolist(), combiner,
                         _lists(b.weights) if weighted else None, numerics)


def _oracle_update(b, optimizer, lr, state, numerics):
    return oracle.update(_lists(b.table), b.indices.tolist(), b.offsets.tolist(),
                         _lists(b.grads), optimizer, int(sc.fp32_scalar(lr)),
                         None if state is None else _lists(state), numerics)


def _accumulators(rng, shape):
    # Mostly non-negative, as accumulators are, with the specials (negatives included) mixed in.
    bits = stimulus.fp32_values(rng, shape)
    return np.where(rng.random(shape) < 0.8, bits & np.uint32(0x7FFFFFFF), bits).astype(np.uint32)


# ---------------------------------------------------------------- against the oracle

@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("combiner", sc.COMBINERS)
def test_lookup_matches_oracle(combiner, weighted, numerics, rng):
    for trial in range(6):
        b = stimulus.batch(rng)
        got = sc.lookup(b.table, b.indices, b.offsets, combiner=combiner,
                        weights=b.weights if weighted else None, numerics=numerics)
        assert got.dtype == np.float32 and got.shape == (len(b.offsets) - 1, b.table.shape[1])
        assert_bits(got, _oracle_lookup(b, combiner, weighted, numerics),
                    f"lookup {combiner}/{numerics} trial {trial}", reshape=True)


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("optimizer", sc.OPTIMIZERS)
def test_update_matches_oracle(optimizer, numerics, rng):
    for trial in range(6):
        b = stimulus.batch(rng)
        lr = float(rng.choice([0.01, 0.5, 1.0, -0.25, 3e-39, 1e30]))
        rows, width = b.table.shape
        state = None
        if optimizer != "sgd" and trial % 2:
            state = _accumulators(rng, (rows,) if optimizer == "rowwise_adagrad" else b.table.shape)
        got_table, got_state = sc.update(b.table, b.indices, b.offsets, b.grads,
                                         optimizer=optimizer, lr=lr, state=state,
                                         numerics=numerics)
        if optimizer != "sgd" and state is None:
            state = np.full((rows,) if optimizer == "rowwise_adagrad" else (rows, width),
                            0x3DCCCCCD, np.uint32)                         # 0.1 in fp32
        want_table, want_state, _ = _oracle_update(b, optimizer, lr, state, numerics)
        what = f"update {optimizer}/{numerics} lr={lr} trial {trial}"
        assert_bits(got_table, want_table, what + " table", reshape=True)
        if optimizer == "sgd":
            assert got_state is None
        else:
            assert_bits(got_state, want_state, what + " state", reshape=True)


@pytest.mark.parametrize("numerics", NUMERICS)
def test_huge_bag_and_all_duplicate_ids(numerics, rng):
    """A bag of ~1000 ids, an empty bag and a bag of one; then 1000 occurrences of one id."""
    lengths = np.array([1000, 0, 1, 7])
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    n = int(offsets[-1])
    b = stimulus.Batch(stimulus.table(rng, 40, 8, special_density=0.02),
                       stimulus.ids(rng, n, 40, zipf=1.15), offsets,
                       stimulus.fp32_values(rng, n, special_density=0.02),
                       stimulus.fp32_values(rng, (4, 8), special_density=0.0))
    for combiner, weighted in (("sum", False), ("sqrtn", True), ("mean", False)):
        got = sc.lookup(b.table, b.indices, b.offsets, combiner=combiner,
                        weights=b.weights if weighted else None, numerics=numerics)
        assert_bits(got, _oracle_lookup(b, combiner, weighted, numerics),
                    f"huge bag {combiner}", reshape=True)

    b.indices[:] = 17
    got_table, got_state = sc.update(b.table, b.indices, b.offsets, b.grads,
                                     optimizer="adagrad", lr=0.05, numerics=numerics)
    state = np.full(b.table.shape, 0x3DCCCCCD, np.uint32)
    want_table, want_state, order = _oracle_update(b, "adagrad", 0.05, state, numerics)
    assert order == [17]
    assert_bits(got_table, want_table, "all-duplicate table", reshape=True)
    assert_bits(got_state, want_state, "all-duplicate state", reshape=True)
    assert sc.dedup(b.indices).hbm_reads == 1


# ---------------------------------------------------------------- the documented order, by hand

ONE, ULP_HALF, ULP = 0x3F800000, 0x33800000, 0x34000000          # 1.0, 2^-24, 2^-23


def _f(*bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def test_lookup_folds_in_bag_order():
    # [1, 2^-24, 2^-24] in bag order: each 2^-24 is a tie that rounds back to 1.0.
    # Any other order (the two small ones first) would give 1 + 2^-23.
    table = _f(ONE, ULP_HALF).reshape(2, 1)
    out = sc.lookup(table, [0, 1, 1], [0, 3])
    assert out.view(np.uint32)[0, 0] == ONE
    out = sc.lookup(table, [1, 1, 0], [0, 3])
    assert out.view(np.uint32)[0, 0] == ONE + 1


@pytest.mark.parametrize("numerics", NUMERICS)
def test_hand_checked_combiners(numerics):
    table = _f(0x3F800000, 0x40000000,     # row 0: 1, 2
               0x40400000, 0x80000000,     # row 1: 3, -0
               0x00000001, 0x807FFFFF,     # row 2: subnormals
               0x7F7FFFFF, 0x7F800001).reshape(4, 2)   # row 3: max float, sNaN
    offsets = [0, 2, 2, 3, 4, 6]
    indices = [0, 1, 1, 2, 3, 3]
    got = {c: sc.lookup(table, indices, offsets, combiner=c, numerics=numerics).view(np.uint32)
           for c in sc.COMBINERS}
    sub = numerics == "ieee"
    # bag 0 = rows 0 + 1: 4, 2; bag 1 empty; bag 2 = row 1 (-0 from +0.0 gives +0);
    # bag 3 = row 2; bag 4 = row 3 twice: overflow to inf, NaN.
    assert got["sum"].tolist() == [
        [0x40800000, 0x40000000], [0, 0], [0x40400000, 0],
        [0x00000001 if sub else 0, 0x807FFFFF if sub else 0],
        [0x7F800000, 0x7FC00000]]
    assert got["mean"].tolist() == [
        [0x40000000, 0x3F800000], [0, 0], [0x40400000, 0],
        [0x00000001 if sub else 0, 0x807FFFFF if sub else 0],
        [0x7F800000, 0x7FC00000]]
    # sqrtn of bag 0: s = fl(sqrt 2) = 0x3FB504F3 lies 1.7e-8 (relative) below sqrt 2, so
    # 4/s and 2/s lie that far above 2 sqrt 2 and sqrt 2: well under half an ulp above s, 2s.
    assert got["sqrtn"][0].tolist() == [0x403504F3, 0x3FB504F3]
    assert got["sqrtn"][1].tolist() == [0, 0]


def test_weighted_mean_and_sqrtn_use_tensorflow_denominators():
    table = _f(0x3F800000, 0x3F800000).reshape(2, 1)              # 1, 1
    weights = _f(0x40400000, 0x40800000)                          # 3, 4
    # sum = 3 + 4 = 7; mean = 7 / (3 + 4) = 1; sqrtn = 7 / sqrt(9 + 16) = 1.4 -> 0x3FB33333.
    assert sc.lookup(table, [0, 1], [0, 2], combiner="sum", weights=weights)[0, 0] == 7
    assert sc.lookup(table, [0, 1], [0, 2], combiner="mean", weights=weights)[0, 0] == 1
    sqrtn = sc.lookup(table, [0, 1], [0, 2], combiner="sqrtn", weights=weights)
    assert sqrtn.view(np.uint32)[0, 0] == 0x3FB33333
    # Weights cancelling to zero in a non-empty bag divide by zero: 7/0 would be inf,
    # here (1*1 + -1*1) / (1 + -1) = 0/0 = NaN.
    out = sc.lookup(table, [0, 1], [0, 2], combiner="mean", weights=_f(ONE, ONE | 0x80000000))
    assert out.view(np.uint32)[0, 0] == 0x7FC00000


# ---------------------------------------------------------------- sum-then-apply vs np.add.at

def test_sum_then_apply_differs_from_add_at():
    """Two occurrences of row 0, each with gradient 2^-25, lr 1, row 1.0.

    np.add.at applies 1 - 2^-25 twice: each is a tie between 1 - 2^-24 and 1.0
    that rounds to even, 1.0, so the row never moves. Sum-then-apply first
    sums G = 2^-24 (exact) and then 1 - 2^-24 = 0x3F7FFFFF, exactly.
    """
    table = _f(ONE).reshape(1, 1)
    grads = _f(0x33000000, 0x33000000).reshape(2, 1)                 # 2^-25 per bag
    indices, offsets = np.array([0, 0]), np.array([0, 1, 2])

    per_occurrence = table.copy()
    np.add.at(per_occurrence, indices, -(np.float32(1.0) * grads[[0, 1]]))
    assert per_occurrence.view(np.uint32)[0, 0] == ONE

    got, _ = sc.update(table, indices, offsets, grads, optimizer="sgd", lr=1.0)
    assert got.view(np.uint32)[0, 0] == 0x3F7FFFFF
    assert table.view(np.uint32)[0, 0] == ONE                        # input untouched


def test_sum_then_apply_differs_from_add_at_on_random_rows(rng):
    """On a batch full of duplicates the two disagree somewhere; the golden is the oracle."""
    b = stimulus.batch(rng, rows=4, width=8, n_bags=16, longest=6, special_density=0.0)
    got, _ = sc.update(b.table, b.indices, b.offsets, b.grads, optimizer="sgd", lr=0.1)
    per_occurrence = b.table.view(np.float32).copy()
    bag_of = np.repeat(np.arange(16), np.diff(b.offsets))
    np.add.at(per_occurrence, b.indices, -(np.float32(0.1) * b.grads.view(np.float32)[bag_of]))
    assert np.any(per_occurrence.view(np.uint32) != got.view(np.uint32))
    want, _, _ = _oracle_update(b, "sgd", 0.1, None, "tpu")
    assert_bits(got, want, "sgd on duplicates", reshape=True)


# ---------------------------------------------------------------- dedup, untouched rows, inputs

def test_dedup_first_occurrence_order():
    dd = sc.dedup(np.array([5, 3, 5, 0, 3, 3, 9], np.int32))
    assert dd.ids.tolist() == [5, 3, 0, 9]
    assert dd.first.tolist() == [0, 1, 3, 6]
    assert dd.counts.tolist() == [2, 3, 1, 1]
    assert dd.inverse.tolist() == [0, 1, 0, 2, 1, 1, 3]
    assert dd.hbm_reads == 4
    assert sc.dedup(np.array([], np.int32)).hbm_reads == 0


def test_dedup_matches_a_dict_on_zipf_ids(rng):
    indices = stimulus.ids(rng, 5000, 1000, zipf=1.05)
    dd = sc.dedup(indices)
    seen = {}
    for k, i in enumerate(indices.tolist()):
        seen.setdefault(i, k)
    assert dd.ids.tolist() == list(seen)
    assert dd.first.tolist() == list(seen.values())
    assert np.array_equal(dd.ids[dd.inverse], indices)


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("optimizer", sc.OPTIMIZERS)
def test_untouched_rows_and_inputs_keep_their_bits(optimizer, numerics, rng):
    b = stimulus.batch(rng, rows=12, width=8)
    b.table[:, 0] = 0x7F800001                     # signalling NaN: would be canonicalized
    b.table[:, 1] = 0x00000001                     # subnormal: would be flushed in "tpu"
    state = None if optimizer == "sgd" else _accumulators(
        rng, (12,) if optimizer == "rowwise_adagrad" else (12, 8))
    before = [x.copy() for x in (b.table, b.indices, b.offsets, b.grads)]
    state_before = None if state is None else state.copy()
    table, new_state = sc.update(b.table.view(np.float32), b.indices, b.offsets, b.grads,
                                 optimizer=optimizer, lr=0.5, state=state, numerics=numerics)
    for x, y in zip(before, (b.table, b.indices, b.offsets, b.grads)):
        assert np.array_equal(x, y)
    untouched = np.setdiff1d(np.arange(12), b.indices)
    assert np.array_equal(table.view(np.uint32)[untouched], b.table[untouched])
    if state is not None:
        assert np.array_equal(state, state_before)
        assert np.array_equal(new_state.view(np.uint32)[untouched], state[untouched])
    touched = np.unique(b.indices)
    assert np.all(table.view(np.uint32)[touched, 0] == 0x7FC00000)


def test_float32_values_and_uint32_patterns_agree(rng):
    b = stimulus.batch(rng, rows=10, width=8)
    as_bits = sc.lookup(b.table, b.indices, b.offsets, combiner="sqrtn", weights=b.weights)
    as_values = sc.lookup(b.table.view(np.float32), b.indices.astype(np.int64), b.offsets,
                          combiner="sqrtn", weights=b.weights.view(np.float32))
    assert np.array_equal(as_bits.view(np.uint32), as_values.view(np.uint32))


def test_initial_accumulator_is_a_parameter():
    table = np.zeros((3, 8), np.float32)
    grads = np.ones((1, 8), np.float32)
    _, state = sc.update(table, [1], [0, 1], grads, optimizer="adagrad", lr=1.0,
                         initial_accumulator=3.0)
    assert state[1].tolist() == [4.0] * 8 and state[0].tolist() == [3.0] * 8
    t, state = sc.update(table, [1], [0, 1], grads, optimizer="rowwise_adagrad", lr=1.0,
                         initial_accumulator=0.0)
    # sum of eight 1s over D = 8 is 1; acc = 0 + 1; row = 0 - 1/sqrt(1).
    assert state.tolist() == [0.0, 1.0, 0.0] and t[1].tolist() == [-1.0] * 8


def test_row_gradients_sums_in_flat_order():
    grads = _f(ONE, ULP_HALF, ULP_HALF).reshape(3, 1)
    ids, g = sc.row_gradients([4, 4, 4, 2], [0, 1, 3, 4], grads)
    # id 4 gets bags 0, 1, 1: 1 + 2^-24 + 2^-24, each a tie back to 1.0.
    assert ids.tolist() == [4, 2]
    assert g.view(np.uint32)[:, 0].tolist() == [ONE, ULP_HALF]


# ---------------------------------------------------------------- bad input

_T = np.zeros((4, 8), np.float32)
_G = np.zeros((2, 8), np.float32)


@pytest.mark.parametrize("kwargs, message", [
    (dict(offsets=[1, 2, 3]), "offsets must start at 0, not 1"),
    (dict(offsets=[0, 2, 1, 3]), r"offsets must not decrease: offsets\[1\] = 2 > offsets\[2\] = 1"),
    (dict(offsets=[0, 2]), r"offsets must end at len\(indices\) = 3, not 2"),
    (dict(offsets=[]), "offsets must have length B\\+1 >= 1, not 0"),
    (dict(offsets=[[0, 3]]), "offsets must be 1-D, not 2-D"),
    (dict(offsets=[0.0, 3.0]), "offsets must be an integer array, not float64"),
    (dict(indices=[True, False, True]), "indices must be an integer array, not bool"),
    (dict(table=np.zeros((4, 8))), "table must be a float32 array .* not float64"),
    (dict(table=np.zeros(8, np.float32)), r"table must have shape \[\*, \*\], not \[8\]"),
    (dict(table=np.zeros((4, 0), np.float32)), r"at least one word"),
    (dict(weights=np.zeros(2, np.float32)), r"weights must have shape \[3\], not \[2\]"),
    (dict(combiner="max"), "combiner must be one of 'sum', 'mean', 'sqrtn', not 'max'"),
    (dict(numerics="fast"), "numerics must be one of"),
])
def test_lookup_rejects_bad_input(kwargs, message):
    args = dict(table=_T, indices=[0, 1, 2], offsets=[0, 1, 3]) | kwargs
    with pytest.raises(ValueError, match=message):
        sc.lookup(args.pop("table"), args.pop("indices"), args.pop("offsets"), **args)


@pytest.mark.parametrize("indices, positions", [
    ([0, 4, 1], [1]),
    ([-1, 0, 3], [0]),
    ([3, 2, 7, 0, -2147483648], [2, 4]),
])
def test_out_of_range_ids_name_their_positions(indices, positions):
    offsets = [0, 2, len(indices)]
    for call in (lambda: sc.lookup(_T, indices, offsets),
                 lambda: sc.update(_T, indices, offsets, _G, lr=1.0)):
        with pytest.raises(sc.IndexOutOfRange,
                           match=f"index out of range at position {positions[0]}: "
                                 f"id {indices[positions[0]]} is not in \\[0, 4\\)") as info:
            call()
        assert isinstance(info.value, ValueError)
        assert info.value.positions.tolist() == positions
        assert info.value.values.tolist() == [indices[p] for p in positions]
    assert sc.bad_positions(np.array(indices, np.int32), 4).tolist() == positions


@pytest.mark.parametrize("kwargs, message", [
    (dict(grads=np.zeros((3, 8), np.float32)), r"grads must have shape \[2, 8\], not \[3, 8\]"),
    (dict(grads=np.zeros((2, 4), np.float32)), r"grads must have shape \[2, 8\], not \[2, 4\]"),
    (dict(optimizer="adam"), "optimizer must be one of 'sgd', 'adagrad', 'rowwise_adagrad'"),
    (dict(state=np.zeros((4, 8), np.float32)), "sgd keeps no state: state must be None"),
    (dict(optimizer="adagrad", state=np.zeros(4, np.float32)),
     r"state must have shape \[4, 8\], not \[4\]"),
    (dict(optimizer="rowwise_adagrad", state=np.zeros((4, 8), np.float32)),
     r"state must have shape \[4\], not \[4, 8\]"),
    (dict(lr="0.1"), "lr must be a real number, not str"),
    (dict(lr=True), "lr must be a real number, not a bool"),
    (dict(lr=np.ones(2, np.float32)), r"lr must be a scalar, not an array of shape \(2,\)"),
    (dict(optimizer="adagrad", initial_accumulator=None),
     "initial_accumulator must be a real number, not NoneType"),
])
def test_update_rejects_bad_input(kwargs, message):
    args = dict(optimizer="sgd", lr=0.1, grads=_G) | kwargs
    with pytest.raises(ValueError, match=message):
        sc.update(_T, [0, 1, 2], [0, 1, 3], args.pop("grads"), **args)


def test_update_requires_lr():
    with pytest.raises(TypeError, match="lr"):
        sc.update(_T, [0], [0, 1], np.zeros((1, 8), np.float32))


def test_lr_rounds_to_fp32_or_is_a_pattern():
    assert int(sc.fp32_scalar(0.1)) == 0x3DCCCCCD
    assert int(sc.fp32_scalar(np.uint32(0x3F800000))) == 0x3F800000
    assert int(sc.fp32_scalar(1e300)) == 0x7F800000


def test_soak_entry_point_runs(seed):
    """The long run (tools/soak_sparsecore.py) stays in working order: a few trials here."""
    assert soak.soak(seed, 3) == []


@pytest.mark.parametrize("numerics", NUMERICS)
def test_unweighted_equals_weights_of_one(numerics, rng):
    """The docstring's promise that lets the RTL feed weight 1.0 for an unweighted lookup."""
    b = stimulus.batch(rng, rows=16, width=8, n_bags=12)
    ones = np.full(len(b.indices), 1.0, np.float32)
    for combiner in sc.COMBINERS:
        plain = sc.lookup(b.table, b.indices, b.offsets, combiner=combiner, numerics=numerics)
        weighted = sc.lookup(b.table, b.indices, b.offsets, combiner=combiner, weights=ones,
                             numerics=numerics)
        assert_bits(plain, weighted.view(np.uint32), f"{combiner} weights of one", reshape=True)
