# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct components whose __init__ raises.)
"""One ICI router on the Amaranth simulator, between testbench neighbours that keep their
own credit books: every port pair and VC rule against ``golden.routing`` (expected
output ports and VCs come from ``golden.topology.routing_tables`` and
``golden.routing.next_vc``, never from the router), credits honoured both ways, wormhole
order, multi-flit packets, malformed headers dropped and counted, a table rewrite
between two runs of one simulation, and the zero-load latency."""

from collections import deque

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden import ici
from golden import topology as topo
from golden.routing import next_vc
from hdl.ici import Router, table_entries

CLOCK = 1e-8
EJECT = "eject"


# ---------------------------------------------------------------- packets

def packet(rng, *, uid, dst, src=0, flits, flit_words):
    """A golden packet of ``flits`` flits whose word 1 address (or amount) is ``uid``: a
    ``flag_add`` when it fits (2 words), else a ``write`` of random data. The shortest
    packet is one flit with ``flit_words >= 2`` and two flits with ``flit_words = 1``."""
    least = 2 if flit_words == 1 else 1
    flits = max(flits, least)
    if flits * flit_words - ici.HEADER_WORDS < flit_words:
        out = ici.encode_flag_add(dst=dst, src=src, flag=uid % 128, amount=uid,
                                  flit_words=flit_words)
    else:
        words = flits * flit_words - ici.HEADER_WORDS - int(rng.integers(0, flit_words))
        data = rng.integers(0, 1 << 32, words, dtype=np.uint32)
        out = ici.encode_write(dst=dst, src=src, space="hbm", address=uid, flag=uid % 128,
                               data=data, flit_words=flit_words)
    assert len(out) == flits
    return out


def malformed(*, uid, flit_words, opcode=1, dst=0, length=3):
    """A packet with a hand-made route word; the address of word 1 is ``uid``."""
    route = (ici.OPCODE.put(opcode) | ici.DST.put(dst) | ici.LENGTH.put(length))
    flits = np.zeros((max(length, 1), flit_words), np.uint32)
    flat = flits.reshape(-1)
    flat[0] = route
    flat[1:] = uid
    return flits


def as_int(row):
    return sum(int(w) << (32 * j) for j, w in enumerate(row))


def as_row(value, flit_words):
    return np.array([(value >> (32 * j)) & 0xFFFFFFFF for j in range(flit_words)], np.uint32)


def cut_packets(flits, flit_words, where):
    """Cut a received flit sequence into packets by their headers' ``length``."""
    rows = [as_row(f, flit_words) for f in flits]
    out, k = [], 0
    while k < len(rows):
        length = ici.LENGTH.get(rows[k][0])
        assert 1 <= length <= len(rows) - k, f"{where}: a header at flit {k} says length " \
            f"{length}, {len(rows) - k} flits left (interleaved or truncated packets)"
        out.append(np.array(rows[k:k + length]))
        k += length
    return out


# ---------------------------------------------------------------- the bench

