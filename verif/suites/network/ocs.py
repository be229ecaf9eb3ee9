"""The ``network`` regression's OCS case: reconfiguration under traffic, on the OCS alone.

The network top configures its OCS before traffic starts, so switching under traffic is
checked here, around an :class:`hdl.ocs.OpticalCircuitSwitch` with a credit-based
wormhole sender and a receiver at every port (a model, as ``tests/ocs/harness.py``; the
OCS is small, so the Amaranth simulator runs it with the model acting every cycle,
whatever the regression's simulator). A seed draws the OCS (10 or 12 ports: not a power
of two, so that out-of-range ports and targets can be encoded), its dark cycles, a
starting map, and a shuffled deck of commits made while traffic flows:

* ``switch``: a new random map; it must be switched in (``ok``);
* ``light``: two dark ports lit (the affected links carry nothing, so they drain at once);
* ``stuck``: a new map while the receiver behind an affected link has stopped, so that
  link cannot drain; it must be refused (``timeout``) and the old map kept;
* ``self_loop``, ``asymmetric``, ``target_range``, ``port_range``: a map the OCS must
  refuse with that status before draining anything.

Checked, every cycle: every flit sent into port i comes out of the partner of i in the
map in force, in the same cycle, and nowhere else; every credit likewise; no receive
buffer overflows. At the end: every flit delivered exactly once, each commit's status as
the deck says, and the OCS's ``reconfigs``, ``refused`` and ``violations`` counters.
The statuses and the drains are sampled into ``network.ocs_commit`` and
``network.ocs_drain`` (:mod:`.coverage`).
"""

from collections import deque

import numpy as np
from amaranth.hdl import Cat, Module, Signal
from amaranth.sim import Simulator

from hdl.ocs import STATUSES, OpticalCircuitSwitch, config_beats

__all__ = ["EVENTS", "plan", "run_case"]

#: The commits of a seed, shuffled.
EVENTS = ("switch", "switch", "light", "stuck", "self_loop", "asymmetric", "target_range",
          "port_range")
BUFFER = 3
MAX_LEN = 4
DRAIN_TIMEOUT = 120


class OcsCheckError(AssertionError):
    """What the model saw go wrong."""


def _random_map(rng, ports, lit=0.8):
    order = rng.permutation(ports)
    m = [-1] * ports
    for a, b in zip(order[0::2], order[1::2]):
        if rng.random() < lit:
            m[a], m[b] = int(b), int(a)
    return m


