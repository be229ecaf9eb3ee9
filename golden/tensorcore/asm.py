"""The TensorCore assembler and disassembler: program text <-> IMEM images of
:mod:`golden.tensorcore.isa` bundles.

One bundle per line, its instructions separated by ``|``; labels, pseudo-ops (``j``, ``mv``,
``li``), ``sN+imm`` operands and raw ``.bundle`` words are described in :func:`assemble`
and ``docs/isa.md``. Vector instructions are parsed by ``golden.vpu``'s assembler.
"""

import functools
import re

import numpy as np

from .. import memory, vpu
from .isa import (_FMT_FIELDS, _M32, _SCALAR_NOP, _VPU_NOP, BUNDLE_WORDS, MISC_OPS, SCALAR_FORMATS,
                  SCALAR_OPS, SREGS, VECTOR_SLOT_UNITS, VECTOR_SLOTS, Bundle, IllegalBundle,
                  MiscInstruction, ScalarInstruction, _vector_unit, decode_bundle, encode_bundle)

__all__ = ["assemble", "disassemble", "program_words"]

_LABEL = re.compile(r"^([A-Za-z_][\w.]*)\s*:")
_SREG = re.compile(r"^s(\d+)$")
_MEM = re.compile(r"^(.*)\((\s*s\d+\s*)\)$")


def _sreg(text):
    m = _SREG.fullmatch(text.strip())
    if not m or int(m.group(1)) >= SREGS:
        raise ValueError(f"expected a scalar register s0..s{SREGS - 1}, not {text.strip()!r}")
    return int(m.group(1))


def _int(text, what):
    try:
        return int(text.strip(), 0)
    except ValueError:
        raise ValueError(f"{what} must be an integer, not {text.strip()!r}") from None


def _reg_and_imm(text, what):
    """``sN``, ``imm``, ``sN+imm`` or ``sN-imm`` -> (register, immediate)."""
    text = text.strip()
    m = re.fullmatch(r"s(\d+)\s*(?:([+-])\s*(\S+))?", text)
    if m:
        reg = _sreg(f"s{m.group(1)}")
        imm = 0 if m.group(2) is None else _int(m.group(2) + m.group(3), what)
        return reg, imm
    return 0, _int(text, what)


def _flag(text):
    m = re.fullmatch(r"f(\d+)", text.strip())
    if not m:
        raise ValueError(f"expected a flag f0..f{memory.MAX_FLAGS - 1}, not {text.strip()!r}")
    return int(m.group(1))


def _split_args(rest):
    return [a.strip() for a in rest.split(",")] if rest.strip() else []


def _expect(op, args, n, form):
    if len(args) != n or any(not a for a in args):
        raise ValueError(f"{op} takes {form}, got {', '.join(args) or 'nothing'!r}")


def _parse_scalar(op, args, target):
    spec = SCALAR_OPS[op]
    fmt = spec.fmt
    forms = {f: text or "no operands" for f, text in SCALAR_FORMATS.items()}
    if fmt in ("l", "s"):
        _expect(op, args, 2, forms[fmt])
        m = _MEM.fullmatch(args[1])
        if not m:
            raise ValueError(f"{op}: expected imm(sN), not {args[1]!r}")
        imm = _int(m.group(1), f"{op} offset") if m.group(1).strip() else 0
        return ScalarInstruction(op, rd=_sreg(args[0]), ra=_sreg(m.group(2)), imm=imm)
    n = len(_FMT_FIELDS[fmt])
    _expect(op, args, n, forms[fmt])
    fields = {}
    for name, arg in zip(_FMT_FIELDS[fmt], args):
        if name != "imm":
            fields[name] = _sreg(arg)
        elif fmt in ("b", "loop"):
            fields[name] = target(arg)
        else:
            fields[name] = _int(arg, f"{op} imm")
    return ScalarInstruction(op, **fields)


def _parse_misc(op, args):
    spec = MISC_OPS[op]
    n = spec.flag + spec.operand
    form = ", ".join((["flag"] if spec.flag else []) + (["sN+imm"] if spec.operand else []))
    _expect(op, args, n, form or "no operands")
    fields = {}
    if spec.flag:
        fields["flag"] = _flag(args[0])
    if spec.operand:
        fields["ra"], fields["imm"] = _reg_and_imm(args[-1], f"{op} operand")
    return MiscInstruction(op, **fields)


