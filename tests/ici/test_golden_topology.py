"""golden.topology: neighbour lists against SPEC 4.5 restated here (and a hand-written
twisted torus), every route against breadth-first search written here, the deadlock proof
on every generated table and on a known-bad one, OCS map checks, and the all-to-all fluid
bound against hand-derived values and a brute-force path enumeration."""

import itertools
from collections import deque

import numpy as np
import pytest

from golden import topology as topo
from golden.routing import eject_port, walk
from golden.topology import UNREACHABLE

PLUS_X, MINUS_X, PLUS_Y, MINUS_Y, PLUS_Z, MINUS_Z = range(6)


# ---------------------------------------------------------------- reference, written here

def ref_id(coord, dims):
    """Row-major: the last axis varies fastest."""
    i = 0
    for x, n in zip(coord, dims):
        i = i * n + x
    return i


def ref_coord(i, dims):
    out = []
    for n in reversed(dims):
        out.append(i % n)
        i //= n
    return tuple(reversed(out))


def ref_neighbors(dims, *, wrap=True, twist=False, failed=()):
    """{chip: [chip or None per port]} straight from SPEC 4.5: a short axis's wrap link
    of a twisted torus also moves k along every long axis."""
    k = min(dims)
    failed = set(failed)
    nbrs = {}
    for i in range(int(np.prod(dims))):
        c = ref_coord(i, dims)
        ports = []
        for a, step in itertools.product(range(len(dims)), (1, -1)):
            q = list(c)
            q[a] += step
            if dims[a] == 1:
                ports.append(None)
                continue
            if not 0 <= q[a] < dims[a]:
                if not wrap:
                    ports.append(None)
                    continue
                q[a] %= dims[a]
                if twist and dims[a] == k:
                    for b in range(len(dims)):
                        if dims[b] == 2 * k:
                            q[b] = (q[b] + step * k) % dims[b]
            j = ref_id(q, dims)
            ports.append(None if i in failed or j in failed else j)
        nbrs[i] = ports
    return nbrs


def bfs(nbrs, src):
    dist = {src: 0}
    todo = deque([src])
    while todo:
        c = todo.popleft()
        for q in nbrs[c]:
            if q is not None and q not in dist:
                dist[q] = dist[c] + 1
                todo.append(q)
    return dist


def neighbor_dict(t):
    return {c: [None if q < 0 else int(q) for q in row] for c, row in enumerate(t.neighbor)}


def check_route(t, tables, nbrs, src, dst, failed):
    """The route's hops follow links, visit no chip twice and no failed chip, end at dst."""
    hops = topo.route(t, tables, src, dst)
    at, seen = src, {src}
    for chip, port, vc in hops:
        assert chip == at, f"{src}->{dst}: hop leaves {chip}, packet is at {at}"
        at = nbrs[chip][port]
        assert at is not None, f"{src}->{dst}: dark port {port} of {chip}"
        assert at not in failed and at not in seen, f"{src}->{dst}: revisits or hits {at}"
        assert 0 <= vc < tables.vcs
        seen.add(at)
    assert at == dst
    return hops


def check_all_routes(t, tables, nbrs, failed):
    """Every live pair at once, through ``golden.deadlock.walk`` (which ``route`` uses): the
    same checks as ``check_route``, plus the routing rule of the module docstring: escape
    hops (in the escape VC) come first, then dimension order with one direction per axis,
    in VC 0 until that ring's dateline link and VC 1 from there on.

    Returns the hop count of every pair, [n, n] (-1 for failed chips)."""
    n = t.n_chips
    ref = np.array([[-1 if q is None else q for q in nbrs[c]] for c in range(n)])
    live = np.array([c for c in range(n) if c not in failed])
    src, dst = (a.ravel() for a in np.meshgrid(live, live, indexing="ij"))
    cur, count = src.copy(), np.zeros(src.size, dtype=int)
    seen = np.zeros((src.size, n), dtype=bool)
    seen[np.arange(src.size), src] = True
    last_port = np.full(src.size, -1)
    last_escape = np.ones(src.size, dtype=bool)         # "before the first hop"
    crossed = np.zeros(src.size, dtype=bool)
    for pair, chip, port, vc in walk(t, tables, src, dst):
        assert (chip == cur[pair]).all()
        nxt = ref[chip, port]
        assert (nxt >= 0).all() and not np.isin(nxt, list(failed)).any()
        assert not seen[pair, nxt].any(), "a route revisits a chip"
        escape = tables.escape[chip, dst[pair]]
        assert (escape <= last_escape[pair]).all(), "an escape hop after a routed one"
        assert ((vc == tables.escape_vc) == escape).all()
        routed = ~escape
        axis, last_axis = port // 2, np.where(last_escape[pair], -1, last_port[pair] // 2)
        assert (axis[routed] >= last_axis[routed]).all(), "not dimension order"
        same = routed & (axis == last_axis)
        assert (port[same] == last_port[pair][same]).all(), "turned back on an axis"
        ring = np.where(same, crossed[pair], False) | tables.dateline[chip, port]
        assert (vc[routed] == ring[routed]).all(), "VC is not 1 exactly after the dateline"
        seen[pair, nxt], cur[pair], count[pair] = True, nxt, count[pair] + 1
        last_port[pair], last_escape[pair], crossed[pair] = port, escape, ring
    assert (cur == dst).all()
    hops = np.full((n, n), -1)
    hops[src, dst] = count
    return hops


