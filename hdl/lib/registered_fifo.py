"""A wide synchronous FIFO split into lanes, each with its own copy of the control."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .params import check_int

__all__ = ["RegisteredFIFO"]


class RegisteredFIFO(wiring.Component):
    """A FIFO of ``lanes x width`` bits whose control is registered and replicated per lane.

    Each lane is a FIFO of its own, ``width`` bits wide: a memory of
    ``depth - 1`` entries (asynchronous read, so an FPGA maps it to
    distributed RAM) in front of an output register. Every lane keeps its
    own copy of the control (memory count, "memory not empty", output valid,
    "room for a write", read and write pointers), and one more copy, without
    data, drives ``r_stream.valid`` and ``w_stream.ready``. All copies see the
    same inputs and so hold the same state; each drives only its own lane, so
    a wide FIFO can sit in pieces beside its producers and consumers instead
    of pulling one set of control flip-flops across the die, and no control
    net fans out to more than one lane's ``width`` bits. (The copies are
    separate state machines, each fed back from its own registers, so
    synthesis does not merge them.)

    The decisions are registers, computed a cycle ahead: "memory not empty",
    "output valid" and "room" (``w_stream.ready``). So the only combinational
    paths from a port are: ``r_stream.ready`` through one gate per lane, with
    the lane's output valid and not-empty registers, to that lane's output
    register enable and read pointer; and ``w_stream.valid`` through one gate
    per lane, with its room register, to that lane's memory write enable and
    write pointer.

    Parameters
    ----------
    width : int
        Bits per lane.
    depth : int
        Entries the FIFO holds, at least 2: ``depth - 1`` in memory and one
        in the output registers.
    lanes : int
        Number of lanes (default 1).

    Ports
    -----
    w_stream : In(stream.Signature(ArrayLayout(width, lanes)))
        Writes. ``ready`` is a register: high while fewer than ``depth``
        entries are held; it does not depend on ``r_stream`` in the same
        cycle, so a read does not make room for a write until the next one.
    r_stream : Out(stream.Signature(ArrayLayout(width, lanes)))
        Reads, in write order. ``valid`` and ``payload`` are registers.

    Latency: two cycles from a write accepted into an empty FIFO to its
    ``r_stream.valid``. Throughput: one write and one read a cycle with
    ``depth >= 3`` (an entry read every cycle keeps one in memory and one in
    the output registers). Stall rules: a beat is taken only with ``valid``
    and ``ready`` both high; while ``r_stream.ready`` is low the output holds,
    and writes continue until the FIFO holds ``depth`` entries. Nothing is
    lost, duplicated or reordered.
    """

    def __init__(self, *, width, depth, lanes=1):
        check_int("width", width, least=1)
        check_int("depth", depth, least=2)
        check_int("lanes", lanes, least=1)
        self.width, self.depth, self.lanes = width, depth, lanes
        layout = data.ArrayLayout(width, lanes)
        super().__init__({
            "w_stream": In(stream.Signature(layout)),
            "r_stream": Out(stream.Signature(layout)),
        })

    def _control(self, m, name):
        """One copy of the control; returns its (write, pop, valid, room) signals.

        ``write``: a beat is written into memory this cycle. ``pop``: the
        output registers load the oldest memory entry this cycle. ``valid``:
        the output registers hold an entry. ``room``: fewer than ``depth``
        entries are held.
        """
        mem_depth = self.depth - 1
        count = Signal(range(mem_depth + 1), name=f"{name}_count")   # entries in memory
        nonempty = Signal(name=f"{name}_nonempty")                   # count != 0
        valid = Signal(name=f"{name}_valid")
        room = Signal(init=1, name=f"{name}_room")                   # count + valid < depth
        write = Signal(name=f"{name}_write")
        pop = Signal(name=f"{name}_pop")
        m.d.comb += [
            write.eq(self.w_stream.valid & room),
            pop.eq(nonempty & (~valid | self.r_stream.ready)),
        ]
        count_next = Signal.like(count, name=f"{name}_count_next")
        valid_next = Signal(name=f"{name}_valid_next")
        m.d.comb += [
            count_next.eq(count + write - pop),
            valid_next.eq(nonempty | (valid & ~self.r_stream.ready)),
        ]
        m.d.sync += [
            count.eq(count_next),
            valid.eq(valid_next),
            nonempty.eq(count_next != 0),
            room.eq(count_next + valid_next < self.depth),
        ]
        return write, pop, valid, room

    def elaborate(self, platform):
        m = Module()
        mem_depth = self.depth - 1

        def advanced(pointer):
            if mem_depth & (mem_depth - 1) == 0:    # a power of two wraps by itself
                return pointer + 1
            return Mux(pointer == mem_depth - 1, 0, pointer + 1)

        _write, _pop, valid, room = self._control(m, "port")
        m.d.comb += [self.r_stream.valid.eq(valid), self.w_stream.ready.eq(room)]

        for lane in range(self.lanes):
            write, pop, _valid, _room = self._control(m, f"lane{lane}")
            m.submodules[f"lane{lane}_mem"] = mem = Memory(
                shape=self.width, depth=mem_depth, init=[])
            w_port, r_port = mem.write_port(), mem.read_port(domain="comb")
            w_ptr = Signal(range(mem_depth), name=f"lane{lane}_w_ptr")
            r_ptr = Signal(range(mem_depth), name=f"lane{lane}_r_ptr")
            out = Signal(self.width, name=f"lane{lane}_out", reset_less=True)
            m.d.comb += [
                w_port.addr.eq(w_ptr), w_port.data.eq(self.w_stream.payload[lane]),
                w_port.en.eq(write),
                r_port.addr.eq(r_ptr),
                self.r_stream.payload[lane].eq(out),
            ]
            with m.If(write):
                m.d.sync += w_ptr.eq(advanced(w_ptr))
            with m.If(pop):
                m.d.sync += [r_ptr.eq(advanced(r_ptr)), out.eq(r_port.data)]
        return m
