"""Per-lane delay lines with a shared clock enable: the systolic array's skew and de-skew."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["SkewBuffer"]


class SkewBuffer(wiring.Component):
    """Delays lane ``i`` of a multi-lane word by ``delays[i]`` enabled cycles.

    A lane with delay 1 is a register; a longer one is a ring buffer of that
    depth: each enabled cycle writes the input at the pointer and reads the
    oldest entry, the next one, into the read port's register, which then
    holds the value written ``depth`` enabled cycles earlier. A ring costs one
    memory and a pointer instead of ``depth`` registers, which keeps the
    128x128 array's skew (hundreds of thousands of bits) cheap to elaborate,
    and its registered read lets an FPGA put a long ring in block RAM.

    Parameters
    ----------
    width : int
        Bits per lane.
    delays : sequence of int
        Delay of each lane in cycles (0 passes the lane through).

    Ports
    -----
    en : In(1)
        Clock enable: when low every lane holds.
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
        for lane, delay in enumerate(self.delays):
            if delay == 0:
                m.d.comb += self.o[lane].eq(self.i[lane])
            elif delay == 1:
                reg = Signal(self.width, name=f"lane{lane}", reset_less=True)
                with m.If(self.en):
                    m.d.sync += reg.eq(self.i[lane])
                m.d.comb += self.o[lane].eq(reg)
            else:
                # Never the same address for read and write, so no read/write
                # collision logic is needed (no_rw_check), and an FPGA can use
                # block RAM, whose reads are registered.
                m.submodules[f"lane{lane}"] = ring = Memory(
                    shape=self.width, depth=delay, init=[], attrs={"no_rw_check": 1})
                pointer = Signal(range(delay), name=f"lane{lane}_ptr")
                oldest = Signal(range(delay), name=f"lane{lane}_oldest")
                write, read = ring.write_port(), ring.read_port()
                m.d.comb += [
                    oldest.eq(Mux(pointer == delay - 1, 0, pointer + 1)),
                    write.addr.eq(pointer), write.data.eq(self.i[lane]), write.en.eq(self.en),
                    read.addr.eq(oldest), read.en.eq(self.en),
                    self.o[lane].eq(read.data),
                ]
                with m.If(self.en):
                    m.d.sync += pointer.eq(oldest)
        return m