def _parse_vector(op, args):
    """(golden.vpu Instruction, base register); vld/vst may take ``sN+line`` as the base."""
    reg = 0
    if op in ("vld", "vst") and len(args) >= 2:
        reg, base = _reg_and_imm(args[1], f"{op} base")
        args = [args[0], str(base), *args[2:]]
    try:
        words = vpu.assemble(f"{op} {', '.join(args)}")
    except ValueError as error:
        raise ValueError(re.sub(r"^line \d+: ", "", str(error))) from None
    return vpu.decode(words[0]), reg


#: Pseudo-ops: name -> (op, operands from the written operands).
_PSEUDO = {"j": ("beq", lambda a: ["s0", "s0", *a]),
           "mv": ("addi", lambda a: [*a, "0"]),
           "li": ("addi", lambda a: [a[0], "s0", *a[1:]] if a else a)}


def _assign_scalars(items):
    """Slots of a line's scalar instructions: memory ops take scalar0, control ops
    scalar1, ALU ops what is left in the order written."""
    placed, alu = {}, []
    for ins in items:
        if len(ins.spec.slots) == 1:
            slot = ins.spec.slots[0]
            if slot in placed:
                raise ValueError(f"{ins.op}: {slot} already holds {placed[slot].op}")
            placed[slot] = ins
        else:
            alu.append(ins)
    free = [s for s in ("scalar0", "scalar1") if s not in placed]
    if len(alu) > len(free):
        raise ValueError(f"{len(items)} scalar ops do not fit the two scalar slots")
    placed.update(zip(free, alu))
    return placed


def _parse_line(code, target):
    """The :class:`Bundle` of one line's ``|``-separated instructions."""
    slots, scalars, last_vector = {}, [], -1
    for item in code.split("|"):
        item = " ".join(item.split())
        if not item:
            raise ValueError("empty slot between '|'")
        op, _, rest = item.partition(" ")
        op, args = op.lower(), _split_args(rest)
        if op in _PSEUDO:
            op, expand = _PSEUDO[op]
            args = expand(args)
        if op in ("nop", "snop", "vnop") and args:
            raise ValueError(f"{op} takes no operands")
        if op == "nop":
            pass
        elif op == "snop":
            scalars.append(_SCALAR_NOP)
        elif op == "vnop" or op in vpu.OPS and (op not in SCALAR_OPS
                                                or args[:1] and args[0][:1] in "vV"):
            ins, reg = _parse_vector(op, args) if op != "vnop" else (_VPU_NOP, 0)
            unit = "alu" if op == "vnop" else _vector_unit(ins)
            free = [s for s in VECTOR_SLOTS if unit in VECTOR_SLOT_UNITS[s] and s not in slots]
            if not free:
                raise ValueError(f"{op}: its vector slots are taken")
            order = VECTOR_SLOTS.index(free[0])
            if order < last_vector:
                raise ValueError(f"{op} comes after a later vector slot's op: write vector "
                                 f"ops in slot order ({', '.join(VECTOR_SLOTS)})")
            last_vector = order
            slots[free[0]] = ins
            if reg:
                slots[f"{free[0]}_reg"] = reg
        elif op in MISC_OPS:
            if "misc" in slots:
                raise ValueError(f"{op}: the misc slot already holds {slots['misc'].op}")
            slots["misc"] = _parse_misc(op, args)
        elif op in SCALAR_OPS:
            scalars.append(_parse_scalar(op, args, target))
        else:
            raise ValueError(f"unknown op {op!r}")
    return Bundle(**slots, **_assign_scalars(scalars))


