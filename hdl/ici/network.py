"""A network of routers joined by link models, as a neighbour map says."""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int
from .layouts import CHIP_BITS, adaptive_table_write_layout, flit_layout, table_write_layout
from .link import Link
from .router import Router

__all__ = ["Network", "check_neighbor"]


def check_neighbor(neighbor):
    """``neighbor`` as a tuple of tuples, or ValueError: a chip per port or -1 (dark), 4
    or 6 ports per chip, and every link joins port ``p`` of one chip to port ``p ^ 1`` of
    the other, both ways (``golden.topology.Topology.neighbor`` is such a map)."""
    try:
        nb = tuple(tuple(int(q) for q in row) for row in neighbor)
    except TypeError:
        raise ValueError("neighbor must be a 2-D array of chip ids") from None
    n = len(nb)
    if not 2 <= n <= 1 << CHIP_BITS:
        raise ValueError(f"a network has 2 to {1 << CHIP_BITS} chips, not {n}")
    ports = len(nb[0])
    if ports not in (4, 6) or any(len(row) != ports for row in nb):
        raise ValueError("every chip needs the same 4 or 6 ports in neighbor")
    for c, row in enumerate(nb):
        for p, q in enumerate(row):
            if not -1 <= q < n:
                raise ValueError(f"chip {c} port {p} names chip {q}, outside -1..{n - 1}")
            if q >= 0 and nb[q][p ^ 1] != c:
                raise ValueError(f"chip {c} port {p} leads to chip {q}, whose port {p ^ 1} "
                                 f"does not lead back")
    return nb


class Network(wiring.Component):
    """One :class:`Router` per chip; a :class:`Link` from port ``p`` of chip ``c`` to port
    ``p ^ 1`` of ``neighbor[c][p]``, each way; dark ports idle.

    Parameters
    ----------
    neighbor : 2-D array of int
        ``neighbor[c][p]``: the chip behind port ``p`` of chip ``c``, or -1; as
        ``golden.topology.Topology.neighbor``.
    vcs, buffer_flits, flit_words, pipeline : int
        Of every router (:class:`Router`); ``n_nodes`` is the number of chips.
    link_latency : int
        Of every link (:class:`Link`), default 2.
    routing, escape_vcs
        Of every router (:class:`Router`): "dor" (default) or "adaptive"; the table
        ports then take ``adaptive_table_write_layout`` writes.
    speedup : int
        Of every router (:class:`Router`): its input speed-up, default 1.
    injection_queues : bool or None
        Of every router (:class:`Router`): a queue per direction at injection; default
        None, the router's default (with "adaptive" only).

    Ports
    -----
    inject, eject : arrays of stream.Signature(flit_layout(flit_words)), one per chip
        Each router's injection and ejection port.
    table : array of stream.Signature(table_write_layout(n_chips)), one per chip
        Each router's table writes.

    Attributes
    ----------
    routers : list of Router
        Chip ``c``'s router, for its counters (``forwarded``, ``dropped``, ``overflow``).
    links : dict {(chip, port): Link}
        The link out of each lit port.

    Zero-load latency of a packet over ``h`` hops, from its header on ``inject`` to its
    header on ``eject``: ``(h + 1) * pipeline + h * link_latency`` cycles.
    """

    def __init__(self, *, neighbor, vcs=2, buffer_flits=8, flit_words=1, link_latency=2,
                 pipeline=1, routing="dor", escape_vcs=2, speedup=1,
                 injection_queues=None):
        self.neighbor = check_neighbor(neighbor)
        check_int("link_latency", link_latency, least=0)
        n = self.n_chips = len(self.neighbor)
        dims = len(self.neighbor[0]) // 2
        self.link_latency = link_latency
        self.routers = [Router(dims=dims, vcs=vcs, buffer_flits=buffer_flits,
                               flit_words=flit_words, n_nodes=n, pipeline=pipeline,
                               routing=routing, escape_vcs=escape_vcs, speedup=speedup,
                               injection_queues=injection_queues)
                        for _ in range(n)]
        self.links = {(c, p): Link(vcs=vcs, flit_words=flit_words, latency=link_latency)
                      for c, row in enumerate(self.neighbor)
                      for p, q in enumerate(row) if q >= 0}
        flit = stream.Signature(flit_layout(flit_words))
        super().__init__({
            "inject": In(flit).array(n),
            "eject": Out(flit).array(n),
            "table": In(stream.Signature((adaptive_table_write_layout if routing == "adaptive"
                                          else table_write_layout)(n))).array(n),
        })

    def elaborate(self, platform):
        m = Module()
        for c, router in enumerate(self.routers):
            m.submodules[f"router{c}"] = router
            wiring.connect(m, wiring.flipped(self.inject[c]), router.inject)
            wiring.connect(m, router.eject, wiring.flipped(self.eject[c]))
            wiring.connect(m, wiring.flipped(self.table[c]), router.table)
        for (c, p), link in self.links.items():
            m.submodules[f"link{c}_{p}"] = link
            q = self.neighbor[c][p]
            wiring.connect(m, self.routers[c].tx[p], link.tx)
            wiring.connect(m, link.rx, self.routers[q].rx[p ^ 1])
        return m
