"""The router's allocator: VC and switch allocation in one step, with the output VCs'
credits and wormhole ownership."""

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int
from .arbiter import RoundRobin
from .input_port import adaptive_head_layout, head_layout, is_value
from .layouts import MAX_VCS, VC_BITS

__all__ = ["Allocator", "leftmost_best"]


def leftmost_best(m, candidates, *, shapes, name):
    """The first of the ``(ok, key, port, vc)`` ``candidates`` whose ``ok`` is set and whose
    ``key`` no ok candidate exceeds, as ``(any ok, key, port, vc)`` signals of ``shapes``
    (the first candidate's fields when none is ok).

    The leftmost greatest is associative, so a balanced tree of two-way choices (the left
    one unless the right is ok and, the left being ok, strictly greater) gives what a scan
    in order gives, in ``ceil(log2(len(candidates)))`` comparisons deep instead of
    ``len(candidates) - 1``: the adaptive choice is the router's critical path
    (docs/fpga.md, "Router")."""
    level, depth = list(candidates), 0
    while len(level) > 1:
        merged = []
        for k in range(0, len(level) - 1, 2):
            (a_ok, a_key, *a_rest), (b_ok, b_key, *b_rest) = level[k], level[k + 1]
            right = Signal(name=f"right{name}_{depth}_{k // 2}")
            m.d.comb += right.eq(b_ok & (~a_ok | (b_key > a_key)))
            out = [Signal(shape, name=f"best{field}{name}_{depth}_{k // 2}")
                   for field, shape in zip(("ok", "key", "port", "vc"), shapes)]
            m.d.comb += out[0].eq(a_ok | b_ok)
            m.d.comb += [o.eq(Mux(right, b, a))
                         for o, a, b in zip(out[1:], [a_key, *a_rest], [b_key, *b_rest])]
            merged.append(tuple(out))
        if len(level) % 2:
            merged.append(level[-1])
        level, depth = merged, depth + 1
    return level[0]


def _pick(onehot, values):
    """The value at the set bit of ``onehot`` (0 when none): an AND-OR multiplexer."""
    out = 0
    for bit, value in zip(onehot, values):
        out = out | Mux(bit, Value.cast(value), 0)
    return out


