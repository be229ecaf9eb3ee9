"""The weight-stationary processing element of the systolic array."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..arith.bf16_multiplier import BF16MulCore, MAX_STAGES as MUL_MAX_STAGES
from ..lib.params import check_int, check_numerics
from ..arith.fp32_adder import FP32AddCore, MAX_STAGES as ADD_MAX_STAGES
from ..lib.stager import check_stages

__all__ = ["ProcessingElement", "check_pe_params", "pe_signature", "weight_shape",
           "product_latency", "MUL_STAGES", "ADD_STAGES"]

#: Default pipeline depths (docs/fpga.md). Six adder stages are the fewest that
#: place and route above 100 MHz on an ECP5 at speed grade 6 in "tpu" numerics.
#: The multiplier uses all five cut points, more than a lone PE needs (two reach
#: 126 MHz): in an array the placer cannot keep every PE beside its DSP block,
#: and registers on both sides of the multiplier keep that distance out of the
#: DSP's own delay (an 8x8 MXU's multiplier paths: 68 MHz with two stages, off
#: its critical path with five). The array and the MXU default to these too.
MUL_STAGES = 5
ADD_STAGES = 6


def product_latency(mul_stages):
    """Cycles from a PE's ``x_in`` to its product entering the adder.

    The ``x`` register, the multiplier's ``mul_stages``, and the product
    register between the multiplier and the adder (see :class:`ProcessingElement`).
    """
    return mul_stages + 2


def weight_shape(fold):
    """A PE's weights: one bf16, or with ``fold`` above 1 an array of ``fold``."""
    return 16 if fold == 1 else data.ArrayLayout(16, fold)


def pe_signature(transposable, fold=1):
    """The PE's ports (see :class:`ProcessingElement`)."""
    weights = weight_shape(fold)
    ports = {
        "en": In(1),
        "x_in": In(16), "swap_in": In(1), "x_out": Out(16), "swap_out": Out(1),
        "psum_in": In(32), "psum_out": Out(32),
        "load": In(1), "w_below": In(weights), "w_out": Out(weights),
    }
    if fold > 1:
        ports.update(phase_in=In(range(fold)), phase_out=Out(range(fold)))
    if transposable:
        ports.update(transpose=In(1), w_right=In(weights))
    return wiring.Signature(ports)


def check_pe_params(*, numerics, mul_stages, add_stages, fold=1):
    """Validate PE parameters (shared with the array, which checks before building PEs)."""
    check_numerics(numerics)
    check_stages(mul_stages, MUL_MAX_STAGES, name="mul_stages")
    check_stages(add_stages, ADD_MAX_STAGES, name="add_stages")
    check_int("fold", fold, least=1)


