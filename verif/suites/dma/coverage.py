"""Functional coverage of the DMA (cocotb-coverage).

Items, named ``dma.*``. Per descriptor:

* ``direction`` (local, or a remote push looped back), ``dims``, ``size``,
  ``stride``, ``legality`` (the DMA's verdict: accepted, or the rejection
  reason), ``overlap`` (source and destination extents intersecting in one
  space), ``bus_error`` (an accepted descriptor reading from an injected
  error range, writing into one, or neither) and ``sent`` (a push naming a
  sent flag or not; local descriptors have none), as :mod:`.stimulus`
  defines them;
* ``src_alignment``/``dst_alignment``: base on a line (or HBM word group)
  boundary or not;
* crosses: direction x size, direction x stride, dims x stride, legality x
  direction, bus_error x direction (less the combinations that cannot be:
  a large push, a push-only rejection of a local descriptor, a fault on a
  side that is not HBM).

Per batch: ``backpressure`` (descriptor gaps and error-stream stalls, or
none), ``jitter`` (HBM latency jitter or fixed), ``queue`` (a batch longer
than the DMA's ``outstanding`` descriptors, so the queue fills, or not),
``faults`` (bus errors reported in the batch, or none).
"""

from cocotb_coverage.coverage import CoverCross, CoverPoint, coverage_section

from .stimulus import DIRECTIONS, FAULTS, PUSH_SIZES, REMOTE, SENT, SIZES, STRIDES, VERDICTS

__all__ = ["sampler", "alignment", "SAMPLE_FIELDS"]

#: The fields of a descriptor sample, in order.
SAMPLE_FIELDS = ("direction", "dims", "size", "stride", "legality", "overlap", "src_alignment",
                 "dst_alignment", "bus_error", "sent")

_LOCAL = [d for d in DIRECTIONS if d not in REMOTE]
#: Cross bins that cannot be hit: push-only rejections of local descriptors, reads that
#: fault from VMEM, writes that fault into VMEM.
_NO_LEGALITY = [(reason, d) for reason in ("chip", "sent_flag") for d in _LOCAL]
_NO_FAULT = ([("read", d) for d in DIRECTIONS if not d.startswith("hbm")]
             + [("write", d) for d in DIRECTIONS if not d.endswith("hbm")])
#: Pushes are at most medium (``stimulus.PUSH_SIZES``).
_NO_SIZE = [(d, size) for d in REMOTE for size in SIZES if size not in PUSH_SIZES]


def alignment(base, group):
    return "aligned" if base % group == 0 else "misaligned"


def _field(name):
    index = SAMPLE_FIELDS.index(name)
    return lambda sample: sample[index]


def _batch_field(index):
    return lambda sample: sample[index]


def sampler():
    """A fresh model (after ``coverage_db.clear()``); returns (sample_descriptor,
    sample_batch).

    ``sample_descriptor(sample)`` per descriptor, ``sample`` a tuple of
    :data:`SAMPLE_FIELDS`; ``sample_batch((backpressure, jitter, queue, faults))`` per
    batch.
    """
    @coverage_section(
        CoverPoint("dma.direction", xf=_field("direction"), bins=list(DIRECTIONS)),
        CoverPoint("dma.dims", xf=_field("dims"), bins=[1, 2, 3]),
        CoverPoint("dma.size", xf=_field("size"), bins=list(SIZES)),
        CoverPoint("dma.stride", xf=_field("stride"), bins=list(STRIDES)),
        CoverPoint("dma.legality", xf=_field("legality"), bins=list(VERDICTS)),
        CoverPoint("dma.overlap", xf=_field("overlap"), bins=[False, True]),
        CoverPoint("dma.src_alignment", xf=_field("src_alignment"),
                   bins=["aligned", "misaligned"]),
        CoverPoint("dma.dst_alignment", xf=_field("dst_alignment"),
                   bins=["aligned", "misaligned"]),
        CoverPoint("dma.bus_error", xf=_field("bus_error"), bins=list(FAULTS)),
        CoverPoint("dma.sent", xf=_field("sent"), bins=list(SENT)),
        CoverCross("dma.direction_x_size", items=["dma.direction", "dma.size"],
                   ign_bins=_NO_SIZE),
        CoverCross("dma.direction_x_stride", items=["dma.direction", "dma.stride"]),
        CoverCross("dma.dims_x_stride", items=["dma.dims", "dma.stride"]),
        CoverCross("dma.legality_x_direction", items=["dma.legality", "dma.direction"],
                   ign_bins=_NO_LEGALITY),
        CoverCross("dma.bus_error_x_direction", items=["dma.bus_error", "dma.direction"],
                   ign_bins=_NO_FAULT))
    def sample_descriptor(sample):
        pass

    @coverage_section(
        CoverPoint("dma.backpressure", xf=_batch_field(0), bins=["none", "gaps"]),
        CoverPoint("dma.jitter", xf=_batch_field(1), bins=["fixed", "jitter"]),
        CoverPoint("dma.queue", xf=_batch_field(2), bins=["within", "fills"]),
        CoverPoint("dma.faults", xf=_batch_field(3), bins=["none", "reported"]))
    def sample_batch(sample):
        pass

    return sample_descriptor, sample_batch
