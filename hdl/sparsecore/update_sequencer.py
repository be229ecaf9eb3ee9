"""Update sequencer: the combine ring's terms for ``update``, one unique row at a time."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import ReadPort
from amaranth.lib.wiring import In, Out

from .layouts import index_bits

__all__ = ["UpdateSequencer"]


class UpdateSequencer(wiring.Component):
    """Emits, for slots ``u = 0 .. unique - 1`` (first-occurrence order), the positions
    ``k`` of slot ``u``'s id in increasing order, following the dedup unit's chain from
    ``uniq[u].head`` through ``next`` to ``tail[u]``; for each, the chunks ``c = 0 ..
    chunks - 1``, one slot a cycle. The ring sums bag ``bag(k)``'s gradient over them:
    ``G`` from +0.0, as golden's ``_row_gradients``. ``first``/``last`` mark a row's
    first and last occurrence; ``u`` and ``id`` travel with the slot to the flush.

    Both reads run a cycle ahead, so rows and occurrences follow without a gap: the
    ``next`` port's address is the position that will be current next cycle, and the
    ``uniq``/``tail`` ports' the slot after the one that will be current.

    Parameters
    ----------
    geometry : Geometry

    Ports
    -----
    uniq_read, tail_read, next_read : In(ReadPort.Signature)
        The dedup unit's records.
    unique : In(range(max_unique + 1))
        Slots taken (final by the time ``go`` rises).
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
        slot_bits, pos_bits = index_bits(g.max_unique), index_bits(g.max_ids)
        super().__init__({
            "uniq_read": In(ReadPort.Signature(addr_width=slot_bits, shape=g.uniq_layout)),
            "tail_read": In(ReadPort.Signature(addr_width=slot_bits, shape=g.pos_shape)),
            "next_read": In(ReadPort.Signature(addr_width=pos_bits, shape=g.pos_shape)),
            "unique": In(range(g.max_unique + 1)),
            "go": In(1),
            "slots": Out(stream.Signature(g.slot_layout)),
            "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        u = Signal(range(g.max_unique + 1))
        u_next = Signal.like(u)
        k = Signal(g.pos_shape)
        k_next = Signal.like(k)
        tail = Signal(g.pos_shape)
        row_id = Signal(g.id_shape)
        fresh = Signal()
        c = Signal(g.chunk_shape)
        slot = self.slots.payload
        step = Signal()
        term_over = Signal()               # the last chunk of a term is taken
        row_over = Signal()                # ... and it is the row's last term
        ahead = self.uniq_read.data        # slot u + 1's records
        m.d.comb += [
            slot.k.eq(k), slot.c.eq(c), slot.u.eq(u), slot.id.eq(row_id), slot.first.eq(fresh),
            slot.last.eq(k == tail),
            step.eq(self.slots.valid & self.slots.ready),
            term_over.eq(step & (c == g.chunks - 1)),
            row_over.eq(term_over & slot.last),
            u_next.eq(u + row_over),
            k_next.eq(Mux(row_over, ahead.head, Mux(term_over, self.next_read.data, k))),
            self.uniq_read.en.eq(1), self.tail_read.en.eq(1), self.next_read.en.eq(1),
            self.uniq_read.addr.eq(u_next + 1), self.tail_read.addr.eq(u_next + 1),
            self.next_read.addr.eq(k_next),
        ]
        # Control: idle until `go`, one cycle priming, then running until done.
        started, priming, running = Signal(), Signal(), Signal()
        with m.If(self.go & ~started):
            m.d.sync += started.eq(1)
            with m.If(self.unique.any()):
                m.d.sync += priming.eq(1)
            with m.Else():
                m.d.sync += self.done.eq(1)
        with m.If(~started):
            m.d.comb += [self.uniq_read.addr.eq(0), self.tail_read.addr.eq(0)]
        with m.If(priming):
            # Slot 0's records are here; slot 1's are read, and next[head].
            m.d.comb += [self.uniq_read.addr.eq(1), self.tail_read.addr.eq(1),
                         self.next_read.addr.eq(ahead.head)]
            m.d.sync += [u.eq(0), k.eq(ahead.head), tail.eq(self.tail_read.data),
                         row_id.eq(ahead.id), fresh.eq(1), c.eq(0), priming.eq(0),
                         running.eq(1)]
        m.d.comb += self.slots.valid.eq(running)
        with m.If(step):
            m.d.sync += [c.eq(Mux(c == g.chunks - 1, 0, c + 1)), k.eq(k_next)]
            with m.If(term_over):
                m.d.sync += fresh.eq(row_over)
            with m.If(row_over):
                m.d.sync += [u.eq(u_next), tail.eq(self.tail_read.data), row_id.eq(ahead.id)]
                with m.If(u_next == self.unique):
                    m.d.sync += [running.eq(0), self.done.eq(1)]
        return m
