"""The ULX3S-85F board top: PLL, reset, status LEDs and the UARTBone host bridge on the
FT231X, in front of the proto chip (or a block-RAM word memory)."""

import math
from dataclasses import dataclass
from fractions import Fraction

from amaranth.hdl import ClockDomain, ClockSignal, Elaboratable, Instance, Module, Signal
from amaranth.lib import io
from amaranth.lib.cdc import ResetSynchronizer

from ..lib.params import check_int
from .board_core import BoardCore, make_target

__all__ = ["PllSetting", "ecp5_pll", "ULX3STop", "BOARDS", "board_platform"]

# The ECP5 EHXPLLL's limits (Lattice TN1263): the phase detector's input, the VCO, and
# the dividers' ranges.
_PFD_MHZ = (Fraction(3125, 1000), 400)
_VCO_MHZ = (400, 800)
_CLKI_DIV, _CLKFB_DIV, _CLKOP_DIV = 128, 80, 128


@dataclass(frozen=True)
class PllSetting:
    """An EHXPLLL setting with CLKOP fed back: CLKOP = CLKI * clkfb_div / clki_div."""
    clki_div: int
    clkfb_div: int
    clkop_div: int
    clkop_cphase: int
    f_in_mhz: Fraction
    f_out_mhz: Fraction
    f_vco_mhz: Fraction


