"""The TensorCore's bundle encoding, restated from ``golden.tensorcore`` for the RTL.

``hdl`` imports only Amaranth and ``hdl`` (SPEC section 2), so the facts the decoder,
the sequencer and the DMA issue need are written out here as plain data;
``tests/tensorcore/test_rtl_decode.py`` holds every table equal to golden's, so the
two cannot drift. ``docs/isa.md`` explains them.
"""

from typing import NamedTuple

__all__ = ["BUNDLE_WORDS", "SLOTS", "VECTOR_SLOTS", "SREGS", "SCALAR_FIELDS", "MISC_FIELDS",
           "VADDR_FIELDS", "SCALAR_FORMATS", "ScalarOp", "SCALAR_OPS", "MiscOp", "MISC_OPS",
           "VECTOR_SLOT_UNITS", "ERRORS", "DESCRIPTOR_WORDS", "DESCRIPTOR_FIELDS",
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


class ScalarOp(NamedTuple):
    """``imm`` is how the immediate reads: ``"s16"``, ``"u16"``, ``"shamt"`` or None."""
    name: str
    opcode: int
    fmt: str
    slots: tuple
    imm: str | None


_BOTH = ("scalar0", "scalar1")
SCALAR_OPS = {op.name: op for op in (
    ScalarOp("nop", 1, "n", _BOTH, None),
    ScalarOp("add", 2, "r", _BOTH, None), ScalarOp("sub", 3, "r", _BOTH, None),
    ScalarOp("and", 4, "r", _BOTH, None), ScalarOp("or", 5, "r", _BOTH, None),
    ScalarOp("xor", 6, "r", _BOTH, None), ScalarOp("sll", 7, "r", _BOTH, None),
    ScalarOp("srl", 8, "r", _BOTH, None), ScalarOp("sra", 9, "r", _BOTH, None),
    ScalarOp("slt", 10, "r", _BOTH, None), ScalarOp("sltu", 11, "r", _BOTH, None),
    ScalarOp("addi", 12, "i", _BOTH, "s16"), ScalarOp("andi", 13, "i", _BOTH, "u16"),
    ScalarOp("ori", 14, "i", _BOTH, "u16"), ScalarOp("xori", 15, "i", _BOTH, "u16"),
    ScalarOp("slli", 16, "i", _BOTH, "shamt"), ScalarOp("srli", 17, "i", _BOTH, "shamt"),
    ScalarOp("srai", 18, "i", _BOTH, "shamt"), ScalarOp("slti", 19, "i", _BOTH, "s16"),
    ScalarOp("sltiu", 20, "i", _BOTH, "s16"), ScalarOp("lui", 21, "u", _BOTH, "u16"),
    ScalarOp("lw", 22, "l", ("scalar0",), "s16"), ScalarOp("sw", 23, "s", ("scalar0",), "s16"),
    ScalarOp("beq", 24, "b", ("scalar1",), "s16"), ScalarOp("bne", 25, "b", ("scalar1",), "s16"),
    ScalarOp("blt", 26, "b", ("scalar1",), "s16"), ScalarOp("bge", 27, "b", ("scalar1",), "s16"),
    ScalarOp("bltu", 28, "b", ("scalar1",), "s16"),
    ScalarOp("bgeu", 29, "b", ("scalar1",), "s16"),
    ScalarOp("loop", 30, "loop", ("scalar1",), "s16"),
)}


class MiscOp(NamedTuple):
    """``flag``: the op names a flag; ``operand``: it reads ``s[ra] + imm``."""
    name: str
    opcode: int
    flag: bool
    operand: bool


MISC_OPS = {op.name: op for op in (
    MiscOp("nop", 1, False, False), MiscOp("halt", 2, False, False),
    MiscOp("dma", 3, False, True), MiscOp("wait", 4, True, True),
    MiscOp("waitc", 5, True, True), MiscOp("fset", 6, True, True),
    MiscOp("fadd", 7, True, True), MiscOp("delay", 8, False, True),
)}

#: The VPU units (``golden.vpu``'s names) each vector slot accepts, besides ``nop``.
VECTOR_SLOT_UNITS = {"vld": ("load",), "valu0": ("alu", "trans", "reduce"),
                     "valu1": ("alu", "trans", "reduce"), "push": ("push",),
                     "pop": ("pop",), "vst": ("store",)}

#: Stop reasons; the index is the error code. ``race`` is the ISS's alone.
ERRORS = ("none", "illegal", "imem_range", "smem_range", "vmem_range", "flag_range",
          "weights_full", "results_full", "pop_empty", "no_mxu", "dma_format", "dma_count",
          "dma_chip", "dma_flag", "dma_sent_flag", "dma_src_range", "dma_dst_range", "race")

#: A DMA descriptor record in SMEM: its words, in order.
DESCRIPTOR_WORDS = 12
DESCRIPTOR_FIELDS = ("control", "src_base", "dst_base", "count0", "count1", "count2",
                     "src_stride0", "src_stride1", "src_stride2",
                     "dst_stride0", "dst_stride1", "dst_stride2")
#: The control word's fields, name -> (lowest bit, width).
CONTROL_FIELDS = {"src_vmem": (0, 1), "dst_vmem": (1, 1), "remote": (2, 1), "has_sent": (3, 1),
                  "flag": (4, 7), "sent_flag": (11, 7), "chip": (18, 8)}
DEFAULT_HBM_WORDS = 1 << 16
