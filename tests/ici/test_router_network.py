# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct components whose __init__ raises.)
"""Small networks of ICI routers joined by link models (``hdl.ici.Network``) on the
Amaranth simulator: seeded random traffic with every packet checked on ejection (source,
sequence, payload, exactly once, in order per pair), every flit on every link checked
against its golden route (``golden.topology.route``: chip, port and VC of each hop, in
order), the forwarded counters against the golden routes, malformed packets dropped at
their first router, and the zero-load latency against hop counts."""

from collections import deque

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden import ici
from golden import topology as topo
from hdl.ici import encode_route_entry, table_entries
from hdl.ici.network import Network

CLOCK = 1e-8


def as_int(row):
    return sum(int(w) << (32 * j) for j, w in enumerate(row))


def as_row(value, flit_words):
    return np.array([(value >> (32 * j)) & 0xFFFFFFFF for j in range(flit_words)], np.uint32)


def make_packet(rng, *, src, dst, seq, flit_words, max_data):
    """A golden packet from ``src`` numbered ``seq`` (word 1's address or amount)."""
    if rng.random() < 0.25:
        return ici.encode_flag_add(dst=dst, src=src, flag=seq % 128, amount=seq,
                                   flit_words=flit_words)
    data = rng.integers(0, 1 << 32, int(rng.integers(1, max_data + 1)), dtype=np.uint32)
    return ici.encode_write(dst=dst, src=src, space="vmem", address=seq, flag=seq % 128,
                            data=data, flit_words=flit_words)


def cut(rows, where):
    """Cut a flit sequence into packets by their headers' ``length``."""
    out, k = [], 0
    while k < len(rows):
        length = ici.LENGTH.get(rows[k][0])
        assert 1 <= length <= len(rows) - k, \
            f"{where}: header at flit {k} says length {length}: interleaved or lost flits"
        out.append(rows[k:k + length])
        k += length
    return out


class NetBench:
    """Per-chip injectors and ejection sinks, and a monitor of every lit link."""

    def __init__(self, net, rng, *, ready_p=0.8):
        self.net, self.rng, self.ready_p = net, rng, ready_p
        self.n, self.fw = net.n_chips, net.routers[0].flit_words
        self.plans = [deque() for _ in range(self.n)]   # (cycle, key, flits)
        self.offer = [None] * self.n                    # (key, flit index, flits)
        self.sent = {}                                  # key -> (flits, inject cycle)
        self.ejected = [[] for _ in range(self.n)]      # (cycle, row)
        self.on_link = {}                               # (chip, port, vc) -> [(cycle, row)]
        self.cycle = 0

    def plan(self, chip, at, key, flits):
        self.plans[chip].append((at, key, flits))

    def pending(self):
        return any(self.plans) or any(o is not None for o in self.offer)

    async def step(self, ctx):
        net, rng = self.net, self.rng
        for (c, p) in net.links:
            tx = net.routers[c].tx[p]
            if ctx.get(tx.valid):
                row = as_row(ctx.get(tx.data.as_value()), self.fw)
                self.on_link.setdefault((c, p, ctx.get(tx.vc)), []).append((self.cycle, row))
        for c in range(self.n):
            ready = rng.random() < self.ready_p
            ctx.set(net.eject[c].ready, ready)
            if ready and ctx.get(net.eject[c].valid):
                self.ejected[c].append(
                    (self.cycle, as_row(ctx.get(net.eject[c].payload.as_value()), self.fw)))
            if self.offer[c] is None and self.plans[c] and self.plans[c][0][0] <= self.cycle:
                _, key, flits = self.plans[c].popleft()
                self.sent[key] = (flits, self.cycle)
                self.offer[c] = (key, 0, flits)
            ctx.set(net.inject[c].valid, self.offer[c] is not None)
            if self.offer[c] is not None:
                key, k, flits = self.offer[c]
                ctx.set(net.inject[c].payload.as_value(), as_int(flits[k]))
                if ctx.get(net.inject[c].ready):
                    self.offer[c] = (key, k + 1, flits) if k + 1 < len(flits) else None
        await ctx.tick()
        self.cycle += 1

    async def load_tables(self, ctx, entries):
        """All routers' tables in parallel, one entry per cycle."""
        for dst in range(self.n):
            for c in range(self.n):
                ctx.set(self.net.table[c].payload.dst, dst)
                ctx.set(self.net.table[c].payload.entry.as_value(), entries[c][dst])
                ctx.set(self.net.table[c].valid, 1)
            await ctx.tick()
        for c in range(self.n):
            ctx.set(self.net.table[c].valid, 0)

    async def run(self, ctx, *, want, limit, tail=30):
        """Step until ``want`` flits have been ejected (everything injected), then ``tail``."""
        while self.pending() or sum(map(len, self.ejected)) < want:
            assert self.cycle < limit, f"network hung at cycle {self.cycle}: " \
                f"{sum(map(len, self.ejected))} of {want} flits ejected"
            await self.step(ctx)
        for _ in range(tail):
            await self.step(ctx)


