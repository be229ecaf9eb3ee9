"""MXU: the systolic array behind stream ports, with double-buffered weights and a result FIFO."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .pe import ADD_STAGES, MUL_STAGES
from .systolic_array import SystolicArray, array_latency, check_array_params

__all__ = ["MXU", "PRESETS", "preset", "mxu_latency", "weights_layout", "lhs_layout"]

#: Array shapes of the named presets (SPEC section 4.1).
PRESETS = {"tpu_v4": (128, 128), "tpu_v6e": (256, 256)}


def preset(name):
    """The ``rows`` and ``cols`` of a named preset, e.g. ``MXU(**preset("tpu_v4"))``."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    rows, cols = PRESETS[name]
    return {"rows": rows, "cols": cols}


def mxu_latency(*, rows, cols, mul_stages=MUL_STAGES, add_stages=ADD_STAGES, **_others):
    """Cycles from an LHS beat accepted to its result valid (see :class:`MXU`).

    Other MXU parameters are accepted and ignored, so an MXU's keyword
    arguments can be passed as they are.
    """
    # The array, the FIFO's write register, then the buffered FIFO.
    return array_latency(rows=rows, cols=cols, mul_stages=mul_stages,
                         add_stages=add_stages) + 3


def weights_layout(cols, transposable):
    fields = {"data": data.ArrayLayout(16, cols)}
    if transposable:
        fields["transpose"] = 1
    return data.StructLayout(fields)


def lhs_layout(rows):
    return data.StructLayout({"data": data.ArrayLayout(16, rows), "swap": 1, "acc": 1})


