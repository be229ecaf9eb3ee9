"""One node of the network testbench: a router, its outgoing links, and per local port a
traffic generator and a sink, with the node's statistics behind one read port."""

from amaranth.hdl import Array, C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..ici import LinkSignature, Router
from ..ici.layouts import CHIP_BITS, MAX_VCS
from ..lib.params import check_int
from ..lib.xorshift import GAP_BITS, Xorshift32
from ..system.fabric import link_outputs
from .generator import TrafficGenerator
from ..system.layouts import (FLIT_WORDS, HIST_BASE, HOP_BITS, MAX_LOCAL_PORTS,
                              MAX_PACKET_FLITS, STAT_ADDR_BITS, STATS, node_layout,
                              node_row_layout, vc_bit)
from .sink import TrafficSink

__all__ = ["NetworkNode", "node_signature", "traffic_signature",
           "stall_salt", "ADAPTIVE_ESCAPE_VCS", "ADAPTIVE_STATS", "node_stats"]

#: The escape VCs of a node's router with ``routing="adaptive"``: 2, enough for every
#: topology's adaptive tables (a torus's, a failed chip's; a mesh's need 1), so that one
#: build serves them all.
ADAPTIVE_ESCAPE_VCS = 2


#: The statistics a node keeps beyond ``hdl.system.layouts.STATS``, read out after them
#: (observed coverage of the router, sticky bitmaps over the whole run, from ``Router``'s
#: observation ports of those names):
#:
#: - ``adaptive``, with ``routing="adaptive"``: bit p, a header left torus port p on an
#:   adaptive VC, p being its escape hop's (dimension-order) port; bit 8 + p, on an
#:   adaptive VC out of another minimal port; bit 16 + p, a header that arrived on an
#:   adaptive VC fell back to its escape hop out of port p;
#: - ``inject_queues``, with injection queues (adaptive routing's default, or
#:   ``injection_queues=True``): bit q, a header joined injection queue q (of any local
#:   port); bit 8 + q, a header waited for queue q, full; bit 16 + q, a flit of queue q
#:   crossed the switch while another queue's head was blocked.
ADAPTIVE_STATS = ("adaptive", "inject_queues")


def node_stats(routing="dor", injection_queues=None):
    """The statistics of a node with ``routing`` and ``injection_queues`` (None: the
    routing's default, queues with "adaptive"), in read-out order: ``STATS``, then those
    of :data:`ADAPTIVE_STATS` it keeps (a "dor" node with one injection FIFO keeps none)."""
    queues = routing == "adaptive" if injection_queues is None else injection_queues
    return (STATS + (("adaptive",) if routing == "adaptive" else ())
            + (("inject_queues",) if queues else ()))


assert len(node_stats("adaptive")) <= HIST_BASE


def stall_salt(port):
    """The value torus port ``port``'s stall generator XORs into the node's seed (distinct
    from the traffic generators' ``seed_salts``)."""
    return 0xC2B2_AE35 * (2 * port + 1) & 0xFFFF_FFFF


def traffic_signature(n_nodes):
    """The run's traffic settings, the same for every node (``hdl.system.NetworkSystem``'s
    plain inputs of those names). ``stall`` is the link stall knob (``NetworkNode``)."""
    return wiring.Signature({
        "mode": Out(2), "threshold": Out(GAP_BITS + 1), "stall": Out(GAP_BITS + 1),
        "packet_flits": Out(range(MAX_PACKET_FLITS + 1)), "message_packets": Out(16),
        "alive": Out(n_nodes), "corrupt_every": Out(16), "malformed_every": Out(16),
    })


def node_signature(*, dims, vcs, n_nodes, local_ports, routing="dor"):
    """The ports of a :class:`NetworkNode` (its docstring), without building one."""
    ports = 2 * dims
    link = LinkSignature(vcs=vcs, flit_words=FLIT_WORDS)
    setup = node_row_layout(dims, routing)
    return wiring.Signature({
        "tx": Out(link).array(ports), "rx": In(link).array(ports),
        "setup_valid": In(1), "setup": In(setup),
        "node": In(CHIP_BITS), "go": In(1), "create": In(1), "window": In(1),
        "now": In(32), "fault": In(1), "traffic": In(traffic_signature(n_nodes)),
        "lit": Out(ports), "moved": Out(1),
        "injected": Out(range(local_ports + 1)), "arrived": Out(range(local_ports + 1)),
        "drops": Out(8), "pending": Out(1),
        "stat_addr": In(STAT_ADDR_BITS), "stat_data": Out(32),
    })


