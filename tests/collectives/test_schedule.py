"""golden.collectives.schedule: every transfer crosses real links between the right chips,
executing the transfers moves every word where it belongs and computes exactly the golden
values, no step races, and link loads match hand counts."""

import itertools

import numpy as np
import pytest

from golden import arith
from golden import collectives as gc
from golden.topology import routing_tables, torus

from . import oracle_collectives as oc

TOPOLOGIES = [
    ("1x4", {}), ("2x2", {}), ("4x4", {}), ("2x2x2", {}), ("3x2", {}),
    ("2x4", {"twist": True}), ("3x3", {"wrap": False}), ("3x3", {"failed": [4]}),
    ("2x2x2", {"failed": [6]}),
]
IDS = [f"{d}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'torus'}" for d, kw in TOPOLOGIES]
RING_KINDS = ("all_reduce", "reduce_scatter", "all_gather")


def _shape(kind, chips, n):
    return (chips, chips, n) if kind == "all_to_all" else (chips, n * chips)


def _words(ranges):
    return [w for a, b in ranges for w in range(a, b)]


def _execute(transfers, buffers, on_reduce, on_copy):
    """Run the transfers step by step, each step reading before any of it writes; checks
    that no step writes a word twice or writes a word it also reads."""
    for step, group in itertools.groupby(transfers, key=lambda tr: tr.step):
        group = list(group)
        reads, writes = set(), set()
        payloads = []
        for tr in group:
            src = _words(tr.src_ranges)
            dst = _words(tr.dst_ranges)
            assert len(src) == len(dst) == tr.words > 0
            reads |= {(tr.src, w) for w in src}
            new = {(tr.dst, w) for w in dst}
            assert not writes & new, f"step {step} writes a word twice"
            writes |= new
            payloads.append((tr, [buffers[tr.src][w] for w in src], dst))
        assert not reads & writes, f"step {step} writes a word that it also reads"
        for tr, data, dst in payloads:
            fn = on_reduce if tr.op == "reduce" else on_copy
            for w, v in zip(dst, data):
                buffers[tr.dst][w] = fn(v, buffers[tr.dst][w])


@pytest.mark.parametrize("dims,kw", TOPOLOGIES, ids=IDS)
@pytest.mark.parametrize("kind", gc.KINDS)
def test_transfers_follow_links_between_their_chips(dims, kw, kind):
    t = torus(dims, **kw)
    chips = int(t.alive.sum())
    transfers = gc.schedule(kind, t, _shape(kind, chips, 3))
    assert transfers and [tr.step for tr in transfers] == sorted(tr.step for tr in transfers)
    regular = t.wrap and not t.twist and not t.failed
    for tr in transfers:
        assert t.alive[tr.src] and t.alive[tr.dst] and tr.src != tr.dst
        assert tr.op == ("reduce" if kind in ("all_reduce", "reduce_scatter") and
                         tr.step < _reduce_steps(t, kind) else "copy")
        at = tr.src
        for chip, port in tr.links:
            assert chip == at and t.neighbor[chip, port] >= 0, f"{tr} uses a dark port"
            at = int(t.neighbor[chip, port])
        assert at == tr.dst, f"{tr} ends at chip {at}"
        if regular and kind != "all_to_all":
            # A ring hop is one link out of port +axis or -axis, one coordinate step.
            (chip, port), = tr.links
            assert port == 2 * tr.axis + (tr.direction < 0)
            delta = (np.array(oc.coord(tr.dst, t.dims)) - oc.coord(tr.src, t.dims)) \
                % np.array(t.dims)
            expected = np.zeros(t.ndim, dtype=int)
            expected[tr.axis] = tr.direction % t.dims[tr.axis]
            np.testing.assert_array_equal(delta, expected)


def _reduce_steps(t, kind):
    """Steps of the reduce phases, from the docstring: K phases of max(R) - 1 steps."""
    if kind == "reduce_scatter":
        return 1 << 30
    if kind == "all_gather":
        return 0
    _, lengths, _ = oc.rings(t.dims, [int(f) for f in t.failed])
    return len(lengths) * (max(lengths) - 1)


