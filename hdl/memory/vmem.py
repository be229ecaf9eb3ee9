"""VMEM: the core's vector memory, lines of ``lanes`` words with a core port and a DMA port,
and optionally a window port of several lines a request (the VPU's whole-vreg ``vld`` and
``vst``; as SMEM, read-only, the ``dma`` records)."""

from amaranth.hdl import MemoryData, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from ..lib.memory_port import WORD_BITS, MemoryPortSignature, line_addr_width
from ..lib.params import check_int

__all__ = ["VMEM"]


class VMEM(wiring.Component):
    """``lines`` lines of ``lanes`` words, single-cycle access from two ports, and access to
    ``window`` lines in a row from a third with ``window``.

    Parameters
    ----------
    lines : int
        Lines of storage, at least 1.
    lanes : int
        Words per line (default 8): the width of both ports.
    ram_ports : int
        Ports of the storage itself: 2 (the default: each port its own, as below), or 1:
        the two ports take turns on one read-write port, which an FPGA block RAM holds
        as it is (a true-dual-port block RAM leaves a cycle in which both ports write a
        word, or one reads what the other writes, undefined, so Yosys may not map the
        two-port storage to one; docs/fpga.md). With 1, one request is accepted a cycle
        between both ports: when both have one, the port that lost the last contest
        wins this one, so neither waits more than a cycle for the other (``req.ready``
        is then also low on the port that lost, so it depends on the other port's
        ``req.valid``); everything else (latency, order, holding, masks) is as below, and
        a read sees every write accepted before it.
    window : int
        0 (the default), or the lines the ``window`` port reads a request (with
        ``ram_ports=2`` only): the storage gets that many more read ports, as banks of
        ``window`` ways would give.
    window_writes : bool
        The ``window`` port writes as well (default False: it only reads): the storage
        gets ``window`` more write ports too, as banks of ``window`` ways would give.

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
    window : In(MemoryPortSignature(addr_width, words=window * lanes)), with ``window``
        Lines ``addr`` to ``addr + window - 1``, in that order (line ``k`` of the request
        in the ``k``-th ``lanes`` words of ``data``), wrapping past the last line to line
        0. Reads only, unless ``window_writes`` (else a request's ``write``, ``mask`` and
        ``data`` are not looked at). Timing, holding and ordering against the other
        ports' writes as ``core``'s and ``dma``'s; of a window write and a ``dma`` write
        of one word in one cycle, the ``dma`` port's wins.

    Attributes
    ----------
    words : MemoryData
        The storage, built as the ``Memory`` submodule named ``words``: entry ``l`` is line
        ``l``, lane ``j`` in bits ``32*j .. 32*j + 31`` (flat word ``l * lanes + j``, as
        SPEC section 6).
    """

    def __init__(self, *, lines, lanes=8, ram_ports=2, window=0, window_writes=False):
        check_int("lines", lines, least=1)
        check_int("lanes", lanes, least=1)
        self.ram_ports = check_int("ram_ports", ram_ports, least=1, most=2)
        self.window_lines = check_int("window", window, least=0)
        if window and ram_ports == 1:
            raise ValueError(f"window={window} needs read ports of its own, which "
                             f"ram_ports=1 does not have: use window=0")
        if not isinstance(window_writes, bool):
            raise TypeError(f"window_writes must be a bool, not {window_writes!r}")
        if window_writes and not window:
            raise ValueError("window_writes=True writes through the window port, which "
                             "window=0 does not build: give window=N")
        self.window_writes = window_writes
        self.lines, self.lanes = lines, lanes
        self.size = lines * lanes
        self.addr_width = line_addr_width(lines)
        # The storage only: runs load and read it before anything is elaborated.
        self.words = MemoryData(shape=WORD_BITS * lanes, depth=lines, init=[])
        port = MemoryPortSignature(addr_width=self.addr_width, words=lanes)
        wide = {"window": In(MemoryPortSignature(addr_width=self.addr_width,
                                                 words=window * lanes))} if window else {}
        super().__init__({"core": In(port), "dma": In(port), **wide})

    def elaborate(self, platform):
        m = Module()
        m.submodules.words = store = Memory(data=self.words)
        if self.ram_ports == 1:
            _serve_in_turns(m, store, (self.core, self.dma))
            return m
        # Ports are built core first and DMA last: of two same-cycle writes, the later
        # port's wins.
        _serve(m, store, self.core)
        if self.window_lines:
            _serve_window(m, store, self.window, count=self.window_lines, lines=self.lines,
                          width=WORD_BITS * self.lanes, writes=self.window_writes)
        _serve(m, store, self.dma)
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


