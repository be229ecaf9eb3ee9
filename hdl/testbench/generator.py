"""A synthesizable traffic generator: seeded Bernoulli packet creation into a source queue,
and an injector that turns queued packets into probe packets (``hdl.system.layouts``)."""

from amaranth.hdl import C, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..ici.layouts import CHIP_BITS, OPCODES, flit_layout, route_word_layout
from ..lib.params import check_int
from ..lib.stream_queue import StreamQueue
from ..lib.xorshift import GAP_BITS, Xorshift32, xorshift32
from ..system.layouts import (FLIT_WORDS, MAX_LOCAL_PORTS, MAX_PACKET_FLITS, MODES,
                              TIME_BITS, payload_word, tag_fields)

__all__ = ["TrafficGenerator", "COUNTER_BITS", "seed_salts"]

#: Width of the generator's counters (they wrap).
COUNTER_BITS = 32


def seed_salts(lane):
    """The values lane ``lane``'s creation and destination generators XOR into the node's
    seed, so that no two of a node's random sequences are alike."""
    return 0x9E37_79B9 * (2 * lane + 1) & 0xFFFF_FFFF, 0x85EB_CA6B * (2 * lane + 1) & 0xFFFF_FFFF


class TrafficGenerator(wiring.Component):
    """One local port's traffic: packets created at random, queued, then injected.

    Creation: while ``create`` is high, a packet is created each cycle with probability
    ``threshold / 2**16`` (the low 16 bits of a xorshift32 sequence below ``threshold``;
    65536 creates every cycle). Its creation cycle (``now``) goes into the source queue
    (``source_queue`` entries); a packet created while the queue is full is counted in
    ``overflow`` and forgotten. Latency is measured from creation, so it includes the
    time spent in this queue.

    Injection: the oldest queued packet is sent as a probe packet (``hdl.system.layouts``)
    of ``packet_flits`` flits, one flit per cycle while ``inject.ready``; the next
    packet's header follows its tail directly. Its destination is chosen when its header
    is offered, and held (like the whole flit) until the header is taken:

    - ``fixed``: ``first_dst`` (a permutation pattern);
    - ``uniform``: uniform over the other nodes: ``i = (r * (n_nodes - 1)) >> 16`` for 16
      random bits ``r``, then ``i + (i >= node)``; drawn again, a cycle later, while it
      names a node not ``alive``;
    - ``all_to_all``: ``message_packets`` packets to one node, then the next node id
      (modulo ``n_nodes``), starting at ``first_dst``; nodes not alive, and this one, are
      skipped (a cycle each).

    The tag counts packets per destination (``tag_fields``; malformed packets take none).

    Test knobs: every ``corrupt_every``-th packet (0: never) is sent with bit 0 of its last
    word flipped (the last data word; a 1-flit packet's ``space`` bit), which its sink
    counts as a payload error; every ``malformed_every``-th packet (0: never; this count
    comes first) gets a malformed route word, opcode 0 or, alternately when ``n_nodes``
    is below 256, the unknown destination ``n_nodes``, which the first router drops.

    Parameters
    ----------
    n_nodes : int
        Nodes of the network, 2 to 256.
    lane : int
        This generator's local port, ``0 .. local_ports - 1``: its tag's low bits.
    local_ports : int
        Generators per node, 1 or 2.
    source_queue : int
        Entries of the source queue, at least 1.

    Ports
    -----
    node : In(8)
        This node's id (the packets' ``src``).
    go : In(1)
        Running; while low the random sequences load their seeds and the all-to-all
        pointer ``first_dst``.
    create, window : In(1)
        Creation is on; the measurement window is open (for ``created_window``).
    now : In(32)
        The cycle count the time stamps are taken from.
    mode : In(2)
        ``layouts.MODES``.
    threshold : In(17)
    packet_flits : In(9)
        1 to 256.
    message_packets : In(16)
        At least 1.
    first_dst : In(8)
    sends : In(1)
        This node creates traffic.
    seed : In(32)
    alive : In(n_nodes)
        Bit d: node d is alive.
    corrupt_every, malformed_every : In(16)
    inject : Out(stream.Signature(flit_layout(2)))
        To the router; ``valid`` and the flit hold until ``ready``.
    created_window, created, injected, overflow, corrupted, malformed : Out(32)
        Counters (``layouts.STATS``): packets created in the window and in all,
        injected (tail taken), lost to a full queue, and sent corrupted or malformed.
    queued : Out(range(source_queue + 2))
        Packets in the queue plus one being injected.
    tail : Out(1)
        Pulse: a packet's tail was taken this cycle.

    Latency: a packet created in cycle t is queued at t + 1 and its header offered from
    t + 1 (the queue's read latency) if the queue was empty and nothing was being sent.
    Throughput: one flit per cycle.
    """

    def __init__(self, *, n_nodes, lane=0, local_ports=1, source_queue=64):
        self.n_nodes = check_int("n_nodes", n_nodes, least=2, most=1 << CHIP_BITS)
        self.local_ports = check_int("local_ports", local_ports, least=1,
                                     most=MAX_LOCAL_PORTS)
        self.lane = check_int("lane", lane, least=0, most=local_ports - 1)
        self.source_queue = check_int("source_queue", source_queue, least=1)
        counters = ("created_window", "created", "injected", "overflow", "corrupted",
                    "malformed")
        super().__init__({
            "node": In(CHIP_BITS), "go": In(1), "create": In(1), "window": In(1),
            "now": In(32), "mode": In(2), "threshold": In(GAP_BITS + 1),
            "packet_flits": In(range(MAX_PACKET_FLITS + 1)), "message_packets": In(16),
            "first_dst": In(CHIP_BITS), "sends": In(1), "seed": In(32),
            "alive": In(n_nodes), "corrupt_every": In(16), "malformed_every": In(16),
            "inject": Out(stream.Signature(flit_layout(FLIT_WORDS))),
            **{name: Out(COUNTER_BITS) for name in counters},
            "queued": Out(range(source_queue + 2)), "tail": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.n_nodes
        lane_bits, seq_bits = tag_fields(self.local_ports)
        create_salt, dst_salt = seed_salts(self.lane)

        # Creation: a Bernoulli trial every cycle.
        m.submodules.trials = trials = Xorshift32()
        m.submodules.queue = queue = StreamQueue(shape=TIME_BITS, depth=self.source_queue)
        fire = Signal()
        m.d.comb += [trials.seed.eq(self.seed ^ create_salt), trials.run.eq(self.go),
                     fire.eq(self.go & self.create & self.sends
                             & (trials.value[:GAP_BITS] < self.threshold)),
                     queue.i.payload.eq(self.now[:TIME_BITS]),
                     queue.i.valid.eq(fire & queue.i.ready)]
        m.d.sync += [self.created.eq(self.created + fire),
                     self.created_window.eq(self.created_window + (fire & self.window)),
                     self.overflow.eq(self.overflow + (fire & ~queue.i.ready))]

        # Destinations. The random word steps only when used, so the header holds.
        draws = Signal(32, init=1)
        pointer = Signal(CHIP_BITS)
        in_message = Signal(16)
        index = Signal(CHIP_BITS)
        m.d.comb += index.eq((draws[16:] * (n - 1))[16:])
        dst = Signal(CHIP_BITS)
        with m.Switch(self.mode):
            with m.Case(MODES["uniform"]):
                m.d.comb += dst.eq(index + (index >= self.node))
            with m.Case(MODES["all_to_all"]):
                m.d.comb += dst.eq(pointer)
            with m.Default():
                m.d.comb += dst.eq(self.first_dst)
        dst_ok = Signal()
        m.d.comb += dst_ok.eq((dst < n) & (dst != self.node)
                              & self.alive.bit_select(dst[:max(1, (n - 1).bit_length())], 1))

        # Sequence numbers per destination.
        m.submodules.seq = seq_mem = Memory(shape=seq_bits, depth=n, init=[])
        seq_read = seq_mem.read_port(domain="comb")
        seq_write = seq_mem.write_port()
        m.d.comb += [seq_read.addr.eq(dst), seq_write.addr.eq(dst),
                     seq_write.data.eq(seq_read.data + 1)]

        # Test knobs: counters of headers since the last malformed and corrupted packet.
        def every(name, period, take):
            count = Signal(16, name=f"{name}_count")
            hit = Signal(name=f"{name}_hit")
            m.d.comb += hit.eq(period.any() & (count == period - 1))
            with m.If(take):
                m.d.sync += count.eq(Mux(hit, 0, count + 1))
            return hit

        # The packet being sent (after its header).
        body = Signal()                       # between header and tail
        flit = Signal(range(MAX_PACKET_FLITS))
        cur_dst = Signal(CHIP_BITS)
        cur_tag = Signal(seq_bits + lane_bits)
        cur_corrupt = Signal()
        last = Signal()
        m.d.comb += last.eq(flit == self.packet_flits - 1)

        header_take = Signal()
        m.d.comb += header_take.eq(~body & self.inject.valid & self.inject.ready)
        malformed = every("malformed", self.malformed_every, header_take)
        corrupt = Signal()
        m.d.comb += corrupt.eq(every("corrupt", self.corrupt_every, header_take & ~malformed)
                               & ~malformed)
        odd_malformed = Signal()              # alternate the two kinds of malformed header

        tag = Signal(seq_bits + lane_bits)
        m.d.comb += tag.eq(Cat(C(self.lane, lane_bits), seq_read.data))
        one_flit = self.packet_flits == 1
        # Malformed headers alternate between opcode 0 and, when some id is not a node,
        # a destination no routing table knows.
        unknown_dst = Signal()
        if n < 1 << CHIP_BITS:
            m.d.comb += unknown_dst.eq(malformed & odd_malformed)
        route = Signal(route_word_layout)
        m.d.comb += [
            route.opcode.eq(Mux(malformed & ~unknown_dst, 0,
                                Mux(one_flit, OPCODES["flag_add"], OPCODES["write"]))),
            route.dst.eq(Mux(unknown_dst, n % (1 << CHIP_BITS), dst)),
            route.src.eq(self.node), route.length.eq(self.packet_flits),
        ]
        # Target word: time stamp, tag, space (1 for a write; flipped when corrupted).
        target = Cat(queue.o.payload, tag, ~one_flit ^ (corrupt & one_flit))

        words = [payload_word(self.node, cur_dst, cur_tag, 2 * (flit - 1) + k)
                 for k in range(FLIT_WORDS)]
        words[-1] = words[-1] ^ (cur_corrupt & last)
        m.d.comb += [
            self.inject.valid.eq(Mux(body, 1, self.go & queue.o.valid & dst_ok)),
            self.inject.payload.eq(Mux(body, Cat(*words), Cat(route, target))),
        ]

        take = self.inject.valid & self.inject.ready
        m.d.comb += [queue.o.ready.eq(header_take),
                     seq_write.en.eq(header_take & ~malformed),
                     self.tail.eq(take & Mux(body, last, one_flit)),
                     self.queued.eq(queue.level + body)]
        m.d.sync += [self.injected.eq(self.injected + self.tail),
                     self.malformed.eq(self.malformed + (header_take & malformed)),
                     self.corrupted.eq(self.corrupted + (header_take & corrupt))]
        with m.If(header_take):
            m.d.sync += [cur_dst.eq(dst), cur_tag.eq(tag), cur_corrupt.eq(corrupt),
                         flit.eq(1), body.eq(~one_flit)]
            with m.If(malformed):
                m.d.sync += odd_malformed.eq(~odd_malformed)
        with m.Elif(body & take):
            m.d.sync += [flit.eq(flit + 1), body.eq(~last)]

        # Next destination: a new draw after every header, or while this one is not alive.
        redraw = header_take | (~body & queue.o.valid & ~dst_ok)
        message_end = in_message == self.message_packets - 1
        with m.If(~self.go):
            m.d.sync += [draws.eq(Mux((self.seed ^ dst_salt) == 0, 1, self.seed ^ dst_salt)),
                         pointer.eq(self.first_dst), in_message.eq(0)]
        with m.Else():
            with m.If(redraw & (self.mode == MODES["uniform"])):
                m.d.sync += draws.eq(xorshift32(draws))
            with m.If(self.mode == MODES["all_to_all"]):
                advance = (header_take & message_end) | (~body & queue.o.valid & ~dst_ok)
                with m.If(header_take):
                    m.d.sync += in_message.eq(Mux(message_end, 0, in_message + 1))
                with m.If(advance):
                    m.d.sync += pointer.eq(Mux(pointer == n - 1, 0, pointer + 1))
        return m
