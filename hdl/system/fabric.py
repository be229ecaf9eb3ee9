"""The links of a torus top: wired links between neighbours inside it, and an OCS per axis
on its faces (``hdl.testbench.NetworkSystem`` and ``hdl.system.ChipSystem`` share them)."""

import math
import numbers

from amaranth.hdl import Cat, Mux, Signal
from amaranth.lib import data, wiring

from ..ici import Link
from ..ici.layouts import CHIP_BITS
from ..lib.params import check_int
from ..ocs import OpticalCircuitSwitch, config_layout

__all__ = ["parse_dims", "face_ports", "wired_neighbor", "ocs_layout", "tree_sum",
           "config_rows", "link_outputs", "wire_links", "ocs_switches", "record_refusal"]


def parse_dims(dims):
    """``dims`` as a tuple of 2 or 3 ints from 1 to 256 with a product from 2 to 256: from
    a tuple or a string such as ``"4x4x8"``. ValueError otherwise."""
    dims = _torus_dims(dims)
    if not 2 <= math.prod(dims) <= 1 << CHIP_BITS:
        raise ValueError(f"a network has 2 to {1 << CHIP_BITS} nodes, not "
                         f"{math.prod(dims)} ({'x'.join(map(str, dims))})")
    return dims


def _torus_dims(dims):
    """``golden.topology.parse_dims``, restated (``hdl`` depends on nothing in ``golden``;
    ``tests/system/test_hdl_golden_dims.py`` holds the two equal): ``dims`` as a tuple of
    2 or 3 positive ints with a product of at least 2, from a tuple or a string such as
    ``"4x4x8"``, with golden's ValueErrors otherwise."""
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
    if math.prod(dims) < 2:
        raise ValueError(f"a topology needs at least 2 chips, not {dims}")
    return dims


def _is_int(value):
    # Python and numpy integers (numpy registers them as Integral), not bools.
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _coords(dims, chip):
    out = []
    for n in reversed(dims):     # row-major: the last axis varies fastest
        chip, c = divmod(chip, n)
        out.append(c)
    return out[::-1]


def face_ports(dims):
    """The OCS ports of each axis: ``ports[a]`` lists ``(chip, torus port)`` by OCS port
    number, first every ``+a`` port on the face ``x_a = dims[a] - 1``, then every ``-a``
    port on the face ``x_a = 0`` (chips in id order). Empty for an axis of size 1, whose
    ports are always dark."""
    dims = parse_dims(dims)
    n = math.prod(dims)
    ports = []
    for a, size in enumerate(dims):
        if size == 1:
            ports.append([])
            continue
        plus = [(c, 2 * a) for c in range(n) if _coords(dims, c)[a] == size - 1]
        minus = [(c, 2 * a + 1) for c in range(n) if _coords(dims, c)[a] == 0]
        ports.append(plus + minus)
    return ports


def wired_neighbor(dims, chip, port):
    """The chip that torus port ``port`` of ``chip`` is wired to inside the torus, or None
    when the port is on a face (it goes through the OCS) or its axis has size 1."""
    dims = parse_dims(dims)
    a, minus = divmod(port, 2)
    x = _coords(dims, chip)[a]
    stride = math.prod(dims[a + 1:])
    if dims[a] == 1 or (minus and x == 0) or (not minus and x == dims[a] - 1):
        return None
    return chip - stride if minus else chip + stride


def ocs_layout(dims):
    """A beat of the ``ocs`` stream: the ``axis`` whose OCS takes ``beat``
    (``hdl.ocs.config_layout`` of the largest OCS)."""
    most = max(len(p) for p in face_ports(dims))
    return data.StructLayout({"axis": 2, "beat": config_layout(most)})


def tree_sum(values):
    """The sum of ``values`` as a balanced adder tree (a chain of hundreds of additions
    would nest too deep for the Verilog back end)."""
    terms = list(values)
    while len(terms) > 1:
        terms = [a + b for a, b in zip(terms[::2], terms[1::2])] + terms[len(terms) & ~1:]
    return terms[0]


def config_rows(m, tables, n, *, configuring):
    """Take the ``n`` configuration rows of a top's ``tables`` stream, one per destination,
    while ``configuring``; returns ``(rows, take)``: the rows taken so far (the index of
    the row on ``tables`` when ``take`` is high) and whether one is taken this cycle."""
    rows = Signal(range(n + 1))
    take = Signal()
    m.d.comb += [tables.ready.eq(configuring & (rows < n)), take.eq(tables.valid & tables.ready)]
    with m.If(take):
        m.d.sync += rows.eq(rows + 1)
    return rows, take


