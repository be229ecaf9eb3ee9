"""Routing tables for ``golden.topology``, and the proof that they cannot deadlock
(SPEC 4.4, 4.5). The public entry points are ``golden.topology.routing_tables``,
``deadlock_free`` and ``route``; this module holds the rules behind them.

Routing tables (``RoutingTables``)
    ``port[c, d]`` (int32 [n_chips, n_chips]) is the output port at chip c for packets to
    chip d: 0 .. 2D-1 a torus port, ``eject`` = 2D (the router's local port) when c == d,
    ``UNREACHABLE`` = -1 when c or d is failed or they are disconnected.
    ``dateline[c, p]`` (bool [n_chips, 2D]) marks dateline links, ``escape[c, d]`` (bool
    [n_chips, n_chips]) marks escape hops and ``escape_vc`` is their VC (-1: none).
    ``vc_base[d]`` (int [n_chips]) is the first VC of destination d's class (below). VC
    rule at chip c, for destination d, output port p, arrival port ``in_port`` (-1 when
    injected) and VC ``in_vc``, with ``b = vc_base[d]``::

        escape[c, d]                                                  -> escape_vc
        dateline[c, p]                                                -> b + 1
        in_vc == b + 1 and escape_vc != 1 and in_port == p ^ 1        -> b + 1
        otherwise                                                     -> b

    So a packet starts each ring in VC b, takes its dateline link in VC b + 1 and stays
    in VC b + 1 while it goes straight on; turning to another axis, or leaving an escape
    hop, starts VC b again.

VC classes
    With 4 or more VCs and no failed chip, the destinations split into two classes by the
    parity of their coordinate sum: class 1 (``vc_base`` 2 on a torus, 1 on a mesh) uses
    its own copy of the ring VCs. Every route stays in its destination's class, so the
    channel dependency graph is two disjoint copies of the one-class graph, each acyclic;
    and as the class depends on the destination alone, the packets of one pair still
    follow one path of channels (delivered in order). Otherwise ``vc_base`` is all zero
    (one class).

Routing rule, and why it is deadlock-free
    Dimension order (x, then y, then z) along a shortest vector: among all vectors from c
    to d modulo L (``Topology.lattice``; a twisted wrap is just another lattice vector) of
    least length, the one with the least ``(|v_x|, |v_y|, |v_z|)``, then positive signs
    (negative ones when d's coordinates have an odd sum, so that half-ring ties use both
    directions). The choice is consistent hop by hop (the vector left after a hop is the
    one the next chip picks), so a per-destination table realizes it, and routes are
    shortest in regular and twisted tori alike.

    A "ring" is a cycle of +a links: n_a long, or 2k through two layers on a twisted
    short axis. Each ring of 3 or more links has one dateline, one of its wrap links (the
    one leaving the lowest chip id), and the reverse link is the dateline of the reverse
    ring. A route goes at most half a ring along an axis, so it crosses a dateline at most
    once: in each ring the VC 0 channels stop short of the dateline and the VC 1 channels
    run from it without reaching it again, and axes are taken in order. The channel
    dependency graph is therefore acyclic. (Rings of 2 links need no dateline: no route
    takes 2 hops along them.)

    Failed chips: a pair whose dimension-order route meets no failed chip keeps it. Other
    chips route toward a clean chip (one whose route is intact) by up*/down* over the live
    chips (levels from a breadth-first search rooted next to a failure; "up" means toward
    a lower (level, id)): a chip that can reach a clean chip by down links alone does, else
    it takes an up link. These escape hops get a VC of their own. Escape channels depend on
    escape channels in up*/down* order (acyclic) or on dimension-order channels, never the
    reverse, so the graph stays acyclic. ``scheme`` names what the VCs allow:

    - "dor+escape": dimension order with datelines on VCs 0-1, escape VC 2 (vcs >= 3; the
      header's 2-bit VC field allows 4), or on VC 0 with escape VC 1 when no ring needs a
      dateline (meshes, 2-rings);
    - "mesh+escape" (vcs == 2 on a torus): dimension order on VC 0 as if the wrap links were
      absent (a mesh needs no dateline), escape VC 1, which may use the wrap links;
    - "updown" (vcs == 1): every pair up*/down* on VC 0.

    ``routing_tables`` proves every table with ``deadlock_free`` before returning it.

Channel dependency graph
    A channel is a directed link (sending chip and port) with a VC. Channel A depends on
    channel B when some routed packet can hold A while it requests B, i.e. B follows A on
    some route. Wormhole routing whose graph has no cycle cannot deadlock (Dally and
    Seitz); ``deadlock_free`` builds the graph from every routed pair and proves that.
"""

