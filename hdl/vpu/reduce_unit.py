"""The VPU's reduction across sublanes: ``rsum``, ``rmax`` and ``rmin``."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int, check_numerics
from ..arith.fp32_adder import FP32AddCore
from ..arith.fp32_compare import extremum
from .isa import check_ops
from .layouts import REG_BITS, SUBLANES, row, select_row, vreg_bits, writeback_signature

__all__ = ["ReduceUnit", "ReduceOp", "REDUCE_OPS"]


class ReduceOp(enum.Enum, shape=2):
    """The reduction an issue asks for: the shape of its ``op``."""
    SUM = 0
    MAX = 1
    MIN = 2


#: The names of :class:`ReduceOp`, in code order: how ``ops`` names the reductions to build.
REDUCE_OPS = tuple(member.name.lower() for member in ReduceOp)


class ReduceUnit(wiring.Component):
    """Each lane of a vreg folded over its 8 sublanes, left to right from sublane 0.

    ``((s0 op s1) op s2) ... op s7`` with ``op`` an fp32 add (SPEC section 3,
    exactly ``golden.vpu.reduce``) or an IEEE maximum/minimum; the result
    goes to every sublane of the destination.

    Parameters
    ----------
    lanes : int
    numerics : "tpu" or "ieee"
    ops : collection of str, optional
        The reductions to build (default all of :data:`REDUCE_OPS`).

    Ports
    -----
    issue : In(stream.Signature(StructLayout({"op": ReduceOp, "dest": 5, "src": 256 * lanes})))
        The reduction and the destination; ``src`` is the source vreg, read at issue.
    writeback : Out(writeback_signature(lanes))
        The result, always taken.

    Latency: issued in cycle ``t``, the seven folds run in cycles ``t+1 .. t+7``
    (one adder or comparator per lane, result registered), and the write-back
    is valid in ``t+8``. Throughput: one reduction per 8 cycles; ``issue.ready``
    is high when idle and in the write-back cycle.
    """

    def __init__(self, *, lanes, numerics="tpu", ops=None):
        self.lanes = check_int("lanes", lanes, least=1)
        self.numerics = check_numerics(numerics)
        self.ops = check_ops(ops, REDUCE_OPS, what="ops")
        layout = data.StructLayout({"op": ReduceOp, "dest": REG_BITS, "src": vreg_bits(lanes)})
        super().__init__({"issue": In(stream.Signature(layout)),
                          "writeback": Out(writeback_signature(lanes))})

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        step = Signal(range(SUBLANES + 1))        # 0 idle, 1..7 folding sublane `step`, 8 done
        src = Signal(vreg_bits(lanes), reset_less=True)
        op = Signal(ReduceOp, reset_less=True)
        dest = Signal(REG_BITS, reset_less=True)

        take = self.issue.valid & self.issue.ready
        m.d.comb += self.issue.ready.eq(~step.any() | (step == SUBLANES))
        with m.If(take):
            m.d.sync += [src.eq(self.issue.payload.src), op.eq(self.issue.payload.op),
                         dest.eq(self.issue.payload.dest), step.eq(1)]
        with m.Elif(step == SUBLANES):
            m.d.sync += step.eq(0)
        with m.Elif(step != 0):
            m.d.sync += step.eq(step + 1)

        incoming = select_row(src, step[:3], lanes)
        first = step == 1
        folded = []
        for j in range(lanes):
            word = slice(32 * j, 32 * j + 32)
            acc = Signal(32, name=f"acc{j}")
            left = Mux(first, row(src, 0, lanes)[word], acc)
            right = incoming[word]
            results = {}
            if "sum" in self.ops:
                adder = FP32AddCore(numerics=self.numerics, stages=1)
                m.submodules[f"adder{j}"] = adder
                m.d.comb += [adder.en.eq(1), adder.a.eq(left), adder.b.eq(right)]
                results[ReduceOp.SUM] = adder.result
            if {"max", "min"} & set(self.ops):
                compared = Signal(32, name=f"extremum{j}", reset_less=True)
                picks = [extremum(m, left, right, self.numerics, maximum=(name == "max"),
                                  name=f"{name}{j}") for name in ("max", "min")
                         if name in self.ops]
                m.d.sync += compared.eq(picks[0] if len(picks) == 1 else
                                        Mux(op == ReduceOp.MAX, picks[0], picks[1]))
                results |= {ReduceOp[name.upper()]: compared for name in ("max", "min")
                            if name in self.ops}
            with m.Switch(op):
                for member, value in results.items():
                    with m.Case(member):
                        m.d.comb += acc.eq(value)
                with m.Default():
                    m.d.comb += acc.eq(0)
            folded.append(acc)
        m.d.comb += [
            self.writeback.valid.eq(step == SUBLANES),
            self.writeback.payload.dest.eq(dest),
            self.writeback.payload.data.eq(Cat(*folded).replicate(SUBLANES)),
        ]
        return m