def simulate(net, body):
    sim = Simulator(net)
    sim.add_clock(CLOCK)
    sim.add_testbench(body)
    sim.run()


def build(topology, *, vcs=2, buffer_flits=4, flit_words=1, link_latency=2, pipeline=1):
    tables = topo.routing_tables(topology, vcs=vcs)
    net = Network(neighbor=topology.neighbor, vcs=vcs, buffer_flits=buffer_flits,
                  flit_words=flit_words, link_latency=link_latency, pipeline=pipeline)
    entries = [table_entries(tables, c, vcs=vcs) for c in range(topology.n_chips)]
    return tables, net, entries


def check_deliveries(bench, topology, tables):
    """Every injected packet ejected once at its destination, intact and in order per
    pair, after exactly its golden route; returns the flits per (chip, port) of the
    golden routes."""
    delivered = {}
    for c, got in enumerate(bench.ejected):
        for pkt in cut([row for _, row in got], f"eject of chip {c}"):
            p = ici.decode(np.array(pkt), n_chips=topology.n_chips)
            key = (p.src, p.address if p.opcode == "write" else p.amount)
            assert p.dst == c, f"packet {key} for chip {p.dst} ejected at chip {c}"
            assert key in bench.sent, f"chip {c} ejected a packet never sent: {key}"
            assert key not in delivered, f"packet {key} ejected twice"
            np.testing.assert_array_equal(np.array(pkt), bench.sent[key][0],
                                          f"packet {key} changed on its way")
            delivered[key] = c
    lost = sorted(set(bench.sent) - set(delivered))
    assert not lost, f"packets (src, seq) {lost[:5]} never ejected"

    # In order per (src, dst): the ejection order of each pair follows the sequence.
    for c, got in enumerate(bench.ejected):
        last = {}
        for pkt in cut([row for _, row in got], ""):
            p = ici.decode(np.array(pkt))
            seq = p.address if p.opcode == "write" else p.amount
            assert seq > last.get(p.src, -1), f"packets {p.src} -> {c} out of order"
            last[p.src] = seq

    # Every hop of every packet, in time order, against its golden route.
    hops = {}
    for (c, port, vc), got in bench.on_link.items():
        rows = [row for _, row in got]
        for start, pkt in zip(np.cumsum([0] + [len(q) for q in cut(rows, "")]),
                              cut(rows, f"link out of chip {c} port {port} VC {vc}")):
            p = ici.decode(np.array(pkt))
            key = (p.src, p.address if p.opcode == "write" else p.amount)
            hops.setdefault(key, []).append((got[start][0], c, port, vc))
    stray = set(hops) - set(bench.sent)
    assert not stray, f"packets {sorted(stray)[:5]} on links were never sent"
    per_port = np.zeros((topology.n_chips, topology.n_ports + 1), np.int64)
    for key, (flits, _) in bench.sent.items():
        dst = ici.DST.get(flits[0, 0])
        golden = topo.route(topology, tables, key[0], dst)
        taken = [h[1:] for h in sorted(hops.get(key, []))]
        assert taken == golden, f"packet {key} took {taken}, golden route {golden}"
        for c, port, _ in golden:
            per_port[c, port] += len(flits)
        per_port[dst, topology.n_ports] += len(flits)
    return per_port