def bfs_matrix(nbrs, n):
    out = np.full((n, n), -1)
    for s in range(n):
        for d, h in bfs(nbrs, s).items():
            out[s, d] = h
    return out


# ---------------------------------------------------------------- neighbour lists

REGULAR = [("2x2", True), ("4x4", True), ("3x5", True), ("2x2x2", True), ("4x4x4", True),
           ("2x3x4", True), ("4x4", False), ("3x2x4", False), ("6x1", True)]
TWISTED = ["2x2x4", "4x4x8", "4x8x8", "8x4x4", "4x8x4", "8x8x4", "3x3x6", "3x6", "8x4"]


@pytest.mark.parametrize("shape,wrap", REGULAR)
def test_regular_neighbors(shape, wrap):
    dims = tuple(int(x) for x in shape.split("x"))
    t = topo.torus(shape, wrap=wrap)
    assert neighbor_dict(t) == ref_neighbors(dims, wrap=wrap)
    assert t.dims == dims and t.n_chips == np.prod(dims) and t.n_ports == 2 * len(dims)
    assert [tuple(c) for c in t.coords] == [ref_coord(i, dims) for i in range(t.n_chips)]


@pytest.mark.parametrize("shape", TWISTED)
def test_twisted_neighbors(shape):
    dims = tuple(int(x) for x in shape.split("x"))
    t = topo.torus(dims, twist=True)
    assert neighbor_dict(t) == ref_neighbors(dims, twist=True)


def test_twisted_2x2x4_by_hand():
    """k = 2: the x and y wrap links move 2 along z; everything else is a plain torus."""
    t = topo.torus("2x2x4", twist=True)
    wraps = {  # (chip, port): chip, written out by hand
        ((1, 0, 0), PLUS_X): (0, 0, 2), ((1, 0, 1), PLUS_X): (0, 0, 3),
        ((1, 0, 2), PLUS_X): (0, 0, 0), ((1, 0, 3), PLUS_X): (0, 0, 1),
        ((1, 1, 0), PLUS_X): (0, 1, 2), ((1, 1, 1), PLUS_X): (0, 1, 3),
        ((1, 1, 2), PLUS_X): (0, 1, 0), ((1, 1, 3), PLUS_X): (0, 1, 1),
        ((0, 1, 0), PLUS_Y): (0, 0, 2), ((0, 1, 1), PLUS_Y): (0, 0, 3),
        ((0, 1, 2), PLUS_Y): (0, 0, 0), ((0, 1, 3), PLUS_Y): (0, 0, 1),
        ((1, 1, 0), PLUS_Y): (1, 0, 2), ((1, 1, 1), PLUS_Y): (1, 0, 3),
        ((1, 1, 2), PLUS_Y): (1, 0, 0), ((1, 1, 3), PLUS_Y): (1, 0, 1),
    }
    inner = {((0, y, z), PLUS_X): (1, y, z) for y in range(2) for z in range(4)}
    inner |= {((x, 0, z), PLUS_Y): (x, 1, z) for x in range(2) for z in range(4)}
    inner |= {((x, y, z), PLUS_Z): (x, y, (z + 1) % 4)
              for x in range(2) for y in range(2) for z in range(4)}
    forward = wraps | inner
    assert len(forward) == 16 * 3
    expected = {}
    for (a, port), b in forward.items():
        expected[(a, port)] = b
        expected[(b, port + 1)] = a          # the -axis port is the same link reversed
    got = {(tuple(t.coords[c]), p): tuple(t.coords[q])
           for c in range(16) for p, q in enumerate(t.neighbor[c])}
    assert got == expected
    # The x "ring" through (0, 0, 0) closes only after 2k = 4 hops, through layer z = 2.
    ring, c = [], t.chip((0, 0, 0))
    for _ in range(4):
        ring.append(tuple(t.coords[c]))
        c = t.neighbor[c, PLUS_X]
    assert ring == [(0, 0, 0), (1, 0, 0), (0, 0, 2), (1, 0, 2)] and c == t.chip((0, 0, 0))


