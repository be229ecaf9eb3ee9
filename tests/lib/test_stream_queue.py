# amaranth: UnusedElaboratable=no
"""StreamQueue: order, backpressure, level, latency and parameter checks, in simulation.

(The pragma: a constructor that refuses its parameters leaves an unused component.)"""

import random

import pytest
from amaranth.hdl import Fragment, Shape, signed
from amaranth.lib import data, stream
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from hdl.lib.stream_queue import StreamQueue

PAIR = data.StructLayout({"a": 8, "b": signed(4)})


def _run(queue, testbench):
    sim = Simulator(queue)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


@pytest.mark.parametrize("buffered", [False, True])
@pytest.mark.parametrize("depth", [1, 2, 5])
def test_order_backpressure_and_level(depth, buffered):
    """Random valid and ready: every entry leaves once, in order; ``i.ready`` is low
    exactly when the queue is full; ``level`` counts the entries held."""
    queue = StreamQueue(shape=PAIR, depth=depth, buffered=buffered)
    rng = random.Random(depth * 2 + buffered)
    sent = [(rng.randrange(256), rng.randrange(-8, 8)) for _ in range(60)]
    got = []

    async def testbench(ctx):
        held = 0
        pending = list(sent)
        for _ in range(2000):
            offer = bool(pending) and rng.random() < 0.7
            take = rng.random() < 0.5
            ctx.set(queue.i.valid, offer)
            if offer:
                ctx.set(queue.i.payload, {"a": pending[0][0], "b": pending[0][1]})
            ctx.set(queue.o.ready, take)
            assert ctx.get(queue.level) == held
            if not buffered:
                # A plain queue's room is exactly what is free.
                assert ctx.get(queue.i.ready) == (held < depth)
            wrote = offer and ctx.get(queue.i.ready)
            read = take and ctx.get(queue.o.valid)
            if read:
                payload = ctx.get(queue.o.payload)
                got.append((payload.a, payload.b))
            await ctx.tick()
            if wrote:
                pending.pop(0)
            held += wrote - read
            assert 0 <= held <= depth
            if not pending and held == 0:
                break

    _run(queue, testbench)
    assert got == sent


@pytest.mark.parametrize("buffered, latency", [(False, 1), (True, 2)])
def test_latency_and_full_throughput(buffered, latency):
    """An entry leaves ``latency`` cycles after it was taken; with both sides always
    ready one entry passes every cycle."""
    queue = StreamQueue(shape=8, depth=3, buffered=buffered)
    valid_out = []

    async def testbench(ctx):
        ctx.set(queue.o.ready, 1)
        for cycle in range(12):
            ctx.set(queue.i.valid, cycle < 8)
            ctx.set(queue.i.payload, cycle)
            assert ctx.get(queue.i.ready)
            valid_out.append(ctx.get(queue.o.payload) if ctx.get(queue.o.valid) else None)
            await ctx.tick()

    _run(queue, testbench)
    assert valid_out == [None] * latency + list(range(8)) + [None] * (4 - latency)


def test_full_queue_holds_its_head():
    """With ``o.ready`` low the head stays, and the queue fills to ``depth``."""
    queue = StreamQueue(shape=signed(6), depth=4)

    async def testbench(ctx):
        ctx.set(queue.i.valid, 1)
        for value in (-3, 5, -1, 7, 9):
            ctx.set(queue.i.payload, value)
            await ctx.tick()
        assert ctx.get(queue.level) == 4
        assert not ctx.get(queue.i.ready)
        assert ctx.get(queue.o.valid) and ctx.get(queue.o.payload) == -3

    _run(queue, testbench)


def test_ports_are_typed():
    queue = StreamQueue(shape=PAIR, depth=3)
    assert queue.signature.members["i"] == In(stream.Signature(PAIR))
    assert queue.signature.members["o"] == Out(stream.Signature(PAIR))
    assert queue.o.payload.shape() == PAIR
    assert queue.level.shape() == Shape.cast(range(4))
    Fragment.get(queue, None)       # elaborates, as a design using it would


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(shape=8, depth=0), ValueError, "depth must be at least 1"),
    (dict(shape=8, depth=2.0), TypeError, "depth must be an integer"),
    (dict(shape=8, depth=True), TypeError, "depth must be an integer"),
    (dict(shape="wide", depth=2), TypeError, "shape must be shape-castable"),
    (dict(shape=8, depth=2, buffered=1), TypeError, "buffered must be a bool"),
])
def test_bad_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        StreamQueue(**kwargs)


def test_parameters_are_keyword_only():
    with pytest.raises(TypeError):
        StreamQueue(8, 2)
