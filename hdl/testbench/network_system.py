"""The network testbench top: nodes joined into a torus of any ``golden.topology`` shape,
through hard-wired links inside it and an OCS per axis on its faces, with the phases of a
measurement run and the read-out of every node's statistics."""

import math

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..ici.layouts import MAX_VCS, ROUTINGS
from ..lib.params import check_int
from ..lib.xorshift import GAP_BITS
from ..ocs import status_layout
from ..system.fabric import (config_rows, face_ports, ocs_layout, ocs_switches, parse_dims,
                     record_refusal, tree_sum, wire_links, wired_neighbor)
from ..system.layouts import (BUCKETS, HIST_BASE, MAX_LOCAL_PORTS, MAX_PACKET_FLITS,
                              STATS, TIME_BITS, latency_bucket_hw, node_row_layout, row_layout)
from .node import ADAPTIVE_ESCAPE_VCS, NetworkNode, node_stats

__all__ = ["NetworkSystem", "network_system_signature", "PHASES", "parse_dims", "face_ports",
           "wired_neighbor", "readout_beats", "ocs_layout"]

#: The phases of a run, by their code on ``phase``.
PHASES = ("config", "run", "drain", "readout", "done")


def readout_beats(n_nodes, routing="dor", injection_queues=None):
    """The most words on ``stats``: each node's statistics (``node_stats(routing,
    injection_queues)``), then the histogram summed over the nodes, up to the bin of the
    largest ``latency_max``."""
    return n_nodes * len(node_stats(routing, injection_queues)) + BUCKETS


def network_system_signature(*, dims="4x4", vcs=2, buffer_flits=8, link_latency=2,
                             local_ports=1, source_queue=64, reconfig_cycles=2,
                             routing="dor"):
    """The ports of a :class:`NetworkSystem` with these parameters (its docstring), checked
    as it checks them, without building one: a runner reads them to check a run.
    ``buffer_flits``, ``link_latency`` and ``source_queue`` are the nodes' (checked when
    they are built) and do not change the ports."""
    dims = parse_dims(dims)
    n = math.prod(dims)
    check_int("vcs", vcs, least=2, most=MAX_VCS)
    check_int("local_ports", local_ports, least=1, most=MAX_LOCAL_PORTS)
    check_int("reconfig_cycles", reconfig_cycles, least=0)
    if routing not in ROUTINGS:
        raise ValueError(f"routing must be one of {', '.join(map(repr, ROUTINGS))}, "
                         f"not {routing!r}")
    if routing == "adaptive" and vcs <= ADAPTIVE_ESCAPE_VCS:
        raise ValueError(f"routing='adaptive' needs vcs above {ADAPTIVE_ESCAPE_VCS} (the "
                         f"escape VCs), not vcs={vcs}")
    most = max(len(p) for p in face_ports(dims))
    return wiring.Signature({
        "tables": In(stream.Signature(row_layout(n, len(dims), routing))),
        "ocs": In(stream.Signature(ocs_layout(dims))),
        "stats": Out(stream.Signature(32)),
        "alive": In(n), "mode": In(2), "threshold": In(GAP_BITS + 1),
        "stall": In(GAP_BITS + 1),
        "packet_flits": In(range(MAX_PACKET_FLITS + 1)), "message_packets": In(16),
        "corrupt_every": In(16), "malformed_every": In(16),
        "cycles": In(32), "warmup": In(32), "watchdog": In(32), "fault_at": In(32),
        "finished": Out(1), "busy": Out(1), "hung": Out(1), "config_error": Out(1),
        "phase": Out(3), "hang_phase": Out(3), "outstanding": Out(32),
        "run_cycles": Out(32), "drain_cycles": Out(32),
        "ocs_status": Out(data.StructLayout({"axis": 2,
                                             "status": status_layout(most)})),
    })


