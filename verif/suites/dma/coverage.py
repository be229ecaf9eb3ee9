"""Functional coverage of the DMA (cocotb-coverage).

Items, named ``dma.*``. Per descriptor:

* ``direction``, ``dims``, ``size``, ``stride``, ``legality`` and ``overlap``
  (source and destination extents intersecting in one space), as
  :mod:`.stimulus` defines them;
* ``src_alignment``/``dst_alignment``: base on a line (or HBM word group)
  boundary or not;
* crosses: direction x size, direction x stride, dims x stride, legality x
  direction.

Per batch: ``backpressure`` (descriptor gaps and error-stream stalls, or
none), ``jitter`` (HBM latency jitter or fixed), ``queue`` (a batch longer
than the DMA's ``outstanding`` descriptors, so the queue fills, or not).
"""

from cocotb_coverage.coverage import CoverCross, CoverPoint, coverage_section

from .stimulus import DIRECTIONS, SIZES, STRIDES

__all__ = ["sampler", "alignment"]

_LEGALITY = ["ok", "count", "flag", "src_range", "dst_range"]


def alignment(base, group):
    return "aligned" if base % group == 0 else "misaligned"


def _field(index):
    return lambda sample: sample[index]


def sampler():
    """A fresh model (after ``coverage_db.clear()``); returns (sample_descriptor,
    sample_batch).

    ``sample_descriptor((direction, dims, size, stride, legality, overlap, src_alignment,
    dst_alignment))`` per descriptor, ``sample_batch((backpressure, jitter, queue))`` per
    batch.
    """
    @coverage_section(
        CoverPoint("dma.direction", xf=_field(0), bins=list(DIRECTIONS)),
        CoverPoint("dma.dims", xf=_field(1), bins=[1, 2, 3]),
        CoverPoint("dma.size", xf=_field(2), bins=list(SIZES)),
        CoverPoint("dma.stride", xf=_field(3), bins=list(STRIDES)),
        CoverPoint("dma.legality", xf=_field(4), bins=_LEGALITY),
        CoverPoint("dma.overlap", xf=_field(5), bins=[False, True]),
        CoverPoint("dma.src_alignment", xf=_field(6), bins=["aligned", "misaligned"]),
        CoverPoint("dma.dst_alignment", xf=_field(7), bins=["aligned", "misaligned"]),
        CoverCross("dma.direction_x_size", items=["dma.direction", "dma.size"]),
        CoverCross("dma.direction_x_stride", items=["dma.direction", "dma.stride"]),
        CoverCross("dma.dims_x_stride", items=["dma.dims", "dma.stride"]),
        CoverCross("dma.legality_x_direction", items=["dma.legality", "dma.direction"]))
    def sample_descriptor(sample):
        pass

    @coverage_section(
        CoverPoint("dma.backpressure", xf=_field(0), bins=["none", "gaps"]),
        CoverPoint("dma.jitter", xf=_field(1), bins=["fixed", "jitter"]),
        CoverPoint("dma.queue", xf=_field(2), bins=["within", "fills"]))
    def sample_batch(sample):
        pass

    return sample_descriptor, sample_batch
