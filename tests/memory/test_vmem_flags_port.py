# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct components whose __init__ raises.)
"""The memory port signature, VMEM (single-cycle, two ports, masked writes, stalls) and the
sync flag bank (add, set/clear, blocking wait)."""

import numpy as np
import pytest
from amaranth.lib import stream

from hdl.lib.memory_port import MemoryPortSignature, request_layout, response_layout
from hdl.memory import VMEM, SyncFlags

from .simtools import load, read_back, simulate


# ------------------------------------------------------------------ memory port

def test_port_signature_members_and_widths():
    sig = MemoryPortSignature(addr_width=10, words=4, mask_granularity=8)
    assert set(sig.members) == {"req", "resp"}
    assert isinstance(sig.members["req"].signature, stream.Signature)
    req = request_layout(addr_width=10, words=4, mask_granularity=8)
    assert {name: field.width for name, field in req} == \
        {"addr": 10, "write": 1, "data": 128, "mask": 16}
    assert {name: field.width for name, field in response_layout(words=4)} == \
        {"data": 128, "error": 1}
    assert sig == MemoryPortSignature(addr_width=10, words=4, mask_granularity=8)
    assert sig != MemoryPortSignature(addr_width=10, words=4)
    assert MemoryPortSignature(addr_width=3, words=2).mask_width == 2


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(addr_width=0), ValueError, "addr_width must be at least 1"),
    (dict(addr_width=8, words=0), ValueError, "words must be at least 1"),
    (dict(addr_width=8, words=1, mask_granularity=12), ValueError, "must divide"),
    (dict(addr_width=8.0), TypeError, "addr_width must be an integer"),
])
def test_port_bad_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        MemoryPortSignature(**kwargs)


# ------------------------------------------------------------------ VMEM

def test_vmem_two_ports_single_cycle_masked(rng):
    lanes, lines = 4, 8
    vmem = VMEM(lines=lines, lanes=lanes)
    image = rng.integers(0, 1 << 32, lines * lanes, dtype=np.uint32)
    got = {}

    async def tb(ctx):
        load(ctx, vmem.words, image, lanes)
        ctx.set(vmem.core.resp.ready, 1)
        ctx.set(vmem.dma.resp.ready, 1)
        # Core writes lanes 0 and 2 of line 3 while the DMA reads line 3: old line.
        ctx.set(vmem.core.req.payload, {"addr": 3, "write": 1, "data": [1, 2, 3, 4],
                                        "mask": 0b0101})
        ctx.set(vmem.dma.req.payload, {"addr": 3, "write": 0})
        ctx.set(vmem.core.req.valid, 1)
        ctx.set(vmem.dma.req.valid, 1)
        await ctx.tick()
        ctx.set(vmem.core.req.valid, 0)
        # One cycle later: the answer is valid, and a new read sees the write.
        assert ctx.get(vmem.dma.resp.valid)
        got["old"] = list(ctx.get(vmem.dma.resp.payload.data))
        await ctx.tick()
        got["new"] = list(ctx.get(vmem.dma.resp.payload.data))
        ctx.set(vmem.dma.req.valid, 0)
        await ctx.tick()
        assert not ctx.get(vmem.dma.resp.valid)
        # A stalled response holds, and holds the port.
        ctx.set(vmem.dma.resp.ready, 0)
        ctx.set(vmem.dma.req.payload, {"addr": 5, "write": 0})
        ctx.set(vmem.dma.req.valid, 1)
        await ctx.tick()
        ctx.set(vmem.dma.req.payload, {"addr": 6, "write": 0})
        assert ctx.get(vmem.dma.resp.valid) and not ctx.get(vmem.dma.req.ready)
        await ctx.tick().repeat(3)
        got["held"] = list(ctx.get(vmem.dma.resp.payload.data))
        ctx.set(vmem.dma.resp.ready, 1)
        await ctx.tick()
        got["next"] = list(ctx.get(vmem.dma.resp.payload.data))
        ctx.set(vmem.dma.req.valid, 0)
        got["image"] = read_back(ctx, vmem.words, lanes)

    simulate(vmem, tb)
    line = image.reshape(lines, lanes)
    assert got["old"] == line[3].tolist()
    assert got["new"] == [1, line[3][1], 3, line[3][3]]
    assert got["held"] == line[5].tolist() and got["next"] == line[6].tolist()
    expected = image.copy()
    expected[12], expected[14] = 1, 3
    assert got["image"].tolist() == expected.tolist()