@pytest.mark.parametrize("shape", ["4x4x4", "4x4x12", "2x4x8", "4x4", "1x2x2", "4x4x8x8"])
def test_twist_rejected_on_other_shapes(shape):
    with pytest.raises(ValueError, match="twisted torus|dims"):
        topo.torus(shape, twist=True)


def test_twist_needs_wrap():
    with pytest.raises(ValueError, match="wrap"):
        topo.torus("4x4x8", wrap=False, twist=True)


@pytest.mark.parametrize("dims,kwargs", [
    ("4", {}), ("4xa", {}), ((4, 4, 4, 4), {}), ((0, 4), {}), ((4.0, 4), {}), ((1, 1), {}),
    (7, {}), ((True, 4), {}),
    ("4x4", {"wrap": 1}), ("4x4", {"twist": "no"}),
    ("4x4", {"failed": [16]}), ("4x4", {"failed": [3, 3]}), ("4x4", {"failed": [(4, 0)]}),
    ("4x4", {"failed": [(1, 1, 1)]}), ("4x4", {"failed": 3}), ("4x4", {"failed": "3"}),
    ("2x1", {"failed": [0, 1]}), ("4x4", {"failed": [None]}),
])
def test_torus_rejects_bad_input(dims, kwargs):
    with pytest.raises(ValueError):
        topo.torus(dims, **kwargs)


@pytest.mark.parametrize("shape, kwargs", [
    ("4x4", {}), ("1x4", dict(wrap=False)), ("2x2x4", dict(twist=True)),
    ("4x4", dict(failed=(5,))), ("2x3x4", dict(wrap=False, failed=(0, 7)))])
def test_hop_distances_are_breadth_first_search_over_the_live_chips(shape, kwargs):
    t = topo.torus(shape, **kwargs)
    n, failed = t.n_chips, list(kwargs.get("failed", ()))
    want = bfs_matrix(ref_neighbors(t.dims, **kwargs), n)
    want[failed, :] = -1
    want[:, failed] = -1
    got = topo.hop_distances(t)
    assert got.dtype.kind == "i" and got.tolist() == want.tolist()


def test_hop_distances_by_hand():
    # The 4x4 torus from chip 0 (row-major, y fastest): 2 hops to chip 2 either way round
    # y, 4 to chip 10 (2 + 2); a 1x4 line is its positions' differences.
    assert topo.hop_distances(topo.torus("4x4"))[0].tolist() == \
        [0, 1, 2, 1, 1, 2, 3, 2, 2, 3, 4, 3, 1, 2, 3, 2]
    line = topo.hop_distances(topo.torus("1x4", wrap=False))
    assert line.tolist() == [[abs(a - b) for b in range(4)] for a in range(4)]


def test_failed_chip_is_cut_out():
    t = topo.torus("4x4", failed=[(1, 2)])
    assert t.failed == (6,) and not t.alive[6] and t.alive.sum() == 15
    assert t.failed == topo.torus((4, 4), failed=np.array([6])).failed
    assert neighbor_dict(t) == ref_neighbors((4, 4), failed={6})
    assert (t.neighbor[6] == -1).all()


# ---------------------------------------------------------------- OCS maps

