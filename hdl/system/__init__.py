"""Network testbench tops (SPEC sections 4.4, 4.5): per node a router, a synthesizable
traffic generator and a sink; nodes joined by links and OCS crossbars into any topology of
``golden.topology``, with everything a measurement run needs in hardware.

:class:`NetworkSystem` is the top (a block for whole runs: ``sim.network``);
:class:`~hdl.system.node.NetworkNode` one node;
:class:`~hdl.system.generator.TrafficGenerator` and :class:`~hdl.system.sink.TrafficSink`
its traffic; :mod:`hdl.system.layouts` the probe-packet format, configuration layouts,
statistics and latency histogram they share.
"""

from .generator import TrafficGenerator
from .network_system import PHASES, NetworkSystem, face_ports, parse_dims, readout_beats, \
    wired_neighbor
from .node import NetworkNode, node_signature
from .sink import TrafficSink

__all__ = ["NetworkSystem", "NetworkNode", "TrafficGenerator", "TrafficSink", "PHASES",
           "face_ports", "wired_neighbor", "parse_dims", "readout_beats", "node_signature"]