class Bench:
    """Testbench neighbours of one router: an upstream sender per input (and the
    injector) that spends credits, a downstream receiver per output that models its VC
    buffers and returns credits, and a sink with random ``ready`` on each ejection port.

    ``expect[uid]`` is where a packet must come out, ``(port, vc)`` or ``(EJECT, j)`` for
    ejection port j, or None when it must be dropped.
    """

    def __init__(self, router, rng, *, send_p=0.8, drain_p=0.7, ready_p=0.7):
        self.r, self.rng = router, rng
        self.ports, self.vcs, self.depth = router.n_ports, router.vcs, router.buffer_flits
        self.fw = router.flit_words
        self.send_p, self.drain_p, self.ready_p = send_p, drain_p, ready_p
        self.queues = [[deque() for _ in range(self.vcs)] for _ in range(self.ports)]
        self.inject_queue = deque()
        self.sent, self.expect = {}, {}
        self.credits = [[self.depth] * self.vcs for _ in range(self.ports)]
        self.held = [[0] * self.vcs for _ in range(self.ports)]
        self.received = {(o, w): [] for o in range(self.ports) for w in range(self.vcs)}
        self.ejects = [router.local("eject", j) for j in range(router.local_ports)]
        self.received |= {(EJECT, j): [] for j in range(router.local_ports)}
        self.offer = None
        self.cycle = 0
        self.first_out = {}

    def send(self, port, vc, uid, flits, expect):
        """Queue a packet at torus input ``port`` on ``vc``, or at injection (port None)."""
        self.sent[uid], self.expect[uid] = flits, expect
        items = [(uid, as_int(row)) for row in flits]
        (self.inject_queue if port is None else self.queues[port][vc]).extend(items)

    def busy(self):
        return (any(q for row in self.queues for q in row) or self.inject_queue
                or self.offer is not None)

    async def step(self, ctx):
        r, rng = self.r, self.rng
        for i in range(self.ports):
            bits = ctx.get(r.rx[i].credit)
            for v in range(self.vcs):
                if bits >> v & 1:
                    self.credits[i][v] += 1
                    assert self.credits[i][v] <= self.depth, \
                        f"cycle {self.cycle}: input {i} VC {v} returned a credit never spent"
        for o in range(self.ports):
            # The downstream buffers drain flits of earlier cycles and return credits.
            back = 0
            for w in range(self.vcs):
                if self.held[o][w] and rng.random() < self.drain_p:
                    self.held[o][w] -= 1
                    back |= 1 << w
            ctx.set(r.tx[o].credit, back)
            if ctx.get(r.tx[o].valid):
                w = ctx.get(r.tx[o].vc)
                self.held[o][w] += 1
                assert self.held[o][w] <= self.depth, \
                    f"cycle {self.cycle}: output {o} VC {w} sent without a credit"
                self._record((o, w), ctx.get(r.tx[o].data.as_value()))
        for j, eject in enumerate(self.ejects):
            ready = rng.random() < self.ready_p
            ctx.set(eject.ready, ready)
            if ready and ctx.get(eject.valid):
                self._record((EJECT, j), ctx.get(eject.payload.as_value()))
        for i in range(self.ports):
            ready_vcs = [v for v in range(self.vcs)
                         if self.queues[i][v] and self.credits[i][v] > 0]
            if ready_vcs and rng.random() < self.send_p:
                v = int(rng.choice(ready_vcs))
                _, flit = self.queues[i][v].popleft()
                self.credits[i][v] -= 1
                ctx.set(r.rx[i].valid, 1)
                ctx.set(r.rx[i].vc, v)
                ctx.set(r.rx[i].data.as_value(), flit)
            else:
                ctx.set(r.rx[i].valid, 0)
        # A stream beat, once offered, stays offered until taken.
        if self.offer is None and self.inject_queue and rng.random() < self.send_p:
            self.offer = self.inject_queue.popleft()
        ctx.set(r.inject.valid, self.offer is not None)
        if self.offer is not None:
            ctx.set(r.inject.payload.as_value(), self.offer[1])
            if ctx.get(r.inject.ready):
                self.offer = None
        await ctx.tick()
        self.cycle += 1

    def _record(self, where, flit):
        self.received[where].append(flit)
        self.first_out.setdefault(where, self.cycle)

    async def run(self, ctx, *, limit=5000, tail=40):
        """Step until everything sent has come out (or must have), then ``tail`` more."""
        want = sum(len(f) for uid, f in self.sent.items() if self.expect[uid] is not None)
        while self.busy() or sum(map(len, self.received.values())) < want:
            assert self.cycle < limit, f"router hung at cycle {self.cycle}: " \
                f"{sum(map(len, self.received.values()))} of {want} flits out"
            await self.step(ctx)
        for _ in range(tail):
            await self.step(ctx)

    def check(self):
        """Every expected packet out exactly once, intact, where and on the VC expected;
        nothing else out; every credit back."""
        seen = {}
        for where, flits in self.received.items():
            for pkt in cut_packets(flits, self.fw, f"output {where}"):
                uid = ici.ADDRESS.get(pkt.reshape(-1)[1])
                assert uid in self.sent, f"output {where}: unknown packet {pkt.reshape(-1)}"
                assert uid not in seen, f"packet {uid} came out twice ({seen[uid]}, {where})"
                seen[uid] = where
                assert self.expect[uid] is not None, f"malformed packet {uid} came out {where}"
                assert where == self.expect[uid], \
                    f"packet {uid} came out {where}, expected {self.expect[uid]}"
                np.testing.assert_array_equal(pkt, self.sent[uid], f"packet {uid} changed")
        lost = [u for u, e in self.expect.items() if e is not None and u not in seen]
        assert not lost, f"packets {lost} never came out"
        assert self.credits == [[self.depth] * self.vcs] * self.ports, \
            f"credits not all returned: {self.credits}"
        assert self.held == [[0] * self.vcs] * self.ports
        return seen


