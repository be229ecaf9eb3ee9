"""A block-RAM word memory and a few registers on the host bridge's word bus."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int
from .uart_bridge import word_bus_signature

__all__ = ["WordMemory", "ID_WORD"]

#: What the identification register reads: "TPU1" in ASCII.
ID_WORD = 0x54505531


class WordMemory(wiring.Component):
    """A word memory in block RAM, and control registers, behind a word bus.

    The board top's target until the proto chip plugs in (issue 43): a place the host
    bridge can write and read back, and registers for the board's LEDs.

    Address map (32-bit word addresses; ``REGISTERS`` is ``0x1000_0000``):

    ============================  ==========================================================
    ``0`` to ``depth - 1``        the memory, read and write
    ``REGISTERS + 0`` (``ID``)    :data:`ID_WORD` ("TPU1"), read only
    ``REGISTERS + 1`` (control)   read and write: the ``control`` port
    ``REGISTERS + 2``, ``+ 3``    ``status0``, ``status1`` (the bridge's error counts), read
    ``REGISTERS + 4``             a free-running cycle counter, read
    anything else                 reads 0, writes are ignored
    ============================  ==========================================================

    Parameters
    ----------
    depth : int
        Words of memory, a power of two up to ``2**20`` (default 4096: eight ECP5
        block RAMs).

    Ports
    -----
    bus : In(word_bus_signature())
        The target side of the word bus.
    control : Out(32)
        The control register.
    status0, status1 : In(32)
        Two words the host can read (the board top gives the bridge's ``errors`` and
        ``timeouts``).

    Latency: a read's response is valid the cycle after its request (the block RAM's
    read register). Throughput: a request a cycle while responses are taken; a read
    whose response is held back stalls the requests behind it.
    """

    #: The word address of the first register: byte address 0x4000_0000 for a host that
    #: counts bytes (LiteX's ``RemoteClient`` sends byte address / 4).
    REGISTERS = 0x1000_0000

    def __init__(self, *, depth=4096):
        self.depth = check_int("depth", depth, least=1, most=1 << 20)
        if depth & (depth - 1):
            raise ValueError(f"depth must be a power of two, not {depth}")
        super().__init__({
            "bus": In(word_bus_signature()),
            "control": Out(32),
            "status0": In(32),
            "status1": In(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.ram = ram = Memory(shape=32, depth=self.depth, init=[])
        write_port = ram.write_port()
        read_port = ram.read_port()
        request, response = self.bus.request, self.bus.response
        cycles = Signal(32)
        m.d.sync += cycles.eq(cycles + 1)

        addr = request.payload.addr
        in_memory = addr < self.depth
        register = Signal(32)               # a register read, beside the memory's
        from_memory = Signal()
        # One response held at a time: a new request goes in when it is taken or absent.
        m.d.comb += request.ready.eq(~response.valid | response.ready)
        accept = request.valid & request.ready
        m.d.comb += [read_port.addr.eq(addr), read_port.en.eq(accept & ~request.payload.write),
                     write_port.addr.eq(addr), write_port.data.eq(request.payload.data),
                     write_port.en.eq(accept & request.payload.write & in_memory)]
        with m.If(response.ready):
            m.d.sync += response.valid.eq(0)
        with m.If(accept & ~request.payload.write):
            m.d.sync += [response.valid.eq(1), from_memory.eq(in_memory), register.eq(0)]
            for offset, value in enumerate((ID_WORD, self.control, self.status0,
                                            self.status1, cycles)):
                with m.If(addr == self.REGISTERS + offset):
                    m.d.sync += register.eq(value)
        with m.If(accept & request.payload.write & (addr == self.REGISTERS + 1)):
            m.d.sync += self.control.eq(request.payload.data)
        m.d.comb += response.payload.eq(register)
        with m.If(from_memory):
            m.d.comb += response.payload.eq(read_port.data)
        return m
