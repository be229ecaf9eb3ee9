"""The synthesizable test equipment, apart from the product's blocks: what a whole run puts
around a design so that no Python acts on every cycle.

- :class:`RunHarness` (:mod:`.run_harness`): a design between stream players and
  recorders (:mod:`.stream_endpoints`), with a watchdog; every block's whole run.
- :class:`NetworkSystem` (:mod:`.network_system`): the network testbench, per node
  (:class:`NetworkNode`) a router, a seeded :class:`TrafficGenerator` and a
  :class:`TrafficSink` that checks every packet and measures latency and throughput.

Everything here synthesizes, so the same tops can be built for an FPGA.
"""

from .generator import TrafficGenerator
from .network_system import PHASES, NetworkSystem, network_system_signature, readout_beats
from .node import NetworkNode, node_signature
from .run_harness import RunHarness
from .sink import TrafficSink
from .stream_endpoints import StreamPlayer, StreamRecorder

__all__ = ["RunHarness", "StreamPlayer", "StreamRecorder", "NetworkSystem", "NetworkNode",
           "TrafficGenerator", "TrafficSink", "PHASES", "readout_beats", "node_signature",
           "network_system_signature"]
