"""Dedup unit: unique ids in first-occurrence order, occurrence chains, and id errors."""

from amaranth.hdl import MemoryData, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory, ReadPort
from amaranth.lib.wiring import In, Out

from .layouts import index_bits

__all__ = ["Dedup"]


class Dedup(wiring.Component):
    """Deduplicates a batch's ids, one id a cycle, as ``golden.sparsecore.dedup`` orders them.

    A map with one entry per table row holds, for an id seen before, its slot ``u``
    (its rank in first-occurrence order) and its latest position. An id not seen
    before takes the next slot. For every position ``k`` the unit records:

    * ``occ[k]`` = (slot, bag, weight), for the lookup terms;
    * ``uniq[u]`` = (id, first position), written when slot ``u`` is taken;
    * ``tail[u]`` = the latest position of slot ``u``'s id;
    * ``next[k']`` = ``k``, linking the previous occurrence ``k'`` of the same id to
      ``k``: each id's positions form a chain in increasing order, which the update
      sequencer follows to sum gradients in the order golden states.

    Errors, never silent: an id outside ``[0, n_rows)`` (negative ones included) sets
    ``bad`` and is counted, and the first such position is kept; it is not entered
    in the map. An id that needs a slot when all ``max_unique`` are taken sets
    ``overflow`` (first position kept). A batch with either error must not be
    combined (the tile stops after loading).

    Parameters
    ----------
    geometry : Geometry
    wipe : bool
        Add the ``wipe`` ports, so the map can be cleared for another batch (default
        False: a batch after reset, on the map's initial zeros).

    Ports
    -----
    tagged : In(stream.Signature(geometry.tagged_layout))
        ``ready`` is always high.
    n_rows : In(range(rows + 1))
        Valid ids are ``0 .. n_rows - 1``.
    unique : Out(range(max_unique + 1))
        Slots taken; slot ``u``'s ``uniq`` entry is readable once ``unique > u``.
    pending : Out(1)
        An id is in the second stage (its records land at the end of this cycle).
    bad, overflow : Out(1)
        Sticky error flags.
    bad_position, overflow_position : Out(pos_shape)
        The first position of each error.
    bad_count : Out(range(max_ids + 1))
        Ids out of range.
    uniq_fetch, uniq_seq, tail_read, occ_read, next_read : Out(ReadPort.Signature)
        Synchronous read ports of the records.
    wipe, wipe_row : In(1), In(range(rows)), with ``wipe=True``
        While ``wipe`` is high, map entry ``wipe_row`` is cleared (no id may be offered).

    Latency: two cycles from an id taken to its records written. The map read is
    transparent to the map write of the id before, so back-to-back equal ids chain.
    """

    def __init__(self, *, geometry, wipe=False):
        self.geometry = g = geometry
        self.map_layout = data.StructLayout({"seen": 1, "slot": g.slot_shape,
                                             "last": g.pos_shape})
        self.map_mem = MemoryData(shape=self.map_layout, depth=g.rows, init=[])
        self.uniq_mem = MemoryData(shape=g.uniq_layout, depth=g.max_unique, init=[])
        self.tail_mem = MemoryData(shape=g.pos_shape, depth=g.max_unique, init=[])
        self.occ_mem = MemoryData(shape=g.occ_layout, depth=g.max_ids, init=[])
        self.next_mem = MemoryData(shape=g.pos_shape, depth=g.max_ids, init=[])
        slot_bits, pos_bits = index_bits(g.max_unique), index_bits(g.max_ids)
        self.wipes = bool(wipe)
        wipe_ports = {"wipe": In(1), "wipe_row": In(range(g.rows))} if wipe else {}
        super().__init__({
            **wipe_ports,
            "tagged": In(stream.Signature(g.tagged_layout)),
            "n_rows": In(range(g.rows + 1)),
            "unique": Out(range(g.max_unique + 1)),
            "pending": Out(1),
            "bad": Out(1), "bad_position": Out(g.pos_shape),
            "bad_count": Out(range(g.max_ids + 1)),
            "overflow": Out(1), "overflow_position": Out(g.pos_shape),
            "uniq_fetch": Out(ReadPort.Signature(addr_width=slot_bits, shape=g.uniq_layout)),
            "uniq_seq": Out(ReadPort.Signature(addr_width=slot_bits, shape=g.uniq_layout)),
            "tail_read": Out(ReadPort.Signature(addr_width=slot_bits, shape=g.pos_shape)),
            "occ_read": Out(ReadPort.Signature(addr_width=pos_bits, shape=g.occ_layout)),
            "next_read": Out(ReadPort.Signature(addr_width=pos_bits, shape=g.pos_shape)),
        })

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        stored = dict(map=self.map_mem, uniq=self.uniq_mem, tail=self.tail_mem,
                      occ=self.occ_mem, next=self.next_mem)
        memories = {name: Memory(data=memory_data) for name, memory_data in stored.items()}
        for name, memory in memories.items():
            m.submodules[f"{name}_mem"] = memory
        writes = {name: memory.write_port() for name, memory in memories.items()}
        for port, name in ((self.uniq_fetch, "uniq"), (self.uniq_seq, "uniq"),
                           (self.tail_read, "tail"), (self.occ_read, "occ"),
                           (self.next_read, "next")):
            read = memories[name].read_port()
            m.d.comb += [read.addr.eq(port.addr), read.en.eq(port.en), port.data.eq(read.data)]
        map_read = memories["map"].read_port(transparent_for=(writes["map"],))

        # Stage 0: take the id, check its range, read its map entry.
        tag = self.tagged.payload
        take = Signal()
        in_range = Signal()
        m.d.comb += [
            self.tagged.ready.eq(1),
            take.eq(self.tagged.valid),
            in_range.eq((tag.id >= 0) & (tag.id < self.n_rows)),
            map_read.addr.eq(tag.id[:index_bits(g.rows)]), map_read.en.eq(take),
        ]
        k = Signal(range(g.max_ids + 1))        # position of the next id taken
        valid = self.pending
        ok = Signal()
        held = Signal(g.tagged_layout)
        k1 = Signal(g.pos_shape)
        m.d.sync += [valid.eq(take), ok.eq(in_range)]
        with m.If(take):
            m.d.sync += [held.eq(tag), k1.eq(k), k.eq(k + 1)]

        # Stage 1: the map entry is here; write every record of position k1.
        entry = map_read.data
        new = Signal()
        slot = Signal(g.slot_shape)
        full = self.unique == g.max_unique
        m.d.comb += [
            new.eq(valid & ok & ~entry.seen & ~full),
            slot.eq(Mux(entry.seen, entry.slot, self.unique)),
        ]
        enter = valid & ok & (entry.seen | ~full)
        m.d.comb += [
            writes["map"].addr.eq(held.id[:index_bits(g.rows)]), writes["map"].en.eq(enter),
            writes["map"].data.seen.eq(1), writes["map"].data.slot.eq(slot),
            writes["map"].data.last.eq(k1),
            writes["occ"].addr.eq(k1), writes["occ"].en.eq(enter),
            writes["occ"].data.slot.eq(slot), writes["occ"].data.bag.eq(held.bag),
            writes["occ"].data.weight.eq(held.weight),
            writes["tail"].addr.eq(slot), writes["tail"].data.eq(k1),
            writes["tail"].en.eq(enter),
            writes["next"].addr.eq(entry.last), writes["next"].data.eq(k1),
            writes["next"].en.eq(valid & ok & entry.seen),
            writes["uniq"].addr.eq(self.unique), writes["uniq"].en.eq(new),
            writes["uniq"].data.id.eq(held.id), writes["uniq"].data.head.eq(k1),
        ]
        if self.wipes:
            with m.If(self.wipe):
                m.d.comb += [writes["map"].addr.eq(self.wipe_row), writes["map"].en.eq(1),
                             writes["map"].data.eq(0)]
        with m.If(new):
            m.d.sync += self.unique.eq(self.unique + 1)
        with m.If(valid & ~ok):
            m.d.sync += self.bad_count.eq(self.bad_count + 1)
            with m.If(~self.bad):
                m.d.sync += [self.bad.eq(1), self.bad_position.eq(k1)]
        with m.If(valid & ok & ~entry.seen & full & ~self.overflow):
            m.d.sync += [self.overflow.eq(1), self.overflow_position.eq(k1)]
        return m
