"""The board's logic apart from its pins and clock: the host bridge, its target, the LEDs;
and a simulation top that feeds it UART bytes."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int
from .proto_chip import ProtoChip
from .uart import UartRx, UartTx
from .uart_bridge import UartBridge
from .word_memory import WordMemory

__all__ = ["BoardCore", "BoardSim", "TARGETS", "make_target"]

#: The targets a board top may hold behind its bridge.
TARGETS = ("proto", "memory")


def make_target(target, *, chip=None, memory_words=4096, wait_cycles=1 << 22):
    """The component behind the bridge: ``"proto"`` the proto chip
    (:class:`~hdl.board.proto_chip.ProtoChip`, ``chip`` its parameters), ``"memory"`` a
    block-RAM word memory of ``memory_words`` (:class:`~hdl.board.word_memory.WordMemory`:
    a quick build that proves the clock, the UART and the bridge)."""
    if target == "proto":
        return ProtoChip(chip=chip, wait_cycles=wait_cycles)
    if target == "memory":
        if chip is not None:
            raise ValueError("chip= is the proto chip's; the memory target has none")
        return WordMemory(depth=memory_words)
    raise ValueError(f"target must be one of {', '.join(TARGETS)}, not {target!r}")


class BoardCore(wiring.Component):
    """The host bridge (:class:`~hdl.board.uart_bridge.UartBridge`) and its target, with
    the status LEDs: what a board top (:class:`~hdl.board.ulx3s.ULX3STop`) puts between its
    pins, and what the board's simulation runs (:class:`BoardSim`).

    Parameters
    ----------
    target : Component
        Has ``bus`` (``In(word_bus_signature())``), ``status0`` and ``status1`` (In(32):
        the bridge's error and timeout counts) and ``control`` (Out(32): bits 0 to 2 light
        the run, halt and error LEDs).
    divisor, timeout : int
        The bridge's (clock cycles per UART bit; idle cycles that end a frame).
    heartbeat : int
        Cycles of each half period of LED 7's blink (default 25,000,000: 1 Hz at 50 MHz).

    Ports
    -----
    rx : In(1)
    tx : Out(1)
        The UART lines (the host's transmit line, and its receive line).
    leds : Out(8)
        0 run, 1 halt, 2 error (a fault, or any malformed frame or timeout since reset),
        3 a frame in progress, 7 the heartbeat.
    busy : Out(1)
        A frame in progress, or the target working (the proto chip running).

    Latency and throughput: the bridge's and the target's.
    """

    def __init__(self, *, target, divisor=434, timeout=5_000_000, heartbeat=25_000_000):
        self.target = target
        self.bridge = UartBridge(divisor=divisor, timeout=timeout)
        self.heartbeat = check_int("heartbeat", heartbeat, least=1)
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "leds": Out(8),
                          "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.bridge = bridge = self.bridge
        m.submodules.target = target = self.target
        wiring.connect(m, bridge.bus, target.bus)
        m.d.comb += [bridge.rx.eq(self.rx), self.tx.eq(bridge.tx),
                     target.status0.eq(bridge.errors), target.status1.eq(bridge.timeouts)]
        beat = Signal()
        count = Signal(range(self.heartbeat))
        with m.If(count.any()):
            m.d.sync += count.eq(count - 1)
        with m.Else():
            m.d.sync += [count.eq(self.heartbeat - 1), beat.eq(~beat)]
        faulted = bridge.errors.any() | bridge.timeouts.any()
        working = getattr(target, "running", 0)
        m.d.comb += [self.leds[0].eq(target.control[0]), self.leds[1].eq(target.control[1]),
                     self.leds[2].eq(target.control[2] | faulted), self.leds[3].eq(bridge.busy),
                     self.leds[7].eq(beat), self.busy.eq(bridge.busy | working)]
        return m


class BoardSim(wiring.Component):
    """A board's logic (:class:`BoardCore` with the proto chip) and a host's UART, for whole
    runs (``sim.board``): the bytes played into ``host_tx`` go out on a UART transmitter
    at ``divisor`` to the board's ``rx``, and the board's ``tx`` comes back through a UART
    receiver as ``host_rx``. Everything in between is the board's RTL as built for the
    FPGA, at a fast divisor.

    Parameters
    ----------
    chip : str or dict
        The proto chip's configuration: a preset's name (``hdl.tensorcore.presets``;
        default ``"proto"``), or ``TensorCoreSystem`` parameters.
    divisor : int
        Clock cycles per UART bit on both sides (default 4, the least: a byte each 40
        cycles).
    timeout : int
        The bridge's idle timeout in cycles (default :attr:`TIMEOUT`, 2,000).
    wait_cycles : int
        The proto chip's longest ``WAIT`` (default ``2**22``).

    Ports
    -----
    host_tx : In(stream.Signature(9))
        Bytes from the host, in bits 0 to 7 with bit 8 clear. A beat with bit 8 set is
        the host's own act instead, by bit 7: clear, a pause, the line idle for
        ``PAUSE_CYCLES`` times bits 0 to 6 cycles (a host that stops mid-frame, for the
        bridge's timeout); set, an await, nothing more sent until the host has received
        4 times bits 0 to 6 more bytes (the answer to a read: a host such as
        ``litex_server`` waits for each, as the bridge's receive queue holds only 16
        bytes).
    host_rx : Out(stream.Signature(8))
        Bytes to the host: ``valid`` is held until taken, and a byte that arrives before
        the previous one is taken replaces it (``overruns`` counts these).
    leds : Out(8)
        The board's LEDs.
    busy : Out(1)
        A byte on either line, a frame in the bridge, a pause, or the chip running: the
        whole run's watchdog waits while it is high.
    overruns : Out(32)
        Bytes to the host lost because ``host_rx`` was not taken in time.
    """

    #: Cycles of a pause beat's unit.
    PAUSE_CYCLES = 256
    #: The bridge's idle timeout by default, in cycles: short, for simulations.
    TIMEOUT = 2_000
    #: A host_tx beat's flags: the host's own act (not a byte), and of those an await.
    CONTROL, AWAIT = 0x100, 0x80

    def __init__(self, *, chip="proto", divisor=4, timeout=TIMEOUT, wait_cycles=1 << 22):
        from ..tensorcore.presets import preset as chip_preset
        self.chip = chip
        self.divisor = check_int("divisor", divisor, least=4)
        params = chip_preset(chip) if isinstance(chip, str) else dict(chip)
        self.core = BoardCore(target=ProtoChip(chip=params, wait_cycles=wait_cycles),
                              divisor=divisor, timeout=timeout, heartbeat=1 << 16)
        super().__init__({"host_tx": In(stream.Signature(9)),
                          "host_rx": Out(stream.Signature(8)),
                          "leds": Out(8), "busy": Out(1), "overruns": Out(32)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.board = board = self.core
        m.submodules.host_uart_tx = uart_tx = UartTx(divisor=self.divisor)
        m.submodules.host_uart_rx = uart_rx = UartRx(divisor=self.divisor)
        pause = Signal(range(127 * self.PAUSE_CYCLES + 1))
        received, awaited = Signal(32), Signal(32)     # answer bytes: in, and waited for
        m.d.sync += received.eq(received + (self.host_rx.valid & self.host_rx.ready))
        beat = self.host_tx
        with m.If(pause.any()):
            m.d.sync += pause.eq(pause - 1)
        with m.Elif(awaited > received):
            pass
        with m.Elif(beat.payload[8]):
            m.d.comb += beat.ready.eq(1)
            with m.If(beat.valid & beat.payload[7]):
                m.d.sync += awaited.eq(awaited + (beat.payload[:7] << 2))
            with m.Elif(beat.valid):
                m.d.sync += pause.eq(beat.payload[:7] * self.PAUSE_CYCLES)
        with m.Else():
            m.d.comb += [uart_tx.data.valid.eq(beat.valid),
                         uart_tx.data.payload.eq(beat.payload[:8]),
                         beat.ready.eq(uart_tx.data.ready)]
        wiring.connect(m, uart_rx.data, wiring.flipped(self.host_rx))
        m.d.comb += [board.rx.eq(uart_tx.tx), uart_rx.rx.eq(board.tx),
                     self.leds.eq(board.leds)]
        m.d.sync += self.overruns.eq(self.overruns + uart_rx.overrun)
        # A byte on the way out (the transmitter busy) or in (the board's line low, or the
        # receiver's last bits): the line's own activity holds the watchdog off.
        m.d.comb += self.busy.eq(board.busy | ~uart_tx.data.ready | ~board.tx | pause.any())
        return m