def simulate(router, bench, *phases):
    """Run ``phases`` (``async def phase(ctx)``) one after another in one simulation."""
    sim = Simulator(router)
    sim.add_clock(CLOCK)

    async def testbench(ctx):
        for phase in phases:
            await phase(ctx)
    sim.add_testbench(testbench)
    sim.run()


async def load_table(ctx, router, entries):
    for dst, entry in enumerate(entries):
        ctx.set(router.table.payload.dst, dst)
        ctx.set(router.table.payload.entry.as_value(), entry)
        ctx.set(router.table.valid, 1)
        assert ctx.get(router.table.ready)
        await ctx.tick()
    ctx.set(router.table.valid, 0)


def expected(tables, chip, dst, in_port, in_vc):
    """Golden: where a packet for ``dst`` leaves chip ``chip``."""
    out = int(tables.port[chip, dst])
    if out < 0:
        return None
    if out == tables.eject:
        return (EJECT, 0)
    return (out, int(next_vc(tables, chip, dst, in_port, in_vc, out)))


def counters(ctx, router):
    return ([ctx.get(router.forwarded[o]) for o in range(router.n_ports + 1)],
            ctx.get(router.dropped), ctx.get(router.overflow))


def expected_forwarded(bench, ports):
    out = [0] * (ports + 1)
    for uid, where in bench.expect.items():
        if where is not None:
            out[ports if where[0] == EJECT else where[0]] += len(bench.sent[uid])
    return out


# ---------------------------------------------------------------- tests

def queue_all_pairs(bench, rng, tables, chip, *, per_pair, max_flits, uid=0):
    """``per_pair`` packets from every input (and VC) to every output of chip ``chip``."""
    ports, vcs = bench.ports, bench.vcs
    by_port = {o: np.flatnonzero(tables.port[chip] == o) for o in range(ports + 1)
               if (tables.port[chip] == o).any()}
    jobs = []
    for i in [None, *range(ports)]:
        for v in ([0] if i is None else range(vcs)):
            for o in by_port:
                for _ in range(per_pair):
                    jobs.append((i, v, int(rng.choice(by_port[o]))))
    for k in rng.permutation(len(jobs)):
        i, v, d = jobs[k]
        flits = packet(rng, uid=uid, dst=d, src=int(rng.integers(0, 16)),
                       flits=int(rng.integers(1, max_flits + 1)), flit_words=bench.fw)
        where = expected(tables, chip, d, -1 if i is None else i, -1 if i is None else v)
        bench.send(i, v, uid, flits, where)
        uid += 1
    return uid


@pytest.mark.parametrize("vcs, buffer_flits, flit_words, pipeline, speedup, queues", [
    (2, 8, 1, 1, 1, None),
    (2, 2, 2, 2, 1, None),
    (4, 3, 1, 1, 1, None),
    (2, 2, 2, 2, 2, None),
    (2, 3, 1, 1, 2, True),
    pytest.param(4, 3, 1, 1, 2, None, marks=pytest.mark.slow),
    pytest.param(4, 3, 1, 1, 4, None, marks=pytest.mark.slow),
    pytest.param(8, 3, 1, 1, 2, None, marks=pytest.mark.slow),
])
def test_every_port_pair_and_vc_rule(vcs, buffer_flits, flit_words, pipeline, speedup, queues,
                                     rng, seed):
    """Chip 12 = (3, 0) of a 4x4 torus: +x and -y are datelines, so the table's VC rule
    has every case (dateline, straight on in VC 1, turn back to VC 0, eject); with
    ``injection_queues`` too."""
    tables = topo.routing_tables(topo.torus((4, 4)), vcs=2)
    chip = 12
    router = Router(dims=2, vcs=vcs, buffer_flits=buffer_flits, flit_words=flit_words,
                    n_nodes=16, pipeline=pipeline, speedup=speedup, injection_queues=queues)
    bench = Bench(router, rng)
    queue_all_pairs(bench, rng, tables, chip, per_pair=2, max_flits=4)
    result = {}

    async def run(ctx):
        await load_table(ctx, router, table_entries(tables, chip, vcs=vcs))
        await bench.run(ctx)
        result["counters"] = counters(ctx, router)

    simulate(router, bench, run)
    seen = bench.check()
    # Datelines (0, 1) and (3, 1); straight on in VC 1 (1, 1) and (2, 1); VC 0 (1, 0)
    # and (2, 0); eject.
    assert set(seen.values()) == {(EJECT, 0), (0, 1), (3, 1), (1, 0), (1, 1), (2, 0),
                                  (2, 1)}, f"seed {seed}: VC rule cases not all exercised"
    assert result["counters"] == (expected_forwarded(bench, router.n_ports), 0, 0)


