# amaranth: UnusedElaboratable=no
# (The bad-parameter test constructs routers whose __init__ raises.)
"""The adaptive router (``hdl.ici.Router(routing="adaptive")``, issue 44) in small networks
on the Amaranth simulator: seeded random traffic, every packet delivered exactly once and
intact, every hop of every packet taken as the golden adaptive tables allow (a minimal
port on an adaptive VC, or the escape hop on its escape VC, and no adaptive hop after an
escape one where re-entry is not allowed), and the counters against the hops seen."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden import ici
from golden import topology as topo
from hdl.ici import Router
from hdl.ici.allocator import Allocator
from hdl.ici.layouts import adaptive_table_entries
from hdl.ici.network import Network

from .test_router_network import NetBench, cut, make_packet, read_counters, simulate


def build(topology, *, vcs=3, buffer_flits=8, link_latency=1, pipeline=1, speedup=1):
    tables = topo.routing_tables(topology, vcs=vcs, routing="adaptive")
    net = Network(neighbor=topology.neighbor, vcs=vcs, buffer_flits=buffer_flits,
                  link_latency=link_latency, pipeline=pipeline, routing="adaptive",
                  escape_vcs=tables.escape_vcs, speedup=speedup)
    entries = [adaptive_table_entries(tables, c, vcs=vcs) for c in range(topology.n_chips)]
    return tables, net, entries


def key_of(p):
    return (p.src, p.address if p.opcode == "write" else p.amount)


def check_adaptive_deliveries(bench, topology, tables):
    """Exactly once, intact, at the destination; every hop allowed by the tables.
    Returns (flits per (chip, port) seen on links and ejected, hops on adaptive VCs,
    hops on escape VCs)."""
    n = topology.n_chips
    delivered = {}
    for c, got in enumerate(bench.ejected):
        for pkt in cut([row for _, row in got], f"eject of chip {c}"):
            p = ici.decode(np.array(pkt), n_chips=n)
            key = key_of(p)
            assert p.dst == c, f"packet {key} for chip {p.dst} ejected at chip {c}"
            assert key in bench.sent, f"chip {c} ejected a packet never sent: {key}"
            assert key not in delivered, f"packet {key} ejected twice"
            np.testing.assert_array_equal(np.array(pkt), bench.sent[key][0],
                                          f"packet {key} changed on its way")
            delivered[key] = c
    lost = sorted(set(bench.sent) - set(delivered))
    assert not lost, f"packets (src, seq) {lost[:5]} never ejected"

    hops = {}
    for (c, port, vc), got in bench.on_link.items():
        rows = [row for _, row in got]
        starts = np.cumsum([0] + [len(q) for q in cut(rows, "")])
        for start, pkt in zip(starts, cut(rows, f"link out of chip {c} port {port} VC {vc}")):
            p = ici.decode(np.array(pkt))
            hops.setdefault(key_of(p), []).append((got[start][0], c, port, vc))
    stray = set(hops) - set(bench.sent)
    assert not stray, f"packets {sorted(stray)[:5]} on links were never sent"
    per_port = np.zeros((n, topology.n_ports + 1), np.int64)
    counts = {"adaptive": 0, "escape": 0}
    for key, (flits, _) in bench.sent.items():
        dst = ici.DST.get(flits[0, 0])
        at, escaped = key[0], False
        for _, c, port, vc in sorted(hops.get(key, [])):
            assert c == at, f"packet {key}: a hop leaves chip {c}, the packet is at {at}"
            if vc >= tables.escape_vcs:
                assert tables.adaptive[c, dst, port], \
                    f"packet {key}: adaptive hop {c} port {port} is not minimal toward {dst}"
                assert tables.reenter or not escaped, \
                    f"packet {key}: adaptive hop at chip {c} after an escape hop"
                counts["adaptive"] += 1
            else:
                assert (port, vc) == (tables.port[c, dst], tables.hop_vc[c, dst]), \
                    f"packet {key}: escape hop {c} port {port} VC {vc}, tables say " \
                    f"port {tables.port[c, dst]} VC {tables.hop_vc[c, dst]}"
                escaped = True
                counts["escape"] += 1
            per_port[c, port] += len(flits)
            at = int(topology.neighbor[c, port])
        assert at == dst, f"packet {key} ended its hops at {at}, not {dst}"
        per_port[dst, topology.n_ports] += len(flits)
    return per_port, counts


CASES = {
    "ring4": ((4, 1), {}, {}),
    "ring4-speedup": ((4, 1), {}, {"speedup": 3}),
    "3x3": ((3, 3), {}, {}),
    "3x3-failed": ((3, 3), {"failed": (4,)}, {"buffer_flits": 6, "link_latency": 2}),
    "2x4-twisted": ((2, 4), {"twist": True}, {"vcs": 4, "pipeline": 2}),
    "2x4-twisted-speedup": ((2, 4), {"twist": True}, {"vcs": 4, "speedup": 2}),
    "3x3-8vcs": ((3, 3), {}, {"vcs": 8, "speedup": 2, "buffer_flits": 6}),
}


@pytest.mark.parametrize("case", [
    "ring4", pytest.param("ring4-speedup", marks=pytest.mark.slow),
    pytest.param("2x4-twisted", marks=pytest.mark.slow),
    pytest.param("2x4-twisted-speedup", marks=pytest.mark.slow),
    pytest.param("3x3-8vcs", marks=pytest.mark.slow),
    pytest.param("3x3", marks=pytest.mark.slow),
    pytest.param("3x3-failed", marks=pytest.mark.slow)])
def test_adaptive_traffic_is_delivered_on_allowed_hops(case, rng, seed):
    shape, tkw, kwargs = CASES[case]
    topology = topo.torus(shape, **tkw)
    tables, net, entries = build(topology, **kwargs)
    bench = NetBench(net, rng, ready_p=0.7)
    n, fw = topology.n_chips, bench.fw
    alive = np.flatnonzero(topology.alive)
    per_chip = 14 if n <= 4 else 8
    for src in alive.tolist():
        at = 0
        for seq in range(per_chip):
            at += int(rng.geometric(0.5)) - 1
            dst = int(rng.choice(alive))
            bench.plan(src, at, (src, seq), make_packet(rng, src=src, dst=dst, seq=seq,
                                                        flit_words=fw, max_data=4))
    want = sum(len(f) for q in bench.plans for _, _, f in q)
    result = {}

    async def body(ctx):
        await bench.load_tables(ctx, entries)
        bench.cycle = 0
        await bench.run(ctx, want=want, limit=4000)
        result["counters"] = await read_counters(ctx, net)

    simulate(net, body)
    per_port, counts = check_adaptive_deliveries(bench, topology, tables)
    forwarded, dropped, overflow = result["counters"]
    np.testing.assert_array_equal(forwarded, per_port, f"seed {seed}: forwarded counters")
    assert dropped == [0] * n and overflow == [0] * n
    assert counts["adaptive"] > 0, "no packet took an adaptive VC"


def test_too_long_packets_are_dropped_in_cut_through(rng):
    """A packet longer than a buffer cannot be cut through: dropped at its first router
    and counted; the others arrive."""
    topology = topo.torus((4, 1))
    tables, net, entries = build(topology, buffer_flits=4)
    bench = NetBench(net, rng, ready_p=1.0)
    long = ici.encode_write(dst=2, src=0, space="vmem", address=0, flag=0,
                            data=np.arange(3, dtype=np.uint32))        # 5 flits > 4
    assert len(long) == 5
    bench.plan(0, 0, ("long", 0), long)
    bench.plan(1, 0, (1, 1), ici.encode_flag_add(dst=3, src=1, flag=0, amount=1))
    result = {}

    async def body(ctx):
        await bench.load_tables(ctx, entries)
        await bench.run(ctx, want=2, limit=300)
        result["counters"] = await read_counters(ctx, net)

    simulate(net, body)
    del bench.sent[("long", 0)]
    check_adaptive_deliveries(bench, topology, tables)
    _, dropped, _ = result["counters"]
    assert dropped == [1, 0, 0, 0]


def test_bad_routing_parameters():
    with pytest.raises(ValueError, match="routing must be one of"):
        Router(routing="minimal")
    with pytest.raises(ValueError, match="escape_vcs"):
        Router(vcs=2, routing="adaptive", escape_vcs=2)


class Gate:
    """Stands in for NetBench's random generator: every ejection port ready but chip
    ``blocked``'s while ``closed``."""

    def __init__(self, n, blocked):
        self.n, self.blocked, self.closed, self.calls = n, blocked, True, 0

    def random(self):
        chip, self.calls = self.calls % self.n, self.calls + 1
        return 1.0 if self.closed and chip == self.blocked else 0.0


