"""The VPU assembler and disassembler: program text <-> instruction words
(:mod:`golden.vpu.isa`), one instruction a line.
"""

import numpy as np

from .isa import FIELDS, OPS, VREGS, IllegalInstruction, Instruction, decode, encode

__all__ = ["assemble", "disassemble", "program_words"]


def _parse_operand(text, field, op):
    if field.startswith("v"):
        if not (text[:1] in "vV" and text[1:].isdigit()):
            raise ValueError(f"{op}: expected a register v0..v{VREGS - 1} for {field}, "
                             f"not {text!r}")
        value = int(text[1:])
        if value >= VREGS:
            raise ValueError(f"{op}: no register {text!r} (v0..v{VREGS - 1})")
        return value
    try:
        value = int(text, 0)
    except ValueError:
        raise ValueError(f"{op}: {field} must be an integer, not {text!r}") from None
    limit = (1 << FIELDS[field][1]) - 1
    if not 0 <= value <= limit:
        raise ValueError(f"{op}: {field} {value} is out of range 0..{limit}")
    return value


def _assemble_line(text):
    mnemonic, _, rest = text.partition(" ")
    mnemonic = mnemonic.lower()
    args = [a.strip() for a in rest.split(",")] if rest.strip() else []
    if mnemonic == ".word":
        if len(args) != 1:
            raise ValueError(f".word takes one value, got {len(args)}")
        try:
            value = int(args[0], 0)
        except ValueError:
            raise ValueError(f".word: not an integer: {args[0]!r}") from None
        if not 0 <= value < 1 << 32:
            raise ValueError(f".word: {value:#x} does not fit in 32 bits")
        return value
    spec = OPS.get(mnemonic)
    if spec is None:
        raise ValueError(f"unknown op {mnemonic!r}")
    expected = list(spec.operands)
    if spec.fmt == "m" and len(args) == 2:
        args.append("1")                       # the stride defaults to 1
    if len(args) != len(expected) or any(not a for a in args):
        raise ValueError(f"{spec.name} takes {len(expected)} operands "
                         f"({', '.join(expected) or 'none'}), got {len(args)}: {rest.strip()!r}")
    fields = {f: _parse_operand(a, f, spec.name) for f, a in zip(expected, args)}
    return encode(Instruction(spec.name, **fields))


def assemble(text):
    """Assemble a program; returns its words as a ``uint32`` array.

    One instruction per line: ``op operand, operand, ...``. Registers are
    ``v0``..``v31``; ``base`` and ``stride`` are integers (``0x`` for hex),
    and the stride of ``vld``/``vst`` may be left out (1). ``.word N`` places
    a raw word (an illegal one, say). ``#`` or ``;`` starts a comment.
    Errors are ``ValueError("line N: ...")``, lines counted from 1.
    """
    if not isinstance(text, str):
        raise ValueError(f"assemble takes program text, not {type(text).__name__}")
    words = []
    for number, line in enumerate(text.splitlines(), start=1):
        code = line.split("#", 1)[0].split(";", 1)[0].strip()
        if not code:
            continue
        try:
            words.append(_assemble_line(" ".join(code.split())))
        except ValueError as error:
            raise ValueError(f"line {number}: {error}") from None
    return np.array(words, dtype=np.uint32)


def disassemble(program):
    """Assembly text of a program's words, one line each; illegal words become ``.word``.

    ``assemble(disassemble(words))`` gives ``words`` back.
    """
    lines = []
    for word in _words(program):
        try:
            lines.append(str(decode(word)))
        except IllegalInstruction as error:
            lines.append(f".word {int(word):#010x}  # illegal: {error}")
    return "\n".join(lines) + ("\n" if lines else "")


def program_words(program):
    """The instruction words of a program given as assembly text or as a 1-D integer array,
    as ``uint32``; ValueError for anything else."""
    return _words(program)


def _words(program):
    if isinstance(program, str):
        return assemble(program)
    words = np.asarray(program)
    if words.ndim != 1 or not (np.issubdtype(words.dtype, np.integer) or words.size == 0):
        raise ValueError(f"a program is text or a 1-D array of words, not {words.dtype} "
                         f"of shape {words.shape}")
    if words.size and (words.min() < 0 or words.max() >= 1 << 32):
        raise ValueError("program words must be in 0..2**32-1")
    return words.astype(np.uint32)
