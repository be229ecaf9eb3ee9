"""Functional coverage of the multi-chip embedding step (cocotb-coverage), sampled per case
from what it ran (a step's configuration is its stimulus; every output, the whole table
and the state are compared word for word).

Items, named ``system_embedding.*``:

* ``topology``: :data:`TOPOLOGIES` (the four build shapes, and ``2x2 failed``): 5 bins.
* ``pooling_x_weighted``: the combiner (sum, mean, sqrtn) x weighted or not: 6 bins
  (not named ``combiner``: cocotb-coverage's merge takes every XML element whose name holds
  "bin" for a bin).
* ``backward``: forward only, or ``sgd``/``adagrad``/``rowwise_adagrad`` in mode
  ``exact``/``prereduced``
  (:data:`.stimulus.BACKWARDS`): 7 bins.
* ``alpha``: the ids' Zipf exponent (:data:`.stimulus.ALPHAS`): 3 bins.
* ``rows`` and ``width``: the table's size classes: 3 bins each.
* ``capacity``: none, tight (passes) or overflow (raised before anything ran): 3 bins.
* ``edge``: :data:`.stimulus.EDGES`: 4 bins.
* ``numerics``: tpu, ieee.
* ``failed_chip``: which chip of the 2x2 was failed (0 to 3).
* ``hbm``: the build's HBM latency, ``fixed`` or with ``jitter`` (:data:`.stimulus.JITTER`).
* ``router``: the build's routers (:data:`.stimulus.ROUTERS`): dimension order, adaptive,
  or adaptive with an input speed-up (:data:`ROUTER_BINS`).
"""

from cocotb_coverage.coverage import CoverCross, CoverPoint, coverage_section

from golden.formats import NUMERICS
from golden.sparsecore import COMBINERS

from .stimulus import ALPHAS, BACKWARDS, CAPACITIES, EDGES, ROW_CLASSES, SHAPES, WIDTHS, Build

__all__ = ["TOPOLOGIES", "HBM_LATENCIES", "ROUTER_BINS", "sampler", "topology_bin"]

#: HBM latency bins: a build's fixed latency, or with jitter.
HBM_LATENCIES = ("fixed", "jitter")
#: Router bins: the ``Build.router`` of each shape's build (:data:`.stimulus.ROUTERS`).
ROUTER_BINS = tuple(dict.fromkeys(Build(name, "tpu").router for name, _, _ in SHAPES))
#: Topology bins.
TOPOLOGIES = (*(name for name, _, _ in SHAPES), "2x2 failed")


def topology_bin(shape, failed):
    """The :data:`TOPOLOGIES` bin of a case."""
    return f"{shape} failed" if failed is not None else shape


def _field(name):
    return lambda sample: sample[name]


def sampler():
    """A fresh model (after ``coverage_db.clear()``); returns ``sample(dict)`` taking a
    case's ``topology``, ``combiner``, ``weighted``, ``backward``, ``alpha``, ``rows``,
    ``width``, ``capacity``, ``edge``, ``numerics``, ``failed``, ``hbm`` and ``router``."""
    @coverage_section(
        CoverPoint("system_embedding.topology", xf=_field("topology"), bins=list(TOPOLOGIES)),
        CoverPoint("system_embedding.pooling", xf=_field("combiner"), bins=list(COMBINERS)),
        CoverPoint("system_embedding.weighted", xf=_field("weighted"), bins=[False, True]),
        CoverCross("system_embedding.pooling_x_weighted",
                   items=["system_embedding.pooling", "system_embedding.weighted"]),
        CoverPoint("system_embedding.backward", xf=_field("backward"), bins=list(BACKWARDS)),
        CoverPoint("system_embedding.alpha", xf=_field("alpha"), bins=list(ALPHAS)),
        CoverPoint("system_embedding.rows", xf=_field("rows"), bins=list(ROW_CLASSES)),
        CoverPoint("system_embedding.width", xf=_field("width"), bins=list(WIDTHS)),
        CoverPoint("system_embedding.capacity", xf=_field("capacity"), bins=list(CAPACITIES)),
        CoverPoint("system_embedding.edge", xf=_field("edge"), bins=list(EDGES)),
        CoverPoint("system_embedding.numerics", xf=_field("numerics"), bins=list(NUMERICS)),
        CoverPoint("system_embedding.failed_chip", xf=_field("failed"), bins=[0, 1, 2, 3]),
        CoverPoint("system_embedding.hbm", xf=_field("hbm"), bins=list(HBM_LATENCIES)),
        CoverPoint("system_embedding.router", xf=_field("router"), bins=list(ROUTER_BINS)))
    def sample(case):
        pass

    return sample
