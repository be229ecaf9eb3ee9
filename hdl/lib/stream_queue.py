"""A typed stream queue: a synchronous FIFO with ``amaranth.lib.stream`` ports."""

from amaranth.hdl import Module, Shape
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .params import check_bool, check_int

__all__ = ["StreamQueue"]


class StreamQueue(wiring.Component):
    """A first-in first-out queue of ``depth`` entries of ``shape``, between two streams.

    It is :class:`~amaranth.lib.fifo.SyncFIFO` (or, with ``buffered``,
    :class:`~amaranth.lib.fifo.SyncFIFOBuffered`) with its write side as the ``i``
    stream and its read side as the ``o`` stream, so a block connects it with
    :func:`amaranth.lib.wiring.connect` and reads ``o.payload`` as the layout it wrote,
    instead of wiring ``w_en``/``w_rdy``/``r_data`` by hand and viewing raw bits.

    Parameters
    ----------
    shape : shape-castable
        What an entry is: a width, a :class:`~amaranth.hdl.Shape`, a
        :mod:`~amaranth.lib.data` layout or an enum.
    depth : int
        Entries the queue holds, at least 1.
    buffered : bool
        ``False`` (default): the entries sit in a memory read asynchronously, so an
        entry can leave the cycle after it was written. ``True``: the head is read
        synchronously into an output register (what FPGA block RAM needs), one cycle
        later.

    Ports
    -----
    i : In(stream.Signature(shape))
        Entries in. ``ready`` is high while fewer than ``depth`` entries are held
        (``buffered``: while fewer than ``depth - 1`` wait behind the output
        register); it does not depend on ``o.ready`` in the same cycle, so a full
        queue takes a new entry only the cycle after one leaves.
    o : Out(stream.Signature(shape))
        Entries out, in the order they came in. ``payload`` is typed as ``shape``;
        ``valid`` depends only on the queue's state, never on ``i`` in the same cycle.
    level : Out(range(depth + 1))
        Entries held (for ``buffered``, including the one in the output register).

    Latency: an entry taken in cycle ``t`` is at ``o`` from cycle ``t + 1``
    (``buffered``: ``t + 2``). Throughput: one entry in and one out every cycle,
    except a ``buffered`` queue of depth 1, which alternates between full and empty
    and so passes one entry every other cycle. Stall rules: an entry is taken only
    when ``valid`` and ``ready`` are both high; while ``o.ready`` is low the head holds
    and entries are taken until the queue is full. Nothing is lost, duplicated or
    reordered.
    """

    def __init__(self, *, shape, depth, buffered=False):
        try:
            width = Shape.cast(shape).width
        except TypeError as error:
            raise TypeError(f"shape must be shape-castable, not {shape!r}") from error
        check_bool("buffered", buffered)
        self.shape = shape
        self.width = width
        # A FIFO of depth 0 is never ready on either side: a queue that deadlocks.
        self.depth = check_int("depth", depth, least=1)
        self.buffered = buffered
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
            "level": Out(range(depth + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        kind = SyncFIFOBuffered if self.buffered else SyncFIFO
        m.submodules.fifo = fifo = kind(width=self.width, depth=self.depth)
        # The FIFO itself gates w_en with w_rdy and r_en with r_rdy, so the stream
        # handshakes map straight onto its strobes.
        m.d.comb += [
            fifo.w_data.eq(self.i.payload),
            fifo.w_en.eq(self.i.valid),
            self.i.ready.eq(fifo.w_rdy),
            self.o.payload.eq(fifo.r_data),
            self.o.valid.eq(fifo.r_rdy),
            fifo.r_en.eq(self.o.ready),
            self.level.eq(fifo.level),
        ]
        return m
