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

Adaptive routing (``routing="adaptive"``, SPEC 4.4; Duato's protocol)
    The VCs split into escape VCs ``0 .. escape_vcs-1`` and adaptive VCs ``escape_vcs ..
    vcs-1``. The escape sub-network is the "dor" tables' routes above (``port``,
    ``escape``, ``dateline``), built on the fewest VCs they need (2 on a torus or with
    failed chips, 1 on a mesh), so adaptive routing needs one VC more. An adaptive VC may
    take any minimal port (``adaptive[c, d]``, ``minimal_ports``: every port on a shortest
    path over the live links; on a twisted torus that includes the twist). A packet in an
    adaptive VC may always fall back to the escape VC of its next hop.

    The escape VC of a hop is ``hop_vc[c, d]``, a function of chip and destination alone
    (a packet coming from an adaptive VC has no escape history): on a ring, VC 0 while the
    ring's dateline link is still ahead on the route's stretch along that axis, VC 1 on
    the dateline link, after it, and on stretches that never cross it; the up*/down* hops
    around failed chips keep their escape VC. (The "dor" rule, VC 1 only after a crossing
    made in VC 1, is not enough: a packet that crossed the dateline, went on in an
    adaptive VC and fell back would take VC 0 beyond the dateline, and the 4x4 torus then
    has the cycle ``(3, 2) +x vc1 -> (0, 3) +x vc0 -> (1, 3) +x vc0 -> (2, 3) +x vc0``.)

    Deadlock freedom (Duato): the routing function is connected (every packet can go on in
    the escape network, whose routes reach every destination), and the escape channels'
    extended dependency graph is acyclic. Its edges are the direct dependencies (escape
    hop A then escape hop B on one route) and, when escape packets may re-enter adaptive
    VCs (``reenter``), the indirect ones: a packet holding escape channel A takes one or
    more adaptive hops and then asks for escape channel B. No escape channel is ever
    taken as an adaptive one, so there are no cross dependencies. The proof is for
    wormhole switching (a packet may hold A while it asks for B); cut-through needs no
    more. ``build_tables`` allows re-entry when that graph is acyclic (regular tori,
    meshes, the 2x4 and 3x3x6 twisted tori) and otherwise makes the escape VCs absorbing
    (``reenter=False``: a packet that fell back stays in them to its destination, and the
    graph is the escape routes' own): on the larger twisted tori an adaptive hop along
    the long axis moves a packet backwards along a twisted ring's 2k links, past its
    dateline; around a failed chip an up*/down* escape hop leads away from the
    destination and a shortest path back passes its own link.

Channel dependency graph
    A channel is a directed link (sending chip and port) with a VC. Channel A depends on
    channel B when some routed packet can hold A while it requests B, i.e. B follows A on
    some route. Wormhole routing whose graph has no cycle cannot deadlock (Dally and
    Seitz); ``deadlock_free`` builds the graph from every routed pair and proves that.
"""

import dataclasses
import itertools
from dataclasses import dataclass

import numpy as np

__all__ = ["UNREACHABLE", "ROUTINGS", "RoutingTables", "DeadlockError", "build_tables",
           "next_vc", "eject_port", "check_pairing", "walk", "deadlock_free", "distances",
           "minimal_ports", "check_routing", "escape_dependencies"]

UNREACHABLE = -1
#: The routing modes (SPEC 4.4): dimension order, and minimal adaptive over escape VCs.
ROUTINGS = ("dor", "adaptive")
_INF = 1 << 40


@dataclass(frozen=True, eq=False)
class RoutingTables:
    """Per-router tables; the encoding is in the module docstring.

    ``scheme`` is "dor" (dimension order), or with failed chips "dor+escape", "mesh+escape"
    or "updown" (module docstring). ``vcs``: the VCs they were built for. ``vc_base``:
    the first VC of each destination's class (None: all 0).

    ``routing`` is "dor" or "adaptive" ("Adaptive routing" in the module docstring). For
    "adaptive", ``port`` (with ``escape`` and ``dateline``) is the escape sub-network,
    ``hop_vc`` (int [n_chips, n_chips]) the escape VC of every escape hop, ``adaptive``
    (bool [n_chips, n_chips, 2D]) the adaptive choices, and ``escape_vcs`` the escape VCs
    ``0 .. escape_vcs-1``: VCs ``escape_vcs .. vcs-1`` are adaptive; ``reenter``: whether a
    packet in an escape VC may take an adaptive VC again. For "dor" they are None.
    """
    port: np.ndarray
    dateline: np.ndarray
    escape: np.ndarray
    escape_vc: int
    vcs: int
    scheme: str
    vc_base: np.ndarray | None = None
    routing: str = "dor"
    hop_vc: np.ndarray | None = None
    adaptive: np.ndarray | None = None
    escape_vcs: int | None = None
    reenter: bool | None = None

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
        if self.routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {', '.join(ROUTINGS)}, "
                             f"not {self.routing!r}")
        adaptive = self.routing == "adaptive"
        given = [x is not None for x in (self.adaptive, self.escape_vcs, self.reenter)]
        if given != [adaptive] * 3 or (self.hop_vc is not None and not adaptive):
            raise ValueError(f"adaptive, escape_vcs and reenter (and hop_vc) are given for "
                             f"adaptive routing and only then, not for routing={self.routing!r}")
        if adaptive:
            hop_vc = np.zeros((n, n), np.int64) if self.hop_vc is None else \
                np.asarray(self.hop_vc)
            mask = np.asarray(self.adaptive)
            if hop_vc.shape != (n, n) or not np.issubdtype(hop_vc.dtype, np.integer):
                raise ValueError(f"hop_vc must be an int array of shape ({n}, {n})")
            if mask.shape != (n, n, self.dateline.shape[1]) or mask.dtype != bool:
                raise ValueError(f"adaptive must be a bool array of shape "
                                 f"({n}, {n}, {self.dateline.shape[1]})")
            if isinstance(self.escape_vcs, bool) or \
                    not isinstance(self.escape_vcs, (int, np.integer)) or self.escape_vcs < 1:
                raise ValueError(f"escape_vcs must be a positive int, not {self.escape_vcs!r}")

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


def check_routing(routing):
    """``routing`` if it is one of ``ROUTINGS``, else a one-line ValueError."""
    if not isinstance(routing, str) or routing not in ROUTINGS:
        raise ValueError(f"routing must be one of {', '.join(map(repr, ROUTINGS))}, "
                         f"not {routing!r}")
    return routing


def build_tables(topology, *, vcs=2, routing="dor"):
    """``golden.topology.routing_tables``: the tables of the module docstring, proven."""
    vcs = _check_vcs(vcs)
    if check_routing(routing) == "adaptive":
        return _build_adaptive(topology, vcs)
    return _build_dor(topology, vcs)


def _build_dor(topology, vcs, prove=True):
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
    if prove:
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
    With adaptive tables, ``tables.hop_vc[chip, dst]`` whatever the arrival (module
    docstring, "Adaptive routing"). Otherwise the escape VC on escape hops; else, with
    ``b = tables.vc_base[dst]`` (0 unless VC
    classes are in use), VC b + 1 on a dateline link or while going straight on
    (``in_port == out_port ^ 1``) in VC b + 1 after one (unless VC 1 is the escape VC);
    else b.
    """
    if tables.hop_vc is not None:       # adaptive routing's escape hops: a VC per (chip, dst)
        return np.broadcast_to(tables.hop_vc[chip, dst], np.broadcast_shapes(
            np.shape(chip), np.shape(dst), np.shape(in_port), np.shape(in_vc),
            np.shape(out_port))).copy()
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
    """None if the directed graph is acyclic, else one cycle as a list of nodes, each
    with an edge to the next and the last to the first. ``edges``: int array [E, 2]."""
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    src, dst = edges[:, 0], edges[:, 1]
    order = np.argsort(src, kind="stable")
    src_s, dst_s = src[order], dst[order]
    starts = np.searchsorted(src_s, np.arange(n_nodes))
    ends = np.searchsorted(src_s, np.arange(n_nodes), side="right")
    indeg = np.bincount(dst, minlength=n_nodes)
    # Kahn, a frontier at a time: peel nodes without predecessors; what cannot be peeled
    # lies on or after a cycle.
    frontier = np.flatnonzero(indeg == 0)
    while frontier.size:
        lens = ends[frontier] - starts[frontier]
        total = int(lens.sum())
        if total == 0:
            break
        first = np.repeat(starts[frontier] - np.cumsum(lens) + lens, lens)
        targets = dst_s[first + np.arange(total)]
        indeg -= np.bincount(targets, minlength=n_nodes)
        targets = np.unique(targets)
        frontier = targets[indeg[targets] == 0]
    left = indeg > 0
    if not left.any():
        return None
    # Every leftover node has a leftover predecessor; walking predecessors must repeat.
    keep = left[src] & left[dst]
    pred = np.full(n_nodes, -1, dtype=np.int64)
    pred[dst[keep]] = src[keep]
    node, seen, where = int(np.flatnonzero(left)[0]), [], {}
    while node not in where:
        where[node] = len(seen)
        seen.append(node)
        node = int(pred[node])
    cycle = seen[where[node]:]
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
    if tables.routing == "adaptive":
        return _deadlock_free_adaptive(topology, tables, vcs)
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
    cycle = _find_cycle(n_channels, np.stack([keys // n_channels, keys % n_channels], 1))
    if cycle is None:
        return True
    _raise_cycle(topology, cycle, vcs)


def _raise_cycle(topology, cycle, vcs, what="dependency cycle"):
    named = [(ch // vcs // topology.n_ports, ch // vcs % topology.n_ports, ch % vcs)
             for ch in cycle]
    text = " -> ".join(f"{topology.describe(c, p)} vc{v}" for c, p, v in named)
    raise DeadlockError(f"{what} over {len(named)} channels: {text} -> "
                        f"{topology.describe(named[0][0], named[0][1])} vc{named[0][2]}", named)


# --- Adaptive routing (module docstring, "Adaptive routing").

def distances(topology):
    """[n, n] hop distances over the live links (``Topology.neighbor``), -1 where there is
    no path (and for failed chips)."""
    nb, n = topology.neighbor, topology.n_chips
    live = np.flatnonzero(topology.alive)
    dist = np.full((n, n), -1, dtype=np.int64)
    dist[live, live] = 0
    front, level = dist == 0, 0
    while front.any():                  # breadth-first from every source at once
        new = np.zeros((n, n), dtype=bool)
        for p in range(topology.n_ports):
            u = np.flatnonzero(nb[:, p] >= 0)
            new[:, nb[u, p]] |= front[:, u]
        front = new & (dist < 0)
        level += 1
        dist[front] = level
    return dist


def minimal_ports(topology):
    """bool [n, n, 2D]: port p of chip c is on a shortest path over the live links from c
    to d (every productive direction; on a twisted torus every direction on a minimal
    route, the twist's included)."""
    nb, dist = topology.neighbor, distances(topology)
    q = np.maximum(nb, 0)                                       # [n, P]
    ahead = dist[q]                                             # [n, P, n]: dist(q, d)
    ok = (nb >= 0)[:, :, None] & (dist[:, None, :] > 0) & (ahead == dist[:, None, :] - 1)
    return np.ascontiguousarray(np.moveaxis(ok, 1, 2))


def _dateline_ahead(topology, tables):
    """bool [n, n]: the dimension-order hop out of chip c toward d has a dateline link
    further along its axis (after this hop, before the route turns or ends)."""
    n = topology.n_chips
    port, nb = tables.port, topology.neighbor
    c_idx = np.arange(n)[:, None]
    ring = (port >= 0) & (port < tables.eject) & ~tables.escape
    p = np.where(ring, port, 0)
    nxt = np.where(ring, nb[c_idx, p], 0)
    d_idx = np.broadcast_to(np.arange(n)[None, :], (n, n))
    cont = ring & (port[nxt, d_idx] == p) & ~tables.escape[nxt, d_idx]
    ahead = np.zeros((n, n), dtype=bool)
    for _ in range(n):
        new = cont & (tables.dateline[nxt, p] | ahead[nxt, d_idx])
        if (new == ahead).all():
            break
        ahead = new
    return ahead


def _build_adaptive(topology, vcs):
    """Adaptive tables: the escape sub-network (``_build_dor``'s routes on the fewest VCs
    they need, a VC per hop by the dateline-ahead rule) and every minimal port, proven."""
    dateline = _datelines(topology, topology.intact_neighbor)
    escape_vcs = 2 if dateline.any() or topology.failed else 1
    if vcs <= escape_vcs:
        raise ValueError(f"adaptive routing on {topology.shape} needs at least "
                         f"{escape_vcs + 1} VCs ({escape_vcs} escape, 1 adaptive), not "
                         f"vcs={vcs}")
    esc = _build_dor(topology, escape_vcs, prove=False)
    if esc.dateline.any():
        # VC 0 while the ring's dateline is still ahead, VC 1 from it on and on routes
        # that never cross it: a function of (chip, destination) alone.
        hop_vc = np.where(_dateline_ahead(topology, esc), 0, 1)
    else:
        hop_vc = np.zeros(esc.port.shape, dtype=np.int64)
    hop_vc = np.where(esc.escape, esc.escape_vc, hop_vc).astype(np.int64)
    mask = minimal_ports(topology)
    for array in (hop_vc, mask):
        array.flags.writeable = False
    tables = RoutingTables(esc.port, esc.dateline, esc.escape, esc.escape_vc, vcs,
                           esc.scheme, None, "adaptive", hop_vc, mask, escape_vcs, True)
    try:
        deadlock_free(topology, tables, vcs)
    except DeadlockError:
        # Re-entry makes a cycle (twisted rings, non-minimal escape hops around failed
        # chips): an escape packet then stays in the escape VCs to its destination.
        tables = dataclasses.replace(tables, reenter=False)
        deadlock_free(topology, tables, vcs)
    return tables


def _check_adaptive_choices(topology, tables):
    """ValueError unless every adaptive choice is a lit port of a live chip on a shortest
    path to a live destination."""
    mask, nb = tables.adaptive, topology.neighbor
    bad = mask & (nb < 0)[:, None, :]
    if bad.any():
        c, d, p = (int(x[0]) for x in np.nonzero(bad))
        raise ValueError(f"the adaptive choices send packets for {topology.describe(d)} out "
                         f"of {topology.describe(c, p)}, a dark port")
    alive = topology.alive
    bad = mask & ~(alive[:, None] & alive[None, :])[:, :, None]
    if bad.any():
        c, d, p = (int(x[0]) for x in np.nonzero(bad))
        raise ValueError(f"the adaptive choices route from {topology.describe(c)} to "
                         f"{topology.describe(d)}, and one of them is failed")
    bad = mask & ~minimal_ports(topology)
    if bad.any():
        c, d, p = (int(x[0]) for x in np.nonzero(bad))
        raise ValueError(f"the adaptive choice {topology.describe(c, p)} toward "
                         f"{topology.describe(d)} is not on a shortest path: adaptive "
                         f"routing is minimal")


def _adaptive_reach(topology, mask, dist, d):
    """bool [n, n]: chip c* is reachable from chip c by one or more adaptive hops toward
    d (minimal hops, so by increasing distance from d)."""
    n, nb = topology.n_chips, topology.neighbor
    reach = np.zeros((n, n), dtype=bool)
    level = dist[:, d]
    for k in range(1, int(level.max(initial=0)) + 1):
        cs = np.flatnonzero(level == k)
        for p in range(topology.n_ports):
            sel = cs[mask[cs, d, p]]
            if sel.size:
                q = nb[sel, p]
                reach[sel] |= reach[q]
                reach[sel, q] = True
    return reach


def escape_dependencies(topology, tables, vcs):
    """The escape channels' extended dependency graph of adaptive tables (module
    docstring, "Adaptive routing"), after checking the tables.

    Returns
    -------
    int64 array [E, 2] of ``(A, B)`` channel ids, ``(chip * 2D + port) * vcs + vc``,
    sorted and unique: a packet may hold escape channel A while it asks for B.
    """
    vcs = _check_vcs(vcs)
    check_pairing(topology, tables)
    if tables.routing != "adaptive":
        raise ValueError("escape_dependencies needs adaptive tables")
    esc_vcs = int(tables.escape_vcs)
    if esc_vcs >= vcs:
        raise ValueError(f"adaptive routing with {esc_vcs} escape VCs needs more than "
                         f"vcs={vcs}: no VC is left for adaptive hops")
    _check_adaptive_choices(topology, tables)
    n, ports = topology.n_chips, topology.n_ports
    src, dst = _all_routed_pairs(topology, tables)
    steps = walk(topology, tables, src, dst)        # the escape routes: connected, no loop
    for _, chip, port, vc in steps:
        bad = vc[(vc < 0) | (vc >= esc_vcs)]
        if bad.size:
            raise ValueError(f"an escape hop uses VC {int(bad[0])}, but the escape VCs are "
                             f"0..{esc_vcs - 1}")
    n_channels = n * ports * vcs
    channel = [(c * ports + p) * vcs + v for _, c, p, v in steps]
    # Direct dependencies: consecutive escape hops of one route.
    keys = []
    for t in range(len(steps) - 1):
        later = np.searchsorted(steps[t][0], steps[t + 1][0])
        keys.append(channel[t][later] * n_channels + channel[t + 1])
    # Indirect dependencies (only if escape packets may re-enter adaptive VCs): a packet
    # holding escape channel A (toward d) takes adaptive hops from A's far end to a chip
    # c*, then asks for the escape channel it enters there (in from an adaptive VC: no
    # arrival state, as if injected).
    if tables.reenter and steps:
        routed = (tables.port >= 0) & (tables.port < tables.eject)
        c_all, d_all = np.nonzero(routed)
        entry = np.full((n, n), -1, dtype=np.int64)
        out = tables.port[c_all, d_all]
        entry[c_all, d_all] = (c_all * ports + out) * vcs + next_vc(
            tables, c_all, d_all, np.full(c_all.size, -1), np.full(c_all.size, -1), out)
        held = np.concatenate(channel) if channel else np.zeros(0, np.int64)
        held_dst = np.concatenate([dst[pair] for pair, *_ in steps]) if steps else held
        held_key = np.unique(held * n + held_dst)
        held, held_dst = held_key // n, held_key % n
        link = held // vcs
        far = topology.neighbor[link // ports, link % ports]
        dist = distances(topology)
        for d in np.unique(held_dst):
            sel = held_dst == d
            reach = _adaptive_reach(topology, tables.adaptive, dist, d)[far[sel]]
            reach[:, d] = False
            i, j = np.nonzero(reach)
            keys.append(held[sel][i] * n_channels + entry[j, d])
    keys = np.unique(np.concatenate(keys)) if keys else np.zeros(0, dtype=np.int64)
    return np.stack([keys // n_channels, keys % n_channels], 1)


def _deadlock_free_adaptive(topology, tables, vcs):
    """Duato's condition for adaptive tables (module docstring)."""
    edges = escape_dependencies(topology, tables, vcs)
    cycle = _find_cycle(topology.n_chips * topology.n_ports * vcs, edges)
    if cycle is None:
        return True
    _raise_cycle(topology, cycle, vcs,
                 what="escape channels' extended dependency cycle (Duato)")
