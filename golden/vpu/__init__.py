"""Golden model of the VPU (SPEC section 4.2): its instruction set and what each instruction does.

Modules
-------
:mod:`~golden.vpu.isa`
    The op table, bit fields, :class:`Instruction`, :func:`encode` / :func:`decode`, and the
    program faults (:data:`ERRORS`, :class:`ProgramError`).
:mod:`~golden.vpu.asm`
    The assembler and disassembler (program text <-> instruction words).
:mod:`~golden.vpu.execute`
    The semantics: :func:`execute` (a program on the VPU's state), :func:`elementwise` and
    :func:`reduce` (SPEC section 6), and the MXU link (:class:`MXUState`).

Every public name of the three is importable from ``golden.vpu`` itself. The name
``golden.vpu.execute`` is the function :func:`execute`, which hides the module of the same
name (``import golden.vpu.execute as m`` binds the function too);
``from golden.vpu.execute import ...`` and ``importlib.import_module("golden.vpu.execute")``
reach the module.
"""

from .asm import assemble, disassemble, program_words
from .execute import (MXUState, VPUState, elementwise, elementwise_operands, execute, reduce,
                      reduce_operand)
from .isa import (DEFAULT_VMEM_LINES, ELEMENTWISE_OPS, ERRORS, FIELDS, OPS, REDUCE_OPS, SUBLANES,
                  VREGS, IllegalInstruction, Instruction, OpSpec, ProgramError, decode, encode)

__all__ = [
    "SUBLANES", "VREGS", "OPS", "OpSpec", "FIELDS", "ELEMENTWISE_OPS", "REDUCE_OPS",
    "Instruction", "IllegalInstruction", "ERRORS", "ProgramError", "encode", "decode",
    "assemble", "disassemble", "program_words", "MXUState", "VPUState", "execute", "elementwise",
    "elementwise_operands", "reduce", "reduce_operand", "DEFAULT_VMEM_LINES",
]