class NetworkNode(wiring.Component):
    """A :class:`~hdl.ici.Router` with a :class:`~hdl.ici.Link` on each torus output, and
    ``local_ports`` pairs of :class:`TrafficGenerator` (into injection port j) and
    :class:`TrafficSink` (from ejection port j).

    Every node of a network is the same module: its id comes in on ``node``, its settings
    in the configuration rows. Row r (``setup_valid`` high) writes the router's table
    entry for destination r and the hop count from source r, and if r is this node, the
    node's own settings (``node_layout``: fixed destination, whether it sends, lit torus
    ports, seed).

    Parameters
    ----------
    dims, vcs, buffer_flits, n_nodes, local_ports
        The router's (:class:`~hdl.ici.Router`; flits are 2 words, pipeline 1).
    link_latency : int
        Of each outgoing link.
    source_queue : int
        Of each generator.
    routing : "dor" (default) or "adaptive"
        Of the router (``escape_vcs`` ``ADAPTIVE_ESCAPE_VCS``); with "adaptive" the
        configuration rows carry adaptive table entries and the sinks check flows
        unordered (:class:`TrafficSink`'s ``ordered``).
    escape_bias : int or None
        With "adaptive": the router's ``escape_bias`` (default None: its default).
    speedup : int
        The router's input speed-up (``hdl.ici.Router``), 1 (default) to ``vcs``.
    switching : str or None
        The router's ``switching`` (``hdl.ici.Router``); None (default) its default.
    injection_queues : bool or None
        The router's ``injection_queues`` (``hdl.ici.Router``); None (default) its
        default.

    Ports
    -----
    tx : Out(LinkSignature(vcs, 2)).array(2*dims)
        The far ends of the outgoing links (registered when ``link_latency`` >= 1).
    rx : In(LinkSignature(vcs, 2)).array(2*dims)
        Into the router.
    setup_valid, setup : In(1), In(node_row_layout(dims, routing))
        A configuration row (not ``config``: a Verilog keyword, which Verilator's wrapper of
        a hierarchical block would not escape).
    node : In(8)
    go, create, window : In(1)
        Generators running; creation on; measurement window open.
    now : In(32)
    fault : In(1)
        The run's link fault has come: the torus ports its settings mark ``down`` are
        down from this cycle on (``Router.down``; their packets are counted
        ``undeliverable``).
    traffic : In(traffic_signature(n_nodes))
    lit : Out(2*dims)
        The node's lit torus ports, from its settings.
    moved : Out(1)
        A flit was injected, ejected or sent on a link this cycle.
    injected, arrived : Out(range(local_ports + 1))
        Packets whose tail was injected, and ejected, this cycle.
    drops : Out(8)
        Packets the router dropped this cycle, malformed or undeliverable (seen a cycle
        late).
    pending : Out(1)
        A generator has a packet queued or half sent.
    stat_addr : In(STAT_ADDR_BITS)
    stat_data : Out(32)
        ``node_stats(routing, injection_queues)[stat_addr]`` (counters summed over the
        local ports, the largest latency of them for ``latency_max``), or histogram bin
        ``stat_addr - HIST_BASE`` (summed), combinationally.

    Link stalls: each torus output has a xorshift32 generator (seeded with the node's
    seed XOR ``stall_salt(p)``, stepping while ``go``); in a cycle whose low 16 bits are
    below ``traffic.stall``, the router's output p sends nothing (``Router.hold``), so
    a fraction ``stall / 2**16`` of its cycles the link carries no flit and its flits
    wait, as for a missing credit. ``stall`` 0 (the default of every run) never holds.

    Coverage: the router is built with ``observe``, and the statistics from ``turns_lo``
    on (``layouts.STATS``) record what it saw: the switch's input-to-output turns, the
    VCs used on each link, dateline hops, and credit-empty stalls; with
    ``routing="adaptive"`` or injection queues, those of :data:`ADAPTIVE_STATS` the node
    keeps follow them (the adaptive choices and escape fallbacks; the injection queues).
    """

    def __init__(self, *, dims=2, vcs=2, buffer_flits=8, link_latency=2, n_nodes=16,
                 local_ports=1, source_queue=64, routing="dor", escape_bias=None, speedup=1,
                 switching=None, injection_queues=None):
        check_int("dims", dims, least=2, most=3)
        check_int("vcs", vcs, least=2, most=MAX_VCS)
        check_int("buffer_flits", buffer_flits, least=1)
        check_int("link_latency", link_latency, least=0)
        check_int("n_nodes", n_nodes, least=2, most=1 << CHIP_BITS)
        check_int("local_ports", local_ports, least=1, most=MAX_LOCAL_PORTS)
        check_int("source_queue", source_queue, least=1)
        self.dims, self.vcs, self.buffer_flits = dims, vcs, buffer_flits
        self.link_latency, self.n_nodes = link_latency, n_nodes
        self.local_ports, self.source_queue = local_ports, source_queue
        self.routing = routing
        if escape_bias is not None:
            check_int("escape_bias", escape_bias, least=0)
        self.escape_bias = escape_bias
        self.speedup = check_int("speedup", speedup, least=1, most=vcs)
        self.switching = switching
        if injection_queues is not None and not isinstance(injection_queues, bool):
            raise TypeError(f"injection_queues must be True, False or None, not "
                            f"{injection_queues!r}")
        self.injection_queues = injection_queues
        super().__init__(node_signature(dims=dims, vcs=vcs, n_nodes=n_nodes,
                                        local_ports=local_ports, routing=routing))

    def elaborate(self, platform):
        m = Module()
        ports, k = 2 * self.dims, self.local_ports
        m.submodules.router = router = Router(
            dims=self.dims, vcs=self.vcs, buffer_flits=self.buffer_flits,
            flit_words=FLIT_WORDS, n_nodes=self.n_nodes, local_ports=k, observe=True,
            speedup=self.speedup,
            **({"switching": self.switching} if self.switching is not None else {}),
            **({"injection_queues": self.injection_queues}
               if self.injection_queues is not None else {}),
            **({"routing": "adaptive", "escape_vcs": ADAPTIVE_ESCAPE_VCS,
                "escape_bias": self.escape_bias} if self.routing == "adaptive" else {}))
        generators = [TrafficGenerator(n_nodes=self.n_nodes, lane=j, local_ports=k,
                                       source_queue=self.source_queue) for j in range(k)]
        sinks = [TrafficSink(n_nodes=self.n_nodes, local_ports=k,
                             **({"ordered": False} if self.routing == "adaptive" else {}))
                 for _ in range(k)]

        settings = Signal(node_layout(self.dims))
        m.submodules.hops = hops = Memory(shape=HOP_BITS, depth=self.n_nodes, init=[])
        hop_write = hops.write_port()
        cfg = self.setup
        m.d.comb += [router.table.valid.eq(self.setup_valid),
                     router.table.payload.dst.eq(cfg.row),
                     router.table.payload.entry.eq(cfg.entry),
                     hop_write.en.eq(self.setup_valid), hop_write.addr.eq(cfg.row),
                     hop_write.data.eq(cfg.hops), self.lit.eq(settings.lit),
                     router.down.eq(Mux(self.fault, settings.down, 0))]
        with m.If(self.setup_valid & (cfg.row == self.node)):
            m.d.sync += settings.eq(cfg.node)

        link_outputs(m, router, self, vcs=self.vcs, flit_words=FLIT_WORDS,
                     latency=self.link_latency)

        traffic = self.traffic
        for j, (gen, sink) in enumerate(zip(generators, sinks)):
            m.submodules[f"generator{j}"] = gen
            m.submodules[f"sink{j}"] = sink
            m.d.comb += [
                gen.node.eq(self.node), gen.go.eq(self.go), gen.create.eq(self.create),
                gen.window.eq(self.window), gen.now.eq(self.now), gen.mode.eq(traffic.mode),
                gen.threshold.eq(traffic.threshold), gen.packet_flits.eq(traffic.packet_flits),
                gen.message_packets.eq(traffic.message_packets), gen.alive.eq(traffic.alive),
                gen.corrupt_every.eq(traffic.corrupt_every),
                gen.malformed_every.eq(traffic.malformed_every),
                gen.first_dst.eq(settings.dst), gen.sends.eq(settings.sends),
                gen.seed.eq(settings.seed),
                sink.node.eq(self.node), sink.now.eq(self.now), sink.window.eq(self.window),
                sink.packet_flits.eq(traffic.packet_flits),
            ]
            wiring.connect(m, gen.inject, router.local("inject", j))
            wiring.connect(m, router.local("eject", j), sink.eject)
            lookup = hops.read_port(domain="comb")
            m.d.comb += [lookup.addr.eq(sink.src), sink.hops.eq(lookup.data)]

        def transfers(streams):
            return [s.valid & s.ready for s in streams]
        injects = transfers(router.local("inject", j) for j in range(k))
        ejects = transfers(router.local("eject", j) for j in range(k))
        sent = [router.tx[p].valid for p in range(ports)]
        arrivals = [router.rx[p].valid for p in range(ports)]
        m.d.comb += [self.moved.eq(Cat(*injects, *ejects, *sent).any()),
                     self.injected.eq(sum(g.tail for g in generators)),
                     self.arrived.eq(sum(s.arrived for s in sinks)),
                     self.pending.eq(Cat(g.queued.any() for g in generators).any())]
        dropped = Signal.like(router.dropped)
        last_dropped = Signal.like(router.dropped)
        m.d.comb += dropped.eq(router.dropped + router.undeliverable)
        m.d.sync += last_dropped.eq(dropped)
        m.d.comb += self.drops.eq(dropped - last_dropped)

        # Flits that entered the router and have neither left nor been discarded.
        held = Signal(32)
        m.d.sync += held.eq(held + sum(injects) + sum(arrivals) - sum(ejects) - sum(sent)
                            - router.discarded)
        links = [Signal(32, name=f"link{p}_window") for p in range(ports)]
        for p, count in enumerate(links):
            m.d.sync += count.eq(count + (sent[p] & self.window))

        stats = {f"link{p}": links[p] for p in range(ports)}
        for name in ("created_window", "created", "injected", "overflow", "corrupted",
                     "malformed"):
            stats[name] = sum(getattr(g, name) for g in generators)[:32]
        for name in ("received", "packets_window", "flits_window", "hops_window",
                     "header_errors", "sequence_errors", "payload_errors"):
            stats[name] = sum(getattr(s, name) for s in sinks)[:32]
        latency = sum(s.latency for s in sinks)
        stats["latency_lo"], stats["latency_hi"] = latency[:32], latency[32:48]
        worst = sinks[0].latency_max
        for sink in sinks[1:]:
            worst = Mux(sink.latency_max > worst, sink.latency_max, worst)
        stats["latency_max"] = worst
        stats["dropped"], stats["protocol"] = router.dropped, router.overflow
        stats["undeliverable"] = router.undeliverable
        stats["held"] = held
        stats["queued"] = sum(g.queued for g in generators)

        stats |= self._coverage(m, router, settings, ports, k)

        # Padded to HIST_BASE entries, so that every index of its bits names one.
        names = node_stats(self.routing, self.injection_queues)
        scalar = Array(stats.get(name, 0) for name in names + ("",) * (HIST_BASE - len(names)))
        hist = sum(s.hist_data for s in sinks)[:32]
        for sink in sinks:
            m.d.comb += sink.hist_addr.eq(self.stat_addr - HIST_BASE)
        m.d.comb += self.stat_data.eq(Mux(self.stat_addr < HIST_BASE,
                                          scalar[self.stat_addr[:(HIST_BASE - 1).bit_length()]],
                                          hist))
        return m

    def _coverage(self, m, router, settings, ports, k):
        """The link stall generators, and the coverage statistics (class docstring)."""
        held = []
        for p in range(ports):
            m.submodules[f"stall{p}"] = rand = Xorshift32()
            hold = Signal(name=f"hold{p}")
            m.d.comb += [rand.seed.eq(settings.seed ^ stall_salt(p)), rand.run.eq(self.go),
                         hold.eq(self.go & (rand.value[:GAP_BITS] < self.traffic.stall))]
            held.append(hold)
        m.d.comb += router.hold.eq(Cat(*held))

        def sticky(name, bits):
            bitmap = Signal(64 if name == "turns" else 32, name=f"seen_{name}")
            m.d.sync += bitmap.eq(bitmap | bits)
            return bitmap

        n_io = ports + k
        turns = 0
        for o in range(n_io):
            for i in range(n_io):
                turns = turns | (router.switched[o][i] << (8 * i + o))
        turns = sticky("turns", turns)
        link_vcs = 0
        for p in range(ports):
            for v in range(self.vcs):
                used = router.tx[p].valid & (router.tx[p].vc == v)
                link_vcs = link_vcs | (used << vc_bit(p, v))
        per_vc = {name: 0 for name in ("datelines", "starved")}
        for p in range(ports):
            for v in range(self.vcs):
                per_vc["datelines"] |= router.dateline[p][v] << vc_bit(p, v)
                per_vc["starved"] |= router.starved[p][v] << vc_bit(p, v)
        stats = {"turns_lo": turns[:32], "turns_hi": turns[32:],
                 "link_vcs": sticky("link_vcs", link_vcs),
                 "datelines": sticky("datelines", per_vc["datelines"]),
                 "starved": sticky("starved", per_vc["starved"])}
        for name, step in (("dateline_hops", router.dateline_hops),
                           ("starved_cycles", Cat(*(router.starved[p] for p in range(ports)))
                            .any()),
                           ("stalled", sum(held))):
            count = Signal(32, name=name)
            m.d.sync += count.eq(count + step)
            stats[name] = count
        if self.routing == "adaptive":
            choices = Cat(router.adaptive_same, C(0, 8 - ports), router.adaptive_other,
                          C(0, 8 - ports), router.fallback)
            stats["adaptive"] = sticky("adaptive", choices)
        if router.injection_queues:
            queues = 0
            for kind, shift in (("used", 0), ("full", 8), ("passed", 16)):
                for j in range(k):
                    queues = queues | (getattr(router, f"queue_{kind}")[j] << shift)
            stats["inject_queues"] = sticky("inject_queues", queues)
        return stats
