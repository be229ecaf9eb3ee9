# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct components whose __init__ raises.)
"""Remote pushes: two DmaSystems joined by links that stall at random, against
golden.memory.run on each chip followed by golden.memory.land of the other's pushes (whole
images, flags, error records), with every flit on the links equal to golden.ici's packets;
the receive engine's handling of malformed packets; and when the flags move."""

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from golden import ici
from golden import memory as golden
from golden.memory import Descriptor as D
from hdl.ici.layouts import flit_layout, route_word_layout
from hdl.lib.memory_port import MemoryPortSignature
from hdl.lib.numbered_ports import port
from hdl.lib.xorshift import GAP_BITS, Xorshift32, gap_threshold
from hdl.memory import (DmaSystem, Packetizer, Receiver, WriterMerge, max_payload_words,
                        target_word_layout)
from hdl.memory.dma_push import DEFAULT_MAX_PAYLOAD
from hdl.memory.layouts import REASONS

from .simtools import descriptor_beat, load, put, read_back, run_batch, simulate
from .test_dma_system import random_descriptor

N_FLAGS = 8
CONFIGS = {
    # name: DmaSystem parameters; small packets, so pushes split into several.
    "w1-lanes4-fw1": dict(hbm_size=128, vmem_lines=16, lanes=4, words_per_cycle=1,
                          read_latency=3, max_payload=5, flit_words=1),
    "w2-lanes8-fw3-jitter": dict(hbm_size=192, vmem_lines=12, lanes=8, words_per_cycle=2,
                                 read_latency=6, jitter=3, outstanding=2, max_payload=7,
                                 flit_words=3),
    # Two push ports and two receive engines per chip; larger landing zones, since the
    # pushes of a batch must not write the same words (two ports land in either order).
    "w1-lanes4-fw1-ports2": dict(hbm_size=512, vmem_lines=64, lanes=4, words_per_cycle=1,
                                 read_latency=3, max_payload=5, flit_words=1,
                                 network_ports=2, push_beats=4),
}


# ------------------------------------------------------------------ the test top

class StallLink(wiring.Component):
    """A link model for tests: a small FIFO whose input and output each stall at random,
    with probability ``stall`` a cycle, from a seeded xorshift."""

    def __init__(self, *, flit_words, stall, depth=3):
        self.stall, self.depth = stall, depth
        sig = stream.Signature(flit_layout(flit_words))
        super().__init__({"tx": In(sig), "rx": Out(sig), "seed": In(32), "empty": Out(1)})

    def elaborate(self, platform):
        m = Module()
        width = len(self.tx.payload.as_value())
        m.submodules.queue = queue = fifo.SyncFIFO(width=width, depth=self.depth)
        m.submodules.random = random = Xorshift32()
        started = Signal()
        m.d.sync += started.eq(1)
        threshold = gap_threshold(self.stall)
        stall_in = random.value[:GAP_BITS] < threshold
        stall_out = random.value[GAP_BITS:2 * GAP_BITS] < threshold
        m.d.comb += [
            random.seed.eq(self.seed), random.run.eq(started),
            queue.w_data.eq(self.tx.payload), queue.w_en.eq(self.tx.valid & ~stall_in),
            self.tx.ready.eq(queue.w_rdy & ~stall_in),
            self.rx.payload.eq(queue.r_data), self.rx.valid.eq(queue.r_rdy & ~stall_out),
            queue.r_en.eq(self.rx.ready & ~stall_out),
            self.empty.eq(queue.level == 0),
        ]
        return m


class Pair(wiring.Component):
    """Chips 0 and 1, each one's push port j joined to the other's receive port j by a
    :class:`StallLink` (``links[i][j]``)."""

    def __init__(self, *, stall, **params):
        self.chips = [DmaSystem(n_chips=2, n_flags=N_FLAGS, **params) for _ in range(2)]
        self.ports = self.chips[0].network_ports
        self.links = [[StallLink(flit_words=params.get("flit_words", 1), stall=stall)
                       for _ in range(self.ports)] for _ in range(2)]
        super().__init__({"seed": In(32)})

    def elaborate(self, platform):
        m = Module()
        for i in range(2):
            m.submodules[f"chip{i}"] = self.chips[i]
            m.d.comb += [self.chips[i].chip.eq(i), self.chips[i].seed.eq(self.seed + i)]
            for j, link in enumerate(self.links[i]):
                m.submodules[f"link{i}_{j}"] = link
                wiring.connect(m, port(self.chips[i], "push", j), link.tx)
                wiring.connect(m, link.rx, port(self.chips[1 - i], "receive", j))
                salt = 0x9E3779B9 * (i + 1 + 2 * j) & 0xFFFFFFFF
                m.d.comb += link.seed.eq(self.seed ^ salt)
        return m