class ProcessingElement(wiring.Component):
    """One MAC cell: ``psum_out = round32(psum_in + round32(x * w))``, not fused.

    The PE holds two bf16 weights: ``active``, used by the multiplier, and
    ``shadow``, which the next tile shifts into while this one computes. The
    LHS value ``x`` and its ``swap`` flag enter a register and leave to the
    right one cycle later; on the edge that registers a row flagged ``swap``,
    ``active`` takes ``shadow``, so that row and every later one use the new
    tile with no bubble. Partial sums flow down through the adder pipeline.

    The product passes through one more register between the multiplier
    and the adder. In an array the multiplier sits near its DSP block and
    the adder wherever the chain of partial sums puts it; in an 8x8 MXU
    on an ECP5 the two were 38 columns apart, and that distance and
    the adder's first stage shared one cycle (docs/fpga.md). This register
    lets the placer carry the product across in a cycle of its own.

    Parameters
    ----------
    numerics : "tpu" or "ieee"
    mul_stages : int
        Multiplier pipeline depth, 1 to 5 (default :data:`MUL_STAGES`). Measured
        Fmax of a lone PE with ``add_stages=6`` on an ECP5 at speed grade 6
        (docs/fpga.md): "tpu" 126.6 MHz with 2 stages, 140.0 with 5; "ieee"
        102.8 MHz with 3, 93.8 with 5.
    add_stages : int
        Adder pipeline depth, 1 to 6 (default :data:`ADD_STAGES`): the
        cycles a partial sum spends in the PE.
    transpose : bool
        Whether the shadow can also shift in from the right (transposed load).
    fold : int
        Weights the PE holds per tile (default 1). With ``fold`` F above 1 the
        PE stands for F columns of the array, one a cycle: each LHS value comes
        ``F`` times, tagged ``phase`` 0 to F - 1, and is multiplied by active
        weight ``phase``. ``active`` and ``shadow`` are then arrays of F, and
        every weight port carries F weights.

    Ports
    -----
    en : In(1)
        Clock enable of every register; the array stalls by holding it low.
    x_in, swap_in : In(16), In(1)
        LHS bf16 value and its swap flag from the left.
    x_out, swap_out : Out(16), Out(1)
        The same, registered, to the right.
    phase_in, phase_out : In/Out(range(fold)), only with ``fold`` above 1
        Which of the weights ``x_in`` meets; registered to the right with it.
    psum_in : In(32)
        Partial sum from above, due ``2 + mul_stages`` cycles after ``x_in``
        (:func:`product_latency`).
    psum_out : Out(32)
        Partial sum below, ``add_stages`` cycles after ``psum_in``.
    load : In(1)
        Shift the shadow weight this cycle.
    w_below : In(16), or In(ArrayLayout(16, fold))
        Shadow weights of the PE below (the shift source of a normal load).
    transpose : In(1), only with ``transpose=True``
        Shift from ``w_right`` instead of ``w_below``.
    w_right : In(16), or In(ArrayLayout(16, fold)), only with ``transpose=True``
        What shifts in from the right: the shadow of the PE to the right (the
        row wires folded columns' neighbours, see :class:`~hdl.mxu.PERow`).
    w_out : Out(16), or Out(ArrayLayout(16, fold))
        This PE's shadow weights.

    Latency ``2 + mul_stages`` cycles from ``x_in`` to its product entering
    the adder, ``add_stages`` from ``psum_in`` to ``psum_out``; throughput one
    MAC per cycle. Every register holds while ``en`` is low.
    """

    def __init__(self, *, numerics="tpu", mul_stages=MUL_STAGES, add_stages=ADD_STAGES,
                 transpose=True, fold=1):
        check_pe_params(numerics=numerics, mul_stages=mul_stages, add_stages=add_stages,
                        fold=fold)
        self.numerics, self.mul_stages, self.add_stages = numerics, mul_stages, add_stages
        self.transposable = bool(transpose)
        self.fold = fold
        super().__init__(pe_signature(self.transposable, fold))

    def elaborate(self, platform):
        m = Module()
        m.submodules.mul = mul = BF16MulCore(numerics=self.numerics, stages=self.mul_stages)
        m.submodules.add = add = FP32AddCore(numerics=self.numerics, stages=self.add_stages)

        x = Signal(16, reset_less=True)
        swap = Signal(reset_less=True)
        active = Signal(weight_shape(self.fold), reset_less=True)
        shadow = Signal(weight_shape(self.fold), reset_less=True)
        product = Signal(32, reset_less=True)
        shift_in = Mux(self.transpose, self.w_right, self.w_below) if self.transposable \
            else self.w_below
        with m.If(self.en):
            m.d.sync += [x.eq(self.x_in), swap.eq(self.swap_in), product.eq(mul.result)]
            with m.If(self.swap_in):
                m.d.sync += active.eq(shadow)
            with m.If(self.load):
                m.d.sync += shadow.eq(shift_in)
        if self.fold > 1:
            phase = Signal(range(self.fold), reset_less=True)
            with m.If(self.en):
                m.d.sync += phase.eq(self.phase_in)
            m.d.comb += self.phase_out.eq(phase)
            # A case per weight, not an indexed shift: the Verilog stays lint-clean.
            with m.Switch(phase):
                for f in range(self.fold):
                    with m.Case(f):
                        m.d.comb += mul.b.eq(active[f])
        else:
            m.d.comb += mul.b.eq(active)

        m.d.comb += [
            self.x_out.eq(x), self.swap_out.eq(swap), self.w_out.eq(shadow),
            mul.en.eq(self.en), mul.a.eq(x),
            add.en.eq(self.en), add.a.eq(self.psum_in), add.b.eq(product),
            self.psum_out.eq(add.result),
        ]
        return m
