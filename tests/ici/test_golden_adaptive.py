"""Adaptive routing tables (``golden.routing``, "Adaptive routing"; SPEC 4.4, issue 44):
the minimal choices against a breadth-first search written here, the escape sub-network's
VC rule against a walk written here, and Duato's condition on hand-built cases that must
pass and must fail."""

import dataclasses

import numpy as np
import pytest

from golden import routing
from golden import topology as topo
from hdl.ici.layouts import route_entry_layout, table_entries

from .test_golden_topology import bfs_matrix, ref_neighbors

PLUS_X, MINUS_X, PLUS_Y, MINUS_Y = range(4)

CASES = [  # (shape, torus kwargs, vcs, escape VCs, escape packets may re-enter adaptive VCs)
    ("4x4", {}, 3, 2, True),
    ("4x4", {}, 4, 2, True),
    ("8x8", {}, 3, 2, True),
    ("4x4x4", {}, 3, 2, True),
    ("4x4", {"wrap": False}, 2, 1, True),
    ("3x2x4", {"wrap": False}, 2, 1, True),
    ("2x4", {"twist": True}, 3, 2, True),
    ("3x3x6", {"twist": True}, 3, 2, True),
    ("8x4", {"twist": True}, 3, 2, False),
    ("4x4x8", {"twist": True}, 3, 2, False),
    ("4x4", {"failed": (5,)}, 3, 2, False),
    ("4x4x4", {"failed": (5, 20)}, 4, 2, False),
]


def ref_minimal(t, nbrs, failed):
    """[n, n, P]: port p of c lies on a shortest path from c to d, by BFS distances."""
    n = t.n_chips
    dist = bfs_matrix(nbrs, n)
    out = np.zeros((n, n, t.n_ports), dtype=bool)
    for c in range(n):
        for d in range(n):
            if c == d or c in failed or d in failed or dist[c, d] < 0:
                continue
            for p, q in enumerate(nbrs[c]):
                out[c, d, p] = q is not None and dist[q, d] == dist[c, d] - 1
    return out


@pytest.mark.parametrize("shape, kwargs, vcs, escape_vcs, reenter", CASES)
def test_adaptive_tables(shape, kwargs, vcs, escape_vcs, reenter):
    t = topo.torus(shape, **kwargs)
    failed = set(t.failed)
    nbrs = ref_neighbors(t.dims, wrap=t.wrap, twist=t.twist, failed=failed)
    tables = topo.routing_tables(t, vcs=vcs, routing="adaptive")
    assert tables.routing == "adaptive" and tables.vcs == vcs
    assert tables.escape_vcs == escape_vcs and tables.reenter is reenter
    # Every minimal port, and nothing else (a mesh's or a twisted torus's included).
    np.testing.assert_array_equal(tables.adaptive, ref_minimal(t, nbrs, failed))
    # The escape sub-network is the dimension-order tables' routes.
    dor = topo.routing_tables(t, vcs=escape_vcs)
    np.testing.assert_array_equal(tables.port, dor.port)
    np.testing.assert_array_equal(tables.escape, dor.escape)
    assert topo.deadlock_free(t, tables, vcs) is True
    # Every escape VC below the adaptive ones.
    assert tables.hop_vc.max() < escape_vcs


def ref_escape_vcs(t, tables, src, dst):
    """The escape VCs of the route src -> dst by the rule written out: up*/down* hops on
    the escape VC; on a ring stretch, VC 0 for the hops before the stretch's dateline link
    and VC 1 from it on (all VC 1 if the stretch has none); VC 0 everywhere without
    datelines."""
    hops = topo.route(t, tables, src, dst)
    want, i = [], 0
    while i < len(hops):
        c, p, _ = hops[i]
        if tables.escape[c, dst]:
            want.append(tables.escape_vc)
            i += 1
            continue
        j = i
        while j < len(hops) and hops[j][1] == p and not tables.escape[hops[j][0], dst]:
            j += 1
        stretch = hops[i:j]
        cross = [k for k, (c2, p2, _) in enumerate(stretch) if tables.dateline[c2, p2]]
        if not tables.dateline.any():
            want += [0] * len(stretch)
        elif cross:
            want += [0] * cross[0] + [1] * (len(stretch) - cross[0])
        else:
            want += [1] * len(stretch)
        i = j
    return [v for _, _, v in hops], want


