# amaranth: UnusedElaboratable=no
# (The chip is made here, so its memories can be shared with the host before it is built,
# and used by this component's elaborate.)
"""The proto chip behind the host bridge's word bus: its memories, flags and control."""

from amaranth.hdl import Cat, Const, Module, ResetInserter, Signal
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

from ..lib.memory_port import line_addr_width
from ..lib.params import check_int
from ..tensorcore.presets import preset
from ..tensorcore.sequencer import STALL_CAUSES, State
from ..tensorcore.system import TensorCoreSystem
from .host_share import HostShare
from .uart_bridge import word_bus_signature
from .word_memory import ID_WORD

__all__ = ["ProtoChip", "REGISTERS", "REGIONS", "Register", "CONFIG", "STATUS_BITS",
           "FLAGS_OFFSET", "CONTROL_START", "CONTROL_RESET"]

#: The word address of the first register (as :class:`~hdl.board.word_memory.WordMemory`).
REGISTERS = 0x1000_0000
#: Memory name -> its region's first word address. Within a region, line ``l`` word ``j``
#: is at ``(l << b) | j`` where ``b`` is the bits of the line's word index (IMEM's 10-word
#: bundles take 16 addresses each; VMEM's and HBM's 8-word lines are their flat words).
REGIONS = {"imem": 0x0000_0000, "smem": 0x0100_0000, "vmem": 0x0200_0000,
           "hbm": 0x0300_0000}
#: Where in a region the memory's words are: a region spans 2**24 word addresses.
REGION_BITS = 24
#: The flags' registers: REGISTERS + FLAGS_OFFSET + i is flag i.
FLAGS_OFFSET = 0x100
#: The control register's bits: start (held: the chip runs from pc 0 while it is set) and
#: reset (self-clearing: a write with it set clears start, resets the chip in the next
#: cycle, and leaves the memories as they are).
CONTROL_START, CONTROL_RESET = 1, 2
#: The status register's bits (and fields: ``state`` at bit 8, the core's ``error`` at
#: 16, the VPU's at 24).
STATUS_BITS = {"done": 0, "halted": 1, "error": 2, "running": 3, "started": 4}


class Register(enum.IntEnum):
    """The registers, as offsets from :data:`REGISTERS` (32-bit words; read only unless
    written otherwise)."""
    ID = 0                  # ID_WORD, "TPU1"
    CONTROL = 1             # read and write: CONTROL_START, CONTROL_RESET
    ERRORS = 2              # the bridge's malformed frames and lost bytes
    TIMEOUTS = 3            # the bridge's abandoned frames
    CLOCK = 4               # a free-running cycle counter
    STATUS = 5              # STATUS_BITS
    PC = 6
    CYCLES = 7              # cycles from start to done (the chip's run)
    BUNDLES = 8             # bundles issued
    ERROR_PC = 9
    WAIT = 10               # STATUS, answered once the chip is done or after wait_cycles
    MXU_BEATS = 11
    DMA_CYCLES = 12
    OVERLAP_CYCLES = 13
    DMA_REJECTED = 14
    STALLS = 16             # 16 + i: the stall counter of STALL_CAUSES[i]
    CONFIG = 32             # 32 + i: CONFIG[i] of the chip's parameters


#: The chip parameters the configuration registers give, in order from Register.CONFIG.
CONFIG = ("lanes", "imem_depth", "smem_words", "vmem_lines", "hbm_words",
          "words_per_cycle", "n_flags", "mxu_results")


class _Bus(enum.Enum, shape=3):
    # (From 1: Yosys writes a comparison with 0 as `!state`, which Verilator's lint takes
    # for a width error.)
    IDLE = 1
    MEMORY_REQUEST = 2
    MEMORY_RESPONSE = 3
    RESPOND = 4
    WAIT = 5


