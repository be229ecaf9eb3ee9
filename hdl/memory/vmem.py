"""VMEM: the core's vector memory, lines of ``lanes`` words with a core port and a DMA port."""

from amaranth.hdl import MemoryData, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from ..lib.memory_port import WORD_BITS, MemoryPortSignature, line_addr_width
from ..lib.params import check_int

__all__ = ["VMEM"]


class VMEM(wiring.Component):
    """``lines`` lines of ``lanes`` words, single-cycle access from two ports.

    Parameters
    ----------
    lines : int
        Lines of storage, at least 1.
    lanes : int
        Words per line (default 8): the width of both ports.

    Ports
    -----
    core, dma : In(MemoryPortSignature(addr_width, words=lanes))
        Two independent ports of the same signature. A read accepted in cycle ``t`` answers
        in cycle ``t + 1``; one request per cycle per port. ``req.ready`` is high unless a
        response is waiting untaken (``~resp.valid | resp.ready``), so a port streams one
        request a cycle while its responses are taken, and holds everything while one is
        not. A write changes the words its mask enables, visible to reads accepted in later
        cycles on either port; a read and a write of the same line on different ports in
        the same cycle read the old line. Two writes of one word in one cycle: the DMA
        port's wins. ``resp.error`` is always 0.

    Attributes
    ----------
    words : MemoryData
        The storage, built as the ``Memory`` submodule named ``words``: entry ``l`` is line
        ``l``, lane ``j`` in bits ``32*j .. 32*j + 31`` (flat word ``l * lanes + j``, as
        SPEC section 6).
    """

    def __init__(self, *, lines, lanes=8):
        check_int("lines", lines, least=1)
        check_int("lanes", lanes, least=1)
        self.lines, self.lanes = lines, lanes
        self.size = lines * lanes
        self.addr_width = line_addr_width(lines)
        # The storage only: runs load and read it before anything is elaborated.
        self.words = MemoryData(shape=WORD_BITS * lanes, depth=lines, init=[])
        port = MemoryPortSignature(addr_width=self.addr_width, words=lanes)
        super().__init__({"core": In(port), "dma": In(port)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.words = store = Memory(data=self.words)
        # Ports are built core first: of two same-cycle writes, the later port's wins.
        for port in (self.core, self.dma):
            _serve(m, store, port)
        return m


def _serve(m, store, port):
    """One single-cycle port: the read port's data register is the response register."""
    read = store.read_port()
    write = store.write_port(granularity=port.signature.mask_granularity)
    req, resp = port.req, port.resp
    accept = Signal()
    m.d.comb += [
        req.ready.eq(~resp.valid | resp.ready),
        accept.eq(req.valid & req.ready),
        read.addr.eq(req.payload.addr), read.en.eq(accept & ~req.payload.write),
        write.addr.eq(req.payload.addr), write.data.eq(req.payload.data),
        write.en.eq(Mux(accept & req.payload.write, req.payload.mask, 0)),
        resp.payload.data.as_value().eq(read.data),
    ]
    # While a response waits, the read port is not enabled, so its data holds.
    with m.If(req.ready):
        m.d.sync += resp.valid.eq(accept & ~req.payload.write)