import itertools
from dataclasses import dataclass

import numpy as np

__all__ = ["UNREACHABLE", "RoutingTables", "DeadlockError", "build_tables", "next_vc",
           "eject_port", "check_pairing", "walk", "deadlock_free"]

UNREACHABLE = -1
_INF = 1 << 40


@dataclass(frozen=True, eq=False)
class RoutingTables:
    """Per-router tables; the encoding is in the module docstring.

    ``scheme`` is "dor" (dimension order), or with failed chips "dor+escape", "mesh+escape"
    or "updown" (module docstring). ``vcs``: the VCs they were built for. ``vc_base``:
    the first VC of each destination's class (None: all 0).
    """
    port: np.ndarray
    dateline: np.ndarray
    escape: np.ndarray
    escape_vc: int
    vcs: int
    scheme: str
    vc_base: np.ndarray | None = None

    def __post_init__(self):
        n = self.port.shape[0]
        base = np.zeros(n, np.int64) if self.vc_base is None else np.asarray(self.vc_base)
        if base.shape != (n,) or not np.issubdtype(base.dtype, np.integer) or \
                (base < 0).any():
            raise ValueError(f"vc_base must be {n} non-negative ints, not {self.vc_base!r}")
        base = base.astype(np.int64)
        base.flags.writeable = False
        object.__setattr__(self, "vc_base", base)
        if self.port.shape != (n, n) or self.escape.shape != (n, n) or \
                self.dateline.ndim != 2 or self.dateline.shape[0] != n:
            raise ValueError(f"table shapes do not fit together: port {self.port.shape}, "
                             f"dateline {self.dateline.shape}, escape {self.escape.shape}")
        if self.dateline.dtype != bool or self.escape.dtype != bool:
            raise ValueError("dateline and escape must be bool arrays")

    @property
    def eject(self):
        """The port value meaning "eject here": 2*D, the router's local port."""
        return self.dateline.shape[1]


class DeadlockError(ValueError):
    """The tables' channel dependency graph has a cycle; ``cycle`` lists it as
    ``(chip, out_port, vc)`` channels, each depending on the next and the last on the first."""

    def __init__(self, message, cycle):
        super().__init__(message)
        self.cycle = cycle


def _check_vcs(vcs):
    if isinstance(vcs, (bool, np.bool_)) or not isinstance(vcs, (int, np.integer)) or vcs < 1:
        raise ValueError(f"vcs must be a positive int, not {vcs!r}")
    return int(vcs)


def _dor_vectors(topology):
    """[n, n, D]: the vector each pair's dimension-order route follows (module docstring)."""
    coords, dims = topology.coords, topology.dims
    diff = coords[None, :, :] - coords[:, None, :]
    if not topology.wrap:
        return diff
    # Candidates for each offset class t: t + m @ rows. A minimal vector goes at most half
    # a ring along each axis, which |m| <= 2 covers for every shape torus() accepts.
    rows = topology.lattice
    m = np.array(list(itertools.product(range(-2, 3), repeat=topology.ndim)))
    cand = coords[:, None, :] + m @ rows
    mag = np.abs(cand)
    key = mag.sum(-1)
    for a in range(topology.ndim):
        key = key * (8 * max(dims)) + mag[..., a]
    cls = topology.reduce(diff)
    cls = np.ravel_multi_index(tuple(np.moveaxis(cls, -1, 0)), dims)
    # Ties of + against - (half a ring) go + for destinations of even coordinate sum and -
    # for odd ones, so both directions carry them; the choice depends on d alone, which
    # keeps the routes consistent hop by hop.
    best = []
    for prefer_minus in (False, True):
        signed = key
        for a in range(topology.ndim):
            signed = signed * 2 + ((cand[..., a] < 0) != prefer_minus)
        best.append(cand[np.arange(len(coords)), signed.argmin(1)][cls])
    odd = (coords.sum(1) % 2 == 1)[None, :, None]
    return np.where(odd, best[1], best[0])


def _datelines(topology, nb):
    """One dateline per ring of 3 or more links: its wrap link from the lowest chip id."""
    dl = np.zeros(nb.shape, dtype=bool)
    if not topology.wrap:
        return dl
    for a in range(topology.ndim):
        plus, seen = nb[:, 2 * a], np.zeros(topology.n_chips, dtype=bool)
        for start in range(topology.n_chips):
            ring, c = [], start
            while plus[c] >= 0 and not seen[c]:
                seen[c] = True
                ring.append(c)
                c = plus[c]
            if len(ring) >= 3:
                c = min(c for c in ring if topology.coords[c, a] == topology.dims[a] - 1)
                dl[c, 2 * a] = dl[plus[c], 2 * a + 1] = True
    return dl


