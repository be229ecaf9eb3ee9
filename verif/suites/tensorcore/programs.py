"""Seeded random TensorCore programs (assembly text) for co-simulating the RTL with the ISS.

A program is straight-line bundles, forward branches and counted loops, so it ends
(with a halt, a fault, or a wait that blocks). s28 is a small VMEM line base, s30 a small
SMEM pointer and s31 the loop counter; random ALU ops write s1..s27 (and now and then s0,
whose writes drop), and now and then s28 a new value below 8; ``dma`` programs copy record
words through s29.
"""

import numpy as np

from golden import memory
from golden import tensorcore as tc

EDGES = [0, 1, 2, 3, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0x80000001,
         0xFFFFFFFE, 0xFFFFFFFF, 31, 32, 33]
REG_OPS = ("add", "sub", "and", "or", "xor", "sll", "srl", "sra", "slt", "sltu")
IMM_OPS = {"addi": "s16", "andi": "u16", "ori": "u16", "xori": "u16", "slli": "shamt",
           "srli": "shamt", "srai": "shamt", "slti": "s16", "sltiu": "s16"}
BRANCHES = ("beq", "bne", "blt", "bge", "bltu", "bgeu")


def initial_sregs(rng, smem_words):
    regs = np.array([0] + [int(rng.choice(EDGES)) if rng.random() < 0.5
                           else int(rng.integers(0, 1 << 32)) for _ in range(31)], np.uint32)
    regs[28] = rng.integers(0, 8)
    regs[30] = rng.integers(0, smem_words)
    regs[31] = 0
    return regs


def _reg(rng, *, write=False):
    if write and rng.random() < 0.05:
        return 0
    return int(rng.integers(1, 28)) if write else int(rng.integers(0, 32))


def _imm(rng, kind):
    if kind == "shamt":
        return int(rng.integers(0, 32))
    if kind == "u16":
        return int(rng.choice([0, 1, 0xFFFF, 0x8000, int(rng.integers(0, 1 << 16))]))
    return int(rng.choice([0, 1, -1, 0x7FFF, -0x8000, int(rng.integers(-(1 << 15), 1 << 15))]))


def alu_op(rng):
    """A random scalar ALU instruction (either slot)."""
    kind = rng.random()
    rd = _reg(rng, write=True)
    if kind < 0.4:
        op = REG_OPS[rng.integers(len(REG_OPS))]
        return f"{op} s{rd}, s{_reg(rng)}, s{_reg(rng)}"
    if kind < 0.9:
        op = list(IMM_OPS)[rng.integers(len(IMM_OPS))]
        return f"{op} s{rd}, s{_reg(rng)}, {_imm(rng, IMM_OPS[op])}"
    return f"lui s{rd}, {_imm(rng, 'u16')}"


def memory_op(rng, smem_words, *, fault):
    """An lw or sw through s0 or the pointer s30; out of range with probability ``fault``."""
    op = "lw" if rng.random() < 0.5 else "sw"
    rd = _reg(rng, write=True) if op == "lw" else _reg(rng)
    if rng.random() < fault:
        return f"{op} s{rd}, {smem_words + int(rng.integers(0, 4))}(s0)"
    if rng.random() < 0.5:
        return f"{op} s{rd}, {int(rng.integers(0, smem_words))}(s0)"
    return f"{op} s{rd}, {int(rng.integers(-2, 3))}(s30)"


def scalar_bundle(rng, smem_words, *, fault=0.003, n_flags=16):
    """One straight-line bundle's scalar and misc slots (no control transfer)."""
    parts = []
    r = rng.random()
    if r < 0.3:
        parts.append(memory_op(rng, smem_words, fault=fault))
    elif r < 0.85:
        parts.append(alu_op(rng))
    else:
        parts.append("snop")
    if rng.random() < 0.04:
        # s28 moves within 0..7, so that a vld/vst base register is sometimes just written.
        parts.append(f"andi s28, s{_reg(rng)}, 7")
    elif rng.random() < 0.75:
        parts.append(alu_op(rng))
    m = rng.random()
    if m < 0.06:
        parts.append(f"fset f{rng.integers(n_flags)}, s{_reg(rng)}+{rng.integers(0, 50)}")
    elif m < 0.12:
        parts.append(f"fadd f{rng.integers(n_flags)}, {rng.integers(-50, 50)}")
    elif m < 0.15:
        parts.append(f"waitc f{rng.integers(n_flags)}, 0")
    elif m < 0.17:
        parts.append(f"wait f{rng.integers(n_flags)}, {0 if rng.random() < 0.8 else 1}")
    elif m < 0.19:
        parts.append(f"delay {rng.integers(0, 4)}")
    elif m < 0.19 + fault:
        parts.append(f"fset f{n_flags + rng.integers(0, 3)}, 0")
    if parts[0] == "snop" and len(parts) == 1:
        return "nop"
    if parts[0] == "snop" and (len(parts) < 2 or parts[1].split()[0] in (
            "fset", "fadd", "waitc", "wait", "delay")):
        parts = parts[1:]
    return " | ".join(parts)