class _Ends:
    """The link ends at every OCS port (``tests/ocs/harness.Routers``' protocol): sender i
    sends packets of 1 to ``MAX_LEN`` flits on a random VC, a flit only with a credit, on
    the ports lit in the map it believes in force (``view``); while ``quiesce[i]`` it
    finishes its packet, starts none, and says ``idle`` with every credit home. Receiver
    j frees a slot (returns a credit) with probability 0.7 a cycle unless stalled."""

    def __init__(self, ocs, rng):
        self.ocs, self.rng, self.n, self.vcs = ocs, rng, ocs.ports, ocs.credit_width
        self.vc_bits = max(1, (self.vcs - 1).bit_length())
        self.view, self.pending = [-1] * self.n, None
        self.credits = [[BUFFER] * self.vcs for _ in range(self.n)]
        self.packet = [None] * self.n
        self.buffers = [[deque() for _ in range(self.vcs)] for _ in range(self.n)]
        self.stalled, self.sent, self.received = set(), {}, {}
        self.uid = self.cycle = 0
        self.stop = False
        self.log = []                 # per cycle: (quiesce bits, ports that sent)
        m = Module()
        m.submodules.ocs = ocs
        w, c = ocs.payload_width, ocs.credit_width
        n = self.n
        self.valid, self.payload, self.credit = Signal(n), Signal(n * w), Signal(n * c)
        self.out_valid, self.out_payload, self.back = Signal(n), Signal(n * w), Signal(n * c)
        for i in range(n):
            m.d.comb += [ocs.ingress[i].valid.eq(self.valid[i]),
                         ocs.ingress[i].payload.eq(self.payload.word_select(i, w)),
                         ocs.egress[i].credit.eq(self.credit.word_select(i, c))]
        m.d.comb += [self.out_valid.eq(Cat(p.valid for p in ocs.egress)),
                     self.out_payload.eq(Cat(p.payload for p in ocs.egress)),
                     self.back.eq(Cat(p.credit for p in ocs.ingress))]
        self.top = m

    def empty(self):
        return (all(p is None for p in self.packet)
                and all(not q for bufs in self.buffers for q in bufs)
                and all(c == BUFFER for cs in self.credits for c in cs))

    async def run(self, ctx):
        ocs, n, w, c = self.ocs, self.n, self.ocs.payload_width, self.ocs.credit_width
        was = 0
        while not (self.stop and self.empty()):
            quiesce = ctx.get(ocs.quiesce)
            if was & ~quiesce and self.pending is not None \
                    and STATUSES[ctx.get(ocs.status.code)] == "ok":
                self.view, self.pending = self.pending, None
            was = quiesce
            flits, credits, idle = {}, {}, 0
            for i in range(n):
                q = quiesce >> i & 1
                flit = self._send(i, q)
                if flit is not None:
                    flits[i] = flit
                if credit := self._drain(i):
                    credits[i] = credit
                if q and self.packet[i] is None and flit is None \
                        and all(k == BUFFER for k in self.credits[i]):
                    idle |= 1 << i
            ctx.set(self.valid, sum(1 << i for i in flits))
            ctx.set(self.payload, sum(f << (w * i) for i, f in flits.items()))
            ctx.set(self.credit, sum(b << (c * j) for j, b in credits.items()))
            ctx.set(ocs.idle, idle)
            _, _, valid, payload, back = await ctx.tick().sample(
                self.out_valid, self.out_payload, self.back)
            self._check(flits, credits,
                        {j: payload >> (w * j) & ((1 << w) - 1) for j in range(n)
                         if valid >> j & 1},
                        {i: back >> (c * i) & ((1 << c) - 1) for i in range(n)
                         if back >> (c * i) & ((1 << c) - 1)})
            self.log.append((quiesce, set(flits)))
            self.cycle += 1

    def _send(self, i, quiesced):
        rng = self.rng
        if self.packet[i] is None:
            if self.view[i] < 0 or quiesced or self.stop or rng.random() >= 0.8:
                return None
            self.packet[i] = [int(rng.integers(self.vcs)), int(rng.integers(1, MAX_LEN + 1))]
        vc, left = self.packet[i]
        if not self.credits[i][vc] or rng.random() >= 0.8:
            return None
        self.credits[i][vc] -= 1
        self.packet[i] = None if left == 1 else [vc, left - 1]
        uid, self.uid = self.uid, self.uid + 1
        if uid >= 1 << (self.ocs.payload_width - self.vc_bits):
            raise OcsCheckError("flit ids ran out")
        self.sent[uid] = (i, self.view[i], self.cycle)
        return uid << self.vc_bits | vc

    def _drain(self, j):
        if j in self.stalled or self.rng.random() >= 0.7:
            return 0
        full = [vc for vc in range(self.vcs) if self.buffers[j][vc]]
        if not full:
            return 0
        vc = full[int(self.rng.integers(len(full)))]
        self.buffers[j][vc].popleft()
        return 1 << vc

    def _check(self, flits, credits, got_flits, got_credits):
        where = f"cycle {self.cycle}"
        want = {self.view[i]: f for i, f in flits.items()}
        if got_flits != want:
            raise OcsCheckError(f"{where}: flits out {got_flits}, expected {want} "
                                f"(sent {flits}, map {self.view})")
        for j, flit in got_flits.items():
            uid, vc = flit >> self.vc_bits, flit & ((1 << self.vc_bits) - 1)
            if uid in self.received:
                raise OcsCheckError(f"{where}: flit {uid} delivered twice")
            self.received[uid] = (j, self.cycle)
            self.buffers[j][vc].append(uid)
            if len(self.buffers[j][vc]) > BUFFER:
                raise OcsCheckError(f"{where}: the buffer of port {j} VC {vc} overflowed")
        want = {self.view[j]: k for j, k in credits.items()}
        if got_credits != want:
            raise OcsCheckError(f"{where}: credits back {got_credits}, expected {want}")
        for i, k in got_credits.items():
            for vc in range(self.vcs):
                self.credits[i][vc] += k >> vc & 1

    def lost(self):
        """Flits sent and not delivered to the partner in force, in that cycle."""
        return [uid for uid, (_, dst, cycle) in self.sent.items()
                if self.received.get(uid) != (dst, cycle)]


def plan(seed):
    """The OCS case of ``seed``: (ports, reconfig_cycles, start map, events, rng)."""
    rng = np.random.default_rng([seed, 0x0C5])
    ports = int(rng.choice([10, 12]))
    events = [EVENTS[k] for k in rng.permutation(len(EVENTS))]
    return ports, int(rng.integers(0, 6)), _random_map(rng, ports), events, rng


def _bad_map(kind, current, rng, ports):
    """Beats of a request the OCS must refuse with status ``kind``, over ``current``."""
    m = list(current)
    i = int(rng.integers(ports))
    if kind == "self_loop":
        if m[i] >= 0:
            m[m[i]] = -1
        m[i] = i
    elif kind == "asymmetric":
        j = int((i + 1 + rng.integers(ports - 1)) % ports)
        m[i] = j                        # j keeps (or lacks) its own partner, never i
        if current[j] == i:
            m[j] = -1
    elif kind == "target_range":
        if m[i] >= 0:                   # else the old partner, if lower, is asymmetric first
            m[m[i]] = -1
        m[i] = int(rng.integers(ports, 1 << (ports - 1).bit_length()))
    else:                               # port_range: an entry beat beyond the ports
        port = int(rng.integers(ports, 1 << (ports - 1).bit_length()))
        return [{"commit": 0, "port": port, "lit": 1, "target": 0},
                {"commit": 1, "port": 0, "lit": 0, "target": 0}]
    return config_beats(m, ports=ports, current=current)


