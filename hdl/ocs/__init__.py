"""OCS crossbar (SPEC section 4.5): the optical circuit switch that joins router links into
any topology ``golden.topology`` builds.

:class:`OpticalCircuitSwitch` switches generic links (:class:`OcsPortSignature`: a
flit forward, credits back) by a map loaded at run time through its configuration stream
(``hdl.ocs.config``); it drains the links a new map affects before switching them, or
refuses. :class:`MapCheck` is its partial-permutation check.
"""

from .config import (STATUSES, Status, config_beats, config_layout, entry_layout, port_bits,
                     status_layout)
from .crossbar import COUNTER_BITS, OpticalCircuitSwitch
from .link import OcsPortSignature
from .map_check import MapCheck

__all__ = [
    "OpticalCircuitSwitch", "MapCheck", "OcsPortSignature", "COUNTER_BITS", "Status",
    "STATUSES", "port_bits", "entry_layout", "config_layout", "status_layout",
    "config_beats",
]
