"""The DMA's push packetizer: the words of remote descriptors in, ICI ``write`` packets out
(``golden.ici.push_packets``)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..ici.layouts import LENGTH_BITS, MAX_FLIT_WORDS, OPCODES, flit_layout, route_word_layout
from ..lib.memory_port import WORD_BITS
from ..lib.stream_queue import StreamQueue
from .dma_addrgen import inflight_layout
from .dma_lanes import equals, pick
from .layouts import ADDRESS_BITS, CHIP_BITS, FLAG_BITS, flag_add_layout, target_word_layout
from ..lib.params import check_int

__all__ = ["Packetizer", "push_beat_layout", "push_done_layout", "max_payload_words",
           "HEADER_WORDS", "DEFAULT_MAX_PAYLOAD"]

#: Words of a packet before its data: the route word and the target word.
HEADER_WORDS = 2
#: Data words per ``write`` packet by default: the two header words cost 3%, and the
#: packetizer buffers two packets' words (4 Kbit).
DEFAULT_MAX_PAYLOAD = 64


def max_payload_words(flit_words):
    """The most data words a ``write`` packet of ``flit_words``-word flits can carry: its
    9-bit ``length`` counts at most 511 flits (``golden.ici.max_payload``)."""
    check_int("flit_words", flit_words, least=1, most=MAX_FLIT_WORDS)
    return ((1 << LENGTH_BITS) - 1) * flit_words - HEADER_WORDS


def push_beat_layout(max_words):
    """A beat of a push, from the burst engine: ``count`` words (1 to ``max_words``) in
    lanes ``0 .. count - 1`` of ``data``, for ``dst_addr, dst_addr + 1, ...`` of
    ``dst_space`` at the destination chip; ``last``: the descriptor's last beat; ``info``:
    the descriptor's ``inflight`` entry (destination chip and flag, word count, sent
    flag)."""
    check_int("max_words", max_words, least=1)
    return data.StructLayout({
        "data": data.ArrayLayout(WORD_BITS, max_words),
        "count": range(1, max_words + 1),
        "dst_space": 1, "dst_addr": unsigned(ADDRESS_BITS),
        "last": 1,
        "info": inflight_layout,
    })


#: A push whose last word has left: add ``add.amount`` (its word count) to local flag
#: ``add.flag`` if ``sent`` (the descriptor named a sent flag).
push_done_layout = data.StructLayout({"sent": 1, "add": flag_add_layout})


def _record_layout(max_payload):
    """A closed packet waiting to be sent: its target, data word count, ``length`` and
    ``pad`` (route word fields), and, on a descriptor's last packet (``final``), the
    descriptor's completion."""
    return data.StructLayout({
        "space": 1, "address": unsigned(ADDRESS_BITS), "flag": unsigned(FLAG_BITS),
        "chip": unsigned(CHIP_BITS), "count": range(1, max_payload + 1),
        "length": unsigned(LENGTH_BITS), "pad": 3,
        "final": 1, "done": push_done_layout,
    })