def test_vmem_on_one_ram_port_takes_turns_and_reads_every_earlier_write(rng):
    """``ram_ports=1``: random requests and answer stalls on both ports. At most one
    request is accepted a cycle; every read answers, in order on its port, with the line as
    the writes accepted before it left it (a model replays the accepted requests in
    order); a port with a request never waits more than a cycle for the other."""
    lanes, lines, cycles = 2, 4, 600
    vmem = VMEM(lines=lines, lanes=lanes, ram_ports=1)
    image = rng.integers(0, 1 << 32, lines * lanes, dtype=np.uint32)
    ports = (vmem.core, vmem.dma)
    log = {"accepted": [], "answers": ([], []), "waits": []}

    async def tb(ctx):
        load(ctx, vmem.words, image, lanes)
        pending = [None, None]
        waited = [0, 0]
        for cycle in range(cycles):
            for k, port in enumerate(ports):
                if pending[k] is None and rng.random() < 0.7:
                    write = bool(rng.random() < 0.5)
                    pending[k] = {"addr": int(rng.integers(lines)), "write": write,
                                  "data": [int(x) for x in rng.integers(0, 1 << 32, lanes)],
                                  "mask": int(rng.integers(1 << lanes))}
                ctx.set(port.req.valid, pending[k] is not None)
                if pending[k] is not None:
                    ctx.set(port.req.payload, pending[k])
                ctx.set(port.resp.ready, bool(rng.random() < 0.6))
            _, _, *sampled = await ctx.tick().sample(
                *(x for port in ports for x in (port.req.valid, port.req.ready,
                                                 port.resp.valid, port.resp.ready,
                                                 port.resp.payload.data)))
            taken = 0
            for k in range(2):
                valid, ready, rvalid, rready, data = sampled[5 * k:5 * k + 5]
                if rvalid and rready:
                    log["answers"][k].append(list(data))
                if valid and ready:
                    log["accepted"].append((k, pending[k]))
                    pending[k], waited[k] = None, 0
                    taken += 1
                elif valid and (rready or not rvalid):
                    waited[k] += 1          # wanted, with room for its answer
                    log["waits"].append(waited[k])
            assert taken <= 1, f"cycle {cycle}: both ports accepted"

    simulate(vmem, tb)
    model = image.reshape(lines, lanes).astype(np.int64).tolist()
    want = ([], [])
    for k, req in log["accepted"]:
        line = model[req["addr"]]
        if req["write"]:
            for j in range(lanes):
                if req["mask"] >> j & 1:
                    line[j] = req["data"][j]
        else:
            want[k].append(list(line))
    for k in range(2):
        # The answers the bench took: the first of the reads, in order.
        assert log["answers"][k] == want[k][:len(log["answers"][k])]
        assert len(want[k]) - len(log["answers"][k]) <= 1
        assert len(log["answers"][k]) > 50
    assert max(log["waits"]) <= 1


