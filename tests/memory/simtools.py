"""Helpers of the memory-system RTL tests: a simulator runner, line packing, stream drivers,
and a DmaSystem batch runner. Expected values never come from here: tests take them from
golden.memory or write them out."""

import numpy as np

from golden.memory import SPACES
from hdl.memory import DmaSystem, descriptor_layout
from hdl.memory.layouts import REASONS

from ..support import pack_lines, simulate, unpack_lines


def load(ctx, memory, words, per_line):
    for index, line in enumerate(pack_lines(words, per_line)):
        ctx.set(memory[index], line)


def read_back(ctx, memory, per_line):
    return unpack_lines([ctx.get(memory[i]) for i in range(memory.depth)], per_line)


async def put(ctx, stream, payload):
    """Offer one beat and hold it until taken."""
    ctx.set(stream.payload, payload)
    ctx.set(stream.valid, 1)
    await ctx.tick().until(stream.ready)
    ctx.set(stream.valid, 0)


def descriptor_beat(d):
    """The ``descriptor_layout`` constant of a golden ``Descriptor`` (local or remote)."""
    return descriptor_layout.const({
        "src_space": SPACES.index(d.src[0]), "src_base": d.src[1],
        "dst_space": SPACES.index(d.dst[-2]), "dst_base": d.dst[-1],
        "counts": list(d.counts), "src_strides": list(d.src_strides),
        "dst_strides": list(d.dst_strides), "flag": d.flag,
        "remote": d.remote, "chip": d.chip or 0, "sent": d.sent_flag is not None,
        "sent_flag": d.sent_flag or 0,
    })


def run_batch(system, hbm, vmem, descriptors, *, rng=None, gap=0.0, stall=0.0, seed=0,
              limit=200_000, top=None):
    """Run a batch on a ``DmaSystem``; returns a dict of the final images, flags, error
    records ``(index, reason, address)`` in arrival order, the cycles taken, and
    ``requests``: the cycles (counted as ``cycles`` is) in which the DMA's reads and
    writes were accepted, per memory, as ``{("hbm", "read"): [...], ...}``. ``top``, if
    given, is simulated instead: a design holding ``system`` (its ports not driven by
    ``top`` are the testbench's)."""
    assert isinstance(system, DmaSystem)
    rng = rng or np.random.default_rng(0)
    beats = [descriptor_beat(d) for d in descriptors]
    lanes, wpc = system.vmem.lanes, system.hbm.words_per_cycle
    out = {"errors": []}
    gaps = rng.random(len(beats)) < gap
    stalls = (rng.random(limit) < stall).tolist()

    async def feeder(ctx):
        load(ctx, system.hbm_words, hbm, wpc)
        load(ctx, system.vmem_words, vmem, lanes)
        ctx.set(system.seed, seed)
        for beat, idle in zip(beats, gaps):
            if idle:
                await ctx.tick().repeat(int(rng.integers(1, 4)))
            await put(ctx, system.descriptors, beat)

    ports = {"hbm": system.hbm.port.req, "vmem": system.vmem.dma.req}
    out["requests"] = {(name, kind): [] for name in ports for kind in ("read", "write")}

    async def recorder(ctx):
        cycle = 0
        n = len(beats)
        while True:
            ready = not stalls[cycle % limit]
            ctx.set(system.errors.ready, ready)
            _, _, valid, payload, received, done, rejected, idle, *reqs = \
                await ctx.tick().sample(
                    system.errors.valid, system.errors.payload, system.received,
                    system.completed, system.rejected, system.finished,
                    *[r.valid & r.ready for r in ports.values()],
                    *[r.payload.write for r in ports.values()])
            for name, taken, write in zip(ports, reqs[:2], reqs[2:]):
                if taken:
                    out["requests"][name, "write" if write else "read"].append(cycle)
            cycle += 1
            if valid and ready:
                out["errors"].append((payload.id, REASONS[payload.reason], payload.address))
            if received == n and done + rejected == n and idle:
                break
            assert cycle < limit, (f"DMA hung: received {received}, completed {done}, "
                                   f"rejected {rejected} of {n}")
        out["cycles"] = cycle
        out["hbm"] = read_back(ctx, system.hbm_words, wpc)
        out["vmem"] = read_back(ctx, system.vmem_words, lanes)
        out["flags"] = np.array([ctx.get(system.flags[i]) for i in range(system.n_flags)],
                                np.uint32)

    simulate(top or system, feeder, recorder)
    return out