def check_latencies(link_latency, *, ports):
    """``link_latency`` checked: an int >= 0 (every link), or a tuple of ``ports`` of them
    (the link out of each torus port); TypeError or ValueError with the reason."""
    if isinstance(link_latency, (tuple, list)):
        if len(link_latency) != ports:
            raise ValueError(f"link_latency must give one latency per torus port ({ports}), "
                             f"not {len(link_latency)}")
        return tuple(check_int(f"link_latency[{p}]", cycles, least=0)
                     for p, cycles in enumerate(link_latency))
    return check_int("link_latency", link_latency, least=0)


def link_outputs(m, router, node, *, vcs, flit_words, latency):
    """A :class:`~hdl.ici.Link` on each torus output p of ``router``, of ``latency`` cycles
    (an int, or one per output), its far end on ``node.tx[p]``; ``node.rx[p]`` goes
    straight into the router (a node's ports, as ``wire_links`` and ``ocs_switches`` join
    them)."""
    latencies = [latency] * len(router.tx) if isinstance(latency, int) else list(latency)
    for p, cycles in enumerate(latencies):
        m.submodules[f"link{p}"] = link = Link(vcs=vcs, flit_words=flit_words, latency=cycles)
        wiring.connect(m, router.tx[p], link.tx)
        wiring.connect(m, link.rx, wiring.flipped(node.tx[p]))
        wiring.connect(m, wiring.flipped(node.rx[p]), router.rx[p])


def wire_links(m, dims, nodes):
    """Join every torus port inside the torus to its neighbour's (``wired_neighbor``),
    each way lit while both ends' ``lit`` bits say so. ``nodes[c]`` has ``tx``, ``rx``
    (``hdl.ici.LinkSignature`` arrays) and ``lit``."""
    for c, node in enumerate(nodes):
        for p in range(2 * len(dims)):
            q = wired_neighbor(dims, c, p)
            if q is None:
                continue
            lit = node.lit[p] & nodes[q].lit[p ^ 1]
            tx, rx = node.tx[p], nodes[q].rx[p ^ 1]
            m.d.comb += [rx.valid.eq(tx.valid & lit), rx.vc.eq(tx.vc),
                         rx.data.eq(tx.data), tx.credit.eq(Mux(lit, rx.credit, 0))]


def ocs_switches(m, faces, nodes, *, config, vcs, reconfig_cycles, configuring):
    """One :class:`~hdl.ocs.OpticalCircuitSwitch` per axis with face ports (``faces``, from
    ``face_ports``), on those ports; returns them in axis order.

    ``config`` is the top's ``ocs`` stream (``ocs_layout``): a beat goes to the OCS of its
    ``axis``. While ``configuring`` nothing moves, so every link counts as drained.
    """
    vc_bits = len(nodes[0].tx[0].vc)
    flit_bits = len(nodes[0].tx[0].data.as_value())
    switches = []
    for a, ports in enumerate(faces):
        if not ports:
            continue
        ocs = OpticalCircuitSwitch(ports=len(ports), payload_width=vc_bits + flit_bits,
                                   credit_width=vcs, reconfig_cycles=reconfig_cycles)
        m.submodules[f"ocs_{'xyz'[a]}"] = ocs
        beat = config.payload.beat
        mine = config.payload.axis == a
        m.d.comb += [ocs.config.valid.eq(config.valid & mine),
                     ocs.config.payload.commit.eq(beat.commit),
                     ocs.config.payload.port.eq(beat.port),
                     ocs.config.payload.lit.eq(beat.lit),
                     ocs.config.payload.target.eq(beat.target),
                     ocs.idle.eq(Mux(configuring, (1 << len(ports)) - 1, 0))]
        with m.If(mine):
            m.d.comb += config.ready.eq(ocs.config.ready)
        for i, (c, p) in enumerate(ports):
            tx, rx = nodes[c].tx[p], nodes[c].rx[p]
            m.d.comb += [ocs.ingress[i].valid.eq(tx.valid),
                         ocs.ingress[i].payload.eq(Cat(tx.vc, tx.data)),
                         tx.credit.eq(ocs.ingress[i].credit),
                         rx.valid.eq(ocs.egress[i].valid),
                         rx.vc.eq(ocs.egress[i].payload[:vc_bits]),
                         rx.data.eq(ocs.egress[i].payload[vc_bits:]),
                         ocs.egress[i].credit.eq(rx.credit)]
        switches.append(ocs)
    return switches


def record_refusal(m, faces, switches, *, status, config_error):
    """Latch into ``status`` (``axis``, ``status``) the OCS that refuses its map, the lowest
    axis if several do, until ``config_error`` is set; returns the refusal bits, one per
    switch."""
    refused = Cat((s.status.code > 1) & ~s.busy for s in switches)
    axes = [a for a, ports in enumerate(faces) if ports]
    for i in reversed(range(len(switches))):    # the last assignment, the lowest axis, wins
        with m.If(refused[i] & ~config_error):
            m.d.sync += [status.axis.eq(axes[i]), status.status.eq(switches[i].status)]
    return refused
