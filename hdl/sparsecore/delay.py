"""Clock-enabled delay lines, to carry values beside a pipelined arithmetic core."""

from amaranth.hdl import Mux, Shape, Signal, Value
from amaranth.lib.memory import Memory

__all__ = ["delayed"]


def delayed(m, value, cycles, *, en, name):
    """``value`` as it was ``cycles`` enabled cycles ago: a delay line that advances when ``en``.

    Zero cycles is ``value`` itself; one is a register; longer lines are a ring in a
    memory (one write and one read a cycle instead of a shift through every stage,
    which maps to distributed RAM on an FPGA and keeps simulators fast). Every line
    holds while ``en`` is low. Returns a signal of ``value``'s shape; the line's
    contents before it has been filled are zero.
    """
    shape = value.shape()
    if cycles == 0:
        return value
    out = Signal(shape, name=name)
    if cycles == 1:
        with m.If(en):
            m.d.sync += out.eq(value)
        return out
    width = Shape.cast(shape).width
    # Written at `pointer`, read at `pointer + 1`: the oldest entry, written `cycles - 1`
    # advances before the read, lands in the read register on the same edge as the
    # `cycles`-th advance since it was written.
    m.submodules[f"{name}_ring"] = ring = Memory(shape=width, depth=cycles, init=[])
    write, read = ring.write_port(), ring.read_port()
    pointer = Signal(range(cycles), name=f"{name}_ptr")
    following = Mux(pointer == cycles - 1, 0, pointer + 1)
    m.d.comb += [
        write.addr.eq(pointer), write.data.eq(Value.cast(value)), write.en.eq(en),
        read.addr.eq(following), read.en.eq(en),
        Value.cast(out).eq(read.data),
    ]
    with m.If(en):
        m.d.sync += pointer.eq(following)
    return out