def test_ocs_map_realizes_the_links():
    t = topo.torus("4x4x8", twist=True)
    m = topo.ocs_map(t)
    assert m.shape == (128 * 6,) and (m >= 0).all()
    assert (m[m] == np.arange(m.size)).all()                       # symmetric
    assert (m % 6 == np.arange(m.size) % 6 ^ 1).all()              # +a meets -a
    nbrs = ref_neighbors((4, 4, 8), twist=True)
    assert all(m[c * 6 + p] // 6 == q for c, row in nbrs.items() for p, q in enumerate(row))
    assert len(t.links) == m.size // 2
    assert (topo.check_ocs_map(m, m.size) == m).all()


def test_twist_and_failure_change_only_the_ocs_map():
    plain, twisted = topo.torus("2x2x4"), topo.torus("2x2x4", twist=True)
    failed = topo.torus("2x2x4", failed=[5])
    for t in (twisted, failed):
        assert (t.n_chips, t.n_ports) == (plain.n_chips, plain.n_ports)
    changed = np.flatnonzero(topo.ocs_map(plain) != topo.ocs_map(twisted))
    # Only the x and y wrap ports move: x = 1 on +x, x = 0 on -x, likewise for y.
    expected = {c * 6 + p for c in range(16) for p, axis, end in
                ((PLUS_X, 0, 1), (MINUS_X, 0, 0), (PLUS_Y, 1, 1), (MINUS_Y, 1, 0))
                if ref_coord(c, (2, 2, 4))[axis] == end}
    assert set(changed.tolist()) == expected
    dark = np.flatnonzero(topo.ocs_map(failed) < 0)
    facing = {q * 6 + (p ^ 1) for p, q in enumerate(ref_neighbors((2, 2, 4))[5])}
    assert set(dark.tolist()) == set(range(30, 36)) | facing


@pytest.mark.parametrize("bad,reason", [
    ({0: 1, 1: 0, 2: 1}, "both map to 1"),
    ([1, 0, 3, 5], "outside"),
    ([1, 0, -2, -1], "outside"),
    ([1, 2, 3, 0], "symmetric"),
    ([0, -1, -1, -1], "itself"),
    ([1, 0, 3], "shape"),
    (np.array([1.0, 0.0, -1.0, -1.0]), "int"),
    ({7: -1}, "outside"),
])
def test_check_ocs_map_rejects(bad, reason):
    with pytest.raises(ValueError, match=reason):
        topo.check_ocs_map(bad, 4)


def test_topology_keeps_the_port_structure():
    """A link must join +a to -a: the OCS may not wire +x to +y."""
    t = topo.torus("2x2")
    ocs = np.full(16, -1)
    ocs[[0, 2]] = [2, 0]                        # chip 0 +x <-> chip 0 +y
    with pytest.raises(ValueError, match="-axis port"):
        topo.Topology(t.dims, t.wrap, t.twist, (), t.shift, ocs)
    with pytest.raises(ValueError, match="Topology"):
        topo.ocs_map("2x2")


def test_check_ocs_map_accepts_partial_permutations():
    assert topo.check_ocs_map({0: 3, 3: 0}, 4).tolist() == [3, -1, -1, 0]
    assert topo.check_ocs_map(np.array([2, -1, 0, -1]), 4).tolist() == [2, -1, 0, -1]
    assert topo.check_ocs_map([-1] * 4, 4).tolist() == [-1] * 4


# ---------------------------------------------------------------- routing

FAULT_FREE = [("2x2", {}), ("4x4", {}), ("2x2x2", {}), ("4x4x4", {}), ("3x5", {}),
              ("4x4", {"wrap": False}), ("2x3x4", {"wrap": False}), ("6x1", {}),
              ("2x2x4", {"twist": True}), ("4x4x8", {"twist": True}),
              ("4x8x8", {"twist": True}), ("8x4x4", {"twist": True}),
              ("3x3x6", {"twist": True}), ("3x6", {"twist": True})]


def dims_of(shape):
    return tuple(int(x) for x in shape.split("x"))


@pytest.mark.parametrize("shape,kwargs", FAULT_FREE)
def test_fault_free_routes_are_shortest_and_dimension_ordered(shape, kwargs, rng):
    t = topo.torus(shape, **kwargs)
    tables = topo.routing_tables(t)
    assert tables.scheme == "dor" and not tables.escape.any()
    assert topo.deadlock_free(t, tables, 2) is True
    nbrs = ref_neighbors(dims_of(shape), **kwargs)
    hops = check_all_routes(t, tables, nbrs, set())
    assert (hops == bfs_matrix(nbrs, t.n_chips)).all()
    # route() itself, pair by pair: all pairs on small systems, a sample on large ones.
    pairs = list(itertools.product(range(t.n_chips), repeat=2))
    if len(pairs) > 4096:
        pairs = [pairs[i] for i in rng.choice(len(pairs), 500, replace=False)]
    for src, dst in pairs:
        assert len(check_route(t, tables, nbrs, src, dst, set())) == hops[src, dst]


@pytest.mark.parametrize("shape,kwargs", FAULT_FREE)
def test_one_dateline_per_ring(shape, kwargs):
    """Each directed ring of 3+ links (found here by walking the reference neighbours)
    holds exactly one dateline link; shorter rings and meshes hold none."""
    t = topo.torus(shape, **kwargs)
    tables = topo.routing_tables(t)
    nbrs = ref_neighbors(dims_of(shape), **kwargs)
    marked = {(c, p) for c, p in zip(*np.nonzero(tables.dateline))}
    found = set()
    for port in range(t.n_ports):
        seen = set()
        for start in range(t.n_chips):
            ring, c = [], start
            while c is not None and c not in seen:
                seen.add(c)
                ring.append((c, port))
                c = nbrs[c][port]
            if c is None:                    # a mesh line, not a ring
                assert not marked & set(ring)
                continue
            on_ring = marked & set(ring)
            assert len(on_ring) == (1 if len(ring) >= 3 else 0), (port, ring)
            found |= on_ring
    assert found == marked


@pytest.mark.parametrize("shape,kwargs", [
    ("2x2", {"failed": [0]}), ("4x4", {"failed": [5]}), ("4x4", {"failed": [(1, 1), (2, 3)]}),
    ("2x2x2", {"failed": [3]}), ("4x4x4", {"failed": [21]}), ("4x4x4", {"failed": [0, 63]}),
    ("4x4", {"wrap": False, "failed": [5]}), ("4x4x8", {"twist": True, "failed": [37]}),
    ("4x4x4", {"failed": [(1, 1, 1), (1, 2, 1)]}),
])
@pytest.mark.parametrize("vcs", [1, 2, 3])
def test_failed_chips_are_routed_around(shape, kwargs, vcs):
    t = topo.torus(shape, **kwargs)
    tables = topo.routing_tables(t, vcs=vcs)
    needs_dateline = kwargs.get("wrap", True) and max(dims_of(shape)) >= 3
    expected = {1: "updown", 2: "mesh+escape" if needs_dateline else "dor+escape",
                3: "dor+escape"}[vcs]
    assert tables.scheme == expected
    assert topo.deadlock_free(t, tables, vcs) is True
    failed = set(t.failed)
    nbrs = ref_neighbors(dims_of(shape), **kwargs)
    hops = check_all_routes(t, tables, nbrs, failed)
    live = [c for c in range(t.n_chips) if c not in failed]
    stretch = (hops - bfs_matrix(nbrs, t.n_chips))[np.ix_(live, live)]
    assert stretch.min() == 0
    if expected == "dor+escape":
        assert stretch.max() <= 4 and stretch.mean() < 0.1
    for src, dst in itertools.product(live[::3], live[::2]):
        assert len(check_route(t, tables, nbrs, src, dst, failed)) == hops[src, dst]


def test_failed_chip_table_entries():
    t = topo.torus("4x4x4", failed=[21])
    tables = topo.routing_tables(t, vcs=3)
    assert (tables.port[21] == UNREACHABLE).all() and (tables.port[:, 21] == UNREACHABLE).all()
    for f in ((21, 0), (0, 21)):
        with pytest.raises(ValueError, match="failed"):
            topo.route(t, tables, *f)
    # Pairs whose dimension-order route avoids chip 21 keep it: (0,1,1) -> (3,1,1) goes -x
    # over the ring's only wrap link, its dateline.
    assert topo.route(t, tables, (0, 1, 1), (3, 1, 1)) == [(t.chip((0, 1, 1)), MINUS_X, 1)]
    # (0,1,1) -> (2,1,1) would pass (1,1,1) = chip 21 in +x: an escape hop leaves first.
    hops = topo.route(t, tables, (0, 1, 1), (2, 1, 1))
    assert hops[0][2] == 2 and tables.escape[t.chip((0, 1, 1)), t.chip((2, 1, 1))]


def test_disconnected_chip_is_unreachable():
    t = topo.torus("4x4", wrap=False, failed=[(0, 1), (1, 0)])
    tables = topo.routing_tables(t, vcs=3)
    corner = t.chip((0, 0))
    live = [c for c in range(16) if c not in (1, 4, corner)]
    assert all(tables.port[corner, c] == UNREACHABLE == tables.port[c, corner] for c in live)
    with pytest.raises(ValueError, match="unreachable"):
        topo.route(t, tables, corner, 15)
    nbrs = ref_neighbors((4, 4), wrap=False, failed={1, 4})
    for src, dst in itertools.product(live, live):
        check_route(t, tables, nbrs, src, dst, {1, 4})
    with pytest.raises(ValueError, match="disconnected"):
        topo.all_to_all_bound(t)
    with pytest.raises(ValueError, match="2 live chips"):
        topo.all_to_all_bound(topo.torus("2x1", failed=[0]))


def test_random_failures(rng):
    for shape, kwargs in [("4x4x4", {}), ("4x4x8", {"twist": True}), ("4x6", {})]:
        dims = dims_of(shape)
        n = int(np.prod(dims))
        failed = rng.choice(n, size=rng.integers(1, 3), replace=False).tolist()
        t = topo.torus(shape, failed=failed, **kwargs)
        nbrs = ref_neighbors(dims, failed=failed, **kwargs)
        for vcs in (2, 3):
            tables = topo.routing_tables(t, vcs=vcs)
            assert topo.deadlock_free(t, tables, vcs)
            for src, dst in rng.integers(0, n, size=(300, 2)):
                if src not in failed and dst not in failed:
                    check_route(t, tables, nbrs, int(src), int(dst), set(failed))


def test_table_encoding():
    t = topo.torus("4x4x4", failed=[7])
    tables = topo.routing_tables(t, vcs=3)
    assert tables.port.shape == (64, 64) and np.issubdtype(tables.port.dtype, np.integer)
    assert tables.eject == 6 and tables.dateline.shape == (64, 6)
    live = np.flatnonzero(np.arange(64) != 7)
    assert (tables.port[live, live] == 6).all()
    assert set(np.unique(tables.port).tolist()) == {UNREACHABLE, 0, 1, 2, 3, 4, 5, 6}
    assert not tables.port.flags.writeable
    assert topo.route(t, tables, 3, 3) == []
    mesh = topo.routing_tables(topo.torus("2x3", wrap=False), vcs=1)
    assert mesh.eject == 4 and not mesh.dateline.any()


def test_twisted_routes_by_hand():
    """2x2x4 twisted. (0,0,0) -> (1,0,2): the x wrap link from (0,0,0) in -x lands on
    (1,0,2) (it moves 2 back along z), one hop where the regular torus needs three. It is
    not the ring's dateline (that is the wrap link leaving (1,0,0), the ring's lower id,
    and its reverse), so VC 0. (0,0,0) -> (0,0,2): shortest vectors are (0,0,2), (2,0,0)
    and (0,2,0) and their negatives; the rule takes the least |v_x|, then |v_y|: +z twice."""
    t = topo.torus("2x2x4", twist=True)
    tables = topo.routing_tables(t)
    c = t.chip
    assert topo.route(t, tables, (0, 0, 0), (1, 0, 2)) == [(0, MINUS_X, 0)]
    assert len(topo.route(topo.torus("2x2x4"), topo.routing_tables(topo.torus("2x2x4")),
                          (0, 0, 0), (1, 0, 2))) == 3
    assert tables.dateline[c((1, 0, 0)), PLUS_X] and tables.dateline[c((0, 0, 2)), MINUS_X]
    assert not tables.dateline[c((1, 0, 2)), PLUS_X]
    assert topo.route(t, tables, (0, 0, 0), (0, 0, 2)) == [(0, PLUS_Z, 0), (1, PLUS_Z, 0)]


def test_vc_rule_by_hand():
    """An 8-ring (8x1): from chip 6 to chip 1 goes +x over the wrap link 7 -> 0, the
    ring's dateline, so VC 0, then VC 1 from the wrap link on."""
    t = topo.torus("8x1")
    tables = topo.routing_tables(t)
    assert tables.dateline[7, PLUS_X] and tables.dateline[0, MINUS_X]
    assert tables.dateline.sum() == 2
    assert topo.route(t, tables, 6, 1) == [(6, PLUS_X, 0), (7, PLUS_X, 1), (0, PLUS_X, 1)]
    assert topo.route(t, tables, 1, 6) == [(1, MINUS_X, 0), (0, MINUS_X, 1), (7, MINUS_X, 1)]
    # Turning to another axis starts VC 0 again: 4x4 from (3,0) to (1,1) over the x wrap
    # (the half-ring tie goes + for a destination with an even coordinate sum).
    t = topo.torus("4x4")
    hops = topo.route(t, topo.routing_tables(t), (3, 0), (1, 1))
    assert [(tuple(int(x) for x in t.coords[c]), p, v) for c, p, v in hops] == [
        ((3, 0), PLUS_X, 1), ((0, 0), PLUS_X, 1), ((1, 0), PLUS_Y, 0)]


@pytest.mark.parametrize("dims, local_ports, want", [
    (2, 1, [0, 0, 0, 0]),
    (2, 2, [0, 1, 1, 0]),
    (2, 3, [0, 1, 1, 2]),
    (2, 4, [0, 1, 2, 3]),
    (3, 2, [0, 1, 1, 0, 0, 1]),
    (3, 4, [0, 1, 1, 2, 2, 3]),
    (3, 6, [0, 1, 2, 3, 4, 5]),
])
def test_eject_port_by_hand(dims, local_ports, want):
    """Inputs +x, -x, +y, -y (, +z, -z): each its own port when there are enough; with
    2 ports the two of an axis apart, and +x and +y apart too."""
    got = [eject_port(p, torus_ports=2 * dims, local_ports=local_ports)
           for p in range(2 * dims)]
    assert got == want


# ---------------------------------------------------------------- deadlock proof

def without_datelines(tables):
    import dataclasses
    return dataclasses.replace(tables, dateline=np.zeros_like(tables.dateline))


@pytest.mark.parametrize("n", [5, 6])
def test_one_vc_ring_deadlock_is_caught(n):
    t = topo.torus((n, 1))
    bad = without_datelines(topo.routing_tables(t))
    with pytest.raises(topo.DeadlockError, match="dependency cycle") as info:
        topo.deadlock_free(t, bad, 1)
    cycle = info.value.cycle
    # The cycle is the whole ring in one direction, all in VC 0, each link feeding the next.
    assert len(cycle) == n and {vc for _, _, vc in cycle} == {0}
    assert len({p for _, p, _ in cycle}) == 1
    assert sorted(c for c, _, _ in cycle) == list(range(n))
    nbrs = ref_neighbors((n, 1))
    for (c, p, _), (c2, _, _) in zip(cycle, cycle[1:] + cycle[:1]):
        assert nbrs[c][p] == c2
    assert f"chip {cycle[0][0]}" in str(info.value)


def test_torus_without_datelines_is_caught():
    t = topo.torus("4x4x8", twist=True)
    with pytest.raises(topo.DeadlockError):
        topo.deadlock_free(t, without_datelines(topo.routing_tables(t)), 2)


def test_too_few_vcs():
    t = topo.torus("6x1")
    with pytest.raises(ValueError, match="needs 2 VCs"):
        topo.routing_tables(t, vcs=1)
    with pytest.raises(ValueError, match="vcs=1"):
        topo.deadlock_free(t, topo.routing_tables(t), 1)
    # No ring of 3+ links: one VC is enough.
    for t in (topo.torus("2x2x2"), topo.torus("5x5", wrap=False)):
        assert topo.deadlock_free(t, topo.routing_tables(t, vcs=1), 1)


def test_malformed_tables_are_rejected():
    import dataclasses
    t = topo.torus("4x1")
    good = topo.routing_tables(t)
    loop = good.port.copy()
    loop[1, 3], loop[2, 3] = PLUS_X, MINUS_X          # 1 -> 2 -> 1 -> ...
    with pytest.raises(ValueError, match="loop"):
        topo.deadlock_free(t, dataclasses.replace(good, port=loop), 2)
    dark = good.port.copy()
    dark[0, 2] = PLUS_Y
    with pytest.raises(ValueError, match="dark"):
        topo.deadlock_free(t, dataclasses.replace(good, port=dark), 2)
    early = good.port.copy()
    early[0, 2] = good.eject
    with pytest.raises(ValueError, match="ejects"):
        topo.deadlock_free(t, dataclasses.replace(good, port=early), 2)
    with pytest.raises(ValueError, match="tables are for"):
        topo.deadlock_free(topo.torus("2x3"), good, 2)
    for vcs in (0, 1.5, True):
        with pytest.raises(ValueError, match="vcs"):
            topo.deadlock_free(t, good, vcs)
        with pytest.raises(ValueError, match="vcs"):
            topo.routing_tables(t, vcs=vcs)
    with pytest.raises(ValueError, match="Topology"):
        topo.routing_tables("4x4")
    with pytest.raises(ValueError):
        topo.route(t, good, 0, 4)


# ---------------------------------------------------------------- fluid model

def ring_bound(n):
    """Hand-derived: a source's distances sum to n^2/4 (n even) or (n^2-1)/4 (n odd), over
    2n directed links, so each carries n^2/8 (or (n^2-1)/8) and (n-1)/load is the bound."""
    load = n * n / 8 if n % 2 == 0 else (n * n - 1) / 8
    return (n - 1) / load


@pytest.mark.parametrize("n", [3, 4, 5, 8])
def test_fluid_ring(n):
    assert topo.all_to_all_bound(topo.torus((n, 1))) == pytest.approx(ring_bound(n))


def test_fluid_hand_derived():
    # 4x4 torus: each source's distances sum to 32, 16 * 32 over 64 links = 8 per link.
    assert topo.all_to_all_bound(topo.torus("4x4")) == pytest.approx(15 / 8)
    # Lines: the middle link of 1-2-3 carries 2 pairs, of 1-2-3-4 carries 4.
    assert topo.all_to_all_bound(topo.torus("3x1", wrap=False)) == pytest.approx(2 / 2)
    assert topo.all_to_all_bound(topo.torus("4x1", wrap=False)) == pytest.approx(3 / 4)
    # Regular 4x4x8 / 4x8x8: the 8-rings bind, mean |d| = 2 over 2 directions: n*2/2.
    assert topo.all_to_all_bound(topo.torus("4x4x8")) == pytest.approx(127 / 128)
    assert topo.all_to_all_bound(topo.torus("4x8x8")) == pytest.approx(255 / 256)
    # Dimension-order tables on a 4-ring: the half-ring pair goes + for even destinations
    # and - for odd ones, so link 0->1 carries (0,1) and (0,2), and so on: 2 each, 3/2.
    t = topo.torus("4x1")
    assert topo.all_to_all_bound(t, tables=topo.routing_tables(t)) == pytest.approx(3 / 2)


def brute_force_bound(dims, **kwargs):
    """Enumerate every shortest path of every pair; each carries 1/count of the pair."""
    nbrs = ref_neighbors(dims, **kwargs)
    live = [c for c in nbrs if c not in kwargs.get("failed", ())]
    dist = {c: bfs(nbrs, c) for c in live}      # links are symmetric: dist[d][c] = d(c, d)
    load = {}
    for src, dst in itertools.product(live, live):
        paths = [(src, [])]
        for _ in range(dist[src][dst]):
            paths = [(q, links + [(c, p)]) for c, links in paths
                     for p, q in enumerate(nbrs[c])
                     if q is not None and dist[dst][q] == dist[dst][c] - 1]
        for _, links in paths:
            for link in links:
                load[link] = load.get(link, 0) + 1 / len(paths)
    return (len(live) - 1) / max(load.values())


@pytest.mark.parametrize("dims,kwargs", [((2, 2, 4), {"twist": True}), ((3, 6), {"twist": True}),
                                         ((4, 4), {"failed": {5}}), ((3, 4), {"wrap": False})])
def test_fluid_against_path_enumeration(dims, kwargs):
    assert topo.all_to_all_bound(topo.torus(dims, **kwargs)) == \
        pytest.approx(brute_force_bound(dims, **kwargs))


def test_twisting_raises_the_all_to_all_bound():
    """TPU v4 section 2.8 measured 1.63x (4x4x8) and 1.31x (4x8x8) all-to-all throughput."""
    for shape in ("4x4x8", "4x8x8"):
        regular = topo.torus(shape)
        twisted = topo.torus(shape, twist=True)
        ratio = topo.all_to_all_bound(twisted) / topo.all_to_all_bound(regular)
        routed = (topo.all_to_all_bound(twisted, tables=topo.routing_tables(twisted))
                  / topo.all_to_all_bound(regular, tables=topo.routing_tables(regular)))
        assert 1.2 < ratio < 2 and 1.2 < routed < 2, (shape, ratio, routed)
