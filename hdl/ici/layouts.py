"""Payload layouts of the ICI router (SPEC section 4.4), the constants and the ejection-port
rule (:func:`eject_port`) they share with ``golden.ici`` and ``golden.routing``, restated
here because ``hdl`` depends on nothing in ``golden`` (SPEC section 2; the tests check that
the two agree), and the encoding of a routing-table entry.

A flit is ``flit_words`` 32-bit words; word 0 of a packet's first flit is the route word
(``route_word_layout``), the only word a router reads.

Routing-table entry (``route_entry_layout``), one per destination chip ``d`` at chip ``c``
    ``reachable`` 0 means ``golden.routing.UNREACHABLE``: a packet for ``d`` is dropped.
    ``port`` is ``tables.port[c, d]``: ``0 .. 2D-1`` a torus port, ``2D`` eject. The VC
    the packet takes out of a torus port (``golden.routing.next_vc``) is ``vc`` when
    ``fixed`` (an escape hop: the escape VC; else a dateline link: VC ``b + 1``), else
    ``b + 1`` when ``straight`` and the packet arrived in VC ``b + 1`` on port
    ``port ^ 1``, else ``b``; here ``b`` is the entry's ``vc`` (``tables.vc_base[d]``,
    the first VC of d's class: 0 unless the tables use VC classes). ``straight`` is
    ``tables.escape_vc != 1``. Adaptive tables (``golden.routing``, "Adaptive routing")
    give their escape sub-network: every hop ``fixed`` to its ``hop_vc``. An all-zero
    entry is unreachable, so a router whose table
    was never written drops everything.
"""

from amaranth.hdl import unsigned
from amaranth.lib import data

from ..lib.memory_port import WORD_BITS
from ..lib.params import check_int

__all__ = [
    "CHIP_BITS", "LENGTH_BITS", "MAX_VCS", "VC_BITS", "ENTRY_VCS", "MAX_FLIT_WORDS", "MAX_DIMS", "PORT_BITS",
    "max_local_ports", "eject_port", "OPCODES", "route_word_layout", "flit_layout",
    "route_entry_layout", "table_write_layout", "encode_route_entry", "table_entries",
    "ROUTINGS", "adaptive_entry_layout", "adaptive_table_write_layout",
    "adaptive_table_entries", "injection_queue",
]

#: Router routing modes (``golden.routing.ROUTINGS``, restated).
ROUTINGS = ("dor", "adaptive")

#: Chip ids (``golden.memory.CHIP_BITS``): routers know up to ``2**CHIP_BITS`` chips.
CHIP_BITS = 8
#: The route word's ``length`` field: flits per packet, 1 to 511.
LENGTH_BITS = 9
#: VCs a router's links may have: the router's own VC fields (a buffered flit's, a head's,
#: an output's) are ``VC_BITS`` wide. The route word's ``vc`` field (2 bits,
#: ``golden.ici.MAX_VCS``) is not used for routing: each link's VC is the router's choice.
MAX_VCS = 8
VC_BITS = 3
#: VCs a routing-table entry can name (its ``vc`` field, 2 bits): dimension order's VC
#: classes and the escape sub-network's VCs are all below 4; adaptive VCs above them are
#: the allocator's choice, never an entry's.
ENTRY_VCS = 4
#: Words per flit, bounded by the 3-bit ``pad`` field (``golden.ici.MAX_FLIT_WORDS``).
MAX_FLIT_WORDS = 8
#: Torus dimensions: at most 3. A router's switch outputs (its ``2*dims`` torus ports, then
#: its local ones) are numbered in ``PORT_BITS``: 16, so a 3-D chip may have a network port
#: per torus link direction (6) and more.
MAX_DIMS = 3
PORT_BITS = 4


def max_local_ports(dims):
    """The most injection and ejection ports a router on a ``dims``-D torus can have: its
    switch outputs (``2*dims`` torus ports, then the local ones) are numbered in
    ``PORT_BITS``. A chip's network ports are its router's local ports."""
    return (1 << PORT_BITS) - 2 * dims


