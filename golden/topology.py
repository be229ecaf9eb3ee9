"""Multi-chip topologies (SPEC 4.4, 4.5, 4.8): tori, meshes, twisted tori and failed chips,
the OCS map that realizes them, deadlock-free routing tables, and an all-to-all fluid bound.

Chips and ports
    ``dims`` is (X, Y) or (X, Y, Z). Chip ids are row-major, ``np.ravel_multi_index(coord,
    dims)``: the last axis varies fastest. Every chip has ``2*D`` torus ports whatever the
    topology: port ``2*a`` is ``+a`` and ``2*a + 1`` is ``-a`` (0 ``+x``, 1 ``-x``, 2 ``+y``,
    3 ``-y``, 4 ``+z``, 5 ``-z``). A link always joins a ``+a`` port to a ``-a`` port. An axis of
    size 1 has dark ports (an ``n x 1`` torus is a ring).

OCS map
    Every chip port is an OCS port, id ``chip * 2*D + port``. ``ocs[i] = j`` when port i is
    connected to port j, -1 when it is dark. Links are full duplex, so the map must be a
    symmetric partial permutation: no port maps to itself, no two ports share a target, and
    ``ocs[ocs[i]] == i``. A twist or a failure changes only this map and the tables.

Twisted tori
    k x k x 2k and k x 2k x 2k (any axis order; also 2-D k x 2k, the paper's Figure 5):
    crossing a short axis's wrap link in the + direction also moves k along every long
    axis (TPU v4 section 2.8). The chips are then Z^D modulo a lattice L, and a short
    axis's ring closes only after 2k hops, through two layers.

Routing
    ``routing_tables`` gives per-router tables (an int array of output ports per chip and
    destination, plus the VC rule as data), ``deadlock_free`` proves them and ``route``
    traces one packet (along the escape route, for adaptive tables). Their encoding, the
    routing rules ("dor" and "adaptive") for regular, twisted and failed topologies and the
    deadlock-freedom arguments are in ``golden.routing``.

Fluid model
    ``all_to_all_bound``: every ordered pair of live chips sends at the same rate, split
    evenly over all its shortest paths (or along the tables' routes); links carry 1 flit
    per cycle per direction, and nothing else limits the rate.
"""

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from . import routing as _routing
from .routing import UNREACHABLE, DeadlockError, RoutingTables, walk

__all__ = [
    "PORT_NAMES", "UNREACHABLE", "Topology", "RoutingTables", "DeadlockError",
    "parse_dims", "torus", "check_ocs_map", "ocs_map", "routing_tables", "deadlock_free", "route",
    "all_to_all_load", "all_to_all_bound", "hop_distances",
]

PORT_NAMES = ("+x", "-x", "+y", "-y", "+z", "-z")


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_ocs_map(ocs_map, n_ports):
    """Validate an OCS map and return it as a read-only int64 array.

    Parameters
    ----------
    ocs_map : dict {port: port} (missing ports are dark) or int array [n_ports], -1 dark
    n_ports : int, the OCS ports (chips times ports per chip)

    Returns
    -------
    np.ndarray of int64, shape [n_ports]

    Raises
    ------
    ValueError if the map is not a symmetric partial permutation of ``0 .. n_ports-1``.
    """
    if not _is_int(n_ports) or n_ports < 1:
        raise ValueError(f"n_ports must be a positive int, not {n_ports!r}")
    if isinstance(ocs_map, dict):
        m = np.full(n_ports, -1, dtype=np.int64)
        for i, j in ocs_map.items():
            if not (_is_int(i) and _is_int(j)):
                raise ValueError(f"OCS map entries must be ints, not {i!r}: {j!r}")
            if not 0 <= i < n_ports:
                raise ValueError(f"OCS port {i} is outside 0..{n_ports - 1}")
            m[i] = j
    else:
        m = np.asarray(ocs_map)
        if m.shape != (n_ports,) or not np.issubdtype(m.dtype, np.integer):
            raise ValueError(f"the OCS map must be an int array of shape ({n_ports},), "
                             f"not {m.dtype} {m.shape}")
        m = m.astype(np.int64)
    bad = np.flatnonzero((m < -1) | (m >= n_ports))
    if bad.size:
        raise ValueError(f"OCS port {bad[0]} maps to {m[bad[0]]}, outside -1..{n_ports - 1}")
    self_loop = np.flatnonzero(m == np.arange(n_ports))
    if self_loop.size:
        raise ValueError(f"OCS port {self_loop[0]} maps to itself")
    lit = np.flatnonzero(m >= 0)
    targets, counts = np.unique(m[lit], return_counts=True)
    if (counts > 1).any():
        t = targets[counts > 1][0]
        a, b = lit[m[lit] == t][:2]
        raise ValueError(f"OCS ports {a} and {b} both map to {t}: not a partial permutation")
    back = m[m[lit]]
    asym = lit[back != lit]
    if asym.size:
        i = asym[0]
        raise ValueError(f"OCS port {i} maps to {m[i]} but port {m[i]} maps to {m[m[i]]}: "
                         f"links are bidirectional, so the map must be symmetric")
    m.flags.writeable = False
    return m