async def read_counters(ctx, net):
    return (np.array([[ctx.get(r.forwarded[o]) for o in range(r.n_ports + 1)]
                      for r in net.routers]),
            [ctx.get(r.dropped) for r in net.routers],
            [ctx.get(r.overflow) for r in net.routers])


@pytest.mark.parametrize("shape, failed, kwargs", [
    ((4, 1), (), dict()),                                       # a ring with a dateline
    ((2, 2), (), dict(flit_words=2, pipeline=2, buffer_flits=3, link_latency=1)),
    # Rings of 3 with datelines (VCs 0-1) around a failed chip (escape VC 2), with
    # buffers shorter than the credit round trip.
    # In make test-slow (14 s): the 2x4 network's Verilator run routes around a failed chip
    # in make test (tests/system/test_network.py).
    pytest.param((3, 3), (4,), dict(vcs=3, buffer_flits=2, link_latency=3),
                 marks=pytest.mark.slow),
], ids=["ring4", "2x2", "3x3-failed"])
def test_random_traffic_is_delivered_on_golden_routes(shape, failed, kwargs, rng, seed):
    topology = topo.torus(shape, failed=failed)
    tables, net, entries = build(topology, **kwargs)
    bench = NetBench(net, rng)
    n, fw = topology.n_chips, bench.fw
    alive = np.flatnonzero(topology.alive)
    per_chip = 10 if n <= 4 else 6
    for src in alive.tolist():
        at = 0
        for seq in range(per_chip):
            at += int(rng.geometric(0.3)) - 1
            dst = int(rng.choice(alive))
            bench.plan(src, at, (src, seq), make_packet(rng, src=src, dst=dst, seq=seq,
                                                        flit_words=fw, max_data=6))
        # And one packet on each escape route that starts here.
        for seq, dst in enumerate(np.flatnonzero(tables.escape[src]).tolist(), per_chip):
            bench.plan(src, at, (src, seq), make_packet(rng, src=src, dst=dst, seq=seq,
                                                        flit_words=fw, max_data=6))
    want = sum(len(f) for q in bench.plans for _, _, f in q)
    result = {}

    async def body(ctx):
        await bench.load_tables(ctx, entries)
        bench.cycle = 0
        await bench.run(ctx, want=want, limit=3000)
        result["counters"] = await read_counters(ctx, net)

    simulate(net, body)
    per_port = check_deliveries(bench, topology, tables)
    forwarded, dropped, overflow = result["counters"]
    np.testing.assert_array_equal(forwarded, per_port, f"seed {seed}: forwarded counters")
    assert dropped == [0] * n and overflow == [0] * n
    # Every VC was used: datelines on the rings, escape hops around the failure.
    if shape != (2, 2):
        assert {vc for (_, _, vc) in bench.on_link} == set(range(net.routers[0].vcs))


def test_malformed_packets_stop_at_their_first_router(rng):
    """Malformed packets injected between good ones are dropped and counted by the
    source router, and no flit of theirs reaches a link; the good ones all arrive."""
    topology = topo.torus((4, 1))
    tables, net, entries = build(topology)
    bench = NetBench(net, rng)
    bad_count = [0] * 4
    for src in range(4):
        for seq in range(6):
            if seq % 2:
                route = ici.OPCODE.put(int(rng.choice([0, 1, 3]))) | ici.SRC.put(src) \
                    | ici.DST.put(int(rng.choice([4, 9, 255]))) | ici.LENGTH.put(3)
                flits = np.array([[route], [seq], [0xBAD]], np.uint32)
                bench.plan(src, 0, ("bad", src, seq), flits)
                bad_count[src] += 1
            else:
                dst = int(rng.integers(0, 4))
                bench.plan(src, 0, (src, seq), make_packet(rng, src=src, dst=dst, seq=seq,
                                                          flit_words=1, max_data=4))
    want = sum(len(f) for q in bench.plans for _, key, f in q if key[0] != "bad")
    result = {}

    async def body(ctx):
        await bench.load_tables(ctx, entries)
        await bench.run(ctx, want=want, limit=2000)
        result["counters"] = await read_counters(ctx, net)

    simulate(net, body)
    for key in [k for k in bench.sent if k[0] == "bad"]:
        del bench.sent[key]
    check_deliveries(bench, topology, tables)
    _, dropped, overflow = result["counters"]
    assert dropped == bad_count and overflow == [0] * 4