def _updown_levels(topology):
    """BFS level of every live chip, per connected component, from a root beside a failure."""
    nb, alive = topology.neighbor, topology.alive
    full = topology.intact_neighbor
    near_failure = alive & (~alive[np.maximum(full, 0)] & (full >= 0)).any(1)
    level = np.full(topology.n_chips, -1)
    for root in sorted(np.flatnonzero(alive), key=lambda c: (not near_failure[c], c)):
        if level[root] >= 0:
            continue
        level[root], frontier = 0, [root]
        while frontier:
            nxt = [q for c in frontier for q in nb[c] if q >= 0 and level[q] < 0]
            nxt = list(dict.fromkeys(nxt))
            level[nxt] = level[frontier[0]] + 1
            frontier = nxt
    return level


def _escape_routes(topology, clean, exit_cost):
    """Up*/down* next ports from every unclean live chip toward the clean chips."""
    n, nb = topology.n_chips, topology.neighbor
    level = _updown_levels(topology)
    key = np.where(level >= 0, level * n + np.arange(n), -1)
    order = np.argsort(key)[np.sort(key) >= 0]
    via = np.where(clean, exit_cost, _INF)  # cost from each chip once a hop has reached it

    def best(c, cost_after, downward):
        """Cheapest next port of chip c, per destination, over its down (or up) links."""
        cost, port = np.full(n, _INF), np.full(n, UNREACHABLE)
        for p in range(topology.n_ports):
            q = nb[c, p]
            if q < 0 or (key[q] > key[c]) != downward:
                continue
            cand = np.minimum(1 + np.where(clean[q], via[q], cost_after[q]), _INF)
            better = cand < cost
            cost, port = np.where(better, cand, cost), np.where(better, p, port)
        return cost, port

    # Down links go to a higher key: solve from the highest key down.
    down = np.full((n, n), _INF)
    down_port = np.full((n, n), UNREACHABLE)
    for c in order[::-1]:
        down[c], down_port[c] = best(c, down, True)
    # A chip that can go down all the way does; else it goes up (lower key, solved first).
    total, total_port = down.copy(), down_port.copy()
    for c in order:
        cost, port = best(c, total, False)
        use_up = down[c] >= _INF
        total[c] = np.where(use_up, cost, down[c])
        total_port[c] = np.where(use_up, port, down_port[c])
    return np.where(total < _INF, total_port, UNREACHABLE)


def build_tables(topology, *, vcs=2):
    """``golden.topology.routing_tables``: the tables of the module docstring, proven."""
    vcs = _check_vcs(vcs)
    n = topology.n_chips
    full = topology.intact_neighbor
    dateline = _datelines(topology, full)
    ring_vcs = 2 if dateline.any() else 1
    vec = _dor_vectors(topology)
    # Failures on a torus with 2 VCs: no VC left for both datelines and escapes, so route
    # dimension order as in a mesh, which needs no dateline.
    mesh_mode = bool(topology.failed) and vcs == ring_vcs == 2
    if mesh_mode:
        vec = topology.coords[None, :, :] - topology.coords[:, None, :]
        dateline = np.zeros_like(dateline)
    dist = np.abs(vec).sum(-1)
    first = np.argmax(vec != 0, axis=-1)
    sign = np.take_along_axis(vec, first[..., None], -1)[..., 0] < 0
    dor_port = np.where(dist > 0, 2 * first + sign, topology.eject)
    if not topology.failed:
        if vcs < ring_vcs:
            raise ValueError(f"dimension-order routing on the rings of {topology.shape} "
                             f"needs 2 VCs (a dateline per ring), not vcs={vcs}")
        # Two classes (module docstring) by coordinate parity, which splits every ring's
        # destinations, and every shape's, about evenly.
        classes = vcs >= 4 and vcs >= 2 * ring_vcs
        base = (topology.coords.sum(1) % 2) * ring_vcs if classes else None
        tables = RoutingTables(dor_port.astype(np.int32), dateline, np.zeros((n, n), bool),
                               -1, vcs, "dor", base)
    else:
        alive = topology.alive
        if vcs > 1:
            # A pair is clean when its dimension-order route meets no failed chip.
            clean = np.zeros((n, n), dtype=bool)
            nxt = full[np.arange(n)[:, None], np.minimum(dor_port, topology.n_ports - 1)]
            for hops in range(dist.max() + 1):
                c, d = np.nonzero(dist == hops)
                clean[c, d] = alive[c] & alive[d] & ((hops == 0) | clean[nxt[c, d], d])
            escape_vc = 1 if mesh_mode or ring_vcs == 1 else 2
            scheme = "mesh+escape" if mesh_mode else "dor+escape"
        else:
            clean = np.diag(alive)
            scheme, escape_vc, dateline = "updown", 0, np.zeros_like(dateline)
        esc_port = _escape_routes(topology, clean, np.where(clean, dist, _INF))
        live_pair = alive[:, None] & alive[None, :]
        port = np.where(clean, dor_port, np.where(live_pair, esc_port, UNREACHABLE))
        tables = RoutingTables(port.astype(np.int32), dateline,
                               (~clean) & (port >= 0), escape_vc, vcs, scheme)
    for array in (tables.port, tables.dateline, tables.escape):
        array.flags.writeable = False
    deadlock_free(topology, tables, vcs)
    return tables


