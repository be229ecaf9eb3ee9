"""An 8N1 UART: a receiver and a transmitter at a fixed divisor (clock cycles per bit)."""

from amaranth.hdl import Module, Signal
from amaranth.lib import enum, stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int

__all__ = ["UartRx", "UartTx"]

class _RxState(enum.Enum, shape=3):
    # (From 1: Yosys writes a comparison with 0 as `!state`, which Verilator's lint takes
    # for a width error.)
    IDLE = 1
    START = 2
    DATA = 3
    STOP = 4
    BREAK = 5


#: The smallest divisor: the receiver samples each bit half a bit after its edge.
MIN_DIVISOR = 4


class UartRx(wiring.Component):
    """A UART receiver: 8 data bits, least significant first, no parity, one stop bit.

    The line passes a two-flip-flop synchronizer (it comes from another clock's
    device, the host's USB bridge). A falling edge on the idle (high) line starts a
    byte; the start bit is sampled half a bit later (a shorter low pulse is a glitch
    and ignored), then each data bit and the stop bit a whole bit apart, in their
    middles, so the host's baud rate may differ from ``clock / divisor`` by a few per
    cent. A byte whose stop bit is low is dropped and pulses ``framing_error``; the
    receiver then waits for the line to go high (the end of a break) before it looks
    for the next start bit.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least 4: the clock frequency over the baud rate
        (25 MHz / 1 Mbaud is 25).

    Ports
    -----
    rx : In(1)
        The serial line, high when idle (asynchronous).
    data : Out(stream.Signature(8))
        The bytes received. ``valid`` and ``payload`` are registers, held until
        ``ready``; a byte that arrives while the previous one is still held replaces
        it and pulses ``overrun``.
    overrun, framing_error : Out(1)
        One-cycle pulses: a byte replaced one not yet taken; a stop bit was low.

    Latency: ``data.valid`` rises a few cycles (two of them the synchronizer's) after
    the middle of the stop bit at the pin, about 9.5 bit times after the start edge.
    Throughput: one byte per 10 bit times, back to back.
    """

    def __init__(self, *, divisor):
        self.divisor = check_int("divisor", divisor, least=MIN_DIVISOR)
        super().__init__({
            "rx": In(1, init=1),
            "data": Out(stream.Signature(8)),
            "overrun": Out(1),
            "framing_error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        line = Signal(init=1)
        m.submodules.sync_rx = FFSynchronizer(self.rx, line, init=1)
        count = Signal(range(self.divisor))
        bits = Signal(range(8))
        shift = Signal(8)

        with m.If(self.data.ready):
            m.d.sync += self.data.valid.eq(0)
        m.d.sync += [self.overrun.eq(0), self.framing_error.eq(0)]

        # (An If chain on an enum, not an FSM or a Switch: Verilog without incomplete cases.)
        state = Signal(_RxState, init=_RxState.IDLE)
        at_zero = ~count.any()
        with m.If(state == _RxState.IDLE):
            with m.If(~line):
                m.d.sync += [count.eq(self.divisor // 2 - 1), state.eq(_RxState.START)]
        with m.Elif(state == _RxState.START):
            m.d.sync += count.eq(count - 1)
            with m.If(at_zero):
                m.d.sync += [count.eq(self.divisor - 1), bits.eq(0),
                             state.eq(_RxState.DATA)]
                with m.If(line):                    # a glitch, not a start bit
                    m.d.sync += state.eq(_RxState.IDLE)
        with m.Elif(state == _RxState.DATA):
            m.d.sync += count.eq(count - 1)
            with m.If(at_zero):
                m.d.sync += [count.eq(self.divisor - 1), bits.eq(bits + 1),
                             shift.eq(shift >> 1 | line << 7)]
                with m.If(bits == 7):
                    m.d.sync += state.eq(_RxState.STOP)
        with m.Elif(state == _RxState.STOP):
            m.d.sync += count.eq(count - 1)
            with m.If(at_zero):
                with m.If(line):
                    m.d.sync += [self.data.payload.eq(shift), self.data.valid.eq(1),
                                 self.overrun.eq(self.data.valid & ~self.data.ready),
                                 state.eq(_RxState.IDLE)]   # wait for the next start edge
                with m.Else():
                    m.d.sync += [self.framing_error.eq(1), state.eq(_RxState.BREAK)]
        with m.Else():                           # BREAK: a low line, wait until it idles
            with m.If(line):
                m.d.sync += state.eq(_RxState.IDLE)
        return m


class UartTx(wiring.Component):
    """A UART transmitter: 8 data bits, least significant first, no parity, one stop bit.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least 4.

    Ports
    -----
    data : In(stream.Signature(8))
        The bytes to send. ``ready`` is high while the line is idle (a register).
    tx : Out(1)
        The serial line, high when idle (a register, so it has no glitches).

    Latency: the start bit begins the cycle after a byte is taken. Throughput: one
    byte per 10 bit times plus one cycle.
    """

    def __init__(self, *, divisor):
        self.divisor = check_int("divisor", divisor, least=MIN_DIVISOR)
        super().__init__({
            "data": In(stream.Signature(8)),
            "tx": Out(1, init=1),
        })

    def elaborate(self, platform):
        m = Module()
        count = Signal(range(self.divisor))
        left = Signal(range(11))                # bits still to send, the current one included
        frame = Signal(10, init=0x3FF)          # stop, data[7:0], start: the line is frame[0]
        m.d.comb += [self.data.ready.eq(~left.any()), self.tx.eq(frame[0])]
        with m.If(self.data.valid & self.data.ready):
            m.d.sync += [frame.eq(self.data.payload << 1 | 1 << 9), left.eq(10),
                         count.eq(self.divisor - 1)]
        with m.Elif(left != 0):
            m.d.sync += count.eq(count - 1)
            with m.If(~count.any()):
                m.d.sync += [count.eq(self.divisor - 1), left.eq(left - 1),
                             frame.eq(frame >> 1 | 1 << 9)]
        return m
