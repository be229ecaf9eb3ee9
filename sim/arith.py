"""Run the RTL arithmetic units on arrays of bit patterns (SPEC section 5).

Each function streams its operands through the unit's RTL, one operation per
cycle, and returns the results in order::

    >>> import numpy as np
    >>> from sim import arith
    >>> arith.fp32_add(np.array([0x3F800000], np.uint32), np.array([0x40000000], np.uint32))
    array([1077936128], dtype=uint32)

Operands are numpy arrays of bit patterns (``uint32`` for fp32, ``uint16``
for bf16) of equal shape; the result has the same shape.

Each call is a whole run (:mod:`sim.backends.whole_run`): the operands are
played from a memory inside the simulation and the results recorded into
one, :data:`CHUNK` operations at a time, so every backend runs the same RTL
with no Python per cycle and one Verilator build serves every call.
``waves`` records the first chunk.
"""

from dataclasses import dataclass

import numpy as np

from hdl.arith import BF16Multiplier, FP32Adder, FP32Divider, FP32Exp, FP32Multiplier, \
    FP32Rcp, FP32Rsqrt, FP32Sqrt, FP32ToBF16, check_numerics

from .backends import check_backend, run_whole
from .backends.whole_run import WholeRun
from .transactors import StreamSink, StreamSource, run_transactors

__all__ = ["fp32_add", "bf16_mul", "fp32_to_bf16", "fp32_mul", "fp32_div", "fp32_sqrt", "UNITS",
           "fp32_rcp", "fp32_rsqrt", "fp32_exp", "ArithUnit", "stream_through", "CHUNK"]

#: Operations per whole run: the depth of the harness memories, fixed so that
#: one build per unit and numerics serves calls of any size.
CHUNK = 4096


@dataclass(frozen=True)
class ArithUnit:
    """How to run one arithmetic unit: its component and its operand and result types."""
    name: str
    component: type
    operands: tuple          # (field name, numpy dtype), in payload order (LSB first)
    result: type

    def pack(self, arrays):
        """Pack operand arrays into one integer payload per operation."""
        packed = np.zeros(arrays[0].size, dtype=np.uint64)
        shift = 0
        for (_name, dtype), array in zip(self.operands, arrays):
            packed |= array.ravel().astype(np.uint64) << np.uint64(shift)
            shift += np.dtype(dtype).itemsize * 8
        return packed.tolist()


UNITS = {unit.name: unit for unit in (
    ArithUnit("fp32_add", FP32Adder, (("a", np.uint32), ("b", np.uint32)), np.uint32),
    ArithUnit("bf16_mul", BF16Multiplier, (("a", np.uint16), ("b", np.uint16)), np.uint32),
    ArithUnit("fp32_to_bf16", FP32ToBF16, (("a", np.uint32),), np.uint16),
    ArithUnit("fp32_mul", FP32Multiplier, (("a", np.uint32), ("b", np.uint32)), np.uint32),
    ArithUnit("fp32_div", FP32Divider, (("a", np.uint32), ("b", np.uint32)), np.uint32),
    ArithUnit("fp32_sqrt", FP32Sqrt, (("a", np.uint32),), np.uint32),
    ArithUnit("fp32_rcp", FP32Rcp, (("a", np.uint32),), np.uint32),
    ArithUnit("fp32_rsqrt", FP32Rsqrt, (("a", np.uint32),), np.uint32),
    ArithUnit("fp32_exp", FP32Exp, (("a", np.uint32),), np.uint32),
)}


async def stream_through(bench, *, beats, watchdog=1000):
    """Test program: send ``beats`` into ``operands``, return as many ``result`` beats."""
    sink = StreamSink("result", len(beats))
    await run_transactors(bench, [StreamSource("operands", beats), sink], watchdog=watchdog)
    return sink.beats


def _check_operands(unit, operands):
    arrays = []
    for (name, dtype), value in zip(unit.operands, operands):
        if not isinstance(value, np.ndarray):
            raise ValueError(f"{unit.name}: operand {name} must be a numpy array of "
                             f"{np.dtype(dtype).name} bit patterns, not {type(value).__name__}")
        if value.dtype != dtype:
            raise ValueError(f"{unit.name}: operand {name} must hold {np.dtype(dtype).name} "
                             f"bit patterns, not {value.dtype}")
        arrays.append(value)
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise ValueError(f"{unit.name}: operands differ in shape: "
                         + " vs ".join(str(a.shape) for a in arrays))
    return arrays


def _run(name, operands, numerics, backend, waves):
    unit = UNITS[name]
    check_numerics(numerics)
    check_backend(backend)
    arrays = _check_operands(unit, operands)
    shape = arrays[0].shape
    if arrays[0].size == 0:
        return np.zeros(shape, unit.result)
    beats = unit.pack(arrays)
    results = []
    for start in range(0, len(beats), CHUNK):
        chunk = beats[start:start + CHUNK]
        run = WholeRun(name, {"numerics": numerics}, play={"operands": chunk},
                       record={"result": len(chunk)}, depth=CHUNK)
        results += run_whole(run, backend=backend,
                             waves=waves if start == 0 else None).recorded["result"]
    return np.array(results, dtype=unit.result).reshape(shape)


def fp32_add(a, b, *, numerics="tpu", backend="amaranth", waves=None):
    """fp32 + fp32 on the RTL adder; ``a``, ``b`` and the result are ``uint32`` patterns."""
    return _run("fp32_add", (a, b), numerics, backend, waves)


def bf16_mul(a, b, *, numerics="tpu", backend="amaranth", waves=None):
    """bf16 x bf16 on the RTL multiplier; ``uint16`` operands, ``uint32`` fp32 product."""
    return _run("bf16_mul", (a, b), numerics, backend, waves)


def fp32_to_bf16(a, *, numerics="tpu", backend="amaranth", waves=None):
    """fp32 -> bf16 on the RTL converter; ``uint32`` operand, ``uint16`` result."""
    return _run("fp32_to_bf16", (a,), numerics, backend, waves)


def fp32_mul(a, b, *, numerics="tpu", backend="amaranth", waves=None):
    """fp32 x fp32 on the RTL multiplier; ``a``, ``b`` and the result are ``uint32`` patterns."""
    return _run("fp32_mul", (a, b), numerics, backend, waves)


def fp32_div(a, b, *, numerics="tpu", backend="amaranth", waves=None):
    """fp32 / fp32 on the RTL divider; ``a``, ``b`` and the result are ``uint32`` patterns."""
    return _run("fp32_div", (a, b), numerics, backend, waves)


def fp32_sqrt(a, *, numerics="tpu", backend="amaranth", waves=None):
    """Square root of fp32 on the RTL unit; ``uint32`` operand and result."""
    return _run("fp32_sqrt", (a,), numerics, backend, waves)


def fp32_rcp(a, *, numerics="tpu", backend="amaranth", waves=None):
    """Correctly rounded 1 / a on the RTL reciprocal; ``uint32`` operand and result."""
    return _run("fp32_rcp", (a,), numerics, backend, waves)


def fp32_rsqrt(a, *, numerics="tpu", backend="amaranth", waves=None):
    """Correctly rounded 1 / sqrt(a) on the RTL unit; ``uint32`` operand and result."""
    return _run("fp32_rsqrt", (a,), numerics, backend, waves)


def fp32_exp(a, *, numerics="tpu", backend="amaranth", waves=None):
    """exp of fp32 on the RTL unit (faithful, see ``hdl.arith.FP32Exp``); ``uint32`` in and out."""
    return _run("fp32_exp", (a,), numerics, backend, waves)
