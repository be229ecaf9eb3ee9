"""The router's allocator: VC and switch allocation in one step, with the output VCs'
credits and wormhole ownership."""

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int
from .arbiter import RoundRobin
from .input_port import head_layout, is_value
from .layouts import MAX_VCS

__all__ = ["Allocator"]


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
    - each input picks one eligible VC, round robin; each output grants one of the
      inputs that picked it, round robin. An input's pointer moves only when its pick is
      granted, so a pick that loses is offered again (no starvation).

    A granted header takes its output VC (unless it is also the tail); a granted tail
    frees it. Credits: each output VC starts with ``buffer_flits`` (the receiving VC
    buffer's size), loses one per flit sent and gains one per ``credit`` bit.

    Parameters
    ----------
    n_in, n_out, vcs, buffer_flits : int
    n_eject : int
        Ejection outputs, at least 1 (default 1), fewer than ``n_out``.
    observe : bool
        Add the ``hold`` input and the ``starved`` output (default False: neither).

    Ports
    -----
    heads : In(head_layout).array(n_in, vcs)
    credit : In(vcs).array(n_out - n_eject)
        Returned credits of the torus outputs.
    eject_free : In(n_eject)
        Bit j: ejection output j's register can take a flit this cycle.
    grant : Out(vcs).array(n_in)
        One-hot per input: the VC that sends this cycle.
    select : Out(n_in).array(n_out)
        One-hot per output: the input it takes a flit from this cycle.
    send : Out(n_out)
    send_vc : Out(2).array(n_out)
        The output VC of each output's flit.
    credit_error : Out(1)
        Pulse: a credit came back to an output VC that already had ``buffer_flits``.
    hold : In(n_out - n_eject), with ``observe``
        Bit o: torus output o sends nothing this cycle (its heads wait as for a credit).
    starved : Out(vcs).array(n_out - n_eject), with ``observe``
        Bit w of entry o: a valid head asks for output VC (o, w), which has no credit
        left, this cycle (a credit-empty stall; ``hold`` does not count).

    All outputs are combinational from ``heads``, ``eject_free`` and the registered
    state (ownership, credits, arbiter pointers), which they update at the clock edge;
    ``credit`` counts from the next cycle. Throughput: each cycle, one flit per input and
    one per output.
    """

    def __init__(self, *, n_in, n_out, vcs, buffer_flits, n_eject=1, observe=False):
        check_int("n_in", n_in, least=1)
        check_int("n_out", n_out, least=2)
        check_int("vcs", vcs, least=1)
        check_int("buffer_flits", buffer_flits, least=1)
        check_int("n_eject", n_eject, least=1, most=n_out - 1)
        self.n_in, self.n_out, self.vcs, self.buffer_flits = n_in, n_out, vcs, buffer_flits
        self.n_eject, self.observe = n_eject, bool(observe)
        observed = {"hold": In(n_out - n_eject),
                    "starved": Out(vcs).array(n_out - n_eject)} if observe else {}
        super().__init__({
            "heads": In(head_layout).array(n_in, vcs),
            "credit": In(vcs).array(n_out - n_eject),
            "eject_free": In(n_eject),
            "grant": Out(vcs).array(n_in),
            "select": Out(n_in).array(n_out),
            "send": Out(n_out),
            "send_vc": Out(2).array(n_out),
            "credit_error": Out(1),
            **observed,
        })

    def elaborate(self, platform):
        m = Module()
        n_in, n_out, vcs, depth = self.n_in, self.n_out, self.vcs, self.buffer_flits
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

        picks = []
        for i in range(n_in):
            m.submodules[f"input{i}_arbiter"] = arb = RoundRobin(n=vcs)
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
            # The picked head; its ``valid`` is 0 when nothing is eligible.
            chosen = Signal(head_layout, name=f"pick{i}")
            m.d.comb += [arb.requests.eq(Cat(*eligible)),
                         chosen.eq(_pick(arb.grant, [self.heads[i][v] for v in range(vcs)]))]
            picks.append((arb, chosen))

        won, credit_errors = [0] * n_in, []
        for o in range(n_out):
            m.submodules[f"output{o}_arbiter"] = arb = RoundRobin(n=n_in)
            winner = Signal(head_layout, name=f"winner{o}")
            m.d.comb += [arb.requests.eq(Cat(*(c.valid & is_value(c.port, o) for _, c in picks))),
                         arb.advance.eq(1), self.select[o].eq(arb.grant),
                         winner.eq(_pick(arb.grant, [c for _, c in picks])),
                         self.send[o].eq(winner.valid), self.send_vc[o].eq(winner.vc)]
            for i in range(n_in):
                won[i] = won[i] | arb.grant[i]
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

        for i, (arb, chosen) in enumerate(picks):
            m.d.comb += [self.grant[i].eq(Mux(won[i], arb.grant, 0)),
                         arb.advance.eq(won[i])]
        m.d.comb += self.credit_error.eq(Cat(*credit_errors).any())
        if self.observe:
            for o in range(eject):
                for w in range(vcs):
                    wants = Cat(h.valid & is_value(h.port, o) & is_value(h.vc, w)
                                for row in self.heads for h in row)
                    m.d.comb += self.starved[o][w].eq(wants.any() & ~credits[o][w].any())
        return m
