"""The TensorCore's bundle encoding, restated from ``golden.tensorcore`` for the RTL.

``hdl`` imports only Amaranth and ``hdl`` (SPEC section 2), so the facts the decoder,
the sequencer and the DMA issue need are written out here as plain data;
``tests/tensorcore/test_rtl_decode.py`` holds every table equal to golden's, so the
two cannot drift. ``docs/isa.md`` explains them.
"""

from typing import NamedTuple

from amaranth.lib import enum

__all__ = ["BUNDLE_WORDS", "SLOTS", "VECTOR_SLOTS", "SREGS", "SCALAR_FIELDS", "MISC_FIELDS",
           "VADDR_FIELDS", "SCALAR_FORMATS", "ScalarOpcode", "ScalarOp", "SCALAR_OPS",
           "MiscOpcode", "MiscOp", "MISC_OPS",
           "VECTOR_SLOT_UNITS", "Error", "ERRORS", "DESCRIPTOR_WORDS", "DESCRIPTOR_FIELDS",
           "CONTROL_FIELDS", "DEFAULT_HBM_WORDS"]

BUNDLE_WORDS = 10
#: Slot ``k`` is word ``k`` of a bundle.
SLOTS = ("scalar0", "scalar1", "vld", "valu0", "valu1", "push", "pop", "vst", "vaddr", "misc")
#: The slots holding VPU words, in the order the VPU executes them.
VECTOR_SLOTS = ("vld", "valu0", "valu1", "push", "pop", "vst")
SREGS = 32

#: Bit fields, name -> (lowest bit, width).
SCALAR_FIELDS = {"opcode": (26, 6), "rd": (21, 5), "ra": (16, 5), "rb": (11, 5), "imm": (0, 16)}
MISC_FIELDS = {"opcode": (28, 4), "flag": (21, 7), "ra": (16, 5), "imm": (0, 16)}
VADDR_FIELDS = {"vld_reg": (0, 5), "vst_reg": (5, 5)}

#: Scalar formats and their assembly operands (the registers named are the fields used).
SCALAR_FORMATS = {"n": "", "r": "rd, ra, rb", "i": "rd, ra, imm", "u": "rd, imm",
                  "l": "rd, imm(ra)", "s": "rd, imm(ra)", "b": "rd, ra, target",
                  "loop": "rd, target"}


class ScalarOpcode(enum.IntEnum, shape=SCALAR_FIELDS["opcode"][1]):
    """The opcode field of a scalar slot (an ``IntEnum``: the decoder compares a raw word's
    opcode bits with it, and the test holding the tables equal to golden's compares ints)."""
    #: No op has opcode 0, so zeroed IMEM never executes; it decodes as illegal.
    UNASSIGNED = 0
    NOP = 1
    ADD = 2
    SUB = 3
    AND = 4
    OR = 5
    XOR = 6
    SLL = 7
    SRL = 8
    SRA = 9
    SLT = 10
    SLTU = 11
    ADDI = 12
    ANDI = 13
    ORI = 14
    XORI = 15
    SLLI = 16
    SRLI = 17
    SRAI = 18
    SLTI = 19
    SLTIU = 20
    LUI = 21
    LW = 22
    SW = 23
    BEQ = 24
    BNE = 25
    BLT = 26
    BGE = 27
    BLTU = 28
    BGEU = 29
    LOOP = 30


class ScalarOp(NamedTuple):
    """``imm`` is how the immediate reads: ``"s16"``, ``"u16"``, ``"shamt"`` or None."""
    name: str
    opcode: ScalarOpcode
    fmt: str
    slots: tuple
    imm: str | None


def _scalar(name, fmt, slots, imm):
    return ScalarOp(name, ScalarOpcode[name.upper()], fmt, slots, imm)


