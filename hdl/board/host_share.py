"""A memory's port shared with a host: the host takes it while the chip is stopped."""

from amaranth.hdl import Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In

__all__ = ["HostShare"]


class HostShare(wiring.Component):
    """``inner`` (a memory component, such as ``hdl.memory.VMEM`` or ``hdl.memory.HBM``) with
    its port ``port`` shared between the chip and a host.

    It has every member of ``inner``'s signature, passed through, so it takes ``inner``'s
    place in the system that built it (which connects it in its ``elaborate``); other
    attributes (``words``, ``lines``, ``slots``...) are ``inner``'s. While
    ``host_select`` is high, ``host`` drives the shared port and the chip's side sees a
    port that accepts nothing; while it is low, the chip has it and ``host`` accepts
    nothing. ``host_select`` may change only while neither side has a request or a
    response in flight (the board's chip wrapper changes it, from a register, the cycle
    after the chip starts and the cycle after it has drained).

    Ports
    -----
    (``inner``'s)
    host : In(the shared port's signature)
    host_select : In(1)

    Latency and throughput: the shared port's, with no added register.
    """

    def __init__(self, inner, port):
        members = dict(inner.signature.members)
        if port not in members or members[port].flow != In or members[port].is_port:
            raise ValueError(f"port must name an In interface of {type(inner).__name__}, "
                             f"not {port!r}")
        self._inner, self._port, self._members = inner, port, {*members, "host", "host_select"}
        super().__init__(wiring.Signature({
            **members, "host": In(members[port].signature), "host_select": In(1)}))

    def __getattr__(self, name):
        # (The members are set by Component's __init__, which first checks they are absent.)
        if name.startswith("_") or name in self._members:
            raise AttributeError(name)
        return getattr(self._inner, name)

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self._inner
        for name, member in inner.signature.members.items():
            outer, original = getattr(self, name), getattr(inner, name)
            if name == self._port:
                continue
            if not member.is_port:
                wiring.connect(m, wiring.flipped(outer), original)
            elif member.flow == In:
                m.d.comb += original.eq(outer)
            else:
                m.d.comb += outer.eq(original)
        chip, host, target = getattr(self, self._port), self.host, getattr(inner, self._port)
        select = self.host_select
        m.d.comb += [
            target.req.valid.eq(Mux(select, host.req.valid, chip.req.valid)),
            target.req.payload.eq(Mux(select, host.req.payload.as_value(),
                                      chip.req.payload.as_value())),
            host.req.ready.eq(select & target.req.ready),
            chip.req.ready.eq(~select & target.req.ready),
            target.resp.ready.eq(Mux(select, host.resp.ready, chip.resp.ready)),
            host.resp.valid.eq(select & target.resp.valid),
            chip.resp.valid.eq(~select & target.resp.valid),
            host.resp.payload.eq(target.resp.payload),
            chip.resp.payload.eq(target.resp.payload),
        ]
        return m