def scalar_program(rng, *, smem_words, blocks=12, fault=0.003, n_flags=16, extra=None):
    """Assembly text: ``blocks`` blocks of straight-line bundles, forward branches and
    counted loops, then ``halt``. ``extra(rng)``, if given, returns text to append to a
    straight-line bundle (vector slots)."""
    lines, label = [], 0

    def straight():
        text = scalar_bundle(rng, smem_words, fault=fault, n_flags=n_flags)
        if extra is not None:
            more = extra(rng)
            if more:
                text = more if text == "nop" else f"{text} | {more}"
        return text

    for _ in range(blocks):
        kind = rng.random()
        if kind < 0.5:
            lines += [straight() for _ in range(int(rng.integers(1, 4)))]
        elif kind < 0.75:                              # a forward branch over 0..2 bundles
            skip = int(rng.integers(0, 3))
            op = BRANCHES[rng.integers(len(BRANCHES))]
            a, b = _reg(rng), _reg(rng)
            first = straight().split(" | ")[0] if rng.random() < 0.5 else "snop"
            first = alu_op(rng) if first in ("nop", "snop") or first.split()[0] in (
                "fset", "fadd", "waitc", "wait", "delay", "lw", "sw") else first
            lines.append(f"{first} | {op} s{a}, s{b}, L{label}")
            lines += [straight() for _ in range(skip)]
            lines.append(f"L{label}: {straight()}")
            label += 1
        else:                                          # a counted loop of 1..3 bundles
            count = int(rng.integers(1, 4))
            body = [straight() for _ in range(int(rng.integers(1, 3)))]
            lines.append(f"li s31, {count}")
            last = alu_op(rng) if rng.random() < 0.7 else "snop"
            lines.append(f"L{label}: {body[0]}")
            lines += body[1:]
            lines.append(f"{last} | loop s31, L{label}")
            label += 1
    if rng.random() < fault * 10:
        lines.append("beq s0, s0, " + ("-100" if rng.random() < 0.5 else "+3"))
    if rng.random() < fault * 10:
        lines.append(".bundle " + ", ".join(str(int(w)) for w in
                                             rng.integers(0, 1 << 32, 10, dtype=np.uint64)))
    lines.append("halt")
    return "\n".join(lines)


#: golden.vpu's register-operand counts of the ALU-slot ops a test may build.
_UNARY = ("f32_to_bf16", "bf16_to_f32", "f32_to_i32", "i32_to_f32", "rcp", "rsqrt", "exp",
          "rsum", "rmax", "rmin")


def _valu(rng, ops):
    op = ops[rng.integers(len(ops))]
    regs = [f"v{rng.integers(0, 8)}" for _ in range(4)]
    count = 2 if op in _UNARY else 4 if op == "select" else 3
    return f"{op} " + ", ".join(regs[:count])


def _vmem_op(rng, op, vmem_lines, fault):
    """A vld/vst whose 8 lines fit VMEM, except with probability ``fault``."""
    stride = int(rng.integers(0, 4))
    reg = "s28+" if rng.random() < 0.5 else ""          # s28 is 0..7
    top = vmem_lines - 7 * stride - (8 if reg else 0)
    base = int(rng.integers(0, max(top, 1)))
    if rng.random() < fault:
        base = int(rng.choice([vmem_lines - 7 * stride, 0xFFFF, vmem_lines + 5]))
    return f"{op} v{rng.integers(0, 8)}, {reg}{base}, {stride}"


def lhs_push(rng):
    """An MXU LHS push: ``push_lhs``, or (a third of the time) ``push_lhs_acc``, whose sums
    start from a second vreg."""
    if rng.random() < 1 / 3:
        return f"push_lhs_acc v{rng.integers(0, 8)}, v{rng.integers(0, 8)}"
    return f"push_lhs v{rng.integers(0, 8)}"


def vector_slots(ops, *, vmem_lines, mxu=False, fault=0.003):
    """A function ``extra(rng)`` for :func:`scalar_program`: random vector slots, in
    slot order, using the ALU-slot ops ``ops`` (and the MXU link with ``mxu``)."""
    def extra(rng):
        parts = []
        if rng.random() < 0.4:
            parts.append(_vmem_op(rng, "vld", vmem_lines, fault))
        alu = [_valu(rng, ops) if ops and rng.random() < 0.5 else None for _ in range(2)]
        if alu[1] and not alu[0]:
            alu[0] = "vnop"
        parts += [a for a in alu if a]
        if mxu and rng.random() < 0.4:
            parts.append(f"push_weights v{rng.integers(0, 8)}" if rng.random() < 0.5
                         else lhs_push(rng))
        if mxu and rng.random() < 0.25:
            parts.append(f"pop v{rng.integers(0, 8)}")
        if rng.random() < 0.3:
            parts.append(_vmem_op(rng, "vst", vmem_lines, fault))
        return " | ".join(parts)
    return extra


