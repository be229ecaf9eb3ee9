"""The ISS's scalar unit against plain Python integers: ALU ops, SMEM, branches and loops,
and the bundle rules (reads before writes, slot 1 wins, s0 reads 0)."""

import numpy as np
import pytest

from golden import tensorcore as tc

M = 1 << 32
EDGES = [0, 1, 2, 31, 32, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0x80000001,
         0xFFFFFFFE, 0xFFFFFFFF]


def signed(x):
    return int.from_bytes(x.to_bytes(4, "little"), "little", signed=True)


def oracle(op, a, b):
    """``op`` on 32-bit values, with ``b`` the register or the extended immediate."""
    return {
        "add": lambda: (a + b) % M, "sub": lambda: (a - b) % M,
        "and": lambda: a & b, "or": lambda: a | b, "xor": lambda: a ^ b,
        "sll": lambda: (a * 2 ** (b % 32)) % M, "srl": lambda: a // 2 ** (b % 32),
        "sra": lambda: (signed(a) // 2 ** (b % 32)) % M,
        "slt": lambda: int(signed(a) < signed(b)), "sltu": lambda: int(a < b),
    }[op]()


REGISTER_OPS = ["add", "sub", "and", "or", "xor", "sll", "srl", "sra", "slt", "sltu"]
# immediate op -> (register op, how the immediate extends, its range)
IMMEDIATE_OPS = {"addi": ("add", "sign", -32768, 32767), "andi": ("and", "zero", 0, 65535),
                 "ori": ("or", "zero", 0, 65535), "xori": ("xor", "zero", 0, 65535),
                 "slli": ("sll", "zero", 0, 31), "srli": ("srl", "zero", 0, 31),
                 "srai": ("sra", "zero", 0, 31), "slti": ("slt", "sign", -32768, 32767),
                 "sltiu": ("sltu", "sign", -32768, 32767)}


SOURCES = range(1, 13)            # read, never written: edge values keep flowing in
DESTINATIONS = [0, 13, 14, 15, 16, 17]


def _random_op(rng):
    rd = int(rng.choice(DESTINATIONS))
    ra, rb = (int(rng.integers(18)) for _ in range(2))
    kind = rng.integers(3)
    if kind == 0:
        op = REGISTER_OPS[rng.integers(len(REGISTER_OPS))]
        return f"{op} s{rd}, s{ra}, s{rb}", (op, rd, ra, ("reg", rb))
    if kind == 1:
        op = list(IMMEDIATE_OPS)[rng.integers(len(IMMEDIATE_OPS))]
        base, ext, lo, hi = IMMEDIATE_OPS[op]
        imm = int(rng.choice([lo, hi, 0, -1 if lo < 0 else 1, rng.integers(lo, hi + 1)]))
        return f"{op} s{rd}, s{ra}, {imm}", (base, rd, ra, ("imm", imm % M))
    imm = int(rng.integers(0, 1 << 16))
    return f"lui s{rd}, {imm}", ("lui", rd, 0, ("imm", imm))


def _oracle_step(ops, regs):
    regs, writes = list(regs), []
    for op, rd, ra, (kind, b) in ops:                # every op reads the registers as they were
        b = regs[b] if kind == "reg" else b
        writes.append((rd, b * 65536 if op == "lui" else oracle(op, regs[ra], b)))
    for rd, value in writes:                          # slot 0, then slot 1
        if rd:
            regs[rd] = value
    return regs


def test_random_alu_bundles_match_plain_integers(rng):
    """Every bundle's result, read through the watchdog: the state after k bundles."""
    for _ in range(2):
        regs = [0] + [int(rng.choice(EDGES)) if rng.random() < 0.6 else
                      int(rng.integers(0, M)) for _ in range(31)]
        start = np.array(regs, np.uint32)
        pairs = [[_random_op(rng) for _ in range(2)] for _ in range(120)]
        program = tc.assemble("\n".join(" | ".join(text for text, _ in pair) for pair in pairs)
                              + "\nhalt")
        for k, pair in enumerate(pairs, start=1):
            regs = _oracle_step([op for _, op in pair], regs)
            r = tc.run(program, sregs=start, max_bundles=k)
            assert r.status == "watchdog" and r.bundles == k
            assert r.sregs.tolist() == regs, f"after bundle {k - 1}: {pair}"
        assert tc.run(program, sregs=start).halted


def test_bundle_rules():
    start = np.arange(32, dtype=np.uint32)
    r = tc.run("addi s1, s2, 0 | addi s2, s1, 0\n"        # a swap: both read old values
               "addi s3, s0, 100 | addi s3, s0, 200\n"     # slot 1 wins
               "addi s0, s0, 5 | add s4, s0, s0\n"         # s0 stays 0
               "add s5, s0, s0 | sub s6, s0, s5\nhalt", sregs=start)   # s6 reads the old s5
    assert r.sregs[:7].tolist() == [0, 2, 1, 200, 0, 0, M - 5]
    with pytest.raises(ValueError, match="s0 reads 0"):
        tc.run("halt", sregs=np.ones(32, np.uint32))


def test_wide_constants_and_smem():
    r = tc.run("lui s1, 0xDEAD | lui s2, 0x8000\n"
               "ori s1, s1, 0xBEEF | addi s2, s2, -1\n"
               "sw s1, 1023(s0) | addi s3, s0, 1000\n"
               "sw s2, -1(s3)\n"
               "lw s4, 23(s3)\n"
               "lw s5, 999(s0)\nhalt")
    assert r.sregs[1:6].tolist() == [0xDEADBEEF, 0x7FFFFFFF, 1000, 0xDEADBEEF, 0x7FFFFFFF]
    assert r.smem[1023] == 0xDEADBEEF and r.smem[999] == 0x7FFFFFFF


BRANCHES = {"beq": lambda a, b: a == b, "bne": lambda a, b: a != b,
            "blt": lambda a, b: signed(a) < signed(b), "bge": lambda a, b: signed(a) >= signed(b),
            "bltu": lambda a, b: a < b, "bgeu": lambda a, b: a >= b}


@pytest.mark.parametrize("op", list(BRANCHES))
def test_branch_conditions(op):
    program = tc.assemble(f"{op} s1, s2, taken | addi s4, s4, 1\n"
                          "addi s3, s0, 1 | beq s0, s0, done\n"
                          "taken: addi s3, s0, 2\n"
                          "done: halt")
    for a in EDGES[::2] + [0x80000000]:
        for b in EDGES[1::2] + [0x80000000]:
            regs = np.zeros(32, np.uint32)
            regs[1:3] = a, b
            r = tc.run(program, sregs=regs)
            assert r.sregs[3] == (2 if BRANCHES[op](a, b) else 1), (a, b)
            assert r.sregs[4] == 1          # the other slot of a branch bundle executes
            assert r.bundles == 3


def test_loop_sums_one_to_n():
    program = tc.assemble("""
        lw s1, 0(s0)                        # n
        top: add s2, s2, s1 | loop s1, top
        sw s2, 1(s0) | halt
    """)
    for n in (1, 2, 7, 100):
        smem = np.zeros(16, np.uint32)
        smem[0] = n
        r = tc.run(program, smem=smem)
        assert r.halted and r.smem[1] == n * (n + 1) // 2 and r.sregs[1] == 0
        assert r.bundles == n + 2 and r.pc == 2


def test_nested_loops_and_backward_jumps():
    r = tc.run("""
        addi s1, s0, 3
        outer: addi s2, s0, 4
        inner: addi s3, s3, 1 | loop s2, inner
        addi s4, s4, 1 | loop s1, outer
        halt
    """)
    assert r.sregs[1:5].tolist() == [0, 0, 12, 3] and r.bundles == 1 + 3 * (1 + 4 + 1) + 1


def test_control_errors():
    r = tc.run("addi s1, s0, 1\nbeq s0, s0, -2")        # to pc -1: 2**32 - 1
    assert (r.status, r.error, r.error_pc, r.pc) == ("error", "imem_range", M - 1, M - 1)
    r = tc.run("addi s1, s0, 1")                        # runs off the end
    assert (r.error, r.error_pc, r.sregs[1]) == ("imem_range", 1, 1)
    r = tc.run("top: beq s0, s0, top", max_bundles=50)
    assert r.status == "watchdog" and r.bundles == 50
    assert "50 bundles" in r.message and "pc 0 to 0" in r.message
