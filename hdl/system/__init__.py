"""System tops (SPEC sections 4.4, 4.5, 4.8): chips or network-testbench nodes joined by
links and OCS crossbars into any topology of ``golden.topology``.

:class:`ChipSystem` is the multi-chip system (a block for whole runs: ``sim.system``), of
:class:`~hdl.system.chip_node.ChipNode` s, each a TensorCore chip with its router.
:class:`hdl.testbench.NetworkSystem` is the network testbench (``sim.network``), test
equipment built on these tops' parts; :mod:`hdl.system.layouts` holds the probe-packet
format, configuration layouts, statistics and latency histogram they share, and
:mod:`hdl.system.fabric` the links and switches of both tops.
"""

from .chip_node import ChipNode, chip_node_signature
from .chip_system import SYSTEM_PHASES, ChipSystem, chip_system_signature
from .fabric import face_ports, parse_dims, wired_neighbor

__all__ = ["ChipSystem", "ChipNode", "SYSTEM_PHASES", "face_ports", "wired_neighbor",
           "parse_dims", "chip_node_signature", "chip_system_signature"]
