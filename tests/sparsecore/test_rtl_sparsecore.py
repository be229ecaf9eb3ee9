"""``sim.sparsecore`` on the tile RTL: bit-exact against golden.sparsecore (itself checked
against SoftFloat), whatever the HBM jitter; one HBM read per unique id; errors as golden's.

Each call is one whole run of a freshly built tile, whose Amaranth simulation costs a few
seconds to compile, so every run checks a batch made to hold many adversarial cases at
once: empty bags (first, middle, last), a bag of one, a bag of one id repeated, NaN, inf,
subnormal and signed-zero words in the table, the weights and the gradients, zero
weights, and rows that cancel.
"""

import numpy as np
import pytest

from golden import sparsecore as golden
from sim import sparsecore

from ..support import assert_bits
from ..simulators import ICARUS
from . import stimulus


def _batch(rng, *, rows=24, width=12, n_bags=10):
    """A random batch with the adversarial bags prepended and appended."""
    b = stimulus.batch(rng, rows=rows, width=width, n_bags=n_bags, longest=6)
    lengths = np.diff(b.offsets)
    hot = int(rng.integers(rows))
    special = [[], [int(rng.integers(rows))], [hot] * 5]
    bags = special + np.split(b.indices, np.cumsum(lengths)[:-1]) + [[hot, hot], []]
    indices = np.concatenate([np.asarray(bag, np.int64) for bag in bags]).astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum([len(bag) for bag in bags])])
    weights = stimulus.fp32_values(rng, len(indices))
    weights[rng.random(len(indices)) < 0.1] = 0
    grads = stimulus.fp32_values(rng, (len(bags), width))
    return stimulus.Batch(b.table, indices, offsets, weights, grads)


# Every combiner, weighted and not, in both numerics. The unweighted case is a build of its
# own, so make test-slow runs it (make test's budget); test_rtl_engine's last lookup of a
# batch is unweighted.
@pytest.mark.parametrize("combiner, weighted, numerics, words_per_cycle", [
    ("sum", True, "ieee", 8), ("mean", True, "tpu", 4),
    pytest.param("sqrtn", False, "ieee", 8, marks=pytest.mark.slow), ("sqrtn", True, "tpu", 1),
])
def test_lookup_is_bit_exact(combiner, weighted, numerics, words_per_cycle, rng):
    b = _batch(rng)
    weights = b.weights if weighted else None
    run = sparsecore.lookup(b.table, b.indices, b.offsets, combiner=combiner, weights=weights,
                            numerics=numerics, jitter=3, seed=7, words_per_cycle=words_per_cycle,
                            read_latency=6)
    want = golden.lookup(b.table, b.indices, b.offsets, combiner=combiner, weights=weights,
                         numerics=numerics)
    assert run.out.dtype == np.float32
    assert_bits(run.out, want, f"lookup {combiner} weighted={weighted} {numerics}")
    assert run.hbm_reads == golden.dedup(b.indices).hbm_reads == run.stats.unique
    assert run.cycles > 0


def test_results_do_not_depend_on_jitter_or_gaps(rng):
    b = _batch(rng, width=16)
    want = golden.lookup(b.table, b.indices, b.offsets, combiner="mean", weights=b.weights)
    runs = [sparsecore.lookup(b.table, b.indices, b.offsets, combiner="mean",
                              weights=b.weights, jitter=6, seed=seed, idle=idle, stall=stall)
            for seed, idle, stall in ((1, 0.0, 0.0), (2, 0.3, 0.5))]
    for run in runs:
        assert_bits(run.out, want, "lookup under jitter")
    assert runs[0].cycles != runs[1].cycles, "the two runs should have been timed differently"


#: The Adagrad tests' tile: both Adagrads, so that they share its build.
ADAGRADS = {"optimizers": "adagrad,rowwise_adagrad"}


@pytest.mark.parametrize("optimizer, numerics, with_state, words_per_cycle", [
    ("sgd", "ieee", False, 8), ("adagrad", "tpu", True, 2),
])
def test_update_is_bit_exact(optimizer, numerics, with_state, words_per_cycle, rng):
    b = _batch(rng, width=16)
    state = None
    if with_state:
        # Accumulators mostly non-negative, with the specials (negatives included) mixed in.
        bits = stimulus.fp32_values(rng, b.table.shape)
        state = np.where(rng.random(b.table.shape) < 0.8, bits & np.uint32(0x7FFFFFFF), bits)
    lr = float(rng.choice([0.01, 0.5, -0.25]))
    run = sparsecore.update(b.table, b.indices, b.offsets, b.grads, optimizer=optimizer, lr=lr,
                            state=state, numerics=numerics, jitter=3, seed=3,
                            words_per_cycle=words_per_cycle,
                            tile=ADAGRADS if optimizer == "adagrad" else None)
    want_table, want_state = golden.update(b.table, b.indices, b.offsets, b.grads,
                                           optimizer=optimizer, lr=lr, state=state,
                                           numerics=numerics)
    assert_bits(run.table, want_table, f"update {optimizer} {numerics} table")
    if want_state is None:
        assert run.state is None
    else:
        assert_bits(run.state, want_state, f"update {optimizer} {numerics} state")
    assert run.hbm_reads == golden.dedup(b.indices).hbm_reads


