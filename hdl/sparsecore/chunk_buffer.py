"""A Spmem buffer filled in order from a stream of row chunks (the bags' gradients)."""

from amaranth.hdl import MemoryData, Module
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory, ReadPort
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int
from .layouts import chunk_layout, index_bits

__all__ = ["ChunkBuffer"]


class ChunkBuffer(wiring.Component):
    """``depth`` lines of 8 words, written in stream order from line 0.

    Parameters
    ----------
    depth : int
        Lines held (for gradients: ``max_bags * chunks``, bag ``b``'s chunk ``c`` at
        line ``b * chunks + c``).

    Ports
    -----
    fill : In(stream.Signature(chunk_layout))
        Always ready: one line a cycle. Beats beyond ``depth`` wrap (the runner
        never sends them).
    read : Out(ReadPort.Signature(addr_width, chunk_layout))
        A synchronous read port.
    filled : Out(range(depth + 1))
        Lines written so far.
    """

    def __init__(self, *, depth):
        check_int("depth", depth, least=1)
        self.depth = depth
        self.lines = MemoryData(shape=chunk_layout, depth=depth, init=[])
        super().__init__({
            "fill": In(stream.Signature(chunk_layout)),
            "read": Out(ReadPort.Signature(addr_width=index_bits(depth), shape=chunk_layout)),
            "filled": Out(range(depth + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.lines = lines = Memory(data=self.lines)
        write, read = lines.write_port(), lines.read_port()
        m.d.comb += [
            self.fill.ready.eq(1),
            write.addr.eq(self.filled), write.data.eq(self.fill.payload),
            write.en.eq(self.fill.valid),
            read.addr.eq(self.read.addr), read.en.eq(self.read.en),
            self.read.data.eq(read.data),
        ]
        with m.If(self.fill.valid):
            m.d.sync += self.filled.eq(self.filled + 1)
        return m