def mxu_program(rng, *, lanes, smem_words, vmem_lines, bundles=30, mxu_results=16,
                ops=(), fault=0.0, n_flags=16, overflow=False):
    """Straight-line bundles with MXU pushes and pops kept legal by counting weight rows
    and result rows as the program goes (with probability ``fault`` a bundle breaks the
    counts), plus random scalar, vld/vst and ALU slots; then ``halt``. With ``overflow``
    the program fills the result queue before the ``halt`` and pushes once more (the
    ``results_full`` fault, which random breaks of the counts rarely reach: it needs a
    full queue)."""
    extra = vector_slots(ops, vmem_lines=vmem_lines, fault=fault / 5)
    shadow = queued = 0
    lines = []
    for _ in range(bundles):
        base = scalar_bundle(rng, smem_words, fault=fault / 5, n_flags=n_flags)
        vector = [p for p in extra(rng).split(" | ") if p]
        vld = [p for p in vector if p.startswith("vld")]
        vst = [p for p in vector if p.startswith("vst")]
        alu = [p for p in vector if p not in vld + vst]
        push = pop = None
        if rng.random() < fault or (shadow + 8 <= lanes and rng.random() < 0.4):
            push = f"push_weights v{rng.integers(0, 8)}"
            shadow += 8
        elif rng.random() < fault or (queued + 8 <= mxu_results and rng.random() < 0.5):
            push = lhs_push(rng)
            shadow = 0 if shadow == lanes else shadow
            queued += 8
        if rng.random() < fault or (queued >= 8 and rng.random() < 0.5):
            pop = f"pop v{rng.integers(0, 8)}"
            queued -= 8
        parts = [] if base == "nop" else [base]
        parts += vld + alu + [p for p in (push, pop) if p] + vst
        lines.append(" | ".join(parts) or "nop")
    if overflow:
        lines += [lhs_push(rng) for _ in range((mxu_results - queued) // 8 + 1)]
    lines.append("halt")
    return "\n".join(lines)


def dense_program(rng, *, lanes, smem_words, vmem_lines, ops, bundles=12, mxu_results=16,
                  n_flags=16):
    """Bundles with every slot full: an ``lw`` or ``sw`` and an ALU op, a misc op that
    never blocks (``fset``, ``fadd``, ``delay``), ``vld``, two ALU-slot ops, an MXU push
    and a pop (each while :func:`mxu_program`'s counts allow it) and ``vst``; then
    ``halt``. Only an SMEM access through ``s30`` near either end of SMEM faults."""
    shadow = queued = 0
    lines = []
    for _ in range(bundles):
        misc = rng.choice([f"fset f{rng.integers(n_flags)}, s{_reg(rng)}+{rng.integers(0, 50)}",
                           f"fadd f{rng.integers(n_flags)}, {rng.integers(-50, 50)}",
                           f"delay {rng.integers(0, 3)}"])
        parts = [memory_op(rng, smem_words, fault=0.0), alu_op(rng), str(misc),
                 _vmem_op(rng, "vld", vmem_lines, 0.0), _valu(rng, ops), _valu(rng, ops)]
        if shadow + 8 <= lanes:
            parts.append(f"push_weights v{rng.integers(0, 8)}")
            shadow += 8
        elif queued + 8 <= mxu_results:
            parts.append(lhs_push(rng))
            shadow = 0 if shadow == lanes else shadow
            queued += 8
        if queued >= 8:
            parts.append(f"pop v{rng.integers(0, 8)}")
            queued -= 8
        parts.append(_vmem_op(rng, "vst", vmem_lines, 0.0))
        lines.append(" | ".join(parts))
    lines.append("halt")
    return "\n".join(lines)


#: What :func:`random_descriptor_words` can be told to break (``reject``), each a reason
#: ``golden.memory.validate`` gives.
REJECTS = ("count", "flag", "src_range", "dst_range")


def random_descriptor_words(rng, *, hbm_words, vmem_words, n_flags, flags=4, bad=0.1,
                            reject=None):
    """One SMEM descriptor record (``uint32 [12]``): mostly a local transfer that fits,
    with probability ``bad`` one that the DMA check rejects or no descriptor can hold.
    ``reject`` (one of :data:`REJECTS`) makes it one the check rejects for that reason,
    whatever ``bad``."""
    if reject is not None and reject not in REJECTS:
        raise ValueError(f"reject must be one of {', '.join(REJECTS)} or None, not {reject!r}")
    sizes = {"hbm": hbm_words, "vmem": vmem_words}
    dims = int(rng.integers(1, 4))
    counts = [int(rng.integers(1, 5)) for _ in range(dims)]
    spaces = [("hbm", "vmem")[rng.integers(2)] for _ in range(2)]
    strides, bases = [], []
    for space in spaces:
        s = [int(rng.integers(-3, 4)) for _ in range(dims)]
        lo = sum(min(0, (c - 1) * k) for c, k in zip(counts, s))
        hi = sum(max(0, (c - 1) * k) for c, k in zip(counts, s))
        if hi - lo >= sizes[space]:
            s, lo, hi = [1] * dims, 0, sum(c - 1 for c in counts)
        strides.append(s)
        bases.append(int(rng.integers(-lo, sizes[space] - hi)))
    flag = int(rng.integers(0, flags))
    kind = rng.random()
    if reject is None and kind < bad / 2:                # golden.memory.validate rejects it
        which = int(rng.integers(3))
        reject = REJECTS[which] if which < 2 else REJECTS[2 + int(rng.integers(2))]
    if reject == "count":
        counts[rng.integers(dims)] = 0
    elif reject == "flag":
        flag = n_flags + int(rng.integers(0, 3))
    elif reject is not None:
        bases[REJECTS.index(reject) - 2] += hbm_words + vmem_words
    d = memory.Descriptor((spaces[0], bases[0]), (spaces[1], bases[1]), tuple(counts),
                          tuple(strides[0]), tuple(strides[1]), flag=flag)
    words = tc.descriptor_words(d)
    if reject is None and bad / 2 <= kind < bad:         # no Descriptor can hold it
        word, value = [(0, 1 << 30), (0, 1 << 18), (1, 1 << 24), (4, 1 << 24),
                       (7, 1 << 24), (10, 0xFF000000), (3, 1 << 12), (11, 0x80000001)][
            rng.integers(8)]
        words[word] = words[word] | value if word == 0 else value
        if word == 3:                                    # 2**12 * 2**12 words: too many
            words[4:6] = (1 << 12, 1)
    return words


def dma_program(rng, *, records, record_base, smem_words, vmem_lines, ops, steps=10,
                rewrite=0.3):
    """A program issuing the descriptor records ``records`` (at SMEM ``record_base + 12 *
    k``) with waits that cover them, and random scalar and vector bundles between (SMEM
    traffic below ``smem_words``); it ends waiting for every flag it used, and halts.
    Vector slots may race a DMA: the ISS says so (``race``) and the caller skips those.

    A ``dma`` takes the record after the last one's half the time (the one the chip reads
    ahead); with probability ``rewrite`` its record first gets a word of another record
    (``lw``/``sw`` through s29), so a record read ahead is written before it is used."""
    extra = vector_slots(ops, vmem_lines=vmem_lines)
    records = [np.array(words, np.uint32) for words in records]
    lines, totals, last = [], {}, None

    def wait(flag):
        lines.append(f"wait f{flag}, {totals[flag]}" +
                     (" | addi s2, s2, 1" if rng.random() < 0.3 else ""))

    for _ in range(steps):
        r = rng.random()
        if r < 0.4:
            k = int(rng.integers(len(records)))
            if last is not None and last + 1 < len(records) and rng.random() < 0.5:
                k = last + 1
            if rng.random() < rewrite:
                j, other = int(rng.integers(tc.DESCRIPTOR_WORDS)), int(rng.integers(len(records)))
                lines += [f"lw s29, {record_base + 12 * other + j}(s0)",
                          f"sw s29, {record_base + 12 * k + j}(s0)"]
                records[k][j] = records[other][j]
            last = k
            lines.append(f"dma {record_base + 12 * k}" +
                         (" | addi s1, s1, 1" if rng.random() < 0.3 else ""))
            try:
                d = tc.descriptor_from_words(records[k])
            except ValueError:
                continue                                  # the core stops there
            totals[d.flag] = totals.get(d.flag, 0) + d.words
            if rng.random() < 0.7:
                wait(d.flag)
        elif r < 0.5 and totals:
            wait(list(totals)[rng.integers(len(totals))])
        else:
            text = scalar_bundle(rng, smem_words, fault=0.0)
            text = " | ".join(p for p in text.split(" | ") if p.split()[0] not in (
                "fset", "fadd", "wait", "waitc", "delay")) or "nop"
            more = extra(rng)
            if more:
                text = more if text == "nop" else f"{text} | {more}"
            lines.append(text)
    for flag in totals:
        wait(flag)
    lines.append("halt")
    return "\n".join(lines)