def run_case(seed, sample=None):
    """Run the OCS case of ``seed``; returns its record (``checked`` commits and flits,
    ``mismatches``, ``first_mismatch``, ``cycles``). ``sample(item, value)`` gets the
    coverage samples: ``("commit", status)`` and ``("drain", "busy" or "idle")``."""
    ports, reconfig_cycles, start, events, rng = plan(seed)
    ocs = OpticalCircuitSwitch(ports=ports, payload_width=20, credit_width=2,
                               reconfig_cycles=reconfig_cycles, drain_timeout=DRAIN_TIMEOUT)
    ends = _Ends(ocs, rng)
    results = []                     # (event, expected status, status got)
    state = {}

    async def commit(ctx, beats, new=None):
        ends.pending = new
        for beat in beats:
            ctx.set(ocs.config.payload, beat)
            ctx.set(ocs.config.valid, 1)
            await ctx.tick().until(ocs.config.ready)
        ctx.set(ocs.config.valid, 0)
        start = ends.cycle
        await ctx.tick().until(~ocs.busy)
        await ctx.tick()             # the model takes the new map as quiesce falls
        if ends.pending is not None:  # refused: the old map stays
            ends.pending = None
        # The drain: did an affected (quiesced) port carry flits after quiesce rose?
        busy = any(q & sum(1 << p for p in sent) for q, sent in ends.log[start:])
        return STATUSES[ctx.get(ocs.status.code)], busy

    async def control(ctx):
        current = start
        status, _ = await commit(ctx, config_beats(start, ports=ports), start)
        results.append(("start", "ok", status))
        for event in events:
            await ctx.tick().repeat(int(rng.integers(10, 60)))
            if event in ("switch", "stuck", "light"):
                new = _new_map(event, current, rng, ports)
                if event == "stuck":
                    stuck = _stuck_port(current, new)
                    ends.stalled.add(stuck)
                    while not any(ends.buffers[stuck]):
                        await ctx.tick()
                status, busy = await commit(ctx, config_beats(new, ports=ports,
                                                              current=current), new)
                ends.stalled.clear()
                want = "timeout" if event == "stuck" else "ok"
                if status == "ok":
                    current = new
                if sample:
                    sample("drain", "busy" if busy else "idle")
            else:
                want = event
                status, _ = await commit(ctx, _bad_map(event, current, rng, ports))
            results.append((event, want, status))
            if sample:
                sample("commit", status)
        await ctx.tick().repeat(40)
        ends.stop = True
        while not ends.empty():
            await ctx.tick()
        state.update({name: ctx.get(getattr(ocs, name))
                      for name in ("reconfigs", "refused", "violations")})

    sim = Simulator(ends.top)
    sim.add_clock(1e-8)
    sim.add_testbench(ends.run)
    sim.add_testbench(control)
    problems = []
    try:
        sim.run()
    except OcsCheckError as error:
        problems.append(str(error))
    problems += [f"{event}: status {got}, expected {want}" for event, want, got in results
                 if got != want]
    if not problems:
        lost = ends.lost()
        if lost:
            problems.append(f"{len(lost)} flits lost or misdelivered, the first {lost[:5]}")
        ok = sum(want == "ok" for _, want, _ in results)
        want = {"reconfigs": ok, "refused": len(results) - ok, "violations": 0}
        if state != want:
            problems.append(f"OCS counters {state}, expected {want}")
    return {"case": "ocs", "checked": len(results) + len(ends.sent),
            "mismatches": len(problems),
            "first_mismatch": f"ocs seed {seed} ({ports} ports, {reconfig_cycles} dark "
                              f"cycles, events {events}): {problems[0]}" if problems else None,
            "cycles": ends.cycle, "flits": len(ends.sent), "commits": len(results)}


def _new_map(event, current, rng, ports):
    if event == "light":
        dark = [i for i in range(ports) if current[i] < 0]
        if len(dark) >= 2:
            a, b = rng.choice(dark, 2, replace=False)
            new = list(current)
            new[a], new[b] = int(b), int(a)
            return new
    while True:
        new = _random_map(rng, ports)
        if new != current and (event != "stuck" or _stuck_port(current, new) is not None):
            return new


def _stuck_port(current, new):
    """A receiver to stall so that an affected link cannot drain: a port whose entry
    changes and whose old partner sends to it (None if there is none)."""
    for i in range(len(current)):
        if current[i] != new[i] and current[i] >= 0:
            return i
    return None
