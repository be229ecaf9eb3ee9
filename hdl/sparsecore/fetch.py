"""Fetch unit: gathers each unique row (and its optimizer state) from HBM into Spmem."""

from amaranth.hdl import Const, MemoryData, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory, ReadPort
from amaranth.lib.wiring import In, Out

from ..lib.memory_port import MemoryPortSignature
from .layouts import LANES, chunk_layout, index_bits

__all__ = ["FetchUnit"]


class FetchUnit(wiring.Component):
    """Reads the rows of slots ``0, 1, ...`` as the dedup unit takes them, into Spmem.

    Slot ``u``'s row, HBM lines ``id * lines_per_row ...``, lands in Spmem lines
    ``u * chunks ...`` (8 words each); with ``with_state`` the row's accumulators,
    from the state region, follow it into the state Spmem. One read request a cycle,
    back to back across rows: an issue stage holds the slot whose lines are being
    requested while the slot after it is read from the dedup unit's ``uniq`` records,
    so rows stream without a gap, and as many reads are in flight as the HBM allows
    (its ``max_outstanding``). Responses come back in request order, so a second
    set of counters says where each lands; every response is taken at once.

    Parameters
    ----------
    geometry : Geometry

    Ports
    -----
    hbm : Out(MemoryPortSignature(addr_width=hbm_addr_width, words=words_per_cycle))
        Reads only.
    uniq_read : In(ReadPort.Signature)
        The dedup unit's ``uniq`` records (slot -> id).
    unique : In(range(max_unique + 1))
        Slots taken so far; ``ids_done``: no more will be.
    with_state : In(1)
        Fetch the accumulators too (Adagrad). Held for the batch.
    rows_ring, rows_post, state_post : Out(ReadPort.Signature)
        Synchronous read ports of the row Spmem (two) and the state Spmem: line
        ``u * chunks + c`` is chunk ``c`` of slot ``u``.
    hbm_reads : Out(range(max_unique + 1))
        Table rows requested: one per slot, never one per occurrence.
    done : Out(1)
        Every slot's lines requested and answered.
    """

    def __init__(self, *, geometry):
        self.geometry = g = geometry
        lines = g.max_unique * g.chunks
        self.rows_mem = MemoryData(shape=chunk_layout, depth=lines, init=[])
        self.state_mem = MemoryData(shape=chunk_layout, depth=lines, init=[])
        spmem_port = ReadPort.Signature(addr_width=index_bits(lines), shape=chunk_layout)
        super().__init__({
            "hbm": Out(MemoryPortSignature(addr_width=g.hbm_addr_width,
                                           words=g.words_per_cycle)),
            "uniq_read": In(ReadPort.Signature(addr_width=index_bits(g.max_unique),
                                               shape=g.uniq_layout)),
            "unique": In(range(g.max_unique + 1)),
            "ids_done": In(1),
            "with_state": In(1),
            "rows_ring": Out(spmem_port), "rows_post": Out(spmem_port),
            "state_post": Out(spmem_port),
            "hbm_reads": Out(range(g.max_unique + 1)),
            "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        m.submodules.rows_mem = rows_mem = Memory(data=self.rows_mem)
        m.submodules.state_mem = state_mem = Memory(data=self.state_mem)
        for port, memory in ((self.rows_ring, rows_mem), (self.rows_post, rows_mem),
                             (self.state_post, state_mem)):
            read = memory.read_port()
            m.d.comb += [read.addr.eq(port.addr), read.en.eq(port.en), port.data.eq(read.data)]
        req, resp = self.hbm.req, self.hbm.resp
        lpr = g.lines_per_row

        # Issue: slot u_next is read from `uniq` while the issue stage requests its lines.
        u_next = Signal(range(g.max_unique + 1))
        issuing = Signal()
        part = Signal()                       # 0: table row, 1: its accumulators
        line = Signal(index_bits(lpr))
        row_id = self.uniq_read.data.id
        accepted = Signal()
        last_line = Signal()
        load = Signal()
        more = Signal()
        m.d.comb += [
            req.valid.eq(issuing),
            req.payload.write.eq(0),
            req.payload.addr.eq(Mux(part, g.state_base, 0) + row_id * lpr + line),
            accepted.eq(req.valid & req.ready),
            last_line.eq((line == lpr - 1) & (part | ~self.with_state)),
            load.eq(~issuing | (accepted & last_line)),
            more.eq(u_next < self.unique),
            self.uniq_read.addr.eq(u_next),
            self.uniq_read.en.eq(load),        # holds the id while its lines issue
        ]
        with m.If(load):
            m.d.sync += [issuing.eq(more), part.eq(0), line.eq(0)]
            with m.If(more):
                m.d.sync += u_next.eq(u_next + 1)
        with m.Elif(accepted):
            m.d.sync += [line.eq(Mux(line == lpr - 1, 0, line + 1)),
                         part.eq(part | (line == lpr - 1))]
        with m.If(accepted & ~part & ~line.any()):
            m.d.sync += self.hbm_reads.eq(self.hbm_reads + 1)

        # Responses, in request order: slot, part and line by counting.
        r_slot = Signal(g.slot_shape)
        r_part = Signal()
        r_line = Signal(index_bits(lpr))
        taken = Signal()
        outstanding = Signal(range(2 * g.max_unique * lpr + 1))
        m.d.comb += [resp.ready.eq(1), taken.eq(resp.valid)]
        m.d.sync += outstanding.eq(outstanding + accepted - taken)
        r_last = (r_line == lpr - 1) & (r_part | ~self.with_state)
        with m.If(taken):
            m.d.sync += [r_line.eq(Mux(r_line == lpr - 1, 0, r_line + 1)),
                         r_part.eq(Mux(r_last, 0, r_part | (r_line == lpr - 1))),
                         r_slot.eq(r_slot + r_last)]
        w, per_chunk = g.words_per_cycle, g.lines_per_chunk
        shift = per_chunk.bit_length() - 1      # lines_per_chunk is a power of two
        chunk = r_line >> shift
        place = Signal(LANES)                   # the words of the chunk this line fills
        m.d.comb += place.eq(Const((1 << w) - 1, LANES) << (r_line[:shift] * w) if shift
                             else (1 << LANES) - 1)
        for memory, which in ((rows_mem, 0), (state_mem, 1)):
            write = memory.write_port(granularity=1)      # one enable per word
            m.d.comb += [
                write.addr.eq(r_slot * g.chunks + chunk),
                # The line's words, repeated across the chunk; the enable picks their place.
                write.data.as_value().eq(resp.payload.data.as_value().replicate(per_chunk)),
                write.en.eq(Mux(taken & (r_part == which), place, 0)),
            ]
        m.d.comb += self.done.eq(self.ids_done & (u_next == self.unique) & ~issuing
                                 & ~outstanding.any())
        return m
