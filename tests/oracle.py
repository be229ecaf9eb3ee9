"""The independent oracle: Berkeley SoftFloat (softfloatpy), one operation at a time.

Nothing here uses numpy arithmetic or the golden package: the "tpu" rules
(flush subnormal operands and results, canonical NaN) are restated on plain
integers so that a mistake in the golden wrappers cannot hide here too.
"""

import softfloatpy as sf

FP32_QNAN, BF16_QNAN = 0x7FC00000, 0x7FC0


def _f32(bits):
    return sf.Float32.from_bytes(int(bits).to_bytes(4, "big"))


def _bf16(bits):
    return sf.BFloat16.from_bytes(int(bits).to_bytes(2, "big"))


def _bits(value):
    return int.from_bytes(value.to_bytes(), "big")


def _flush(bits, fbits, ebits):
    exp = (bits >> fbits) & ((1 << ebits) - 1)
    if exp == 0:
        return bits & (1 << (fbits + ebits))      # keep only the sign
    return bits


def _finish(bits, fbits, qnan, numerics):
    exp_all = ((1 << 8) - 1) << fbits
    if bits & exp_all == exp_all and bits & ((1 << fbits) - 1):
        return qnan
    return _flush(bits, fbits, 8) if numerics == "tpu" else bits


def fp32_add(a, b, numerics):
    if numerics == "tpu":
        a, b = _flush(a, 23, 8), _flush(b, 23, 8)
    return _finish(_bits(sf.f32_add(_f32(a), _f32(b))), 23, FP32_QNAN, numerics)


def bf16_mul(a, b, numerics):
    if numerics == "tpu":
        a, b = _flush(a, 7, 8), _flush(b, 7, 8)
    # bf16 -> f32 is exact, and f32_mul rounds the exact product once.
    product = sf.f32_mul(sf.bf16_to_f32(_bf16(a)), sf.bf16_to_f32(_bf16(b)))
    return _finish(_bits(product), 23, FP32_QNAN, numerics)


def fp32_to_bf16(a, numerics):
    if numerics == "tpu":
        a = _flush(a, 23, 8)
    return _finish(_bits(sf.f32_to_bf16(_f32(a))), 7, BF16_QNAN, numerics)


def apply(op, numerics, *operands):
    """Run ``op`` elementwise over equal-length integer sequences; returns a list of ints."""
    fn = {"fp32_add": fp32_add, "bf16_mul": bf16_mul, "fp32_to_bf16": fp32_to_bf16}[op]
    return [fn(*(int(x) for x in ops), numerics) for ops in zip(*operands)]
