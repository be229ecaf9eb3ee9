# amaranth: UnusedElaboratable=no
# (The bad-parameter test constructs a component whose __init__ raises.)
"""RecordReader: every record it hands over is SMEM's words at that moment, whatever is
written meanwhile; it reads through both ports, and the next record is ready ahead."""

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring

from hdl.memory import VMEM
from hdl.tensorcore.record_reader import RecordReader

from ..support import simulate

SMEM_WORDS, WORDS = 96, 12


class ReaderOnSmem(wiring.Component):
    """The reader on a one-word VMEM: ``smem`` on its DMA port (with ``window`` above 1,
    on its window port), and with two ports ``spare`` on its core port behind an owner
    (the testbench) whose writes and reads come first (with one, the owner has the core
    port to itself)."""

    def __init__(self, *, ports=2, window=1):
        self.smem = VMEM(lines=SMEM_WORDS, lanes=1, window=window if window > 1 else 0)
        self.reader = RecordReader(smem_words=SMEM_WORDS, words=WORDS, ports=ports,
                                   window=window)
        self.write = Signal()                   # the owner writes `data` at `addr`
        self.block = Signal()                   # the owner reads (the spare waits)
        self.addr = Signal(range(SMEM_WORDS))
        self.data = Signal(32)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.smem = smem = self.smem
        m.submodules.reader = reader = self.reader
        wiring.connect(m, reader.smem, smem.window if self.reader.window > 1 else smem.dma)
        core = smem.core
        owner = self.write | self.block
        m.d.comb += [
            core.req.valid.eq(owner),
            core.req.payload.addr.eq(self.addr),
            core.req.payload.write.eq(self.write),
            core.req.payload.data[0].eq(self.data),
            core.req.payload.mask.eq(1),
            core.resp.ready.eq(1),
            reader.written.eq(self.write),
        ]
        if self.reader.ports == 1:
            return m
        spare = reader.spare
        answer_spare = Signal()
        m.d.sync += answer_spare.eq(spare.req.valid & spare.req.ready)
        m.d.comb += [
            core.req.valid.eq(owner | spare.req.valid),
            spare.req.ready.eq(core.req.ready & ~owner),
            spare.resp.valid.eq(core.resp.valid & answer_spare),
            spare.resp.payload.eq(core.resp.payload),
        ]
        with m.If(spare.req.valid & spare.req.ready):
            m.d.comb += core.req.payload.addr.eq(spare.req.payload.addr)
        return m


def _fill(ctx, dut, words):
    for i, word in enumerate(words):
        ctx.set(dut.smem.words[i], int(word))


async def _take(ctx, dut, address, *, limit=100):
    """Request the record at ``address``; its words, and the cycles until taken (0: at
    once)."""
    reader = dut.reader
    ctx.set(reader.request.valid, 1)
    ctx.set(reader.request.payload.address, address)
    for cycles in range(limit):
        _, _, ready, record = await ctx.tick().sample(reader.request.ready, reader.record)
        if ready:
            ctx.set(reader.request.valid, 0)
            return [int(w) for w in record], cycles
    raise AssertionError(f"the record at {address} was not taken in {limit} cycles")


@pytest.mark.parametrize("ports, window, seed", [
    (2, 1, 1), (2, 1, 2), (2, 1, 3), (1, 1, 4), (2, 8, 5), (2, 3, 6), (1, 8, 7), (2, 5, 8)])