def assemble(text):
    """Assemble a TensorCore program; returns its IMEM image, ``uint32 [bundles, 10]``.

    One bundle per line: its instructions separated by ``|``, in any order except that
    vector ops are written in slot order (vld, ALU, ALU, push, pop, vst). ``label:`` may
    start a line (alone, or before a bundle); ``#`` starts a comment; ``nop`` alone is an
    empty bundle; ``snop``/``vnop`` keep scalar0/valu0 empty so that an op lands in
    scalar1/valu1. ``.bundle w0, ..., w9`` places raw words (an illegal bundle, say). See
    docs/isa.md for the operand syntax. Errors are ``ValueError("line N: ...")``.
    """
    if not isinstance(text, str):
        raise TypeError(f"assemble takes program text, not {type(text).__name__}")
    lines, labels = [], {}
    for number, line in enumerate(text.splitlines(), start=1):
        code = line.split("#", 1)[0].strip()
        while (m := _LABEL.match(code)):
            name = m.group(1)
            if name in labels:
                raise ValueError(f"line {number}: label {name!r} is already defined "
                                 f"(line {labels[name][1]})")
            labels[name] = (len(lines), number)
            code = code[m.end():].strip()
        if code:
            lines.append((number, code))
    image = []
    for pc, (number, code) in enumerate(lines):
        def target(arg, pc=pc):
            arg = arg.strip()
            if re.fullmatch(r"[+-]?\d+", arg):
                return int(arg)
            if arg not in labels:
                raise ValueError(f"unknown label {arg!r}")
            return labels[arg][0] - pc
        try:
            if ";" in code:
                raise ValueError("separate slots with '|' (';' is not a separator)")
            if code.lower().startswith(".bundle"):
                image.append(_raw_bundle(code[len(".bundle"):]))
            else:
                image.append(_line_words(code, target))
        except ValueError as error:
            raise ValueError(f"line {number}: {error}") from None
    return np.array(image, np.uint32).reshape(-1, BUNDLE_WORDS)


class _NeedsTarget(Exception):
    def __init__(self, label):
        super().__init__(label)
        self.label = label


@functools.lru_cache(maxsize=4096)
def _encoded_line(code, targets):
    """The words of a line whose branch targets are ``targets``, (label, offset) pairs; or,
    if it names one not there, that label, to resolve and ask again.

    Programs repeat the same lines many times over (per chip, per test), and a line's
    words are a function of its text and its targets' offsets alone.
    """
    offsets = dict(targets)

    def target(label):
        if label not in offsets:
            raise _NeedsTarget(label)
        return offsets[label]
    try:
        words = encode_bundle(_parse_line(code, target))
    except _NeedsTarget as need:
        return need.label
    words.flags.writeable = False               # shared by every program that has the line
    return words


def _line_words(code, target):
    targets = ()
    while isinstance(words := _encoded_line(code, targets), str):
        targets += ((words, target(words)),)
    return words


def _raw_bundle(rest):
    args = _split_args(rest)
    if len(args) != BUNDLE_WORDS:
        raise ValueError(f".bundle takes {BUNDLE_WORDS} words, got {len(args)}")
    words = [_int(a, ".bundle word") for a in args]
    if any(not 0 <= w <= _M32 for w in words):
        raise ValueError(".bundle words must fit 32 bits")
    return np.array(words, np.uint32)


def disassemble(program):
    """Assembly text of an IMEM image, one bundle a line, branch targets as labels
    ``L<pc>``; an illegal bundle becomes ``.bundle``. ``assemble(disassemble(w))`` is ``w``."""
    image = program_words(program)
    bundles = []
    for words in image:
        try:
            bundles.append(decode_bundle(words))
        except IllegalBundle as error:
            bundles.append(".bundle " + ", ".join(f"{int(w):#010x}" for w in words)
                           + f"  # illegal: {error}")
    targets = {pc + b.scalar1.imm for pc, b in enumerate(bundles)
               if isinstance(b, Bundle) and b.scalar1.spec.fmt in ("b", "loop")
               and 0 <= pc + b.scalar1.imm < len(bundles)}
    lines = []
    for pc, b in enumerate(bundles):
        if pc in targets:
            lines.append(f"L{pc}:")
        if isinstance(b, Bundle):
            target = pc + b.scalar1.imm
            lines.append(b.text(f"L{target}" if 0 <= target < len(bundles) else None))
        else:
            lines.append(b)
    return "\n".join(lines) + ("\n" if lines else "")


def program_words(program):
    """The IMEM image of a program given as text or as integer words (``[n, 10]`` or flat
    ``[10 n]``), as ``uint32 [n, 10]``; ValueError for anything else."""
    if isinstance(program, str):
        return assemble(program)
    words = np.asarray(program)
    if not (np.issubdtype(words.dtype, np.integer) or words.size == 0) or words.ndim not in (1, 2) \
            or words.size % BUNDLE_WORDS or (words.ndim == 2 and words.shape[1] != BUNDLE_WORDS):
        raise ValueError(f"a program is text or integer words [n, {BUNDLE_WORDS}], not "
                         f"{words.dtype} {list(words.shape)}")
    if words.size and (words.min() < 0 or words.max() > _M32):
        raise ValueError("program words must be in 0..2**32-1")
    return words.astype(np.uint32).reshape(-1, BUNDLE_WORDS)