@dataclass(frozen=True, eq=False)
class Topology:
    """A multi-chip system: chips with 2*D ports each, joined through an OCS map.

    Build it with ``torus``. ``ocs`` is the OCS map (module docstring), which alone decides
    the links (``neighbor``). ``shift[a]`` (int [D, D]) is what crossing axis a's wrap link
    in the + direction adds to the other coordinates (zero unless twisted); with ``dims``
    and ``wrap`` it gives the lattice and ``intact_neighbor``, the links of this shape when
    no chip has failed, which routing follows. ``failed`` holds the failed chip ids.
    """
    dims: tuple
    wrap: bool
    twist: bool
    failed: tuple
    shift: np.ndarray
    ocs: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "ocs", check_ocs_map(self.ocs, self.n_chips * self.n_ports))
        lit = np.flatnonzero(self.ocs >= 0)
        if ((lit % self.n_ports) ^ 1 != self.ocs[lit] % self.n_ports).any():
            raise ValueError("every link must join a +axis port to the -axis port of the "
                             "same axis")

    @property
    def ndim(self):
        return len(self.dims)

    @property
    def n_chips(self):
        return int(np.prod(self.dims))

    @property
    def n_ports(self):
        """Torus ports per chip, 2*D."""
        return 2 * self.ndim

    @property
    def eject(self):
        """The router's local (ejection) port, numbered after the torus ports."""
        return self.n_ports

    @functools.cached_property
    def coords(self):
        """[n_chips, D] coordinates of every chip."""
        c = np.indices(self.dims).reshape(self.ndim, -1).T
        c.flags.writeable = False
        return c

    @functools.cached_property
    def lattice(self):
        """[D, D] rows generating the lattice L: p and p + row name the same chip."""
        rows = np.diag(np.array(self.dims)) - self.shift
        rows.flags.writeable = False
        return rows

    def reduce(self, vectors):
        """The chip coordinates that integer points [..., D] name, wrapping around the
        torus (modulo the lattice)."""
        # Twisted axes first: their rows also move the long axes, which are reduced after.
        for a in sorted(range(self.ndim), key=lambda a: not self.shift[a].any()):
            vectors = vectors - np.floor_divide(vectors[..., a], self.dims[a])[..., None] \
                * self.lattice[a]
        return vectors

    @functools.cached_property
    def intact_neighbor(self):
        """[n_chips, 2D] chip behind each port as if no chip had failed, -1 for no link."""
        nb = np.full((self.n_chips, self.n_ports), -1, dtype=np.int64)
        for a, s in itertools.product(range(self.ndim), (1, -1)):
            if self.dims[a] == 1:  # a wrap link to itself carries nothing: leave it dark
                continue
            q = self.coords.copy()
            q[:, a] += s
            out = (q[:, a] < 0) | (q[:, a] >= self.dims[a])
            q = self.reduce(q)
            ids = np.ravel_multi_index(tuple(q.T), self.dims)
            nb[:, 2 * a + (s < 0)] = np.where(out & (not self.wrap), -1, ids)
        nb.flags.writeable = False
        return nb

    @functools.cached_property
    def neighbor(self):
        """[n_chips, 2D] chip reached through each port, -1 when the port is dark."""
        nb = np.where(self.ocs >= 0, self.ocs // self.n_ports, -1).reshape(self.n_chips, -1)
        nb.flags.writeable = False
        return nb

    @functools.cached_property
    def alive(self):
        a = np.ones(self.n_chips, dtype=bool)
        a[list(self.failed)] = False
        a.flags.writeable = False
        return a

    @property
    def links(self):
        """Physical links as ``((chip, port), (chip, port))`` pairs, each listed once."""
        ocs, p = self.ocs, self.n_ports
        return [((i // p, i % p), (int(ocs[i]) // p, int(ocs[i]) % p))
                for i in np.flatnonzero(ocs > np.arange(ocs.size)).tolist()]

    def chip(self, where):
        """The id of a chip given as an id or a coordinate tuple."""
        if _is_int(where):
            if not 0 <= where < self.n_chips:
                raise ValueError(f"chip {where} is outside 0..{self.n_chips - 1}")
            return int(where)
        try:
            coord = tuple(where)
        except TypeError:
            raise ValueError(f"a chip is an id or a coordinate, not {where!r}") from None
        if len(coord) != self.ndim or not all(_is_int(x) for x in coord) or \
                not all(0 <= x < n for x, n in zip(coord, self.dims)):
            raise ValueError(f"{coord!r} is not a coordinate in {self.shape}")
        return int(np.ravel_multi_index(coord, self.dims))

    def describe(self, chip, port=None):
        """``"chip 5 (1, 1)"``, or with a port ``"chip 5 (1, 1) +x"``: for messages."""
        chip = int(chip)
        text = f"chip {chip} {tuple(int(x) for x in self.coords[chip])}"
        return text if port is None else f"{text} {PORT_NAMES[port]}"

    @property
    def shape(self):
        return "x".join(map(str, self.dims))

    def __repr__(self):
        kind = "twisted torus" if self.twist else "torus" if self.wrap else "mesh"
        return f"Topology({self.shape} {kind}, failed={self.failed})"


def parse_dims(dims):
    """``dims`` as a tuple of 2 or 3 positive ints with a product of at least 2, from a
    tuple or a string such as ``"4x4x8"``. ValueError otherwise."""
    if isinstance(dims, str):
        try:
            dims = tuple(int(x) for x in dims.lower().split("x"))
        except ValueError:
            raise ValueError(f"dims must look like '4x4x8', not {dims!r}") from None
    try:
        dims = tuple(dims)
    except TypeError:
        raise ValueError(f"dims must be 2 or 3 ints or a string like '4x4', not {dims!r}") \
            from None
    if len(dims) not in (2, 3) or not all(_is_int(n) and n >= 1 for n in dims):
        raise ValueError(f"dims must be 2 or 3 positive ints, not {dims!r}")
    dims = tuple(int(n) for n in dims)
    if np.prod(dims) < 2:
        raise ValueError(f"a topology needs at least 2 chips, not {dims}")
    return dims


def _twist_shift(dims):
    k = min(dims)
    if k < 2 or set(dims) != {k, 2 * k}:
        raise ValueError(f"a twisted torus is k x k x 2k or k x 2k x 2k (or k x 2k) with "
                         f"k >= 2, not {'x'.join(map(str, dims))}")
    short = np.array(dims) == k
    return np.outer(short, ~short).astype(np.int64) * k  # shift[short, long] = k


def torus(dims, *, wrap=True, twist=False, failed=()):
    """A 2-D or 3-D torus, mesh or twisted torus, with some chips failed.

    Parameters
    ----------
    dims : 2 or 3 ints, or a string such as ``"4x4x8"``
    wrap : False for a mesh (no wraparound links)
    twist : True for the twisted tori k x k x 2k and k x 2k x 2k (any axis order, or 2-D
        k x 2k): a short axis's wrap link also moves k along every long axis
    failed : chip ids or coordinate tuples of failed chips; their links are dark

    Returns
    -------
    Topology
    """
    dims = parse_dims(dims)
    if not isinstance(wrap, bool) or not isinstance(twist, bool):
        raise ValueError(f"wrap and twist must be bools, not {wrap!r} and {twist!r}")
    if twist and not wrap:
        raise ValueError("a twisted torus needs its wrap links: twist=True with wrap=False")
    shift = _twist_shift(dims) if twist else np.zeros((len(dims),) * 2, dtype=np.int64)
    shift.flags.writeable = False
    dark = np.full(int(np.prod(dims)) * 2 * len(dims), -1)
    probe = Topology(dims, wrap, twist, (), shift, dark)
    nb = probe.intact_neighbor
    if isinstance(failed, (str, bytes)) or not hasattr(failed, "__iter__"):
        raise ValueError(f"failed must be a collection of chips, not {failed!r}")
    dead = [probe.chip(f) for f in failed]
    if len(set(dead)) != len(dead):
        raise ValueError(f"failed lists a chip twice: {list(failed)!r}")
    if len(dead) >= probe.n_chips:
        raise ValueError("every chip is failed")
    alive = np.ones(nb.shape[0], dtype=bool)
    alive[dead] = False
    # The OCS map: port (c, p) <-> (neighbour, p ^ 1), dark wherever either end has failed.
    ports = np.arange(nb.size).reshape(nb.shape)
    target = nb * nb.shape[1] + (np.arange(nb.shape[1]) ^ 1)
    lit = (nb >= 0) & alive[:, None] & alive[np.maximum(nb, 0)]
    ocs = np.full(nb.size, -1, dtype=np.int64)
    ocs[ports[lit]] = target[lit]
    return Topology(dims, wrap, twist, tuple(sorted(dead)), shift, ocs)


def ocs_map(topology):
    """The OCS crossbar map that realizes the topology: int64 [n_chips * 2D], -1 dark."""
    if not isinstance(topology, Topology):
        raise ValueError(f"expected a Topology, not {type(topology).__name__}")
    return topology.ocs.copy()


def _check_topology(topology, tables=None):
    if not isinstance(topology, Topology):
        raise ValueError(f"expected a Topology, not {type(topology).__name__}")
    if tables is None:
        return
    if not isinstance(tables, RoutingTables):
        raise ValueError(f"expected RoutingTables, not {type(tables).__name__}")
    _routing.check_pairing(topology, tables)


def routing_tables(topology, *, vcs=2, routing="dor"):
    """Deadlock-free routing tables for a topology (rule and encoding: ``golden.routing``).

    Parameters
    ----------
    topology : Topology
    vcs : int, VCs per link: tori need 2 (1 if no ring has 3 links); with failed chips,
        3 keep torus dimension order for the unaffected pairs (``RoutingTables.scheme``);
        adaptive routing needs one more than its escape sub-network (3 on a torus)
    routing : "dor" (dimension order with dateline VC classes) or "adaptive" (minimal
        adaptive over escape VCs, Duato's protocol; ``golden.routing``, "Adaptive routing")

    Returns
    -------
    RoutingTables, proven by ``deadlock_free``
    """
    _check_topology(topology)
    return _routing.build_tables(topology, vcs=vcs, routing=routing)


def deadlock_free(topology, tables, vcs):
    """Prove that ``tables`` cannot deadlock ``topology`` with ``vcs`` VCs per link.

    True, or :class:`DeadlockError` naming a cycle of the channel dependency
    graph (for adaptive tables, of the escape channels' extended dependency graph); see
    :func:`golden.routing.deadlock_free` for every check.
    """
    _check_topology(topology, tables)
    return _routing.deadlock_free(topology, tables, vcs)


def route(topology, tables, src, dst):
    """The hops of the packet from ``src`` to ``dst`` (ids or coordinates).

    Returns
    -------
    list of ``(chip, out_port, vc)``, one per link traversed (empty when src == dst); the
    packet then ejects at ``dst``.
    """
    _check_topology(topology, tables)
    s, d = topology.chip(src), topology.chip(dst)
    for c in (s, d):
        if not topology.alive[c]:
            raise ValueError(f"{topology.describe(c)} is failed")
    if tables.port[s, d] < 0:
        raise ValueError(f"{topology.describe(d)} is unreachable from {topology.describe(s)}")
    return [(int(c[0]), int(p[0]), int(v[0]))
            for _, c, p, v in walk(topology, tables, [s], [d])]


def hop_distances(topology):
    """int [n, n]: the fewest links from chip ``a`` to chip ``b`` over live chips (0 from
    a live chip to itself), or -1 where there is no such path (either chip failed)."""
    nb, n = topology.neighbor, topology.n_chips
    live = np.flatnonzero(topology.alive)
    dist = np.full((n, n), -1)
    dist[live, live] = 0
    level = 0
    while True:
        front = dist == level
        for p in range(topology.n_ports):
            u = np.flatnonzero(nb[:, p] >= 0)
            reached = np.zeros((n, n), bool)
            reached[:, nb[u, p]] = front[:, u]
            dist[reached & (dist < 0)] = level + 1
        if not (dist == level + 1).any():
            return dist
        level += 1


def _shortest_path_load(topology):
    """[n, 2D] load when each ordered live pair sends 1, split evenly over shortest paths."""
    nb, n = topology.neighbor, topology.n_chips
    live = np.flatnonzero(topology.alive)
    dist = np.full((n, n), -1)
    sigma = np.zeros((n, n))
    dist[live, live], sigma[live, live] = 0, 1.0
    edges = [(np.flatnonzero(nb[:, p] >= 0), p) for p in range(topology.n_ports)]
    front, level = sigma.copy(), 0
    while front.any():  # breadth-first from every source at once, counting paths
        new = np.zeros((n, n))
        for u, p in edges:
            new[:, nb[u, p]] += front[:, u]
        reached = (new > 0) & (dist < 0)
        dist[reached], sigma[reached] = level + 1, new[reached]
        front, level = np.where(reached, new, 0.0), level + 1
    if (dist[np.ix_(live, live)] < 0).any():
        raise ValueError(f"{topology!r} is disconnected: all-to-all traffic has no route")
    # Brandes: flow over u->v from source s is sigma_su / sigma_sv * (1 + flow beyond v).
    beyond, load = np.zeros((n, n)), np.zeros(nb.shape)
    for lvl in range(level - 1, -1, -1):
        for u, p in edges:
            v = nb[u, p]
            on = (dist[:, u] == lvl) & (dist[:, v] == lvl + 1)
            share = np.divide(sigma[:, u], sigma[:, v], out=np.zeros(on.shape), where=on)
            flow = share * (1 + beyond[:, v])
            beyond[:, u] += flow
            load[u, p] += flow.sum(0)
    return load


def all_to_all_load(topology, *, tables=None):
    """Load on every link when each ordered pair of live chips sends 1 flit per cycle.

    Parameters
    ----------
    topology : Topology
    tables : None to split each flow evenly over all shortest paths, or RoutingTables to
        follow their routes

    Returns
    -------
    np.ndarray of float, [n_chips, 2D]: flits per cycle on the link out of each port
    """
    _check_topology(topology, tables)
    if topology.alive.sum() < 2:
        raise ValueError(f"{topology!r} has fewer than 2 live chips: no all-to-all traffic")
    if tables is None:
        return _shortest_path_load(topology)
    live = np.flatnonzero(topology.alive)
    src, dst = (a.ravel() for a in np.meshgrid(live, live, indexing="ij"))
    src, dst = src[src != dst], dst[src != dst]
    if (tables.port[src, dst] < 0).any():
        raise ValueError(f"the tables leave live chips of {topology!r} unreachable")
    load = np.zeros(topology.n_chips * topology.n_ports)
    for _, chip, port, _ in walk(topology, tables, src, dst):
        load += np.bincount(chip * topology.n_ports + port, minlength=load.size)
    return load.reshape(topology.n_chips, topology.n_ports)


def all_to_all_bound(topology, *, tables=None):
    """The all-to-all throughput bound, in flits per node per cycle, with links of 1 flit
    per cycle per direction and no other limit: ``(live chips - 1) / max link load``.

    Parameters
    ----------
    topology : Topology
    tables : None (even split over all shortest paths) or RoutingTables (their routes)

    Returns
    -------
    float
    """
    load = all_to_all_load(topology, tables=tables)
    return float((topology.alive.sum() - 1) / load.max())
