"""The queue between the sequencer and the VPU: one entry per bundle, unpacked into beats."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_bool, check_int
from ..lib.stream_queue import StreamQueue
from ..vpu.layouts import PROGRAM_LAYOUT
from .isa import VECTOR_SLOTS

__all__ = ["VECTOR_LAYOUT", "VectorQueue"]

#: A bundle's vector slots, in VPU order (vld, valu0, valu1, push, pop, vst): the words
#: (vld/vst bases already patched) and which of them are not nops.
VECTOR_LAYOUT = data.StructLayout({"words": data.ArrayLayout(32, len(VECTOR_SLOTS)),
                                   "used": len(VECTOR_SLOTS)})


def _lowest(bits, name, m):
    """One-hot of the lowest set bit of ``bits`` (0 if none)."""
    onehot = Signal(len(bits), name=name)
    m.d.comb += onehot.eq(bits & (~bits + 1))
    return onehot


def _select(onehot, words):
    value = 0
    for k, word in enumerate(words):
        value = value | Mux(onehot[k], word, 0)
    return value


class VectorQueue(wiring.Component):
    """Decouples the VPU from the sequencer: bundles' vector words queue here, and leave
    as the VPU's program beats, nops dropped, two words a beat.

    Parameters
    ----------
    depth : int
        Bundles the queue holds (default 4, at least 2).
    registered : bool
        False (the default): a beat is unpacked from the FIFO's head in the cycle it
        leaves. True, for FPGAs: beats leave from a register, loaded whenever it is empty
        or its beat is taken, so the VPU's issue logic, which decides ``program.ready``
        from the beat, starts at a flip-flop instead of after the unpacking.

    Ports
    -----
    bundles : In(stream.Signature(VECTOR_LAYOUT))
        One entry per bundle with at least one vector word; ``used`` must not be 0.
        ``ready`` is the FIFO's room: it does not depend on ``program``.
    program : Out(stream.Signature(PROGRAM_LAYOUT))
        To :class:`~hdl.vpu.vpu.VPU`'s ``program``: the used words in slot order, two
        per beat (one in a bundle's last beat when it has an odd count).
    empty : Out(1)
        Nothing is queued, being unpacked or in the beat register.

    Latency: an entry written in cycle ``t`` can leave from cycle ``t + 2`` (the FIFO's
    output register), or ``t + 3`` when ``registered``.
    Throughput: one beat a cycle; an entry of ``n`` words takes ``ceil(n / 2)`` beats.
    Stall rules: while ``program.ready`` is low the beat holds; entries are taken
    while the FIFO has room, so the sequencer runs up to ``depth`` bundles ahead.
    """

    def __init__(self, *, depth=4, registered=False):
        self.depth = check_int("depth", depth, least=2)
        self.registered = check_bool("registered", registered)
        super().__init__({
            "bundles": In(stream.Signature(VECTOR_LAYOUT)),
            "program": Out(stream.Signature(PROGRAM_LAYOUT)),
            "empty": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = fifo = StreamQueue(shape=VECTOR_LAYOUT, depth=self.depth,
                                               buffered=True)
        wiring.connect(m, wiring.flipped(self.bundles), fifo.i)
        head = fifo.o.payload
        sent = Signal(len(VECTOR_SLOTS))            # words of the head already sent
        left = Signal(len(VECTOR_SLOTS))
        m.d.comb += left.eq(head.used & ~sent)
        first = _lowest(left, "first", m)
        rest = Signal(len(VECTOR_SLOTS))
        m.d.comb += rest.eq(left & ~first)
        second = _lowest(rest, "second", m)
        last = ~(rest & ~second).any()              # this beat empties the head
        words = list(head.words)
        beat = Signal(PROGRAM_LAYOUT)
        m.d.comb += [beat.words[0].eq(_select(first, words)),
                     beat.words[1].eq(_select(second, words)),
                     beat.count.eq(Mux(rest.any(), 2, 1))]
        taken = Signal()                            # the head's beat leaves it this cycle
        held = Signal()                             # a beat waits in the register
        if self.registered:
            load = ~held | self.program.ready
            with m.If(load):
                m.d.sync += [held.eq(fifo.o.valid), self.program.payload.eq(beat)]
            m.d.comb += [self.program.valid.eq(held), taken.eq(fifo.o.valid & load)]
        else:
            m.d.comb += [self.program.valid.eq(fifo.o.valid), self.program.payload.eq(beat),
                         taken.eq(fifo.o.valid & self.program.ready)]
        m.d.comb += [fifo.o.ready.eq(taken & last),
                     self.empty.eq((fifo.level == 0) & ~held)]
        with m.If(taken):
            m.d.sync += sent.eq(Mux(last, 0, sent | first | second))
        return m
