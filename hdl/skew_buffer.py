"""Per-lane delay lines with a shared clock enable: the systolic array's skew and de-skew."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SkewBuffer"]


class SkewBuffer(wiring.Component):
    """Delays lane ``i`` of a multi-lane word by ``delays[i]`` enabled cycles.

    Built as a staircase: register stage ``k`` holds only the lanes whose
    delay exceeds ``k``, side by side in one wide register. That is the same
    flip-flop count as one delay line per lane, but the number of signals
    grows with the longest delay rather than with the total, which keeps
    elaboration of a 128x128 array's skew fast.

    Parameters
    ----------
    width : int
        Bits per lane.
    delays : sequence of int
        Delay of each lane in cycles (0 passes the lane through).

    Ports
    -----
    en : In(1)
        Clock enable: when low every stage holds.
    i : In(ArrayLayout(width, lanes))
    o : Out(ArrayLayout(width, lanes))
        ``o[k]`` is ``i[k]`` from ``delays[k]`` enabled cycles ago.
    """

    def __init__(self, *, width, delays):
        self.width = width
        self.delays = tuple(delays)
        if any(d < 0 for d in self.delays):
            raise ValueError(f"delays must not be negative: {self.delays}")
        layout = data.ArrayLayout(width, len(self.delays))
        super().__init__({"en": In(1), "i": In(layout), "o": Out(layout)})

    def elaborate(self, platform):
        m = Module()
        current = {lane: self.i[lane] for lane in range(len(self.delays))}
        for stage in range(max(self.delays, default=0)):
            for lane, delay in enumerate(self.delays):
                if delay == stage:
                    m.d.comb += self.o[lane].eq(current.pop(lane))
            lanes = sorted(current)
            reg = Signal(self.width * len(lanes), name=f"stage{stage}", reset_less=True)
            with m.If(self.en):
                m.d.sync += reg.eq(Cat(current[lane] for lane in lanes))
            current = {lane: reg[n * self.width:(n + 1) * self.width]
                       for n, lane in enumerate(lanes)}
        for lane in current:
            m.d.comb += self.o[lane].eq(current[lane])
        return m