class NetworkSystem(wiring.Component):
    """A network of :class:`~hdl.testbench.node.NetworkNode` s: routers, links, traffic
    generators and sinks, joined into any topology ``golden.topology`` makes of ``dims``.

    Links: port ``+a`` of a chip joins port ``-a`` of the chip one step along axis a. Inside
    the torus (not on a face) the link is wired, and lit while both ends' ``lit`` bits
    (their settings) say so. On the faces, every ``+a`` and ``-a`` port is a port of axis
    a's :class:`~hdl.ocs.OpticalCircuitSwitch` (``face_ports``), whose map, loaded at run
    time, closes the rings: a regular torus, a twisted one (wrap links shifted), a mesh
    (dark) or a torus with failed chips (their links dark) are the same RTL. A link's
    latency is in its sender's node; the OCS adds none.

    A run, in phases (``PHASES``):

    1. ``config``: ``tables`` takes one row per destination r (``layouts.row_layout``):
       every node's routing-table entry for r and hop count from r, and node r's settings;
       ``ocs`` takes each OCS's map, entry by entry, then a commit (``hdl.ocs.config``;
       nothing moves yet, so the OCS's drain is immediate). When all ``n_nodes`` rows are
       in and every OCS reports ``ok``, the run starts; if an OCS refuses its map,
       ``config_error`` is set and the run skips to the read-out.
    2. ``run``, ``cycles`` cycles: generators create traffic; the measurement window is
       open from cycle ``warmup`` on. ``now`` counts from 0 at the start of this phase.
    3. ``drain``: creation stops; the phase ends when every generator's queue is empty and
       every packet injected has been ejected or dropped (``outstanding`` 0).
    4. ``readout``: ``stats`` sends every node's statistics, then the histogram
       (``readout_beats``).
    5. ``done``: ``finished``.

    Forward progress: in ``run`` and ``drain``, while packets are outstanding or queued,
    a cycle in which no flit moves anywhere counts towards ``watchdog``; any move restarts
    the count. When it reaches ``watchdog`` the run is ``hung``: it goes to the read-out,
    with ``hang_phase`` and the statistics telling what it was waiting on.

    Parameters
    ----------
    dims : str or tuple
        ``"4x4"``, ``"4x4x8"`` or a tuple: 2 or 3 axes, 2 to 256 nodes.
    vcs, buffer_flits, link_latency, local_ports, source_queue, routing, escape_bias, speedup,
    switching, injection_queues
        Of every node (:class:`~hdl.testbench.node.NetworkNode`); ``escape_bias``,
        ``switching`` and ``injection_queues`` None and ``speedup`` 1 (the defaults) leave
        the node's defaults and the node's parameters as they were.
    reconfig_cycles : int
        Of every OCS.

    Ports
    -----
    tables : In(stream.Signature(row_layout(n_nodes, len(dims), routing)))
        ``n_nodes`` rows, in destination order; always ready.
    ocs : In(stream.Signature(ocs_layout(dims)))
    stats : Out(stream.Signature(32))
    alive : In(n_nodes)
        Bit d: node d is alive (its generators may send to it).
    mode, threshold, packet_flits, message_packets, corrupt_every, malformed_every : In
        The traffic (:class:`~hdl.testbench.generator.TrafficGenerator`).
    stall : In(17)
        The link stall knob: each torus output of each node is held (sends nothing) in a
        seeded random fraction ``stall / 2**16`` of the cycles (``NetworkNode``); 0
        never.
    cycles, warmup, watchdog : In(32)
    fault_at : In(32)
        A link fault: from cycle ``fault_at`` of the run (``now``) to the end, every
        node's torus ports that its settings mark ``down`` are down (``NetworkNode.fault``):
        a link taken down mid-run. 0: none.
    finished : Out(1)
        The read-out is over.
    busy : Out(1)
        In ``run`` or ``drain``: the run makes progress of its own (the harness's watchdog
        is held off; this top's own watches the flits).
    hung, config_error : Out(1)
    phase, hang_phase : Out(3)
    outstanding : Out(32)
        Packets injected and neither ejected nor dropped.
    run_cycles, drain_cycles : Out(32)
    ocs_status : Out(StructLayout(axis, status))
        The axis and status (``hdl.ocs.status_layout``) of the OCS that refused its map
        (the lowest axis if several did); zero if none did.
    """

    def __init__(self, *, dims="4x4", vcs=2, buffer_flits=8, link_latency=2, local_ports=1,
                 source_queue=64, reconfig_cycles=2, routing="dor", escape_bias=None,
                 speedup=1, switching=None, injection_queues=None):
        signature = network_system_signature(dims=dims, vcs=vcs, local_ports=local_ports,
                                             reconfig_cycles=reconfig_cycles, routing=routing)
        self.routing, self.injection_queues = routing, injection_queues
        self.dims = parse_dims(dims)
        self.n_nodes = n = math.prod(self.dims)
        self.node_params = dict(dims=len(self.dims), vcs=vcs, buffer_flits=buffer_flits,
                                link_latency=link_latency, n_nodes=n,
                                local_ports=local_ports, source_queue=source_queue,
                                **({"routing": routing} if routing != "dor" else {}),
                                **({"escape_bias": escape_bias}
                                   if escape_bias is not None else {}),
                                **({"speedup": speedup} if speedup != 1 else {}),
                                **({"switching": switching} if switching is not None else {}),
                                **({"injection_queues": injection_queues}
                                   if injection_queues is not None else {}))
        self.vcs, self.reconfig_cycles = vcs, reconfig_cycles
        self.faces = face_ports(self.dims)
        super().__init__(signature)

    def make_node(self, chip):
        """Node ``chip``'s component (an export replaces it by an instance of one module)."""
        return NetworkNode(**self.node_params)

    def elaborate(self, platform):
        m = Module()
        n, dims = self.n_nodes, self.dims
        nodes = [self.make_node(c) for c in range(n)]
        phase = Signal(range(len(PHASES)))
        code = {name: i for i, name in enumerate(PHASES)}
        in_phase = {name: phase == i for name, i in code.items()}
        now = Signal(32)
        m.d.comb += self.phase.eq(phase)

        # Configuration rows, to every node.
        rows, take_row = config_rows(m, self.tables, n, configuring=in_phase["config"])
        row = self.tables.payload

        traffic = {name: getattr(self, name) for name in
                   ("mode", "threshold", "stall", "packet_flits", "message_packets",
                    "alive", "corrupt_every", "malformed_every")}
        window = Signal()
        fault = Signal()
        m.d.comb += fault.eq((in_phase["run"] | in_phase["drain"]) & self.fault_at.any()
                             & (now >= self.fault_at))
        for c, node in enumerate(nodes):
            m.submodules[f"node{c}"] = node
            config = Signal(node_row_layout(len(dims), self.routing),
                            name=f"config{c}")
            m.d.comb += [config.row.eq(rows), config.entry.eq(row.entries[c]),
                         config.hops.eq(row.hops[c]), config.node.eq(row.node),
                         node.setup_valid.eq(take_row), node.setup.eq(config),
                         node.node.eq(c), node.now.eq(now), node.window.eq(window),
                         node.go.eq(in_phase["run"] | in_phase["drain"]),
                         node.fault.eq(fault),
                         node.create.eq(in_phase["run"])]
            for name, value in traffic.items():
                m.d.comb += getattr(node.traffic, name).eq(value)

        wire_links(m, dims, nodes)
        switches = ocs_switches(m, self.faces, nodes, config=self.ocs, vcs=self.vcs,
                                reconfig_cycles=self.reconfig_cycles,
                                configuring=in_phase["config"])

        # Forward progress and the packets in flight.
        moved = Cat(node.moved for node in nodes).any()
        pending = Cat(node.pending for node in nodes).any()
        m.d.sync += self.outstanding.eq(self.outstanding + tree_sum(x.injected for x in nodes)
                                        - tree_sum(x.arrived for x in nodes)
                                        - tree_sum(x.drops for x in nodes))
        quiet = Signal(32)
        waiting = (self.outstanding != 0) | pending
        expired = (self.watchdog != 0) & (quiet + 1 >= self.watchdog) & ~moved & waiting
        with m.If(moved | ~waiting | ~(in_phase["run"] | in_phase["drain"])):
            m.d.sync += quiet.eq(0)
        with m.Else():
            m.d.sync += quiet.eq(quiet + 1)

        # Read-out: each node's statistics, then the histogram summed over the nodes, up to
        # the bin of the largest latency (the rest are empty).
        chip = Signal(range(n + 1))
        n_stats = len(node_stats(self.routing, self.injection_queues))
        addr = Signal(range(max(n_stats, BUCKETS)))
        in_histogram = Signal()
        longest = Signal(32)                   # the largest latency_max read so far
        last_bin = latency_bucket_hw(m, longest[:TIME_BITS])
        one = Array(node.stat_data for node in nodes)[chip[:max(1, (n - 1).bit_length())]]
        total = tree_sum(node.stat_data for node in nodes)[:32]
        for node in nodes:
            m.d.comb += node.stat_addr.eq(Mux(in_histogram, HIST_BASE + addr, addr))
        m.d.comb += [self.stats.valid.eq(in_phase["readout"]),
                     self.stats.payload.eq(Mux(in_histogram, total, one))]
        read_last = Signal()
        m.d.comb += read_last.eq(self.stats.valid & self.stats.ready & in_histogram
                                 & (addr == last_bin))
        with m.If(self.stats.valid & self.stats.ready):
            m.d.sync += addr.eq(addr + 1)
            with m.If(~in_histogram):
                with m.If((addr == STATS.index("latency_max")) & (one > longest)):
                    m.d.sync += longest.eq(one)
                with m.If(addr == n_stats - 1):
                    m.d.sync += [addr.eq(0), chip.eq(chip + 1)]
                    with m.If(chip == n - 1):
                        m.d.sync += in_histogram.eq(1)

        status_ok = Cat(s.status.code == 1 for s in switches).all()
        refused = record_refusal(m, self.faces, switches, status=self.ocs_status,
                                 config_error=self.config_error)

        def hang():
            m.d.sync += [self.hung.eq(1), self.hang_phase.eq(phase), phase.eq(code["readout"])]

        with m.Switch(phase):
            with m.Case(code["config"]):
                with m.If(refused.any()):
                    m.d.sync += [self.config_error.eq(1), phase.eq(code["readout"])]
                with m.Elif((rows == n) & status_ok & ~Cat(s.busy for s in switches).any()):
                    m.d.sync += [phase.eq(code["run"]), now.eq(0)]
            with m.Case(code["run"]):
                m.d.sync += [now.eq(now + 1), self.run_cycles.eq(self.run_cycles + 1)]
                m.d.comb += window.eq(now >= self.warmup)
                with m.If(expired):
                    hang()
                with m.Elif(now + 1 >= self.cycles):
                    m.d.sync += phase.eq(code["drain"])
            with m.Case(code["drain"]):
                m.d.sync += [now.eq(now + 1), self.drain_cycles.eq(self.drain_cycles + 1)]
                with m.If(expired):
                    hang()
                with m.Elif((self.outstanding == 0) & ~pending):
                    m.d.sync += phase.eq(code["readout"])
            with m.Case(code["readout"]):
                with m.If(read_last):
                    m.d.sync += phase.eq(code["done"])
        m.d.comb += [self.finished.eq(in_phase["done"]),
                     self.busy.eq(in_phase["run"] | in_phase["drain"])]
        return m