class Packetizer(wiring.Component):
    """Cuts the words of pushes into ICI ``write`` packets, as ``golden.ici.push_packets``.

    **Packets.** Words are taken in element order, one a cycle. A packet ends where the
    next word's destination address is not the previous one's plus 1, when it holds
    ``max_payload`` words, and at its descriptor's last word: packets never span
    descriptors, and every packet names its descriptor's destination flag, so the
    destination's flag gains the descriptor's word count once all have landed. No
    ``flag_add`` packet is sent (``push_packets`` sends none). The route word names
    ``opcode`` write, ``vc`` 0 (routers choose the VC of every link), the destination and
    source (``chip``) chips, and the ``length`` in flits and the ``pad`` words of the last
    flit (zeros), as ``golden.ici``.

    **Store and forward.** The route word needs the packet's length, which is known only
    when the packet ends, so words wait in a buffer of ``2 * max_payload`` words (a packet
    filling while the previous one leaves) and closed packets in a queue of
    :data:`RECORDS`; a packet starts to leave once it has ended.

    **Completion.** When the last flit of a descriptor's last packet has been taken on
    ``flits``, ``done`` offers the descriptor's word count for its sent flag: every word
    has left.

    Parameters
    ----------
    max_words : int
        Words per beat on ``beats`` (the widest memory line).
    flit_words : int
        Words per flit, 1 to 8 (default 1).
    max_payload : int
        Data words per packet, 1 to :func:`max_payload_words` (default
        :data:`DEFAULT_MAX_PAYLOAD`).

    Ports
    -----
    beats : In(stream.Signature(push_beat_layout(max_words)))
        A beat is taken with its last word.
    chip : In(8)
        This chip's id, the packets' source.
    flits : Out(stream.Signature(flit_layout(flit_words)))
        Packets, flit after flit, registered; ``hdl.ici.Router``'s injection format.
    done : Out(stream.Signature(push_done_layout))
        Registered; one per descriptor, in order.
    idle : Out(1)
        No word is held and nothing is offered.

    Latency: a packet's header flit is offered two cycles after its last word is taken
    at the earliest. Throughput: one word a cycle in (a word that breaks the destination
    addresses waits a cycle while the packet before it closes), one word a cycle out (so
    one flit a cycle with ``flit_words = 1``); a packet of ``n`` data words takes
    ``n + 2`` word cycles to send, so with the default 64 a long push moves 64/66 = 97%
    of a word a cycle. ``flits`` and ``done`` hold their offers until taken.
    """

    #: Closed packets the queue holds: short packets (a strided destination) need a few
    #: to keep words flowing while headers are sent.
    RECORDS = 4

    def __init__(self, *, max_words, flit_words=1, max_payload=DEFAULT_MAX_PAYLOAD):
        check_int("max_words", max_words, least=1)
        check_int("flit_words", flit_words, least=1, most=MAX_FLIT_WORDS)
        check_int("max_payload", max_payload, least=1, most=max_payload_words(flit_words))
        self.max_words, self.flit_words, self.max_payload = max_words, flit_words, max_payload
        super().__init__({
            "beats": In(stream.Signature(push_beat_layout(max_words))),
            "chip": In(CHIP_BITS),
            "flits": Out(stream.Signature(flit_layout(flit_words))),
            "done": Out(stream.Signature(push_done_layout)),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        record_layout = _record_layout(self.max_payload)
        m.submodules.records = records = StreamQueue(shape=record_layout, depth=self.RECORDS)
        m.submodules.words = words = StreamQueue(shape=WORD_BITS, depth=2 * self.max_payload,
                                                 buffered=True)
        self._pack(m, records, words)
        self._send(m, records, words)
        m.d.comb += self.idle.eq(~self.beats.valid & ~records.level.any() & ~words.level.any()
                                 & ~self.flits.valid & ~self.done.valid)
        return m

    def _pack(self, m, records, words):
        """Beats in, one word a cycle, into the word buffer; packet records out."""
        fw = self.flit_words
        beat = self.beats.payload
        index = Signal(range(max(2, self.max_words)), name="word_index")   # in the head beat
        word = pick(list(beat.data), index)
        addr = Signal(ADDRESS_BITS, name="word_addr")
        m.d.comb += addr.eq(beat.dst_addr + index)
        beat_end = index + 1 == beat.count
        final = beat.last & beat_end

        # The open packet. `fill` is its words (headers included) modulo flit_words, so
        # a word appended when it is 0 starts a flit: `length` and `pad` follow.
        is_open = Signal(name="open")
        start = Signal(ADDRESS_BITS)
        expect = Signal(ADDRESS_BITS)            # the address that continues the packet
        count = Signal(range(1, self.max_payload + 1))
        space, flag, chip = Signal(), Signal(FLAG_BITS), Signal(CHIP_BITS)
        length = Signal(LENGTH_BITS)
        fill = Signal(range(fw)) if fw > 1 else None
        first = HEADER_WORDS + 1                 # a new packet's words
        new_count = Signal.like(count)
        new_length = Signal.like(length)
        new_fill = Signal(range(fw)) if fw > 1 else None
        m.d.comb += [
            new_count.eq(Mux(is_open, count + 1, 1)),
            new_length.eq(Mux(is_open, length + (equals(fill, 0) if fw > 1 else 1),
                              -(-first // fw))),
        ]
        if fw > 1:
            m.d.comb += new_fill.eq(Mux(is_open, Mux(fill == fw - 1, 0, fill + 1), first % fw))

        can = Signal()
        breaks = Signal()                        # the word does not continue the packet
        take = Signal()
        close_new = Signal()
        m.d.comb += [
            can.eq(self.beats.valid & records.i.ready & words.i.ready),
            breaks.eq(is_open & (addr != expect)),
            take.eq(can & ~breaks),
            close_new.eq(take & ((new_count == self.max_payload) | final)),
            words.i.valid.eq(take), words.i.payload.eq(word),
            records.i.valid.eq((can & breaks) | close_new),
            self.beats.ready.eq(take & beat_end),
        ]

        # The record: the open packet when a word breaks it (the word then waits a cycle
        # and opens the next), else the packet the word closes.
        record = records.i.payload
        pad = Signal(3)
        if fw > 1:
            last_fill = Mux(breaks, fill, new_fill)
            m.d.comb += pad.eq(Mux(equals(last_fill, 0), 0, fw - last_fill))
        m.d.comb += [
            record.space.eq(Mux(is_open, space, beat.dst_space)),
            record.address.eq(Mux(is_open, start, addr)),
            record.flag.eq(Mux(is_open, flag, beat.info.flag)),
            record.chip.eq(Mux(is_open, chip, beat.info.chip)),
            record.count.eq(Mux(breaks, count, new_count)),
            record.length.eq(Mux(breaks, length, new_length)),
            record.pad.eq(pad),
            record.final.eq(~breaks & final),
            record.done.sent.eq(beat.info.sent),
            record.done.add.flag.eq(beat.info.sent_flag),
            record.done.add.amount.eq(beat.info.words),
        ]

        with m.If(can & breaks):
            m.d.sync += is_open.eq(0)
        with m.If(take):
            m.d.sync += [is_open.eq(~close_new), expect.eq(addr + 1), count.eq(new_count),
                         length.eq(new_length), index.eq(Mux(beat_end, 0, index + 1))]
            if fw > 1:
                m.d.sync += fill.eq(new_fill)
            with m.If(~is_open):
                m.d.sync += [start.eq(addr), space.eq(beat.dst_space),
                             flag.eq(beat.info.flag), chip.eq(beat.info.chip)]

    def _send(self, m, records, words):
        """Closed packets out, one word a cycle, assembled into flits."""
        fw = self.flit_words
        rec = records.o.payload
        flits, done = self.flits, self.done
        k = Signal(range(self.max_payload + HEADER_WORDS), name="packet_word")
        lane = Signal(range(fw)) if fw > 1 else None
        held = Signal(data.ArrayLayout(WORD_BITS, fw)) if fw > 1 else None   # words so far
        final_flit = Signal()                    # the offered flit ends a descriptor
        done_info = Signal(push_done_layout)

        route = Signal(route_word_layout)
        target = Signal(target_word_layout)
        m.d.comb += [
            route.opcode.eq(OPCODES["write"]), route.vc.eq(0), route.dst.eq(rec.chip),
            route.src.eq(self.chip), route.length.eq(rec.length), route.pad.eq(rec.pad),
            target.address.eq(rec.address), target.flag.eq(rec.flag),
            target.space.eq(rec.space),
        ]
        is_data = k >= HEADER_WORDS
        word = Mux(equals(k, 0), route.as_value(),
                   Mux(k == 1, target.as_value(), words.o.payload))
        last_word = k == rec.count + (HEADER_WORDS - 1)
        ends_flit = last_word | (lane == fw - 1) if fw > 1 else Const(1)
        ends_descriptor = last_word & rec.final
        step = Signal()
        m.d.comb += [
            step.eq(records.o.valid & (~is_data | words.o.valid)
                    & (~ends_flit | ((~flits.valid | flits.ready)
                                     & (~ends_descriptor | ~done.valid | done.ready)))),
            words.o.ready.eq(step & is_data),
            records.o.ready.eq(step & last_word),
        ]
        # The flit: the words so far, this one, and zero pad words after it.
        # (No lane is above fw - 1, and none below 0: those comparisons are left out.)
        assembled = word if fw == 1 else Cat(*[
            Mux(equals(lane, j), word, Mux(lane > j, held[j], 0) if j < fw - 1 else 0)
            if j else Mux(equals(lane, 0), word, held[0]) for j in range(fw)])
        with m.If(step):
            m.d.sync += k.eq(Mux(last_word, 0, k + 1))
            if fw > 1:
                m.d.sync += lane.eq(Mux(ends_flit, 0, lane + 1))
                m.d.sync += held.as_value().eq(assembled)
        with m.If(flits.valid & flits.ready):
            m.d.sync += flits.valid.eq(0)
        with m.If(step & ends_flit):
            m.d.sync += [flits.valid.eq(1), flits.payload.as_value().eq(assembled),
                         final_flit.eq(ends_descriptor), done_info.eq(rec.done)]

        # The descriptor's words have all left: offer its completion.
        with m.If(done.valid & done.ready):
            m.d.sync += done.valid.eq(0)
        with m.If(flits.valid & flits.ready & final_flit):
            m.d.sync += [done.valid.eq(1), done.payload.eq(done_info)]
