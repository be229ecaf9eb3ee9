"""Functional coverage of the MXU (cocotb-coverage), for one array shape.

Items, named ``mxu.array_<rows>x<cols>.*``:

* ``numerics``; ``k_tiling`` and ``n_tiling``: K against ``rows`` and N
  against ``cols`` (smaller, equal, a multiple, ragged);
* ``acc``: where starting partial sums come from (none, the user, a chained
  K-tile, both); ``transpose``: weights loaded normally or transposed;
* ``swap``: a new tile's first LHS row went in right after the previous
  tile's last row (back to back) or after a bubble;
* ``backpressure``: the longest wait of a result beat (none, shorter than
  the result FIFO, or long enough to fill it and stall the array);
* ``special_x_row``: each special kind (zero, subnormal, inf, NaN, largest
  finite) reaching each PE row, through x or w.
"""

import numpy as np
from cocotb_coverage.coverage import CoverCross, CoverPoint, coverage_section

from golden.formats import BF16, OperandClass, classify

__all__ = ["SPECIAL_KINDS", "special_samples", "sampler", "tiling"]

SPECIAL_KINDS = ["zero", "subnormal", "inf", "nan", "max-finite"]
_KIND_OF_CLASS = {OperandClass.ZERO: "zero", OperandClass.SUBNORMAL: "subnormal",
                  OperandClass.INF: "inf", OperandClass.NAN: "nan"}


def tiling(size, tile):
    if size < tile:
        return "smaller"
    if size == tile:
        return "equal"
    return "multiple" if size % tile == 0 else "ragged"


def special_samples(x_bits, w_bits, rows):
    """The (PE row, special kind) pairs that x [M, K] and w [K, N] send into the array."""
    found = set()
    for bits, k_axis in ((x_bits, 1), (w_bits, 0)):
        codes = classify(bits, BF16)
        biggest = (bits & 0x7FFF) == 0x7F7F
        for k in range(bits.shape[k_axis]):
            lane_codes = np.take(codes, k, axis=k_axis)
            row = k % rows
            for code in np.unique(lane_codes):
                if int(code) in _KIND_OF_CLASS:
                    found.add((row, _KIND_OF_CLASS[int(code)]))
            if np.take(biggest, k, axis=k_axis).any():
                found.add((row, "max-finite"))
    return sorted(found)


def sampler(rows, cols):
    """The model for a ``rows x cols`` array; returns (sample_scenario, sample_special).

    ``sample_scenario((numerics, k_tiling, n_tiling, acc, transpose, swap, backpressure))``
    takes one tuple per scenario (``swap`` may be None: a single tile has no
    boundary); ``sample_special((row, kind))`` one per pair from :func:`special_samples`.
    """
    name = f"mxu.array_{rows}x{cols}"   # XML tags must not start with a digit
    tilings = ["smaller", "equal", "multiple", "ragged"]
    points = [
        CoverPoint(f"{name}.numerics", xf=lambda s: s[0], bins=["tpu", "ieee"]),
        CoverPoint(f"{name}.k_tiling", xf=lambda s: s[1], bins=tilings),
        CoverPoint(f"{name}.n_tiling", xf=lambda s: s[2], bins=tilings),
        CoverPoint(f"{name}.acc", xf=lambda s: s[3],
                   bins=["none", "user", "chained", "user+chained"]),
        CoverPoint(f"{name}.transpose", xf=lambda s: s[4],
                   bins=["normal", "transposed"] if rows == cols else ["normal"]),
        CoverPoint(f"{name}.swap", xf=lambda s: s[5], bins=["back-to-back", "after-bubble"]),
        CoverPoint(f"{name}.backpressure", xf=lambda s: s[6],
                   bins=["none", "short", "fills-fifo"]),
    ]

    @coverage_section(*points)
    def sample_scenario(sample):
        pass

    @coverage_section(
        CoverPoint(f"{name}.special_row", xf=lambda s: s[0], bins=list(range(rows))),
        CoverPoint(f"{name}.special_kind", xf=lambda s: s[1], bins=SPECIAL_KINDS),
        CoverCross(f"{name}.special_x_row", items=[f"{name}.special_row",
                                                   f"{name}.special_kind"]))
    def sample_special(sample):
        pass

    return sample_scenario, sample_special