@pytest.mark.parametrize("shape, kwargs, vcs", [("6x1", {}, 3), ("4x4", {}, 3),
                                                ("4x4x8", {"twist": True}, 3),
                                                ("4x4", {"failed": (5,)}, 3),
                                                ("3x4", {"wrap": False}, 2)])
def test_escape_vc_rule(shape, kwargs, vcs):
    t = topo.torus(shape, **kwargs)
    tables = topo.routing_tables(t, vcs=vcs, routing="adaptive")
    live = np.flatnonzero(t.alive)
    for s in live:
        for d in live:
            if s != d:
                got, want = ref_escape_vcs(t, tables, int(s), int(d))
                assert got == want, (s, d)


def test_escape_vcs_on_a_ring_by_hand():
    """6-ring: the +x dateline is chip 5 -> 0, the -x one chip 0 -> 5."""
    t = topo.torus("6x1")
    tables = topo.routing_tables(t, vcs=3, routing="adaptive")
    assert topo.route(t, tables, 3, 5) == [(3, PLUS_X, 1), (4, PLUS_X, 1)]
    assert topo.route(t, tables, 4, 0) == [(4, PLUS_X, 0), (5, PLUS_X, 1)]
    assert topo.route(t, tables, 5, 1) == [(5, PLUS_X, 1), (0, PLUS_X, 1)]
    assert topo.route(t, tables, 1, 5) == [(1, MINUS_X, 0), (0, MINUS_X, 1)]
    assert topo.route(t, tables, 2, 0) == [(2, MINUS_X, 1), (1, MINUS_X, 1)]
    # Minimal choices: 0 -> 2 only +x, 0 -> 4 only -x, 0 -> 3 (half the ring) both.
    assert tables.adaptive[0, 2].tolist() == [True, False, False, False]
    assert tables.adaptive[0, 4].tolist() == [False, True, False, False]
    assert tables.adaptive[0, 3].tolist() == [True, True, False, False]
    assert not tables.adaptive[0, 0].any()


def test_dor_rule_with_reentry_has_the_documented_cycle():
    """The "dor" VC rule (VC 1 only after a crossing in VC 1) under re-entry: a packet that
    crossed the +x dateline of row 2 in VC 1 goes on +y adaptively and falls back at
    (0, 3) in VC 0, which depends on row 3's VC 0 channels up to the dateline."""
    t = topo.torus("4x4")
    good = topo.routing_tables(t, vcs=3, routing="adaptive")
    old = dataclasses.replace(good, hop_vc=None)        # next_vc's "dor" rule
    with pytest.raises(topo.DeadlockError, match="extended dependency cycle") as info:
        topo.deadlock_free(t, old, 3)
    cycle = info.value.cycle
    assert cycle == [(14, PLUS_X, 1), (3, PLUS_X, 0), (7, PLUS_X, 0), (11, PLUS_X, 0)]
    assert "chip 14 (3, 2) +x vc1 -> chip 3 (0, 3) +x vc0" in str(info.value)
    # The cycle needs the indirect dependencies: without adaptive hops, or without
    # re-entry, the same escape routes are acyclic.
    empty = np.zeros_like(good.adaptive)
    assert topo.deadlock_free(t, dataclasses.replace(old, adaptive=empty), 3)
    assert topo.deadlock_free(t, dataclasses.replace(old, reenter=False), 3)


@pytest.mark.parametrize("shape, kwargs", [("4x4x8", {"twist": True}), ("8x4", {"twist": True}),
                                           ("4x4", {"failed": (5,)})])
