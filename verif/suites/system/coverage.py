"""Functional coverage of the multi-chip system's collectives (cocotb-coverage), sampled per
case from what it ran (the stimulus: a collective's configuration is its stimulus, and
each case is checked word for word).

Items, named ``system.*``:

* ``topology_x_kind``: :data:`TOPOLOGIES` (``2x2``, ``1x4``, ``2x2x2``, and ``2x2 failed``,
  a 2x2 torus with one chip failed) x the four collectives: 16 bins. The rare 4x4 seeds
  hit no bin of it (so that a handful of seeds can reach 100%).
* ``dtype_x_numerics``: float32 and int32 x the numerics modes: 4 bins.
* ``chunks``: 1, 2, 3.
* ``link``: each link parameter set of :data:`.stimulus.LINKS`.
* ``size``: the size class of :data:`.stimulus.SIZES` (one line, several, large).
* ``failed_chip``: which chip of a 2x2 torus was failed (0 to 3).
"""

from cocotb_coverage.coverage import CoverCross, CoverPoint, coverage_section

from golden.collectives import DTYPES, KINDS
from golden.formats import NUMERICS

from .stimulus import LINKS, SIZES

__all__ = ["TOPOLOGIES", "sampler", "topology_bin"]

#: Topology bins.
TOPOLOGIES = ("2x2", "1x4", "2x2x2", "2x2 failed")


def topology_bin(shape, failed):
    """The :data:`TOPOLOGIES` bin of a case (None for one outside them, such as 4x4)."""
    name = f"{shape} failed" if failed is not None else shape
    return name if name in TOPOLOGIES else None


def _field(name):
    return lambda sample: sample[name]


def sampler():
    """A fresh model (after ``coverage_db.clear()``); returns ``sample(dict)`` taking a
    case's ``topology`` (a :data:`TOPOLOGIES` bin or None), ``kind``, ``dtype``,
    ``numerics``, ``chunks``, ``link``, ``size`` and ``failed`` (chip id or None)."""
    @coverage_section(
        CoverPoint("system.topology", xf=_field("topology"), bins=list(TOPOLOGIES)),
        CoverPoint("system.kind", xf=_field("kind"), bins=list(KINDS)),
        CoverCross("system.topology_x_kind", items=["system.topology", "system.kind"]),
        CoverPoint("system.dtype", xf=_field("dtype"), bins=list(DTYPES)),
        CoverPoint("system.numerics", xf=_field("numerics"), bins=list(NUMERICS)),
        CoverCross("system.dtype_x_numerics", items=["system.dtype", "system.numerics"]),
        CoverPoint("system.chunks", xf=_field("chunks"), bins=[1, 2, 3]),
        CoverPoint("system.link", xf=_field("link"), bins=list(LINKS)),
        CoverPoint("system.size", xf=_field("size"), bins=list(SIZES)),
        CoverPoint("system.failed_chip", xf=_field("failed"), bins=[0, 1, 2, 3]))
    def sample(case):
        pass

    return sample
