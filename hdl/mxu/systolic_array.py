"""The weight-stationary bf16 systolic array: rows of PEs between skew buffers."""

from amaranth.hdl import Cat, Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int
from .pe import (ADD_STAGES, MUL_STAGES, ProcessingElement, check_pe_params, product_latency,
                 weight_shape)
from .skew_buffer import SkewBuffer

__all__ = ["PERow", "SystolicArray", "check_array_params", "array_latency",
           "pe_row_signature"]


def pe_row_signature(cols, transposable, fold=1):
    """The ports of a :class:`PERow` of ``cols`` PEs, each folding ``fold`` columns."""
    ports = {
        "en": In(1), "x_in": In(16), "swap_in": In(1),
        "psum_in": In(data.ArrayLayout(32, cols)),
        "psum_out": Out(data.ArrayLayout(32, cols)),
        "load": In(1),
        "w_below": In(data.ArrayLayout(16, cols * fold)),
        "w_out": Out(data.ArrayLayout(16, cols * fold)),
    }
    if fold > 1:
        ports.update(phase_in=In(range(fold)))
    if transposable:
        ports.update(transpose=In(1), w_right=In(16))
    return wiring.Signature(ports)


def check_array_params(*, rows, cols, numerics, mul_stages, add_stages, transpose, fold=1):
    """Validate array parameters; return whether transposed loads are supported."""
    check_int("rows", rows, least=1)
    check_int("cols", cols, least=1)
    check_pe_params(numerics=numerics, mul_stages=mul_stages, add_stages=add_stages,
                    fold=fold)
    if cols % fold:
        raise ValueError(f"fold must divide cols = {cols}, not {fold}")
    if transpose is None:
        return rows == cols
    if transpose and rows != cols:
        raise ValueError(f"transposed weight loads need a square array, not {rows}x{cols}")
    return bool(transpose)


def array_latency(*, rows, cols, mul_stages, add_stages, fold=1):
    """Cycles from an LHS beat (one phase of a row) into the array to its results out."""
    return rows * add_stages + cols // fold - 1 + product_latency(mul_stages)


class PERow(wiring.Component):
    """``cols`` PEs side by side: x flows right, partial sums and weights pass through.

    Every row of an array is identical, so an export emits this module once
    and instantiates it ``rows`` times (see :meth:`make_pe` for the hook).

    With ``pe_params["fold"]`` F above 1 the row stands for ``cols * F`` columns
    of the tile: column ``f * cols + c`` is PE ``c``'s weight ``f``, so the row's
    weight ports, in column order, are dealt to the PEs that way, and a
    transposed load's left shift passes from PE 0's weight ``f + 1`` to the last
    PE's weight ``f``.

    Ports
    -----
    en : In(1)
    x_in, swap_in : In(16), In(1)
        Into the leftmost PE.
    phase_in : In(range(fold)), only when folded
        Into the leftmost PE, with ``x_in``.
    psum_in, psum_out : In/Out(ArrayLayout(32, cols))
        From the row above, to the row below.
    load : In(1)
    w_below : In(ArrayLayout(16, cols * fold))
        Shadow weights of the row below (or the weight beat, for the bottom row).
    w_out : Out(ArrayLayout(16, cols * fold))
        This row's shadow weights.
    transpose, w_right : In(1), In(16), only when transposable
        Transposed load: the shadow shifts left, ``w_right`` entering on the right.
    """

    def __init__(self, *, cols, pe_params):
        self.cols = cols
        self.pe_params = dict(pe_params)
        self.transposable = self.pe_params.get("transpose", True)
        self.fold = self.pe_params.get("fold", 1)
        super().__init__(pe_row_signature(cols, self.transposable, self.fold))

    def make_pe(self):
        """One PE of the row. Export overrides this to emit the PE module once."""
        return ProcessingElement(**self.pe_params)

    def elaborate(self, platform):
        m = Module()
        cols, fold = self.cols, self.fold
        pes = [self.make_pe() for _ in range(cols)]

        def weights(pe):
            # A PE's weights as a list, whether one bf16 or an array of them.
            return [pe] if fold == 1 else [pe[f] for f in range(fold)]

        for c, pe in enumerate(pes):
            m.submodules[f"pe{c}"] = pe
            m.d.comb += [
                pe.en.eq(self.en), pe.load.eq(self.load),
                pe.x_in.eq(self.x_in if c == 0 else pes[c - 1].x_out),
                pe.swap_in.eq(self.swap_in if c == 0 else pes[c - 1].swap_out),
                pe.psum_in.eq(self.psum_in[c]), self.psum_out[c].eq(pe.psum_out),
            ]
            for f, (below, out) in enumerate(zip(weights(pe.w_below), weights(pe.w_out))):
                m.d.comb += [below.eq(self.w_below[f * cols + c]),
                             self.w_out[f * cols + c].eq(out)]
            if fold > 1:
                m.d.comb += pe.phase_in.eq(self.phase_in if c == 0 else pes[c - 1].phase_out)
            if self.transposable:
                m.d.comb += pe.transpose.eq(self.transpose)
                if c < cols - 1:
                    m.d.comb += pe.w_right.eq(pes[c + 1].w_out)
                else:
                    # The tile's next column: PE 0's next weight, or what enters.
                    nexts = weights(pes[0].w_out)[1:] + [self.w_right]
                    for right, nxt in zip(weights(pe.w_right), nexts):
                        m.d.comb += right.eq(nxt)
        return m


