"""scVPU back: the combiners' divisions and the optimizers' arithmetic, in golden's order."""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import ReadPort
from amaranth.lib.wiring import In, Out

from ..arith import FP32AddCore, FP32DivCore, FP32MulCore, FP32SqrtCore
from ..lib.stager import check_stages
from .delay import delayed
from .layouts import (COMBINERS, LANES, OPTIMIZERS, SIGN, Combiner, Optimizer, chunk_layout,
                      index_bits)
from ..lib.params import check_numerics

__all__ = ["FinishPipeline", "check_finish_stages"]


def check_finish_stages(*, mul_stages=3, add_stages=2, sqrt_stages=14, div_stages=16):
    """``{"mul", "add", "sqrt", "div"}`` stages, raising what :class:`FinishPipeline`
    raises for them (a tile that builds it in ``elaborate`` refuses them at once)."""
    return dict(mul=check_stages(mul_stages, 5, name="mul_stages"),
                add=check_stages(add_stages, 6, name="add_stages"),
                sqrt=check_stages(sqrt_stages, 27, name="sqrt_stages"),
                div=check_stages(div_stages, 30, name="div_stages"))


class FinishPipeline(wiring.Component):
    """Turns the ring's sums into output chunks (lookup) or new table and state chunks (update).

    One fixed datapath per lane, five groups of clock-enabled cores; each mode uses
    some of them and carries its values past the rest in delay lines, so every
    record takes the same time and one record a cycle streams through::

        group  1 mul          2 add              3 sqrt        4 div          5 add
        lookup   -            -                  sqrt(den)     div(x, den')   -
        sgd      n=mul(lr,G)  -                  -             -              row + -n
        adagrad  n=mul(lr,G)  acc=add(s,mul(G,G)) r=sqrt(acc)  q=div(n, r)    row + -q
        rowwise  n=mul(lr,G)  acc=add(s,mean)     r=sqrt(acc)  q=div(n, r)    row + -q

    Lookup: ``sum`` gives ``x``; ``mean`` ``div(x, den)``; ``sqrtn``
    ``div(x, sqrt(den))``; an ``empty`` bag +0.0. Update: ``a - b`` is ``add(a, b ^
    sign)``, and the state ``s`` and row chunk are read from Spmem just in time (the
    read address travels down the pipeline and is presented the stage before the
    data is needed). Rowwise Adagrad's ``mean`` is the record's ``row_mean``
    (:class:`~.rowwise_mean.RowwiseMean`), and its state chunk holds the row's one
    accumulator in every lane, so every lane computes the row's ``acc`` and root, and
    writes them back to every lane. These are exactly the op sequences of
    golden.sparsecore.

    Parameters
    ----------
    geometry : Geometry
    numerics : "tpu" or "ieee"
    combiners, optimizers : sequence of str
        The features built (default all of :data:`~.layouts.COMBINERS` and
        :data:`~.layouts.OPTIMIZERS`). Without ``mean`` and ``sqrtn`` (and Adagrad) there
        are no dividers; without ``sqrtn`` and either Adagrad no square roots (sqrtn needs
        only lane 0's, whose root every lane shares); without an optimizer no update
        arithmetic. A mode built without reads zeros where its cores would be; the latency
        is the same either way.
    mul_stages, add_stages, sqrt_stages, div_stages : int
        Latencies of the cores (defaults 3, 2, 14, 16).

    Ports
    -----
    records : In(stream.Signature(record_layout))
    results : Out(stream.Signature(result_layout))
        ``row`` is the output chunk (lookup) or the new row chunk; ``state`` the new
        accumulators (either Adagrad; rowwise Adagrad's row accumulator in every lane).
    update : In(1)
        Mode: update when high.
    optimizer : In(Optimizer)
    combiner : In(Combiner)
        The lookup's combiner.
    lr : In(32)
        Learning rate, an fp32 pattern.
    rows_read, state_read : In(ReadPort.Signature)
        The row and state Spmem.
    active : Out(1)
        A record is inside.

    Latency ``mul + 2 * add + sqrt + div`` stages; throughput one record a cycle.
    When ``results`` is valid and not ready, everything holds (``records.ready``
    low), as :class:`~hdl.lib.stream_pipeline.StreamPipeline` does.
    """

    def __init__(self, *, geometry, numerics="tpu", combiners=COMBINERS, optimizers=OPTIMIZERS,
                 mul_stages=3, add_stages=2, sqrt_stages=14, div_stages=16):
        self.geometry = g = geometry
        self.numerics = check_numerics(numerics)
        self.combiners = tuple(c for c in COMBINERS if c in combiners)
        self.optimizers = tuple(o for o in OPTIMIZERS if o in optimizers)
        self.stages = check_finish_stages(mul_stages=mul_stages, add_stages=add_stages,
                                          sqrt_stages=sqrt_stages, div_stages=div_stages)
        spmem = ReadPort.Signature(addr_width=index_bits(g.max_unique * g.chunks),
                                   shape=chunk_layout)
        super().__init__({
            "records": In(stream.Signature(g.record_layout)),
            "results": Out(stream.Signature(g.result_layout)),
            "update": In(1), "optimizer": In(Optimizer), "combiner": In(Combiner),
            "lr": In(32),
            "rows_read": In(spmem), "state_read": In(spmem),
            "active": Out(1),
        })

    @property
    def latency(self):
        s = self.stages
        return s["mul"] + 2 * s["add"] + s["sqrt"] + s["div"]

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        s = self.stages
        # Positions, in advances after a record is taken, where each group's inputs sit.
        at_add1 = s["mul"]
        at_sqrt = at_add1 + s["add"]
        at_div = at_sqrt + s["sqrt"]
        at_add2 = at_div + s["div"]
        at_out = at_add2 + s["add"]

        valid = Signal(at_out)
        en = Signal()
        m.d.comb += [
            en.eq(~valid[-1] | self.results.ready),
            self.records.ready.eq(en),
            self.results.valid.eq(valid[-1]),
            self.active.eq(valid.any()),
        ]
        with m.If(en):
            m.d.sync += valid.eq(valid.shift_left(1) | self.records.valid)

        rec = self.records.payload
        lookup = ~self.update
        # Not `== Combiner.SUM`: a compare with 0 exports as a logical not, which lint flags.
        sum_only = ~self.combiner.as_value().any()
        sqrtn = self.combiner == Combiner.SQRTN

        def late(value, cycles, name):
            return delayed(m, value, cycles, en=en, name=name)

        line = rec.u * g.chunks + rec.c
        m.d.comb += [
            self.state_read.addr.eq(late(line, at_add1 - 1, "state_addr")),
            self.state_read.en.eq(en),
            self.rows_read.addr.eq(late(line, at_add2 - 1, "row_addr")),
            self.rows_read.en.eq(en),
        ]
        x_div = late(rec.x, at_div, "x_div")
        x_out = late(x_div, s["div"], "x_out")
        den_sqrt = late(rec.den, at_sqrt, "den_sqrt")
        den_div = late(den_sqrt, s["sqrt"], "den_div")
        empty = late(rec.empty, at_add2, "empty")

        units = {"mul": FP32MulCore, "add": FP32AddCore, "sqrt": FP32SqrtCore,
                 "div": FP32DivCore}

        def core(kind, name, built, **operands):
            if not built:
                return Const(0, 32)        # a feature this tile is built without
            m.submodules[name] = unit = units[kind](numerics=self.numerics, stages=s[kind])
            m.d.comb += [getattr(unit, port).eq(value) for port, value in operands.items()]
            m.d.comb += unit.en.eq(en)
            return unit.result

        adagrad = "adagrad" in self.optimizers
        rowwise = "rowwise_adagrad" in self.optimizers
        adaptive = adagrad or rowwise
        optimizer = bool(self.optimizers)
        divide = adaptive or bool({"mean", "sqrtn"} & set(self.combiners))
        # Not `!= Optimizer.SGD`: a compare with 0 exports as a logical not, which lint flags.
        scaled = self.optimizer.as_value().any()            # either Adagrad
        row_mean = late(rec.row_mean, at_add1, "row_mean") if rowwise else None
        accs = Signal(chunk_layout)
        quotients = Signal(chunk_layout)
        new_rows = Signal(chunk_layout)
        lookup_root = None
        for j in range(LANES):
            square = core("mul", f"square{j}", adagrad, a=rec.x[j], b=rec.x[j])
            n = core("mul", f"scale{j}", optimizer, a=self.lr, b=rec.x[j])
            # What the accumulator grows by: Adagrad's square, rowwise Adagrad's row mean.
            grow = square if not rowwise else \
                Mux(self.optimizer == Optimizer.ROWWISE_ADAGRAD, row_mean, square)
            acc = core("add", f"acc{j}", adaptive, a=self.state_read.data[j], b=grow)
            # Every lane's sqrtn divides by the same root: lane 0 takes it for all.
            root = core("sqrt", f"root{j}", adaptive or (j == 0 and "sqrtn" in self.combiners),
                        a=Mux(lookup, den_sqrt, acc))
            lookup_root = root if j == 0 else lookup_root
            n_div = late(n, s["add"] + s["sqrt"], f"n_div{j}")
            q = core("div", f"div{j}", divide, a=Mux(lookup, x_div[j], n_div),
                     b=Mux(lookup, Mux(sqrtn, lookup_root, den_div), root))
            step = Mux(scaled, q, late(n_div, s["div"], f"n_step{j}"))
            new = core("add", f"apply{j}", optimizer, a=self.rows_read.data[j],
                       b=step ^ Const(SIGN, 32))
            m.d.comb += [accs[j].eq(acc), quotients[j].eq(q), new_rows[j].eq(new)]

        out = Signal(chunk_layout)
        for j in range(LANES):
            m.d.comb += out[j].eq(Mux(empty, 0, Mux(sum_only, x_out[j], quotients[j])))
        out_late = late(out, s["add"], "out")
        result = self.results.payload
        m.d.comb += [
            result.row.eq(Mux(lookup, out_late.as_value(), new_rows.as_value())),
            result.state.eq(late(accs, s["sqrt"] + s["div"] + s["add"], "state")),
            result.id.eq(late(rec.id, at_out, "id")),
            result.c.eq(late(rec.c, at_out, "c")),
        ]
        return m