@pytest.mark.parametrize("routing, queues", [("adaptive", None), ("dor", None),
                                             pytest.param("dor", True, marks=pytest.mark.slow)])
def test_injection_queues_pass_a_blocked_direction(routing, queues):
    """Chip 1 of a 4-ring stops ejecting, so chip 0's +x packets back up into its
    injection port; a -x packet injected behind them still reaches chip 3 with a queue
    per direction (adaptive, or dor with ``injection_queues``), and waits behind them
    with one FIFO (dor's default)."""
    topology = topo.torus((4, 1))
    if routing == "adaptive":
        tables, net, entries = build(topology, buffer_flits=8)
    else:
        from hdl.ici import table_entries
        tables = topo.routing_tables(topology, vcs=3)
        net = Network(neighbor=topology.neighbor, vcs=3, buffer_flits=8, link_latency=1,
                      injection_queues=queues)
        entries = [table_entries(tables, c, vcs=3) for c in range(4)]
    gate = Gate(4, blocked=1)
    bench = NetBench(net, gate, ready_p=0.5)
    # Six 2-flit +x packets: more than chip 1's input VC holds, so some wait at chip 0,
    # and few enough to leave room in their queue, so the -x packet enters behind them.
    for seq in range(6):
        bench.plan(0, 0, (0, seq), ici.encode_flag_add(dst=1, src=0, flag=0, amount=seq))
    bench.plan(0, 0, (0, 99), ici.encode_flag_add(dst=3, src=0, flag=0, amount=99))
    seen = {}

    async def body(ctx):
        await bench.load_tables(ctx, entries)
        while not bench.ejected[3] and bench.cycle < 300:
            await bench.step(ctx)
        seen["passed"] = bool(bench.ejected[3])
        seen["held"] = len(bench.ejected[1])
        gate.closed = False
        await bench.run(ctx, want=14, limit=bench.cycle + 500)

    simulate(net, body)
    assert seen["passed"] == (routing == "adaptive" or bool(queues))
    assert seen["held"] == 0
    assert sum(map(len, bench.ejected)) == 14


