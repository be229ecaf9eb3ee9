"""A router input port: per-VC flit buffers, packet framing, route lookup on arrival, and
the dropping of malformed packets."""

from amaranth.hdl import C, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int
from ..lib.stream_queue import StreamQueue
from .layouts import (CHIP_BITS, LENGTH_BITS, MAX_DIMS, MAX_VCS, OPCODES, PORT_BITS, VC_BITS,
                      route_entry_layout, route_word_layout)
from .link import LinkSignature

__all__ = ["InputPort", "head_layout", "adaptive_head_layout", "buffer_entry_layout"]

#: What a VC's oldest flit asks of the switch: its output ``port`` and ``vc`` (VC 0 for
#: eject), and whether it opens (``head``) or closes (``tail``) its packet.
head_layout = data.StructLayout({
    "valid": 1, "port": unsigned(PORT_BITS), "vc": VC_BITS, "head": 1, "tail": 1,
})


#: An adaptive router's head (``InputPort(routing="adaptive")``): ``port`` and ``vc`` are
#: the escape hop (or the ejection output); ``minimal`` the ports on a shortest path;
#: ``adapt`` whether the packet may take an adaptive VC here; ``length`` its flits.
_ADAPTIVE_FIELDS = {"minimal": 2 * MAX_DIMS, "adapt": 1, "length": unsigned(LENGTH_BITS)}
adaptive_head_layout = data.StructLayout({
    "valid": 1, "port": unsigned(PORT_BITS), "vc": VC_BITS, "head": 1, "tail": 1,
    **_ADAPTIVE_FIELDS,
})


def is_value(value, k):
    """``value == k``, written for ``k = 0`` as a reduction: Verilog lint wants no
    ``!value`` on a multi-bit value."""
    return ~value.any() if k == 0 else value == k


def buffer_entry_layout(flit_words, adaptive=False):
    """A buffered flit (its words as plain bits) with the route of its packet, found when
    its header arrived (and with ``adaptive`` the fields of ``adaptive_head_layout``)."""
    return data.StructLayout({
        "data": unsigned(32 * flit_words), "port": unsigned(PORT_BITS), "vc": VC_BITS,
        "head": 1, "tail": 1, "drop": 1, **(_ADAPTIVE_FIELDS if adaptive else {}),
    })


