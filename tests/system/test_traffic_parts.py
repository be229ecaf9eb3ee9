# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct components whose __init__ raises.)
"""The network testbench's parts on the Amaranth simulator: the latency histogram's bins,
the traffic generator's packets (decoded with ``golden.ici``, destinations against the
patterns' definitions) and the sink's checks and measurements on hand-made packets."""

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from golden import ici
from hdl.testbench import TrafficGenerator, TrafficSink
from hdl.system.layouts import (BUCKETS, MODES, TIME_BITS, bucket_range, latency_bucket,
                                latency_bucket_hw, payload_word)

CLOCK = 1e-8


def simulate(dut, testbench, *, clock=True):
    sim = Simulator(dut)
    if clock:
        sim.add_clock(CLOCK)
    sim.add_testbench(testbench)
    sim.run()


def test_histogram_bins_tile_the_latencies():
    """Bins are contiguous, start at 0, end at 2**TIME_BITS - 1, are one cycle wide below
    128 and at most 1/8 of their lower edge above."""
    edges = [bucket_range(b) for b in range(BUCKETS)]
    assert edges[0] == (0, 0) and edges[-1][1] == (1 << TIME_BITS) - 1
    for (lo0, hi0), (lo1, hi1) in zip(edges, edges[1:]):
        assert lo1 == hi0 + 1 and hi1 >= lo1
    for lo, hi in edges:
        assert hi - lo + 1 <= max(1, lo // 8)
        assert latency_bucket(lo) == latency_bucket(hi) == edges.index((lo, hi))
    with pytest.raises(ValueError, match="latency 16777216 is outside"):
        latency_bucket(1 << TIME_BITS)


class _Buckets(wiring.Component):
    latency: In(TIME_BITS)
    bucket: Out(9)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.bucket.eq(latency_bucket_hw(m, self.latency))
        return m


def test_histogram_bins_in_hardware(rng):
    probes = [0, 1, 127, 128, 143, 144, 255, 256, 1023, 1024, (1 << TIME_BITS) - 1]
    probes += [int(x) for x in rng.integers(0, 1 << TIME_BITS, 40)]
    probes += [int(x) for x in rng.integers(0, 4096, 40)]
    dut = _Buckets()

    async def tb(ctx):
        for latency in probes:
            ctx.set(dut.latency, latency)
            lo, hi = bucket_range(ctx.get(dut.bucket))
            assert lo <= latency <= hi, (latency, ctx.get(dut.bucket))
    simulate(dut, tb, clock=False)


def run_generator(settings, *, cycles, n_nodes=4, local_ports=1, lane=0, source_queue=8,
                  ready=None):
    """Run a generator; returns the packets it injected (flit rows) and its counters."""
    dut = TrafficGenerator(n_nodes=n_nodes, lane=lane, local_ports=local_ports,
                           source_queue=source_queue)
    flits, out = [], {}

    async def tb(ctx):
        for name, value in settings.items():
            ctx.set(getattr(dut, name), value)
        await ctx.tick()
        ctx.set(dut.go, 1)
        for cycle in range(cycles):
            ctx.set(dut.now, cycle)
            ok = ready is None or ready(cycle)
            ctx.set(dut.inject.ready, ok)
            if ok and ctx.get(dut.inject.valid):
                value = ctx.get(dut.inject.payload.as_value())
                flits.append([value & 0xFFFF_FFFF, value >> 32])
            await ctx.tick()
        for name in ("created", "injected", "overflow", "corrupted", "malformed", "queued"):
            out[name] = ctx.get(getattr(dut, name))
    simulate(dut, tb)
    return cut(flits), out


def cut(flits):
    """Flit rows into packets, by the route word's length."""
    packets, k = [], 0
    while k < len(flits):
        length = max(1, ici.LENGTH.get(flits[k][0]))
        if k + length > len(flits):
            break
        packets.append(np.array(flits[k:k + length], dtype=np.uint32))
        k += length
    return packets


BASE = dict(node=1, create=1, window=1, mode=MODES["fixed"], threshold=1 << 16,
            packet_flits=3, message_packets=1, first_dst=3, sends=1, seed=5, alive=0b1111)


@pytest.mark.parametrize("packet_flits", [1, 3])
def test_generator_packets_decode_with_golden(packet_flits):
    """A packet every cycle to node 3: golden decodes each, with src 1, dst 3, a time stamp
    that is its creation cycle (queued in order), a tag counting 0, 1, 2, ... and the data
    words of ``payload_word``; the queue overflows and counts it."""
    settings = BASE | dict(packet_flits=packet_flits)
    packets, out = run_generator(settings, cycles=60)
    assert len(packets) >= 10
    stamps = []
    for k, flits in enumerate(packets):
        p = ici.decode(flits, n_chips=4)
        assert (p.src, p.dst, p.flag) == (1, 3, k)
        stamps.append(p.amount if packet_flits == 1 else p.address)
        if packet_flits == 1:
            assert p.opcode == "flag_add"
        else:
            assert p.opcode == "write" and p.space == "vmem"
            assert list(p.data) == [payload_word(1, 3, k, j) for j in range(2 * 3 - 2)]
    # Created one a cycle from cycle 0; those that found the queue full are skipped.
    assert stamps[0] == 0 and all(a < b for a, b in zip(stamps, stamps[1:]))
    assert stamps[-1] - (len(stamps) - 1) <= out["overflow"]
    assert out["created"] == 60 and out["injected"] == len(packets)
    assert out["created"] == out["injected"] + out["overflow"] + out["queued"]
    assert (out["overflow"] > 0) == (packet_flits > 1)     # 1 flit a cycle keeps up


def test_generator_holds_its_flit_under_backpressure(rng):
    """With ``ready`` low at random, every packet still decodes, in tag order."""
    stalls = rng.random(200) < 0.5
    packets, _ = run_generator(BASE | dict(mode=MODES["uniform"], threshold=1 << 14),
                               cycles=200, ready=lambda c: not stalls[c])
    assert len(packets) > 5
    tags = {}
    for flits in packets:
        p = ici.decode(flits, n_chips=4)
        assert p.src == 1 and p.dst != 1
        assert p.flag == tags.get(p.dst, 0)
        tags[p.dst] = p.flag + 1
        assert list(p.data) == [payload_word(1, p.dst, p.flag, j) for j in range(4)]


def test_uniform_destinations(seed):
    """Uniform traffic from node 2 of 8 with node 5 dead: every other live node, about
    equally often, never 2 or 5."""
    settings = BASE | dict(node=2, mode=MODES["uniform"], packet_flits=1, seed=seed or 1,
                           alive=0xFF & ~(1 << 5))
    packets, _ = run_generator(settings, cycles=700, n_nodes=8, source_queue=4)
    dst = np.array([ici.DST.get(p[0, 0]) for p in packets])
    counts = np.bincount(dst, minlength=8)
    assert counts[2] == counts[5] == 0
    live = counts[[0, 1, 3, 4, 6, 7]]
    expect = len(dst) / 6
    assert ((live - expect) ** 2 / expect).sum() < 25, counts   # chi-square, 5 dof


def test_all_to_all_destinations():
    """Messages of 2 packets from node 1 starting at node 2, which is dead: 3, 3, 0, 0, then
    (skipping 1 and 2) 3, 3, 0, 0, ..."""
    settings = BASE | dict(mode=MODES["all_to_all"], packet_flits=1, message_packets=2,
                           first_dst=2, alive=0b1011)
    packets, _ = run_generator(settings, cycles=40)
    dst = [ici.DST.get(p[0, 0]) for p in packets]
    assert len(dst) >= 12
    assert dst == ([3, 3, 0, 0] * 10)[:len(dst)]


def test_lanes_tag_their_packets():
    """Lane 1 of 2 puts its lane in the tag's low bit, the sequence above it."""
    packets, _ = run_generator(BASE | dict(packet_flits=1), cycles=20, local_ports=2, lane=1)
    assert [ici.decode(p).flag for p in packets[:5]] == [1, 3, 5, 7, 9]


def test_generator_knobs():
    """Every 3rd packet malformed (opcode 0, then the unknown destination 4), every 2nd of
    the rest corrupted in its last word; malformed packets take no tag."""
    settings = BASE | dict(packet_flits=2, malformed_every=3, corrupt_every=2)
    packets, out = run_generator(settings, cycles=80)
    kinds, tag = [], 0
    for k, flits in enumerate(packets):
        route = int(flits[0, 0])
        if k % 3 == 2:
            bad = ici.OPCODE.get(route) == 0 if (k // 3) % 2 == 0 else ici.DST.get(route) == 4
            assert bad, (k, hex(route))
            kinds.append("malformed")
            continue
        words = flits.ravel()
        assert ici.FLAG.get(words[1]) == tag
        want = [payload_word(1, 3, tag, j) for j in range(2)]
        corrupt = len([x for x in kinds if x != "malformed"]) % 2 == 1
        want[-1] ^= int(corrupt)
        assert list(words[2:]) == want, k
        kinds.append("corrupt" if corrupt else "good")
        tag += 1
    assert out["malformed"] == kinds.count("malformed") > 0
    assert out["corrupted"] == kinds.count("corrupt") > 0


def sink_packets():
    """Hand-made packets for node 2 (of 4), with what the sink must count for each."""
    def probe(src, tag, stamp, *, flits=2, dst=2, corrupt=False):
        if flits == 1:
            rows = ici.encode_flag_add(dst=dst, src=src, flag=tag, amount=stamp, flit_words=2)
        else:
            data = np.array([payload_word(src, dst, tag, j) for j in range(2 * flits - 2)],
                            np.uint32)
            if corrupt:
                data[0] ^= 0x100
            rows = ici.encode_write(dst=dst, src=src, space="vmem", address=stamp, flag=tag,
                                    data=data, flit_words=2)
        return rows
    return [
        (probe(0, 0, 10), "good"),
        (probe(0, 1, 11), "good"),
        (probe(1, 0, 12), "good"),
        (probe(0, 1, 13), "sequence"),      # repeated
        (probe(0, 2, 14), "good"),          # the sink follows the sequence it saw
        (probe(1, 1, 15, corrupt=True), "payload"),
        (probe(3, 0, 16, dst=1), "header"),  # not for this node
        (probe(3, 0, 17, flits=1), "header"),  # a flag_add where writes are expected
        (probe(3, 0, 18), "good"),
    ]


def test_sink_checks_and_measures():
    """Packets taken at known cycles: each error counted once in its class, latency (now -
    stamp) summed, binned and maxed, hops summed, flits counted, for the window only."""
    dut = TrafficSink(n_nodes=4)
    packets = sink_packets()
    out = {}

    async def tb(ctx):
        ctx.set(dut.node, 2)
        ctx.set(dut.packet_flits, 2)
        ctx.set(dut.hops, 3)
        ctx.set(dut.window, 1)
        now = 100
        for rows, _ in packets:
            for row in rows:
                ctx.set(dut.now, now)
                ctx.set(dut.eject.valid, 1)
                ctx.set(dut.eject.payload.as_value(), int(row[0]) | int(row[1]) << 32)
                await ctx.tick()
                now += 1
            ctx.set(dut.eject.valid, 0)
            await ctx.tick()
            now += 1
        for name in ("received", "packets_window", "flits_window", "hops_window",
                     "latency_max", "header_errors", "sequence_errors", "payload_errors",
                     "latency"):
            out[name] = ctx.get(getattr(dut, name))
        out["bins"] = {}
        for b in range(BUCKETS):
            ctx.set(dut.hist_addr, b)
            if ctx.get(dut.hist_data):
                out["bins"][b] = ctx.get(dut.hist_data)
    simulate(dut, tb)

    # Tails leave at now = 101, 104, ... (2 flits and a gap each); the 1-flit one earlier.
    tails, now = [], 100
    for rows, _ in packets:
        now += len(rows)
        tails.append(now - 1)
        now += 1
    stamps = [10, 11, 12, 13, 14, 15, 16, 17, 18]
    latencies = [t - s for t, s in zip(tails, stamps)]
    kinds = [kind for _, kind in packets]
    assert out["received"] == out["packets_window"] == len(packets)
    assert out["flits_window"] == sum(len(rows) for rows, _ in packets)
    assert out["header_errors"] == kinds.count("header")
    assert out["sequence_errors"] == kinds.count("sequence")
    assert out["payload_errors"] == kinds.count("payload")
    assert out["latency"] == sum(latencies) and out["latency_max"] == max(latencies)
    assert out["hops_window"] == 3 * len(packets)
    want = {}
    for latency in latencies:
        want[latency_bucket(latency)] = want.get(latency_bucket(latency), 0) + 1
    assert out["bins"] == want


@pytest.mark.parametrize("make, message", [
    (lambda: TrafficGenerator(n_nodes=1), "n_nodes must be at least 2"),
    (lambda: TrafficGenerator(n_nodes=4, lane=1), "lane must be at most 0"),
    (lambda: TrafficGenerator(n_nodes=4, local_ports=3), "local_ports must be at most 2"),
    (lambda: TrafficGenerator(n_nodes=4, source_queue=0), "source_queue must be at least 1"),
    (lambda: TrafficSink(n_nodes=257), "n_nodes must be at most 256"),
])
def test_bad_parameters(make, message):
    with pytest.raises(ValueError, match=message):
        make()