def test_reentry_fails_where_the_tables_forbid_it(shape, kwargs):
    t = topo.torus(shape, **kwargs)
    tables = topo.routing_tables(t, vcs=3, routing="adaptive")
    assert tables.reenter is False
    with pytest.raises(topo.DeadlockError, match="Duato") as info:
        topo.deadlock_free(t, dataclasses.replace(tables, reenter=True), 3)
    # Every channel of the cycle is an escape channel of a real link.
    for c, p, v in info.value.cycle:
        assert t.neighbor[c, p] >= 0 and v < tables.escape_vcs


def test_failed_chip_escape_hop_depends_on_itself():
    """Around failed chip 5 of the 4x4, an up*/down* hop leads away from its destination,
    and a shortest path back passes the same link: with re-entry, a one-channel cycle."""
    t = topo.torus("4x4", failed=(5,))
    tables = dataclasses.replace(topo.routing_tables(t, vcs=3, routing="adaptive"),
                                 reenter=True)
    with pytest.raises(topo.DeadlockError) as info:
        topo.deadlock_free(t, tables, 3)
    [(c, p, v)] = info.value.cycle
    assert v == tables.escape_vc and tables.escape[c].any()


def test_escape_without_straight_on_vc_is_caught():
    """Escape VC 1 on the dateline hop only (back to VC 0 after it): the escape routes
    themselves close the ring, re-entry or not."""
    t = topo.torus("6x1")
    tables = topo.routing_tables(t, vcs=3, routing="adaptive")
    n = t.n_chips
    hop = np.zeros((n, n), dtype=np.int64)
    for c in range(n):
        for d in range(n):
            p = tables.port[c, d]
            hop[c, d] = int(0 <= p < tables.eject and tables.dateline[c, p])
    with pytest.raises(topo.DeadlockError) as info:
        topo.deadlock_free(t, dataclasses.replace(tables, hop_vc=hop, reenter=False), 3)
    assert len({p for _, p, _ in info.value.cycle}) == 1


def test_bad_adaptive_tables_are_rejected():
    t = topo.torus("4x4")
    good = topo.routing_tables(t, vcs=3, routing="adaptive")
    mask = good.adaptive.copy()
    mask[0, 1, MINUS_X] = True                  # 0 -> 1 is one hop +y; -x leads away
    with pytest.raises(ValueError, match="not on a shortest path"):
        topo.deadlock_free(t, dataclasses.replace(good, adaptive=mask), 3)
    mesh = topo.torus("4x4", wrap=False)
    mgood = topo.routing_tables(mesh, vcs=2, routing="adaptive")
    mask = mgood.adaptive.copy()
    mask[0, 5, MINUS_X] = True                  # chip 0's -x is dark in a mesh
    with pytest.raises(ValueError, match="dark port"):
        topo.deadlock_free(mesh, dataclasses.replace(mgood, adaptive=mask), 2)
    hop = good.hop_vc.copy()
    hop[0, 1] = 2                               # an escape hop on the adaptive VC
    with pytest.raises(ValueError, match="escape VCs are 0..1"):
        topo.deadlock_free(t, dataclasses.replace(good, hop_vc=hop), 3)
    with pytest.raises(ValueError, match="no VC is left"):
        topo.deadlock_free(t, good, 2)
    with pytest.raises(ValueError, match="needs at least 3 VCs"):
        topo.routing_tables(t, vcs=2, routing="adaptive")
    for bad in ("DOR", "minimal", None, 1):
        with pytest.raises(ValueError, match="routing must be one of"):
            topo.routing_tables(t, routing=bad)
    with pytest.raises(ValueError, match="adaptive, escape_vcs and reenter"):
        dataclasses.replace(good, routing="dor")
    with pytest.raises(ValueError, match="bool array"):
        dataclasses.replace(good, adaptive=good.adaptive[:, :, :2])


