"""The VPU's transcendental unit: ``rcp``, ``rsqrt`` and ``exp``, one sublane a cycle."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int, check_numerics
from ..arith.fp32_exp import MAX_STAGES as EXP_MAX_STAGES, FP32ExpCore
from ..arith.fp32_reciprocal import FP32RcpCore
from ..arith.fp32_rsqrt import FP32RsqrtCore
from .isa import check_ops
from .layouts import REG_BITS, SUBLANES, gather_rows, row, vreg_bits, writeback_signature

__all__ = ["TranscendentalUnit", "Function", "FUNCTIONS", "core_depths"]


class Function(enum.Enum, shape=2):
    """The function an issue asks for: the shape of its ``fn``."""
    RCP = 0
    RSQRT = 1
    EXP = 2


#: The core that computes each function, by name (how ``functions`` names those to build).
FUNCTIONS = {"rcp": FP32RcpCore, "rsqrt": FP32RsqrtCore, "exp": FP32ExpCore}


def core_depths(functions):
    """Each built function's core latency: its core's default, but exp's as deep as it goes
    within the deepest other core's. Exp's result waits for that depth anyway, so its
    extra stages cost no latency and let each of its table products and their sums take a
    cycle on an FPGA (docs/fpga.md)."""
    depths = {name: FUNCTIONS[name].DEFAULT_STAGES for name in functions}
    others = [depth for name, depth in depths.items() if name != "exp"]
    if "exp" in depths and others:
        depths["exp"] = max(depths["exp"], min(EXP_MAX_STAGES, max(others)))
    return depths


class TranscendentalUnit(wiring.Component):
    """``lanes`` reciprocal, rsqrt and exp cores, fed one sublane of a vreg per cycle.

    The cores are the correctly rounded :class:`~hdl.arith.fp32_reciprocal.FP32RcpCore`
    and :class:`~hdl.arith.fp32_rsqrt.FP32RsqrtCore` and the
    :class:`~hdl.arith.fp32_exp.FP32ExpCore` of ``golden.transcendental``, at the
    depths of :func:`core_depths`. The shallower cores' results are delayed to the
    deepest core's latency ``D``, so sublanes of successive instructions leave in the
    order they entered.

    Parameters
    ----------
    lanes : int
    numerics : "tpu" or "ieee"
    functions : collection of str, optional
        The functions to build (default all of :data:`FUNCTIONS`).

    Ports
    -----
    issue : In(stream.Signature(StructLayout({"fn": Function, "dest": 5, "src": 256 * lanes})))
        The function and the destination; the source vreg is read at issue.
    writeback : Out(writeback_signature(lanes))
        The result vreg, always taken.

    Latency: issued in cycle ``t``, sublane ``s`` enters the cores in cycle
    ``t+1+s``, and the write-back is valid in cycle ``t+8+D``; ``latency``
    is ``8 + D``. Throughput: one
    instruction per 8 cycles, back to back: ``issue.ready`` is high when idle
    and while the last sublane of the previous instruction enters.
    """

    def __init__(self, *, lanes, numerics="tpu", functions=None):
        self.lanes = check_int("lanes", lanes, least=1)
        self.numerics = check_numerics(numerics)
        self.functions = check_ops(functions, tuple(FUNCTIONS), what="functions")
        #: Each function's core latency.
        self.depths = core_depths(self.functions)
        self.latency = SUBLANES + max(self.depths.values())
        layout = data.StructLayout({"fn": Function, "dest": REG_BITS, "src": vreg_bits(lanes)})
        super().__init__({"issue": In(stream.Signature(layout)),
                          "writeback": Out(writeback_signature(lanes))})

    def make_core(self, name):
        """One lane's core for function ``name``. Export overrides this to emit it once."""
        return FUNCTIONS[name](numerics=self.numerics, stages=self.depths[name])

    def elaborate(self, platform):
        m = Module()
        lanes, width = self.lanes, 32 * self.lanes
        src = Signal(vreg_bits(lanes), reset_less=True)
        fn = Signal(Function, reset_less=True)
        dest = Signal(REG_BITS, reset_less=True)
        left = Signal(range(SUBLANES + 1))           # sublanes still to feed
        index = Signal(range(SUBLANES))

        m.d.comb += self.issue.ready.eq(left <= 1)
        with m.If(self.issue.valid & self.issue.ready):
            m.d.sync += [src.eq(self.issue.payload.src), fn.eq(self.issue.payload.fn),
                         dest.eq(self.issue.payload.dest), left.eq(SUBLANES), index.eq(0)]
        with m.Elif(left != 0):
            m.d.sync += [left.eq(left - 1), index.eq(index + 1), src.eq(src >> width)]
        feeding = left != 0
        # The source shifts down a sublane each cycle it feeds, and the cores read its first:
        # no multiplexer between the index and the cores' first stage (an FPGA's critical
        # path once exp was pipelined, docs/fpga.md).
        sublane = row(src, 0, lanes)

        # Every core runs on every sublane fed; the tag says whose result to keep.
        cores = {name: [self.make_core(name) for _ in range(lanes)] for name in self.functions}
        depth = self.latency - SUBLANES
        aligned = {}
        for name, lane_cores in cores.items():
            for j, core in enumerate(lane_cores):
                m.submodules[f"{name}{j}"] = core
                m.d.comb += [core.en.eq(1), core.a.eq(sublane[32 * j:32 * j + 32])]
            value = Cat(core.result for core in lane_cores)
            for k in range(depth - self.depths[name]):
                delayed = Signal(width, name=f"{name}_delay{k}", reset_less=True)
                m.d.sync += delayed.eq(value)
                value = delayed
            aligned[Function[name.upper()]] = value

        tag = data.StructLayout({"valid": 1, "fn": Function, "index": 3, "dest": REG_BITS})
        tags = [Signal(tag, name=f"tag{k}") for k in range(depth + 1)]
        m.d.comb += [tags[0].valid.eq(feeding), tags[0].fn.eq(fn), tags[0].index.eq(index),
                     tags[0].dest.eq(dest)]
        for before, after in zip(tags, tags[1:]):
            m.d.sync += after.eq(before)
        out = tags[-1]
        result = Signal(width)
        with m.Switch(out.fn):
            for member, value in aligned.items():
                with m.Case(member):
                    m.d.comb += result.eq(value)
            with m.Default():
                m.d.comb += result.eq(0)

        finished = gather_rows(m, arriving=out.valid, index=out.index, value=result,
                               lanes=lanes, name="finished")
        m.d.comb += [
            self.writeback.valid.eq(out.valid & (out.index == SUBLANES - 1)),
            self.writeback.payload.dest.eq(out.dest),
            self.writeback.payload.data.eq(finished),
        ]
        return m