@pytest.mark.parametrize("window_writes, other", [(False, "core"), (True, "dma")])
def test_vmem_window_moves_lines_in_a_row_as_the_writes_before_left_them(
        rng, window_writes, other):
    """``window=3``: each accepted read answers the next cycle with lines ``addr`` to
    ``addr + 2``, wrapping past the last, as the writes the other ports made in earlier
    cycles left them (a write in the same cycle is not seen); an answer not taken holds
    the port and its words. With ``window_writes`` a write request writes the words its
    mask enables in those lines, and of a window write and a DMA write of one word in one
    cycle the DMA's stays."""
    lanes, lines, window, cycles = 2, 5, 3, 400
    vmem = VMEM(lines=lines, lanes=lanes, window=window, window_writes=window_writes)
    image = rng.integers(0, 1 << 32, lines * lanes, dtype=np.uint32)
    model = image.reshape(lines, lanes).astype(np.int64).tolist()
    log = {"answers": [], "want": [], "clashes": 0}

    async def tb(ctx):
        load(ctx, vmem.words, image, lanes)
        wide, port = vmem.window, getattr(vmem, other)
        pending = None
        for _ in range(cycles):
            if pending is None and rng.random() < 0.8:
                pending = {"addr": int(rng.integers(lines)),
                           "write": window_writes and bool(rng.random() < 0.5),
                           "mask": int(rng.integers(1 << (window * lanes))),
                           "data": [int(x) for x in
                                    rng.integers(0, 1 << 32, window * lanes)]}
            ctx.set(wide.req.valid, pending is not None)
            if pending is not None:
                ctx.set(wide.req.payload, pending)
            ctx.set(wide.resp.ready, bool(rng.random() < 0.6))
            write = {"addr": int(rng.integers(lines)), "write": True,
                     "mask": int(rng.integers(1, 1 << lanes)),
                     "data": [int(x) for x in rng.integers(0, 1 << 32, lanes)]}
            writing = bool(rng.random() < 0.4)
            ctx.set(port.req.valid, writing)
            ctx.set(port.req.payload, write)
            _, _, valid, ready, rvalid, rready, data = await ctx.tick().sample(
                wide.req.valid, wide.req.ready, wide.resp.valid, wide.resp.ready,
                wide.resp.payload.data)
            if rvalid and rready:
                log["answers"].append([int(w) for w in data])
            if valid and ready:
                request, pending = pending, None
                lines_of = [(request["addr"] + k) % lines for k in range(window)]
                if not request["write"]:
                    log["want"].append([w for line in lines_of for w in model[line]])
                for i in range(window * lanes) if request["write"] else ():
                    if request["mask"] >> i & 1:
                        model[lines_of[i // lanes]][i % lanes] = request["data"][i]
                        if writing and write["addr"] == lines_of[i // lanes] \
                                and write["mask"] >> (i % lanes) & 1:
                            log["clashes"] += 1
            if writing:
                for j in range(lanes):
                    if write["mask"] >> j & 1:
                        model[write["addr"]][j] = write["data"][j]
        log["final"] = [ctx.get(vmem.words[line]) for line in range(lines)]

    simulate(vmem, tb)
    answers, want = log["answers"], log["want"]
    assert len(answers) > 30 and (log["clashes"] > 5) == window_writes
    assert answers == want[:len(answers)] and len(want) - len(answers) <= 1
    assert log["final"] == [sum(w << (32 * j) for j, w in enumerate(line)) for line in model]


@pytest.mark.parametrize("kwargs, error", [
    (dict(lines=0), ValueError), (dict(lines=4, lanes=0), ValueError),
    (dict(lines=4.5), TypeError), (dict(lines=4, ram_ports=3), ValueError),
    (dict(lines=4, window=-1), ValueError), (dict(lines=4, window=2, ram_ports=1), ValueError),
    (dict(lines=4, window_writes=True), ValueError),
    (dict(lines=4, window=2, window_writes=1), TypeError)])
def test_vmem_bad_parameters(kwargs, error):
    with pytest.raises(error):
        VMEM(**kwargs)


# ------------------------------------------------------------------ sync flags

def test_flags_add_set_clear_and_wait():
    flags = SyncFlags(n_flags=4)
    log = {}

    async def tb(ctx):
        ctx.set(flags.add.payload, {"flag": 1, "amount": 5})
        ctx.set(flags.add.valid, 1)
        await ctx.tick()
        ctx.set(flags.add.payload, {"flag": 1, "amount": 0xFFFFFFFE})   # wraps
        await ctx.tick()
        ctx.set(flags.add.valid, 0)
        log["wrapped"] = ctx.get(flags.values[1])
        # A set and an add to one flag in one cycle: the add lands on the set value.
        ctx.set(flags.set.payload, {"flag": 2, "value": 100})
        ctx.set(flags.set.valid, 1)
        ctx.set(flags.add.payload, {"flag": 2, "amount": 7})
        ctx.set(flags.add.valid, 1)
        await ctx.tick()
        ctx.set(flags.add.valid, 0)
        log["set_add"] = ctx.get(flags.values[2])
        ctx.set(flags.set.payload, {"flag": 2, "value": 0})                # clear
        await ctx.tick()
        ctx.set(flags.set.valid, 0)
        log["cleared"] = ctx.get(flags.values[2])
        # A wait on flag 3 >= 10 blocks, observably, until adds reach 10.
        ctx.set(flags.wait.payload, {"flag": 3, "value": 10})
        ctx.set(flags.wait.valid, 1)
        waited = 0
        ctx.set(flags.add.payload, {"flag": 3, "amount": 3})
        while not ctx.get(flags.wait.ready):
            assert ctx.get(flags.waiting)
            ctx.set(flags.add.valid, waited % 2 == 0)
            await ctx.tick()
            waited += 1
        log["waited"] = waited
        log["at_release"] = ctx.get(flags.values[3])
        await ctx.tick()
        ctx.set(flags.wait.valid, 0)
        ctx.set(flags.add.valid, 0)
        assert not ctx.get(flags.waiting)

    simulate(flags, tb)
    assert log["wrapped"] == 3 and log["set_add"] == 107 and log["cleared"] == 0
    # Adds of 3 on every other cycle from 0: 3, 3, 6, 6, 9, 9, 12 -> released after 7.
    assert log["waited"] == 7 and log["at_release"] == 12


@pytest.mark.parametrize("n_flags, error", [(0, ValueError), (129, ValueError), (2.0, TypeError)])
def test_flags_bad_parameters(n_flags, error):
    with pytest.raises(error):
        SyncFlags(n_flags=n_flags)