@pytest.mark.parametrize("numerics, width, words_per_cycle", [
    ("tpu", 12, 2), pytest.param("ieee", 20, 8, marks=pytest.mark.slow)])
def test_rowwise_adagrad_is_bit_exact(numerics, width, words_per_cycle, rng):
    # 12 columns pad to 16 (20 to 24): the mean divides by 12, and the padding's zero
    # gradients add nothing to a lane. Accumulators: mostly non-negative, the specials
    # mixed in. The "tpu" tile is test_update_is_bit_exact's Adagrad one. Four random bags
    # and the adversarial ones: two runs of the tile, each a few seconds on Amaranth.
    b = _batch(rng, width=width, n_bags=4)
    # A special gradient word makes its row's mean NaN or inf: keep them to a third of the
    # bags, so that most rows take the finite path.
    grads = stimulus.fp32_values(rng, b.grads.shape, special_density=0.0)
    grads[::3] = b.grads[::3]
    bits = stimulus.fp32_values(rng, b.table.shape[0])
    state = np.where(rng.random(bits.shape) < 0.8, bits & np.uint32(0x7FFFFFFF), bits)
    for given in (state, None):
        run = sparsecore.update(b.table, b.indices, b.offsets, grads,
                                optimizer="rowwise_adagrad", lr=-0.25, state=given,
                                numerics=numerics, jitter=3, seed=5,
                                words_per_cycle=words_per_cycle, tile=ADAGRADS)
        want_table, want_state = golden.update(b.table, b.indices, b.offsets, grads,
                                               optimizer="rowwise_adagrad", lr=-0.25,
                                               state=given, numerics=numerics)
        name = f"rowwise_adagrad {numerics} state={'given' if given is not None else 'None'}"
        assert_bits(run.table, want_table, f"{name} table")
        assert run.state.shape == (b.table.shape[0],)
        assert_bits(run.state, want_state, f"{name} state")


# Slow for make test's budget (21 s): the system tests with SparseCores run it on Verilator.
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["verilator", pytest.param("icarus", marks=ICARUS.marks)])
def test_compiled_backends_agree_cycle_for_cycle(backend, rng):
    b = _batch(rng, width=8, n_bags=6)
    runs = [sparsecore.lookup(b.table, b.indices, b.offsets, weights=b.weights, jitter=2,
                              seed=9, backend=name) for name in ("amaranth", backend)]
    want = golden.lookup(b.table, b.indices, b.offsets, weights=b.weights)
    for run in runs:
        assert_bits(run.out, want, backend)
    assert runs[0].cycles == runs[1].cycles
    assert runs[0].stats == runs[1].stats


def test_out_of_range_ids_raise_golden_s_error(rng):
    b = _batch(rng, rows=20)
    indices = b.indices.astype(np.int64)
    for position, value in ((7, 20), (3, -1), (12, 1 << 40)):
        indices[position] = value
    with pytest.raises(golden.IndexOutOfRange) as want:
        golden.lookup(b.table, indices, b.offsets)
    with pytest.raises(sparsecore.IndexOutOfRange) as got:
        sparsecore.lookup(b.table, indices, b.offsets)
    assert str(got.value) == str(want.value)
    assert got.value.position == want.value.positions[0] == 3
    assert got.value.count == len(want.value.positions) == 3


def test_unique_overflow_is_an_error_not_a_wrong_answer(rng):
    b = _batch(rng)
    unique = golden.dedup(b.indices).hbm_reads
    first = golden.dedup(b.indices).first[-1]
    with pytest.raises(ValueError, match=rf"max_unique = {unique - 1}\): the first that did not "
                                         rf"fit is at position {first}"):
        sparsecore.lookup(b.table, b.indices, b.offsets, max_unique=unique - 1)


@pytest.mark.parametrize("call, message", [
    (lambda t: sparsecore.lookup(t, [0], [0, 1], combiner="max"),
     "combiner must be one of 'sum', 'mean', 'sqrtn', not 'max'"),
    (lambda t: sparsecore.lookup(t, [0], [1, 1]), "offsets must start at 0, not 1"),
    (lambda t: sparsecore.lookup(t, [0, 1], [0, 2, 1]),
     r"offsets must not decrease: offsets\[1\] = 2 > offsets\[2\] = 1"),
    (lambda t: sparsecore.lookup(t, [0], [0, 1], weights=np.ones(2, np.float32)),
     r"weights must have shape \[1\], not \[2\]"),
    (lambda t: sparsecore.update(t, [0], [0, 1], np.zeros((1, 3), np.float32), lr=0.1),
     r"grads must have shape \[1, 4\], not \[1, 3\]"),
    (lambda t: sparsecore.update(t, [0], [0, 1], np.zeros((1, 4), np.float32), lr=0.1,
                                 optimizer="rowwise_adagrad",
                                 state=np.zeros((2, 4), np.float32)),
     r"state must have shape \[2\], not \[2, 4\]"),
    (lambda t: sparsecore.lookup(t, [0], [0, 1], backend="spice"), "backend must be one of"),
])
def test_bad_input_is_a_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call(np.zeros((2, 4), np.float32))
