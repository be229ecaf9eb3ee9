"""A regression case that runs whole: stimulus in, results out, no program per cycle.

Suites whose checks need no agent acting on every cycle (a DMA batch, a
network sweep) yield these from ``runs`` instead of a cocotb program, and
the regression worker calls them on its simulator.
"""

from dataclasses import dataclass
from typing import Callable

__all__ = ["WholeCase"]


@dataclass(frozen=True)
class WholeCase:
    """One named case: ``check(backend=, coverage=, waves=)`` runs it and returns a record
    with ``checked``, ``mismatches``, ``first_mismatch`` and ``cycles``.

    ``coverage`` is the path its functional coverage XML goes to; ``waves`` a waveform
    path or None.
    """
    name: str
    check: Callable