@pytest.mark.parametrize("local_ports, ports_of_inputs", [
    (1, [0, 0, 0, 0]),
    (2, [0, 1, 1, 0]),
    (4, [0, 1, 2, 3]),
])
def test_each_torus_input_ejects_on_its_port(local_ports, ports_of_inputs, rng, seed):
    """Packets for this chip from +x, -x, +y and -y (written out by hand: with 2 local
    ports the two of an axis apart, and +x and +y apart; with 4 each its own) leave on
    those ejection ports, whole, while every port's sink stalls at random."""
    tables = topo.routing_tables(topo.torus((4, 4)), vcs=2)
    chip = 5
    router = Router(dims=2, n_nodes=16, local_ports=local_ports)
    bench = Bench(router, rng)
    uid = 0
    for _ in range(3):
        for port, eject in enumerate(ports_of_inputs):
            for vc in range(2):
                bench.send(port, vc, uid, packet(rng, uid=uid, dst=chip, src=port,
                                                 flits=int(rng.integers(1, 5)),
                                                 flit_words=1), (EJECT, eject))
                uid += 1

    async def run(ctx):
        await load_table(ctx, router, table_entries(tables, chip, vcs=2))
        await bench.run(ctx)

    simulate(router, bench, run)
    seen = bench.check()
    assert set(seen.values()) == {(EJECT, j) for j in set(ports_of_inputs)}, f"seed {seed}"


@pytest.mark.parametrize("pipeline", [1, 2])
def test_zero_load_latency(pipeline):
    """Header in at cycle t (injected, or on a torus input): out at t + pipeline."""
    tables = topo.routing_tables(topo.torus((4, 4)), vcs=2)
    chip = 5
    router = Router(dims=2, n_nodes=16, pipeline=pipeline)
    rng = np.random.default_rng(0)
    bench = Bench(router, rng, send_p=1.0, drain_p=1.0, ready_p=1.0)
    # One destination per output, from every input.
    dsts = [int(np.flatnonzero(tables.port[chip] == o)[0]) for o in range(5)]
    cases = [(port, dst) for port in [None, 0, 1, 2, 3] for dst in dsts]
    latencies = []

    async def run(ctx):
        await load_table(ctx, router, table_entries(tables, chip, vcs=2))
        for uid, (port, dst) in enumerate(cases):
            where = expected(tables, chip, dst, -1 if port is None else port, 0)
            bench.send(port, 0, uid, packet(rng, uid=uid, dst=dst, flits=2, flit_words=1),
                       where)
            bench.first_out.clear()
            start = bench.cycle
            await bench.run(ctx, tail=3)
            latencies.append(bench.first_out[where] - start)

    simulate(router, bench, run)
    bench.check()
    assert latencies == [pipeline] * len(cases)


def test_wormhole_keeps_packets_whole():
    """Four long packets from four inputs to one output VC leave one after another, and
    both VCs of another output carry packets at once without mixing them."""
    tables = topo.routing_tables(topo.torus((4, 4)), vcs=2)
    chip = 12
    router = Router(dims=2, vcs=2, buffer_flits=4, n_nodes=16)
    rng = np.random.default_rng(1)
    bench = Bench(router, rng, send_p=1.0, drain_p=1.0, ready_p=1.0)
    # Chip 12's +x port is its x ring's dateline: packets for chips 0-3 leave in VC 1,
    # whatever port and VC they arrived on, so these four share output VC (0, 1).
    plan = [(None, 0, 0), (1, 1, 1), (2, 0, 2), (3, 1, 3)]
    for uid, (port, vc, dst) in enumerate(plan):
        where = expected(tables, chip, dst, -1 if port is None else port, vc)
        assert where == (0, 1)
        bench.send(port, vc, uid, packet(rng, uid=uid, dst=dst, flits=9, flit_words=1), where)
    # Output -x (towards chip 8): VC 1 going straight on from +x in VC 1, else VC 0.
    for uid, (port, vc) in enumerate([(0, 1), (2, 0), (0, 0)], start=len(plan)):
        where = expected(tables, chip, 8, port, vc)
        bench.send(port, vc, uid, packet(rng, uid=uid, dst=8, flits=6, flit_words=1), where)

    async def run(ctx):
        await load_table(ctx, router, table_entries(tables, chip, vcs=2))
        await bench.run(ctx)

    simulate(router, bench, run)
    bench.check()  # cut_packets fails on any interleaving within one output VC
    order = [ici.ADDRESS.get(p[1, 0]) for p in cut_packets(bench.received[(0, 1)], 1, "")]
    assert sorted(order) == [0, 1, 2, 3]
    assert bench.received[(1, 0)] and bench.received[(1, 1)]


