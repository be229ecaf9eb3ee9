"""Synthesizable stream endpoints that replace a testbench: a player and a recorder.

A player sends the beats held in its memory into a design's input stream; a
recorder accepts a design's output stream into its memory. Both draw seeded
random gaps (``valid`` low, ``ready`` low) from their own xorshift generator
and stamp the cycles of their first and last transfers, so a whole run needs
no testbench action per cycle and behaves identically on every simulator and
on an FPGA.

Either endpoint is built in one of two ways:

- **whole** (``ring=False``): the memory holds every beat of the run, so its
  depth follows the data;
- **ring** (``ring=True``): the memory is a ring of ``depth`` entries (a power
  of two) and the counts are :data:`COUNT_BITS` wide, so one build serves a
  run of any length. A host keeps the ring going from outside: it writes a
  player's beats ahead of it and says how many with ``available``, and reads a
  recorder's beats behind it and says how many with ``drained``. A host that
  keeps up (a simulator's testbench between clock edges) changes no cycle of
  the run; one that falls behind stalls the stream, never corrupts it.
"""

from amaranth.hdl import Module, Mux, Shape, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory, WritePort
from amaranth.lib.wiring import In, Out

from ..lib.xorshift import GAP_BITS, Xorshift32

__all__ = ["StreamPlayer", "StreamRecorder", "check_depth", "COUNT_BITS"]

#: Width of the cycle counter and of the transfer time stamps.
TIME_BITS = 32
#: Width of a ring endpoint's beat counts (``count``, ``transfers``, ``available``,
#: ``drained``): a run of up to 2**32 - 1 beats a stream, whatever the ring's depth.
COUNT_BITS = 32


def check_depth(depth):
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
        raise ValueError(f"depth must be a positive integer, not {depth!r}")
    return depth


def _counts(depth, ring):
    """The shape of an endpoint's beat counts: up to its depth, or anything for a ring."""
    if ring and (depth < 2 or depth & (depth - 1)):
        # Two entries at least: the beat on offer, and the next one written behind it.
        raise ValueError(f"a ring's depth must be a power of two from 2, not {depth}")
    # A power of two wraps the address for free: the memory takes the count's low bits.
    return COUNT_BITS if ring else range(depth + 1)


def _endpoint_ports(counts):
    return {
        "start": In(1), "count": In(counts), "gap": In(GAP_BITS + 1),
        "seed": In(32), "now": In(TIME_BITS),
        "transfers": Out(counts), "first": Out(TIME_BITS), "last": Out(TIME_BITS),
    }


def _beat_memory(shape, depth):
    # Raw payload bits rather than the payload's layout, so a testbench loads
    # and reads packed integers.
    return Memory(shape=Shape.cast(shape).width, depth=depth, init=[])


def _write_signature(memory):
    return WritePort.Signature(addr_width=max(1, (memory.depth - 1).bit_length()),
                               shape=memory.shape)


def _gap(m, endpoint):
    """A signal that is high on a random cycle with probability ``gap / 2**GAP_BITS``."""
    m.submodules.random = random = Xorshift32()
    gap = Signal()
    m.d.comb += [random.seed.eq(endpoint.seed), random.run.eq(endpoint.start),
                 gap.eq(random.value[:GAP_BITS] < endpoint.gap)]
    return gap


def _count_transfers(m, endpoint, moved):
    with m.If(moved):
        m.d.sync += [endpoint.transfers.eq(endpoint.transfers + 1), endpoint.last.eq(endpoint.now)]
        with m.If(endpoint.transfers == 0):
            m.d.sync += endpoint.first.eq(endpoint.now)


