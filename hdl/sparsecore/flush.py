"""Flush unit: writes each updated row chunk (and its accumulators) back to HBM."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.memory_port import WORD_BITS, MemoryPortSignature
from .layouts import index_bits

__all__ = ["FlushUnit"]


class FlushUnit(wiring.Component):
    """Scatters finished chunks to HBM: chunk ``c`` of row ``id`` to HBM lines
    ``id * lines_per_row + c * lines_per_chunk ...``, then (with ``with_state``) the
    chunk's accumulators to the same lines of the state region.

    Together with the fetch unit this is one read-modify-write per unique row: the
    update sequencer visits each slot once, so each row (and its state) is written
    exactly once, in first-occurrence order, whole lines with every word enabled.

    Parameters
    ----------
    geometry : Geometry

    Ports
    -----
    results : In(stream.Signature(result_layout))
        Taken when its last line write is accepted.
    with_state : In(1)
        Write the accumulators too (Adagrad). Held for the batch.
    hbm : Out(MemoryPortSignature(addr_width=hbm_addr_width, words=words_per_cycle))
        Writes only, one line a cycle while the HBM is ready.
    """

    def __init__(self, *, geometry):
        self.geometry = g = geometry
        super().__init__({
            "results": In(stream.Signature(g.result_layout)),
            "with_state": In(1),
            "hbm": Out(MemoryPortSignature(addr_width=g.hbm_addr_width,
                                           words=g.words_per_cycle)),
        })

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        per_chunk, w = g.lines_per_chunk, g.words_per_cycle
        part = Signal()                      # 0: the row chunk, 1: its accumulators
        line = Signal(index_bits(per_chunk))
        rec = self.results.payload
        req = self.hbm.req
        words = Mux(part, rec.state.as_value(), rec.row.as_value())
        pieces = [words[WORD_BITS * w * i:WORD_BITS * w * (i + 1)] for i in range(per_chunk)]
        last = Signal()
        m.d.comb += [
            last.eq((line == per_chunk - 1) & (part | ~self.with_state)),
            req.valid.eq(self.results.valid),
            req.payload.write.eq(1),
            req.payload.addr.eq(Mux(part, g.state_base, 0) + rec.id * g.lines_per_row
                                + rec.c * per_chunk + line),
            req.payload.mask.eq((1 << w) - 1),
            self.results.ready.eq(req.ready & last),
            self.hbm.resp.ready.eq(1),
        ]
        # The line's words, by a case on `line` (an indexed part-select would export as a
        # wide shift).
        selected = Signal(WORD_BITS * w)
        with m.Switch(line):
            for index in range(per_chunk):
                with m.Case(index):
                    m.d.comb += selected.eq(pieces[index])
        m.d.comb += req.payload.data.as_value().eq(selected)
        with m.If(req.valid & req.ready):
            m.d.sync += line.eq(Mux(line == per_chunk - 1, 0, line + 1))
            with m.If(line == per_chunk - 1):
                m.d.sync += part.eq(~last)
        return m