def run_pair(pair, images, batches, *, rng, stall=0.3, seed=1, limit=100_000):
    """Run one batch on each chip of ``pair``; returns per chip the final images, flags,
    error records, and the flits it pushed on each port (as uint32 arrays)."""
    k = pair.ports
    out = [{"errors": [], "flits": [[] for _ in range(k)]} for _ in range(2)]

    def feeder(i):
        async def feed(ctx):
            chip = pair.chips[i]
            load(ctx, chip.hbm_words, images[i][0], chip.hbm.words_per_cycle)
            load(ctx, chip.vmem_words, images[i][1], chip.vmem.lanes)
            for descriptor in batches[i]:
                if rng.random() < 0.3:
                    await ctx.tick().repeat(int(rng.integers(1, 4)))
                await put(ctx, chip.descriptors, descriptor_beat(descriptor))
        return feed

    async def watch(ctx):
        ctx.set(pair.seed, seed)
        chips, links = pair.chips, pair.links
        for cycle in range(limit):
            ready = [bool(rng.random() >= stall) for _ in chips]
            for chip, r in zip(chips, ready):
                ctx.set(chip.errors.ready, r)
            ports = [port(chip, "push", j) for chip in chips for j in range(k)]
            sampled = await ctx.tick().sample(
                *[v for chip in chips for v in (
                    chip.errors.valid, chip.errors.payload, chip.received, chip.finished)],
                *[v for port in ports for v in (port.valid & port.ready, port.payload)],
                *[link.empty for row in links for link in row])
            state = sampled[2:]
            for i in range(2):
                valid, error, received, finished = state[4 * i:4 * i + 4]
                if valid and ready[i]:
                    out[i]["errors"].append((error.id, REASONS[error.reason], error.address))
                for j in range(k):
                    pushed, flit = state[8 + 2 * (i * k + j):10 + 2 * (i * k + j)]
                    if pushed:
                        out[i]["flits"][j].append([int(w) for w in flit])
                out[i]["done"] = received == len(batches[i]) and finished
            if all(o["done"] for o in out) and all(state[8 + 4 * k:]):
                break
        else:
            raise AssertionError(f"the pair hung: {[o.get('done') for o in out]}")
        for i, chip in enumerate(chips):
            out[i]["hbm"] = read_back(ctx, chip.hbm_words, chip.hbm.words_per_cycle)
            out[i]["vmem"] = read_back(ctx, chip.vmem_words, chip.vmem.lanes)
            out[i]["flags"] = np.array([ctx.get(chip.flags[f]) for f in range(N_FLAGS)],
                                       np.uint32)
            out[i]["malformed"] = ctx.get(chip.malformed)
            out[i]["flits"] = [np.array(flits, np.uint32).reshape(
                -1, len(chip.push.payload.as_value()) // 32) for flits in out[i]["flits"]]

    simulate(pair, feeder(0), feeder(1), watch)
    return out


# ------------------------------------------------------------------ stimulus

def _zones(system):
    """Each space's words below the landing zone (its last quarter, whole lines): only
    pushes from the other chip write the landing zone, and nothing else touches it."""
    lanes = system.vmem.lanes
    return {"hbm": system.hbm.size * 3 // 4,
            "vmem": system.vmem.size * 3 // 4 // lanes * lanes}


def _push(rng, sizes, work, chip):
    """A random push of up to three dims to ``chip``, landing in the landing zone: mostly
    contiguous destination rows (several packets each), sometimes strided, repeated or
    reversed; now and then a bad chip, a bad sent flag or a destination out of range."""
    dims = int(rng.integers(1, 4))
    counts = [int(rng.integers(1, 12))] + [int(rng.integers(1, 4)) for _ in range(dims - 1)]
    src_strides = [int(rng.integers(-3, 4)) for _ in range(dims)]
    inner = 1 if rng.random() < 0.6 else int(rng.integers(-2, 3))
    dst_strides = [inner] + [int(rng.choice([0, counts[0], -counts[0], 7]))
                             for _ in range(dims - 1)]
    src_space, dst_space = (str(rng.choice(["hbm", "vmem"])) for _ in range(2))

    def base(space, strides, lo_limit, hi_limit):
        lo = sum(min(0, (c - 1) * s) for c, s in zip(counts, strides))
        hi = sum(max(0, (c - 1) * s) for c, s in zip(counts, strides))
        if hi - lo >= hi_limit - lo_limit:
            return None
        return int(rng.integers(lo_limit - lo, hi_limit - hi))

    src = base(src_space, src_strides, 0, work[src_space])
    dst = base(dst_space, dst_strides, work[dst_space], sizes[dst_space])
    if src is None or dst is None:
        return None
    roll = rng.random()
    if roll < 0.05:
        chip = int(rng.integers(2, 6))                    # no such chip
    if 0.05 <= roll < 0.1:
        dst = sizes[dst_space] - 1                        # runs off the end (or not)
    sent = None if rng.random() < 0.3 else int(rng.integers(N_FLAGS))
    if 0.1 <= roll < 0.15:
        sent = N_FLAGS + 1
    return D((src_space, src), ("remote", chip, dst_space, dst), tuple(counts),
             tuple(src_strides), tuple(dst_strides), int(rng.integers(N_FLAGS)), sent_flag=sent)


def _batch(rng, system, chip, n):
    """``n`` descriptors for chip ``chip``: local ones (illegal ones among them) and pushes
    to the other chip, kept only if, accepted, they leave the landing zones alone (and,
    with several network ports, write no word an earlier accepted push writes)."""
    sizes = {"hbm": system.hbm.size, "vmem": system.vmem.size}
    work = _zones(system)
    landed = {"hbm": set(), "vmem": set()}
    batch = []
    while len(batch) < n:
        if rng.random() < 0.6:
            d = _push(rng, sizes, work, 1 - chip)
        else:
            d = random_descriptor(rng, work)
        if d is None:
            continue
        if golden.validate(d, hbm_words=sizes["hbm"], vmem_words=sizes["vmem"],
                           n_flags=N_FLAGS, n_chips=2) is None:
            src, dst = golden.addresses(d)
            if src.max() >= work[d.src[0]] or (not d.remote and dst.max() >= work[d.dst[0]]):
                continue
            if d.remote and system.network_ports > 1:
                words = landed[d.dst[2]]
                if words & set(dst.tolist()):
                    continue
                words |= set(dst.tolist())
        batch.append(d)
    return batch


def _images(rng, system):
    return (rng.integers(0, 1 << 32, system.hbm.size, dtype=np.uint32),
            rng.integers(0, 1 << 32, system.vmem.size, dtype=np.uint32))


def _expected(images, batches, lanes):
    """Per chip: golden.run, then the other chip's pushes landed."""
    runs = [golden.run(*images[i], batches[i], n_flags=N_FLAGS, lanes=lanes, n_chips=2)
            for i in range(2)]
    final = [golden.land(runs[i].hbm, runs[i].vmem, runs[i].flags, runs[1 - i].pushes)
             for i in range(2)]
    return runs, final


def _packets(run, chip, params, push_port=0):
    """golden.ici's flits of the pushes that leave on ``push_port``: the DMA deals its
    accepted pushes to its ports in turn."""
    ports = params.get("network_ports", 1)
    packets = [p for push in run.pushes[push_port::ports] for p in ici.push_packets(
        push.descriptor, push.data, src_chip=chip, max_payload_words=params["max_payload"],
        flit_words=params["flit_words"])]
    return np.concatenate(packets) if packets else np.zeros((0, params["flit_words"]),
                                                            np.uint32)


# ------------------------------------------------------------------ layouts

def test_packet_layouts_match_golden_ici():
    route = {name: (field.offset, field.width) for name, field in route_word_layout}
    target = {name: (field.offset, field.width) for name, field in target_word_layout}
    assert len(route) + len(target) == len(ici.FIELDS)
    for field in ici.FIELDS:
        assert (route if field.word == 0 else target)[field.name] == (field.lo, field.width)
    for fw in range(1, ici.MAX_FLIT_WORDS + 1):
        assert max_payload_words(fw) == ici.max_payload(fw)


# ------------------------------------------------------------------ two chips

# The plain one-port configuration in make test-slow: the two-port one is the same with more.
@pytest.mark.parametrize("config", [pytest.param(name, marks=pytest.mark.slow)
                                    if name == "w1-lanes4-fw1" else name
                                    for name in sorted(CONFIGS)])
def test_pair_of_chips_matches_golden_run_and_land(config, rng, seed):
    params = CONFIGS[config]
    pair = Pair(stall=0.3, **params)
    system = pair.chips[0]
    images = [_images(rng, system) for _ in range(2)]
    batches = [_batch(rng, system, chip, 16) for chip in range(2)]
    got = run_pair(pair, images, batches, rng=rng, seed=seed)
    runs, final = _expected(images, batches, system.vmem.lanes)
    for i in range(2):
        for name, want in zip(("hbm", "vmem", "flags"), final[i]):
            bad = np.flatnonzero(got[i][name] != want)
            assert not bad.size, (f"chip {i} {name}: {bad.size} words differ, first at "
                                  f"{bad[0]}: got {got[i][name][bad[0]]:#x}, expected "
                                  f"{want[bad[0]]:#x}")
        assert got[i]["errors"] == [tuple(e) for e in runs[i].error_records]
        # Every flit on each port's link is golden.ici's, in order.
        for j, flits in enumerate(got[i]["flits"]):
            np.testing.assert_array_equal(flits, _packets(runs[i], i, params, j))
        assert got[i]["malformed"] == 0
    # The batches must push, split packets and reject some pushes, or they prove little.
    assert all(runs[i].pushes for i in range(2))
    assert any(len(ici.push_packets(p.descriptor, p.data, src_chip=0,
                                    max_payload_words=params["max_payload"])) > 1
               for run in runs for p in run.pushes)
    assert any(batches[i][e.index].remote for i in range(2) for e in runs[i].error_records)
    # With several ports, every port must have carried pushes, or dealing is untested.
    assert all(len(flits) for i in range(2) for flits in got[i]["flits"])


# ------------------------------------------------------------------ the receive engine

def _route(opcode=1, *, dst=1, src=0, length=3, pad=0, vc=0):
    return (ici.OPCODE.put(opcode) | ici.VC.put(vc) | ici.DST.put(dst) | ici.SRC.put(src)
            | ici.LENGTH.put(length) | ici.PAD.put(pad))


def _target(address, flag, space=0):
    return ici.ADDRESS.put(address) | ici.FLAG.put(flag) | ici.SPACE.put(space)


def test_receiver_lands_good_packets_and_drops_malformed_ones(rng):
    # Chip 1 of 3, flit_words 1: good writes and flag adds land; each malformed packet is
    # counted and writes nothing, and the packets after it land.
    system = DmaSystem(hbm_size=64, vmem_lines=8, lanes=4, n_flags=N_FLAGS, n_chips=3)
    hbm, vmem = _images(rng, system)
    data = rng.integers(0, 1 << 32, 16, dtype=np.uint32)

    def write(**kwargs):
        return ici.encode_write(dst=1, src=kwargs.pop("src", 2), **kwargs)

    good = [
        write(space="hbm", address=60, flag=2, data=data[:4]),      # up to the end of HBM
        write(space="vmem", address=3, flag=5, data=data[4:13]),    # crosses VMEM lines
        ici.encode_flag_add(dst=1, src=0, flag=2, amount=1000),
        write(space="vmem", address=31, flag=0, data=data[13:14], src=1),   # from itself
    ]
    bad = [
        np.array([[_route(0)], [_target(0, 1)], [7]], np.uint32),           # opcode 0
        np.array([[_route(3)], [_target(0, 1)], [7]], np.uint32),           # opcode 3
        np.array([[_route(length=0)]], np.uint32),                          # no flits
        np.array([[_route(pad=1)], [_target(0, 1)], [7]], np.uint32),       # pad >= 1
        np.array([[_route(length=2)], [_target(0, 1)]], np.uint32),         # write, no data
        np.array([[_route(2, length=3)], [_target(5, 1)], [0]], np.uint32),  # long flag_add
        ici.encode_write(dst=2, src=0, space="hbm", address=0, flag=1, data=data[:3]),
        #                                                                   ^ misrouted
        write(space="hbm", address=0, flag=1, data=data[:3], src=3),        # no chip 3
        write(space="hbm", address=0, flag=N_FLAGS, data=data[:3]),         # no such flag
        write(space="hbm", address=62, flag=1, data=data[:3]),              # off the end
        write(space="vmem", address=30, flag=1, data=data[:3]),             # off the end
        np.array([[_route(2, length=2)], [_target(5, 1, space=1)]], np.uint32),  # space set
    ]
    # golden.ici agrees on every header-level fault it can see.
    for packet in bad[:6]:
        with pytest.raises(ValueError, match="malformed"):
            ici.decode(packet, n_chips=3)
    stream_ = [*bad[:3], good[0], *bad[3:8], good[1], good[2], *bad[8:], good[3]]
    flits = [int(f) for packet in stream_ for f in packet.ravel()]

    async def tb(ctx):
        load(ctx, system.hbm_words, hbm, 1)
        load(ctx, system.vmem_words, vmem, 4)
        ctx.set(system.chip, 1)
        for flit in flits:
            await put(ctx, system.receive, [flit])
        await ctx.tick().until(system.finished)
        await ctx.tick()
        got_hbm = read_back(ctx, system.hbm_words, 1)
        got_vmem = read_back(ctx, system.vmem_words, 4)
        expected_hbm, expected_vmem = hbm.copy(), vmem.copy()
        expected_hbm[60:64] = data[:4]
        expected_vmem[3:12] = data[4:13]
        expected_vmem[31] = data[13]
        np.testing.assert_array_equal(got_hbm, expected_hbm)
        np.testing.assert_array_equal(got_vmem, expected_vmem)
        flags = [ctx.get(system.flags[f]) for f in range(N_FLAGS)]
        assert flags == [1, 0, 1004, 0, 0, 9, 0, 0]
        assert (ctx.get(system.landed), ctx.get(system.malformed)) == (len(good), len(bad))

    simulate(system, tb)


def test_flags_move_only_after_the_words(rng):
    # One chip pushing to itself, its loop held open: the sent flag moves only once the
    # last flit has left, and the destination flag only once the last word is in memory,
    # even while a local copy keeps the VMEM port busy.
    system = DmaSystem(hbm_size=64, vmem_lines=16, lanes=4, n_flags=N_FLAGS, max_payload=4)
    copy = D(("vmem", 24), ("vmem", 44), (20, 6), (1, 0), (1, 0), 7)
    hbm, vmem = _images(rng, system)
    push = D(("hbm", 3), ("remote", 0, "vmem", 9), (10,), (1,), (1,), 6, sent_flag=2)
    packets = ici.push_packets(push, hbm[3:13], src_chip=0, max_payload_words=4)
    expected = np.concatenate(packets).ravel().tolist()

    async def tb(ctx):
        load(ctx, system.hbm_words, hbm, 1)
        load(ctx, system.vmem_words, vmem, 4)
        await put(ctx, system.descriptors, descriptor_beat(push))
        sent = []
        for _ in range(200):                 # nothing taken: every packet waits
            await ctx.tick()
            assert ctx.get(system.flags[2]) == 0
        ctx.set(system.push.ready, 1)
        while len(sent) < len(expected):
            _, _, valid, flit = await ctx.tick().sample(system.push.valid, system.push.payload)
            if valid:
                sent.append(int(flit[0]))
            else:
                assert ctx.get(system.flags[2]) == 0, "sent flag before the last flit"
        assert sent == expected
        await ctx.tick().repeat(2)
        assert ctx.get(system.flags[2]) == 10
        # Land them (looped back) during the copy, while `watch` checks the flag against
        # VMEM.
        await put(ctx, system.descriptors, descriptor_beat(copy))
        await ctx.tick().repeat(4)
        for flit in sent:
            await put(ctx, system.receive, [flit])

    seen = []
    contended = []

    async def watch(ctx):
        # Each packet adds its words once they are all written: whenever the flag shows
        # v, the first v words have landed (the packets come in order).
        while not seen or seen[-1] < 10:
            await ctx.tick()
            value = ctx.get(system.flags[6])
            receiver = system.receivers[0]
            if ctx.get(receiver.vmem.req.valid & ~receiver.vmem.req.ready):
                contended.append(value)
            if not seen or value != seen[-1]:
                seen.append(value)
                landed = read_back(ctx, system.vmem_words, 4)[9:9 + value]
                np.testing.assert_array_equal(landed, hbm[3:3 + value])

    simulate(system, tb, watch)
    assert seen == [0, 4, 8, 10]
    assert contended, "the copy never made the landing wait"


# ------------------------------------------------------------------ parameters

@pytest.mark.parametrize("make, error, match", [
    (lambda: DmaSystem(max_payload=0), ValueError, "max_payload must be at least 1"),
    (lambda: DmaSystem(max_payload=510), ValueError, "max_payload must be at most 509"),
    (lambda: DmaSystem(flit_words=9), ValueError, "flit_words must be at most 8"),
    (lambda: DmaSystem(n_chips=257), ValueError, "n_chips must be at most 256"),
    (lambda: DmaSystem(network_ports=0), ValueError, "network_ports must be at least 1"),
    (lambda: DmaSystem(network_ports=7), ValueError, "network_ports must be at most 6"),
    (lambda: DmaSystem(push_beats=0), ValueError, "push_beats must be at least 1"),
    (lambda: Packetizer(max_words=2, max_payload=2.0), TypeError, "max_payload must be an int"),
    (lambda: Receiver(ports={0: None, 1: None}, sizes=(8, 8), n_flags=1), TypeError,
     "port 0 must be a MemoryPortSignature"),
])
def test_bad_remote_parameters(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_default_packet_size_fits_a_flit_of_one_word():
    assert DEFAULT_MAX_PAYLOAD <= max_payload_words(1)


# ------------------------------------------------------------------ one chip, looped

class Loop(wiring.Component):
    """A DmaSystem whose ``push`` feeds its own ``receive``: a chip pushing to itself."""

    def __init__(self, system):
        self.system = system
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.system = self.system
        wiring.connect(m, self.system.push, self.system.receive)
        return m


def test_a_push_of_faulting_reads_sends_zeros_and_completes(rng):
    # As a local transfer, each faulting line read is reported; the push still sends all
    # its words (zeros for the faulting ones), so both its flags count every word.
    system = DmaSystem(hbm_size=64, vmem_lines=8, lanes=4, words_per_cycle=2, read_latency=4,
                       error_ranges=[(16, 20)], n_flags=N_FLAGS)
    hbm, vmem = _images(rng, system)
    descriptors = [D(("hbm", 12), ("remote", 0, "vmem", 4), (10,), (1,), (1,), 1, sent_flag=2),
                   D(("hbm", 0), ("vmem", 20), (4,), (1,), (1,), 3)]
    run = run_batch(system, hbm, vmem, descriptors, top=Loop(system), stall=0.3, rng=rng)
    assert run["errors"] == [(0, "bus", 16), (0, "bus", 18)]
    expected_vmem = vmem.copy()
    expected_vmem[4:8] = hbm[12:16]
    expected_vmem[8:12] = 0
    expected_vmem[12:14] = hbm[20:22]
    expected_vmem[20:24] = hbm[0:4]
    np.testing.assert_array_equal(run["vmem"], expected_vmem)
    np.testing.assert_array_equal(run["hbm"], hbm)
    assert run["flags"][1:4].tolist() == [10, 10, 4]


def test_push_rejections_follow_golden_order(rng):
    # First failure wins: count, chip, flag, sent flag, source range, destination range
    # (checked against the local space of that name); later descriptors proceed.
    system = DmaSystem(hbm_size=64, vmem_lines=8, lanes=4, n_flags=N_FLAGS, n_chips=2)
    hbm, vmem = _images(rng, system)
    bad_flag, bad_sent = N_FLAGS, N_FLAGS + 3
    descriptors = [
        D(("hbm", 5), ("remote", 9, "vmem", 0), (4, 0), (1, 1), (1, 1), bad_flag),  # count
        D(("hbm", 5), ("remote", 2, "vmem", 0), (4,), (1,), (1,), bad_flag),        # chip
        D(("hbm", 5), ("remote", 1, "vmem", 0), (4,), (1,), (1,), bad_flag,
          sent_flag=bad_sent),                                                      # flag
        D(("hbm", 70), ("remote", 1, "vmem", 0), (4,), (1,), (1,), 1,
          sent_flag=bad_sent),                                                      # sent
        D(("hbm", 62), ("remote", 1, "vmem", 28), (4,), (1,), (1,), 1),    # src at 64
        D(("hbm", 0), ("remote", 1, "vmem", 30), (4,), (1,), (1,), 1),     # dst: vmem is 32
        D(("hbm", 0), ("remote", 0, "hbm", 60), (4,), (1,), (1,), 1, sent_flag=2),  # fine
    ]
    run = run_batch(system, hbm, vmem, descriptors, top=Loop(system), stall=0.3, rng=rng)
    expected = golden.run(hbm, vmem, descriptors, n_flags=N_FLAGS, lanes=4, n_chips=2)
    assert [e.reason for e in expected.error_records] == [
        "count", "chip", "flag", "sent_flag", "src_range", "dst_range"]
    assert run["errors"] == [tuple(e) for e in expected.error_records]
    for name, want in zip(("hbm", "vmem", "flags"),
                          golden.land(expected.hbm, expected.vmem, expected.flags,
                                      expected.pushes)):
        np.testing.assert_array_equal(run[name], want)


def test_local_traffic_and_landing_share_the_memory_ports(rng):
    # Long local transfers on both memories while long pushes land on both: the writer
    # merge takes turns, so both finish, each as golden says (disjoint words).
    system = DmaSystem(hbm_size=256, vmem_lines=32, lanes=4, words_per_cycle=1,
                       read_latency=2, n_flags=N_FLAGS, max_payload=16)
    hbm, vmem = _images(rng, system)
    descriptors = [D(("hbm", 0), ("vmem", 0), (60,), (1,), (1,), 1),
                   D(("hbm", 60), ("remote", 0, "hbm", 192), (60,), (1,), (1,), 2),
                   D(("vmem", 60), ("hbm", 120), (60,), (1,), (1,), 3),
                   D(("vmem", 60), ("remote", 0, "vmem", 64), (60,), (1,), (1,), 4),
                   D(("hbm", 0), ("hbm", 64), (40,), (1,), (1,), 5)]
    run = run_batch(system, hbm, vmem, descriptors, top=Loop(system), rng=rng)
    expected = golden.run(hbm, vmem, descriptors, n_flags=N_FLAGS, lanes=4)
    for name, want in zip(("hbm", "vmem", "flags"),
                          golden.land(expected.hbm, expected.vmem, expected.flags,
                                      expected.pushes)):
        np.testing.assert_array_equal(run[name], want)
    # One-word HBM lines: 60 + 40 local writes and 60 landed ones, all on the HBM's port.
    assert len(run["requests"]["hbm", "write"]) == 160


def test_writer_merge_takes_turns_and_holds_its_offer(rng):
    merge = WriterMerge(signature=MemoryPortSignature(addr_width=8, words=1))
    main_reqs = [{"addr": a, "write": int(rng.random() < 0.5), "data": [a], "mask": 1}
                 for a in range(40)]
    writer_reqs = [{"addr": 100 + a, "write": 1, "data": [a], "mask": 1} for a in range(40)]
    seen = []

    def driver(port, requests):
        async def drive(ctx):
            for request in requests:
                await put(ctx, port.req, request)
        return drive

    async def memory(ctx):
        offer = None
        while len(seen) < 80:
            ready = bool(rng.random() < 0.6)
            ctx.set(merge.memory.req.ready, ready)
            _, _, valid, payload, main_waits, writer_waits = await ctx.tick().sample(
                merge.memory.req.valid, merge.memory.req.payload, merge.main.req.valid,
                merge.writer.req.valid)
            if offer is not None:
                assert valid and payload.addr == offer, "an offer changed before it was taken"
            offer = None
            if valid and ready:
                seen.append((payload.addr, main_waits and writer_waits))
            elif valid:
                offer = payload.addr

    simulate(merge, driver(merge.main, main_reqs), driver(merge.writer, writer_reqs), memory)
    order = [addr for addr, _ in seen]
    assert [a for a in order if a < 100] == list(range(40))
    assert [a - 100 for a in order if a >= 100] == list(range(40))
    # Neither goes twice in a row while the other waits.
    sides = [(addr >= 100, both) for addr, both in seen]
    assert sum(both for _, both in sides) > 10, "too little contention to tell"
    assert not any(a == b and both_a and both_b
                   for (a, both_a), (b, both_b) in zip(sides, sides[1:]))
