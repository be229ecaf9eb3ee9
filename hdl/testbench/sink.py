"""A synthesizable traffic sink: checks every probe packet and measures latency, hops and
throughput."""

from amaranth.hdl import C, Cat, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..ici.layouts import CHIP_BITS, LENGTH_BITS, OPCODES, flit_layout, route_word_layout
from ..lib.params import check_int
from ..system.layouts import (BUCKETS, FLIT_WORDS, HOP_BITS, MAX_LOCAL_PORTS,
                              MAX_PACKET_FLITS, TAG_BITS, TIME_BITS, latency_bucket_hw,
                              payload_word, tag_fields)

__all__ = ["TrafficSink", "COUNTER_BITS"]

#: Width of the sink's counters (they wrap), but for the 48-bit latency sum.
COUNTER_BITS = 32


class TrafficSink(wiring.Component):
    """Takes ejected probe packets (``hdl.system.layouts``) every cycle, checks them and
    counts.

    Checks, per packet:

    - header (``header_errors``): opcode ``flag_add`` for 1-flit packets, ``write``
      otherwise; ``length == packet_flits``; ``pad`` and ``vc`` 0; ``dst`` this node;
      ``src`` another node below ``n_nodes``. A packet that fails is framed by its
      ``length`` (at least one flit) and not checked further;
    - sequence (``sequence_errors``): its tag's sequence number is the one expected from
      its source and lane (one more than the last one seen, from 0); after a mismatch the
      expected number follows the packet's, so a lost, repeated or reordered packet
      counts once;
    - payload (``payload_errors``): the target word's ``space`` bit and every data word
      (``payload_word``).

    Measurement: ``received`` counts every packet at its tail. For packets whose tail is
    ejected while ``window`` is high: ``packets_window``, the latency ``now - stamp``
    (modulo ``2**TIME_BITS``) summed into ``latency`` (48 bits), its maximum
    ``latency_max``, the histogram bin ``layouts.latency_bucket`` incremented, and the
    hop count ``hops`` (looked up by ``src``) summed into ``hops_window``.
    ``flits_window`` counts every flit ejected while ``window`` is high.

    Parameters
    ----------
    n_nodes : int
        Nodes of the network, 2 to 256.
    local_ports : int
        Lanes per source node (1 or 2): sequence numbers are per source and lane.

    Ports
    -----
    eject : In(stream.Signature(flit_layout(2)))
        From the router; ``ready`` is always high (a sink consumes at once).
    node : In(8)
    now : In(32)
    window : In(1)
    packet_flits : In(9)
    src : Out(8)
        The source of the packet whose flit is being taken (for the hop lookup).
    hops : In(8)
        Hop count from ``src`` to this node, combinationally from ``src``.
    received, packets_window, flits_window, hops_window, latency_max, header_errors, \
    sequence_errors, payload_errors : Out(32)
    latency : Out(48)
    arrived : Out(1)
        Pulse: a packet's tail was taken this cycle.
    hist_addr : In(range(BUCKETS))
    hist_data : Out(32)
        Histogram bin ``hist_addr``, combinationally.

    Unordered flows (``ordered=False``, for adaptive routing, which may reorder the packets
    of one flow): the memory counts the packets of each (source, lane) instead, and a
    signed sum gathers, per packet, its sequence number less that count (both modulo
    ``2**seq_bits``). After a run that delivered every packet of each flow exactly once,
    in any order, the sequence numbers and the counts are the same multiset and the sum
    is 0; a packet lost and another repeated leave it non-zero (a lone loss shows in the
    counts of packets injected and received). ``sequence_errors`` then reads 1 while the
    sum is not 0, else 0.

    Throughput one flit per cycle; counters update the cycle after the flit.
    """

    def __init__(self, *, n_nodes, local_ports=1, ordered=True):
        self.ordered = bool(ordered)
        self.n_nodes = check_int("n_nodes", n_nodes, least=2, most=1 << CHIP_BITS)
        self.local_ports = check_int("local_ports", local_ports, least=1,
                                     most=MAX_LOCAL_PORTS)
        counters = ("received", "packets_window", "flits_window", "hops_window",
                    "latency_max", "header_errors", "sequence_errors", "payload_errors")
        super().__init__({
            "eject": In(stream.Signature(flit_layout(FLIT_WORDS))),
            "node": In(CHIP_BITS), "now": In(32), "window": In(1),
            "packet_flits": In(range(MAX_PACKET_FLITS + 1)),
            "src": Out(CHIP_BITS), "hops": In(HOP_BITS),
            **{name: Out(COUNTER_BITS) for name in counters},
            "latency": Out(48), "arrived": Out(1),
            "hist_addr": In(range(BUCKETS)), "hist_data": Out(COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        lane_bits, seq_bits = tag_fields(self.local_ports)
        take = Signal()
        m.d.comb += [self.eject.ready.eq(1), take.eq(self.eject.valid)]
        words = [self.eject.payload[k] for k in range(FLIT_WORDS)]

        # The packet in progress (after its header flit).
        remaining = Signal(LENGTH_BITS)       # flits still to come
        flit = Signal(range(MAX_PACKET_FLITS))
        cur = {"src": Signal(CHIP_BITS), "tag": Signal(TAG_BITS), "stamp": Signal(TIME_BITS),
               "good": Signal(), "intact": Signal()}
        header = Signal()
        m.d.comb += header.eq(~remaining.any())

        # The header flit read as a probe header.
        route = route_word_layout(words[0])
        stamp, tag, space = words[1][:TIME_BITS], words[1][24:24 + TAG_BITS], words[1][31]
        length = Mux(route.length.any(), route.length, 1)
        one_flit = self.packet_flits == 1
        good = Signal()
        m.d.comb += good.eq(
            (route.opcode == Mux(one_flit, OPCODES["flag_add"], OPCODES["write"]))
            & (route.length == self.packet_flits) & ~route.pad.any() & ~route.vc.any()
            & (route.dst == self.node) & (route.src < self.n_nodes)
            & (route.src != self.node))

        # Sequence numbers expected per (source, lane).
        m.submodules.expected = expected = Memory(shape=seq_bits,
                                                  depth=self.n_nodes << lane_bits, init=[])
        seq_read = expected.read_port(domain="comb")
        seq_write = expected.write_port()
        lane, seq = tag[:lane_bits], tag[lane_bits:]
        key = Cat(lane, route.src) if lane_bits else route.src
        arrival = take & header & good
        m.d.comb += [seq_read.addr.eq(key), seq_write.addr.eq(key),
                     seq_write.data.eq((seq if self.ordered else seq_read.data) + 1),
                     seq_write.en.eq(arrival)]
        out_of_sequence = arrival & (seq != seq_read.data)
        if not self.ordered:
            balance = Signal(signed(48))
            difference = Cat(seq, C(0, 1)).as_signed() - Cat(seq_read.data, C(0, 1)).as_signed()
            m.d.sync += balance.eq(balance + Mux(arrival, difference, 0))

        # Payload words of a body flit, and whether the packet so far is intact.
        words_ok = Cat(words[k] == payload_word(cur["src"], self.node, cur["tag"],
                                                2 * (flit - 1) + k)
                       for k in range(FLIT_WORDS)).all()
        intact = Signal()
        m.d.comb += intact.eq(Mux(header, space == ~one_flit, cur["intact"] & words_ok))

        tail = Signal()
        m.d.comb += tail.eq(take & Mux(header, length == 1, remaining == 1))
        with m.If(take & header):
            m.d.sync += [remaining.eq(length - 1), flit.eq(1), cur["src"].eq(route.src),
                         cur["tag"].eq(tag), cur["stamp"].eq(stamp), cur["good"].eq(good),
                         cur["intact"].eq(intact)]
        with m.Elif(take):
            m.d.sync += [remaining.eq(remaining - 1), flit.eq(flit + 1),
                         cur["intact"].eq(intact)]

        # At the tail: the packet's verdict and its measurements.
        packet_good = Mux(header, good, cur["good"])
        latency = Signal(TIME_BITS)
        m.d.comb += [latency.eq(self.now[:TIME_BITS] - Mux(header, stamp, cur["stamp"])),
                     self.src.eq(Mux(header, route.src, cur["src"])),
                     self.arrived.eq(tail)]
        measured = tail & self.window
        m.d.sync += [
            self.received.eq(self.received + tail),
            self.flits_window.eq(self.flits_window + (take & self.window)),
            self.packets_window.eq(self.packets_window + measured),
            self.header_errors.eq(self.header_errors + (take & header & ~good)),
            self.payload_errors.eq(self.payload_errors + (tail & packet_good & ~intact)),
        ]
        if self.ordered:
            m.d.sync += self.sequence_errors.eq(self.sequence_errors + out_of_sequence)
        else:
            m.d.comb += self.sequence_errors.eq(balance != 0)
        with m.If(measured):
            m.d.sync += [self.latency.eq(self.latency + latency),
                         self.hops_window.eq(self.hops_window + self.hops)]
            with m.If(latency > self.latency_max):
                m.d.sync += self.latency_max.eq(latency)

        m.submodules.histogram = histogram = Memory(shape=COUNTER_BITS, depth=BUCKETS,
                                                    init=[])
        bins = histogram.read_port(domain="comb")
        bump = histogram.write_port()
        bucket = latency_bucket_hw(m, latency)
        m.d.comb += [bins.addr.eq(bucket), bump.addr.eq(bucket), bump.data.eq(bins.data + 1),
                     bump.en.eq(measured)]
        peek = histogram.read_port(domain="comb")
        m.d.comb += [peek.addr.eq(self.hist_addr), self.hist_data.eq(peek.data)]
        return m
