"""The VPU's instruction set (SPEC section 4.2): the op table, the bit fields, the
:class:`Instruction` class, :func:`encode` and :func:`decode`, and the program faults.
``hdl.vpu.isa`` restates the encoding for the RTL.

Encoding (defined here only; the RTL decodes the same words)
-------------------------------------------------------------
One 32-bit word per instruction, the opcode in bits 31..26 (:data:`OPS`,
bit fields in :data:`FIELDS`):

* format ``r``: vd 25..21, va 20..16, vb 15..11, vc 10..6, bits 5..0 zero;
* format ``m`` (``vld``, ``vst``): vr 25..21, base line 20..5 (0..65535),
  line stride 4..0 (0..31).

Fields an instruction does not use must be zero. A word with an unassigned
opcode (0 among them, so that zeroed memory never executes) or a non-zero
unused field is illegal: :func:`decode` raises :class:`IllegalInstruction`,
and ``golden.vpu.execute`` stops there and reports it, as the RTL's error flag does.

Program errors
--------------
:data:`ERRORS` names the faults that stop a program, in the order of the
RTL's error codes (1, 2, ...): an illegal word, a VMEM line out of range,
weights pushed into a full shadow tile, an LHS push that would overflow the
MXU's result queue, a pop with fewer than 8 result rows queued, and an MXU
instruction on a VPU without an MXU. The faulting instruction does nothing,
and nothing after it runs: ``golden.vpu.execute`` with ``on_error="stop"`` returns
the state at that point with the fault's kind and index, as the RTL stops.
"""

import dataclasses
import functools

import numpy as np

__all__ = [
    "SUBLANES", "VREGS", "DEFAULT_VMEM_LINES", "OPS", "OpSpec", "FIELDS", "ELEMENTWISE_OPS",
    "REDUCE_OPS", "Instruction", "IllegalInstruction", "ERRORS", "ProgramError", "encode",
    "decode",
]

SUBLANES = 8
VREGS = 32
DEFAULT_VMEM_LINES = 1024

#: Bit fields: name -> (lowest bit, width).
FIELDS = {
    "opcode": (26, 6),
    "vd": (21, 5), "va": (16, 5), "vb": (11, 5), "vc": (6, 5),
    "vr": (21, 5), "base": (5, 16), "stride": (0, 5),
}
_FORMAT_FIELDS = {"r": ("vd", "va", "vb", "vc"), "m": ("vr", "base", "stride")}


@dataclasses.dataclass(frozen=True)
class OpSpec:
    """One instruction: its opcode, format, assembly operands (in order) and datapath.

    ``reads`` and ``writes`` name the register fields read and written, for
    hazard logic; ``unit`` says which part of the VPU executes it: "alu",
    "trans" (transcendental), "reduce", "load", "store", "mxu" or "none".
    """
    name: str
    opcode: int
    fmt: str
    operands: tuple
    reads: tuple
    writes: tuple
    unit: str


def _table():
    binary = ("vd", "va", "vb")
    unary = ("vd", "va")
    rows = [("nop", "r", (), (), (), "none")]
    rows += [(op, "r", binary, ("va", "vb"), ("vd",), "alu") for op in
             ("add", "sub", "mul", "max", "min", "eq", "lt", "le")]
    rows += [("select", "r", ("vd", "va", "vb", "vc"), ("va", "vb", "vc"), ("vd",), "alu")]
    rows += [(op, "r", binary, ("va", "vb"), ("vd",), "alu") for op in
             ("iadd", "isub", "and", "or", "xor", "shl", "shr", "sra")]
    rows += [(op, "r", unary, ("va",), ("vd",), "alu") for op in
             ("f32_to_bf16", "bf16_to_f32", "f32_to_i32", "i32_to_f32")]
    rows += [(op, "r", unary, ("va",), ("vd",), "trans") for op in ("rcp", "rsqrt", "exp")]
    rows += [(op, "r", unary, ("va",), ("vd",), "reduce") for op in ("rsum", "rmax", "rmin")]
    rows += [("vld", "m", ("vr", "base", "stride"), (), ("vr",), "load"),
             ("vst", "m", ("vr", "base", "stride"), ("vr",), (), "store"),
             ("push_weights", "r", ("va",), ("va",), (), "mxu"),
             ("push_lhs", "r", ("va",), ("va",), (), "mxu"),
             ("pop", "r", ("vd",), (), ("vd",), "mxu"),
             ("push_lhs_acc", "r", ("va", "vb"), ("va", "vb"), (), "mxu")]
    # Opcode 0 stays unassigned: an all-zero word is illegal.
    return {name: OpSpec(name, code, *rest) for code, (name, *rest) in enumerate(rows, start=1)}


