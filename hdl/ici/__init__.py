"""ICI (SPEC section 4.4): the router, its links and a network of routers joined by links.

A :class:`Router` has ``2*D`` torus ports with credit-based :class:`LinkSignature` links
plus injection and ejection streams; :class:`Link` models a link's latency;
:class:`Network` joins routers with links as a neighbour map says. The routing-table
format and the flit layouts are in :mod:`hdl.ici.layouts`, shared with ``golden.ici``
and ``golden.routing``. Inside the router: :class:`~hdl.ici.input_port.InputPort` (VC
buffers, framing, route lookup, drops), :class:`~hdl.ici.allocator.Allocator` (VC and
switch allocation, credits) and :class:`~hdl.ici.arbiter.RoundRobin`.
"""

from .layouts import (CHIP_BITS, MAX_VCS, encode_route_entry, flit_layout,
                      route_entry_layout, route_word_layout, table_entries,
                      table_write_layout)
from .link import Link, LinkSignature
from .network import Network
from .router import Router

__all__ = [
    "Router", "Link", "LinkSignature", "Network", "CHIP_BITS", "MAX_VCS", "flit_layout",
    "route_word_layout", "route_entry_layout", "table_write_layout", "encode_route_entry",
    "table_entries",
]