@pytest.mark.parametrize("dims,kw", TOPOLOGIES, ids=IDS)
@pytest.mark.parametrize("kind", gc.KINDS)
def test_every_word_ends_where_it_belongs(dims, kw, kind):
    """Symbolic run: a reduced word carries the set of ranks summed into it (never twice);
    a gathered word carries the id of the input word it copies."""
    t = torus(dims, **kw)
    chips = int(t.alive.sum())
    live = [int(c) for c in np.flatnonzero(t.alive)]
    n = 2 * chips + 1 if kind != "reduce_scatter" else 2 * chips
    shape = _shape(kind, chips, 3) if kind == "all_to_all" else (chips, n)
    transfers = gc.schedule(kind, t, shape)

    def reduce(received, own):
        assert not received & own, "a contribution is summed twice"
        return received | own

    full = frozenset(range(chips))
    if kind in ("all_reduce", "reduce_scatter"):
        buffers = {c: [frozenset([r])] * n for r, c in enumerate(live)}
        _execute(transfers, buffers, reduce, lambda v, _: v)
        for r, c in enumerate(live):
            lo, hi = (0, n) if kind == "all_reduce" else (r * n // chips, (r + 1) * n // chips)
            assert all(buffers[c][w] == full for w in range(lo, hi)), \
                f"rank {r} misses contributions in words {lo}..{hi - 1}"
    elif kind == "all_gather":
        buffers = {c: [None] * (chips * n) for c in live}
        for r, c in enumerate(live):
            buffers[c][r * n:(r + 1) * n] = range(r * n, (r + 1) * n)
        _execute(transfers, buffers, None, lambda v, _: v)
        for c in live:
            assert buffers[c] == list(range(chips * n))
    else:
        # The buffer (golden.collectives): send [0, Cm), receive [Cm, 2Cm), relay areas.
        m = shape[2]
        cm = chips * m
        size = max(max(b for _, b in tr.src_ranges + tr.dst_ranges) for tr in transfers)
        buffers = {c: [(r, w) for w in range(cm)] + [None] * (size - cm)
                   for r, c in enumerate(live)}
        for r, c in enumerate(live):   # the local copy of the own block
            buffers[c][cm + r * m:cm + (r + 1) * m] = buffers[c][r * m:(r + 1) * m]

        def copy(value, old):
            assert value is not None, "a word is sent before it has arrived"
            assert old is None, "a word is delivered twice"
            return value
        assert all(tr.op == "copy" for tr in transfers)
        _execute(transfers, buffers, None, copy)
        for d, c in enumerate(live):
            assert buffers[c][cm:2 * cm] == [(src, d * m + w) for src in range(chips)
                                             for w in range(m)]


@pytest.mark.parametrize("dims,kw", TOPOLOGIES, ids=IDS)
@pytest.mark.parametrize("numerics", ["tpu", "ieee"])
def test_executing_the_schedule_gives_the_golden_bits(dims, kw, numerics, rng):
    """The schedule and the golden values describe the same summation order."""
    t = torus(dims, **kw)
    chips = int(t.alive.sum())
    live = [int(c) for c in np.flatnonzero(t.alive)]
    x = (rng.standard_normal((chips, 2 * chips)) * 2.0 ** rng.integers(-20, 20, (chips, 1)))
    x = x.astype(np.float32).view(np.uint32)
    buffers = {c: x[r].tolist() for r, c in enumerate(live)}

    def add(received, own):
        return int(arith.fp32_add(np.uint32(received), np.uint32(own), numerics=numerics))

    _execute(gc.schedule("all_reduce", t, x.shape), buffers, add, lambda v, _: v)
    expected = gc.collective("all_reduce", x, topology=t, numerics=numerics)
    for r, c in enumerate(live):
        np.testing.assert_array_equal(np.array(buffers[c], np.uint32), expected[r],
                                      err_msg=f"rank {r} (chip {c})")


# ------------------------------------------------------------------ link loads by hand

def test_link_loads_on_a_4_ring_by_hand():
    """1x4, n = 32 words: 4 chunks of 8, halves of 4 words; 3 reduce + 3 gather steps, each
    putting one half (16 bytes) on every directed link: 96 bytes. The x ports are dark."""
    t = torus("1x4")
    s = gc.schedule("all_reduce", t, (4, 32))
    assert len(s) == 6 * 4 * 2 and {tr.step for tr in s} == set(range(6))
    loads = gc.link_loads(s, t)
    np.testing.assert_array_equal(loads[:, :2], 0)
    np.testing.assert_array_equal(loads[:, 2:], 96)
    np.testing.assert_array_equal(gc.link_loads(gc.schedule("reduce_scatter", t, (4, 32)), t)
                                  [:, 2:], 48)
    # all_gather of 8 words per chip: 3 steps of a 4-word half per link.
    np.testing.assert_array_equal(gc.link_loads(gc.schedule("all_gather", t, (4, 8)), t)
                                  [:, 2:], 48)


def test_link_loads_on_2x2_by_hand():
    """2x2, n = 16: slices of 4 words, 2 shards of 2, halves of 1 word. Reduce phase 0: a
    chunk is 2 slices (2 words) on the shard's first axis; phase 1: 1 word on the other
    axis. Every directed link (both parallel links of each 2-ring): 3 words reduce-scatter,
    3 words gather."""
    t = torus("2x2")
    loads = gc.link_loads(gc.schedule("all_reduce", t, (4, 16)), t)
    np.testing.assert_array_equal(loads, 6 * 4)
    loads = gc.link_loads(gc.schedule("reduce_scatter", t, (4, 16)), t)
    np.testing.assert_array_equal(loads, 3 * 4)


def test_link_loads_on_4x4_by_formula():
    """n = 128, shards of 64: phase 0 sends 64/4/2 = 8 words for 3 steps on its axis, phase
    1 16/4/2 = 2 words for 3 steps on the other: 30 words per link, 60 for the all-reduce.
    That is the bound: 64 links x 60 words = 2 (C-1) n words."""
    t = torus("4x4")
    loads = gc.link_loads(gc.schedule("all_reduce", t, (16, 128)), t)
    np.testing.assert_array_equal(loads, 60 * 4)


def test_tables_carry_every_hop_when_given():
    """With destination-routed tables a 2-ring's two directions share one link."""
    t = torus("2x2")
    tables = routing_tables(t)
    s = gc.schedule("all_reduce", t, (4, 16), tables=tables)
    loads = gc.link_loads(s, t)
    assert loads.sum() == 16 * 6 * 4 and (loads == 0).sum() == 8 and loads.max() == 12 * 4


def test_all_to_all_loads_sum_the_torus_distances():
    t = torus("4x4")
    m = 5
    loads = gc.link_loads(gc.schedule("all_to_all", t, (16, 16, m)), t)
    dist = sum(min(d, 4 - d) for d in range(4)) * 4 * 2   # per source: x and y parts
    assert loads.sum() == 16 * dist * m * 4


@pytest.mark.parametrize("dims", ["4x4", "3x4x3"])
def test_an_all_to_all_by_dimensions_never_turns(dims):
    """Each phase moves shards along one axis: every link a transfer crosses is of its
    axis, between chips that differ only there, and step p of shard s is on the axis
    o_s[p] = (s + p) mod K."""
    t = torus(dims)
    transfers = gc.schedule("all_to_all", t, (t.n_chips, t.n_chips, 6))
    assert {tr.step for tr in transfers} == set(range(t.ndim))
    for tr in transfers:
        assert tr.axis == (tr.shard + tr.step) % t.ndim
        assert all(port // 2 == tr.axis for _, port in tr.links)
        differ = np.flatnonzero(np.array(oc.coord(tr.src, t.dims)) != oc.coord(tr.dst, t.dims))
        assert differ.tolist() == [tr.axis]


def test_schedule_rejects_bad_shapes():
    with pytest.raises(ValueError, match="divisible by C"):
        gc.schedule("reduce_scatter", "2x2", (4, 6))
    with pytest.raises(ValueError, match="C = 8 live chips"):
        gc.schedule("all_gather", torus("3x3", failed=[0]), (9, 6))