@pytest.mark.parametrize("speedup", [1, 2])
def test_speedup_sends_two_vcs_of_an_input_at_once(speedup):
    """Input 0 holds a packet in each VC, for two different outputs. Each cycle the input
    sends one flit into the switch, or with ``speedup=2`` one per VC (VCs 0 and 1 are in
    different groups): the two packets then leave side by side, in half the cycles."""
    tables = topo.routing_tables(topo.torus((4, 4)), vcs=2)
    chip, flits = 5, 6
    router = Router(dims=2, vcs=2, buffer_flits=8, n_nodes=16, observe=True,
                    speedup=speedup)
    rng = np.random.default_rng(1)
    bench = Bench(router, rng, send_p=1.0, drain_p=1.0, ready_p=1.0)
    # Chip 5 = (1, 1): chip 6 is +y of it, chip 9 +x; from input 0 in VC v each stays
    # in VC v or turns to VC 0, so the outputs are ports 2 and 0.
    wheres = [expected(tables, chip, dst, 0, v) for v, dst in enumerate((6, 9))]
    assert {w[0] for w in wheres} == {0, 2}
    for v, (dst, where) in enumerate(zip((6, 9), wheres)):
        bench.send(0, v, v, packet(rng, uid=v, dst=dst, flits=flits, flit_words=1), where)
    side_by_side = []

    async def run(ctx):
        await load_table(ctx, router, table_entries(tables, chip, vcs=2))
        ctx.set(router.hold, 0b1111)          # both packets wait whole in their buffers
        for _ in range(2 * flits + 2):
            await bench.step(ctx)
        assert not bench.busy() and not any(bench.received.values())
        ctx.set(router.hold, 0)
        start = bench.cycle
        while sum(map(len, bench.received.values())) < 2 * flits:
            side_by_side.append(ctx.get(router.switched[0]) & ctx.get(router.switched[2]) & 1)
            await bench.step(ctx)
            assert bench.cycle < start + 40, "the packets did not leave"
        side_by_side.append(bench.cycle - start)
        for _ in range(10):                   # the downstream buffers drain
            await bench.step(ctx)

    simulate(router, bench, run)
    bench.check()
    took = side_by_side.pop()
    if speedup == 1:
        assert not any(side_by_side) and took >= 2 * flits
    else:
        assert sum(side_by_side) == flits and took <= flits + 2