def test_dor_tables_unchanged():
    """``routing="dor"`` (the default) builds what it always did."""
    for shape, kwargs in [("4x4", {}), ("4x4x8", {"twist": True}), ("4x4", {"failed": (5,)})]:
        t = topo.torus(shape, **kwargs)
        a, b = topo.routing_tables(t, vcs=4), topo.routing_tables(t, vcs=4, routing="dor")
        assert a.routing == b.routing == "dor" and a.hop_vc is None and a.adaptive is None
        for name in ("port", "dateline", "escape", "vc_base"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_adaptive_table_entries_fix_every_escape_vc():
    t = topo.torus("4x4")
    tables = topo.routing_tables(t, vcs=3, routing="adaptive")
    for c in range(t.n_chips):
        for d, bits in enumerate(table_entries(tables, c, vcs=3)):
            e = {name: bits >> route_entry_layout[name].offset
                 & ((1 << route_entry_layout[name].width) - 1)
                 for name in ("reachable", "port", "fixed", "vc")}
            if c == d:
                assert e["port"] == t.eject
                continue
            assert (e["reachable"], e["port"], e["fixed"], e["vc"]) == \
                (1, tables.port[c, d], 1, tables.hop_vc[c, d])


# ---------------------------------------------------------------- the proof, by brute force

def ref_escape_dependencies(t, tables, vcs):
    """The extended dependency graph, enumerated here: per destination d and chip c, the
    escape channel E(c, d) = (c, port[c, d], hop_vc[c, d]); E(c, d) -> E(c', d) for the
    chip c' it leads to (direct), and with re-entry E(c, d) -> E(x, d) for every chip x
    reached from c' by one or more adaptive hops toward d (indirect)."""
    n, ports = t.n_chips, t.n_ports
    nbrs = neighbor_lists(t)

    def channel(c, d):
        return (c * ports + int(tables.port[c, d])) * vcs + int(tables.hop_vc[c, d])

    edges = set()
    for d in range(n):
        for c in range(n):
            p = int(tables.port[c, d])
            if c == d or p < 0:
                continue
            nxt = nbrs[c][p]
            if nxt == d:
                continue
            edges.add((channel(c, d), channel(nxt, d)))
            if not tables.reenter:
                continue
            todo, seen = [nxt], set()
            while todo:
                x = todo.pop()
                for q, ok in zip(nbrs[x], tables.adaptive[x, d]):
                    if ok and q not in seen:
                        seen.add(q)
                        todo.append(q)
            for x in seen - {d}:
                edges.add((channel(c, d), channel(x, d)))
    return edges


def neighbor_lists(t):
    return [[None if q < 0 else int(q) for q in row] for row in t.neighbor]


def has_cycle(edges):
    succ = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
    state = {}

    def visit(a):
        state[a] = 1
        for b in succ.get(a, ()):
            if state.get(b) == 1 or (b not in state and visit(b)):
                return True
        state[a] = 2
        return False
    return any(a not in state and visit(a) for a in list(succ))


@pytest.mark.parametrize("shape, kwargs, vcs, reenter", [
    ("4x4", {}, 3, None), ("3x5", {}, 3, None), ("3x4", {"wrap": False}, 2, None),
    ("2x4", {"twist": True}, 3, None), ("8x4", {"twist": True}, 3, True),
    ("4x4", {"failed": (5,)}, 3, True), ("4x4", {"failed": (5,)}, 3, None),
    ("2x2x4", {"twist": True}, 3, None)])
def test_extended_graph_against_enumeration(shape, kwargs, vcs, reenter):
    t = topo.torus(shape, **kwargs)
    tables = topo.routing_tables(t, vcs=vcs, routing="adaptive")
    if reenter is not None:
        tables = dataclasses.replace(tables, reenter=reenter)
    got = {tuple(e) for e in routing.escape_dependencies(t, tables, vcs).tolist()}
    want = ref_escape_dependencies(t, tables, vcs)
    assert got == want
    cyclic = has_cycle(want)
    if cyclic:
        with pytest.raises(topo.DeadlockError):
            topo.deadlock_free(t, tables, vcs)
    else:
        assert topo.deadlock_free(t, tables, vcs) is True
    assert cyclic == (reenter is True)      # the two forced re-entries are the cyclic ones