class Allocator(wiring.Component):
    """Separable input-first allocation of ``n_in x vcs`` heads to ``n_out`` outputs.

    Outputs ``0 .. n_out-n_eject-1`` are torus ports with ``vcs`` output VCs each,
    flow-controlled by credits; the last ``n_eject`` outputs are ejection ports, one
    channel each with a ready. Routing is
    deterministic, so every head asks for one output VC and VC allocation reduces to a
    free/owned bit per output VC, checked in the same cycle as the switch:

    - a head is eligible when its output VC has a credit (eject: ``eject_free``) and,
      for a packet's header, the output VC is free; a body or tail flit is at the head of
      its buffer only after its header took the output VC, which it owns until its tail
      passes (wormhole: two packets' flits never interleave on an output VC);
    - each input (each of its VC groups, with ``speedup``) picks one eligible VC, round
      robin; each output grants one of the picks that ask for it, round robin. A group's
      pointer moves only when its pick is granted, so a pick that loses is offered again
      (no starvation).

    A granted header takes its output VC (unless it is also the tail); a granted tail
    frees it. Credits: each output VC starts with ``buffer_flits`` (the receiving VC
    buffer's size), loses one per flit sent and gains one per ``credit`` bit.

    Parameters
    ----------
    n_in, n_out, vcs, buffer_flits : int
    n_eject : int
        Ejection outputs, at least 1 (default 1), fewer than ``n_out``.
    observe : bool
        Add the ``hold`` input and the ``starved`` and ``blocked`` outputs, and with
        ``adaptive`` the ``adaptive_same``, ``adaptive_other`` and ``fallback`` outputs
        (default False: none).
    adaptive, escape_vcs, inject, escape_bias
        Adaptive routing (below): default off; escape VCs (default 2); the injection
        inputs (default none); the escape port's bias in credits, at least 0 (default
        None: ``buffer_flits``).
    cut_through : bool or None
        Virtual cut-through allocation (below) without adaptive routing: a header takes
        its (dimension-order) output VC only with credits for its whole packet; heads are
        then ``adaptive_head_layout`` (``adapt`` and ``minimal`` unused). Default None:
        as ``adaptive``, which needs it.
    keep_packets : bool
        With cut-through: a torus output stays with a packet until its tail (below);
        default False.
    speedup : int
        Switch inputs per input, 1 (default) to ``vcs``: input ``i``'s VCs are dealt to
        ``speedup`` groups (VC ``v`` to group ``v % speedup``), and each group picks and
        sends on its own, so an input sends up to ``speedup`` flits a cycle, each of
        another VC and to another output (input speed-up). 1 is one flit per input a
        cycle.

    Ports
    -----
    heads : In(head_layout).array(n_in, vcs)
    credit : In(vcs).array(n_out - n_eject)
        Returned credits of the torus outputs.
    eject_free : In(n_eject)
        Bit j: ejection output j's register can take a flit this cycle.
    grant : Out(vcs).array(n_in)
        Per input, one-hot within each VC group (with ``speedup`` 1: one-hot): the VCs
        that send this cycle.
    select : Out(n_in * speedup).array(n_out)
        One-hot per output: the switch input it takes a flit from this cycle, switch input
        ``i * speedup + g`` being input ``i``'s VC group ``g``.
    send : Out(n_out)
    send_vc : Out(VC_BITS).array(n_out)
        The output VC of each output's flit.
    credit_error : Out(1)
        Pulse: a credit came back to an output VC that already had ``buffer_flits``.
    hold : In(n_out - n_eject), with ``observe``
        Bit o: torus output o sends nothing this cycle (its heads wait as for a credit).
    starved : Out(vcs).array(n_out - n_eject), with ``observe``
        Bit w of entry o: a valid head asks for output VC (o, w), which has no credit
        left, this cycle (a credit-empty stall; ``hold`` does not count).
    adaptive_same, adaptive_other : Out(n_out - n_eject), with ``observe`` and ``adaptive``
        Bit o: a header is granted torus output o on an adaptive VC this cycle, o being
        its escape hop's port (``adaptive_same``: the dimension-order direction), or
        another of its minimal ports (``adaptive_other``).
    fallback : Out(n_out - n_eject), with ``observe`` and ``adaptive``
        Bit o: a header that arrived on an adaptive VC (a torus input's VC ``escape_vcs``
        and up) is granted its escape hop, out of torus output o, this cycle.
    blocked : Out(vcs).array(n_in), with ``observe``
        Bit v of entry i: input i's VC v has a valid head that is not eligible this cycle
        (no output VC it may take has room), as opposed to one that only lost arbitration.

    Adaptive routing (``adaptive``, with ``escape_vcs`` and the ``inject`` inputs): heads
    are ``adaptive_head_layout``, and allocation is virtual cut-through. A header whose
    ``adapt`` is high may take any torus output of its ``minimal`` ports on any VC from
    ``escape_vcs`` up, or its escape hop (``port``, ``vc``); a candidate needs its output
    VC free and credits for the whole packet (``length``), and for packets from an
    injection input for two packets when two fit (``2 * length <= buffer_flits``; the
    injection rule). The choice is by port, then VC: the output port whose VCs hold the
    most credits in all (its congestion) wins, the escape hop's port counted with
    ``escape_bias`` credits more, and on it the VC with the most credits; the escape hop
    wins ties (then the lowest port, then VC). So an idle network routes in dimension
    order, and a packet turns off it only where the dimension-order link is loaded more
    than ``escape_bias`` credits beyond another minimal one (on the same link, it takes
    the VC with more room). Comparing VCs alone turned packets onto links that other
    traffic needed whenever their dimension-order VC was busy (a permutation that
    dimension order runs at link rate, such as tornado on the 4x4, dropped to 0.75); the
    bias keeps them there against short fluctuations. The granted header's choice is
    kept per input VC, and its body flits follow it. With ``keep_packets`` a torus output
    keeps the input whose header or body flit it sent at the top of its round robin until
    that packet's tail, so a packet crosses the link back to back and other packets'
    flits only fill the cycles it has none; without, outputs turn flit by flit, which
    interleaves the packets in flight on a link (cut-through buffers hold whole packets,
    so there are several), and a next router's ejection port, which takes one packet at
    a time, gets its packet at the share of the link the others leave it. Ejection
    outputs are as without ``adaptive``.

    All outputs are combinational from ``heads``, ``eject_free`` and the registered
    state (ownership, credits, arbiter pointers), which they update at the clock edge;
    ``credit`` counts from the next cycle. Throughput: each cycle, ``speedup`` flits per
    input (each from another VC group) and one per output.
    """

    def __init__(self, *, n_in, n_out, vcs, buffer_flits, n_eject=1, observe=False,
                 adaptive=False, escape_vcs=2, inject=(), escape_bias=None,
                 keep_packets=False, speedup=1, cut_through=None):
        check_int("n_in", n_in, least=1)
        check_int("n_out", n_out, least=2)
        check_int("vcs", vcs, least=1)
        check_int("buffer_flits", buffer_flits, least=1)
        check_int("n_eject", n_eject, least=1, most=n_out - 1)
        self.n_in, self.n_out, self.vcs, self.buffer_flits = n_in, n_out, vcs, buffer_flits
        self.n_eject, self.observe = n_eject, bool(observe)
        self.adaptive, self.escape_vcs, self.inject = bool(adaptive), escape_vcs, set(inject)
        if escape_bias is None:
            escape_bias = buffer_flits
        check_int("escape_bias", escape_bias, least=0)
        self.escape_bias = escape_bias
        self.keep_packets = bool(keep_packets)
        self.speedup = check_int("speedup", speedup, least=1, most=vcs)
        self.cut_through = self.adaptive if cut_through is None else bool(cut_through)
        if self.adaptive and not self.cut_through:
            raise ValueError("adaptive allocation needs cut_through: an adaptive VC may be "
                             "taken only with room for the whole packet")
        if self.keep_packets and not self.cut_through:
            raise ValueError("keep_packets needs cut-through allocation: "
                             "wormhole outputs turn flit by flit")
        if self.adaptive:
            check_int("escape_vcs", escape_vcs, least=1, most=vcs - 1)
        observed = {"hold": In(n_out - n_eject), "starved": Out(vcs).array(n_out - n_eject),
                    "blocked": Out(vcs).array(n_in)} if observe else {}
        if observe and self.adaptive:
            observed |= {"adaptive_same": Out(n_out - n_eject),
                         "adaptive_other": Out(n_out - n_eject),
                         "fallback": Out(n_out - n_eject)}
        super().__init__({
            "heads": In(adaptive_head_layout if self.cut_through else head_layout
                        ).array(n_in, vcs),
            "credit": In(vcs).array(n_out - n_eject),
            "eject_free": In(n_eject),
            "grant": Out(vcs).array(n_in),
            "select": Out(n_in * self.speedup).array(n_out),
            "send": Out(n_out),
            "send_vc": Out(VC_BITS).array(n_out),
            "credit_error": Out(1),
            **observed,
        })

    def elaborate(self, platform):
        m = Module()
        n_out, vcs, depth = self.n_out, self.vcs, self.buffer_flits
        eject = n_out - self.n_eject   # the first ejection output
        # Per output VC: credits left, and whether a packet owns it. Eject has one VC.
        out_vcs = [vcs] * eject + [1] * self.n_eject
        credits = [[Signal(range(depth + 1), init=depth, name=f"credits{o}_{w}")
                    for w in range(out_vcs[o])] for o in range(eject)]
        owned = [[Signal(name=f"owned{o}_{w}") for w in range(out_vcs[o])]
                 for o in range(n_out)]

        # Whether output VC (o, w) can take a body flit now (a credit, or eject free),
        # and a header (also not owned).
        room = [[Signal(name=f"room{o}_{w}") for w in range(out_vcs[o])] for o in range(n_out)]
        free = [[Signal(name=f"free{o}_{w}") for w in range(out_vcs[o])] for o in range(n_out)]
        for o in range(n_out):
            for w in range(out_vcs[o]):
                if o >= eject:
                    has_room = self.eject_free[o - eject]
                elif self.observe:
                    has_room = credits[o][w].any() & ~self.hold[o]
                else:
                    has_room = credits[o][w].any()
                m.d.comb += [room[o][w].eq(has_room),
                             free[o][w].eq(room[o][w] & ~owned[o][w])]

        if self.cut_through:
            picks = self._adaptive_picks(m, credits, room, free, out_vcs, eject)
        else:
            picks = self._picks(m, room, free, out_vcs)
        self._outputs(m, picks, credits, owned, out_vcs, eject)
        return m

    def _groups(self):
        """The VCs of each switch input of an input: group ``g`` holds ``v % speedup == g``."""
        return [list(range(g, self.vcs, self.speedup)) for g in range(self.speedup)]

    def _group_picks(self, m, i, eligible, requests):
        """Input ``i``'s switch inputs: per VC group a round-robin pick among its eligible
        ``requests``; each ``(arbiter, pick, the group's VCs)``, ``valid`` 0 when none."""
        picks = []
        for g, group in enumerate(self._groups()):
            name = f"input{i}" if self.speedup == 1 else f"input{i}_{g}"
            m.submodules[f"{name}_arbiter"] = arb = RoundRobin(n=len(group))
            chosen = Signal(head_layout, name=f"pick{i}" if self.speedup == 1
                            else f"pick{i}_{g}")
            m.d.comb += [arb.requests.eq(Cat(*(eligible[v] for v in group))),
                         chosen.eq(_pick(arb.grant, [requests[v] for v in group]))]
            picks.append((arb, chosen, group))
        return picks

    def _picks(self, m, room, free, out_vcs):
        """Deterministic routing: each head asks for its own output VC."""
        n_in, n_out, vcs = self.n_in, self.n_out, self.vcs
        picks, self._eligible = [], []
        for i in range(n_in):
            eligible = []
            for v in range(vcs):
                h = self.heads[i][v]
                ok = Signal(name=f"eligible{i}_{v}")
                with m.Switch(Cat(h.vc, h.port)):
                    for o in range(n_out):
                        for w in range(out_vcs[o]):
                            with m.Case(o * MAX_VCS + w):
                                m.d.comb += ok.eq(h.valid & Mux(h.head, free[o][w],
                                                                room[o][w]))
                    with m.Default():   # no such output VC: never a valid head
                        m.d.comb += ok.eq(0)
                eligible.append(ok)
            picks.append(self._group_picks(m, i, eligible,
                                           [self.heads[i][v] for v in range(vcs)]))
            self._eligible.append(eligible)
        return picks

    def _adaptive_picks(self, m, credits, room, free, out_vcs, eject):
        """Cut-through allocation, with adaptive routing when ``adaptive`` (class
        docstring)."""
        n_in, n_out, vcs, depth = self.n_in, self.n_out, self.vcs, self.buffer_flits
        picks, self._latches, self._eligible = [], [], []
        preference = self.escape_bias
        # Per torus output: the credits of all its VCs, the port's congestion, and the same
        # with the escape hop's preference added (one adder a port, not one a candidate).
        port_credits, biased = [], []
        for o in range(eject):
            total = Signal(range(vcs * depth + 1), name=f"port_credits{o}")
            plus = Signal(range(vcs * depth + preference + 1), name=f"biased_credits{o}")
            m.d.comb += [total.eq(sum(credits[o])), plus.eq(total + preference)]
            port_credits.append(total)
            biased.append(plus)
        key_shape = (len(Signal(range(depth + 1)))
                     + len(Signal(range(vcs * depth + preference + 1))))
        for i in range(n_in):
            eligible, requests, latches = [], [], []
            for v in range(vcs):
                h = self.heads[i][v]
                # The route a granted header chose, for its body flits.
                kept_port = Signal.like(h.port, name=f"kept_port{i}_{v}")
                kept_vc = Signal(VC_BITS, name=f"kept_vc{i}_{v}")
                need = Signal(range(2 * depth + 2), name=f"need{i}_{v}")
                length = Mux(h.length > depth, depth + 1, h.length)
                if i in self.inject:
                    m.d.comb += need.eq(Mux(length <= depth // 2, length << 1, length))
                else:
                    m.d.comb += need.eq(length)
                # The escape hop (or ejection) for a header, the kept route for a body.
                want_port = Mux(h.head, h.port, kept_port)
                want_vc = Mux(h.head, h.vc, kept_vc)
                ok_direct = Signal(name=f"direct{i}_{v}")
                with m.Switch(Cat(want_vc, want_port)):
                    for o in range(n_out):
                        for w in range(out_vcs[o]):
                            with m.Case(o * MAX_VCS + w):
                                if o < eject:
                                    whole = credits[o][w] >= need
                                    m.d.comb += ok_direct.eq(Mux(h.head, free[o][w] & whole,
                                                                 room[o][w]))
                                else:
                                    m.d.comb += ok_direct.eq(Mux(h.head, free[o][w],
                                                                 room[o][w]))
                    with m.Default():
                        m.d.comb += ok_direct.eq(0)
                # The best candidate: the output port with the most credits over its VCs
                # (the escape hop's port wins a tie), then on it the VC with the most
                # credits (the escape hop's VC wins a tie). A key is the two counts side by
                # side, the port's above, so one comparison orders candidates both ways.
                escape_key = Signal(key_shape, name=f"escape_key{i}_{v}")
                escape_torus = Signal(name=f"escape_torus{i}_{v}")
                with m.Switch(Cat(h.vc, h.port)):
                    for o in range(eject):
                        for w in range(vcs):
                            with m.Case(o * MAX_VCS + w):
                                m.d.comb += [escape_key.eq(Cat(credits[o][w], biased[o])),
                                             escape_torus.eq(1)]
                candidates = [(h.head & escape_torus & ok_direct, escape_key, h.port, h.vc)]
                for o in range(eject if self.adaptive else 0):
                    for w in range(self.escape_vcs, vcs):
                        ok = h.adapt & h.minimal[o] & free[o][w] & (credits[o][w] >= need)
                        key = Cat(credits[o][w],
                                  Mux(is_value(h.port, o), biased[o], port_credits[o]))
                        candidates.append((ok, key, o, w))
                best_ok, _, best_port, best_vc = leftmost_best(
                    m, candidates, shapes=(1, key_shape, h.port.shape(), VC_BITS),
                    name=f"{i}_{v}")
                adaptive = Signal(name=f"adaptive{i}_{v}")
                m.d.comb += adaptive.eq(h.head & best_ok)      # the best of the candidates
                request = Signal(head_layout, name=f"request{i}_{v}")
                m.d.comb += [request.valid.eq(h.valid), request.head.eq(h.head),
                             request.tail.eq(h.tail),
                             request.port.eq(Mux(adaptive, best_port, want_port)),
                             request.vc.eq(Mux(adaptive, best_vc, want_vc))]
                ok = Signal(name=f"eligible{i}_{v}")
                m.d.comb += ok.eq(h.valid & (adaptive | ok_direct))
                eligible.append(ok)
                requests.append(request)
                latches.append((kept_port, kept_vc, request))
            picks.append(self._group_picks(m, i, eligible, requests))
            self._latches.append(latches)
            self._eligible.append(eligible)
        return picks

    def _outputs(self, m, picks, credits, owned, out_vcs, eject):
        """Output arbitration, grants, ownership and credits. ``picks[i]`` are input
        ``i``'s switch inputs (``_group_picks``), numbered ``i * speedup + g`` here."""
        n_out, vcs, depth = self.n_out, self.vcs, self.buffer_flits
        switch_inputs = [pick for row in picks for pick in row]
        won, credit_errors = [0] * len(switch_inputs), []
        for o in range(n_out):
            # A torus output stays with the packet it sends until its tail.
            sticky = self.keep_packets and o < eject
            m.submodules[f"output{o}_arbiter"] = arb = RoundRobin(n=len(switch_inputs),
                                                                  sticky=sticky)
            winner = Signal(head_layout, name=f"winner{o}")
            chosen = [c for _, c, _ in switch_inputs]
            m.d.comb += [arb.requests.eq(Cat(*(c.valid & is_value(c.port, o) for c in chosen))),
                         arb.advance.eq(1), self.select[o].eq(arb.grant),
                         winner.eq(_pick(arb.grant, chosen)),
                         self.send[o].eq(winner.valid), self.send_vc[o].eq(winner.vc)]
            if sticky:
                m.d.comb += arb.keep.eq(~winner.tail)
            for s in range(len(switch_inputs)):
                won[s] = won[s] | arb.grant[s]
            for w in range(out_vcs[o]):
                used = Signal(name=f"used{o}_{w}")
                m.d.comb += used.eq(winner.valid & is_value(winner.vc, w))
                with m.If(used & winner.tail):
                    m.d.sync += owned[o][w].eq(0)
                with m.Elif(used & winner.head):
                    m.d.sync += owned[o][w].eq(1)
                if o < eject:
                    back = self.credit[o][w]
                    m.d.sync += credits[o][w].eq(credits[o][w] - used + back)
                    credit_errors.append(back & ~used & (credits[o][w] == depth))

        self._won = won
        for i, row in enumerate(picks):
            bits = [0] * vcs
            for g, (arb, _, group) in enumerate(row):
                s = i * self.speedup + g
                m.d.comb += arb.advance.eq(won[s])
                for j, v in enumerate(group):
                    bits[v] = Mux(won[s], arb.grant[j], 0)
            m.d.comb += self.grant[i].eq(Cat(*bits))
            if self.cut_through:
                for v, (kept_port, kept_vc, request) in enumerate(self._latches[i]):
                    with m.If(self.grant[i][v] & request.head):
                        m.d.sync += [kept_port.eq(request.port), kept_vc.eq(request.vc)]
        m.d.comb += self.credit_error.eq(Cat(*credit_errors).any())
        if self.observe:
            for o in range(eject):
                for w in range(vcs):
                    wants = Cat(h.valid & is_value(h.port, o) & is_value(h.vc, w)
                                for row in self.heads for h in row)
                    m.d.comb += self.starved[o][w].eq(wants.any() & ~credits[o][w].any())
            for i, eligible in enumerate(self._eligible):
                m.d.comb += self.blocked[i].eq(Cat(self.heads[i][v].valid & ~ok
                                                   for v, ok in enumerate(eligible)))
            if self.adaptive:
                self._observe_choices(m, picks, eject)

    def _observe_choices(self, m, picks, eject):
        """The adaptive ``observe`` outputs (class docstring), from the granted picks."""
        same, other, fallback = ([0] * eject for _ in range(3))
        for i, row in enumerate(picks):
            heads = [self.heads[i][v] for v in range(self.vcs)]
            for g, (arb, chosen, group) in enumerate(row):
                name = f"{i}" if self.speedup == 1 else f"{i}_{g}"
                header = Signal(name=f"granted_header{name}")
                escape_port = Signal.like(heads[0].port, name=f"granted_escape_port{name}")
                from_adaptive = Signal(name=f"granted_from_adaptive{name}")
                on_adaptive = Signal(name=f"granted_on_adaptive{name}")
                m.d.comb += [header.eq(self._won[i * self.speedup + g] & chosen.valid
                                       & chosen.head),
                             escape_port.eq(_pick(arb.grant, [heads[v].port for v in group])),
                             on_adaptive.eq(chosen.vc >= self.escape_vcs)]
                adaptive_vcs = [j for j, v in enumerate(group) if v >= self.escape_vcs]
                if i in self.inject or not adaptive_vcs:
                    m.d.comb += from_adaptive.eq(0)
                else:
                    m.d.comb += from_adaptive.eq(Cat(arb.grant[j] for j in adaptive_vcs).any())
                for o in range(eject):
                    to_o = header & is_value(chosen.port, o)
                    same[o] = same[o] | (to_o & on_adaptive & is_value(escape_port, o))
                    other[o] = other[o] | (to_o & on_adaptive & ~is_value(escape_port, o))
                    fallback[o] = fallback[o] | (to_o & ~on_adaptive & from_adaptive)
        m.d.comb += [self.adaptive_same.eq(Cat(*same)), self.adaptive_other.eq(Cat(*other)),
                     self.fallback.eq(Cat(*fallback))]