def choose(escape_bias, sent, *, buffer_flits=12):
    """An adaptive allocator with one input, 4 torus outputs (0: +x, 1: -x, 2: +y, 3: -y)
    of 3 VCs of ``buffer_flits`` and one ejection output: ``sent`` 1-flit packets leave on the escape hop
    (output 0, VC 0; ``adapt`` low, so no other choice), their credits never return;
    then a header whose escape hop is output 0 VC 0 and whose minimal ports are 0 and
    2 asks. Returns the (output, VC) it is granted."""
    alloc = Allocator(n_in=1, n_out=5, vcs=3, buffer_flits=buffer_flits, adaptive=True,
                      escape_vcs=2, escape_bias=escape_bias)
    out = {}

    async def bench(ctx):
        head = alloc.heads[0][0]
        ctx.set(head.valid, 1)
        ctx.set(head.head, 1)
        ctx.set(head.tail, 1)
        ctx.set(head.length, 1)
        ctx.set(head.port, 0)
        ctx.set(head.vc, 0)
        ctx.set(head.minimal, 0b0001)
        for k in range(sent):
            assert (ctx.get(alloc.send[0]), ctx.get(alloc.send_vc[0])) == (1, 0), k
            await ctx.tick()
        ctx.set(head.adapt, 1)
        ctx.set(head.minimal, 0b0101)
        sends = [o for o in range(4) if ctx.get(alloc.send[o])]
        assert len(sends) == 1
        out["choice"] = (sends[0], ctx.get(alloc.send_vc[sends[0]]))

    sim = Simulator(alloc)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out["choice"]


@pytest.mark.parametrize("escape_bias", [0, 4, 8])
def test_the_choice_compares_ports_with_the_escape_bias(escape_bias):
    """The port whose VCs hold the most credits wins, the escape hop's port counted with
    ``escape_bias`` more; on it the VC with the most credits; the escape hop wins ties.
    With 12-flit buffers, port 0 holds 36 - sent credits (its VC 0: 12 - sent), port 2
    holds 36, so port 0 keeps the packet while sent <= escape_bias, on its roomier
    adaptive VC 2 once its escape VC has spent a credit."""
    assert choose(escape_bias, 0) == (0, 0)             # all even: the escape hop
    if escape_bias:
        assert choose(escape_bias, escape_bias) == (0, 2)   # same port, roomier VC
    assert choose(escape_bias, escape_bias + 1) == (2, 2)   # the other port


def test_the_default_escape_bias_is_a_buffer():
    assert Allocator(n_in=1, n_out=5, vcs=3, buffer_flits=6, adaptive=True).escape_bias == 6
    with pytest.raises(ValueError, match="escape_bias"):
        Allocator(n_in=1, n_out=5, vcs=3, buffer_flits=6, adaptive=True, escape_bias=-1)
    with pytest.raises(ValueError, match="escape_bias"):
        Router(vcs=3, routing="adaptive", escape_bias=-1)


