# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct components whose __init__ raises.)
"""PortShare: initiators that read and write share one HBM port; each gets its own responses,
in its own order, whatever the jitter and the response stalls; offers hold until taken."""

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.lib.memory_port import MemoryPortSignature
from hdl.memory import HBM
from hdl.memory.port_share import PortShare

from .simtools import put, simulate

SIG = MemoryPortSignature(addr_width=8, words=1)


class Shared(wiring.Component):
    """``n`` initiators on a PortShare in front of a jittery HBM model of 256 words."""

    def __init__(self, n, depth):
        self.n, self.depth = n, depth
        super().__init__({"initiators": In(SIG).array(n), "memory": Out(SIG)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.share = share = PortShare(signature=SIG, initiators=self.n,
                                               depth=self.depth)
        m.submodules.hbm = self.hbm = hbm = HBM(size=256, read_latency=3, jitter=4,
                                                max_outstanding=8)
        for i in range(self.n):
            wiring.connect(m, wiring.flipped(self.initiators[i]), share.initiators[i])
        wiring.connect(m, share.memory, hbm.port)
        m.d.comb += [hbm.start.eq(1), hbm.seed.eq(12345),
                     self.memory.req.valid.eq(share.memory.req.valid),
                     self.memory.req.payload.eq(share.memory.req.payload),
                     self.memory.req.ready.eq(share.memory.req.ready)]
        return m


@pytest.mark.parametrize("n, depth", [(3, 4), (2, 1), (1, 16)])
def test_each_initiator_reads_back_what_it_wrote(n, depth, rng):
    dut = Shared(n, depth)
    plans = []
    for i in range(n):
        # Initiator i owns words 64*i .. 64*i + 63; a write then reads of random owned words.
        ops = []
        for _ in range(60):
            addr = 64 * i + int(rng.integers(0, 8))
            if rng.random() < 0.4:
                ops.append(("write", addr, int(rng.integers(0, 1 << 32))))
            else:
                ops.append(("read", addr, None))
        plans.append(ops)
    got = [[] for _ in range(n)]

    def initiator(i):
        async def drive(ctx):
            for op, addr, value in plans[i]:
                await put(ctx, dut.initiators[i].req,
                          {"addr": addr, "write": op == "write", "data": [value or 0],
                           "mask": 1})
        return drive

    def receiver(i):
        async def take(ctx):
            port = dut.initiators[i].resp
            want = sum(op == "read" for op, _, _ in plans[i])
            while len(got[i]) < want:
                ctx.set(port.ready, bool(rng.random() < 0.6))
                _, _, valid, ready, payload = await ctx.tick().sample(
                    port.valid, port.ready, port.payload)
                if valid and ready:
                    got[i].append(int(payload.data[0]))
            ctx.set(port.ready, 0)
            for _ in range(20):                 # and nothing more arrives
                _, _, valid = await ctx.tick().sample(port.valid)
                assert not valid
        return take

    async def watch(ctx):
        offer = None
        while sum(len(g) for g in got) < sum(op == "read" for p in plans for op, _, _ in p):
            _, _, valid, ready, payload = await ctx.tick().sample(
                dut.memory.req.valid, dut.memory.req.ready, dut.memory.req.payload)
            if offer is not None:
                assert valid and int(payload.addr) == offer, "an offer changed before taken"
            offer = int(payload.addr) if valid and not ready else None

    simulate(dut, *(initiator(i) for i in range(n)), *(receiver(i) for i in range(n)), watch)
    for i in range(n):
        memory = {}
        want = []
        for op, addr, value in plans[i]:
            if op == "write":
                memory[addr] = value
            else:
                want.append(memory.get(addr, 0))
        assert got[i] == want, f"initiator {i}"


def test_parameters_are_checked():
    with pytest.raises(TypeError, match="signature must be a MemoryPortSignature"):
        PortShare(signature=None)
    with pytest.raises(ValueError, match="initiators"):
        PortShare(signature=SIG, initiators=0)
    with pytest.raises(ValueError, match="depth"):
        PortShare(signature=SIG, depth=0)