class InputPort(wiring.Component):
    """One input of a router: ``vcs`` FIFOs of ``buffer_flits`` flits each.

    Framing: per VC, a flit is a header when the previous packet on that VC has had all
    its ``length`` flits. A header's route is looked up as it arrives (``dst`` out,
    ``entry`` back in the same cycle) and stored with every flit of its packet, so the
    switch sees each VC's route with its oldest flit. The output VC follows the entry's
    rule (``hdl.ici.layouts``), with this port's number as the arrival port. A packet for
    this chip (entry port ``n_ports``) asks for switch output ``eject_to``.

    A header is malformed when its opcode is not 1 or 2, its length is 0, or its entry is
    unreachable, names a port beyond eject or a VC at or above ``out_vcs``. Its packet (one
    flit if the length is 0, else ``length`` flits) is marked: its flits leave the buffer
    one per cycle per VC without the switch, and return their credits like any other.

    Down outputs: a packet whose header reaches the head of its VC while its output port
    is ``down`` is given up the same way (counted in ``undeliverable``), whenever it
    arrived; a packet whose header crossed the switch before goes on to its tail. With
    ``routing="adaptive"``, the ``minimal`` ports a head offers the switch leave out the
    down ones, so no packet takes an adaptive hop over a down link; whether it is given up
    depends on its escape hop alone.

    Parameters
    ----------
    vcs : int
        VCs, 1 to 8 (``MAX_VCS``; an injection port's are its queues).
    out_vcs : int
        VCs of the router's torus outputs: an entry's VC must be below it.
    flit_words, buffer_flits : int
    port : int
        This port's number, ``0 .. n_ports-1``, or -1 for injection (never "going
        straight on").
    n_ports : int
        Torus ports of the router, 2D; entry port ``n_ports`` is eject.
    eject_to : int, optional
        The switch output this port's packets eject through: ``n_ports`` (the default)
        or, in a router with several ejection ports, ``n_ports + j``.
    bypass : bool
        A flit arriving at an empty VC buffer can leave in the same cycle.
    groups : int
        VC groups, each a switch input of its own (the router's ``speedup``); default 1.
    cut_through : bool or None
        Heads carry their packet's ``length`` (``adaptive_head_layout``, with ``adapt``
        and ``minimal`` 0 under "dor"), and a header longer than ``buffer_flits`` is
        malformed. Default None: as ``routing="adaptive"``, which needs it.

    Ports
    -----
    link : In(LinkSignature(vcs, flit_words))
        Arrivals. ``credit`` is a register: bit ``v`` is high the cycle after a flit of
        VC ``v`` left the buffer (through the switch or dropped).
    room : Out(vcs)
        VC ``v``'s buffer is not full (the injection port's ``ready``).
    dst, entry : Out(CHIP_BITS), In(route_entry_layout)
        The route lookup of the arriving flit's route word: ``entry`` must follow ``dst``
        combinationally.
    down : In(n_ports)
        Bit p: torus output p is down; packets not yet started on it are given up.
    heads : Out(head_layout).array(vcs)
        Each VC's oldest flit that is not being dropped (``valid`` 0 when none).
    grant : In(vcs)
        One-hot or 0 within each VC group: the VCs whose oldest flits the switch takes
        this cycle; only a valid head may be granted.
    data : Out(32 * flit_words).array(groups)
        Per VC group (VC ``v`` in group ``v % groups``), its granted flit's bits (0 when
        none of its VCs is granted).
    malformed, overflow : Out(1)
        Pulses: a malformed header arrived; a flit arrived at a full buffer (the sender
        broke the credit protocol; the flit is lost).
    undeliverable : Out(range(vcs + 1))
        Packets given up this cycle because their output is down (one per VC at most).
    discarded : Out(range(vcs + 1))
        Flits that left the buffers this cycle without the switch (malformed or given up).
    dateline : Out(1)
        Pulse: a well-formed header arrived whose hop takes a dateline link, i.e. its
        entry is ``fixed`` and ``straight`` with an odd ``vc``. (Escape hops are fixed
        too, but on an even escape VC, or with ``straight`` 0 when the escape VC is 1,
        so the rule picks out exactly ``tables.dateline & ~tables.escape``.) Its output
        port and VC are ``entry.port`` and ``entry.vc``. For coverage; nothing else
        uses it.

    Adaptive routing (``routing="adaptive"``): the entry is an adaptive table's escape hop,
    and the lookup also returns ``minimal`` and ``reenter``. Every flit then carries the
    fields of ``adaptive_head_layout``: ``adapt`` is high for packets injected here, for
    packets that arrived in an adaptive VC (``escape_vcs`` or above) and, with
    ``reenter``, for all. A header whose length is above ``buffer_flits`` is malformed
    (cut-through needs a packet to fit a buffer). With ``local_ports`` above 1 a packet
    ejects on output ``n_ports + src % local_ports`` (by its source, not ``eject_to``:
    a flow's packets may arrive on any input, and its sink must see all of them), unless
    ``eject_by_source`` is False (then by ``eject_to``, as with "dor").
    Ports ``minimal`` and ``reenter``
    (In(2*MAX_DIMS), In(1)) carry the rest of the route lookup, combinationally from
    ``dst`` like ``entry``; ``heads`` are then ``adaptive_head_layout``.

    Latency: with ``bypass``, a flit arriving at an empty buffer is a head in the same
    cycle; otherwise it is one cycle later. Throughput: one arrival a cycle, and one
    grant per VC group plus any number of drops (one per VC) a cycle.
    """

    def __init__(self, *, vcs, out_vcs, flit_words, buffer_flits, port, n_ports, bypass,
                 eject_to=None, routing="dor", escape_vcs=2, local_ports=1,
                 eject_by_source=None, groups=1, cut_through=None):
        check_int("out_vcs", out_vcs, least=1, most=MAX_VCS)
        self.groups = check_int("groups", groups, least=1)
        check_int("buffer_flits", buffer_flits, least=1)
        check_int("n_ports", n_ports, least=2, most=6)
        check_int("port", port, least=-1, most=n_ports - 1)
        self.eject_to = n_ports if eject_to is None else \
            check_int("eject_to", eject_to, least=n_ports, most=(1 << PORT_BITS) - 1)
        self.vcs, self.out_vcs = vcs, out_vcs
        self.flit_words, self.buffer_flits = flit_words, buffer_flits
        self.port, self.n_ports, self.bypass = port, n_ports, bool(bypass)
        if routing not in ("dor", "adaptive"):
            raise ValueError(f"routing must be 'dor' or 'adaptive', not {routing!r}")
        self.adaptive, self.escape_vcs = routing == "adaptive", escape_vcs
        self.cut_through = self.adaptive if cut_through is None else bool(cut_through)
        if self.adaptive and not self.cut_through:
            raise ValueError("routing='adaptive' needs cut_through")
        self.local_ports = local_ports
        self.eject_by_source = (self.adaptive if eject_by_source is None
                                else bool(eject_by_source)) and local_ports > 1
        self.entry_layout = buffer_entry_layout(flit_words, self.cut_through)
        extra = {"minimal": In(2 * MAX_DIMS), "reenter": In(1)} if self.adaptive else {}
        super().__init__({
            **extra,
            "link": In(LinkSignature(vcs=vcs, flit_words=flit_words)),
            "room": Out(vcs),
            "dst": Out(CHIP_BITS),
            "entry": In(route_entry_layout),
            "down": In(n_ports),
            "heads": Out(adaptive_head_layout if self.cut_through else head_layout
                         ).array(vcs),
            "grant": In(vcs),
            "data": Out(32 * flit_words).array(self.groups),
            "malformed": Out(1),
            "overflow": Out(1),
            "undeliverable": Out(range(vcs + 1)),
            "discarded": Out(range(vcs + 1)),
            "dateline": Out(1),
        })

    def _route(self, m):
        """The arriving flit read as a header: its route, length and whether it is bad."""
        word = route_word_layout(self.link.data[0])
        entry = self.entry
        m.d.comb += self.dst.eq(word.dst)
        eject = entry.port == self.n_ports
        # Not fixed: the entry's vc is the class's first VC b; b + 1 going straight on
        # after a dateline.
        straight = Signal()
        if self.port >= 0 and self.vcs > 1:
            m.d.comb += straight.eq(entry.straight & (self.link.vc == entry.vc + 1)
                                    & is_value(entry.port, self.port ^ 1))
        vc = Signal(VC_BITS)
        m.d.comb += vc.eq(Mux(eject, 0, Mux(entry.fixed | ~straight, entry.vc, entry.vc + 1)))
        bad = Signal()
        too_long = (word.length > self.buffer_flits) if self.cut_through else 0
        m.d.comb += bad.eq(~entry.reachable | (entry.port > self.n_ports)
                           | (vc >= self.out_vcs) | ~word.length.any() | too_long
                           | ~((word.opcode == OPCODES["write"])
                               | (word.opcode == OPCODES["flag_add"])))
        port = entry.port
        if self.eject_by_source:
            port = Mux(eject, self.n_ports + word.src % self.local_ports, entry.port)
        elif self.eject_to != self.n_ports:
            port = Mux(eject, self.eject_to, entry.port)
        return port, vc, bad, word.length

    def elaborate(self, platform):
        m = Module()
        layout = self.entry_layout
        hdr_port, hdr_vc, hdr_bad, hdr_length = self._route(m)
        if self.adaptive:
            adapt = Signal()
            injected = self.port < 0
            m.d.comb += adapt.eq(1 if injected else
                                 self.reenter | (self.link.vc >= self.escape_vcs))
            hdr_extra = {"minimal": self.minimal, "adapt": adapt, "length": hdr_length}
        elif self.cut_through:
            hdr_extra = {"minimal": C(0, 2 * MAX_DIMS), "adapt": C(0, 1), "length": hdr_length}
        else:
            hdr_extra = {}
        malformed, overflow, headers, data_out = [], [], [], [0] * self.groups
        given_up, discarded = [], []
        # Indexed by an entry's port, which may name an ejection output (never down).
        down = Cat(self.down, C(0, (1 << PORT_BITS) - self.n_ports))
        for v in range(self.vcs):
            m.submodules[f"vc{v}"] = fifo = StreamQueue(shape=layout, depth=self.buffer_flits)
            arrive = Signal(name=f"arrive{v}")
            m.d.comb += arrive.eq(self.link.valid & is_value(self.link.vc, v))

            # Framing: flits left in the current packet, and the route they follow.
            remaining = Signal(LENGTH_BITS, name=f"remaining{v}")
            route = Signal(data.StructLayout({
                "port": unsigned(PORT_BITS), "vc": VC_BITS, "drop": 1,
                **(_ADAPTIVE_FIELDS if self.cut_through else {})}), name=f"route{v}")
            is_head = ~remaining.any()
            incoming = Signal(layout, name=f"incoming{v}")
            m.d.comb += [incoming.data.eq(self.link.data.as_value()),
                         incoming.head.eq(is_head)]
            with m.If(is_head):
                m.d.comb += [incoming.port.eq(hdr_port), incoming.vc.eq(hdr_vc),
                             incoming.drop.eq(hdr_bad), incoming.tail.eq(hdr_length <= 1)]
                for name, value in hdr_extra.items():
                    m.d.comb += getattr(incoming, name).eq(value)
                with m.If(arrive):
                    m.d.sync += [remaining.eq(Mux(hdr_length.any(), hdr_length - 1, 0)),
                                 route.port.eq(hdr_port), route.vc.eq(hdr_vc),
                                 route.drop.eq(hdr_bad)]
                    for name, value in hdr_extra.items():
                        m.d.sync += getattr(route, name).eq(value)
            with m.Else():
                m.d.comb += [incoming.port.eq(route.port), incoming.vc.eq(route.vc),
                             incoming.drop.eq(route.drop), incoming.tail.eq(remaining == 1)]
                for name in hdr_extra:
                    m.d.comb += getattr(incoming, name).eq(getattr(route, name))
                with m.If(arrive):
                    m.d.sync += remaining.eq(remaining - 1)
            malformed.append(arrive & is_head & hdr_bad)
            headers.append(arrive & is_head)

            # The oldest flit: the buffer's, or with bypass the arriving one when it is empty.
            head, head_valid = fifo.o.payload, fifo.o.valid
            if self.bypass:
                head = layout(Mux(fifo.o.valid, fifo.o.payload.as_value(), incoming.as_value()))
                head_valid = fifo.o.valid | arrive
            # A packet given up at its header because its output is down: the rest of its
            # flits follow the header out without the switch, whenever they arrive.
            giving_up = Signal(name=f"giving_up{v}")
            give_up = Signal(name=f"give_up{v}")
            m.d.comb += give_up.eq(giving_up | (head.head & ~head.drop
                                                & down.bit_select(head.port, 1)))
            with m.If(head_valid & give_up):
                m.d.sync += giving_up.eq(~head.tail)
            discard = head.drop | give_up
            consume = Signal(name=f"consume{v}")
            m.d.comb += consume.eq(head_valid & (discard | self.grant[v]))
            bypassed = ~fifo.o.valid & consume if self.bypass else 0
            m.d.comb += [
                fifo.o.ready.eq(consume),
                fifo.i.valid.eq(arrive & ~bypassed),
                fifo.i.payload.eq(incoming),
                self.room[v].eq(fifo.i.ready),
                self.heads[v].valid.eq(head_valid & ~discard),
                self.heads[v].port.eq(head.port), self.heads[v].vc.eq(head.vc),
                self.heads[v].head.eq(head.head), self.heads[v].tail.eq(head.tail),
            ]
            for name in hdr_extra:
                value = getattr(head, name)
                if name == "minimal":   # no adaptive hop over a link that is down
                    pad = 2 * MAX_DIMS - self.n_ports
                    value = value & ~(Cat(self.down, C(0, pad)) if pad else self.down)
                m.d.comb += getattr(self.heads[v], name).eq(value)
            m.d.sync += self.link.credit[v].eq(consume)
            overflow.append(fifo.i.valid & ~fifo.i.ready)
            given_up.append(head_valid & give_up & head.head)
            discarded.append(head_valid & discard)
            g = v % self.groups
            data_out[g] = data_out[g] | Mux(self.grant[v], head.data, 0)
        entry = self.entry
        m.d.comb += [*(self.data[g].eq(d) for g, d in enumerate(data_out)),
                     self.malformed.eq(Cat(*malformed).any()),
                     self.overflow.eq(Cat(*overflow).any()),
                     self.undeliverable.eq(sum(given_up)), self.discarded.eq(sum(discarded)),
                     self.dateline.eq(Cat(*headers).any() & ~hdr_bad & entry.fixed
                                      & entry.straight & entry.vc[0]
                                      & (entry.port < self.n_ports))]
        return m