def eject_port(in_port, *, torus_ports, local_ports):
    """The local port a router ejects a packet on that arrived on torus input ``in_port``
    (``golden.routing.eject_port``, restated; ``tests/ici/test_hdl_golden_tables.py``
    holds the two equal).

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


#: Opcodes of a well-formed header (``golden.ici.OPCODES``); 0 and 3 are malformed.
OPCODES = {"write": 1, "flag_add": 2}

#: Word 0 of a packet, fields from bit 0 up (``golden.ici.FIELDS``, word 0).
route_word_layout = data.StructLayout({
    "opcode": 2,
    "vc": 2,
    "dst": unsigned(CHIP_BITS),
    "src": unsigned(CHIP_BITS),
    "length": unsigned(LENGTH_BITS),
    "pad": 3,
})
assert route_word_layout.size == WORD_BITS

#: One routing-table entry (module docstring).
route_entry_layout = data.StructLayout({
    "reachable": 1,
    "port": unsigned(PORT_BITS),
    "fixed": 1,
    "vc": 2,
    "straight": 1,
})


#: An adaptive router's table entry (``Router(routing="adaptive")``): the escape hop
#: (``route_entry_layout``, its VC ``fixed``), the ports on a shortest path (bit p: torus
#: port p; ``golden.routing.minimal_ports``), and whether a packet that arrived in an
#: escape VC may take an adaptive VC again (``RoutingTables.reenter``).
adaptive_entry_layout = data.StructLayout({
    "escape": route_entry_layout,
    "minimal": 2 * MAX_DIMS,
    "reenter": 1,
})


def adaptive_table_write_layout(n_nodes):
    """An adaptive table write: ``entry`` for destination ``dst``."""
    check_int("n_nodes", n_nodes, least=1, most=1 << CHIP_BITS)
    return data.StructLayout({"dst": range(n_nodes), "entry": adaptive_entry_layout})


def adaptive_table_entries(tables, chip, *, vcs):
    """Chip ``chip``'s adaptive table (``adaptive_entry_layout`` ints, one per
    destination) from ``golden.topology.routing_tables(..., routing="adaptive")``."""
    if getattr(tables, "routing", "dor") != "adaptive":
        raise ValueError("adaptive_table_entries needs adaptive tables")
    if int(tables.escape_vcs) >= vcs:
        raise ValueError(f"the tables' {int(tables.escape_vcs)} escape VCs leave no "
                         f"adaptive VC with vcs={vcs}")
    escape = table_entries(tables, chip, vcs=vcs)
    ports = tables.dateline.shape[1]
    out = []
    for d, bits in enumerate(escape):
        minimal = sum(1 << p for p in range(ports) if tables.adaptive[chip, d, p])
        out.append(bits << adaptive_entry_layout["escape"].offset
                   | minimal << adaptive_entry_layout["minimal"].offset
                   | int(bool(tables.reenter)) << adaptive_entry_layout["reenter"].offset)
    return out


def injection_queue(port, queues):
    """The injection queue of a packet whose first hop (with ``routing="adaptive"``, its
    escape hop) leaves on torus port ``port`` (``Router(injection_queues=True)``):
    ``port % queues``, so with a queue per torus port each direction has its own, and
    with 2 queues the + and - directions are apart."""
    return port % queues


def flit_layout(flit_words=1):
    """A flit: ``flit_words`` words, word ``j`` in bits ``32*j .. 32*j + 31``."""
    check_int("flit_words", flit_words, least=1, most=MAX_FLIT_WORDS)
    return data.ArrayLayout(WORD_BITS, flit_words)


def table_write_layout(n_nodes):
    """A table write: ``entry`` for destination ``dst`` (``0 .. n_nodes-1``)."""
    check_int("n_nodes", n_nodes, least=1, most=1 << CHIP_BITS)
    return data.StructLayout({"dst": range(n_nodes), "entry": route_entry_layout})


def encode_route_entry(*, port, fixed=False, vc=0, straight=True):
    """The ``route_entry_layout`` bits of a table entry, as an int; ``port`` -1 is
    unreachable (the other fields are then ignored and encoded as zero)."""
    check_int("port", port, least=-1, most=2 * MAX_DIMS)
    check_int("vc", vc, least=0, most=ENTRY_VCS - 1)
    if port < 0:
        return 0
    return route_entry_layout.const({"reachable": 1, "port": port, "fixed": bool(fixed),
                                     "vc": vc, "straight": bool(straight)}).as_value().value


def table_entries(tables, chip, *, vcs):
    """The table of chip ``chip`` as entry ints, one per destination, from
    ``golden.topology.routing_tables`` (read as duck-typed arrays, so that ``hdl`` needs
    nothing from ``golden``).

    Parameters
    ----------
    tables : golden.routing.RoutingTables
    chip : int
    vcs : int
        The router's VCs: every VC the tables can name must be below it.

    Returns
    -------
    list of int, ``len == n_chips``
    """
    n, ports = tables.port.shape[0], tables.dateline.shape[1]
    check_int("chip", chip, least=0, most=n - 1)
    check_int("vcs", vcs, least=2, most=MAX_VCS)
    if ports not in (4, 6):
        raise ValueError(f"tables with {ports} ports per chip: a router has 4 or 6")
    escape_vc = int(tables.escape_vc)
    if escape_vc >= vcs:
        raise ValueError(f"the tables' escape VC {escape_vc} needs more than vcs={vcs}")
    base = getattr(tables, "vc_base", None)
    base = [0] * n if base is None else [int(b) for b in base]
    need = max(base) + (2 if tables.dateline.any() else 1)   # a class's ring VCs b, b + 1
    if need > vcs:
        raise ValueError(f"the tables' VC classes need {need} VCs, more than vcs={vcs}")
    hop_vc = getattr(tables, "hop_vc", None)
    if hop_vc is not None and int(max(hop_vc[chip], default=0)) >= vcs:
        raise ValueError(f"the tables' escape VCs need more than vcs={vcs}")
    out = []
    for d in range(n):
        port = int(tables.port[chip, d])
        if port < 0 or port == ports:
            out.append(encode_route_entry(port=port))
            continue
        if hop_vc is not None:          # adaptive tables' escape hops: a VC per entry
            out.append(encode_route_entry(port=port, fixed=True, vc=int(hop_vc[chip, d])))
            continue
        escape = bool(tables.escape[chip, d])
        dateline = bool(tables.dateline[chip, port])
        out.append(encode_route_entry(port=port, fixed=escape or dateline,
                                      vc=escape_vc if escape else base[d] + int(dateline),
                                      straight=escape_vc != 1))
    return out
