"""The ICI router (SPEC section 4.4): input-queued, virtual channels, credit-based flow
control, wormhole or virtual cut-through switching, dimension-order or adaptive routing,
input speed-up, routing tables written at run time."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int
from ..lib.numbered_ports import port, port_name
from .allocator import Allocator
from .input_port import InputPort, is_value
from .layouts import (CHIP_BITS, LENGTH_BITS, MAX_VCS, ROUTINGS, adaptive_entry_layout,
                      adaptive_table_write_layout, eject_port, flit_layout, injection_queue,
                      max_local_ports, route_entry_layout, route_word_layout,
                      table_write_layout)
from .link import LinkSignature

__all__ = ["Router", "COUNTER_BITS", "SWITCHINGS"]

#: Switching modes (``Router(switching=)``).
SWITCHINGS = ("wormhole", "cut_through")

#: Width of the statistics counters (they wrap).
COUNTER_BITS = 32


class Router(wiring.Component):
    """A 2*D-port torus router with injection and ejection.

    Ports are numbered as ``golden.topology``: ``2a`` is ``+a``, ``2a + 1`` is ``-a``, and
    ``2D`` is the local port (eject). A link joins port ``p`` of one router to port
    ``p ^ 1`` of the next, so ``rx[p]`` receives from the neighbour behind port ``p``.

    Local ports: with ``local_ports = k`` above 1 the chip injects and ejects up to ``k``
    flits a cycle, through ``inject``/``eject`` and ``inject1``/``eject1`` ... A packet
    ejects on the ejection port of the input it arrives on, so the packets of one route
    keep one order: torus input ``p`` on port ``hdl.ici.layouts.eject_port(p)`` (its own
    port when there are as many local ports as torus ports; with 2, the two inputs of
    each axis apart), local input j on port j.

    Microarchitecture: an :class:`InputPort` per torus port (``vcs`` VC buffers) and one
    for injection (one buffer, or a queue per direction: ``injection_queues``); the route
    of a packet is looked up in the table as its header arrives, so it waits in the
    buffer with its route known; an
    :class:`Allocator` does VC and switch allocation together, round robin, in the
    cycle a flit is at the head of its buffer; the flit crosses the switch in that cycle
    into the output register. With ``pipeline=1`` a flit that arrives at an empty buffer
    is allocated in its arrival cycle.

    Routing table: entry ``d`` (``hdl.ici.layouts.route_entry_layout``, built from
    ``golden.topology.routing_tables`` by ``hdl.ici.layouts.table_entries``) gives the
    output port for destination ``d`` and the rule for its output VC, the VC rule of
    ``golden.routing``. It is written through ``table`` at run time, so a new topology,
    twist or failure needs no rebuild. A write takes effect for headers arriving from the
    next cycle; rewrite the table while the router is idle for a clean switch over.

    Malformed packets: a header whose opcode is not 1 or 2, whose length is 0, whose
    destination is at or above ``n_nodes`` or whose entry is unreachable (or names a port
    or VC the router does not have) is counted in ``dropped`` and its packet (``length``
    flits, one if the length is 0) is discarded at this router: its flits free their
    buffer slots and return their credits, never reach an output, and never hold an
    output VC, so the VC carries on with the next packet.

    Links taken down: while bit p of ``down`` is high, torus output p starts no packet.
    A packet already crossing to it goes on to its tail (a wormhole packet is never cut,
    so the far router never sees half a packet); every packet whose header comes to the
    head of its buffer routed to p is discarded as a malformed one is and counted in
    ``undeliverable``, so it never waits for a link that will not come back and nothing
    is lost silently. Rewriting the table can route later packets around the link. With
    ``routing="adaptive"`` the escape hop decides the same way, and no adaptive hop takes
    a down output (``InputPort`` masks it out of the header's minimal ports).

    Deadlock freedom: the router takes exactly the channels the tables name (output port
    and VC by the rule above) and holds each output VC from its header to its tail, so it
    cannot deadlock when the tables' channel dependency graph over (link, VC) is acyclic,
    as ``golden.topology.deadlock_free`` proves for every table it builds (datelines
    switch each ring to VC 1, escape hops use the escape VC). That proof also assumes
    that every neighbour has ``buffer_flits`` per VC (the initial credits), and that the
    ejection port is eventually always ready (the sink consumes).

    Parameters
    ----------
    dims : int
        2 or 3: ``2*dims`` torus ports.
    vcs : int
        Virtual channels per link, 2 to 8 (``MAX_VCS``).
    buffer_flits : int
        Flits per VC buffer (and in the injection buffer), at least 1. One VC streams one
        flit per cycle over a link of latency ``L`` when ``buffer_flits >= 2L + 2 +
        pipeline`` (the credit round trip).
    flit_words : int
        32-bit words per flit, 1 to 8 (default 1).
    n_nodes : int
        Table entries: destinations ``0 .. n_nodes-1``, up to 256.
    pipeline : int
        1 (default): a flit arriving at an empty buffer leaves in the same cycle; 2: every
        flit is buffered first (one more cycle per hop, and the arrival logic is cut off
        from the allocator).
    local_ports : int
        Injection and ejection ports, 1 (default) to ``8 - 2*dims`` (switch outputs are
        numbered in 3 bits): up to 4 on a 2-D torus, one per torus input.
    observe : bool
        Add the verification ports below (``hold``, ``switched``, ``starved``,
        ``dateline``, ``dateline_hops``); default False, the router alone. They change
        nothing else, and with ``hold`` low the router behaves as without them.
    routing : "dor" (default) or "adaptive"
        "dor": everything above. "adaptive" (SPEC 4.4; "Adaptive routing" below).
    escape_vcs : int
        With ``routing="adaptive"``: VCs ``0 .. escape_vcs-1`` are the escape sub-network's
        (the tables' ``escape_vcs``), the rest adaptive; default 2.
    eject_by : "input" or "source"
        With several local ports, a packet ejects on the port of the torus input it
        arrives on ("input", the only choice with "dor") or on port ``src % local_ports``
        ("source", the default with "adaptive": a flow's packets then share a sink). A
        system whose receivers need no order (``hdl.system.ChipNode``) takes "input" with
        "adaptive" too, so that a neighbour's packets over two links eject side by side.
    escape_bias : int or None
        With ``routing="adaptive"``: credits added to the escape hop's port when the
        ports are compared (:class:`Allocator`), at least 0; default None:
        ``buffer_flits``.
    keep_packets : bool
        With ``routing="adaptive"``: each torus output stays with the packet it sends
        until its tail, other packets filling only its gaps (:class:`Allocator`); default
        False, flit by flit. A system's routers (``hdl.system.ChipNode``) keep packets:
        their receive engines take one packet at a time.
    switching : "wormhole" or "cut_through"
        With "dor": wormhole (the default: a header takes its output VC when the VC is
        free, with a credit) or virtual cut-through (only with credits for its whole
        packet, so packets must fit a buffer; longer ones are malformed and dropped; the
        injection rule and ``keep_packets`` as with "adaptive"). "adaptive" is always
        cut-through.
    speedup : int
        Input speed-up, 1 (default) to ``vcs``: each input's VCs are dealt to ``speedup``
        groups (VC ``v`` to group ``v % speedup``), each a switch input of its own, so an
        input sends up to ``speedup`` flits a cycle, of different VCs to different
        outputs (:class:`Allocator`). The switch grows to ``speedup`` times the inputs.
    injection_queues : bool or None
        Each injection port has ``queues = min(2*dims, vcs)`` buffers of
        ``buffer_flits``, and a packet joins queue
        ``hdl.ici.layouts.injection_queue(port)`` of its first hop's port (with "adaptive"
        its escape hop's), held from its header to its tail: a packet whose direction is
        blocked then stalls only the packets of its own queue, and ``inject.ready``
        follows the arriving header's queue. Default None: with "adaptive" only; True
        gives "dor" them too (one destination, one first hop, so a flow's packets stay in
        order). The injection buffers are no channel of the tables' dependency graph (no
        packet waits for one), so the deadlock proof is unchanged.

    Adaptive routing (``routing="adaptive"``): the table holds
    ``hdl.ici.layouts.adaptive_entry_layout`` entries (``adaptive_table_entries`` of
    ``golden.topology.routing_tables(..., routing="adaptive")``), written through
    ``table`` as ``adaptive_table_write_layout``. Allocation is virtual cut-through
    (:class:`Allocator` with ``adaptive``): a header takes an output VC only with credits
    for its whole packet, so packets must fit a buffer (longer ones are malformed and
    dropped); it takes the minimal port whose VCs have the most credits in all (the
    escape hop's port counted with ``escape_bias`` more), and there the free VC with the
    most credits: an adaptive one, or its escape hop (the tables' escape route and VC),
    which wins ties; a packet in an escape VC
    stays on escape hops unless the tables allow re-entry. A header from an injection
    port needs credits for two packets when two fit a buffer (the injection rule). Each
    injection port has ``min(2*dims, vcs)`` queues (``injection_queues``; a queue per
    direction on a 2-D torus with 4 VCs). A packet ejects on local port
    ``src % local_ports``, whatever input it arrives on (``eject_by="source"``). Order:
    packets of one pair may arrive out of order (they may take different paths); every
    packet is still delivered once, intact. Deadlock freedom is
    ``golden.topology.deadlock_free``'s proof of the escape sub-network (Duato's
    condition).

    Ports
    -----
    rx : In(LinkSignature(vcs, flit_words)).array(2*dims)
        Torus inputs; credits return one cycle after a flit leaves its buffer.
    tx : Out(LinkSignature(vcs, flit_words)).array(2*dims)
        Torus outputs, registered; a flit goes out only with a credit for its VC.
    inject : In(stream.Signature(flit_layout(flit_words)))
        Packets from the local chip, flit by flit. ``ready`` is a register-based "buffer
        not full", independent of ``valid``. The header's ``vc`` field is not used:
        the table rule chooses every link's VC.
    eject : Out(stream.Signature(flit_layout(flit_words)))
        Packets for the local chip, registered. A packet's flits are contiguous.
    inject1, eject1, ... : as ``inject`` and ``eject``, for local ports 1 .. k-1
    table : In(stream.Signature(table_write_layout(n_nodes)))
        Routing-table writes; ``ready`` is always high.
    forwarded : Out(32).array(2*dims + local_ports)
        Flits sent out of each torus port, and ejected (index ``2*dims + j`` for ejection
        port j).
    dropped : Out(32)
        Malformed packets dropped.
    down : In(2*dims)
        Bit p: torus output p is down (above); 0 in normal operation.
    undeliverable : Out(32)
        Packets discarded because their output was down.
    discarded : Out(range(2*dims*vcs + local_ports + 1))
        Flits discarded this cycle, of malformed and undeliverable packets
        (combinational).
    overflow : Out(1)
        Sticky: a neighbour broke the credit protocol (a flit arrived at a full buffer, or
        a credit came back that was never spent). Never set in a correct network.
    hold : In(2*dims), with ``observe``
        Bit p: torus output p sends nothing this cycle; its flits wait as they would for
        a credit (a link stall, for the regression's random stalls).
    switched : Out(2*dims + local_ports).array(2*dims + local_ports), with ``observe``
        Entry o, one-hot or 0: the input (torus port i, or ``2*dims + j`` for injection
        port j) whose flit crosses the switch to output o this cycle.
    starved : Out(vcs).array(2*dims), with ``observe``
        Bit w of entry o: a flit at the head of a buffer waits for output VC (o, w),
        which has no credit left, this cycle.
    dateline : Out(vcs).array(2*dims), with ``observe``
        Bit w of entry o: a header arrived this cycle whose next hop is the dateline link
        out of port o, on VC w (``InputPort.dateline``).
    dateline_hops : Out(range(2*dims + local_ports + 1)), with ``observe``
        How many such headers arrived this cycle.
    adaptive_same, adaptive_other, fallback : Out(2*dims), with ``observe`` and "adaptive"
        Bit o: a header crosses the switch to torus output o this cycle on an adaptive VC,
        o being its escape hop's (dimension-order) port (``adaptive_same``) or another
        minimal port (``adaptive_other``); or, having arrived on an adaptive VC, on its
        escape hop (``fallback``) (``Allocator``'s outputs of those names).
    queue_used, queue_full, queue_passed : Out(queues).array(local_ports), with
        ``observe`` and ``injection_queues``
        Bit q of entry j, injection port j's queue q (``queues = min(2*dims, vcs)``):
        a header joins it this cycle (``used``); a header for it waits on ``inject``
        because it is full (``full``); one of its flits crosses the switch while another
        queue's head is blocked (``passed``: the head-of-line blocking one FIFO would
        have had).

    Latency per hop, at zero load: ``pipeline`` cycles in the router (input to output
    register) plus the link's latency; a flit injected in cycle ``t`` of an idle router
    is on ``eject`` or a ``tx`` port in cycle ``t + pipeline``. Throughput: each output
    one flit per cycle; each input ``speedup`` flits per cycle into the switch (one per
    VC group).

    Stall rules: a head waits while its output VC has no credit, is owned by another
    packet (header only), or the output grants another input; ``eject`` holds its flit
    while ``ready`` is low and takes nothing new; ``inject.ready`` is low while the
    injection buffer is full (with ``injection_queues``, the queue of the packet on
    ``inject``: its header's first hop, then the queue its header joined). Nothing is dropped except malformed packets and packets
    routed to a down output, each counted; nothing is duplicated or reordered within a
    VC.
    """

    def __init__(self, *, dims=2, vcs=2, buffer_flits=8, flit_words=1, n_nodes=256,
                 pipeline=1, local_ports=1, observe=False, routing="dor", escape_vcs=2,
                 escape_bias=None, eject_by=None, keep_packets=False, speedup=1,
                 switching=None, injection_queues=None):
        check_int("dims", dims, least=2, most=3)
        check_int("vcs", vcs, least=2, most=MAX_VCS)
        check_int("buffer_flits", buffer_flits, least=1)
        check_int("n_nodes", n_nodes, least=1, most=1 << CHIP_BITS)
        check_int("pipeline", pipeline, least=1, most=2)
        check_int("local_ports", local_ports, least=1, most=max_local_ports(dims))
        self.dims, self.vcs, self.buffer_flits = dims, vcs, buffer_flits
        self.flit_words, self.n_nodes, self.pipeline = flit_words, n_nodes, pipeline
        self.n_ports, self.local_ports = 2 * dims, local_ports
        self.observe = bool(observe)
        if routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {', '.join(map(repr, ROUTINGS))}, "
                             f"not {routing!r}")
        self.routing, self.adaptive = routing, routing == "adaptive"
        if eject_by is None:
            eject_by = "source" if self.adaptive else "input"
        choices = ("input", "source") if self.adaptive else ("input",)
        if eject_by not in choices:
            raise ValueError(f"eject_by must be {' or '.join(map(repr, choices))} with "
                             f"routing={routing!r}, not {eject_by!r}")
        self.eject_by = eject_by
        self.escape_vcs = escape_vcs
        if self.adaptive:
            check_int("escape_vcs", escape_vcs, least=1, most=vcs - 1)
        if escape_bias is not None:
            check_int("escape_bias", escape_bias, least=0)
        self.escape_bias = escape_bias
        if switching is None:
            switching = "cut_through" if self.adaptive else "wormhole"
        allowed = ("cut_through",) if self.adaptive else SWITCHINGS
        if switching not in allowed:
            raise ValueError(f"switching must be {' or '.join(map(repr, allowed))} with "
                             f"routing={routing!r}, not {switching!r}")
        self.switching, self.cut_through = switching, switching == "cut_through"
        if keep_packets and not self.cut_through:
            raise ValueError(f"keep_packets needs routing='adaptive' or "
                             f"switching='cut_through', not {routing!r} with {switching!r}: "
                             f"wormhole outputs turn flit by flit")
        self.keep_packets = bool(keep_packets)
        self.speedup = check_int("speedup", speedup, least=1, most=vcs)
        if injection_queues is None:
            injection_queues = self.adaptive
        if not isinstance(injection_queues, bool):
            raise TypeError(f"injection_queues must be True, False or None, not "
                            f"{injection_queues!r}")
        self.injection_queues = injection_queues
        self.queues = min(self.n_ports, vcs) if injection_queues else 1
        link = LinkSignature(vcs=vcs, flit_words=flit_words)
        flit = stream.Signature(flit_layout(flit_words))
        local = {}
        for j in range(local_ports):
            local |= {self.local_name("inject", j): In(flit),
                      self.local_name("eject", j): Out(flit)}
        super().__init__({
            "rx": In(link).array(self.n_ports),
            "tx": Out(link).array(self.n_ports),
            **local,
            "table": In(stream.Signature(
                (adaptive_table_write_layout if self.adaptive else table_write_layout)(n_nodes))),
            "forwarded": Out(COUNTER_BITS).array(self.n_ports + local_ports),
            "dropped": Out(COUNTER_BITS),
            "down": In(self.n_ports),
            "undeliverable": Out(COUNTER_BITS),
            "discarded": Out(range(self.n_ports * vcs + local_ports + 1)),
            "overflow": Out(1),
            **(self._observed() if self.observe else {}),
        })

    def _observed(self):
        n_io = self.n_ports + self.local_ports
        out = {"hold": In(self.n_ports), "switched": Out(n_io).array(n_io),
               "starved": Out(self.vcs).array(self.n_ports),
               "dateline": Out(self.vcs).array(self.n_ports),
               "dateline_hops": Out(range(n_io + 1))}
        if self.adaptive:
            out |= {name: Out(self.n_ports) for name in ("adaptive_same", "adaptive_other",
                                                          "fallback")}
        if self.injection_queues:
            out |= {name: Out(self.queues).array(self.local_ports)
                    for name in ("queue_used", "queue_full", "queue_passed")}
        return out

    @staticmethod
    def local_name(kind, j):
        """The port name of local port ``j``'s ``kind`` ("inject" or "eject")."""
        return port_name(kind, j)

    def local(self, kind, j):
        """Local port ``j``'s ``inject`` or ``eject`` stream."""
        return port(self, kind, j)

    def elaborate(self, platform):
        m = Module()
        n_ports, vcs = self.n_ports, self.vcs
        m.submodules.table = table = Memory(
            shape=adaptive_entry_layout if self.adaptive else route_entry_layout,
            depth=self.n_nodes, init=[])
        write = table.write_port()
        m.d.comb += [self.table.ready.eq(1), write.en.eq(self.table.valid),
                     write.addr.eq(self.table.payload.dst),
                     write.data.eq(self.table.payload.entry)]

        k = self.local_ports
        inputs = []
        for i in range(n_ports + k):
            local = i >= n_ports
            # The ejection port of each input: class docstring.
            port = InputPort(vcs=self.queues if local else vcs, out_vcs=vcs,
                             flit_words=self.flit_words, buffer_flits=self.buffer_flits,
                             port=-1 if local else i, n_ports=n_ports,
                             bypass=self.pipeline == 1,
                             eject_to=n_ports + (i - n_ports if local else eject_port(
                                 i, torus_ports=n_ports, local_ports=k)),
                             routing=self.routing, escape_vcs=self.escape_vcs,
                             local_ports=k, eject_by_source=self.eject_by == "source",
                             groups=self.speedup, cut_through=self.cut_through)
            m.submodules[self.local_name("inject", i - n_ports) if local
                         else f"input{i}"] = port
            lookup = table.read_port(domain="comb")
            # Destinations beyond the table read as the all-zero (unreachable) entry.
            known = port.dst < self.n_nodes
            if self.adaptive:
                found = Signal(adaptive_entry_layout, name=f"found{i}")
                m.d.comb += [lookup.addr.eq(port.dst), port.down.eq(self.down),
                             found.eq(Mux(known, lookup.data.as_value(), 0)),
                             port.entry.eq(found.escape), port.minimal.eq(found.minimal),
                             port.reenter.eq(found.reenter)]
            else:
                m.d.comb += [lookup.addr.eq(port.dst), port.down.eq(self.down),
                             port.entry.eq(Mux(known, lookup.data.as_value(), 0))]
            inputs.append(port)
        for j in range(k):
            inject, stream_in = inputs[n_ports + j], self.local("inject", j)
            if self.injection_queues:
                self._injection_queues(m, table, inject, stream_in, j)
                continue
            m.d.comb += [inject.link.valid.eq(stream_in.valid & inject.room[0]),
                         inject.link.data.eq(stream_in.payload),
                         stream_in.ready.eq(inject.room[0])]
        for i in range(n_ports):
            wiring.connect(m, wiring.flipped(self.rx[i]), inputs[i].link)

        m.submodules.allocator = alloc = Allocator(
            n_in=n_ports + k, n_out=n_ports + k, vcs=vcs, buffer_flits=self.buffer_flits,
            n_eject=k, observe=self.observe, adaptive=self.adaptive,
            escape_vcs=self.escape_vcs, inject=range(n_ports, n_ports + k),
            escape_bias=self.escape_bias, keep_packets=self.keep_packets,
            speedup=self.speedup, cut_through=self.cut_through)
        ejects = [self.local("eject", j) for j in range(k)]
        eject_free = [~e.valid | e.ready for e in ejects]
        m.d.comb += alloc.eject_free.eq(Cat(*eject_free))
        for i, port in enumerate(inputs):
            for v in range(port.vcs):
                m.d.comb += [alloc.heads[i][v].eq(port.heads[v]),
                             port.grant[v].eq(alloc.grant[i][v])]
        for o in range(n_ports):
            m.d.comb += alloc.credit[o].eq(self.tx[o].credit)

        # The switch: each output takes the granted flit of the switch input (an input's
        # VC group) it selected into its register. (Flits are plain bits inside the
        # router; the layout is on ports.)
        flit_bits = self.flit_words * 32
        for o in range(n_ports + k):
            flit = 0
            for i, port in enumerate(inputs):
                for g in range(self.speedup):
                    chosen = alloc.select[o][i * self.speedup + g]
                    flit = flit | Mux(chosen, port.data[g], 0)
            held = Signal(flit_bits, name=f"flit{o}", reset_less=True)
            if o < n_ports:
                m.d.sync += [self.tx[o].valid.eq(alloc.send[o]),
                             self.tx[o].vc.eq(alloc.send_vc[o])]
                with m.If(alloc.send[o]):
                    m.d.sync += held.eq(flit)
                m.d.comb += self.tx[o].data.eq(held)
            else:
                eject = ejects[o - n_ports]
                with m.If(eject_free[o - n_ports]):
                    m.d.sync += [eject.valid.eq(alloc.send[o]), held.eq(flit)]
                m.d.comb += eject.payload.eq(held)
            m.d.sync += self.forwarded[o].eq(self.forwarded[o] + alloc.send[o])

        if self.observe:
            self._observe(m, alloc, inputs)
        m.d.sync += [self.dropped.eq(self.dropped + sum(p.malformed for p in inputs)),
                     self.undeliverable.eq(self.undeliverable
                                           + sum(p.undeliverable for p in inputs))]
        m.d.comb += self.discarded.eq(sum(p.discarded for p in inputs))
        with m.If(alloc.credit_error | Cat(*(p.overflow for p in inputs)).any()):
            m.d.sync += self.overflow.eq(1)
        return m

    def _injection_queues(self, m, table, inject, stream_in, j):
        """Injection port ``j`` with ``injection_queues``: each packet joins the queue of
        its first (with "adaptive", escape) hop's direction, held from its header to its
        tail."""
        word = route_word_layout(stream_in.payload[0])
        lookup = table.read_port(domain="comb")
        layout = adaptive_entry_layout if self.adaptive else route_entry_layout
        found = Signal(layout, name=f"inject{j}_found")
        m.d.comb += [lookup.addr.eq(word.dst),
                     found.eq(Mux(word.dst < self.n_nodes, lookup.data.as_value(), 0))]
        remaining = Signal(LENGTH_BITS, name=f"inject{j}_remaining")
        held = Signal(range(self.queues), name=f"inject{j}_queue")
        queue = Signal(range(self.queues), name=f"inject{j}_next")
        first_port = found.escape.port if self.adaptive else found.port
        with m.Switch(first_port):
            for p in range(self.n_ports):
                with m.Case(p):
                    m.d.comb += queue.eq(injection_queue(p, self.queues))
            with m.Default():       # ejection, or unreachable (dropped): queue 0
                m.d.comb += queue.eq(0)
        header = ~remaining.any()
        which = Mux(header, queue, held)
        room = inject.room.bit_select(which, 1)
        take = stream_in.valid & room
        m.d.comb += [inject.link.valid.eq(take), inject.link.vc.eq(which),
                     inject.link.data.eq(stream_in.payload), stream_in.ready.eq(room)]
        if self.observe:
            for q in range(self.queues):
                mine = header & is_value(queue, q)
                m.d.comb += [self.queue_used[j][q].eq(take & mine),
                             self.queue_full[j][q].eq(stream_in.valid & mine & ~room)]
        with m.If(take):
            with m.If(header):
                m.d.sync += [remaining.eq(Mux(word.length.any(), word.length - 1, 0)),
                             held.eq(queue)]
            with m.Else():
                m.d.sync += remaining.eq(remaining - 1)

    def _observe(self, m, alloc, inputs):
        """The ``observe`` ports: views of the allocator and the input ports."""
        m.d.comb += alloc.hold.eq(self.hold)
        n_in = self.n_ports + self.local_ports
        for o in range(n_in):
            by_input = Cat(alloc.select[o][i * self.speedup:(i + 1) * self.speedup].any()
                           for i in range(n_in))
            m.d.comb += self.switched[o].eq(Mux(alloc.send[o], by_input, 0))
        for o in range(self.n_ports):
            m.d.comb += self.starved[o].eq(alloc.starved[o])
            for w in range(self.vcs):
                m.d.comb += self.dateline[o][w].eq(Cat(
                    p.dateline & (p.entry.port == o) & (p.entry.vc == w)
                    for p in inputs).any())
        m.d.comb += self.dateline_hops.eq(sum(p.dateline for p in inputs))
        if self.adaptive:
            m.d.comb += [self.adaptive_same.eq(alloc.adaptive_same),
                         self.adaptive_other.eq(alloc.adaptive_other),
                         self.fallback.eq(alloc.fallback)]
        if not self.injection_queues:
            return
        for j in range(self.local_ports):
            i = self.n_ports + j
            for q in range(self.queues):
                others = Cat(alloc.blocked[i][r] for r in range(self.queues) if r != q)
                m.d.comb += self.queue_passed[j][q].eq(alloc.grant[i][q] & others.any())
