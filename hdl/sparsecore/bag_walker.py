"""CSR walker: tags each streamed id with its bag, from the bags' end offsets."""

from amaranth.hdl import MemoryData, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory, ReadPort
from amaranth.lib.wiring import In, Out

from .layouts import id_layout, index_bits

__all__ = ["BagWalker"]


class BagWalker(wiring.Component):
    """Walks CSR input: ``ids`` in flat order, ``ends`` = ``offsets[1:]``, one per bag.

    Id ``k`` belongs to the first bag whose end exceeds ``k``. The walker holds the
    current bag's end and takes the next end from ``ends`` when the current bag is
    used up; an end equal to the current position is an empty bag, taken without
    passing an id. Ends are also kept, in order, for the lookup sequencer.

    Parameters
    ----------
    geometry : Geometry

    Ports
    -----
    ends : In(stream.Signature(range(max_ids + 1)))
        Bag ends, non-decreasing (the runner checks). ``ready`` is high while the
        current bag is used up (or none is open yet); it depends on no input.
    ids : In(stream.Signature(id_layout))
    tagged : Out(stream.Signature(geometry.tagged_layout))
        Each id with its weight and bag. An id whose bag starts in the same cycle
        passes in that cycle (the new end taken alongside), so ids flow one a cycle
        across bag boundaries; only an empty bag costs a cycle.
    ends_read : Out(ReadPort.Signature)
        A synchronous read port of the kept ends: entry ``b`` is ``offsets[b + 1]``.
    bags_taken, ids_taken : Out
        Ends and ids taken so far.
    """

    def __init__(self, *, geometry):
        self.geometry = g = geometry
        self.ends_mem = MemoryData(shape=range(g.max_ids + 1), depth=g.max_bags, init=[])
        super().__init__({
            "ends": In(stream.Signature(range(g.max_ids + 1))),
            "ids": In(stream.Signature(id_layout)),
            "tagged": Out(stream.Signature(g.tagged_layout)),
            "ends_read": Out(ReadPort.Signature(addr_width=index_bits(g.max_bags),
                                                shape=range(g.max_ids + 1))),
            "bags_taken": Out(range(g.max_bags + 1)),
            "ids_taken": Out(range(g.max_ids + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.ends_mem = mem = Memory(data=self.ends_mem)
        write, read = mem.write_port(), mem.read_port()
        m.d.comb += [read.addr.eq(self.ends_read.addr), read.en.eq(self.ends_read.en),
                     self.ends_read.data.eq(read.data)]

        have = Signal()                      # a bag is open
        bag = Signal(self.geometry.bag_shape)
        bag_end = Signal.like(self.ends.payload)
        k = self.ids_taken
        need_end = Signal()
        id_bag = Signal.like(bag)
        id_ok = Signal()
        m.d.comb += [
            need_end.eq(~have | (k == bag_end)),
            self.ends.ready.eq(need_end),
            # The id's bag: the open one, or the one whose end arrives this cycle.
            id_bag.eq(Mux(need_end, self.bags_taken, bag)),
            id_ok.eq(Mux(need_end, self.ends.valid & (self.ends.payload > k), 1)),
            self.tagged.valid.eq(self.ids.valid & id_ok),
            self.ids.ready.eq(self.tagged.ready & id_ok),
            self.tagged.payload.id.eq(self.ids.payload.id),
            self.tagged.payload.weight.eq(self.ids.payload.weight),
            self.tagged.payload.bag.eq(id_bag),
            write.addr.eq(self.bags_taken), write.data.eq(self.ends.payload),
            write.en.eq(self.ends.valid & self.ends.ready),
        ]
        with m.If(self.ends.valid & self.ends.ready):
            m.d.sync += [have.eq(1), bag.eq(self.bags_taken), bag_end.eq(self.ends.payload),
                         self.bags_taken.eq(self.bags_taken + 1)]
        with m.If(self.ids.valid & self.ids.ready):
            m.d.sync += k.eq(k + 1)
        return m
