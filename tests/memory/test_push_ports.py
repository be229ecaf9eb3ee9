# amaranth: UnusedElaboratable=no
# (test_dealing_is_checked constructs a component whose __init__ raises.)
"""The DMA's push ports: pushes dealt in turn, or to the first port whose queue is empty.

Port 0's packets are held (its flits not taken) while pushes of one word arrive. In turn,
every other push waits for port 0, so the stream of pushes stops once port 0's queue and
packetizer are full; dealt to an empty queue, the pushes go on through port 1. Once port 0
is let go, every push leaves exactly once, each port's in the order they arrived."""

import pytest

from hdl.memory.dma_push_ports import PushPorts
from hdl.lib.numbered_ports import port

from ..support import simulate

PUSHES = 12
HELD = 200                           # cycles port 0 is held


def _deal(dealing):
    """Play the pushes; return the cycle after which each was taken (None: not while port
    0 was held) and the data words each port sent, in order."""
    dut = PushPorts(ports=2, max_words=1, max_payload=1, beats=1, dealing=dealing)
    taken, sent = [None] * PUSHES, {0: [], 1: []}

    async def source(ctx):
        for n in range(PUSHES):
            ctx.set(dut.beats_in.payload, {
                "data": [1000 + n], "count": 1, "dst_space": 0, "dst_addr": n, "last": 1,
                "info": {"words": 1, "remote": 1, "chip": 1}})
            ctx.set(dut.beats_in.valid, 1)
            cycles = 0
            while True:
                _, _, ready = await ctx.tick().sample(dut.beats_in.ready)
                cycles += 1
                if ready:
                    break
            ctx.set(dut.beats_in.valid, 0)
            taken[n] = cycles
        ctx.set(dut.done.ready, 1)

    async def sink(ctx):
        ctx.set(dut.done.ready, 1)
        pushes = [port(dut, "push", j) for j in range(2)]
        ctx.set(pushes[1].ready, 1)
        flits = {0: 0, 1: 0}
        for cycle in range(HELD + 200):
            ctx.set(pushes[0].ready, int(cycle >= HELD))
            _, _, *seen = await ctx.tick().sample(
                *(signal for p in pushes for signal in (p.valid, p.ready, p.payload)))
            for j in range(2):
                valid, ready, payload = seen[3 * j:3 * j + 3]
                if valid and ready:
                    if flits[j] % 3 == 2:                # route, target, the data word
                        sent[j].append(int(payload[0]) - 1000)
                    flits[j] += 1
            if cycle == HELD - 1:
                before.extend(n for n in range(PUSHES) if taken[n] is not None)

    before = []
    simulate(dut, source, sink)
    return before, sent


@pytest.mark.parametrize("dealing", ["turn", "empty"])
def test_a_held_port_stops_pushes_in_turn_but_not_to_empty_queues(dealing):
    before, sent = _deal(dealing)
    # Every push leaves once; each port keeps the order the pushes came in.
    assert sorted(sent[0] + sent[1]) == list(range(PUSHES))
    assert all(s == sorted(s) for s in sent.values())
    if dealing == "turn":
        assert sent[0] == list(range(0, PUSHES, 2)) and sent[1] == list(range(1, PUSHES, 2))
        assert len(before) < PUSHES                   # stopped behind the held port
    else:
        assert before == list(range(PUSHES))          # every push taken while port 0 held
        assert len(sent[0]) < PUSHES // 2 < len(sent[1])


def test_dealing_is_checked():
    with pytest.raises(ValueError, match="dealing"):
        PushPorts(ports=2, max_words=1, dealing="random")