class StreamPlayer(wiring.Component):
    """Sends beats ``0 .. count - 1`` of its memory into ``stream``, in order.

    Parameters
    ----------
    shape : shape-castable
        The payload of the stream.
    depth : int
        Entries of the beat memory (named ``beats``, so a simulator's testbench
        can load it directly).
    ring : bool
        The memory is a ring: beat ``i`` lives at entry ``i % depth`` (``depth``
        a power of two), and the counts are :data:`COUNT_BITS` wide.

    Ports
    -----
    stream : Out(stream.Signature(shape))
    start : In(1)
        Hold high for the run; while low the endpoint idles and reseeds.
    count : In(range(depth + 1)), or In(COUNT_BITS) for a ring
        Beats to send.
    available : In, as ``count``
        Beats written into memory so far; a beat at or beyond it waits
        (``valid`` low) until it is written. Tie to ``count`` for a preloaded
        memory. A ring's host may write beat ``i`` once ``transfers`` has
        passed ``i - depth`` (the beat it replaces has been sent).
    gap : In(17)
        Idle probability in units of 2^-16: on each cycle a new beat could be
        offered, it is held back with that probability.
    seed : In(32)
        Seed of the gap generator.
    now : In(32)
        The cycle counter the time stamps are taken from.
    fill : In(WritePort.Signature)
        Writes into the beat memory while the run goes on (a recorder's loop back).
    transfers : Out, as ``count``
    first, last : Out(32)
        ``now`` at the first and the latest transfer.

    Latency one cycle from a beat becoming available to ``valid``; throughput
    one beat per cycle. Once ``valid`` is high it stays high with the same
    payload until ``ready``, as the stream rules require. At most one beat is
    read ahead of ``transfers`` (the one offered), so a ring whose host keeps
    ``available`` at ``transfers + depth`` (or at ``count``) never stalls
    (``depth`` of 2 or more).
    """

    def __init__(self, *, shape, depth, ring=False):
        self.depth = check_depth(depth)
        self.ring = bool(ring)
        counts = _counts(depth, self.ring)
        self.beats = _beat_memory(shape, depth)
        super().__init__(_endpoint_ports(counts) | {
            "stream": Out(stream.Signature(shape)), "available": In(counts),
            "fill": In(_write_signature(self.beats))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.beats = self.beats
        gap = _gap(m, self)
        read, fill = self.beats.read_port(), self.beats.write_port()
        m.d.comb += [fill.en.eq(self.fill.en), fill.addr.eq(self.fill.addr),
                     fill.data.eq(self.fill.data)]

        fetched = Signal.like(self.count)      # beats read out of memory so far
        valid = Signal()
        free = ~valid | self.stream.ready
        offer = self.start & (fetched < self.count) & (fetched < self.available) & ~gap
        # The read port's data register is the payload register: it holds
        # while a beat waits, and loads the next beat when the slot frees.
        # The payload is zero while no beat is offered: a read port's data
        # register has no reset value in Verilog, and its X would reach the
        # design's datapath on an event-driven simulator. The address takes
        # the count's low bits: a ring wraps, a whole memory never gets there.
        m.d.comb += [read.en.eq(free), read.addr.eq(fetched),
                     self.stream.valid.eq(valid),
                     self.stream.payload.eq(Mux(valid, read.data, 0))]
        with m.If(free):
            m.d.sync += valid.eq(offer)
            with m.If(offer):
                m.d.sync += fetched.eq(fetched + 1)
        _count_transfers(m, self, self.stream.valid & self.stream.ready)
        return m


class StreamRecorder(wiring.Component):
    """Accepts ``count`` beats from ``stream`` into its memory, in order.

    Parameters
    ----------
    shape : shape-castable
    depth : int
        Entries of the beat memory (named ``beats``).
    ring : bool
        As for :class:`StreamPlayer`: beat ``i`` goes to entry ``i % depth``.

    Ports
    -----
    stream : In(stream.Signature(shape))
    start, count, gap, seed, now, transfers, first, last
        As for :class:`StreamPlayer`; ``gap`` is the probability that
        ``ready`` is low on a cycle (backpressure).
    drained : In(COUNT_BITS), rings only
        Beats the host has read out of the ring so far; ``ready`` is low while
        ``depth`` beats wait to be read, so none is overwritten.
    written : Out(WritePort.Signature)
        The memory write of each beat, for a player that replays the beats.

    ``ready`` is low once ``count`` beats have arrived, so an extra beat is
    never swallowed: it stays offered, and the run's watchdog reports it. A
    beat is in memory from the cycle after its transfer, so a ring's host that
    reads every beat before the next clock edge never holds ``ready`` low.
    """

    def __init__(self, *, shape, depth, ring=False):
        self.depth = check_depth(depth)
        self.ring = bool(ring)
        counts = _counts(depth, self.ring)
        self.beats = _beat_memory(shape, depth)
        super().__init__(_endpoint_ports(counts) | {
            "stream": In(stream.Signature(shape)),
            "written": Out(_write_signature(self.beats))}
            | ({"drained": In(counts)} if self.ring else {}))

    def elaborate(self, platform):
        m = Module()
        m.submodules.beats = self.beats
        gap = _gap(m, self)
        write = self.beats.write_port()
        take = Signal()
        accept = self.start & (self.transfers < self.count) & ~gap
        if self.ring:
            # The beats taken and not yet read out (a wrapping difference): a full
            # ring takes no more, so no beat is overwritten before it is read.
            waiting = Signal.like(self.transfers)
            m.d.comb += waiting.eq(self.transfers - self.drained)
            accept &= waiting < self.depth
        m.d.comb += [
            self.stream.ready.eq(accept),
            take.eq(self.stream.valid & self.stream.ready),
            write.en.eq(take), write.addr.eq(self.transfers), write.data.eq(self.stream.payload),
            self.written.en.eq(take), self.written.addr.eq(self.transfers),
            self.written.data.eq(self.stream.payload),
        ]
        _count_transfers(m, self, take)
        return m