def observe_choice(*, in_vc, minimal, sent=0, port=0):
    """An adaptive allocator with ``observe`` (one torus input, 4 torus outputs of 3 VCs
    of 4 flits, one ejection output): ``sent`` packets spend credits of output ``port``'s
    VC 0 (never returned), then a 1-flit header on input VC ``in_vc`` (``adapt`` high)
    whose escape hop is (``port``, VC 0) asks with ``minimal`` ports. Returns the
    observation outputs in that cycle."""
    alloc = Allocator(n_in=1, n_out=5, vcs=3, buffer_flits=4, adaptive=True, escape_vcs=2,
                      escape_bias=0, observe=True)
    out = {}

    async def bench(ctx):
        head = alloc.heads[0][in_vc]
        for name, value in (("valid", 1), ("head", 1), ("tail", 1), ("length", 1),
                            ("port", port), ("vc", 0), ("minimal", 1 << port)):
            ctx.set(getattr(head, name), value)
        for _ in range(sent):
            await ctx.tick()
        ctx.set(head.adapt, 1)
        ctx.set(head.minimal, minimal)
        out.update({name: ctx.get(getattr(alloc, name)) for name in
                    ("adaptive_same", "adaptive_other", "fallback")})
        out["blocked"] = ctx.get(alloc.blocked[0])
        out["sent"] = [(o, ctx.get(alloc.send_vc[o])) for o in range(4) if ctx.get(alloc.send[o])]

    sim = Simulator(alloc)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


def test_the_allocator_observes_adaptive_choices_and_fallbacks():
    """``adaptive_same``/``adaptive_other``: a header granted an adaptive VC on its escape
    port, or on another minimal port; ``fallback``: one from an adaptive input VC granted
    its escape hop; ``blocked``: a valid head that no output VC can take. Expected values
    are what the choice rule (escape hop wins ties, escape bias 0) gives."""
    # All even, from an escape VC: the escape hop, no observation.
    assert observe_choice(in_vc=0, minimal=0b0101) == {
        "adaptive_same": 0, "adaptive_other": 0, "fallback": 0, "blocked": 0,
        "sent": [(0, 0)]}
    # The same from adaptive VC 2: a fallback to the escape hop out of port 0.
    seen = observe_choice(in_vc=2, minimal=0b0101)
    assert (seen["sent"], seen["fallback"], seen["adaptive_same"]) == ([(0, 0)], 0b0001, 0)
    # Port 0 spent a credit: port 2 has more, the header turns to it on an adaptive VC.
    seen = observe_choice(in_vc=0, minimal=0b0101, sent=1)
    assert seen["sent"][0][0] == 2 and seen["sent"][0][1] >= 2, seen
    assert (seen["adaptive_other"], seen["adaptive_same"], seen["fallback"]) == (0b0100, 0, 0)
    # Only port 0 is minimal, its escape VC spent: an adaptive VC of the same port.
    seen = observe_choice(in_vc=2, minimal=0b0001, sent=1)
    assert seen["sent"][0][0] == 0 and seen["sent"][0][1] >= 2, seen
    assert (seen["adaptive_same"], seen["adaptive_other"], seen["fallback"]) == (0b0001, 0, 0)
    # Port 0's escape VC out of credits (4 sent), no other minimal port: the header on
    # VC 0 (adapt high, but its adaptive VCs on port 0 are free) still goes; after 4
    # packets on each VC of port 0 nothing can go: blocked.
    seen = observe_choice(in_vc=1, minimal=0b0000, sent=4)
    assert seen["sent"] == [] and seen["blocked"] == 0b010, seen


def test_adaptive_hops_leave_out_down_ports():
    """An adaptive input port offers the switch its header's ``minimal`` ports less the
    ``down`` ones (no adaptive hop over a down link); its escape hop is given up only
    when that is down."""
    from hdl.ici.input_port import InputPort
    port = InputPort(vcs=3, out_vcs=3, flit_words=2, buffer_flits=4, port=1, n_ports=4,
                     bypass=True, routing="adaptive")
    words = np.asarray(ici.encode_flag_add(dst=5, src=0, flag=0, amount=1, flit_words=2)).reshape(-1)
    seen = []

    async def bench(ctx):
        ctx.set(port.link.valid, 1)
        ctx.set(port.link.vc, 2)
        ctx.set(port.link.data, [int(words[0]), int(words[1])])
        ctx.set(port.entry.reachable, 1)
        ctx.set(port.entry.port, 0)
        ctx.set(port.entry.fixed, 1)
        ctx.set(port.minimal, 0b0101)
        for down in (0b0000, 0b0100, 0b0001):
            ctx.set(port.down, down)
            seen.append((ctx.get(port.heads[2].valid), ctx.get(port.heads[2].minimal),
                         ctx.get(port.undeliverable)))

    sim = Simulator(port)
    sim.add_testbench(bench)
    sim.run()
    assert seen == [(1, 0b0101, 0), (1, 0b0001, 0), (0, 0b0100, 1)]
