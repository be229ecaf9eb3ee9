"""Golden model of the TensorCore (SPEC section 4.7): its VLIW instruction set, assembler,
disassembler and instruction-set simulator (ISS). ``docs/isa.md`` is the programmer's guide;
its tables are generated from the tables here.

Modules
-------
:mod:`~golden.tensorcore.isa`
    Slots, op tables and bit fields, the instruction and bundle classes, bundle encoding
    and decoding, the fault codes, and the DMA descriptor record.
:mod:`~golden.tensorcore.asm`
    The assembler and disassembler (program text <-> IMEM images).
:mod:`~golden.tensorcore.iss`
    The instruction-set simulator: :func:`run`, :class:`Session` and :class:`CoreState`.

Every public name of the three is importable from ``golden.tensorcore`` itself.
"""

from . import asm, isa, iss
from .asm import assemble, disassemble, program_words
from .isa import (BUNDLE_WORDS, CONTROL_FIELDS, DESCRIPTOR_LAYOUT, DESCRIPTOR_WORDS, ERROR_NOTES,
                  ERRORS, MISC_FIELDS, MISC_OPS, SCALAR_FIELDS, SCALAR_FORMATS, SCALAR_OPS, SLOTS,
                  SREGS, VADDR_FIELDS, VECTOR_SLOT_UNITS, VECTOR_SLOTS, Bundle, IllegalBundle,
                  MiscInstruction, MiscOp, ScalarInstruction, ScalarOp, decode_bundle,
                  descriptor_from_words, descriptor_words, encode_bundle)
from .iss import DEFAULT_HBM_WORDS, DEFAULT_SMEM_WORDS, CoreState, Session, run

# Every public name of the three, as each lists it.
__all__ = [*isa.__all__, *asm.__all__, *iss.__all__]
