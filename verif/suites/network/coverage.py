"""Functional coverage of the ICI network (cocotb-coverage), observed in the hardware.

The bins of the issue are sampled from what the routers recorded and the network top
read out at the end of each run (``hdl.system.layouts.STATS`` from ``turns_lo`` on), not
from the stimulus:

* ``network.turn``: every switch turn that dimension-order routing can take, by port
  name: ``inject to P`` (any torus port), ``from P to eject``, ``from P to Q`` going
  straight on (Q the opposite port of P's axis) or turning to a later axis (x before y
  before z). 30 bins, 16 of them in 2-D. (Escape hops around a failed chip can take
  other turns; they are checked, not binned.) "from -x" is the port a flit arrived on:
  it travels in +x.
* ``network.link_vc``: a flit left torus port P on VC v: 6 ports x 4 VCs (VC 3 stands
  for VCs 3 and up: ``hdl.system.layouts.vc_bit``).
* ``network.dateline``: a header took the dateline link out of port P, on VC 1 (class 0)
  or VC 3 (class 1, with 4 VCs): 12 bins.
* ``network.credit_empty_port`` and ``network.credit_empty_vc``: a flit at the head of a
  buffer waited for an output VC that had no credit left: per port, and per VC.
* ``network.stall``: the link stall knob held some link (``held``) or none (``none``),
  counted by the hardware.
* ``network.link_down``: in a run that took a link down, the routers at its ends gave
  packets up (``given_up``, their ``undeliverable`` count); in a run that took none,
  they gave none up (``up``).

Adaptive routing and injection queues (issue 44), from
``hdl.testbench.node.ADAPTIVE_STATS`` (what the routers observed: the adaptive choices on
adaptive builds, the injection queues on builds with them, dimension order's of seeds 3
and 4 among them):

* ``network.adaptive_hop``: a header left torus port P on an adaptive VC, P being its
  escape hop's port (``P, escape port``: the dimension-order direction, taken on an
  adaptive VC) or another minimal port (``P, other port``: the adaptive choice of another
  productive direction): 12 bins.
* ``network.fallback``: a header that arrived on an adaptive VC fell back to its escape
  hop (the escape VC of its next hop), out of port P: 6 bins.
* ``network.inject_queue``: per injection queue q (0 to 3; 3 only with 4 VCs):
  ``used`` (a header joined it), ``full`` (a header waited on the injection port because
  its queue was full) and ``passed`` (a flit of it crossed the switch while another
  queue's head was blocked: the head-of-line blocking one FIFO would have had): 12 bins.
* ``network.routing_inject_queue``: the same three events by the build's routing, any
  queue (``dor passed``: dimension order's queues passed a blocked head): 6 bins.

Per run, from the stimulus (what was asked for): ``network.topology`` (regular, twisted,
mesh, failed), ``network.dims`` (2, 3), ``network.traffic`` (the six patterns),
``network.vcs`` (2, 3, 4, 8), ``network.speedup`` (the routers' input speed-up, 1 and
2), ``network.flow_control`` (dimension order wormhole with one injection FIFO or with
injection queues, dimension order cut-through with queues, adaptive routing), and with
the build's routing ``network.routing_vcs`` (dor with 2 and 4 VCs, adaptive
with 3, 4 and 8), ``network.routing_topology`` (each routing on
each kind of topology) and ``network.routing_link_down`` (each routing with a link
taken down and its packets given up).

From the OCS reconfiguration case (:mod:`.ocs`), read from the OCS's own ``status``
register after each commit: ``network.ocs_commit``: ``ok`` (switched under traffic),
``timeout`` (a link that did not drain: refused, old map kept), and the refused maps
``self_loop``, ``asymmetric``, ``target_range`` and ``port_range``; and
``network.ocs_drain``: a commit during which an affected link still carried flits after
the OCS raised ``quiesce`` (``busy``), or whose affected links were already idle
(``idle``).
"""

from cocotb_coverage.coverage import CoverPoint, coverage_section

from golden.topology import PORT_NAMES
from sim.network import TRAFFIC

from .stimulus import DEAL, FLOW_CONTROLS, KINDS, ROUTINGS

__all__ = ["TURNS", "LINK_VCS", "DATELINES", "OCS_COMMITS", "OCS_DRAINS", "LINK_DOWN",
           "ADAPTIVE_HOPS", "FALLBACKS", "QUEUE_EVENTS", "INJECT_QUEUES",
           "ROUTING_INJECT_QUEUES", "ROUTING_VCS", "ROUTING_TOPOLOGIES", "ROUTING_LINK_DOWN",
           "turn_name", "Sampler"]


def _dor_turns():
    out = [f"inject to {p}" for p in PORT_NAMES]
    for axis in range(3):
        for sign in range(2):
            port = 2 * axis + sign
            out += [f"from {PORT_NAMES[port]} to eject",
                    f"from {PORT_NAMES[port]} to {PORT_NAMES[port ^ 1]}"]
            out += [f"from {PORT_NAMES[port]} to {PORT_NAMES[q]}"
                    for q in range(2 * axis + 2, 6)]
    return out


