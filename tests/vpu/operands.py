"""Operand sets for the VPU's operations: special values, ties and edges, then random.

Shared by the golden model's tests and the RTL's, so both see the same corners.
"""

import numpy as np

from golden.formats import FP32
from verif.suites.arith import corpus

FLOAT_BINARY = ("add", "sub", "mul", "max", "min", "eq", "lt", "le")
INT_BINARY = ("iadd", "isub", "and", "or", "xor", "shl", "shr", "sra")
UNARY = ("f32_to_bf16", "bf16_to_f32", "f32_to_i32", "i32_to_f32", "rcp", "rsqrt", "exp")
INT_EDGES = np.array([0, 1, 2, 31, 32, 33, 63, 0x7FFFFFFF, 0x80000000, 0x80000001,
                      0xFFFFFFFF, 0xFFFFFFE0, 0x12345678], np.uint32)


def float_pairs(rng, n_random):
    a, b = corpus.class_cross(rng, FP32)                 # every (class, sign) x (class, sign)
    ops = corpus.operands(FP32)
    equal = rng.choice(ops, 200)                          # compares need equal operands too
    ra, rb = corpus.random_values(rng, FP32, n_random), corpus.random_values(rng, FP32, n_random)
    zeros = np.array([0, 0x80000000, 0, 0x80000000, 1, 0x80000001], np.uint32)
    return (np.concatenate([a, ops, rng.permutation(ops), equal, zeros, ra]),
            np.concatenate([b, rng.permutation(ops), ops, equal, zeros[::-1], rb]))


def int_pairs(rng, n_random):
    grid_a, grid_b = np.meshgrid(INT_EDGES, INT_EDGES)
    ra = rng.integers(0, 1 << 32, n_random, dtype=np.uint64).astype(np.uint32)
    rb = rng.integers(0, 1 << 32, n_random, dtype=np.uint64).astype(np.uint32)
    small = rng.integers(0, 64, n_random, dtype=np.uint64).astype(np.uint32)
    return (np.concatenate([grid_a.ravel(), ra, ra]),
            np.concatenate([grid_b.ravel(), rb, small]))


def unary_inputs(op, rng, n_random):
    if op == "bf16_to_f32":
        return np.arange(1 << 16, dtype=np.uint32)      # every bf16 pattern
    if op == "i32_to_f32":
        return np.concatenate([INT_EDGES, np.array([16777217, 16777219, 0xFEFFFFFF], np.uint32),
                               rng.integers(0, 1 << 32, n_random, dtype=np.uint64)
                               .astype(np.uint32)])
    extra = []
    if op == "f32_to_i32":   # halves (ties), and the edges of the int32 range
        halves = (np.arange(-40, 41) + 0.5).astype(np.float32).view(np.uint32)
        edges = np.float32([2.0 ** 31, -2.0 ** 31, 2147483520.0, -2147483520.0, 2.0 ** 32,
                            0.49999997, 1.5, 2.5, -0.5, -1.5]).view(np.uint32)
        extra = [halves, edges]
    return np.concatenate([corpus.operands(FP32), *extra,
                           corpus.random_values(rng, FP32, n_random)])
