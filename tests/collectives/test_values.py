"""golden.collectives.collective: values against independent computations (exact integer
sums; SoftFloat in the documented order; hand-worked cases where the order changes the
bits), numerics rules, dtypes, and shape/argument validation."""

import numpy as np
import pytest
import softfloatpy as sf

from golden import collectives as gc
from golden.topology import torus

from ..support import assert_bits
from . import oracle_collectives as oc

TWO24 = float(1 << 24)

TOPOLOGIES = [
    ("1x4", {}), ("2x2", {}), ("4x4", {}), ("2x2x2", {}), ("2x3", {}),
    ("2x4", {"twist": True}), ("2x3", {"wrap": False}), ("3x3", {"failed": [4]}),
    ("2x2x2", {"failed": [(1, 0, 1)]}),
]
IDS = [f"{d}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'torus'}" for d, kw in TOPOLOGIES]


@pytest.fixture(autouse=True)
def _round_to_nearest_even():
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)


def _mixed_fp32(rng, shape):
    """Values whose sums round, cancel, overflow and meet subnormals, NaN and zeros."""
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-30, 30, shape)).astype(np.float32)
    bits = x.view(np.uint32).copy()
    special = np.array([0x0, 0x80000000, 0x1, 0x807FFFFF, 0x7F800000, 0xFF800000,
                        0x7FA00001, 0x7F7FFFFF, 0x00800000, 0x3F800000], dtype=np.uint32)
    mask = rng.random(shape) < 0.1
    bits[mask] = rng.choice(special, int(mask.sum()))
    return bits


@pytest.mark.parametrize("dims,kw", TOPOLOGIES, ids=IDS)
@pytest.mark.parametrize("numerics", ["tpu", "ieee"])
def test_fp32_all_reduce_matches_softfloat_in_documented_order(dims, kw, numerics, rng):
    t = torus(dims, **kw)
    chips = int(t.alive.sum())
    n = 2 * chips + 3          # uneven blocks, some empty halves
    bits = _mixed_fp32(rng, (chips, n))
    expected = oc.reduce_words(bits.tolist(), t.dims, list(t.failed), numerics)
    got = gc.collective("all_reduce", bits, topology=t, numerics=numerics)
    assert_bits(got, np.tile(expected, (chips, 1)), f"all_reduce {t!r} {numerics}",
                reshape=True)


@pytest.mark.parametrize("dims,kw", TOPOLOGIES[:4] + TOPOLOGIES[7:], ids=IDS[:4] + IDS[7:])
def test_fp32_reduce_scatter_matches_softfloat(dims, kw, rng):
    t = torus(dims, **kw)
    chips = int(t.alive.sum())
    bits = _mixed_fp32(rng, (chips, 4 * chips))
    expected = oc.reduce_words(bits.tolist(), t.dims, list(t.failed), "tpu")
    got = gc.collective("reduce_scatter", bits, topology=t)
    assert_bits(got, np.array(expected).reshape(chips, 4), f"reduce_scatter {t!r}", reshape=True)


@pytest.mark.parametrize("dims,kw", TOPOLOGIES, ids=IDS)
def test_int32_sums_are_exact_and_wrap(dims, kw, rng):
    t = torus(dims, **kw)
    chips = int(t.alive.sum())
    x = rng.integers(-2**31, 2**31, (chips, 3 * chips), dtype=np.int64).astype(np.int32)
    total = [(sum(int(v) for v in x[:, e]) + 2**31) % 2**32 - 2**31 for e in range(x.shape[1])]
    total = np.array(total, dtype=np.int64).astype(np.int32)
    ar = gc.collective("all_reduce", x, topology=t, dtype="int32")
    assert ar.dtype == np.int32
    np.testing.assert_array_equal(ar, np.tile(total, (chips, 1)))
    rs = gc.collective("reduce_scatter", x.view(np.uint32), topology=t, dtype="int32")
    assert rs.dtype == np.uint32
    np.testing.assert_array_equal(rs.view(np.int32), total.reshape(chips, 3))


@pytest.mark.parametrize("dims,kw", TOPOLOGIES, ids=IDS)
def test_gather_and_all_to_all_move_bits_untouched(dims, kw, rng):
    t = torus(dims, **kw)
    chips = int(t.alive.sum())
    x = _mixed_fp32(rng, (chips, 5))
    ag = gc.collective("all_gather", x, topology=t)
    for r in range(chips):
        assert_bits(ag[r], [w for row in x.tolist() for w in row], f"all_gather row {r}",
                    reshape=True)
    y = _mixed_fp32(rng, (chips, chips, 3)).view(np.float32)
    a2a = gc.collective("all_to_all", y, topology=t)
    assert a2a.dtype == np.float32
    for d in range(chips):
        for c in range(chips):
            assert_bits(a2a[d, c], y[c, d].view(np.uint32), f"all_to_all out[{d}, {c}]",
                        reshape=True)


# ------------------------------------------------------------------ the order is the contract