#: The turns of dimension-order routing (module docstring).
TURNS = tuple(_dor_turns())
LINK_VCS = tuple(f"{p} vc{v}" for p in PORT_NAMES for v in range(4))
DATELINES = tuple(f"{p} vc{v}" for p in PORT_NAMES for v in (1, 3))
OCS_COMMITS = ("ok", "timeout", "self_loop", "asymmetric", "target_range", "port_range")
OCS_DRAINS = ("busy", "idle")
LINK_DOWN = ("up", "given_up")
ADAPTIVE_HOPS = tuple(f"{p}, {which} port" for p in PORT_NAMES for which in ("escape", "other"))
FALLBACKS = PORT_NAMES
#: Injection queues: ``min(2*dims, vcs)`` of them, so 4 at most with 4 VCs.
QUEUE_EVENTS = ("used", "full", "passed")
INJECT_QUEUES = tuple(f"queue {q} {what}" for q in range(4) for what in QUEUE_EVENTS)
#: The same events by routing, whatever the queue: each routing's queues passed a blocked
#: head.
ROUTING_INJECT_QUEUES = tuple(f"{routing} {what}" for routing in ROUTINGS
                              for what in QUEUE_EVENTS)
ROUTING_VCS = tuple(sorted({f"{deal.routing} {deal.vcs}" for deal in DEAL},
                           key=lambda name: (ROUTINGS.index(name.split()[0]), name)))
ROUTING_TOPOLOGIES = tuple(f"{routing} {kind}" for routing in ROUTINGS for kind in KINDS)
ROUTING_LINK_DOWN = tuple(f"{routing} given_up" for routing in ROUTINGS)


def turn_name(i, o, n_ports):
    """The name of the turn from switch input ``i`` to output ``o`` of a router with
    ``n_ports`` torus ports (``i`` or ``o`` >= ``n_ports``: injection, ejection)."""
    source = "inject" if i >= n_ports else f"from {PORT_NAMES[i]}"
    return f"{source} to {'eject' if o >= n_ports else PORT_NAMES[o]}"


def _point(name, bins):
    return coverage_section(CoverPoint(name, xf=lambda value: value, bins=list(bins)))(
        lambda value: None)


class Sampler:
    """A fresh model (call after ``coverage_db.clear()``): one sampling function per
    item, each taking the bin's value."""

    def __init__(self):
        self.turn = _point("network.turn", TURNS)
        self.link_vc = _point("network.link_vc", LINK_VCS)
        self.dateline = _point("network.dateline", DATELINES)
        self.credit_empty_port = _point("network.credit_empty_port", PORT_NAMES)
        self.credit_empty_vc = _point("network.credit_empty_vc", range(4))
        self.stall = _point("network.stall", ("none", "held"))
        self.link_down = _point("network.link_down", LINK_DOWN)
        self.topology = _point("network.topology", KINDS)
        self.dims = _point("network.dims", (2, 3))
        self.traffic = _point("network.traffic", TRAFFIC)
        self.vcs = _point("network.vcs", sorted({deal.vcs for deal in DEAL}))
        self.speedup = _point("network.speedup", sorted({deal.speedup for deal in DEAL}))
        self.flow_control = _point("network.flow_control", FLOW_CONTROLS)
        self.adaptive_hop = _point("network.adaptive_hop", ADAPTIVE_HOPS)
        self.fallback = _point("network.fallback", FALLBACKS)
        self.inject_queue = _point("network.inject_queue", INJECT_QUEUES)
        self.routing_inject_queue = _point("network.routing_inject_queue",
                                           ROUTING_INJECT_QUEUES)
        self.routing_vcs = _point("network.routing_vcs", ROUTING_VCS)
        self.routing_topology = _point("network.routing_topology", ROUTING_TOPOLOGIES)
        self.routing_link_down = _point("network.routing_link_down", ROUTING_LINK_DOWN)
        self.ocs_commit = _point("network.ocs_commit", OCS_COMMITS)
        self.ocs_drain = _point("network.ocs_drain", OCS_DRAINS)

    def observed(self, per_node, n_ports, alive, routing):
        """Sample every live node's observation bitmaps (``NetworkStats.per_node``) of a
        build of ``routing`` (no default: the queue events are binned by it)."""
        for c in alive:
            turns = int(per_node["turns_lo"][c]) | int(per_node["turns_hi"][c]) << 32
            for bit in _bits(turns):
                self.turn(turn_name(bit // 8, bit % 8, n_ports))
            for bit in _bits(int(per_node["link_vcs"][c])):
                self.link_vc(f"{PORT_NAMES[bit // 4]} vc{bit % 4}")
            for bit in _bits(int(per_node["datelines"][c])):
                self.dateline(f"{PORT_NAMES[bit // 4]} vc{bit % 4}")
            for bit in _bits(int(per_node["starved"][c])):
                self.credit_empty_port(PORT_NAMES[bit // 4])
                self.credit_empty_vc(bit % 4)
            for bit in _bits(int(per_node["adaptive"][c]) if "adaptive" in per_node else 0):
                kind, port = divmod(bit, 8)
                if kind < 2:
                    self.adaptive_hop(f"{PORT_NAMES[port]}, {('escape', 'other')[kind]} port")
                else:
                    self.fallback(PORT_NAMES[port])
            queues = int(per_node["inject_queues"][c]) if "inject_queues" in per_node else 0
            for bit in _bits(queues):
                kind, queue = divmod(bit, 8)
                self.inject_queue(f"queue {queue} {QUEUE_EVENTS[kind]}")
                self.routing_inject_queue(f"{routing} {QUEUE_EVENTS[kind]}")


def _bits(word):
    return [b for b in range(word.bit_length()) if word >> b & 1]