#: Every instruction by name.
OPS = _table()
_BY_OPCODE = {spec.opcode: spec for spec in OPS.values()}

#: The operations of :func:`~golden.vpu.elementwise` (SPEC section 6) and
#: :func:`~golden.vpu.reduce`.
ELEMENTWISE_OPS = ("add", "sub", "mul", "max", "min", "eq", "lt", "le", "select",
                   "iadd", "isub", "and", "or", "xor", "shl", "shr", "sra",
                   "f32_to_bf16", "bf16_to_f32", "f32_to_i32", "i32_to_f32",
                   "rcp", "rsqrt", "exp")
REDUCE_OPS = ("sum", "max", "min")
_REDUCE_INSTRUCTIONS = {"rsum": "sum", "rmax": "max", "rmin": "min"}


class IllegalInstruction(ValueError):
    """A word that is not a valid instruction."""


#: The program faults, in the order of the RTL's error codes (``ERRORS[code - 1]``).
ERRORS = ("illegal", "vmem_range", "weights_full", "results_full", "pop_empty", "no_mxu")


class ProgramError(ValueError):
    """A program fault: ``kind`` is one of :data:`ERRORS`, ``index`` the faulting
    instruction (None where the fault is raised outside :func:`execute`)."""

    def __init__(self, message, *, kind, index=None):
        if kind not in ERRORS:
            raise ValueError(f"kind must be one of {', '.join(ERRORS)}, not {kind!r}")
        super().__init__(message)
        self.kind, self.index = kind, index


@dataclasses.dataclass(frozen=True)
class Instruction:
    """A decoded instruction; fields it does not use are 0."""
    op: str
    vd: int = 0
    va: int = 0
    vb: int = 0
    vc: int = 0
    vr: int = 0
    base: int = 0
    stride: int = 0

    @property
    def spec(self):
        return OPS[self.op]

    def __str__(self):
        spec = self.spec
        parts = [f"v{getattr(self, f)}" if f.startswith("v") else str(getattr(self, f))
                 for f in spec.operands]
        return spec.name + (" " + ", ".join(parts) if parts else "")


def _check_field(name, value):
    width = FIELDS[name][1]
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not 0 <= value < 1 << width:
        raise ValueError(f"{name} must be an integer in 0..{(1 << width) - 1}, not {value!r}")
    return int(value)


def encode(instruction):
    """The 32-bit word of an :class:`Instruction`; ``ValueError`` if a field does not fit."""
    if not isinstance(instruction, Instruction):
        raise ValueError(f"encode takes an Instruction, not {type(instruction).__name__}")
    spec = OPS.get(instruction.op)
    if spec is None:
        raise ValueError(f"unknown op {instruction.op!r}")
    word = spec.opcode << FIELDS["opcode"][0]
    for name in ("vd", "va", "vb", "vc", "vr", "base", "stride"):
        value = _check_field(name, getattr(instruction, name))
        if name in spec.operands:
            word |= value << FIELDS[name][0]
        elif value:
            raise ValueError(f"{spec.name} has no {name} field (got {value})")
    return word


def decode(word):
    """The :class:`Instruction` a word encodes; :class:`IllegalInstruction` if none."""
    word = int(word)
    if not 0 <= word < 1 << 32:
        raise ValueError(f"an instruction word is 32 bits, not {word:#x}")
    return _decode(word)


@functools.lru_cache(maxsize=4096)
def _decode(word):
    # An Instruction is immutable, and programs decode the same few words over and over.
    code = word >> FIELDS["opcode"][0]
    spec = _BY_OPCODE.get(code)
    if spec is None:
        raise IllegalInstruction(f"{word:#010x}: opcode {code} is not assigned")
    fields = {}
    used = 0
    for name in spec.operands:
        low, width = FIELDS[name]
        fields[name] = (word >> low) & ((1 << width) - 1)
        used |= ((1 << width) - 1) << low
    stray = word & ~used & ((1 << FIELDS["opcode"][0]) - 1)
    if stray:
        raise IllegalInstruction(f"{word:#010x}: {spec.name} has non-zero unused bits "
                                 f"{stray:#010x}")
    return Instruction(spec.name, **fields)