def ecp5_pll(f_in_mhz, f_out_mhz):
    """The EHXPLLL dividers whose CLKOP comes nearest ``f_out_mhz`` from ``f_in_mhz``.

    Every legal divider triple is tried, in exact arithmetic; of those equally near, the
    one whose VCO is nearest 600 MHz (the middle of its range) wins, then the smallest
    dividers, as Project Trellis' ``ecppll`` chooses. ``CLKOP_CPHASE`` is half the
    output period, ``(clkop_div - 1) // 2`` VCO cycles (the phase is immaterial with
    CLKOP as the feedback: the loop aligns CLKOP with CLKI).
    """
    f_in, f_out = Fraction(str(f_in_mhz)), Fraction(str(f_out_mhz))
    if not 8 <= f_in <= 400:
        raise ValueError(f"f_in_mhz must be 8 to 400 MHz (the PLL's input), not {f_in_mhz}")
    if not Fraction(25, 8) < f_out <= 400:
        raise ValueError(f"f_out_mhz must be 3.2 to 400 MHz, not {f_out_mhz}")
    best = None
    for clki_div in range(1, _CLKI_DIV + 1):
        pfd = f_in / clki_div
        if not _PFD_MHZ[0] <= pfd <= _PFD_MHZ[1]:
            continue
        for clkfb_div in range(1, _CLKFB_DIV + 1):
            out = pfd * clkfb_div
            # The output dividers that keep the VCO in its range.
            least, most = max(1, math.ceil(_VCO_MHZ[0] / out)), math.floor(_VCO_MHZ[1] / out)
            for clkop_div in range(least, min(most, _CLKOP_DIV) + 1):
                vco = out * clkop_div
                key = (abs(out - f_out), abs(vco - 600))
                if best is None or key < best[0]:
                    best = (key, clki_div, clkfb_div, clkop_div, out, vco)
    if best is None:
        raise ValueError(f"no EHXPLLL setting makes {f_out_mhz} MHz from {f_in_mhz} MHz")
    _, clki_div, clkfb_div, clkop_div, out, vco = best
    return PllSetting(clki_div, clkfb_div, clkop_div, (clkop_div - 1) // 2, f_in, out, vco)


class ULX3STop(Elaboratable):
    """The ULX3S-85F top: the UARTBone host bridge on the FT231X and what it drives.

    - **Clock**: the 25 MHz oscillator through an ECP5 PLL (an ``EHXPLLL`` instance) to
      ``clock_mhz`` (the nearest the PLL makes: :func:`ecp5_pll`), constrained at that
      frequency for nextpnr.
    - **Reset**: until the PLL locks, and while button F1 (``button_fire`` 0) is held,
      synchronized to the clock.
    - **Host bridge**: :class:`~hdl.board.uart_bridge.UartBridge` on the FT231X's pins
      at ``baud`` (115,200 by default, ``litex_server --uart``'s), with an idle timeout
      of ``timeout_ms``.
    - **Target** (:meth:`make_target`): the proto chip
      (:class:`~hdl.board.proto_chip.ProtoChip`: IMEM, SMEM, VMEM, HBM, the flags and the
      control and status registers on the bridge's word bus), or with
      ``target="memory"`` a :class:`~hdl.board.word_memory.WordMemory` of
      ``memory_words`` words; the bridge's error and timeout counts are its ``status0``
      and ``status1``. (:class:`~hdl.board.board_core.BoardCore` holds the bridge, the
      target and the LEDs.)
    - **LEDs**: 0 run, 1 halt, 2 error (the target's ``control`` bits 0 to 2: the chip
      running, halted, faulted; or any frame error or timeout since reset), 3 a frame in
      progress, 7 a heartbeat of about 1 Hz (the clock runs and reset is released).

    Parameters
    ----------
    clock_mhz : float
        The design's clock (default 50).
    baud : int
        The UART's rate (default 115200); ``clock / baud`` cycles per bit, rounded.
    target : str
        ``"proto"`` (default) or ``"memory"``.
    memory_words : int
        Words of the block-RAM memory of ``target="memory"`` (default 4096), a power of
        two.
    timeout_ms : int
        The host bridge's idle timeout (default 100, LiteX's).
    """

    def __init__(self, *, clock_mhz=50, baud=115_200, target="proto", memory_words=4096,
                 timeout_ms=100):
        self.pll = ecp5_pll(25, clock_mhz)
        self.baud = check_int("baud", baud, least=300, most=3_000_000)
        self.timeout_ms = check_int("timeout_ms", timeout_ms, least=1, most=10_000)
        self.clock_hz = float(self.pll.f_out_mhz * 1_000_000)
        self.divisor = round(self.clock_hz / baud)
        if self.divisor < 4:
            raise ValueError(f"baud {baud} is too fast for a {clock_mhz} MHz clock "
                             f"(at least 4 clock cycles a bit)")
        self.memory_words = check_int("memory_words", memory_words, least=1, most=1 << 20)
        if memory_words & (memory_words - 1):
            raise ValueError(f"memory_words must be a power of two, not {memory_words}")
        self.target_name = target
        self.target = self.make_target()

    def make_target(self):
        """The component behind the host bridge (:func:`hdl.board.board_core.make_target`):
        it has ``bus`` (``In(word_bus_signature())``), ``status0`` and ``status1``
        (In(32): the bridge's counts) and ``control`` (Out(32): bits 0 to 2 light the run,
        halt and error LEDs). The proto chip's memories wait ``WAIT`` reads for at most
        80 % of the bridge's idle timeout."""
        wait = max(1, round(self.clock_hz * self.timeout_ms / 1000 * 0.8))
        return make_target(self.target_name, memory_words=self.memory_words,
                           wait_cycles=wait)

    def elaborate(self, platform):
        m = Module()
        pll = self.pll
        def buffer(direction, name, number=0):
            m.submodules[f"{name}_{number}"] = pin = io.Buffer(
                direction, platform.request(name, number, dir="-"))
            return pin

        clk25 = buffer("i", "clk25")
        locked = Signal()
        m.domains.sync = sync = ClockDomain("sync")
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=f"{float(pll.f_in_mhz):g}",
            a_FREQUENCY_PIN_CLKOP=f"{float(pll.f_out_mhz):g}",
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
            a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_CLKOP_ENABLE="ENABLED",
            p_CLKI_DIV=pll.clki_div, p_CLKFB_DIV=pll.clkfb_div, p_CLKOP_DIV=pll.clkop_div,
            p_CLKOP_CPHASE=pll.clkop_cphase, p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
            i_RST=0, i_STDBY=0, i_CLKI=clk25.i, i_CLKFB=ClockSignal("sync"),
            i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1,
            i_PLLWAKESYNC=0, i_ENCLKOP=0,
            o_CLKOP=ClockSignal("sync"), o_LOCK=locked)
        platform.add_clock_constraint(sync.clk, self.clock_hz)
        button = buffer("i", "button_fire")
        m.submodules.reset_sync = ResetSynchronizer(~locked | button.i, domain="sync")

        uart = platform.request("uart", 0, dir="-")
        m.submodules.uart_rx = uart_rx = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = uart_tx = io.Buffer("o", uart.tx)
        m.submodules.board = board = BoardCore(
            target=self.target, divisor=self.divisor,
            timeout=round(self.clock_hz * self.timeout_ms / 1000),
            heartbeat=round(self.clock_hz / 2))
        m.d.comb += [board.rx.eq(uart_rx.i), uart_tx.o.eq(board.tx)]
        for k in range(8):
            m.d.comb += buffer("o", "led", k).o.eq(board.leds[k])
        return m


#: The boards ``tpu-rtl board build`` knows: name -> (the amaranth-boards platform's
#: module and class names, the top).
BOARDS = {"ulx3s-85f": ("amaranth_boards.ulx3s", "ULX3S_85F_Platform", ULX3STop)}


def board_platform(board):
    """The amaranth-boards platform (an instance) of ``board``, a name in :data:`BOARDS`."""
    import importlib
    if board not in BOARDS:
        raise ValueError(f"unknown board {board!r}; boards: {', '.join(BOARDS)}")
    module, name, _ = BOARDS[board]
    return getattr(importlib.import_module(module), name)()
