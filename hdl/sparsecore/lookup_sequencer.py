"""Lookup sequencer: the combine ring's terms for ``lookup``, bag by bag, in golden's order."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import ReadPort
from amaranth.lib.wiring import In, Out

from .layouts import index_bits

__all__ = ["LookupSequencer"]


class LookupSequencer(wiring.Component):
    """Emits, for bags ``b = 0 .. n_bags - 1`` and their positions ``k`` in increasing
    order, the chunks ``c = 0 .. chunks - 1`` of term ``k``: one slot a cycle, with
    ``first``/``last`` marking the bag's first and last terms. An empty bag is one
    placeholder term (``empty``, ``first`` and ``last``), so the ring emits its +0.0 row
    in its place.

    The next bag's end is read a cycle ahead (the ends read port's address is the bag
    index that will be current next cycle, plus one), so bags follow each other without
    a gap.

    Parameters
    ----------
    geometry : Geometry

    Ports
    -----
    ends_read : In(ReadPort.Signature)
        The bag walker's kept ends.
    n_bags : In(range(max_bags + 1))
    go : In(1)
        Start (held high); the sequencer runs once per reset.
    slots : Out(stream.Signature(geometry.slot_layout))
    done : Out(1)
        Every slot sent.

    Two cycles from ``go`` to the first slot (the first records are read), then one
    slot a cycle while ``slots.ready``; ``valid`` never drops in between, so the ring
    sees no bubble.
    """

    def __init__(self, *, geometry):
        self.geometry = g = geometry
        super().__init__({
            "ends_read": In(ReadPort.Signature(addr_width=index_bits(g.max_bags),
                                               shape=range(g.max_ids + 1))),
            "n_bags": In(range(g.max_bags + 1)),
            "go": In(1),
            "slots": Out(stream.Signature(g.slot_layout)),
            "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        bag = Signal(range(g.max_bags + 1))
        bag_next = Signal.like(bag)
        end = Signal(range(g.max_ids + 1))
        k = Signal(range(g.max_ids + 1))
        c = Signal(g.chunk_shape)
        fresh = Signal()
        slot = self.slots.payload
        step = Signal()                    # a slot is taken
        bag_over = Signal()                # ... and it is its bag's last chunk
        m.d.comb += [
            slot.k.eq(k), slot.c.eq(c), slot.first.eq(fresh),
            slot.empty.eq(k == end), slot.last.eq((k == end) | (k + 1 == end)),
            step.eq(self.slots.valid & self.slots.ready),
            bag_over.eq(step & (c == g.chunks - 1) & slot.last),
            bag_next.eq(bag + bag_over),
            self.ends_read.en.eq(1),
            self.ends_read.addr.eq(bag_next + 1),
        ]
        # Control: idle until `go`, one cycle priming, then running until done.
        started, priming, running = Signal(), Signal(), Signal()
        with m.If(self.go & ~started):
            m.d.sync += started.eq(1)
            with m.If(self.n_bags.any()):
                m.d.sync += priming.eq(1)
            with m.Else():
                m.d.sync += self.done.eq(1)
        with m.If(~started):
            m.d.comb += self.ends_read.addr.eq(0)
        with m.If(priming):
            # ends[0] is here; ends[1] is read for the first bag change.
            m.d.comb += self.ends_read.addr.eq(1)
            m.d.sync += [end.eq(self.ends_read.data), bag.eq(0), k.eq(0), c.eq(0), fresh.eq(1),
                         priming.eq(0), running.eq(1)]
        m.d.comb += self.slots.valid.eq(running)
        with m.If(step):
            m.d.sync += c.eq(c + 1)
            with m.If(c == g.chunks - 1):
                m.d.sync += [c.eq(0), fresh.eq(bag_over)]
                with m.If(~slot.empty):
                    m.d.sync += k.eq(k + 1)
                with m.If(bag_over):
                    m.d.sync += [bag.eq(bag_next), end.eq(self.ends_read.data)]
                    with m.If(bag_next == self.n_bags):
                        m.d.sync += [running.eq(0), self.done.eq(1)]
        return m
