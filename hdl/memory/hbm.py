"""HBM model: a word store behind one memory port, with latency, bandwidth, jitter and faults."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..lib.logic import any_of
from ..lib.memory_port import WORD_BITS, MemoryPortSignature, line_addr_width, memory_data
from ..lib.xorshift import Xorshift32
from ..lib.params import check_int, check_power_of_two

__all__ = ["HBM", "check_hbm_params"]

#: Width of the cycle counter the due times are stamped from. A response must be taken
#: within 2**31 cycles of falling due (the due test compares modulo 2**32).
TIME_BITS = 32
#: Random bits that scale the jitter.
JITTER_BITS = 16


def _is_pow2(value):
    return value & (value - 1) == 0


def check_hbm_params(*, size, words_per_cycle=1, read_latency=4, max_outstanding=None,
                     jitter=0, error_ranges=()):
    """Raise what :class:`HBM` raises for these parameters, without building one (a block
    that builds its HBM in ``elaborate`` refuses them at once). Returns ``max_outstanding``
    (its default filled in) and the error ranges as a tuple of pairs."""
    check_power_of_two("words_per_cycle", words_per_cycle)
    check_int("size", size, least=1)
    if size % words_per_cycle:
        raise ValueError(f"size ({size}) must be a multiple of words_per_cycle "
                         f"({words_per_cycle})")
    check_int("read_latency", read_latency, least=1, most=1 << 20)
    if max_outstanding is None:
        max_outstanding = words_per_cycle * read_latency
    check_int("max_outstanding", max_outstanding, least=words_per_cycle, most=1 << 20)
    if max_outstanding % words_per_cycle:
        raise ValueError(f"max_outstanding ({max_outstanding}) must be a multiple of "
                         f"words_per_cycle ({words_per_cycle})")
    check_int("jitter", jitter, least=0, most=1 << 20)
    ranges = []
    for item in error_ranges:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise TypeError(f"an error range must be a pair (lo, hi), not {item!r}")
        lo, hi = (check_int("error range bound", v, least=0, most=size) for v in item)
        if lo >= hi or lo % words_per_cycle or hi % words_per_cycle:
            raise ValueError(f"error range {item!r} must be lo < hi, both multiples of "
                             f"words_per_cycle ({words_per_cycle})")
        ranges.append((lo, hi))
    return max_outstanding, tuple(ranges)


class HBM(wiring.Component):
    """HBM model: ``size`` words in lines of ``words_per_cycle`` words.

    The timing is ``golden.memory.HbmTiming`` counted in lines: at most one request (one
    line, ``words_per_cycle`` words) is accepted per cycle; a read accepted in cycle ``a``
    answers in cycle ``a + read_latency`` (plus jitter), in request order; at most
    ``max_outstanding / words_per_cycle`` reads are in flight, a read being in flight from
    its accept until the cycle it is taken, so a response taken frees its slot for a read
    accepted in that same cycle. With ``words_per_cycle = 1`` this is ``HbmTiming`` word for
    word; wider, it is ``HbmTiming`` for a trace of whole aligned lines.

    Requests are performed when accepted: a read returns the line as it was in its accept
    cycle, so requests take effect in their order whatever the latency.

    Parameters
    ----------
    size : int
        Words of storage, a positive multiple of ``words_per_cycle``.
    words_per_cycle : int
        Bandwidth and line width, a power of two (default 1).
    read_latency : int
        Cycles from a read accepted to its response valid, at least 1 (default 4).
    max_outstanding : int
        Words of reads in flight, a multiple of ``words_per_cycle``; default
        ``words_per_cycle * read_latency``, the least that streams at full bandwidth
        (Little's law: in flight = rate x latency).
    jitter : int
        Up to this many extra cycles of latency on each read (default 0, off), drawn from a
        seeded xorshift; responses stay in order, so a late read delays those behind it.
    error_ranges : sequence of (lo, hi)
        Word ranges ``lo <= address < hi``, at line boundaries, that fault: a read there
        answers ``error = 1`` with zero data, on time; a write there is dropped and raises
        ``write_fault``.
    words : MemoryData or None
        The storage to use (see :attr:`words`), for a system that keeps it from its own
        ``__init__`` and builds this component in ``elaborate``; by default a new one.

    Ports
    -----
    port : In(MemoryPortSignature(addr_width, words=words_per_cycle))
        ``req.ready`` is high while a read slot is free (counting one freed by a response
        taken in this cycle, so it follows ``resp.ready`` combinationally); it does not
        depend on ``req.valid`` or the payload. ``resp`` holds its beat until taken.
    seed : In(32)
        Seed of the jitter generator, loaded on every clock edge while ``start`` is low:
        hold ``start`` low for at least one edge after setting it.
    start : In(1)
        While high the jitter generator steps every cycle; requests are served either way.
    outstanding : Out(range(slots + 1))
        Reads in flight, for a testbench to observe.
    write_fault : Out(1)
        Sticky: a write hit an error range.
    write_fault_addr : Out(addr_width)
        The line address of the first such write.

    Attributes
    ----------
    words : MemoryData
        The storage, built as the ``Memory`` submodule named ``words``: entry ``l`` is line
        ``l``, word ``j`` in bits ``32*j .. 32*j + 31``, so a testbench loads and reads it
        directly (``ctx.set(hbm.words[l], ...)``).
    """

    def __init__(self, *, size, words_per_cycle=1, read_latency=4, max_outstanding=None,
                 jitter=0, error_ranges=(), words=None):
        max_outstanding, ranges = check_hbm_params(
            size=size, words_per_cycle=words_per_cycle, read_latency=read_latency,
            max_outstanding=max_outstanding, jitter=jitter, error_ranges=error_ranges)
        self.size = size
        self.words_per_cycle = words_per_cycle
        self.read_latency = read_latency
        self.max_outstanding = max_outstanding
        self.jitter = jitter
        self.error_ranges = tuple(ranges)
        self.lines = size // words_per_cycle
        self.slots = max_outstanding // words_per_cycle
        self.addr_width = line_addr_width(self.lines)
        self.words = memory_data("words", words, shape=WORD_BITS * words_per_cycle,
                                 depth=self.lines)
        super().__init__({
            "port": In(MemoryPortSignature(addr_width=self.addr_width, words=words_per_cycle)),
            "seed": In(32),
            "start": In(1),
            "outstanding": Out(range(self.slots + 1)),
            "write_fault": Out(1),
            "write_fault_addr": Out(self.addr_width),
        })

    def elaborate(self, platform):
        m = Module()
        w, slots = self.words_per_cycle, self.slots
        req, resp = self.port.req, self.port.resp
        m.submodules.words = store = Memory(data=self.words)
        read = store.read_port()
        write = store.write_port(granularity=self.port.signature.mask_granularity)

        now = Signal(TIME_BITS)
        m.d.sync += now.eq(now + 1)

        # The in-flight reads, a ring of `slots` entries in request order: each one's due
        # cycle and fault bit from its accept, its line from the cycle after (the storage
        # read port is synchronous).
        m.submodules.due = due_mem = Memory(shape=TIME_BITS + 1, depth=slots, init=[])
        m.submodules.lines = line_mem = Memory(shape=WORD_BITS * w, depth=slots, init=[])
        due_w, due_r = due_mem.write_port(), due_mem.read_port(domain="comb")
        line_w, line_r = line_mem.write_port(), line_mem.read_port(domain="comb")
        head = Signal(range(slots))
        tail = Signal(range(slots))
        count = Signal(range(slots + 1))

        def advanced(pointer):
            return pointer + 1 if _is_pow2(slots) else Mux(pointer == slots - 1, 0, pointer + 1)

        accept = Signal()
        accept_read = Signal()
        pop = Signal()
        faulty = Signal()
        if self.error_ranges:
            lo_hi = [(lo // w, hi // w) for lo, hi in self.error_ranges]
            m.d.comb += faulty.eq(any_of([(req.payload.addr >= lo) & (req.payload.addr < hi)
                                          for lo, hi in lo_hi]))
        m.d.comb += [
            req.ready.eq(count - pop < slots),
            accept.eq(req.valid & req.ready),
            accept_read.eq(accept & ~req.payload.write),
            self.outstanding.eq(count),
        ]

        # Jitter: the extra cycles are a random fraction of (jitter + 1), scaled by a
        # multiply rather than a modulo so any bound is cheap.
        extra = Signal(range(self.jitter + 2))      # at least one bit, even without jitter
        if self.jitter:
            m.submodules.random = random = Xorshift32()
            m.d.comb += [random.seed.eq(self.seed), random.run.eq(self.start),
                         extra.eq((random.value[:JITTER_BITS] * (self.jitter + 1))
                                  >> JITTER_BITS)]

        m.d.comb += [
            read.addr.eq(req.payload.addr), read.en.eq(accept_read),
            write.addr.eq(req.payload.addr), write.data.eq(req.payload.data),
            write.en.eq(Mux(accept & req.payload.write & ~faulty, req.payload.mask, 0)),
            due_w.addr.eq(tail), due_w.en.eq(accept_read),
            due_w.data.eq(Cat((now + self.read_latency + extra)[:TIME_BITS], faulty)),
        ]
        with m.If(accept & req.payload.write & faulty & ~self.write_fault):
            m.d.sync += [self.write_fault.eq(1), self.write_fault_addr.eq(req.payload.addr)]

        # The line read in the accept cycle lands in its slot a cycle later; a read due
        # that very cycle (read_latency 1) takes it from the read port directly.
        captured = Signal()
        captured_slot = Signal(range(slots))
        m.d.sync += [captured.eq(accept_read), captured_slot.eq(tail)]
        m.d.comb += [line_w.addr.eq(captured_slot), line_w.data.eq(read.data),
                     line_w.en.eq(captured)]
        with m.If(accept_read):
            m.d.sync += tail.eq(advanced(tail))

        head_fault = due_r.data[TIME_BITS]
        # Whether the head is due, from a register: worked out a cycle ahead for the head
        # of the next cycle (this one, or the one after it if this cycle pops), from the
        # due table as this cycle's write leaves it, so that `valid`, and through `pop` the
        # port's `ready`, wait on no table read and 32-bit compare. Due when now - due,
        # modulo 2**32, is "non-negative".
        due_after = due_mem.read_port(domain="comb")
        after = Signal(range(slots))
        m.d.comb += [after.eq(advanced(head)), due_after.addr.eq(after)]
        fresh_due = Const(self.read_latency == 1) & (extra == 0)   # a read accepted now

        def due_next_cycle(slot, entry):
            return Mux(accept_read & (tail == slot), fresh_due,
                       ~(now + 1 - entry[:TIME_BITS])[TIME_BITS - 1])

        ripe = Signal()
        m.d.sync += ripe.eq(Mux(pop, due_next_cycle(after, due_after.data),
                                due_next_cycle(head, due_r.data)))
        m.d.comb += [
            due_r.addr.eq(head), line_r.addr.eq(head),
            resp.valid.eq((count != 0) & ripe),
            pop.eq(resp.valid & resp.ready),
            resp.payload.error.eq(head_fault),
        ]
        line = Mux(captured & (captured_slot == head), read.data, line_r.data)
        m.d.comb += resp.payload.data.as_value().eq(Mux(head_fault, 0, line))
        with m.If(pop):
            m.d.sync += head.eq(advanced(head))
        m.d.sync += count.eq(count + accept_read - pop)
        return m
