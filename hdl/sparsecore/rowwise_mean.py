"""Rowwise Adagrad's mean square gradient of a row, beside the row's chunks."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..arith import FP32AddCore, FP32DivCore, FP32MulCore
from ..lib.memory_port import WORD_BITS
from ..lib.params import check_numerics
from ..lib.stager import check_stages
from ..lib.stream_queue import StreamQueue
from .delay import delayed
from .layouts import LANES

__all__ = ["RowwiseMean"]


class RowwiseMean(wiring.Component):
    """Sets each record's ``row_mean`` to its row's mean square gradient, in golden's order.

    A row's records come in chunk order (``c = 0 .. chunks - 1``, as the ring sends a
    row's last term), ``x`` its summed gradient ``G``. For each row, with lane ``j``
    owning the columns ``d = j, j + 8, ...`` (``golden.sparsecore``, rowwise Adagrad)::

        p[j] = add(+0.0, mul(G[j], G[j])); p[j] = add(p[j], mul(G[d], G[d])) for d = j+8, ...
        s = add(add(... add(p[0], p[1]) ...), p[7])
        row_mean = div(s, fp32(columns))

    Padding columns (``columns`` up to ``row_words``) hold +0.0 gradients, whose squares
    add nothing: a lane's sum is never -0.0, and every adder output is already flushed.

    A one-stage adder per lane closes each lane's loop, so a row's chunks fold one a
    cycle; seven pipelined adders then sum the lanes, and a divider divides. The records
    wait in a queue until their row's mean leaves the divider, and then leave with it, so
    the rows stream through at one record a cycle.

    Parameters
    ----------
    geometry : Geometry
    numerics : "tpu" or "ieee"
    mul_stages, add_stages, div_stages : int
        Latencies of the square, lane-sum and divide cores (defaults 3, 2, 16).

    Ports
    -----
    records : In(stream.Signature(record_layout))
        A row's chunks, in order; ``row_mean`` is ignored.
    out : Out(stream.Signature(record_layout))
        The same records, in the same order, with ``row_mean`` set.
    columns : In(range(row_words + 1))
        The table's columns ``D``, 1 to ``row_words``; held for the batch.
    active : Out(1)
        A record or a mean is inside.

    Latency: a row's first record leaves ``latency + 1`` cycles (:attr:`latency`) after
    its last came in.
    Throughput one record a cycle. A record is taken when the queue has room and no
    mean waits for room in its own queue; ``out`` waits for ``valid`` of both.
    """

    def __init__(self, *, geometry, numerics="tpu", mul_stages=3, add_stages=2,
                 div_stages=16):
        self.geometry = g = geometry
        self.numerics = check_numerics(numerics)
        self.stages = dict(mul=check_stages(mul_stages, 5, name="mul_stages"),
                           add=check_stages(add_stages, 6, name="add_stages"),
                           div=check_stages(div_stages, 30, name="div_stages"))
        super().__init__({
            "records": In(stream.Signature(g.record_layout)),
            "out": Out(stream.Signature(g.record_layout)),
            "columns": In(range(g.row_words + 1)),
            "active": Out(1),
        })

    @property
    def latency(self):
        """Cycles from a row's last record taken to its mean in the mean queue."""
        s = self.stages
        return s["mul"] + 1 + (LANES - 1) * s["add"] + s["div"]

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        s = self.stages
        queue_depth = g.chunks + self.latency + 2
        m.submodules.queue = queue = StreamQueue(shape=g.record_layout, depth=queue_depth)
        m.submodules.means = means = StreamQueue(shape=WORD_BITS,
                                                 depth=queue_depth // g.chunks + 2)

        # The scalar path advances unless a mean is done and its queue is full.
        mean_valid = Signal()
        en = Signal()
        take = Signal()
        m.d.comb += [
            en.eq(~mean_valid | means.i.ready),
            self.records.ready.eq(queue.i.ready & en),
            take.eq(self.records.valid & self.records.ready),
            queue.i.valid.eq(take),
            queue.i.payload.eq(self.records.payload),
        ]

        def late(value, cycles, name):
            return delayed(m, value, cycles, en=en, name=name)

        def core(kind, name, stages=None, **operands):
            unit = {"mul": FP32MulCore, "add": FP32AddCore, "div": FP32DivCore}[kind]
            m.submodules[name] = unit = unit(numerics=self.numerics,
                                             stages=stages or s[kind])
            m.d.comb += [getattr(unit, port).eq(value) for port, value in operands.items()]
            return unit

        rec = self.records.payload
        folding = late(take, s["mul"], "folding")
        c = late(rec.c, s["mul"], "fold_c")
        # A one-stage adder advances only on a row's chunks, so its result is the lane's
        # sum so far until the next chunk: the loop closes in the adder.
        lanes = []
        for j in range(LANES):
            square = core("mul", f"square{j}", a=rec.x[j], b=rec.x[j], en=en).result
            lane = core("add", f"lane{j}", stages=1, b=square, en=en & folding)
            m.d.comb += lane.a.eq(Mux(c == 0, 0, lane.result))
            lanes.append(lane.result)
        row_done = late(folding & (c == g.chunks - 1), 1, "row_done")
        total = lanes[0]
        for j in range(1, LANES):
            total = core("add", f"sum{j}", a=total,
                         b=late(lanes[j], (j - 1) * s["add"], f"lane{j}_late"), en=en).result

        divisor = Signal(WORD_BITS)
        m.d.sync += divisor.eq(_fp32_of_count(m, self.columns))
        mean = core("div", "mean", a=total, b=divisor, en=en).result
        m.d.comb += [
            mean_valid.eq(late(row_done, (LANES - 1) * s["add"] + s["div"], "mean_valid")),
            means.i.valid.eq(mean_valid),
            means.i.payload.eq(mean),
        ]

        last = queue.o.payload.c == g.chunks - 1
        m.d.comb += [
            self.out.valid.eq(queue.o.valid & means.o.valid),
            self.out.payload.eq(queue.o.payload),
            self.out.payload.row_mean.eq(means.o.payload),
            queue.o.ready.eq(self.out.ready & means.o.valid),
            means.o.ready.eq(self.out.ready & queue.o.valid & last),
        ]
        # Every record waits in the queue until its row's mean is out, and a row's mean
        # leaves with its last record: the queue holds something while anything is inside.
        m.d.comb += self.active.eq(queue.o.valid)
        return m


def _fp32_of_count(m, count):
    """The fp32 pattern of the unsigned ``count``, +0.0 for 0 (exact up to ``2**24``, which
    bounds ``row_words``)."""
    width = len(count)
    lead = Signal(range(width), name="count_lead")
    for bit in range(width):
        with m.If(count[bit]):
            m.d.comb += lead.eq(bit)
    # The leading one lands on bit 23, the hidden bit, which the pattern drops.
    mantissa = (count << 23 >> lead)[:23]
    return Mux(count.any(), ((127 + lead) << 23) | mantissa, 0)