class ProtoChip(wiring.Component):
    """A chip (``hdl.tensorcore.TensorCoreSystem``, the ``proto`` preset by default) on the
    host bridge's word bus: the board top's target (:class:`~hdl.board.ulx3s.ULX3STop`).

    Address map (32-bit word addresses): the memories at :data:`REGIONS` (IMEM, SMEM,
    VMEM, HBM, each line's words at consecutive addresses, lines ``2**b`` apart where
    ``b`` bits number a line's words), the registers at :data:`REGISTERS`
    (:class:`Register`) and the sync flags at ``REGISTERS + FLAGS_OFFSET + i``. An
    address in no memory or register reads 0, and a write there is ignored.

    The host reaches the memories only while the chip is not running (before ``start``,
    and from the cycle after it is done): each memory's second port is the host's then
    (:class:`~hdl.board.host_share.HostShare`); while the chip runs, a memory write is
    ignored and a memory read answers 0. A run: write ``CONTROL_RESET`` to the control
    register, load the memories, write ``CONTROL_START``, read ``WAIT`` until its
    ``done`` bit is set, read the results back.

    Parameters
    ----------
    chip : dict, optional
        ``TensorCoreSystem`` parameters (default the ``proto`` preset,
        ``hdl.tensorcore.presets``); ``n_chips`` 1, ``sparsecores`` 0.
    wait_cycles : int
        The most cycles a read of ``WAIT`` waits for the chip (default ``2**22``, 84 ms
        at 50 MHz, under the bridge's 100 ms idle timeout), so that a hung chip does not
        hold the bridge.

    Ports
    -----
    bus : In(word_bus_signature())
        The target side of the word bus.
    control : Out(32)
        The LEDs' bits: 0 running, 1 halted, 2 a core or VPU fault.
    status0, status1 : In(32)
        The bridge's error and timeout counts (read at ``ERRORS`` and ``TIMEOUTS``).
    running : Out(1)
        Started and not done a cycle ago: the chip is working (the status register's
        ``running`` bit, and the run LED).

    Latency: a register read answers the cycle after its request, a memory read a few
    cycles later (HBM's read latency), ``WAIT`` once the chip is done. Throughput: one
    request at a time (the bridge sends one per 4 UART bytes).
    """

    def __init__(self, *, chip=None, wait_cycles=1 << 22):
        params = preset("proto") if chip is None else dict(chip)
        for name in ("n_chips", "sparsecores"):
            if params.get(name, 0 if name == "sparsecores" else 1) != (
                    0 if name == "sparsecores" else 1):
                raise ValueError(f"chip: the board's chip has no {name}")
        self.params = params
        self.wait_cycles = check_int("wait_cycles", wait_cycles, least=1, most=1 << 31)
        self.chip = chip = TensorCoreSystem(**params)
        core, system = chip.core, chip.system
        core.imem = HostShare(core.imem, "dma")
        core.smem = HostShare(core.smem, "dma")
        system.vmem = HostShare(system.vmem, "dma")
        system.hbm = HostShare(system.hbm, "port")
        self.memories = {"imem": core.imem, "smem": core.smem, "vmem": system.vmem,
                         "hbm": system.hbm}
        self.config = {"lanes": chip.lanes, "imem_depth": core.imem.lines,
                       "smem_words": core.smem.lines, "vmem_lines": system.vmem.lines,
                       "hbm_words": system.hbm.size,
                       "words_per_cycle": system.hbm.words_per_cycle,
                       "n_flags": core.n_flags, "mxu_results": params.get("mxu_results", 16)}
        super().__init__({
            "bus": In(word_bus_signature()),
            "control": Out(32),
            "status0": In(32),
            "status1": In(32),
            "running": Out(1),
        })

    @staticmethod
    def line_words(memory):
        """Words per line of a shared memory: VMEM-like ``lanes``, HBM's
        ``words_per_cycle``."""
        return memory.words_per_cycle if hasattr(memory, "words_per_cycle") else memory.lanes

    def elaborate(self, platform):
        m = Module()
        chip = self.chip
        # The chip's reset comes from a register, a cycle after the control write that
        # asks for it: it reaches every flip-flop of the chip, and a write's decode hangs
        # on `running`, so on the chip's `done` (docs/fpga.md, "Which paths hold the
        # proto chip's clock").
        reset, resetting = Signal(), Signal()
        m.d.sync += reset.eq(resetting)
        m.submodules.chip = ResetInserter(reset)(chip)
        request, response = self.bus.request, self.bus.response

        start, started = Signal(), Signal()
        running = Signal()
        m.d.comb += [chip.start.eq(start), running.eq(start & ~chip.done)]
        clock, cycles = Signal(32), Signal(32)
        m.d.sync += clock.eq(clock + 1)
        with m.If(reset):
            m.d.sync += cycles.eq(0)
        with m.Elif(running):
            m.d.sync += cycles.eq(cycles + 1)
        # What the host reads of `done` (the status, the end of a WAIT) comes from a
        # register, a cycle late: `done` is the whole chip drained, a deep function, and
        # the status word's compare and the bus's answer would otherwise hang on it.
        # The memory ports are the host's from that same cycle (`host_select` below).
        finished = Signal()
        m.d.sync += finished.eq(chip.done)
        working = start & ~finished
        m.d.comb += self.running.eq(working)
        halted = chip.state == State.HALTED
        faulted = (chip.state == State.ERROR) | (chip.vpu_error != 0)
        status = Signal(32)
        m.d.comb += [
            status[STATUS_BITS["done"]].eq(start & finished),
            status[STATUS_BITS["halted"]].eq(halted),
            status[STATUS_BITS["error"]].eq(chip.state == State.ERROR),
            status[STATUS_BITS["running"]].eq(working),
            status[STATUS_BITS["started"]].eq(start),
            status[8:12].eq(chip.state), status[16:24].eq(chip.error),
            status[24:32].eq(chip.vpu_error),
            self.control.eq(Cat(working, halted, faulted)),
        ]
        # The ports change hands a cycle after `running` does, from a register: `done` is
        # the whole chip drained, a deep function, and every memory port's mux would
        # otherwise hang on it (docs/fpga.md, "Which paths hold the proto chip's clock").
        # Neither side has anything in flight then, and a request in the cycle between
        # waits, as the port is not ready for it.
        host_select = Signal(init=1)
        m.d.sync += host_select.eq(~running)
        for memory in self.memories.values():
            m.d.comb += memory.host_select.eq(host_select)

        # The request held while it is served.
        addr, word, write = Signal(32), Signal(32), Signal()
        answer = Signal(32)
        m.d.comb += response.payload.eq(answer)
        state = Signal(_Bus, init=_Bus.IDLE)
        wait = Signal(range(self.wait_cycles))

        # The registers a read may name.
        offset = addr[:12]
        readable = {Register.ID: ID_WORD, Register.CONTROL: Cat(start, Const(0, 31)),
                    Register.ERRORS: self.status0, Register.TIMEOUTS: self.status1,
                    Register.CLOCK: clock, Register.STATUS: status, Register.PC: chip.pc,
                    Register.CYCLES: cycles, Register.BUNDLES: chip.bundles,
                    Register.ERROR_PC: chip.error_pc, Register.MXU_BEATS: chip.mxu_beats,
                    Register.DMA_CYCLES: chip.dma_cycles,
                    Register.OVERLAP_CYCLES: chip.overlap_cycles,
                    Register.DMA_REJECTED: chip.dma_rejected}
        for i, cause in enumerate(STALL_CAUSES):
            readable[Register.STALLS + i] = getattr(chip, f"stall_{cause}")
        for i, name in enumerate(CONFIG):
            readable[Register.CONFIG + i] = self.config[name]
        register = Signal(32)
        with m.Switch(offset):
            for index, value in readable.items():
                with m.Case(int(index)):
                    m.d.comb += register.eq(value)
            n_flags = self.config["n_flags"]
            with m.Case(*range(FLAGS_OFFSET, FLAGS_OFFSET + n_flags)):
                m.d.comb += register.eq(chip.flags[(offset - FLAGS_OFFSET)[:max(1, (
                    n_flags - 1).bit_length())]])
        in_registers = addr[REGION_BITS + 4:] == REGISTERS >> (REGION_BITS + 4)

        # Which memory, and where in it. The memories' handshakes read `held`, `hit` kept
        # from the decode cycle: the address compare is several levels, which would
        # otherwise reach through each memory's port sharing into the chip's own requests.
        decode = Signal()            # the request taken last cycle is decoded
        hit, held = {}, {}
        for name, memory in self.memories.items():
            per_line = self.line_words(memory)
            lane_bits = (per_line - 1).bit_length()
            local = addr[:REGION_BITS]
            line, lane = local >> lane_bits, local[:lane_bits] if lane_bits else Const(0, 1)
            hit[name] = ((addr[REGION_BITS:] == REGIONS[name] >> REGION_BITS)
                         & (line < memory.lines) & (lane < per_line))
            held[name] = Signal(name=f"{name}_hit")
            with m.If(decode):
                m.d.sync += held[name].eq(hit[name])
            host = memory.host
            mask_bits = len(host.req.payload.mask)
            per_word = mask_bits // per_line          # mask bits a word
            m.d.comb += [host.req.payload.addr.eq(line), host.req.payload.write.eq(write),
                         host.req.payload.mask.eq(Const((1 << per_word) - 1, mask_bits)
                                                  << (lane * per_word))]
            for j in range(per_line):
                m.d.comb += host.req.payload.data[j].eq(word)
            with m.If(state == _Bus.MEMORY_REQUEST):
                with m.If(held[name]):
                    m.d.comb += host.req.valid.eq(1)
                    with m.If(host.req.ready):
                        m.d.sync += state.eq(_Bus.IDLE)
                        with m.If(~write):
                            m.d.sync += state.eq(_Bus.MEMORY_RESPONSE)
            with m.If(state == _Bus.MEMORY_RESPONSE):
                with m.If(held[name]):
                    m.d.comb += host.resp.ready.eq(1)
                    with m.If(host.resp.valid):
                        m.d.sync += [answer.eq(host.resp.payload.data[lane]),
                                     state.eq(_Bus.RESPOND)]
        in_memory = Signal()
        m.d.comb += in_memory.eq(Cat(*hit.values()).any())

        # Requests are taken one at a time: each is decoded the cycle after it is taken.
        with m.If(state == _Bus.IDLE):
            m.d.comb += request.ready.eq(~decode)
            with m.If(request.valid & ~decode):
                m.d.sync += [addr.eq(request.payload.addr), word.eq(request.payload.data),
                             write.eq(request.payload.write), decode.eq(1)]
            with m.If(decode):
                m.d.sync += [decode.eq(0), answer.eq(0)]
                with m.If(in_memory & host_select):
                    m.d.sync += state.eq(_Bus.MEMORY_REQUEST)
                with m.Elif(write):
                    with m.If(in_registers & (offset == Register.CONTROL)):
                        m.d.sync += start.eq(word[0] & ~word[1])
                        m.d.comb += resetting.eq(word[1])
                with m.Elif(in_registers & (offset == Register.WAIT)):
                    m.d.sync += [wait.eq(0), state.eq(_Bus.WAIT)]
                with m.Else():
                    with m.If(in_registers):
                        m.d.sync += answer.eq(register)
                    m.d.sync += state.eq(_Bus.RESPOND)
        with m.Elif(state == _Bus.WAIT):
            m.d.sync += wait.eq(wait + 1)
            with m.If(~working | (wait == self.wait_cycles - 1)):
                m.d.sync += [answer.eq(status), state.eq(_Bus.RESPOND)]
        with m.Elif(state == _Bus.RESPOND):
            m.d.comb += response.valid.eq(1)
            with m.If(response.ready):
                m.d.sync += state.eq(_Bus.IDLE)
        return m
