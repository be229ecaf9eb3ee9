# amaranth: UnusedElaboratable=no
"""The UARTBone host bridge in Amaranth simulation, byte for byte on its UART pins.

The UART runs at a board's divisor (25 clock cycles a bit: 25 MHz at 1 Mbaud, a rate the
ULX3S's FT231X takes). Frames are written out by hand, in hex; the bridge drives a
WordMemory, as on the board top.
"""

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from hdl.board.uart import UartRx, UartTx
from hdl.board.uart_bridge import UartBridge
from hdl.board.word_memory import WordMemory

DIVISOR = 25
TIMEOUT = 40 * DIVISOR          # 4 byte times
REG = "10000000"                # WordMemory.REGISTERS, as a frame writes it


class _Board(wiring.Component):
    """The bridge on a 64-word WordMemory, its counts readable as status0 and status1."""

    def __init__(self):
        super().__init__({"rx": wiring.In(1, init=1), "tx": wiring.Out(1, init=1),
                          "errors": wiring.Out(32), "timeouts": wiring.Out(32)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.bridge = bridge = UartBridge(divisor=DIVISOR, timeout=TIMEOUT)
        m.submodules.memory = memory = WordMemory(depth=64)
        wiring.connect(m, bridge.bus, memory.bus)
        m.d.comb += [bridge.rx.eq(self.rx), self.tx.eq(bridge.tx),
                     memory.status0.eq(bridge.errors), memory.status1.eq(bridge.timeouts),
                     self.errors.eq(bridge.errors), self.timeouts.eq(bridge.timeouts)]
        return m


def _run(script, *, answer_bytes, divisor=DIVISOR):
    """Send ``script`` (hex strings of bytes; ints: cycles of idle line, or of a low line, a
    break, if negative) to the bridge; return
    (the first ``answer_bytes`` bytes it sends back, its errors and timeouts counts)."""
    dut = _Board()
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    received, counts = bytearray(), {}

    async def host(ctx):
        for item in script:
            if isinstance(item, int):
                ctx.set(dut.rx, item > 0)
                await ctx.tick().repeat(abs(item))
                ctx.set(dut.rx, 1)
                continue
            for byte in bytes.fromhex(item):
                for bit in [0, *((byte >> k) & 1 for k in range(8)), 1]:
                    ctx.set(dut.rx, bit)
                    await ctx.tick().repeat(divisor)
        for _ in range(11 * DIVISOR * (answer_bytes + 1)):
            if len(received) == answer_bytes:
                break
            await ctx.tick()
        await ctx.tick().repeat(20 * DIVISOR)                  # nothing more comes
        counts.update(errors=ctx.get(dut.errors), timeouts=ctx.get(dut.timeouts))

    async def listener(ctx):
        # An independent 8N1 receiver: each bit sampled in its middle.
        while True:
            await ctx.negedge(dut.tx)
            await ctx.tick().repeat(DIVISOR // 2)
            assert ctx.get(dut.tx) == 0, "start bit"
            byte = 0
            for k in range(8):
                await ctx.tick().repeat(DIVISOR)
                byte |= ctx.get(dut.tx) << k
            await ctx.tick().repeat(DIVISOR)
            assert ctx.get(dut.tx) == 1, "stop bit"
            received.append(byte)

    sim.add_testbench(host)
    sim.add_testbench(listener, background=True)
    sim.run()
    return bytes(received), counts


def test_write_burst_then_read_burst_back_to_back():
    answer, counts = _run([
        "01 04 00000005 11223344 a5a5a5a5 00000001 fedcba98",     # write 4 words at 5
        "02 06 00000004",                                          # read 6 words at 4
    ], answer_bytes=24)
    assert answer == bytes.fromhex("00000000 11223344 a5a5a5a5 00000001 fedcba98 00000000")
    assert counts == {"errors": 0, "timeouts": 0}


def test_registers_and_a_one_word_read():
    answer, counts = _run([
        f"01 01 {REG[:-1]}1 0000002a",                         # control = 42
        f"02 02 {REG}",                                       # ID, control
        "02 01 0000003f",                                     # the last memory word
        f"02 01 {REG[:-1]}5",                                 # past the registers: 0
    ], answer_bytes=16)
    assert answer == bytes.fromhex("54505531 0000002a 00000000 00000000")
    assert counts == {"errors": 0, "timeouts": 0}


def test_malformed_frames_are_dropped_and_counted():
    answer, counts = _run([
        "07 01 00000002 deadbeef",              # an unknown command: the frame is dropped
        TIMEOUT + 10 * DIVISOR,
        "01 00 00000003 deadbeef",              # a length of 0: dropped
        TIMEOUT + 10 * DIVISOR,
        "01 01 00000004 c0ffee00",              # a good frame after them is obeyed
        f"02 03 00000002 02 02 {REG[:-1]}2",    # words 2 to 4; errors and timeouts
    ], answer_bytes=20)
    assert answer == bytes.fromhex("00000000 00000000 c0ffee00 00000002 00000000")
    assert counts == {"errors": 2, "timeouts": 0}


def test_a_frame_cut_off_mid_word_times_out():
    answer, counts = _run([
        "01 02 00000010 01020304 0506",         # the second word never completes
        TIMEOUT + 10 * DIVISOR,
        "02 02 00000010",                       # the first word was written, not the second
        f"02 02 {REG[:-1]}2",
    ], answer_bytes=16)
    assert answer == bytes.fromhex("01020304 00000000 00000000 00000001")
    assert counts == {"errors": 0, "timeouts": 1}


def test_a_break_is_a_lost_byte_and_the_next_frame_is_obeyed():
    answer, counts = _run([-12 * DIVISOR, 2 * DIVISOR, "01 01 00000009 0badcafe",
                           "02 01 00000009"], answer_bytes=4)
    assert answer == bytes.fromhex("0badcafe")
    assert counts == {"errors": 1, "timeouts": 0}      # the break's low stop bit


def test_a_host_four_percent_slow_is_still_understood():
    # The receiver samples each bit in its middle: 26 cycles a bit instead of 25.
    answer, counts = _run(["01 01 00000001 89abcdef", "02 01 00000001"], answer_bytes=4,
                          divisor=DIVISOR + 1)
    assert answer == bytes.fromhex("89abcdef")
    assert counts == {"errors": 0, "timeouts": 0}


@pytest.mark.parametrize("make, message", [
    (lambda: UartBridge(divisor=3), "divisor"),
    (lambda: UartBridge(divisor=25, timeout=100), "timeout"),
    (lambda: UartRx(divisor=1.5), "divisor"),
    (lambda: UartTx(divisor=0), "divisor"),
    (lambda: WordMemory(depth=100), "power of two"),
])
def test_bad_parameters(make, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make()


def test_the_bridge_and_memory_are_lint_clean():
    from amaranth.back import verilog

    from sim.verilog.lint import lint
    text = verilog.convert(_Board(), name="board", emit_src=False)
    assert lint(text, "board") == []


def test_golden_uartbone_frames_round_trip():
    # The host's encoder and decoder against the RTL: words 60 to 63 exist in the 64-word
    # memory; 64 to 69 do not, and read 0.
    import numpy as np

    from golden import uartbone
    data = (np.arange(10, dtype=np.uint32) + 1) * np.uint32(0x1F2E3D4C)
    frames = uartbone.write(60, data) + uartbone.read(60, 10)
    answer, counts = _run([frames.hex()], answer_bytes=40)
    assert uartbone.words(answer).tolist() == [*data[:4].tolist(), 0, 0, 0, 0, 0, 0]
    assert counts == {"errors": 0, "timeouts": 0}