class MXU(wiring.Component):
    """bf16 x bf16 -> fp32 matrix unit: ``result[m] = acc[m] + lhs[m] @ W``, one row a cycle.

    Weight-stationary systolic array (see :class:`~hdl.mxu.systolic_array.SystolicArray`):
    each PE holds one weight of a ``rows x cols`` tile ``W`` and accumulates in
    k order, ``acc' = round32(acc + round32(x * w))``, so a result equals the
    sequential MAC loop bit for bit.

    Parameters
    ----------
    rows, cols : int
        Array shape (default 8x8); see :data:`PRESETS` and :func:`preset`.
    numerics : "tpu" (default) or "ieee"
    mul_stages, add_stages : int
        PE pipeline depth (defaults :data:`~hdl.mxu.pe.MUL_STAGES` and
        :data:`~hdl.mxu.pe.ADD_STAGES`, chosen for Fmax on an ECP5; see there).
    transpose : bool
        Support transposed weight loads; defaults to ``rows == cols`` (required).
    fifo_depth : int
        Result FIFO depth, at least 4 (default 8).

    Ports
    -----
    weights : In(stream.Signature(StructLayout({"data": ArrayLayout(16, cols), "transpose": 1})))
        One weight row per beat, ``rows`` beats per tile, into the shadow tile.
        Beat ``k`` holds ``W[k, :]``; with ``transpose`` set (every beat of the
        tile alike) beat ``n`` holds ``W[:, n]`` instead, i.e. the tile loads
        as the transpose of the matrix whose rows were sent. The field exists
        only when transposed loads are supported.
    lhs : In(stream.Signature(StructLayout({"data": ArrayLayout(16, rows), "swap": 1, "acc": 1})))
        One LHS row (a K slice of ``rows`` bf16) per beat. ``swap`` makes the
        shadow tile active from this row on; such a beat waits until the
        shadow holds a whole tile. ``acc`` takes this row's starting partial
        sums from ``acc_in`` (otherwise they are +0.0).
    acc_in : In(stream.Signature(ArrayLayout(32, cols)))
        Starting fp32 partial sums, one beat per LHS beat that has ``acc``
        set, accepted together with it. Chaining a K-tile's results here
        keeps accumulation bit-exact across tiles.
    result : Out(stream.Signature(ArrayLayout(32, cols)))
        One fp32 result row per LHS beat, in order.

    Latency: ``rows * add_stages + cols + mul_stages + 3`` cycles from an LHS
    beat accepted to its result valid (the array, a write register, then the
    buffered FIFO).
    Throughput: one LHS row per cycle, ``rows * cols`` MACs per cycle.
    Weights: the next tile's ``rows`` beats load while the current one
    computes, once the previous swap has reached every PE, which takes
    ``(rows - 1) * add_stages + cols - 1`` cycles. A tile of at least
    ``(rows - 1) * add_stages + cols + rows`` LHS rows therefore hides the
    next tile's load completely, and consecutive tiles stream with no bubble.
    Stall: when the result FIFO could fill, the whole array holds (and
    ``lhs``, ``acc_in`` and ``weights`` are not ready), from the next cycle:
    the array's clock enable is registered, so it keeps a slot of headroom
    and resumes a cycle after the consumer frees one. Nothing is lost,
    duplicated or reordered.
    """

    def __init__(self, *, rows=8, cols=8, numerics="tpu", mul_stages=MUL_STAGES,
                 add_stages=ADD_STAGES, transpose=None, fifo_depth=8):
        # The registered stall below needs three entries to be safe and four to
        # keep a steadily read stream at one row a cycle.
        if not isinstance(fifo_depth, int) or isinstance(fifo_depth, bool) or fifo_depth < 4:
            raise ValueError(f"fifo_depth must be an integer of at least 4, not {fifo_depth!r}")
        self._array_params = dict(rows=rows, cols=cols, numerics=numerics,
                                  mul_stages=mul_stages, add_stages=add_stages,
                                  transpose=transpose)
        self.transposable = check_array_params(**self._array_params)
        self._array_params["transpose"] = self.transposable
        self.rows, self.cols = rows, cols
        self.numerics = numerics
        self.array_latency = array_latency(rows=rows, cols=cols, mul_stages=mul_stages,
                                           add_stages=add_stages)
        self.latency = mxu_latency(rows=rows, cols=cols, mul_stages=mul_stages,
                                   add_stages=add_stages)
        self.fifo_depth = fifo_depth
        self.swap_wave = (rows - 1) * add_stages + cols - 1
        super().__init__({
            "weights": In(stream.Signature(weights_layout(cols, self.transposable))),
            "lhs": In(stream.Signature(lhs_layout(rows))),
            "acc_in": In(stream.Signature(data.ArrayLayout(32, cols))),
            "result": Out(stream.Signature(data.ArrayLayout(32, cols))),
        })

    def make_array(self):
        """The systolic array. Export overrides this to emit repeated modules once."""
        return SystolicArray(**self._array_params)

    @property
    def array_params(self):
        return dict(self._array_params)

    def elaborate(self, platform):
        m = Module()
        m.submodules.array = array = self.make_array()
        m.submodules.fifo = result_fifo = fifo.SyncFIFOBuffered(
            width=32 * self.cols, depth=self.fifo_depth)

        # valid[i]: the LHS row accepted i + 1 enabled cycles ago is in flight.
        valid = Signal(self.array_latency)
        result_due = valid[-1]
        # The clock enable of every array register. It is itself a register,
        # decided a cycle ahead, so no handshake reaches its tens of thousands
        # of loads combinationally. The FIFO's write side is registered too,
        # apart from that logic: a result leaving the array (`leaving`) is
        # written a cycle later (`pending`). Advance next cycle if, counting
        # the write in flight, the FIFO will still have a free slot when the
        # result that may leave then is written. (SyncFIFOBuffered's level
        # counts its output register; with depth >= 3, a level below the
        # depth means the next write is accepted.)
        advance = Signal(init=1)
        leaving = result_due & advance
        pending = Signal()
        pending_row = Signal(32 * self.cols, reset_less=True)
        read = self.result.valid & self.result.ready
        m.d.sync += [
            pending.eq(leaving), pending_row.eq(array.result),
            advance.eq(result_fifo.level + pending + leaving - read < self.fifo_depth),
        ]

        # Shadow tile bookkeeping: rows loaded since the last swap, and how long
        # the last swap still needs to reach every PE (shifting the shadow
        # before then would change a weight some PE has yet to copy).
        loaded = Signal(range(self.rows + 1))
        wave = Signal(range(self.swap_wave + 1))
        shadow_full = loaded == self.rows
        load = Signal()
        m.d.comb += [
            self.weights.ready.eq(advance & ~shadow_full & ~wave.any()),
            load.eq(self.weights.valid & self.weights.ready),
        ]

        lhs = self.lhs.payload
        take = Signal()            # the LHS row (and its acc_in beat) is accepted
        m.d.comb += [
            self.lhs.ready.eq(advance & (shadow_full | ~lhs.swap)
                              & (self.acc_in.valid | ~lhs.acc)),
            take.eq(self.lhs.valid & self.lhs.ready),
            self.acc_in.ready.eq(take & lhs.acc),
        ]

        with m.If(advance):
            m.d.sync += valid.eq(Cat(take, valid[:-1]))
            with m.If(take & lhs.swap):
                m.d.sync += [loaded.eq(0), wave.eq(max(self.swap_wave - 1, 0))]
            with m.Else():
                with m.If(wave.any()):
                    m.d.sync += wave.eq(wave - 1)
                with m.If(load):
                    m.d.sync += loaded.eq(loaded + 1)

        m.d.comb += [
            array.en.eq(advance),
            array.lhs.eq(lhs.data),
            array.swap.eq(take & lhs.swap),
            array.acc.eq(Mux(take & lhs.acc, self.acc_in.payload, 0)),
            array.load.eq(load),
            array.weights.eq(self.weights.payload.data),
            result_fifo.w_data.eq(pending_row),
            result_fifo.w_en.eq(pending),
        ]
        if self.transposable:
            m.d.comb += array.transpose.eq(self.weights.payload.transpose)
        wiring.connect(m, result_fifo.r_stream, wiring.flipped(self.result))
        return m
