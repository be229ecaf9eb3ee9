"""The host bridge of a board: LiteX UARTBone frames on a UART, onto a word bus."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int
from ..lib.stream_queue import StreamQueue
from .uart import UartRx, UartTx

__all__ = ["Command", "WordRequest", "word_bus_signature", "UartBridge"]


class Command(enum.Enum, shape=8):
    """The command byte that opens a UARTBone frame."""
    WRITE = 0x01        # a burst of words to consecutive word addresses
    READ = 0x02         # a burst of words read from consecutive word addresses


class _State(enum.Enum, shape=4):
    # (From 1: Yosys writes a comparison with 0 as `!state`, which Verilator's lint takes
    # for a width error.)
    COMMAND = 1
    LENGTH = 2
    ADDRESS = 3
    WRITE_DATA = 4
    WRITE_REQUEST = 5
    READ_REQUEST = 6
    READ_RESPONSE = 7
    READ_SEND = 8
    DROP = 9


#: A word bus request: a 32-bit word address, read or write, and the word written.
WordRequest = data.StructLayout({"addr": 32, "write": 1, "data": 32})


def word_bus_signature():
    """The word bus a host bridge drives (the initiator's side: flip it for a target).

    Members
    -------
    request : Out(stream.Signature(WordRequest))
        Reads and writes of one 32-bit word at a word address, in order. A write
        has no answer (it is posted); a read has one.
    response : In(stream.Signature(32))
        The words read, one per read request, in the order of the requests.
    """
    return wiring.Signature({
        "request": Out(stream.Signature(WordRequest)),
        "response": In(stream.Signature(32)),
    })


class UartBridge(wiring.Component):
    """A host bridge on a UART, framed as LiteX UARTBone (``litex_server --uart``).

    A frame is a command byte (:class:`Command`: ``0x01`` write burst or ``0x02``
    read burst), a length byte (words, 1 to 255), a 4-byte big-endian word address,
    then, for a write, the words, each 4 bytes big-endian. A write burst writes its
    words to consecutive word addresses, each as soon as its fourth byte arrives; a
    read burst answers its words, big-endian, on ``tx``, with nothing before or
    after them.

    The received bytes wait in a queue of ``rx_depth`` bytes, so a host may send the
    next frames while a read is answered, up to ``rx_depth`` bytes ahead (a host
    such as ``litex_server`` waits for each answer). A byte lost beyond that, or one
    whose stop bit is low, adds one to ``errors``, and its frame then ends as a
    malformed or timed-out one.

    A malformed frame (another command byte, or a length of 0) is dropped: it adds
    one to ``errors``, and every byte until the line has been idle for ``timeout``
    cycles is discarded, since the frame's end cannot be known. A frame left half
    received (idle for ``timeout`` cycles after its command byte, before its last
    byte) is abandoned and adds one to ``timeouts``: the words of a write burst
    already complete stay written, a partial word is not. Either way the next byte
    after the idle time starts a new frame, so the bridge never wedges on what the
    host sends. (It does wait for the target: a read holds the bridge until
    ``bus.response`` answers it, as a target must.)

    Parameters
    ----------
    divisor : int
        Clock cycles per UART bit, at least 4: the clock over the baud rate
        (default 434: 50 MHz at 115,200 baud, ``litex_server``'s default rate).
    timeout : int
        Idle clock cycles that end a half-received or dropped frame; at least 11 bit
        times, more than a byte (default 5,000,000: 100 ms at 50 MHz).
    rx_depth : int
        Bytes the receive queue holds, at least 2 (default 16).

    Ports
    -----
    rx : In(1)
        The UART line from the host (asynchronous, high when idle).
    tx : Out(1)
        The UART line to the host (a register, high when idle).
    bus : Out(word_bus_signature())
        The word bus: the requests the frames make and the read responses.
    errors : Out(32)
        Malformed frames dropped, and bytes lost by the receiver, since reset.
    timeouts : Out(32)
        Frames abandoned half received since reset.
    busy : Out(1)
        Inside a frame: from its command byte to its end (or its timeout).

    Latency: a write reaches ``bus.request`` the cycle after its last byte leaves the
    receiver; a read's request goes out the cycle after the address's last byte, and
    its first byte starts on ``tx`` two cycles after its response. Throughput: the
    UART's, one byte per 10 bit times each way; the bus sees a word per 4 bytes.
    """

    def __init__(self, *, divisor=434, timeout=5_000_000, rx_depth=16):
        self.divisor = check_int("divisor", divisor, least=4)
        self.timeout = check_int("timeout", timeout, least=11 * self.divisor)
        self.rx_depth = check_int("rx_depth", rx_depth, least=2)
        super().__init__({
            "rx": In(1, init=1),
            "tx": Out(1, init=1),
            "bus": Out(word_bus_signature()),
            "errors": Out(32),
            "timeouts": Out(32),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.uart_rx = uart_rx = UartRx(divisor=self.divisor)
        m.submodules.uart_tx = uart_tx = UartTx(divisor=self.divisor)
        m.submodules.rx_queue = rx_queue = StreamQueue(shape=8, depth=self.rx_depth)
        m.d.comb += [uart_rx.rx.eq(self.rx), self.tx.eq(uart_tx.tx)]
        wiring.connect(m, uart_rx.data, rx_queue.i)
        byte = rx_queue.o
        malformed = Signal()            # a frame is dropped this cycle
        m.d.sync += self.errors.eq(self.errors + malformed
                                   + (uart_rx.overrun | uart_rx.framing_error))
        request, response = self.bus.request, self.bus.response

        is_write = Signal()
        length = Signal(8)              # words still to move
        addr = Signal(32)
        word = Signal(32)               # a word being received or sent, MSB first
        index = Signal(2)               # its byte
        idle = Signal(range(self.timeout))
        take = Signal()                 # a byte is taken from the receiver this cycle
        m.d.comb += take.eq(byte.valid & byte.ready)

        # (An If chain on an enum, not an FSM or a Switch: Verilog without incomplete cases.)
        state = Signal(_State, init=_State.COMMAND)

        def goto(next_state):
            m.d.sync += state.eq(next_state)

        def watch(*, counted):
            # Inside a frame: a byte restarts the idle count, the timeout ends the frame.
            m.d.comb += byte.ready.eq(1)
            with m.If(take):
                m.d.sync += idle.eq(0)
            with m.Elif(idle == self.timeout - 1):
                m.d.sync += idle.eq(0)
                if counted:
                    m.d.sync += self.timeouts.eq(self.timeouts + 1)
                goto(_State.COMMAND)
            with m.Else():
                m.d.sync += idle.eq(idle + 1)

        m.d.comb += request.payload.addr.eq(addr)
        last_word = length == 1
        with m.If(state == _State.COMMAND):
            m.d.comb += byte.ready.eq(1)
            m.d.sync += idle.eq(0)
            with m.If(take):
                m.d.sync += is_write.eq(byte.payload == Command.WRITE)
                with m.If((byte.payload == Command.WRITE) | (byte.payload == Command.READ)):
                    goto(_State.LENGTH)
                with m.Else():
                    m.d.comb += malformed.eq(1)
                    goto(_State.DROP)
        with m.Elif(state == _State.LENGTH):
            watch(counted=True)
            with m.If(take):
                m.d.sync += [length.eq(byte.payload), index.eq(0)]
                with m.If(byte.payload.any()):
                    goto(_State.ADDRESS)
                with m.Else():
                    m.d.comb += malformed.eq(1)
                    goto(_State.DROP)
        with m.Elif(state == _State.ADDRESS):
            watch(counted=True)
            with m.If(take):
                m.d.sync += [addr.eq(addr << 8 | byte.payload), index.eq(index + 1)]
                with m.If(index == 3):
                    goto(_State.WRITE_DATA)
                    with m.If(~is_write):
                        goto(_State.READ_REQUEST)
        with m.Elif(state == _State.WRITE_DATA):
            watch(counted=True)
            with m.If(take):
                m.d.sync += [word.eq(word << 8 | byte.payload), index.eq(index + 1)]
                with m.If(index == 3):
                    goto(_State.WRITE_REQUEST)
        with m.Elif(state == _State.WRITE_REQUEST):
            m.d.comb += [request.valid.eq(1), request.payload.write.eq(1),
                         request.payload.data.eq(word)]
            with m.If(request.ready):
                m.d.sync += [addr.eq(addr + 1), length.eq(length - 1), idle.eq(0)]
                goto(_State.WRITE_DATA)
                with m.If(last_word):
                    goto(_State.COMMAND)
        with m.Elif(state == _State.READ_REQUEST):
            m.d.comb += request.valid.eq(1)
            with m.If(request.ready):
                goto(_State.READ_RESPONSE)
        with m.Elif(state == _State.READ_RESPONSE):
            m.d.comb += response.ready.eq(1)
            with m.If(response.valid):
                m.d.sync += [word.eq(response.payload), index.eq(0)]
                goto(_State.READ_SEND)
        with m.Elif(state == _State.READ_SEND):
            m.d.comb += [uart_tx.data.valid.eq(1), uart_tx.data.payload.eq(word[24:])]
            with m.If(uart_tx.data.ready):
                m.d.sync += [word.eq(word << 8), index.eq(index + 1)]
                with m.If(index == 3):
                    m.d.sync += [addr.eq(addr + 1), length.eq(length - 1)]
                    goto(_State.READ_REQUEST)
                    with m.If(last_word):
                        goto(_State.COMMAND)
        with m.Else():                   # DROP: every byte until the line idles
            watch(counted=False)
        m.d.comb += self.busy.eq(state != _State.COMMAND)
        return m
