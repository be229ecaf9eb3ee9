"""A model of the link ends at every port of an OCS (``hdl.ocs.OpticalCircuitSwitch``),
as credit-based wormhole routers drive them, and its helpers: random maps and the
configuration handshake. The OCS tests (``tests/ocs``) and the ``network`` regression's
OCS case (:mod:`.ocs`) both run it in Amaranth's simulator. Expected deliveries come from
the maps the caller chose, never from the OCS."""

from collections import deque

from amaranth.hdl import Cat, Module, Signal

from hdl.ocs import STATUSES

__all__ = ["OcsCheckError", "Routers", "random_map", "send_beats"]


class OcsCheckError(AssertionError):
    """What the model saw go wrong."""


def random_map(rng, ports, *, lit=0.8):
    """A random symmetric partial permutation: ports paired at random, each pair lit with
    probability ``lit``."""
    order = rng.permutation(ports)
    m = [-1] * ports
    for a, b in zip(order[0::2], order[1::2]):
        if rng.random() < lit:
            m[a], m[b] = int(b), int(a)
    return m


async def send_beats(ctx, ocs, beats):
    """Offer the configuration beats in order, each held until taken."""
    for beat in beats:
        ctx.set(ocs.config.payload, beat)
        ctx.set(ocs.config.valid, 1)
        await ctx.tick().until(ocs.config.ready)
    ctx.set(ocs.config.valid, 0)