def next_vc(tables, chip, dst, in_port, in_vc, out_port):
    """The VC a packet takes on its next link (arrays or scalars, broadcast together).

    Parameters
    ----------
    tables : RoutingTables
    chip, dst : chip the packet is at, and its destination
    in_port, in_vc : port and VC it arrived on (-1, -1 when it is being injected)
    out_port : the torus port the table chose

    Returns
    -------
    The escape VC on escape hops; else, with ``b = tables.vc_base[dst]`` (0 unless VC
    classes are in use), VC b + 1 on a dateline link or while going straight on
    (``in_port == out_port ^ 1``) in VC b + 1 after one (unless VC 1 is the escape VC);
    else b.
    """
    base = tables.vc_base[dst]
    straight = (np.asarray(in_vc) == base + 1) & (tables.escape_vc != 1) & \
        (np.asarray(in_port) == np.asarray(out_port) ^ 1)
    ring_vc = np.where(tables.dateline[chip, out_port] | straight, base + 1, base)
    return np.where(tables.escape[chip, dst], tables.escape_vc, ring_vc)


def eject_port(in_port, *, torus_ports, local_ports):
    """The local port a router ejects a packet on that arrived on torus input ``in_port``.

    Every packet of one input ejects on one port, so the packets of a route stay in order.
    With a local port for every torus input (``local_ports >= torus_ports``) input p ejects
    on port p. With fewer, input p (axis ``p // 2``, sign ``p % 2``) ejects on
    ``(p // 2 + p % 2) mod local_ports``: with 2 ports the two inputs of an axis eject
    apart, and so do the + inputs of neighbouring axes, so a destination's arrivals split
    even when all of them come the same way round.
    """
    if local_ports >= torus_ports:
        return in_port
    return (in_port // 2 + in_port % 2) % local_ports


def check_pairing(topology, tables):
    """Raise ValueError unless the tables' shapes fit the topology."""
    n, ports = topology.n_chips, topology.n_ports
    if tables.port.shape != (n, n) or tables.dateline.shape != (n, ports):
        raise ValueError(f"the tables are for {tables.port.shape[0]} chips with "
                         f"{tables.dateline.shape[1]} ports, the topology has {n} with {ports}")


def walk(topology, tables, src, dst):
    """Move the packets ``src[i] -> dst[i]`` through the tables together, one hop per step.

    Parameters
    ----------
    topology : Topology
    tables : RoutingTables
    src, dst : int arrays of equal length; every table entry at ``(src[i], dst[i])`` must be
        a route (not unreachable)

    Returns
    -------
    list of ``(pair, chip, port, vc)`` int arrays, one tuple per hop number: ``pair`` holds
    the indices ``i`` (ascending) of the packets that take a link at that step.
    """
    check_pairing(topology, tables)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    pair = np.arange(src.size)
    cur, in_port, in_vc = src.copy(), np.full(src.size, -1), np.full(src.size, -1)
    steps = []
    # A route that does not arrive within n_chips hops revisits a chip: a routing loop.
    for _ in range(topology.n_chips + 1):
        out = tables.port[cur, dst[pair]]
        if (out < 0).any():
            i = int(np.flatnonzero(out < 0)[0])
            raise ValueError(f"the route from {topology.describe(src[pair[i]])} to "
                             f"{topology.describe(dst[pair[i]])} reaches "
                             f"{topology.describe(cur[i])}, whose table has no entry for it")
        ejected = out == tables.eject
        wrong = ejected & (cur != dst[pair])
        if wrong.any():
            i = int(np.flatnonzero(wrong)[0])
            raise ValueError(f"the table ejects packets for {topology.describe(dst[pair[i]])}"
                             f" at {topology.describe(cur[i])}")
        if (out > tables.eject).any():
            raise ValueError(f"a table entry names port {int(out.max())}, but ports are "
                             f"0..{tables.eject}")
        keep = ~ejected
        pair, cur, out, in_port, in_vc = pair[keep], cur[keep], out[keep], in_port[keep], \
            in_vc[keep]
        if pair.size == 0:
            return steps
        vc = next_vc(tables, cur, dst[pair], in_port, in_vc, out)
        nxt = topology.neighbor[cur, out]
        if (nxt < 0).any():
            i = int(np.flatnonzero(nxt < 0)[0])
            raise ValueError(f"the table sends packets for {topology.describe(dst[pair[i]])} "
                             f"out of {topology.describe(cur[i], int(out[i]))}, a dark port")
        steps.append((pair, cur, out, vc))
        cur, in_port, in_vc = nxt, out ^ 1, vc
    raise ValueError(f"routing loop: the packet from {topology.describe(src[pair[0]])} to "
                     f"{topology.describe(dst[pair[0]])} does not arrive within "
                     f"{topology.n_chips} hops")


def _all_routed_pairs(topology, tables):
    alive = np.flatnonzero(topology.alive)
    src, dst = np.meshgrid(alive, alive, indexing="ij")
    src, dst = src.ravel(), dst.ravel()
    routed = (src != dst) & (tables.port[src, dst] >= 0)
    return src[routed], dst[routed]


def _find_cycle(n_nodes, edges):
    """None if the directed graph is acyclic, else one cycle as a list of nodes."""
    succ = [[] for _ in range(n_nodes)]
    indeg = np.zeros(n_nodes, dtype=np.int64)
    for a, b in edges:
        succ[a].append(b)
        indeg[b] += 1
    # Kahn: peel nodes without predecessors; what cannot be peeled lies on or after a cycle.
    ready = list(np.flatnonzero(indeg == 0))
    while ready:
        a = ready.pop()
        for b in succ[a]:
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
    left = indeg > 0
    if not left.any():
        return None
    # Every leftover node has a leftover predecessor; walking predecessors must repeat.
    pred = {}
    for a, b in edges:
        if left[a] and left[b]:
            pred.setdefault(b, a)
    node, seen = int(np.flatnonzero(left)[0]), []
    while node not in seen:
        seen.append(node)
        node = pred[node]
    cycle = seen[seen.index(node):]
    return cycle[::-1]


def deadlock_free(topology, tables, vcs):
    """Prove that the tables cannot deadlock a wormhole network with ``vcs`` VCs per link.

    Builds the channel dependency graph over (link, VC) from every routed pair of live
    chips and checks that it has no cycle.

    Parameters
    ----------
    topology : Topology
    tables : RoutingTables
    vcs : int, the VCs per link of the router

    Returns
    -------
    True

    Raises
    ------
    DeadlockError (a ValueError) naming a dependency cycle; ValueError when a route uses a
    VC outside ``0 .. vcs-1``, loops, ejects at the wrong chip or uses a dark port.
    """
    vcs = _check_vcs(vcs)
    check_pairing(topology, tables)
    steps = walk(topology, tables, *_all_routed_pairs(topology, tables))
    for _, chip, port, vc in steps:
        bad = vc[(vc < 0) | (vc >= vcs)]
        if bad.size:
            raise ValueError(f"the tables use VC {int(bad[0])}, but the router has vcs={vcs}")
    # Channel id: (chip * n_ports + port) * vcs + vc.
    channel = [(c * topology.n_ports + p) * vcs + v for _, c, p, v in steps]
    n_channels = topology.n_chips * topology.n_ports * vcs
    keys = []
    for t in range(len(steps) - 1):
        later = np.searchsorted(steps[t][0], steps[t + 1][0])
        keys.append(channel[t][later] * n_channels + channel[t + 1])
    keys = np.unique(np.concatenate(keys)) if keys else np.zeros(0, dtype=np.int64)
    edges = zip((keys // n_channels).tolist(), (keys % n_channels).tolist())
    cycle = _find_cycle(n_channels, list(edges))
    if cycle is None:
        return True
    named = [(ch // vcs // topology.n_ports, ch // vcs % topology.n_ports, ch % vcs)
             for ch in cycle]
    text = " -> ".join(f"{topology.describe(c, p)} vc{v}" for c, p, v in named)
    raise DeadlockError(f"dependency cycle over {len(named)} channels: {text} -> "
                        f"{topology.describe(named[0][0], named[0][1])} vc{named[0][2]}", named)