@pytest.mark.parametrize("pipeline, link_latency", [(1, 2), (2, 1)])
def test_zero_load_latency_per_hop(pipeline, link_latency):
    """Alone in the network, a packet's header goes from ``inject`` to ``eject`` in
    ``(h + 1) * pipeline + h * link_latency`` cycles over its ``h`` golden hops."""
    topology = topo.torus((4, 1))
    tables, net, entries = build(topology, pipeline=pipeline, link_latency=link_latency)
    bench = NetBench(net, np.random.default_rng(0), ready_p=1.0)
    measured = {}

    async def body(ctx):
        await bench.load_tables(ctx, entries)
        for src in range(4):
            for dst in range(4):
                flits = ici.encode_flag_add(dst=dst, src=src, flag=0, amount=4 * src + dst)
                bench.plan(src, bench.cycle, (src, 4 * src + dst), flits)
                start, before = bench.cycle, len(bench.ejected[dst])
                await bench.run(ctx, want=sum(map(len, bench.ejected)) + len(flits),
                                limit=bench.cycle + 100, tail=2)
                measured[src, dst] = bench.ejected[dst][before][0] - start

    simulate(net, body)
    for (src, dst), cycles in measured.items():
        h = len(topo.route(topology, tables, src, dst))
        assert cycles == (h + 1) * pipeline + h * link_latency, (src, dst, h, cycles)


@pytest.mark.parametrize("pipeline, spare", [(1, 0), (2, 0), (1, -1)])
def test_one_vc_streams_at_full_rate_with_a_round_trip_of_credits(pipeline, spare):
    """Two routers, one 2-cycle link: a 48-flit packet streams one flit per cycle when
    each VC buffer holds the credit round trip, ``2L + 2 + pipeline`` flits; with one
    less it stalls."""
    latency = 2
    depth = 2 * latency + 2 + pipeline + spare
    net = Network(neighbor=[[1, -1, -1, -1], [-1, 0, -1, -1]], buffer_flits=depth,
                  link_latency=latency, pipeline=pipeline)
    entries = [[encode_route_entry(port=4), encode_route_entry(port=0)],
               [encode_route_entry(port=-1), encode_route_entry(port=4)]]
    rng = np.random.default_rng(0)
    bench = NetBench(net, rng, ready_p=1.0)
    flits = ici.encode_write(dst=1, src=0, space="hbm", address=0, flag=0,
                             data=rng.integers(0, 1 << 32, 46, dtype=np.uint32))
    bench.plan(0, 0, (0, 0), flits)

    async def body(ctx):
        await bench.load_tables(ctx, entries)
        await bench.run(ctx, want=48, limit=500)

    simulate(net, body)
    cycles = [t for t, _ in bench.ejected[1]]
    assert len(cycles) == 48
    span = cycles[-1] - cycles[0] + 1
    assert (span == 48) == (spare == 0), f"48 flits over {span} cycles"


def test_neighbor_map_is_checked():
    with pytest.raises(ValueError, match="does not lead back"):
        Network(neighbor=[[1, 1, -1, -1], [-1, 0, -1, -1]])
    with pytest.raises(ValueError, match="4 or 6 ports"):
        Network(neighbor=[[1, 1, -1], [0, 0, -1]])
    with pytest.raises(ValueError, match="outside -1..1"):
        Network(neighbor=[[2, -1, -1, -1], [-1, 0, -1, -1]])
    with pytest.raises(ValueError, match="link_latency must be at least 0"):
        Network(neighbor=topo.torus((2, 2)).neighbor, link_latency=-1)
