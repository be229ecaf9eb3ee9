"""A ``dma``'s descriptor record, read from SMEM through two ports, and the next record
read ahead while the sequencer goes on."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.memory_port import MemoryPortSignature, line_addr_width
from ..lib.params import check_int

__all__ = ["RecordReader", "record_request_layout"]

#: The judge's request: the record at SMEM word ``address``.
record_request_layout = data.StructLayout({"address": 32})


class RecordReader(wiring.Component):
    """Reads ``words``-word records from SMEM, and reads the next one ahead.

    With ``ports=2`` a record is read through two SMEM ports at once: ``smem`` from its
    first word up, ``window`` words a request, and ``spare`` from its last word down, one
    a request, until they meet. A request for a record not read yet is taken
    ``ceil(words / (window + 1)) + 2`` cycles after it is first made when both ports are
    free (8 for 12 words on one-word ports, 4 with ``window=8``), and
    ``ceil(words / window) + 2`` when ``spare`` is taken (and always with ``ports=1``:
    ``smem`` alone). Records of a program sit one after another, so once a record is taken
    the reader reads the next (``address + words``) ahead, when it lies in SMEM; a request
    for it then finds it read. Anything written to SMEM (``written``) makes the record read
    stale: a request for it reads it again.

    Parameters
    ----------
    smem_words : int
        SMEM words; a record read ahead must lie in them (requests are range-checked by
        the caller).
    words : int
        Words per record, at least 1.
    ports : int
        2 (the default): read through ``smem`` and ``spare``; 1: ``smem`` only, for an
        SMEM whose two ports share one RAM port, where a second port reads nothing more.
    window : int
        Words ``smem`` reads a request (default 1): SMEM's ``window`` port
        (:class:`~hdl.memory.vmem.VMEM`), or its second port with 1.

    Ports
    -----
    request : In(stream.Signature(record_request_layout))
        The record wanted. Taken (``ready``) in the cycle ``record`` holds it: read in
        full, since SMEM was last written, from ``address``. A request may change while it
        waits.
    record : Out(data.ArrayLayout(32, words))
        The record read (valid as above).
    smem : Out(MemoryPortSignature(addr_width, words=window))
        Reads only, the reader's own: words ``addr`` to ``addr + window - 1``. Answers in
        request order; responses are always taken.
    spare : Out(MemoryPortSignature(addr_width, words=1)), with ``ports=2``
        Reads only, shared: its requests may wait any number of cycles (for its owner's).
        Answers in request order; responses are always taken.
    written : In(1)
        SMEM is written this cycle (by anyone else).

    Latency: a request for a record not read cuts short any read of another under way
    (waiting for the answers asked), then waits for its own (above). Throughput: one
    record per read time; a record read ahead is taken in the cycle it is requested.
    """

    def __init__(self, *, smem_words, words, ports=2, window=1):
        self.smem_words = check_int("smem_words", smem_words, least=1)
        self.words = check_int("words", words, least=1)
        self.ports = check_int("ports", ports, least=1, most=2)
        self.window = check_int("window", window, least=1)
        addr_width = line_addr_width(smem_words)
        super().__init__({
            "request": In(stream.Signature(record_request_layout)),
            "record": Out(data.ArrayLayout(32, words)),
            "smem": Out(MemoryPortSignature(addr_width=addr_width, words=window)),
            **({"spare": Out(MemoryPortSignature(addr_width=addr_width, words=1))}
               if ports == 2 else {}),
            "written": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        n, w = self.words, self.window
        tag = Signal(32)                       # the record's address
        have = Signal()                        # a read of `tag` has started
        stale = Signal()                       # SMEM written since it started
        stop = Signal()                        # another record is wanted: ask no more
        # `low` may pass the record's end by a window less a word.
        low, top = Signal(range(n + w)), Signal(range(n + 1), init=n)
        low_got, top_got = Signal(range(n + w)), Signal(range(n + 1), init=n)
        # Words below `low` are asked on `smem`, words from `top` on `spare`; the record is
        # read when the two meet (a word both asked in one cycle comes twice, the same)
        # and every answer is in.
        answered = (low_got == low) & (top_got == top)
        done = (low >= top) & answered
        idle = ~have | done | (stop & answered)
        address = self.request.payload.address
        hit = have & done & ~stale & (tag == address)
        asking = have & (low < top) & ~stop

        up = self.smem
        m.d.comb += [up.req.valid.eq(asking), up.req.payload.addr.eq(tag + low),
                     up.resp.ready.eq(1), self.request.ready.eq(hit)]
        with m.If(up.req.valid & up.req.ready):
            m.d.sync += low.eq(low + w)
        for k in range(n):
            for j in range(min(w, k + 1)):
                with m.If(up.resp.valid & (low_got == k - j)):
                    m.d.sync += self.record[k].eq(up.resp.payload.data[j])
        with m.If(up.resp.valid):
            m.d.sync += low_got.eq(low_got + w)
        if self.ports == 2:
            down = self.spare
            m.d.comb += [down.req.valid.eq(asking),
                         down.req.payload.addr.eq(tag + top - 1), down.resp.ready.eq(1)]
            with m.If(down.req.valid & down.req.ready):
                m.d.sync += top.eq(top - 1)
            for k in range(n):
                with m.If(down.resp.valid & (top_got == k + 1)):
                    m.d.sync += self.record[k].eq(down.resp.payload.data[0])
            with m.If(down.resp.valid):
                m.d.sync += top_got.eq(top_got - 1)

        def start(at):
            m.d.sync += [tag.eq(at), have.eq(1), stale.eq(0), stop.eq(0), low.eq(0),
                         top.eq(n), low_got.eq(0), top_got.eq(n)]

        with m.If(self.request.valid & hit):
            with m.If(address + 2 * n <= self.smem_words):
                start(address + n)
        with m.Elif(self.request.valid & idle):
            start(address)
        with m.Elif(self.request.valid & (tag != address)):
            m.d.sync += stop.eq(1)             # the read ahead guessed wrong: cut it short
        # Last, so that it wins over `start`: a read that starts as SMEM is written may
        # miss the write.
        with m.If(self.written):
            m.d.sync += stale.eq(1)
        return m