class RoomBench(Bench):
    """A :class:`Bench` that notes, for every header a torus output sends, whether the
    downstream VC buffer had room for the whole packet when it went."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.left = {}
        self.short_of_room = 0
        self.headers = 0

    def _record(self, where, flit):
        super()._record(where, flit)
        if where[0] == EJECT:
            return
        if not self.left.get(where):
            length = ici.LENGTH.get(flit & 0xFFFFFFFF)
            o, w = where
            # ``held`` counts this flit already: the room before it went was depth - held + 1.
            self.short_of_room += self.held[o][w] - 1 + length > self.depth
            self.headers += 1
            self.left[where] = length
        self.left[where] -= 1


@pytest.mark.parametrize("switching", ["wormhole", "cut_through"])
def test_cut_through_sends_a_header_only_with_room_for_its_packet(switching, rng, seed):
    """Dimension order with ``switching="cut_through"``: every header leaves with credits
    for its whole packet behind it, while wormhole starts packets into a buffer that has
    room for one flit (downstream buffers drain slowly here, so that both happen); every
    packet arrives intact where the golden tables send it, either way."""
    tables = topo.routing_tables(topo.torus((4, 4)), vcs=2)
    chip = 12
    router = Router(dims=2, vcs=2, buffer_flits=6, n_nodes=16, switching=switching)
    bench = RoomBench(router, rng, drain_p=0.25)
    queue_all_pairs(bench, rng, tables, chip, per_pair=2, max_flits=6)

    async def run(ctx):
        await load_table(ctx, router, table_entries(tables, chip, vcs=2))
        await bench.run(ctx, limit=20000)

    simulate(router, bench, run)
    bench.check()
    assert bench.headers > 50
    if switching == "cut_through":
        assert bench.short_of_room == 0, f"seed {seed}: headers sent short of room"
    else:
        assert bench.short_of_room > 0, f"seed {seed}: wormhole never started short of room"


def test_cut_through_drops_packets_longer_than_a_buffer(rng):
    """A dimension-order cut-through router refuses a packet that cannot fit a buffer, as
    a malformed one (counted in ``dropped``), and forwards the rest."""
    tables = topo.routing_tables(topo.torus((4, 4)), vcs=2)
    chip = 12
    router = Router(dims=2, vcs=2, buffer_flits=4, n_nodes=16, switching="cut_through")
    bench = Bench(router, rng)
    bench.send(1, 0, 0, packet(rng, uid=0, dst=8, flits=5, flit_words=1), None)
    bench.send(1, 0, 1, packet(rng, uid=1, dst=8, flits=4, flit_words=1),
               expected(tables, chip, 8, 1, 0))
    result = {}

    async def run(ctx):
        await load_table(ctx, router, table_entries(tables, chip, vcs=2))
        await bench.run(ctx)
        result["counters"] = counters(ctx, router)

    simulate(router, bench, run)
    bench.check()
    assert result["counters"][1:] == (1, 0)


def test_round_robin_shares_an_output_fairly(rng):
    """Five inputs (and two VCs of one of them) that keep one output busy share it in
    turn: over any stretch, the packets out differ per sender by at most one."""
    tables = topo.routing_tables(topo.torus((4, 4)), vcs=2)
    chip = 5
    router = Router(dims=2, vcs=2, buffer_flits=4, n_nodes=16)
    bench = Bench(router, rng, send_p=1.0, drain_p=1.0, ready_p=1.0)
    senders = [(None, 0), (0, 0), (1, 0), (2, 0), (3, 0), (3, 1)]
    uid = 0
    for _ in range(12):
        for k, (port, vc) in enumerate(senders):
            flits = packet(rng, uid=uid, dst=chip, src=k, flits=2, flit_words=1)
            bench.send(port, vc, uid, flits, (EJECT, 0))
            uid += 1

    async def run(ctx):
        await load_table(ctx, router, table_entries(tables, chip, vcs=2))
        await bench.run(ctx)

    simulate(router, bench, run)
    bench.check()
    order = [ici.SRC.get(p[0, 0]) for p in cut_packets(bench.received[(EJECT, 0)], 1, "")]
    # Input 3's two VCs share its turn: its VCs alternate between its grants.
    per_input = [min(k, 4) for k in order]
    for end in range(len(order) - 12):
        window = per_input[:end + 1]
        counts = [window.count(k) for k in range(5)]
        assert max(counts) - min(counts) <= 1, f"unfair after {end + 1} packets: {order}"
    vc_order = [k for k in order if k >= 4]
    assert vc_order[:12] == [4, 5] * 6 or vc_order[:12] == [5, 4] * 6, vc_order


def test_malformed_headers_are_dropped_and_counted(rng):
    """Unknown destination (beyond n_nodes, and a table entry of -1), zero length and a
    bad opcode: each dropped with all its flits, counted, credits returned, and a good
    packet right behind it on the same VC still goes through."""
    tables = topo.routing_tables(topo.torus((4, 4), failed=[9]), vcs=2)
    chip = 12
    assert tables.port[chip, 9] == topo.UNREACHABLE
    router = Router(dims=2, vcs=2, buffer_flits=3, n_nodes=12, flit_words=1)
    bench = Bench(router, rng, send_p=0.9, drain_p=0.8, ready_p=0.8)
    bad = [dict(dst=13), dict(dst=9), dict(dst=200, length=7), dict(length=0),
           dict(opcode=0), dict(opcode=3, length=5), dict(opcode=0, length=0)]
    uid = 0
    for port in [None, 0, 1, 2, 3]:
        for vc in ([0] if port is None else [0, 1]):
            for spec in bad:
                bench.send(port, vc, uid, malformed(uid=uid, flit_words=1, **spec), None)
                good = packet(rng, uid=uid + 1, dst=3, flits=3, flit_words=1)
                bench.send(port, vc, uid + 1, good,
                           expected(tables, chip, 3, -1 if port is None else port,
                                    -1 if port is None else vc))
                uid += 2
    result = {}

    async def run(ctx):
        await load_table(ctx, router, table_entries(tables, chip, vcs=2)[:12])
        await bench.run(ctx)
        result["counters"] = counters(ctx, router)

    simulate(router, bench, run)
    bench.check()
    forwarded, dropped, overflow = result["counters"]
    assert dropped == uid // 2 and overflow == 0
    assert forwarded == expected_forwarded(bench, router.n_ports)


def test_table_rewrite_between_runs(rng):
    """One router, one simulation: run a 4x4 torus table (chip 12), rewrite the table with
    a failed-chip table (mesh order plus escape VC, unreachable entries), run again."""
    first = topo.routing_tables(topo.torus((4, 4)), vcs=2)
    second = topo.routing_tables(topo.torus((4, 4), failed=[8, 13]), vcs=2)
    assert second.escape[12].any() and (second.port[12] < 0).any()
    chip = 12
    router = Router(dims=2, vcs=2, buffer_flits=4, n_nodes=16)
    bench = Bench(router, rng)
    totals = []

    def queue(tables, uid):
        uid = queue_all_pairs(bench, rng, tables, chip, per_pair=1, max_flits=3, uid=uid)
        for d in np.flatnonzero(tables.port[chip] < 0):
            bench.send(None, 0, uid, packet(rng, uid=uid, dst=int(d), flits=2,
                                            flit_words=1), None)
            uid += 1
        return uid

    async def run(ctx):
        uid = 0
        for tables in (first, second):
            await load_table(ctx, router, table_entries(tables, chip, vcs=2))
            uid = queue(tables, uid)
            await bench.run(ctx)
            totals.append(counters(ctx, router))

    simulate(router, bench, run)
    bench.check()
    assert totals[0][1] == 0 and totals[1][1] == 2 and totals[1][2] == 0
    assert totals[1][0] == expected_forwarded(bench, router.n_ports)


def framing(flits, flit_words=1):
    """``(started, cut)``: how many packets have their header among ``flits`` (framed by
    their headers' lengths), and whether the last of them is still incomplete."""
    k = started = 0
    while k < len(flits):
        k += ici.LENGTH.get(as_row(flits[k], flit_words)[0])
        started += 1
    return started, k > len(flits)


@pytest.mark.parametrize("pipeline", [1, 2])
def test_a_down_output_finishes_its_packet_then_gives_up_the_rest(pipeline, rng, seed):
    """Output +y of chip 12 goes down while a packet crosses to it: that packet comes out
    whole, no packet starts on the port after it, every other packet routed there is
    given up with all its flits and counted in ``undeliverable``, their credits come
    back, and every other output carries on as before."""
    tables = topo.routing_tables(topo.torus((4, 4)), vcs=2)
    chip, down = 12, 2
    router = Router(dims=2, vcs=2, buffer_flits=3, n_nodes=16, pipeline=pipeline)
    bench = Bench(router, rng, send_p=0.9, drain_p=0.8, ready_p=0.8)
    queue_all_pairs(bench, rng, tables, chip, per_pair=3, max_flits=6)
    routed_down = {uid: where for uid, where in bench.expect.items()
                   if where is not None and where[0] == down}
    for uid in routed_down:          # out whole where golden says, or given up: see below
        bench.expect[uid] = None
    outs = [(down, w) for w in range(2)]
    result = {}

    async def run(ctx):
        await load_table(ctx, router, table_entries(tables, chip, vcs=2))
        while not any(framing(bench.received[o])[1] for o in outs):
            assert bench.cycle < 3000, f"seed {seed}: no packet on the port to cut"
            await bench.step(ctx)
        # Mid-packet on one of the port's VCs (a header out, its tail not yet).
        ctx.set(router.down, 1 << down)
        await bench.step(ctx)        # records what was allocated before the port went down
        result["started"] = [framing(bench.received[o])[0] for o in outs]
        await bench.run(ctx)
        result["counters"] = counters(ctx, router) + (ctx.get(router.undeliverable),)

    simulate(router, bench, run)
    seen = {}
    for where, flits in bench.received.items():
        for pkt in cut_packets(flits, 1, f"output {where}"):   # whole packets only
            uid = ici.ADDRESS.get(pkt.reshape(-1)[1])
            assert uid not in seen, f"seed {seed}: packet {uid} came out twice"
            seen[uid] = where
            assert where == routed_down.get(uid, bench.expect[uid]), f"seed {seed}: {uid}"
            np.testing.assert_array_equal(pkt, bench.sent[uid], f"packet {uid} changed")
    lost = [u for u, e in bench.expect.items() if e is not None and u not in seen]
    assert not lost, f"seed {seed}: packets {lost} never came out"
    assert [framing(bench.received[o])[0] for o in outs] == result["started"]
    forwarded, dropped, overflow, undeliverable = result["counters"]
    given_up = set(routed_down) - set(seen)
    assert 0 < sum(result["started"]) and undeliverable == len(given_up) > 0, f"seed {seed}"
    assert dropped == 0 and overflow == 0
    assert bench.credits == [[3] * 2] * 4 and bench.held == [[0] * 2] * 4


def test_credit_violations_are_flagged():
    """A neighbour that sends without credits overflows a buffer, and one that returns a
    credit never spent breaks the books: both set the sticky ``overflow``."""
    tables = topo.routing_tables(topo.torus((4, 4)), vcs=2)
    flags = {}
    for case in ("overflow", "extra_credit"):
        router = Router(dims=2, vcs=2, buffer_flits=2, n_nodes=16)

        async def run(ctx, case=case, router=router):
            await load_table(ctx, router, table_entries(tables, 12, vcs=2))
            await ctx.tick().repeat(2)
            flags["before"] = ctx.get(router.overflow)
            if case == "overflow":
                # Nothing drains output +x (no credits come back after two): the third
                # and fourth flits for it fill input 2's VC 0 buffer, the fifth overflows.
                for k in range(5):
                    ctx.set(router.rx[2].valid, 1)
                    ctx.set(router.rx[2].vc, 0)
                    ctx.set(router.rx[2].data.as_value(),
                            int(packet(np.random.default_rng(k), uid=k, dst=0, flits=2,
                                       flit_words=1)[0, 0]))
                    await ctx.tick()
                    flags[k] = ctx.get(router.overflow)
                ctx.set(router.rx[2].valid, 0)
            else:
                ctx.set(router.tx[3].credit, 0b10)
                await ctx.tick()
                ctx.set(router.tx[3].credit, 0)
            await ctx.tick()
            flags[case] = ctx.get(router.overflow)

        simulate(router, None, run)
        assert flags["before"] == 0 and flags[case] == 1, case
    assert [flags[k] for k in range(4)] == [0, 0, 0, 0]


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(dims=1, n_nodes=4), ValueError, "dims must be at least 2"),
    (dict(dims=4, n_nodes=4), ValueError, "dims must be at most 3"),
    (dict(dims=2, vcs=1, n_nodes=4), ValueError, "vcs must be at least 2"),
    (dict(dims=2, vcs=9, n_nodes=4), ValueError, "vcs must be at most 8"),
    (dict(dims=2, buffer_flits=0, n_nodes=4), ValueError, "buffer_flits must be at least 1"),
    (dict(dims=2, n_nodes=257), ValueError, "n_nodes must be at most 256"),
    (dict(dims=2, n_nodes=4, flit_words=9), ValueError, "flit_words must be at most 8"),
    (dict(dims=2, n_nodes=4, pipeline=3), ValueError, "pipeline must be at most 2"),
    (dict(dims=2, n_nodes=4, local_ports=13), ValueError, "local_ports must be at most 12"),
    (dict(dims=3, n_nodes=8, local_ports=11), ValueError, "local_ports must be at most 10"),
    (dict(dims=2, n_nodes=4, local_ports=0), ValueError, "local_ports must be at least 1"),
    (dict(dims=2.0, n_nodes=4), TypeError, "dims must be an integer"),
    (dict(dims=2, n_nodes=4, vcs=True), TypeError, "vcs must be an integer"),
    (dict(dims=2, n_nodes=4, speedup=0), ValueError, "speedup must be at least 1"),
    (dict(dims=2, n_nodes=4, switching="store"), ValueError,
     "switching must be 'wormhole' or 'cut_through' with routing='dor', not 'store'"),
    (dict(dims=2, n_nodes=4, vcs=3, routing="adaptive", switching="wormhole"), ValueError,
     "switching must be 'cut_through' with routing='adaptive'"),
    (dict(dims=2, n_nodes=4, vcs=2, speedup=3), ValueError, "speedup must be at most 2"),
    (dict(dims=2, n_nodes=4, injection_queues=1), TypeError,
     "injection_queues must be True, False or None, not 1"),
])
def test_bad_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        Router(**kwargs)


def test_positional_parameters_are_refused():
    with pytest.raises(TypeError):
        Router(2, 2, 8, 1, 16)
