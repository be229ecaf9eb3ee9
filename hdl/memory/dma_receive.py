"""The receive engine: ICI packets in, their data written to local HBM or VMEM and their
words added to sync flags (SPEC sections 4.3, 4.4)."""

import types

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..ici.layouts import LENGTH_BITS, MAX_FLIT_WORDS, OPCODES, flit_layout, route_word_layout
from ..lib.memory_port import WORD_BITS
from ..lib.stream_queue import StreamQueue
from .dma_lanes import check_space_ports, equals, pick
from .layouts import ADDRESS_BITS, CHIP_BITS, FLAG_BITS, flag_add_layout, target_word_layout
from ..lib.params import check_int

__all__ = ["Receiver"]

#: Flag adds the receiver queues (a packet's add waits here for the flag bank).
LANDED = 2
#: Width of the packet counters.
COUNT_BITS = 32


class Receiver(wiring.Component):
    """Lands incoming ICI packets (``golden.ici``) on this chip, as ``golden.memory.land``.

    A ``write`` packet's data words are written to ``address, address + 1, ...`` of its
    space, then its data word count is added to its flag; a ``flag_add`` packet adds its
    amount. Packets are handled in arrival order, one word a cycle.

    **Writes.** Consecutive words of a packet are gathered into a line register and
    written a line at a time (masked), when the line is complete or the packet ends, so
    a long packet costs one request per line. There is one request register for both
    memories. A packet's flag add is queued when its last write has been accepted by its
    memory, so a waiter on the flag never sees it before the data have landed.

    **Malformed packets.** Every check is made on the route word and the target word,
    before any data word is written, so a malformed packet writes nothing and adds to no
    flag; it is counted in ``malformed`` and its flits are dropped. The route word is
    malformed when (``golden.ici.decode_header``) its opcode is not 1 (write) or 2
    (flag_add), its ``length`` is 0, its ``pad`` is not below ``flit_words``, its size is
    not what its opcode needs (a ``flag_add`` is 2 words, a ``write`` at least 3), its
    ``dst`` is not this chip (a misrouted packet) or its ``src`` is at or above
    ``n_chips``; the target word when its flag is at or above ``n_flags``, a
    ``flag_add`` sets ``space``, or a ``write`` runs past the end of its space. A packet
    dropped at its route word is ``length`` flits long (one if its length is 0: the
    rule ``hdl.ici.Router`` follows). The pad words of the last flit are not read
    (``golden.ici.decode`` also insists that they are zero; the DMA sends zeros), and
    the route word's ``vc`` is not checked (routers choose it).

    Parameters
    ----------
    ports : dict of space code to MemoryPortSignature
        ``{0: hbm, 1: vmem}``, words per line a power of two, a mask bit per word (the
        DMA's port signatures).
    sizes : (int, int)
        Words in HBM and VMEM.
    n_flags : int
        Flags in the bank.
    n_chips : int
        Chips in the system, 1 to 256 (default 1).
    flit_words : int
        Words per flit, 1 to 8 (default 1).

    Ports
    -----
    flits : In(stream.Signature(flit_layout(flit_words)))
        Packets, flit after flit, as ``hdl.ici.Router`` ejects them. ``ready`` depends on
        ``valid`` and the payload: a flit is taken with its last word used.
    chip : In(8)
        This chip's id.
    hbm, vmem : Out(MemoryPortSignature)
        Writes only; responses are never expected.
    flag_add : Out(stream.Signature(flag_add_layout))
        From a queue of :data:`LANDED`.
    idle : Out(1)
        No packet is partly taken, and no write or flag add is pending.
    packets, malformed : Out(32)
        Packets landed, and malformed packets dropped (both wrap).

    Latency: a packet's last data word taken in cycle ``t`` is requested from its memory
    in cycle ``t + 1``; a write accepted in cycle ``u`` offers its flag add in ``u + 1``.
    Throughput: one word a cycle (one flit a cycle with ``flit_words = 1``) while the
    memory takes a request a cycle; two header words per packet.
    """

    def __init__(self, *, ports, sizes, n_flags, n_chips=1, flit_words=1):
        check_space_ports(ports)
        if not isinstance(sizes, (tuple, list)) or len(sizes) != 2:
            raise TypeError(f"sizes must be a pair (hbm, vmem), not {sizes!r}")
        for name, size in zip(("hbm", "vmem"), sizes):
            check_int(f"{name} size", size, least=1, most=1 << ADDRESS_BITS)
        check_int("n_flags", n_flags, least=1, most=1 << FLAG_BITS)
        check_int("n_chips", n_chips, least=1, most=1 << CHIP_BITS)
        check_int("flit_words", flit_words, least=1, most=MAX_FLIT_WORDS)
        self.ports, self.sizes = dict(ports), tuple(sizes)
        self.n_flags, self.n_chips, self.flit_words = n_flags, n_chips, flit_words
        self.max_words = max(sig.words for sig in ports.values())
        super().__init__({
            "flits": In(stream.Signature(flit_layout(flit_words))),
            "chip": In(CHIP_BITS),
            "hbm": Out(ports[0]),
            "vmem": Out(ports[1]),
            "flag_add": Out(stream.Signature(flag_add_layout)),
            "idle": Out(1),
            "packets": Out(COUNT_BITS), "malformed": Out(COUNT_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        fw, wmax = self.flit_words, self.max_words
        m.submodules.landed = landed = StreamQueue(shape=flag_add_layout, depth=LANDED)
        wiring.connect(m, landed.o, wiring.flipped(self.flag_add))

        # Where in the packet we are: word k (0 route, 1 target, 2.. data) at `lane` of
        # the flit on `flits`; `drop` flits of a malformed packet are still to come.
        k = Signal(range(MAX_FLIT_WORDS << LENGTH_BITS), name="packet_word")
        lane = Signal(range(fw)) if fw > 1 else None
        drop = Signal(LENGTH_BITS)
        length = Signal(LENGTH_BITS)             # of the packet, from its route word
        total = Signal(range(MAX_FLIT_WORDS << LENGTH_BITS))      # its words
        is_write = Signal()
        flag = Signal(FLAG_BITS)
        space = Signal()
        cursor = Signal(ADDRESS_BITS)            # the next data word's address
        word = Signal(WORD_BITS)
        m.d.comb += word.eq(pick(list(self.flits.payload), lane) if fw > 1
                            else self.flits.payload[0])
        dropping = drop.any()
        valid = self.flits.valid & ~dropping

        # ---- the route word.
        route = data.View(route_word_layout, word)
        route_words = Signal.like(total)
        m.d.comb += route_words.eq(route.length * fw - route.pad)
        src_bad = route.src >= self.n_chips if self.n_chips < 1 << CHIP_BITS else Const(0)
        pad_bad = route.pad >= fw if fw < MAX_FLIT_WORDS else Const(0)
        route_bad = Signal()
        m.d.comb += route_bad.eq(
            ((route.opcode != OPCODES["write"]) & (route.opcode != OPCODES["flag_add"]))
            | ~route.length.any() | pad_bad
            | ((route.opcode == OPCODES["flag_add"]) & (route_words != 2))
            | ((route.opcode == OPCODES["write"]) & (route_words < 3))
            | (route.dst != self.chip) | src_bad)

        # ---- the target word.
        target = data.View(target_word_layout, word)
        flag_bad = target.flag >= self.n_flags if self.n_flags < 1 << FLAG_BITS else Const(0)
        size = Mux(target.space, self.sizes[1], self.sizes[0])
        data_words = total - 2
        target_bad = Signal()
        m.d.comb += target_bad.eq(flag_bad | Mux(is_write, target.address + data_words > size,
                                                 target.space))

        # ---- data: the line register, and the one request register.
        line_words = [self.ports[s].words for s in (0, 1)]
        shifts = [w.bit_length() - 1 for w in line_words]
        line_lane = Signal(range(max(2, wmax)))
        m.d.comb += line_lane.eq(Mux(space, cursor & (line_words[1] - 1),
                                     cursor & (line_words[0] - 1)))
        line_data = Signal(WORD_BITS * wmax)
        line_mask = Signal(wmax)
        line_full = Mux(space, equals(line_lane, line_words[1] - 1),
                        equals(line_lane, line_words[0] - 1))
        merged_data = Cat(*[Mux(equals(line_lane, j), word,
                                line_data[WORD_BITS * j:WORD_BITS * (j + 1)])
                            for j in range(wmax)])
        merged_mask = Cat(*[equals(line_lane, j) | line_mask[j] for j in range(wmax)])

        req = types.SimpleNamespace(
            valid=Signal(name="req_valid"), space=Signal(name="req_space"),
            line=Signal(ADDRESS_BITS, name="req_line"),
            data=Signal(WORD_BITS * wmax, name="req_data"), mask=Signal(wmax, name="req_mask"),
            last=Signal(name="req_last"),                 # the packet's last write
            add=Signal(flag_add_layout, name="req_add"))  # ... completing this
        ports = (self.hbm, self.vmem)
        for s, port in enumerate(ports):
            w = line_words[s]
            m.d.comb += [
                port.req.valid.eq(req.valid & (req.space == s)),
                port.req.payload.addr.eq(req.line),
                port.req.payload.write.eq(1),
                port.req.payload.data.as_value().eq(req.data[:WORD_BITS * w]),
                port.req.payload.mask.eq(req.mask[:w]),
                port.resp.ready.eq(1),
            ]
        accepted = Signal()
        m.d.comb += accepted.eq(req.valid & Mux(req.space, self.vmem.req.ready,
                                                   self.hbm.req.ready))
        req_free = ~req.valid | accepted
        # A packet's last write may be issued while its flag add has room in the queue.
        room = landed.level + (req.valid & req.last) < LANDED

        # ---- one word a cycle.
        at_route, at_target, at_data = equals(k, 0), k == 1, k >= 2
        last_word = k + 1 == total
        ends_flit = lane == fw - 1 if fw > 1 else Const(1)
        line_write = last_word | line_full
        use = Signal()                           # this word is used this cycle
        bad = Signal()
        m.d.comb += [
            bad.eq((at_route & route_bad) | (at_target & target_bad)),
            use.eq(valid & (at_route | (at_target & (is_write | target_bad
                                                     | (~req.valid & landed.i.ready)))
                            | (at_data & (~line_write | (req_free & (~last_word | room)))))),
        ]
        taken = Signal()                         # the flit is taken this cycle
        m.d.comb += [
            taken.eq((self.flits.valid & dropping)
                     | (use & (bad | ends_flit | (at_target & ~is_write)
                               | (at_data & last_word)))),
            self.flits.ready.eq(taken),
        ]
        with m.If(self.flits.valid & dropping):
            m.d.sync += drop.eq(drop - 1)
        with m.If(use):
            if fw > 1:
                m.d.sync += lane.eq(Mux(taken, 0, lane + 1))
            with m.If(bad):
                m.d.sync += [k.eq(0), self.malformed.eq(self.malformed + 1)]
                # The flits after this one; a zero length counts as one flit.
                flit_now = 1 if fw == 1 else 0
                m.d.sync += drop.eq(Mux(at_route, Mux(route.length.any(), route.length - 1, 0),
                                        length - 1 - flit_now))
            with m.Elif(at_route):
                m.d.sync += [k.eq(1), length.eq(route.length), total.eq(route_words),
                             is_write.eq(route.opcode == OPCODES["write"])]
            with m.Elif(at_target):
                m.d.sync += [flag.eq(target.flag), space.eq(target.space),
                             cursor.eq(target.address), line_mask.eq(0)]
                m.d.sync += k.eq(Mux(is_write, 2, 0))
            with m.Else():
                m.d.sync += [k.eq(Mux(last_word, 0, k + 1)), cursor.eq(cursor + 1)]
                with m.If(line_write):
                    m.d.sync += line_mask.eq(0)
                with m.Else():
                    m.d.sync += [line_data.eq(merged_data), line_mask.eq(merged_mask)]

        flag_add_packet = use & at_target & ~target_bad & ~is_write
        issue = use & at_data & line_write
        with m.If(accepted):
            m.d.sync += req.valid.eq(0)
        with m.If(issue):
            m.d.sync += [req.valid.eq(1), req.space.eq(space),
                         req.line.eq(Mux(space, cursor >> shifts[1], cursor >> shifts[0])),
                         req.data.eq(merged_data), req.mask.eq(merged_mask),
                         req.last.eq(last_word),
                         req.add.flag.eq(flag), req.add.amount.eq(data_words)]
        landing = landed.i.payload
        m.d.comb += [
            landing.flag.eq(Mux(flag_add_packet, target.flag, req.add.flag)),
            landing.amount.eq(Mux(flag_add_packet, target.address, req.add.amount)),
            landed.i.valid.eq(flag_add_packet | (accepted & req.last)),
        ]
        with m.If(landed.i.valid):
            m.d.sync += self.packets.eq(self.packets + 1)
        m.d.comb += self.idle.eq(at_route & ~dropping & ~req.valid & ~landed.level.any())
        return m