_BOTH = ("scalar0", "scalar1")
SCALAR_OPS = {op.name: op for op in (
    _scalar("nop", "n", _BOTH, None), _scalar("add", "r", _BOTH, None),
    _scalar("sub", "r", _BOTH, None), _scalar("and", "r", _BOTH, None),
    _scalar("or", "r", _BOTH, None), _scalar("xor", "r", _BOTH, None),
    _scalar("sll", "r", _BOTH, None), _scalar("srl", "r", _BOTH, None),
    _scalar("sra", "r", _BOTH, None), _scalar("slt", "r", _BOTH, None),
    _scalar("sltu", "r", _BOTH, None), _scalar("addi", "i", _BOTH, "s16"),
    _scalar("andi", "i", _BOTH, "u16"), _scalar("ori", "i", _BOTH, "u16"),
    _scalar("xori", "i", _BOTH, "u16"), _scalar("slli", "i", _BOTH, "shamt"),
    _scalar("srli", "i", _BOTH, "shamt"), _scalar("srai", "i", _BOTH, "shamt"),
    _scalar("slti", "i", _BOTH, "s16"), _scalar("sltiu", "i", _BOTH, "s16"),
    _scalar("lui", "u", _BOTH, "u16"), _scalar("lw", "l", ("scalar0",), "s16"),
    _scalar("sw", "s", ("scalar0",), "s16"), _scalar("beq", "b", ("scalar1",), "s16"),
    _scalar("bne", "b", ("scalar1",), "s16"), _scalar("blt", "b", ("scalar1",), "s16"),
    _scalar("bge", "b", ("scalar1",), "s16"), _scalar("bltu", "b", ("scalar1",), "s16"),
    _scalar("bgeu", "b", ("scalar1",), "s16"), _scalar("loop", "loop", ("scalar1",), "s16"),
)}


class MiscOpcode(enum.IntEnum, shape=MISC_FIELDS["opcode"][1]):
    """The opcode field of the misc slot (an ``IntEnum``, as :class:`ScalarOpcode`)."""
    #: No op has opcode 0; it decodes as illegal.
    UNASSIGNED = 0
    NOP = 1
    HALT = 2
    DMA = 3
    WAIT = 4
    WAITC = 5
    FSET = 6
    FADD = 7
    DELAY = 8


class MiscOp(NamedTuple):
    """``flag``: the op names a flag; ``operand``: it reads ``s[ra] + imm``."""
    name: str
    opcode: MiscOpcode
    flag: bool
    operand: bool


def _misc(name, flag, operand):
    return MiscOp(name, MiscOpcode[name.upper()], flag, operand)


MISC_OPS = {op.name: op for op in (
    _misc("nop", False, False), _misc("halt", False, False), _misc("dma", False, True),
    _misc("wait", True, True), _misc("waitc", True, True), _misc("fset", True, True),
    _misc("fadd", True, True), _misc("delay", False, True),
)}

#: The VPU units (``golden.vpu``'s names) each vector slot accepts, besides ``nop``.
VECTOR_SLOT_UNITS = {"vld": ("load",), "valu0": ("alu", "trans", "reduce"),
                     "valu1": ("alu", "trans", "reduce"), "push": ("push",),
                     "pop": ("pop",), "vst": ("store",)}



class Error(enum.IntEnum, shape=5):
    """Why the core stopped: the shape of its ``error`` port (``NONE`` while it runs).

    ``RACE`` is the ISS's alone. An ``IntEnum``, so a code read back from a run indexes
    :data:`ERRORS` as it always has.
    """
    NONE = 0
    ILLEGAL = 1
    IMEM_RANGE = 2
    SMEM_RANGE = 3
    VMEM_RANGE = 4
    FLAG_RANGE = 5
    WEIGHTS_FULL = 6
    RESULTS_FULL = 7
    POP_EMPTY = 8
    NO_MXU = 9
    DMA_FORMAT = 10
    DMA_COUNT = 11
    DMA_CHIP = 12
    DMA_FLAG = 13
    DMA_SENT_FLAG = 14
    DMA_SRC_RANGE = 15
    DMA_DST_RANGE = 16
    RACE = 17


#: The names of :class:`Error`, in code order (``golden.tensorcore.ERRORS``).
ERRORS = tuple(member.name.lower() for member in Error)

#: A DMA descriptor record in SMEM: its words, in order.
DESCRIPTOR_WORDS = 12
DESCRIPTOR_FIELDS = ("control", "src_base", "dst_base", "count0", "count1", "count2",
                     "src_stride0", "src_stride1", "src_stride2",
                     "dst_stride0", "dst_stride1", "dst_stride2")
#: The control word's fields, name -> (lowest bit, width).
CONTROL_FIELDS = {"src_vmem": (0, 1), "dst_vmem": (1, 1), "remote": (2, 1), "has_sent": (3, 1),
                  "flag": (4, 7), "sent_flag": (11, 7), "chip": (18, 8)}
DEFAULT_HBM_WORDS = 1 << 16