class SystolicArray(wiring.Component):
    """A ``rows x cols`` weight-stationary array with internal skew and de-skew.

    Row ``r`` of the LHS word enters PE row ``r`` delayed by ``r * add_stages``
    cycles, and the starting partial sums enter column ``c`` delayed by
    ``c + 2 + mul_stages`` (the PE's product latency); column ``c``'s result
    is delayed by ``cols - 1 - c``. So a whole LHS row goes in on one cycle
    and its whole result row comes out ``latency`` cycles later, aligned.
    All registers share ``en``.

    With ``fold`` F above 1 the array has ``cols / F`` columns of PEs, each
    holding F weights of a row of the tile, and computes the tile's columns F
    cycles apart: a row goes in F times, as phases 0 to F - 1, and phase ``f``
    meets columns ``f * cols / F`` to ``(f + 1) * cols / F - 1``, taking their
    starting sums and giving their results. Each column still sums in k order,
    so the results are those of the unfolded array, at one row per F cycles.

    Parameters
    ----------
    rows, cols : int
        Tile shape: ``rows`` is the K depth of a weight tile, ``cols`` its N width.
    numerics, mul_stages, add_stages, transpose
        As for :class:`~hdl.mxu.pe.ProcessingElement`.
    fold : int
        Columns of the tile per PE, dividing ``cols`` (default 1).

    Ports
    -----
    en : In(1)
    lhs : In(ArrayLayout(16, rows))
        One bf16 LHS row.
    phase : In(range(fold)), only when folded
        Which columns this beat of the row meets.
    swap : In(1)
        This LHS row is the first of the weight tile now in the shadow (set on
        the row's phase 0 only).
    acc : In(ArrayLayout(32, cols // fold))
        Starting partial sums of this beat's columns.
    result : Out(ArrayLayout(32, cols // fold))
        This beat's result columns, ``latency`` enabled cycles after it.
    load : In(1), weights : In(ArrayLayout(16, cols))
        Shift one weight row into the shadow tile (``rows`` loads per tile).
    transpose : In(1), only when transposable
        Shift the beat in as a column instead (loads W^T; needs rows == cols).

    Latency ``rows * add_stages + cols / fold + mul_stages + 1`` cycles; one
    beat per cycle.
    """

    def __init__(self, *, rows, cols, numerics="tpu", mul_stages=MUL_STAGES,
                 add_stages=ADD_STAGES, transpose=None, fold=1):
        self.transposable = check_array_params(
            rows=rows, cols=cols, numerics=numerics, mul_stages=mul_stages,
            add_stages=add_stages, transpose=transpose, fold=fold)
        self.rows, self.cols, self.fold = rows, cols, fold
        self.pe_cols = cols // fold
        self.pe_params = dict(numerics=numerics, mul_stages=mul_stages,
                              add_stages=add_stages, transpose=self.transposable)
        if fold > 1:
            self.pe_params["fold"] = fold
        self.latency = array_latency(rows=rows, cols=cols, mul_stages=mul_stages,
                                     add_stages=add_stages, fold=fold)
        ports = {
            "en": In(1),
            "lhs": In(data.ArrayLayout(16, rows)), "swap": In(1),
            "acc": In(data.ArrayLayout(32, self.pe_cols)),
            "result": Out(data.ArrayLayout(32, self.pe_cols)),
            "load": In(1), "weights": In(data.ArrayLayout(16, cols)),
        }
        if fold > 1:
            ports["phase"] = In(range(fold))
        if self.transposable:
            ports["transpose"] = In(1)
        super().__init__(ports)

    def make_row(self):
        """One row of PEs. Export overrides this to emit the row module once."""
        return PERow(cols=self.pe_cols, pe_params=self.pe_params)

    def elaborate(self, platform):
        m = Module()
        rows, cols, fold = self.rows, self.pe_cols, self.fold
        mul_stages, add_stages = self.pe_params["mul_stages"], self.pe_params["add_stages"]
        phase_bits = (fold - 1).bit_length()
        m.submodules.lhs_skew = lhs_skew = SkewBuffer(
            width=17 + phase_bits, delays=[r * add_stages for r in range(rows)])
        m.submodules.acc_skew = acc_skew = SkewBuffer(
            width=32, delays=[c + product_latency(mul_stages) for c in range(cols)])
        m.submodules.deskew = deskew = SkewBuffer(
            width=32, delays=[cols - 1 - c for c in range(cols)])
        m.d.comb += [buf.en.eq(self.en) for buf in (lhs_skew, acc_skew, deskew)]
        phase = [self.phase] if fold > 1 else []
        m.d.comb += [lhs_skew.i[r].eq(Cat(self.lhs[r], self.swap, *phase)) for r in range(rows)]
        m.d.comb += acc_skew.i.eq(self.acc)

        pe_rows = [self.make_row() for _ in range(rows)]
        for r, row in enumerate(pe_rows):
            m.submodules[f"row{r}"] = row
            m.d.comb += [
                row.en.eq(self.en), row.load.eq(self.load),
                row.x_in.eq(lhs_skew.o[r][:16]), row.swap_in.eq(lhs_skew.o[r][16]),
                row.psum_in.eq(acc_skew.o if r == 0 else pe_rows[r - 1].psum_out),
                row.w_below.eq(self.weights if r == rows - 1 else pe_rows[r + 1].w_out),
            ]
            if fold > 1:
                m.d.comb += row.phase_in.eq(lhs_skew.o[r][17:])
            if self.transposable:
                m.d.comb += [row.transpose.eq(self.transpose), row.w_right.eq(self.weights[r])]
        m.d.comb += [deskew.i.eq(pe_rows[-1].psum_out), self.result.eq(deskew.o)]
        return m
