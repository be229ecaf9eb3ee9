"""MXU: the systolic array behind stream ports, with double-buffered weights and a result FIFO."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.registered_fifo import RegisteredFIFO
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


def mxu_latency(*, rows, cols, mul_stages=MUL_STAGES, add_stages=ADD_STAGES, fold=1,
                **_others):
    """Cycles from an LHS beat accepted to its result valid (see :class:`MXU`).

    Other MXU parameters are accepted and ignored, so an MXU's keyword
    arguments can be passed as they are.
    """
    # The input registers, the row's later phases, the array, the FIFO's
    # write register, then the FIFO's two cycles (memory, output register).
    return array_latency(rows=rows, cols=cols, mul_stages=mul_stages, add_stages=add_stages,
                         fold=fold) + fold - 1 + 4


def weights_layout(cols, transposable):
    fields = {"data": data.ArrayLayout(16, cols)}
    if transposable:
        fields["transpose"] = 1
    return data.StructLayout(fields)


def lhs_layout(rows):
    return data.StructLayout({"data": data.ArrayLayout(16, rows), "swap": 1, "acc": 1})


class MXU(wiring.Component):
    """bf16 x bf16 -> fp32 matrix unit: ``result[m] = acc[m] + lhs[m] @ W``, a row a cycle
    (a row every ``fold`` cycles when folded).

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
    fold : int
        Columns of the tile per PE, dividing ``cols`` (default 1): with ``fold``
        F the array is ``rows x cols / F`` PEs, each holding F weights of the
        tile, and each LHS row passes through it F times, a slice of the columns
        each time (see :class:`~hdl.mxu.systolic_array.SystolicArray`). The
        results are the same; an FPGA prototype trades throughput for PEs.
    fifo_depth : int
        Result FIFO depth, at least 4 (default 8): the results it holds,
        ``fifo_depth - 1`` in memory and one in its output register (see
        :class:`~hdl.lib.registered_fifo.RegisteredFIFO`; one lane of 32 bits
        per column, each with its own copy of the control).

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

    Latency: ``rows * add_stages + cols / fold + mul_stages + fold + 4``
    cycles from an LHS beat accepted to its result valid (the input registers,
    the row's ``fold - 1`` later phases, the array, the FIFO's write register,
    then the FIFO's memory and output register).
    Throughput: one LHS row per ``fold`` cycles, ``rows * cols / fold`` MACs per
    cycle; ``lhs`` is not ready while a row's later phases enter the array.
    Weights: the next tile's ``rows`` beats load while the current one
    computes, once the previous swap has reached every PE, which takes
    ``(rows - 1) * add_stages + cols / fold - 1`` cycles. Unfolded, a tile of at
    least ``(rows - 1) * add_stages + cols + rows`` LHS rows therefore hides
    the next tile's load completely, and consecutive tiles stream with no bubble.
    Stall: when the result FIFO could fill, the whole array holds (and
    ``lhs``, ``acc_in`` and ``weights`` are not ready), from the next cycle:
    the array's clock enable is registered, so it keeps a slot of headroom
    and resumes a cycle after the consumer frees one. Nothing is lost,
    duplicated or reordered. The array's inputs and enable and the FIFO's
    write are registers, so no handshake reaches the array or the FIFO's
    memory combinationally.
    """

    def __init__(self, *, rows=8, cols=8, numerics="tpu", mul_stages=MUL_STAGES,
                 add_stages=ADD_STAGES, transpose=None, fold=1, fifo_depth=8):
        # A steadily read stream holds three results (one pending write, one in
        # the FIFO's memory, one in its output register), and the registered
        # stall needs one slot of headroom on top: four keep one row a cycle.
        if not isinstance(fifo_depth, int) or isinstance(fifo_depth, bool) or fifo_depth < 4:
            raise ValueError(f"fifo_depth must be an integer of at least 4, not {fifo_depth!r}")
        self._array_params = dict(rows=rows, cols=cols, numerics=numerics,
                                  mul_stages=mul_stages, add_stages=add_stages,
                                  transpose=transpose, fold=fold)
        self.transposable = check_array_params(**self._array_params)
        self._array_params["transpose"] = self.transposable
        if fold == 1:
            del self._array_params["fold"]     # an unfolded array, as before the parameter
        self.rows, self.cols, self.fold = rows, cols, fold
        self.numerics = numerics
        self.array_latency = array_latency(rows=rows, cols=cols, mul_stages=mul_stages,
                                           add_stages=add_stages, fold=fold)
        self.latency = mxu_latency(rows=rows, cols=cols, mul_stages=mul_stages,
                                   add_stages=add_stages, fold=fold)
        self.fifo_depth = fifo_depth
        self.swap_wave = (rows - 1) * add_stages + cols // fold - 1
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
        rows, cols, fold = self.rows, self.cols, self.fold
        pe_cols = cols // fold
        m.submodules.array = array = self.make_array()
        # Per-column lanes, each with its own copy of the FIFO's control, so
        # no control net spans the whole 32 * cols-bit result (docs/fpga.md).
        m.submodules.fifo = result_fifo = RegisteredFIFO(
            width=32, lanes=cols, depth=self.fifo_depth)

        # valid[i]: the LHS beat (a row's phase) that entered the input registers
        # i enabled cycles ago is in flight (one cycle there, then the array).
        valid = Signal(self.array_latency + 1)
        result_due = valid[-1]
        read = self.result.valid & self.result.ready

        # The clock enable of every array register. It is itself a register,
        # decided a cycle ahead, so no handshake reaches its tens of thousands
        # of loads combinationally. It is one flip-flop, not copies: a copy
        # per PE, or per multiplier, placed and routed slower on an ECP5
        # (docs/fpga.md).
        advance = Signal(init=1)
        # A result leaving the array (`leaving`: the last phase of its row) is
        # written into the FIFO a cycle later (`pending`), so the write is a
        # register too. A row's phases leave in consecutive enabled cycles, so
        # `out_phase` counts them.
        out_phase = Signal(range(fold)) if fold > 1 else Const(0)
        leaving = result_due & advance & (out_phase == fold - 1)
        pending = Signal()
        pending_row = Signal(data.ArrayLayout(data.ArrayLayout(32, pe_cols), fold),
                             reset_less=True)
        # Results in `pending` or in the FIFO, counted here rather than read
        # from the FIFO, so this decision has registers of its own beside
        # `advance`. Advance next cycle only if a result leaving then would
        # still find room when it is written, the cycle after: that is, if
        # fewer than fifo_depth results are held after this cycle.
        held = Signal(range(self.fifo_depth + 1))
        held_next = Signal(range(self.fifo_depth + 1))
        m.d.comb += held_next.eq(held + leaving - read)
        m.d.sync += [
            pending.eq(leaving),
            held.eq(held_next), advance.eq(held_next < self.fifo_depth),
        ]
        if fold == 1:
            m.d.sync += pending_row.eq(array.result)
        else:
            with m.If(result_due & advance):
                m.d.sync += out_phase.eq(Mux(out_phase == fold - 1, 0, out_phase + 1))
                with m.Switch(out_phase):
                    for f in range(fold):
                        with m.Case(f):
                            m.d.sync += pending_row[f].eq(array.result)
        # The FIFO is never written without room (so its w_stream.ready is
        # always high when `pending` is): see `held`.
        m.d.comb += [
            result_fifo.w_stream.valid.eq(pending),
            result_fifo.w_stream.payload.eq(pending_row),
        ]
        wiring.connect(m, result_fifo.r_stream, wiring.flipped(self.result))

        # Shadow tile bookkeeping: rows loaded since the last swap, and how long
        # the last swap still needs to reach every PE (shifting the shadow
        # before then would change a weight some PE has yet to copy).
        loaded = Signal(range(rows + 1))
        wave = Signal(range(self.swap_wave + 1))
        shadow_full = loaded == rows
        load = Signal()
        m.d.comb += [
            self.weights.ready.eq(advance & ~shadow_full & ~wave.any()),
            load.eq(self.weights.valid & self.weights.ready),
        ]

        lhs = self.lhs.payload
        take = Signal()            # the LHS row (and its acc_in beat) is accepted
        # The row in the input registers still has phases to send into the
        # array (never, unfolded): they go before the next row is taken.
        in_phase = Signal(range(fold)) if fold > 1 else Const(0)
        more = Signal()
        if fold > 1:
            m.d.comb += more.eq(valid[0] & (in_phase != fold - 1))
        m.d.comb += [
            self.lhs.ready.eq(advance & ~more & (shadow_full | ~lhs.swap)
                              & (self.acc_in.valid | ~lhs.acc)),
            take.eq(self.lhs.valid & self.lhs.ready),
            self.acc_in.ready.eq(take & lhs.acc),
        ]

        # The input registers: one more stage of the array, enabled with it.
        # The handshakes above decide only these few flags; what enters the
        # array comes from registers, so no handshake reaches the skew
        # buffers and the PEs, spread over the die, in the same cycle. (Load
        # and swap are both delayed by one enabled cycle, so the bookkeeping
        # below, in enabled cycles, is unchanged.)
        in_lhs = Signal(data.ArrayLayout(16, rows), reset_less=True)
        in_swap = Signal()
        in_acc = Signal(data.ArrayLayout(data.ArrayLayout(32, pe_cols), fold), reset_less=True)
        in_use_acc = Signal()      # start from in_acc; otherwise from +0.0
        in_load = Signal()
        in_weights = Signal(data.ArrayLayout(16, cols), reset_less=True)
        in_transpose = Signal(reset_less=True)

        with m.If(advance):
            m.d.sync += [
                valid.eq(Cat(take | more, valid[:-1])),
                in_load.eq(load), in_weights.eq(self.weights.payload.data),
            ]
            with m.If(more):
                m.d.sync += in_swap.eq(0)
                if fold > 1:
                    m.d.sync += in_phase.eq(in_phase + 1)
            with m.Else():
                if fold > 1:
                    m.d.sync += in_phase.eq(0)
                m.d.sync += [
                    in_lhs.eq(lhs.data), in_swap.eq(take & lhs.swap),
                    in_acc.eq(self.acc_in.payload), in_use_acc.eq(take & lhs.acc),
                ]
            if self.transposable:
                m.d.sync += in_transpose.eq(self.weights.payload.transpose)
            with m.If(take & lhs.swap):
                m.d.sync += [loaded.eq(0), wave.eq(max(self.swap_wave - 1, 0))]
            with m.Else():
                with m.If(wave.any()):
                    m.d.sync += wave.eq(wave - 1)
                with m.If(load):
                    m.d.sync += loaded.eq(loaded + 1)

        phase_acc = in_acc[0]
        if fold > 1:
            phase_acc = Signal.like(in_acc[0])
            with m.Switch(in_phase):
                for f in range(fold):
                    with m.Case(f):
                        m.d.comb += phase_acc.eq(in_acc[f])
        m.d.comb += [
            array.en.eq(advance),
            array.lhs.eq(in_lhs),
            array.swap.eq(in_swap),
            array.acc.eq(Mux(in_use_acc, phase_acc, 0)),
            array.load.eq(in_load),
            array.weights.eq(in_weights),
        ]
        if fold > 1:
            m.d.comb += array.phase.eq(in_phase)
        if self.transposable:
            m.d.comb += array.transpose.eq(in_transpose)
        return m
