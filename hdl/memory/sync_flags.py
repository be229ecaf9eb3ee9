"""Sync flags: a bank of 32-bit counters that DMAs add to and the core sets and waits on."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int
from .layouts import FLAG_BITS, flag_add_layout, flag_set_layout, flag_wait_layout

__all__ = ["SyncFlags"]


class SyncFlags(wiring.Component):
    """``n_flags`` 32-bit counters (SPEC section 4.3).

    Parameters
    ----------
    n_flags : int
        Flags in the bank, 1 to ``2**FLAG_BITS`` (default 16).
    add_ports : int
        Add ports, 1 to 8 (default 1): ``add``, ``add1``, ``add2``, ...

    Ports
    -----
    add : In(stream.Signature(flag_add_layout))
        From the DMA on completion: ``flags[flag] += amount`` (wrapping). Always ready.
    add1, add2, ... : In(stream.Signature(flag_add_layout))
        More adders (a DMA's sent flags, a receive engine), like ``add``: adds to one flag
        in one cycle all apply.
    set : In(stream.Signature(flag_set_layout))
        From the core: ``flags[flag] = value`` (a clear is a set of 0). Always ready. An add
        to the same flag in the same cycle is applied on top: ``value + amount``.
    wait : In(stream.Signature(flag_wait_layout))
        From the core: a blocking wait, accepted (``ready``) in the first cycle in which
        ``flags[flag] >= value``, unsigned; ``ready`` depends on ``valid`` and the payload
        combinationally.
    waiting : Out(1)
        A wait is offered and not yet satisfied: the blocking wait a testbench or watchdog
        observes (the flag it waits on is ``wait.payload.flag``).
    values : Out(ArrayLayout(32, n_flags))
        Every flag's current value.

    Latency: an add or set accepted in cycle ``t`` shows in ``values`` and satisfies waits
    from cycle ``t + 1``. Operations on a flag id at or above ``n_flags`` do nothing, and a
    wait on one never completes.
    """

    def __init__(self, *, n_flags=16, add_ports=1):
        check_int("n_flags", n_flags, least=1, most=1 << FLAG_BITS)
        check_int("add_ports", add_ports, least=1, most=8)
        self.n_flags = n_flags
        self.add_names = ["add"] + [f"add{j}" for j in range(1, add_ports)]
        super().__init__({
            **{name: In(stream.Signature(flag_add_layout)) for name in self.add_names},
            "set": In(stream.Signature(flag_set_layout)),
            "wait": In(stream.Signature(flag_wait_layout)),
            "waiting": Out(1),
            "values": Out(data.ArrayLayout(32, n_flags)),
        })

    def elaborate(self, platform):
        # Expressions only, no conditional comb assignment: see hdl.memory.dma_lanes.
        m = Module()
        flags = [Signal(32, name=f"flag{i}") for i in range(self.n_flags)]
        adds = [getattr(self, name) for name in self.add_names]
        m.d.comb += [add.ready.eq(1) for add in adds]
        m.d.comb += self.set.ready.eq(1)
        met = []
        for i, flag in enumerate(flags):
            setting = self.set.valid & _is(self.set.payload.flag, i)
            value = Mux(setting, self.set.payload.value, flag)
            for add in adds:
                value = value + Mux(add.valid & _is(add.payload.flag, i), add.payload.amount, 0)
            m.d.sync += flag.eq(value[:32])
            m.d.comb += self.values[i].eq(flag)
            met.append(_is(self.wait.payload.flag, i) & (flag >= self.wait.payload.value))

        # The waited-on flag's test; an id out of range is never met.
        ok = Signal()
        m.d.comb += [ok.eq(Cat(*met).any()),
                     self.wait.ready.eq(self.wait.valid & ok),
                     self.waiting.eq(self.wait.valid & ~ok)]
        return m


def _is(value, i):
    """``value == i``, written so that the Verilog is lint-clean for 0 too."""
    return ~value.any() if i == 0 else value == i
