"""scVPU front: the 8-wide multiply and accumulate ring that folds terms in golden's order."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import ReadPort
from amaranth.lib.wiring import In, Out

from ..arith import FP32AddCore, FP32MulCore
from ..lib.stager import check_stages
from .delay import delayed
from .layouts import LANES, ONE, chunk_layout, index_bits
from ..lib.params import check_numerics

__all__ = ["CombineRing"]


class CombineRing(wiring.Component):
    """Folds sequenced terms into sums, chunk by chunk: ``acc = add(acc, mul(w, x))``.

    Each slot names a term chunk: position ``k``, chunk ``c``. Stage 0 reads
    ``occ[k]`` (slot, bag, weight); stage 1 reads the chunk, from the row Spmem at
    line ``slot * chunks + c`` (lookup) or from the gradient buffer at line
    ``bag * chunks + c`` (update, weight 1.0); then 8 lanes multiply it by the weight
    and a ninth lane, the *den lane*, forms ``mul(w, w)`` (sqrtn) or ``mul(w, 1.0)``
    (otherwise), whose fold is the mean's or sqrtn's denominator (the bag length when
    every weight is 1.0).

    The accumulators live in the adder pipeline itself. The adders' latency plus a
    delay line make a ring of exactly ``chunks`` stages: chunk ``c`` of term ``k``
    enters the adders just as chunk ``c`` of term ``k - 1`` leaves them, so its sum
    so far is the other operand (or +0.0 for a ``first`` term), and a term a cycle
    streams through with no hazard and no accumulator memory. Sums therefore fold in
    exactly the sequencer's order, one rounding per term, as golden states. A
    ``last`` term's sums leave as a record.

    The whole front advances together on one enable: when a slot is offered (or
    ``drain`` is high, pushing the last terms out with bubbles behind them) and no
    record waits untaken. So the ring stays aligned through any stall.

    Parameters
    ----------
    geometry : Geometry
    numerics : "tpu" or "ieee"
    mul_stages : int
        Multiplier latency, 1 to 5 (default 3).
    add_stages : int
        Adder latency, 1 to 6 (default 2), capped at ``chunks`` (the ring's length).
    den_lane : bool
        Build the den lane (default True); without it ``den`` is 0 (a tile without the
        mean and sqrtn combiners needs none).

    Ports
    -----
    slots : In(stream.Signature(slot_layout))
    drain : In(1)
        No more slots will come: advance with bubbles.
    update, sqrtn : In(1)
        Mode (gradient terms, weight 1.0) and combiner (the den lane squares).
    occ_read, rows_read, grads_read : In(ReadPort.Signature)
    records : Out(stream.Signature(record_layout))
        One per ``last`` term chunk, in slot order; ``valid`` is held until taken
        and the ring holds meanwhile.
    active : Out(1)
        A slot is inside.
    taking : Out(1)
        A slot is taken this cycle (for measuring lane use).

    Latency ``2 + mul_stages + add stages`` cycles from a slot to its record.
    """

    def __init__(self, *, geometry, numerics="tpu", mul_stages=3, add_stages=2, den_lane=True):
        self.geometry = g = geometry
        self.den_lane = bool(den_lane)
        self.numerics = check_numerics(numerics)
        self.mul_stages = check_stages(mul_stages, 5, name="mul_stages")
        self.add_stages = min(check_stages(add_stages, 6, name="add_stages"), g.chunks)
        spmem_bits = index_bits(g.max_unique * g.chunks)
        super().__init__({
            "slots": In(stream.Signature(g.slot_layout)),
            "drain": In(1), "update": In(1), "sqrtn": In(1),
            "occ_read": In(ReadPort.Signature(addr_width=index_bits(g.max_ids),
                                              shape=g.occ_layout)),
            "rows_read": In(ReadPort.Signature(addr_width=spmem_bits, shape=chunk_layout)),
            "grads_read": In(ReadPort.Signature(addr_width=index_bits(g.max_bags * g.chunks),
                                                shape=chunk_layout)),
            "records": Out(stream.Signature(g.record_layout)),
            "active": Out(1), "taking": Out(1),
        })

    @property
    def latency(self):
        return 2 + self.mul_stages + self.add_stages

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        meta_layout = data.StructLayout({"valid": 1, "slot": g.slot_layout})
        en = Signal()
        blocked = Signal()
        m.d.comb += [
            self.slots.ready.eq(~blocked),
            en.eq((self.slots.valid | self.drain) & ~blocked),
            self.taking.eq(self.slots.valid & ~blocked),
        ]
        meta_in = Signal(meta_layout)
        m.d.comb += [meta_in.valid.eq(self.slots.valid), meta_in.slot.eq(self.slots.payload)]

        # Stage 0: occ[k].
        m.d.comb += [self.occ_read.addr.eq(self.slots.payload.k), self.occ_read.en.eq(en)]
        meta0 = delayed(m, meta_in, 1, en=en, name="meta0")
        occ = self.occ_read.data

        # Stage 1: the term's chunk.
        c0 = meta0.slot.c
        m.d.comb += [
            self.rows_read.addr.eq(occ.slot * g.chunks + c0), self.rows_read.en.eq(en),
            self.grads_read.addr.eq(occ.bag * g.chunks + c0), self.grads_read.en.eq(en),
        ]
        meta1 = delayed(m, meta0, 1, en=en, name="meta1")
        weight = delayed(m, occ.weight, 1, en=en, name="weight")

        # Multiply: 8 lanes and the den lane.
        term = Mux(self.update, self.grads_read.data.as_value(), self.rows_read.data.as_value())
        scale = Mux(self.update, ONE, weight)
        lanes = LANES + self.den_lane
        products = []
        for lane in range(lanes):
            m.submodules[f"mul{lane}"] = mul = FP32MulCore(numerics=self.numerics,
                                                           stages=self.mul_stages)
            if lane < LANES:
                m.d.comb += [mul.a.eq(scale), mul.b.eq(term[32 * lane:32 * lane + 32])]
            else:
                m.d.comb += [mul.a.eq(weight), mul.b.eq(Mux(self.sqrtn, weight, ONE))]
            m.d.comb += mul.en.eq(en)
            products.append(mul.result)
        meta2 = delayed(m, meta1, self.mul_stages, en=en, name="meta2")

        # The ring: the adders and a delay line, `chunks` stages in all.
        sums = Signal(data.ArrayLayout(32, LANES + 1))
        for lane in range(lanes):
            m.submodules[f"add{lane}"] = add = FP32AddCore(numerics=self.numerics,
                                                           stages=self.add_stages)
            # A first term starts from +0.0; later ones from their chunk's sum so far.
            feedback = delayed(m, add.result, g.chunks - self.add_stages, en=en,
                               name=f"loop{lane}")
            m.d.comb += [add.a.eq(Mux(meta2.slot.first, 0, feedback)),
                         add.b.eq(products[lane]), add.en.eq(en), sums[lane].eq(add.result)]
        meta3 = delayed(m, meta2, self.add_stages, en=en, name="meta3")

        # Exit: a last term's sums.
        record = self.records.payload
        m.d.comb += [
            self.records.valid.eq(meta3.valid & meta3.slot.last),
            blocked.eq(self.records.valid & ~self.records.ready),
            record.x.eq(sums.as_value()[:32 * LANES]), record.den.eq(sums[LANES]),
            record.empty.eq(meta3.slot.empty), record.u.eq(meta3.slot.u),
            record.id.eq(meta3.slot.id), record.c.eq(meta3.slot.c),
        ]
        inside = Signal(range(self.latency + 2))
        m.d.sync += inside.eq(inside + (self.slots.valid & en) - (meta3.valid & en))
        m.d.comb += self.active.eq(inside != 0)
        return m