def test_records_are_smem_as_it_is_when_taken(ports, window, seed):
    """Seeded requests, mostly for the record after the last, with the owner writing
    SMEM (records included) and taking the spare port at random, before and during
    requests: each record taken equals SMEM's words at that cycle, whatever words the
    reader's own port reads a request (``window``: 5 and 3 leave part of the last
    request past the record, and records near SMEM's end read past its last word)."""
    rng = np.random.default_rng(seed)
    dut = ReaderOnSmem(ports=ports, window=window)
    model = rng.integers(0, 1 << 32, SMEM_WORDS, dtype=np.uint64).astype(np.uint32)
    taken = []

    async def bench(ctx):
        _fill(ctx, dut, model)
        reader = dut.reader
        address = 0
        for request in range(60):
            if rng.random() < 0.3:
                address = int(rng.integers(0, SMEM_WORDS - WORDS + 1))
            ctx.set(reader.request.valid, 1)
            ctx.set(reader.request.payload.address, address)
            while True:
                write, block = rng.random() < 0.08, rng.random() < 0.3
                at, value = int(rng.integers(0, SMEM_WORDS)), int(rng.integers(0, 1 << 32))
                ctx.set(dut.write, write)
                ctx.set(dut.block, block)
                ctx.set(dut.addr, at)
                ctx.set(dut.data, value)
                _, _, ready, record = await ctx.tick().sample(reader.request.ready,
                                                              reader.record)
                if ready:
                    expected = model[address:address + WORDS].tolist()
                    assert [int(w) for w in record] == expected, \
                        f"seed {seed}, request {request}: the record at {address}"
                    taken.append(address)
                if write:                       # lands at this edge: later cycles see it
                    model[at] = value
                if ready:
                    break
            ctx.set(reader.request.valid, 0)
            ctx.set(dut.write, 0)
            for _ in range(int(rng.integers(0, 10))):
                await ctx.tick()
            address = address + WORDS if address + 2 * WORDS <= SMEM_WORDS else 0

    simulate(dut, bench)
    assert len(taken) == 60


@pytest.mark.parametrize("ports, window", [(2, 1), (1, 1), (2, 8), (1, 8)])
def test_a_record_is_read_on_its_ports_and_the_next_one_ahead(ports, window):
    dut = ReaderOnSmem(ports=ports, window=window)
    words = np.arange(1000, 1000 + SMEM_WORDS, dtype=np.uint32)
    timing = {}

    async def bench(ctx):
        _fill(ctx, dut, words)
        record, timing["cold"] = await _take(ctx, dut, 12)
        assert record == list(range(1012, 1024))
        for _ in range(14):
            await ctx.tick()
        record, timing["ahead"] = await _take(ctx, dut, 24)
        assert record == list(range(1024, 1036))
        if ports == 1:
            return
        for _ in range(10):
            await ctx.tick()
        # Not the record after the last: the read ahead is cut short, and it is read.
        record, timing["elsewhere"] = await _take(ctx, dut, 60)
        assert record == list(range(1060, 1072))
        ctx.set(dut.block, 1)                   # the spare port never free: smem alone
        record, timing["blocked"] = await _take(ctx, dut, 3)
        assert record == list(range(1003, 1015))

    simulate(dut, bench)
    # One-word ports: six words a port (one cycle each), the last answered a cycle later,
    # then the request sees the record: 8 cycles; one port: 12 words, 14 cycles. A window
    # of 8 words and the spare: 8 + 1 words, then 3 (2 cycles), 4 cycles in all; the
    # window alone the same. The record read ahead: at once. With the spare port blocked,
    # the record on `smem` alone after the answers asked for the read ahead of 72 (under
    # way): 1 or 2 more.
    cold, alone = {1: (8, 14), 8: (4, 4)}[window]
    assert timing["cold"] == (cold if ports == 2 else alone) and timing["ahead"] == 0
    if ports == 2:
        assert timing["elsewhere"] <= cold and alone <= timing["blocked"] <= alone + 2


@pytest.mark.parametrize("ports", [2, 1])
def test_a_write_after_the_read_makes_the_record_read_again(ports):
    dut = ReaderOnSmem(ports=ports)
    words = np.arange(SMEM_WORDS, dtype=np.uint32)

    async def bench(ctx):
        _fill(ctx, dut, words)
        await _take(ctx, dut, 0)
        for _ in range(10):                     # record 12 is read ahead, then written
            await ctx.tick()
        ctx.set(dut.write, 1)
        ctx.set(dut.addr, 20)
        ctx.set(dut.data, 0xDEAD)
        await ctx.tick()
        ctx.set(dut.write, 0)
        record, cycles = await _take(ctx, dut, 12)
        assert record[8] == 0xDEAD and record[:8] == list(range(12, 20))
        assert cycles > 0

    simulate(dut, bench)


@pytest.mark.parametrize("kw, message", [
    (dict(smem_words=0, words=12), "smem_words"),
    (dict(smem_words=64, words=0), "words"),
    (dict(smem_words=64, words=12, ports=3), "ports"),
    (dict(smem_words=64, words=12, window=0), "window"),
])
def test_bad_parameters_are_refused(kw, message):
    with pytest.raises(ValueError, match=message):
        RecordReader(**kw)

