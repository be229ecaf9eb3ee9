"""A round-robin arbiter: one grant a cycle among ``n`` requesters, fair over time."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int

__all__ = ["RoundRobin"]


def lowest_set(value, width):
    """The lowest set bit of ``value`` alone (one-hot, or 0 when ``value`` is 0)."""
    return (value & (~value + 1))[:width]


class RoundRobin(wiring.Component):
    """Grant the first request at or after the priority pointer, cyclically.

    Parameters
    ----------
    n : int
        Requesters, at least 1.

    Ports
    -----
    requests : In(n)
    grant : Out(n)
        One-hot, or 0 when nothing is requested; combinational from ``requests``.
    advance : In(1)
        The grant was used: the pointer moves to just after the granted requester, so it
        has the lowest priority next cycle. While ``advance`` is low the pointer holds,
        so a grant that was not used is offered again.
    keep : In(1), with ``sticky``
        With ``advance``: the pointer moves to the granted requester instead, which keeps
        the highest priority next cycle (a packet's flits stay together; the others are
        granted only in the cycles it does not ask).

    Fairness: a requester that keeps requesting is granted within ``n`` advancing grants
    (with ``sticky``, within ``n`` grants without ``keep``).
    """

    def __init__(self, *, n, sticky=False):
        self.n = check_int("n", n, least=1)
        self.sticky = bool(sticky)
        super().__init__({"requests": In(n), "grant": Out(n), "advance": In(1),
                          **({"keep": In(1)} if self.sticky else {})})

    def elaborate(self, platform):
        m = Module()
        n = self.n
        if n == 1:
            m.d.comb += self.grant.eq(self.requests)
            return m
        # ``upper``: the requesters at or after the pointer, as a mask; it starts with all.
        upper = Signal(n, init=(1 << n) - 1)
        high = self.requests & upper
        m.d.comb += self.grant.eq(Mux(high.any(), lowest_set(high, n),
                                      lowest_set(self.requests, n)))
        with m.If(self.advance & self.requests.any()):
            # Strictly above the grant: ~(grant | grant - 1), within n bits; with keep, at
            # or above it: ~(grant - 1).
            above = ~(self.grant | (self.grant - 1)[:n])
            if self.sticky:
                above = Mux(self.keep, ~(self.grant - 1)[:n], above)
            m.d.sync += upper.eq(above)
        return m
