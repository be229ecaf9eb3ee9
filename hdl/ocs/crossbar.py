"""The optical circuit switch (SPEC section 4.5): a reconfigurable 1:1 map between link
ports that drains a link before switching it, or refuses."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int
from .config import STATUSES, Status, config_layout, entry_layout, port_bits, status_layout
from .link import OcsPortSignature
from .map_check import MapCheck

__all__ = ["OpticalCircuitSwitch", "COUNTER_BITS"]

#: Width of the event counters; they saturate rather than wrap.
COUNTER_BITS = 32


def _popcount(bits):
    """The number of set bits, as a balanced adder tree."""
    terms = list(bits)
    if not terms:
        return Const(0, 1)
    while len(terms) > 1:
        terms = [a + b for a, b in zip(terms[::2], terms[1::2])] + \
            ([terms[-1]] if len(terms) % 2 else [])
    return terms[0]


def _count(m, counter, amount):
    total = counter + amount
    limit = (1 << COUNTER_BITS) - 1
    m.d.sync += counter.eq(Mux(total > limit, limit, total))


class OpticalCircuitSwitch(wiring.Component):
    """A ``ports`` x ``ports`` circuit switch between bidirectional links.

    Every router link port (or any other link end) attaches to one OCS port i: it sends
    into ``ingress[i]`` and receives from ``egress[i]``. With the map in force, ``map[i] =
    j`` (symmetric: ``map[j] = i``), the flits sent into port i come out of port j, and the
    credits that port j's receiver returns come back to port i's sender, in the same cycle
    (the switch adds no latency or register: link latency belongs to the link)::

        egress[j].valid, .payload = ingress[i].valid, .payload
        ingress[i].credit         = egress[j].credit

    Both directions are combinational, so the link ends must drive ``valid``, ``payload``
    and ``credit`` from registers (as link pipelines do): otherwise the two directions
    could close a combinational loop through the switch.

    At reset every port is dark. A dark or unmapped port delivers nothing (valid, payload
    and credit read 0).

    Configuration (``hdl.ocs.config``): entry beats edit a staged copy of the map and a
    commit beat asks for it to be switched in. ``config`` is ready only while no commit is
    being handled (``busy`` low). A commit goes through:

    1. **Check** (at most ``ports`` + 1 cycles, :class:`MapCheck`): the staged map must be
       a symmetric partial permutation, else it is refused (``status``).
    2. **Drain** (up to ``drain_timeout`` cycles): the *affected* ports are those whose
       entry changes (a set closed under old and new partners). ``quiesce`` is raised on
       them; unaffected links flow on untouched, and so do the affected ones until they
       go dark. When every affected port asserts ``idle`` in the same cycle the switch goes
       dark; if that has not happened by the ``drain_timeout``-th cycle, the request is
       refused with ``timeout``: ``quiesce`` drops and the old map stays in force.
    3. **Dark** (exactly ``reconfig_cycles`` cycles): ``dark`` is high on the affected
       ports, which carry nothing. In the cycle after the last dark cycle the new map is
       in force and ``quiesce`` and ``dark`` are low.

    Either way the staged copy returns to the map in force and ``status`` records the
    outcome (``refused`` or ``reconfigs`` counts it). A commit that changes nothing
    quiesces no port and still takes its check and ``reconfig_cycles`` cycles.

    Drain protocol (what the attached link ends must do, for nothing to be lost):

    - While ``quiesce[i]`` is high, the sender at port i finishes the packets it has
      started (the OCS does not know packet boundaries; a wormhole packet must not be cut
      between two partners) and starts no new one. Its receiver keeps returning credits.
    - ``idle[i]`` high in a cycle promises: all credits of port i's sender are home (its
      credit counters are full, so no flit of its is in flight or buffered downstream and
      its partner owes it nothing), no flit is presented on ``ingress[i]`` in that cycle,
      and none will be while ``quiesce[i]`` stays high. ``idle`` is only looked at while
      ``quiesce`` is high. A port with nothing attached ties ``idle`` high.
    - With both ends of every affected link idle, both directions are empty and every
      credit counter is full, so a sender's credits are equally valid for its new partner
      (routers of one network share their buffer sizes).
    - The sender may start sending again in the cycle ``quiesce[i]`` falls; its flits
      then take the new map (or, after a refusal, the old one).

    A flit presented on a dark or unmapped port, or a nonzero credit returned on one, is a
    protocol violation (the sender should not have sent it): it is not delivered, and it
    is counted in ``violations`` and flagged in ``violated``, never lost silently.

    Parameters
    ----------
    ports : int
        OCS ports, at least 2 (the Palomar OCS has 136).
    payload_width : int
        Bits of a flit, at least 1.
    credit_width : int
        Bits of a credit return (typically one per VC), at least 1.
    reconfig_cycles : int
        Dark cycles of a switch, at least 0.
    drain_timeout : int
        Cycles the affected links get to drain, at least 1 (default 1024).

    Ports
    -----
    ingress : In(OcsPortSignature(...)).array(ports)
        Port i's incoming direction: flits from the sender at port i, credits back to it.
    egress : Out(OcsPortSignature(...)).array(ports)
        Port i's outgoing direction: flits to the receiver at port i, credits from it.
    config : In(stream.Signature(config_layout(ports)))
        Entry and commit beats; see above and ``hdl.ocs.config``.
    quiesce : Out(ports)
        Drain request per port (registered).
    idle : In(ports)
        Drain acknowledgement per port (protocol above).
    dark : Out(ports)
        The port is dark for reconfiguration (registered).
    busy : Out(1)
        A commit is being handled: ``config`` is not ready.
    status : Out(status_layout(ports))
        Outcome of the last commit (:class:`~hdl.ocs.config.Status`).
    reconfigs, refused, violations : Out(COUNTER_BITS)
        Commits applied; commits refused; violating flits plus credit returns. They
        saturate.
    violated : Out(ports)
        Sticky: port i has seen a violation.

    Latency zero cycles, both directions; throughput one flit and one credit return per
    port per cycle on every lit port. A commit takes the check's ``ports`` + 1 cycles at
    most, then at most ``drain_timeout`` cycles of drain and ``reconfig_cycles`` dark
    cycles.
    """

    def __init__(self, *, ports, payload_width, credit_width, reconfig_cycles,
                 drain_timeout=1024):
        self.ports = check_int("ports", ports, least=2)
        link = OcsPortSignature(payload_width=payload_width, credit_width=credit_width)
        self.payload_width, self.credit_width = payload_width, credit_width
        self.reconfig_cycles = check_int("reconfig_cycles", reconfig_cycles, least=0)
        self.drain_timeout = check_int("drain_timeout", drain_timeout, least=1)
        super().__init__({
            "ingress": In(link).array(ports),
            "egress": Out(link).array(ports),
            "config": In(stream.Signature(config_layout(ports))),
            "quiesce": Out(ports), "idle": In(ports), "dark": Out(ports),
            "busy": Out(1),
            "status": Out(status_layout(ports)),
            "reconfigs": Out(COUNTER_BITS), "refused": Out(COUNTER_BITS),
            "violations": Out(COUNTER_BITS), "violated": Out(ports),
        })

    def describe_status(self, code, port):
        """A one-line reason for a status read from ``status`` (``code``, ``port``)."""
        if not isinstance(code, int) or not 0 <= code < len(STATUSES):
            raise ValueError(f"unknown OCS status code {code!r}")
        last = self.ports - 1
        return {
            "none": "no map committed yet",
            "ok": "the map was switched in",
            "port_range": f"OCS port {port} is outside 0..{last}",
            "target_range": f"OCS port {port} maps outside 0..{last}",
            "self_loop": f"OCS port {port} maps to itself",
            "asymmetric": f"OCS port {port} maps to a port that does not map back to it: "
                          f"not a symmetric partial permutation",
            "timeout": f"OCS port {port} did not drain within {self.drain_timeout} cycles: "
                       f"nothing was switched",
        }[STATUSES[code]]

    def elaborate(self, platform):
        m = Module()
        n = self.ports
        m.submodules.check = check = MapCheck(ports=n)
        maps = data.ArrayLayout(entry_layout(n), n)
        active = Signal(maps)
        staged = Signal(maps)
        m.d.comb += check.map.eq(staged)

        is_open = self._switch(m, active)
        self._count_violations(m, is_open)

        # Affected: the ports whose entry the commit changes.
        affected, changed = Signal(n), Signal(n)
        m.d.comb += changed.eq(Cat((s.lit != a.lit) | (s.lit & (s.target != a.target))
                                   for s, a in ((staged[i], active[i]) for i in range(n))))
        # An entry beat that names a port outside the map: refused at the commit.
        bad_entry = Signal()
        bad_port = Signal(port_bits(n))
        timer = Signal(range(max(self.drain_timeout, self.reconfig_cycles, 1)))
        stuck = Signal(port_bits(n))  # lowest affected port not idle, for a timeout
        for i in reversed(range(n)):
            with m.If(affected[i] & ~self.idle[i]):
                m.d.comb += stuck.eq(i)

        def end(code, port):
            m.d.sync += [self.status.code.eq(code), self.status.port.eq(port),
                         self.quiesce.eq(0), self.dark.eq(0)]
            m.next = "idle"

        def apply():
            end(Status.OK, 0)
            m.d.sync += active.eq(staged)
            _count(m, self.reconfigs, 1)

        def refuse(code, port):
            end(code, port)
            m.d.sync += staged.eq(active)
            _count(m, self.refused, 1)

        def go_dark():
            if self.reconfig_cycles:
                m.d.sync += [self.dark.eq(affected), timer.eq(0)]
                m.next = "dark"
            else:
                apply()

        with m.FSM():
            with m.State("idle"):
                m.d.comb += self.config.ready.eq(1)
                beat = self.config.payload
                with m.If(self.config.valid & beat.commit):
                    with m.If(bad_entry):
                        refuse(Status.PORT_RANGE, bad_port)
                        m.d.sync += bad_entry.eq(0)
                    with m.Else():
                        m.d.comb += check.start.eq(1)
                        m.next = "check"
                with m.Elif(self.config.valid & (beat.port >= n)):
                    with m.If(~bad_entry):
                        m.d.sync += [bad_entry.eq(1), bad_port.eq(beat.port)]
                with m.Elif(self.config.valid):
                    # A dark entry's target is 0, so that "changed" compares entries
                    # by value. One case per port: a variable-offset write would
                    # decode every bit of the map.
                    with m.Switch(beat.port):
                        for i in range(n):
                            with m.Case(i):
                                m.d.sync += [staged[i].lit.eq(beat.lit),
                                             staged[i].target.eq(Mux(beat.lit, beat.target, 0))]
            with m.State("check"):
                with m.If(check.done):
                    with m.If(check.code == Status.OK):
                        m.d.sync += [affected.eq(changed), self.quiesce.eq(changed),
                                     timer.eq(0)]
                        m.next = "drain"
                    with m.Else():
                        refuse(check.code, check.port)
            with m.State("drain"):
                with m.If((self.idle | ~affected).all()):
                    go_dark()
                with m.Elif(timer == self.drain_timeout - 1):
                    refuse(Status.TIMEOUT, stuck)
                with m.Else():
                    m.d.sync += timer.eq(timer + 1)
            if self.reconfig_cycles:
                with m.State("dark"):
                    with m.If(timer == self.reconfig_cycles - 1):
                        apply()
                    with m.Else():
                        m.d.sync += timer.eq(timer + 1)
        m.d.comb += self.busy.eq(~self.config.ready)
        return m

    def _switch(self, m, active):
        n, w, c = self.ports, self.payload_width, self.credit_width
        # Signals rather than expressions where a value is used many times: an
        # expression is rebuilt at every use.
        is_open = Signal(n)  # lit in the map in force and not dark: carries traffic
        m.d.comb += is_open.eq(Cat(active[i].lit & ~self.dark[i] for i in range(n)))
        valids = Cat(p.valid for p in self.ingress)
        payloads = Cat(p.payload for p in self.ingress)
        credits = Cat(p.credit for p in self.egress)
        for i in range(n):
            # The map is symmetric, so port i's partner is both where its flits go and
            # where the flits it receives come from.
            partner = active[i].target
            m.d.comb += [
                self.egress[i].valid.eq(is_open[i] & valids.bit_select(partner, 1)),
                self.egress[i].payload.eq(Mux(is_open[i], payloads.word_select(partner, w), 0)),
                self.ingress[i].credit.eq(Mux(is_open[i], credits.word_select(partner, c), 0)),
            ]
        return is_open

    def _count_violations(self, m, is_open):
        lost_flits, lost_credits = Signal(self.ports), Signal(self.ports)
        m.d.comb += [lost_flits.eq(Cat(p.valid for p in self.ingress) & ~is_open),
                     lost_credits.eq(Cat(p.credit.any() for p in self.egress) & ~is_open)]
        _count(m, self.violations, _popcount(Cat(lost_flits, lost_credits)))
        m.d.sync += self.violated.eq(self.violated | lost_flits | lost_credits)