def _serve_window(m, store, port, *, count, lines, width, writes):
    """The port of ``count`` lines a request: a read port of the storage for each (and a
    write port, with ``writes``), at the request's line and the ``count - 1`` after it."""
    req, resp = port.req, port.resp
    accept = Signal()
    reading = accept & ~req.payload.write if writes else accept
    m.d.comb += [req.ready.eq(~resp.valid | resp.ready), accept.eq(req.valid & req.ready)]
    words = width // WORD_BITS
    for k in range(count):
        read = store.read_port()
        at = Signal.like(req.payload.addr, name=f"window_line{k}")
        m.d.comb += at.eq(Mux(req.payload.addr + k >= lines, req.payload.addr + k - lines,
                              req.payload.addr + k))
        m.d.comb += [read.addr.eq(at), read.en.eq(reading),
                     resp.payload.data.as_value()[k * width:(k + 1) * width].eq(read.data)]
        if writes:
            write = store.write_port(granularity=WORD_BITS)
            mask = req.payload.mask[k * words:(k + 1) * words]
            m.d.comb += [write.addr.eq(at),
                         write.data.eq(req.payload.data.as_value()[k * width:(k + 1) * width]),
                         write.en.eq(Mux(accept & req.payload.write, mask, 0))]
    with m.If(req.ready):
        m.d.sync += resp.valid.eq(reading)


def _serve_in_turns(m, store, ports):
    """Two ports on one read-write port of ``store`` (``ram_ports=1``). The storage's read
    data is the answer in the cycle after the read; a port whose answer waits keeps a
    copy, since the other port's next read changes the storage's."""
    read = store.read_port()
    write = store.write_port(granularity=ports[0].signature.mask_granularity)
    turn = Signal()                     # the port that wins when both have a request
    room = [~port.resp.valid | port.resp.ready for port in ports]
    want = [port.req.valid & room[k] for k, port in enumerate(ports)]
    accept = [Signal(name=f"accept{k}") for k in range(2)]
    m.d.comb += [ports[0].req.ready.eq(room[0] & (~turn | ~want[1])),
                 ports[1].req.ready.eq(room[1] & (turn | ~want[0]))]
    m.d.comb += [accept[k].eq(port.req.valid & port.req.ready) for k, port in enumerate(ports)]
    with m.If(want[0] & want[1]):
        m.d.sync += turn.eq(~turn)
    req = Mux(accept[1], ports[1].req.payload.as_value(), ports[0].req.payload.as_value())
    req = ports[0].req.payload.shape()(req)
    taken = accept[0] | accept[1]
    m.d.comb += [
        read.addr.eq(req.addr), read.en.eq(taken & ~req.write),
        write.addr.eq(req.addr), write.data.eq(req.data),
        write.en.eq(Mux(taken & req.write, req.mask, 0)),
    ]
    for k, port in enumerate(ports):
        fresh = Signal(name=f"fresh{k}")        # the storage's read data is this port's
        kept = Signal.like(read.data, name=f"kept{k}")
        m.d.sync += fresh.eq(accept[k] & ~req.write)
        with m.If(fresh):
            m.d.sync += kept.eq(read.data)
        m.d.comb += port.resp.payload.data.as_value().eq(Mux(fresh, read.data, kept))
        with m.If(room[k]):
            m.d.sync += port.resp.valid.eq(accept[k] & ~req.write)
