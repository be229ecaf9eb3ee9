"""The ICI link: its signature (flits one way, credits the other) and a pipeline model of
a link's latency."""

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int
from .layouts import MAX_VCS, flit_layout

__all__ = ["LinkSignature", "Link"]


def _check_link_params(vcs, flit_words):
    check_int("vcs", vcs, least=1, most=MAX_VCS)
    flit_layout(flit_words)


class LinkSignature(wiring.Signature):
    """One direction of an ICI link, as the sender sees it.

    Flow control is credit based: the sender holds one credit per free flit slot of each
    VC buffer at the receiver, spends one per flit, and gets it back on ``credit`` when
    the receiver frees the slot. There is no ``ready``: a flit sent without a credit is a
    protocol error.

    Parameters
    ----------
    vcs : int
        Virtual channels, 1 to 8.
    flit_words : int
        Words per flit, 1 to 8.

    Members
    -------
    valid : Out(1)
        A flit is on the link this cycle.
    vc : Out(unsigned(max(1, ceil(log2(vcs)))))
        Its VC (one bit even for a single VC).
    data : Out(flit_layout(flit_words))
        The flit; word 0 of a header flit is the route word.
    credit : In(vcs)
        Bit ``v`` high: one slot of VC ``v``'s buffer was freed. Several VCs can return a
        credit in the same cycle; one VC returns at most one per cycle.
    """

    def __init__(self, *, vcs, flit_words=1):
        _check_link_params(vcs, flit_words)
        self.vcs, self.flit_words = vcs, flit_words
        super().__init__({
            "valid": Out(1),
            "vc": Out(unsigned(max(1, (vcs - 1).bit_length()))),
            "data": Out(flit_layout(flit_words)),
            "credit": In(vcs),
        })

    # Compared by parameters, as amaranth's own stream.Signature is: two links built
    # alike connect, and a signature can key a dict.
    def __eq__(self, other):
        return (type(other) is type(self) and other.vcs == self.vcs
                and other.flit_words == self.flit_words)

    def __hash__(self):
        return hash((type(self), self.vcs, self.flit_words))

    def __repr__(self):
        return f"LinkSignature(vcs={self.vcs}, flit_words={self.flit_words})"


class Link(wiring.Component):
    """A link of ``latency`` cycles each way: a register pipeline for flits and for credits.

    Parameters
    ----------
    vcs, flit_words : int
        As :class:`LinkSignature`.
    latency : int
        Cycles from ``tx`` to ``rx`` for a flit and from ``rx`` to ``tx`` for a credit, at
        least 0 (0 is a wire).

    Ports
    -----
    tx : In(LinkSignature)
        Joins the sending router's output port.
    rx : Out(LinkSignature)
        Joins the receiving router's input port.

    Latency ``latency`` cycles each way; throughput one flit (and one credit per VC) per
    cycle. A link never stalls and never drops, duplicates or reorders anything.
    """

    def __init__(self, *, vcs, flit_words=1, latency=2):
        _check_link_params(vcs, flit_words)
        check_int("latency", latency, least=0)
        self.vcs, self.flit_words, self.latency = vcs, flit_words, latency
        sig = LinkSignature(vcs=vcs, flit_words=flit_words)
        super().__init__({"tx": In(sig), "rx": Out(sig)})

    def elaborate(self, platform):
        m = Module()
        valid, vc, data, credit = self.tx.valid, self.tx.vc, self.tx.data, self.rx.credit
        for stage in range(self.latency):
            # Only valid and credit need a reset: a flit's fields are don't-cares unless
            # valid, so they can sit in reset-less (cheaper) registers.
            nxt = (Signal(name=f"valid{stage}"),
                   Signal.like(vc, name=f"vc{stage}", reset_less=True),
                   Signal(32 * self.flit_words, name=f"data{stage}", reset_less=True),
                   Signal.like(credit, name=f"credit{stage}"))
            m.d.sync += [nxt[0].eq(valid), nxt[1].eq(vc), nxt[2].eq(data),
                         nxt[3].eq(credit)]
            valid, vc, data, credit = nxt
        m.d.comb += [self.rx.valid.eq(valid), self.rx.vc.eq(vc), self.rx.data.eq(data),
                     self.tx.credit.eq(credit)]
        return m