def test_ring_directions_round_differently_on_1x4():
    """Hand-worked: chunk 0 + half ((a1+a2)+a3)+a0 = 1, - half ((a3+a2)+a1)+a0 = 2, etc."""
    a = np.array([1.0, TWO24, 1.0, -TWO24], dtype=np.float32)
    x = np.repeat(a[:, None], 8, axis=1)
    got = gc.collective("all_reduce", x, topology="1x4")
    np.testing.assert_array_equal(got, np.tile(np.float32([1, 2, 2, 2, 2, 1, 0, 0]), (4, 1)))
    # The same four numbers in rank order, (((a0 + a1) + a2) + a3), give yet another value.
    naive = np.float32(np.float32(np.float32(a[0] + a[1]) + a[2]) + a[3])
    assert naive == 0.0 and len(set(got[0].tolist())) == 3


def test_shards_take_the_dimensions_in_rotated_orders_on_2x2():
    """Chips (0,0)=2^24, (0,1)=1, (1,0)=-2^24, (1,1)=1. Shard 0 (x then y):
    (2^24 + -2^24) + (1 + 1) = 2. Shard 1 (y then x): (2^24 + 1 -> 2^24) + (-2^24 + 1) = 1."""
    rows = np.float32([TWO24, 1.0, -TWO24, 1.0])
    x = np.repeat(rows[:, None], 8, axis=1)
    got = gc.collective("all_reduce", x, topology="2x2")
    np.testing.assert_array_equal(got, np.tile(np.float32([2, 1] * 4), (4, 1)))
    got_rs = gc.collective("reduce_scatter", x, topology="2x2")
    np.testing.assert_array_equal(got_rs, np.tile(np.float32([2, 1]), (4, 1)))


def test_numerics_modes_on_subnormals_nan_and_zeros():
    tiny = np.full((4, 4), 0x00000001, dtype=np.uint32)
    assert_bits(gc.collective("all_reduce", tiny, topology="2x2", numerics="ieee"),
                np.full((4, 4), 4), "ieee keeps subnormal sums", reshape=True)
    assert_bits(gc.collective("all_reduce", tiny, topology="2x2", numerics="tpu"),
                np.zeros((4, 4)), "tpu flushes subnormal operands", reshape=True)
    neg0 = np.full((4, 4), 0x80000000, dtype=np.uint32)
    assert_bits(gc.collective("all_reduce", neg0, topology="1x4"), neg0,
                "-0.0 everywhere sums to -0.0 (no +0.0 seed)", reshape=True)
    nan = np.zeros((4, 4), dtype=np.uint32)
    nan[2, :] = 0xFFA00001
    assert_bits(gc.collective("all_reduce", nan, topology="1x4"),
                np.full((4, 4), 0x7FC00000), "a NaN sum is the canonical quiet NaN", reshape=True)
    assert_bits(gc.collective("all_gather", nan, topology="1x4")[0], nan.ravel(),
                "a gather copies a NaN payload as is", reshape=True)


def test_string_topology_and_int32_view():
    x = np.arange(12, dtype=np.int32).reshape(4, 3)
    out = gc.collective("all_reduce", x, topology="2x2", dtype="int32")
    np.testing.assert_array_equal(out, np.tile(x.sum(0), (4, 1)))


# ------------------------------------------------------------------ validation

@pytest.mark.parametrize("call,match", [
    (lambda: gc.collective("broadcast", np.zeros((4, 4), np.float32), topology="2x2"),
     "kind must be one of"),
    (lambda: gc.collective("all_reduce", np.zeros((4, 4)), topology="2x2"),
     "float32 or uint32"),
    (lambda: gc.collective("all_reduce", np.zeros((4, 4), np.float32), topology="2x2",
                           dtype="int32"), "int32 or uint32"),
    (lambda: gc.collective("all_reduce", np.zeros((4, 4), np.float32), topology="2x2",
                           dtype="bf16"), "dtype must be one of"),
    (lambda: gc.collective("all_reduce", np.zeros((3, 4), np.float32), topology="2x2"),
     "C = 4 live chips"),
    (lambda: gc.collective("all_reduce", np.zeros((4, 0), np.float32), topology="2x2"),
     "n >= 1"),
    (lambda: gc.collective("all_reduce", np.zeros((4, 4), np.float32), topology=(2, 2)),
     "Topology or a shape"),
    (lambda: gc.collective("reduce_scatter", np.zeros((4, 6), np.float32), topology="2x2"),
     "divisible by C"),
    (lambda: gc.collective("all_to_all", np.zeros((4, 3, 2), np.float32), topology="2x2"),
     r"\[C, C, m\]"),
    (lambda: gc.collective("all_to_all", np.zeros((4, 4), np.float32), topology="2x2"),
     r"\[C, C, m\]"),
    (lambda: gc.collective("all_reduce", np.zeros((4, 4), np.float32), topology="2x2",
                           numerics="fast"), "numerics must be one of"),
    (lambda: gc.collective("all_reduce", np.zeros((9, 4), np.float32),
                           topology=torus("3x3", failed=[4])), "C = 8 live chips"),
    (lambda: gc.collective("all_reduce", np.zeros((1, 4), np.float32),
                           topology=torus("1x2", failed=[1])), "fewer than 2 live chips"),
])
def test_bad_arguments_raise_one_line_value_errors(call, match):
    with pytest.raises(ValueError, match=match) as err:
        call()
    assert "\n" not in str(err.value)