class Routers:
    """The link ends at every OCS port, as credit-based wormhole routers drive them.

    Sender i sends packets of 1 to ``max_len`` flits, one packet at a time, on a random
    VC, a flit only when it holds a credit of that VC, with random gaps. It believes the
    map ``view`` is in force (the routers' tables) and sends only on ports lit in it.
    While ``quiesce[i]`` is high it finishes its packet and starts no new one; it asserts
    ``idle[i]`` when quiesced, between packets, with every credit home. Receiver j holds
    ``buffer`` flits per VC and frees one slot (returning its credit) with probability
    ``drain`` per cycle, unless stalled.

    A flit is ``uid << vc_bits | vc``, uid unique over the run. Every cycle the model
    checks that each flit sent at port i comes out, in the same cycle, at ``view[i]`` and
    nowhere else, and likewise each credit returned; that no buffer overflows; and it logs
    what it saw (``log``) for the tests' timing checks.

    Simulate ``top``: it joins every port's signals into a few wide ones, because each
    testbench ``set`` settles the whole design.
    """

    def __init__(self, ocs, rng, *, buffer=4, max_len=4, send=0.8, drain=0.7):
        self.ocs, self.rng = ocs, rng
        self.n, self.vcs, self.buffer = ocs.ports, ocs.credit_width, buffer
        self.vc_bits = max(1, (self.vcs - 1).bit_length())
        if ocs.payload_width <= self.vc_bits + 8:
            raise ValueError(f"the OCS's payload_width {ocs.payload_width} leaves too few "
                             f"bits for flit ids")
        self.max_len, self.send_p, self.drain_p = max_len, send, drain
        self.view = [-1] * self.n
        self.pending = None          # a committed map, in force once quiesce falls with ok
        self.credits = [[buffer] * self.vcs for _ in range(self.n)]
        self.packet = [None] * self.n      # [vc, flits left] of the packet being sent
        self.buffers = [[deque() for _ in range(self.vcs)] for _ in range(self.n)]
        self.stalled = set()
        self.sent, self.received = {}, {}
        self.uid = 0
        self.cycle = 0
        self.log = []                # per cycle: dict of quiesce, dark, idle, sent ports
        self.stop = False
        self.top = self._flatten()

    def _flatten(self):
        ocs, n = self.ocs, self.n
        w, c = ocs.payload_width, ocs.credit_width
        m = Module()
        m.submodules.ocs = ocs
        self.valid, self.payload, self.credit = Signal(n), Signal(n * w), Signal(n * c)
        self.out_valid, self.out_payload, self.back = Signal(n), Signal(n * w), Signal(n * c)
        for i in range(n):
            m.d.comb += [ocs.ingress[i].valid.eq(self.valid[i]),
                         ocs.ingress[i].payload.eq(self.payload.word_select(i, w)),
                         ocs.egress[i].credit.eq(self.credit.word_select(i, c))]
        m.d.comb += [self.out_valid.eq(Cat(p.valid for p in ocs.egress)),
                     self.out_payload.eq(Cat(p.payload for p in ocs.egress)),
                     self.back.eq(Cat(p.credit for p in ocs.ingress))]
        return m

    def empty(self):
        return (all(p is None for p in self.packet)
                and all(not q for bufs in self.buffers for q in bufs)
                and all(c == self.buffer for cs in self.credits for c in cs))

    async def run(self, ctx):
        ocs, n = self.ocs, self.n
        was_quiesced = 0
        while not (self.stop and self.empty()):
            quiesce = ctx.get(ocs.quiesce)
            if was_quiesced & ~quiesce and self.pending is not None \
                    and STATUSES[ctx.get(ocs.status.code)] == "ok":
                self.view, self.pending = self.pending, None
            was_quiesced = quiesce
            flits, credits, idle = {}, {}, 0
            for i in range(n):
                q = (quiesce >> i) & 1
                flit = self._send(i, q)
                if flit is not None:
                    flits[i] = flit
                credit = self._drain(i)
                if credit:
                    credits[i] = credit
                if q and self.packet[i] is None and flit is None and \
                        all(c == self.buffer for c in self.credits[i]):
                    idle |= 1 << i
            w, c = ocs.payload_width, ocs.credit_width
            ctx.set(self.valid, sum(1 << i for i in flits))
            ctx.set(self.payload, sum(f << (w * i) for i, f in flits.items()))
            ctx.set(self.credit, sum(b << (c * j) for j, b in credits.items()))
            ctx.set(ocs.idle, idle)
            _, _, dark, valid, payload, back = await ctx.tick().sample(
                ocs.dark, self.out_valid, self.out_payload, self.back)
            valid = [(valid >> j) & 1 for j in range(n)]
            payload = [(payload >> (w * j)) & ((1 << w) - 1) for j in range(n)]
            credit_in = [(back >> (c * i)) & ((1 << c) - 1) for i in range(n)]
            self._check(flits, credits, valid, payload, credit_in)
            self.log.append({"quiesce": quiesce, "dark": dark, "idle": idle,
                             "sent": sorted(flits)})
            self.cycle += 1

    def _send(self, i, quiesced):
        """The flit sender i offers this cycle, or None."""
        rng = self.rng
        if self.packet[i] is None:
            if self.view[i] < 0 or quiesced or self.stop or rng.random() >= self.send_p:
                return None
            self.packet[i] = [int(rng.integers(self.vcs)), int(rng.integers(1, self.max_len + 1))]
        vc, left = self.packet[i]
        if not self.credits[i][vc] or rng.random() >= self.send_p:
            return None
        self.credits[i][vc] -= 1
        self.packet[i] = None if left == 1 else [vc, left - 1]
        uid, self.uid = self.uid, self.uid + 1
        if uid >= 1 << (self.ocs.payload_width - self.vc_bits):
            raise OcsCheckError("flit ids ran out")
        self.sent[uid] = (i, self.view[i], self.cycle)
        return uid << self.vc_bits | vc

    def _drain(self, j):
        """The credit bits receiver j returns this cycle."""
        if j in self.stalled or self.rng.random() >= self.drain_p:
            return 0
        full = [vc for vc in range(self.vcs) if self.buffers[j][vc]]
        if not full:
            return 0
        vc = full[int(self.rng.integers(len(full)))]
        self.buffers[j][vc].popleft()
        return 1 << vc

    def _check(self, flits, credits, valid, payload, credit_in):
        where = f"cycle {self.cycle}"
        want = {self.view[i]: f for i, f in flits.items()}
        got = {j: payload[j] for j in range(self.n) if valid[j]}
        if got != want:
            raise OcsCheckError(f"{where}: flits out {got}, expected {want} (sent {flits}, "
                                f"map {self.view})")
        for j, flit in got.items():
            uid, vc = flit >> self.vc_bits, flit & ((1 << self.vc_bits) - 1)
            if uid in self.received:
                raise OcsCheckError(f"{where}: flit {uid} delivered twice")
            self.received[uid] = (j, self.cycle)
            self.buffers[j][vc].append(uid)
            if len(self.buffers[j][vc]) > self.buffer:
                raise OcsCheckError(f"{where}: the buffer of port {j} VC {vc} overflowed")
        want = {self.view[j]: c for j, c in credits.items()}
        got = {i: c for i, c in enumerate(credit_in) if c}
        if got != want:
            raise OcsCheckError(f"{where}: credits back {got}, expected {want}")
        for i, c in got.items():
            for vc in range(self.vcs):
                self.credits[i][vc] += (c >> vc) & 1
                if self.credits[i][vc] > self.buffer:
                    raise OcsCheckError(f"{where}: port {i} VC {vc} over-credited")

    def lost(self):
        """Flits sent and not delivered to the partner in force, in that cycle."""
        return [uid for uid, (_, dst, cycle) in self.sent.items()
                if self.received.get(uid) != (dst, cycle)]

    def check_all_delivered(self):
        """Raise :class:`OcsCheckError` unless every flit sent was delivered, once, to the
        partner in force, in the cycle it was sent."""
        lost = self.lost()
        if lost:
            raise OcsCheckError(f"flits {lost[:10]} were sent and not delivered to the "
                                f"partner in force in their cycle")
        unsent = sorted(set(self.received) - set(self.sent))
        if unsent:
            raise OcsCheckError(f"flits {unsent[:10]} were delivered and never sent")
