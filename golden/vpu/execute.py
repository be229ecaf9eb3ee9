"""What each VPU instruction does: :func:`execute` runs a program on the VPU's state,
:func:`elementwise` and :func:`reduce` apply its operations to arrays (SPEC section 6),
and :class:`MXUState` is the MXU link.

State
-----
* 32 vector registers (vregs), each ``SUBLANES x lanes`` 32-bit words (8 x 8 by default):
  ``vregs[r, s, j]`` is sublane ``s``, lane ``j`` of ``v<r>``.
* VMEM, a flat ``uint32`` word image of lines of ``lanes`` words: line ``l``, lane ``j``
  is word ``l * lanes + j`` (SPEC section 6).
* The MXU as the VPU sees it (:class:`MXUState`).

Instructions execute in program order, each seeing the results of all
earlier ones; the RTL's dual issue and interlocks must not change that.

Program errors
--------------
A fault (``golden.vpu.isa.ERRORS``) stops the program: the faulting instruction does
nothing, and nothing after it runs; :func:`execute` with ``on_error="stop"`` returns the
state at that point with the fault's kind and index, as the RTL stops.

Operations (``op vd, va, vb`` computes ``vd = va op vb`` on every word)
----------------------------------------------------------------------
* fp32 ``add sub mul max min`` and compares ``eq lt le`` (0/1 masks, false on
  NaN), ``select vd, va, vb, vc`` (``va`` where ``vc == 1``, else ``vb``;
  the words move unchanged);
* int32 ``iadd isub`` (wrapping), ``and or xor``, ``shl shr sra`` by
  ``vb mod 32``;
* conversions ``f32_to_bf16`` (bf16 in the low 16 bits, upper 16 bits 0),
  ``bf16_to_f32`` (reads the low 16 bits), ``f32_to_i32``, ``i32_to_f32``;
* ``rcp rsqrt exp`` (:mod:`golden.transcendental`);
* ``rsum rmax rmin vd, va``: each lane of ``va`` reduced over its 8 sublanes,
  folded left from sublane 0, the result written to every sublane of ``vd``;
* ``vld vr, base, stride`` / ``vst vr, base, stride``: sublane ``s`` of
  ``vr`` is VMEM line ``base + s * stride`` (stride 0..31; a ``vst`` with
  stride 0 leaves sublane 7 in the line);
* ``push_weights va``, ``push_lhs va``, ``push_lhs_acc va, vb``, ``pop vd``: the MXU
  link (:class:`MXUState`);
* ``nop``.

Numerics follow SPEC section 3 in both modes ("tpu", "ieee"); every NaN an
fp32 operation produces is 0x7FC00000.
"""

import dataclasses
from collections import deque

import numpy as np

from .. import arith, transcendental
from ..formats import BF16, FP32, check_numerics, flush_subnormal
from ..mxu import matmul
from .asm import program_words
from .isa import (_REDUCE_INSTRUCTIONS, DEFAULT_VMEM_LINES, ELEMENTWISE_OPS, REDUCE_OPS, SUBLANES,
                  VREGS, IllegalInstruction, ProgramError, decode)

__all__ = [
    "MXUState", "VPUState", "execute", "elementwise", "elementwise_operands", "reduce",
    "reduce_operand",
]

_SIGN = np.uint32(FP32.sign_mask)


def _u32(x, name):
    x = np.asarray(x)
    if x.dtype in (np.uint32, np.float32, np.int32):
        return x.view(np.uint32)
    raise ValueError(f"{name} must be a uint32 bit-pattern array (or float32 / int32), "
                     f"not {x.dtype}")


def _bf16_bits(x, name):
    x = np.asarray(x)
    if x.dtype == BF16.value_dtype:
        return x.view(np.uint16)
    if x.dtype == np.uint16:
        return x
    if x.dtype == np.uint32:                   # a vreg word: bf16 in the low half
        return (x & np.uint32(0xFFFF)).astype(np.uint16)
    raise ValueError(f"{name} must be a uint16 (bf16) or uint32 bit-pattern array, not {x.dtype}")


def _fp_in(x, numerics):
    return flush_subnormal(x, FP32) if numerics == "tpu" else x


def _fp_out(bits, numerics):
    bits = np.where(_is_nan(bits), np.uint32(FP32.qnan), bits)
    return flush_subnormal(bits, FP32) if numerics == "tpu" else bits


def _is_nan(bits):
    return (bits & np.uint32(0x7FFFFFFF)) > np.uint32(FP32.inf)


def _mul(a, b, numerics):
    a, b = _fp_in(a, numerics), _fp_in(b, numerics)
    with np.errstate(all="ignore"):
        product = a.view(np.float32) * b.view(np.float32)
    return _fp_out(product.view(np.uint32), numerics)


def _order_key(bits):
    # Unsigned order of the keys is the order of the values, with -0 < +0.
    return np.where(bits & _SIGN, ~bits, bits | _SIGN)


def _extremum(a, b, numerics, pick_a):
    a, b = _fp_in(a, numerics), _fp_in(b, numerics)
    out = np.where(pick_a(_order_key(a), _order_key(b)), a, b)
    return np.where(_is_nan(a) | _is_nan(b), np.uint32(FP32.qnan), out)


def _compare(a, b, numerics, cmp):
    a, b = _fp_in(a, numerics), _fp_in(b, numerics)
    with np.errstate(all="ignore"):
        return cmp(a.view(np.float32), b.view(np.float32)).astype(np.uint32)


def _bf16_to_f32(a, numerics):
    if numerics == "tpu":
        a = flush_subnormal(a, BF16)
    wide = a.astype(np.uint32) << np.uint32(16)
    return np.where(_is_nan(wide), np.uint32(FP32.qnan), wide)


def _f32_to_i32(a, numerics):
    a = _fp_in(a, numerics)
    with np.errstate(all="ignore"):
        v = np.rint(a.view(np.float32).astype(np.float64))     # ties to even
    v = np.clip(np.where(np.isnan(v), 0.0, v), -2.0 ** 31, 2.0 ** 31 - 1)
    return v.astype(np.int64).astype(np.int32).view(np.uint32)


def _shift(a, b, fn):
    return fn(a, (b & np.uint32(31)).astype(a.dtype))


_BINARY = {
    "add": lambda a, b, n: arith.fp32_add(a, b, numerics=n),
    # a - b is exactly a + (-b), signed zeros included.
    "sub": lambda a, b, n: arith.fp32_add(a, b ^ _SIGN, numerics=n),
    "mul": _mul,
    "max": lambda a, b, n: _extremum(a, b, n, np.greater_equal),
    "min": lambda a, b, n: _extremum(a, b, n, np.less_equal),
    "eq": lambda a, b, n: _compare(a, b, n, np.equal),
    "lt": lambda a, b, n: _compare(a, b, n, np.less),
    "le": lambda a, b, n: _compare(a, b, n, np.less_equal),
    "iadd": lambda a, b, n: a + b,
    "isub": lambda a, b, n: a - b,
    "and": lambda a, b, n: a & b,
    "or": lambda a, b, n: a | b,
    "xor": lambda a, b, n: a ^ b,
    "shl": lambda a, b, n: _shift(a, b, np.left_shift),
    "shr": lambda a, b, n: _shift(a, b, np.right_shift),
    "sra": lambda a, b, n: _shift(a.view(np.int32), b, np.right_shift).view(np.uint32),
}
_UNARY = {
    "f32_to_bf16": lambda a, n: arith.fp32_to_bf16(a, numerics=n),
    "f32_to_i32": _f32_to_i32,
    "i32_to_f32": lambda a, n: a.view(np.int32).astype(np.float32).view(np.uint32),
    "rcp": lambda a, n: transcendental.rcp(a, numerics=n),
    "rsqrt": lambda a, n: transcendental.rsqrt(a, numerics=n),
    "exp": lambda a, n: transcendental.exp(a, numerics=n),
}


def _arity(op):
    return 3 if op == "select" else 2 if op in _BINARY else 1


def elementwise_operands(op, a, b=None, c=None, *, numerics="tpu"):
    """Check the arguments of :func:`elementwise`; returns its operands as ``uint32`` words.

    One array per operand the op takes, of one shape: as given for ``uint32``
    (``float32`` and ``int32`` viewed as such); for ``bf16_to_f32`` a
    ``uint16`` or ``bfloat16`` operand widened to the word whose low half
    it is. A runner that packs operands into vregs uses this, so that it
    accepts and rejects exactly what :func:`elementwise` does.
    """
    check_numerics(numerics)
    if op not in ELEMENTWISE_OPS:
        raise ValueError(f"unknown op {op!r}; ops: {' '.join(ELEMENTWISE_OPS)}")
    arity = _arity(op)
    given = [x is not None for x in (a, b, c)]
    if given != [True] * arity + [False] * (3 - arity):
        names = ", ".join("abc"[:arity])
        raise ValueError(f"{op} takes {names} only")
    if op == "bf16_to_f32":
        a = np.asarray(a)
        bits = _bf16_bits(a, "a")
        return (a if a.dtype == np.uint32 else bits.astype(np.uint32)),
    operands = tuple(_u32(x, n) for x, n in zip((a, b, c), "abc") if x is not None)
    if any(x.shape != operands[0].shape for x in operands):
        raise ValueError(f"{op}: operand shapes differ: "
                         f"{', '.join(str(x.shape) for x in operands)}")
    return operands


def elementwise(op, a, b=None, c=None, *, numerics="tpu"):
    """Apply VPU operation ``op`` element by element (SPEC section 6).

    Parameters
    ----------
    op : str
        One of :data:`ELEMENTWISE_OPS`.
    a, b, c : arrays of one shape
        Bit patterns: ``uint32`` (``float32`` and ``int32`` are viewed as
        such); for ``bf16_to_f32``, ``a`` is ``uint16`` (or
        ``ml_dtypes.bfloat16``), or ``uint32`` whose low 16 bits are read.
        Unary operations take ``a`` only, ``select`` takes all three.
    numerics : "tpu" or "ieee"

    Returns
    -------
    np.ndarray
        ``uint32`` bit patterns (compares give 0/1), ``uint16`` for ``f32_to_bf16``.
    """
    operands = elementwise_operands(op, a, b, c, numerics=numerics)
    if op == "bf16_to_f32":
        return _bf16_to_f32(_bf16_bits(operands[0], "a"), numerics)
    if op == "select":
        a, b, c = operands
        return np.where(c == 1, a, b).astype(np.uint32)
    if len(operands) == 2:
        return np.asarray(_BINARY[op](*operands, numerics), dtype=np.uint32)
    return np.asarray(_UNARY[op](operands[0], numerics))


def reduce_operand(op, a, *, numerics="tpu"):
    """Check the arguments of :func:`reduce`; returns ``a`` as ``uint32`` [N, 8]."""
    check_numerics(numerics)
    if op not in REDUCE_OPS:
        raise ValueError(f"reduce op must be one of {', '.join(REDUCE_OPS)}, not {op!r}")
    a = _u32(a, "a")
    if a.ndim != 2 or a.shape[1] != SUBLANES:
        raise ValueError(f"a must be [N, {SUBLANES}], not {list(a.shape)}")
    return a


def reduce(op, a, *, numerics="tpu"):
    """Reduce each row of ``a`` (uint32 [N, 8]) over its 8 sublanes, in order (SPEC section 6).

    ``((a[:, 0] op a[:, 1]) op a[:, 2]) ... op a[:, 7]`` with ``op`` "sum"
    (fp32 add), "max" or "min" (as in :func:`elementwise`). Returns uint32 [N].
    """
    a = reduce_operand(op, a, numerics=numerics)
    step = {"sum": "add", "max": "max", "min": "min"}[op]
    acc = a[:, 0]
    for s in range(1, SUBLANES):
        acc = elementwise(step, acc, a[:, s], numerics=numerics)
    return acc


# ---------------------------------------------------------------- the MXU link

class MXUState:
    """The MXU behind the VPU: a ``lanes x lanes`` weight tile, double-buffered, and a result queue.

    * ``push_weights``: the 8 sublanes of a vreg become 8 weight rows (row
      ``k`` holds ``W[k, :]``, bf16 from each word's low 16 bits), appended
      to the shadow tile. A tile is ``lanes`` rows, so ``lanes / 8`` pushes.
      Pushing into a full shadow is an error (the RTL would wait forever for
      a swap that only a later ``push_lhs`` brings).
    * ``push_lhs``: if the shadow holds a whole tile it becomes the active
      tile first (the swap). Then the 8 sublanes, as bf16 rows ``x[m, :]``,
      produce ``golden.mxu.matmul(x, W)``, 8 fp32 rows, queued in order. Until
      the first swap the active tile is all +0.0.
    * ``push_lhs_acc``: ``push_lhs`` whose sums start from a second vreg's fp32
      words (row ``m`` from sublane ``m``), ``golden.mxu.matmul(x, W, acc=...)``
      instead of from +0.0: a K-tile's results chained into the next tile's
      keep a long K bit-exact, one rounding per product as in one long chain.
    * ``pop``: the oldest 8 result rows land in a vreg, row ``m`` in sublane
      ``m``; popping fewer than 8 queued rows is an error.

    ``capacity`` (rows, default unbounded) makes queuing more results an
    error, for an RTL whose result FIFO would otherwise block the program.
    The errors are :class:`ProgramError` (kinds "weights_full", "pop_empty",
    "results_full"), raised before anything changes.
    """

    def __init__(self, *, lanes=8, numerics="tpu", capacity=None):
        check_numerics(numerics)
        if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < SUBLANES \
                or lanes % SUBLANES:
            raise ValueError(f"the MXU link needs lanes to be a positive multiple of "
                             f"{SUBLANES}, not {lanes!r}")
        if capacity is not None and (not isinstance(capacity, int) or capacity < SUBLANES):
            raise ValueError(f"capacity must be None or an integer >= {SUBLANES}, "
                             f"not {capacity!r}")
        self.lanes, self.numerics, self.capacity = lanes, numerics, capacity
        self.active = np.zeros((lanes, lanes), np.uint16)
        self.shadow = []
        self.results = deque()

    def _rows(self, vreg):
        vreg = np.asarray(vreg, dtype=np.uint32)
        if vreg.shape != (SUBLANES, self.lanes):
            raise ValueError(f"a vreg is [{SUBLANES}, {self.lanes}], not {list(vreg.shape)}")
        return (vreg & np.uint32(0xFFFF)).astype(np.uint16)

    def push_weights(self, vreg):
        rows = self._rows(vreg)
        if len(self.shadow) + SUBLANES > self.lanes:
            raise ProgramError("push_weights: the shadow weight tile is full; push_lhs "
                               "swaps it in before more weights can load", kind="weights_full")
        self.shadow.extend(rows)

    def push_lhs(self, vreg, acc=None):
        rows = self._rows(vreg)
        if acc is not None:
            acc = np.asarray(acc, dtype=np.uint32).reshape(SUBLANES, self.lanes)
        if self.capacity is not None and len(self.results) + SUBLANES > self.capacity:
            raise ProgramError(f"push_lhs: {len(self.results)} result rows are waiting and "
                               f"the result queue holds {self.capacity}", kind="results_full")
        if len(self.shadow) == self.lanes:
            self.active = np.array(self.shadow, dtype=np.uint16)
            self.shadow = []
        out = matmul(rows, self.active, numerics=self.numerics, acc=acc).view(np.uint32)
        self.results.extend(out)

    def pop(self):
        if len(self.results) < SUBLANES:
            raise ProgramError(f"pop: only {len(self.results)} MXU result rows are waiting, "
                               f"not {SUBLANES}", kind="pop_empty")
        return np.array([self.results.popleft() for _ in range(SUBLANES)], dtype=np.uint32)


# ---------------------------------------------------------------- the executor

@dataclasses.dataclass
class VPUState:
    """Architectural state after :func:`execute`.

    ``error`` is the index of the instruction whose fault stopped the run
    (nothing from it on executed), or None, and ``error_kind`` that fault
    (one of :data:`ERRORS`); ``executed`` counts the instructions that ran.
    ``mxu`` is None for a VPU without an MXU.
    """
    vregs: np.ndarray
    vmem: np.ndarray
    mxu: MXUState | None
    executed: int
    error: int | None = None
    error_kind: str | None = None


def _check_lanes(lanes):
    if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 1:
        raise ValueError(f"lanes must be a positive integer, not {lanes!r}")


def _initial_vregs(vregs, lanes):
    if vregs is None:
        return np.zeros((VREGS, SUBLANES, lanes), np.uint32)
    vregs = _u32(vregs, "vregs")
    if vregs.shape != (VREGS, SUBLANES, lanes):
        raise ValueError(f"vregs must be [{VREGS}, {SUBLANES}, {lanes}], not {list(vregs.shape)}")
    return vregs.copy()


def _initial_vmem(vmem, lanes):
    if vmem is None:
        return np.zeros(DEFAULT_VMEM_LINES * lanes, np.uint32)
    vmem = _u32(vmem, "vmem")
    if vmem.ndim != 1 or vmem.size % lanes:
        raise ValueError(f"vmem must be a flat array of whole {lanes}-word lines, "
                         f"not shape {list(vmem.shape)}")
    return vmem.copy()


def _lines(ins, n_lines):
    lines = ins.base + ins.stride * np.arange(SUBLANES)
    if lines[-1] >= n_lines:
        raise ProgramError(f"{ins.op} touches VMEM line {lines[-1]} of {n_lines}",
                           kind="vmem_range")
    return lines


def _step(ins, vregs, vmem, mxu, lanes, numerics):
    op = ins.op
    if op == "nop":
        return
    if op in _REDUCE_INSTRUCTIONS:
        total = reduce(_REDUCE_INSTRUCTIONS[op], vregs[ins.va].T, numerics=numerics)
        vregs[ins.vd] = total[None, :]
    elif op in ELEMENTWISE_OPS:
        operands = [vregs[getattr(ins, f)] for f in ins.spec.reads]
        vregs[ins.vd] = elementwise(op, *operands, numerics=numerics)
    elif op in ("vld", "vst"):
        words = vmem.reshape(-1, lanes)
        lines = _lines(ins, words.shape[0])
        if op == "vld":
            vregs[ins.vr] = words[lines]
        else:
            for s, line in enumerate(lines):      # in sublane order: the last write wins
                words[line] = vregs[ins.vr, s]
    elif op == "push_weights":
        mxu.push_weights(vregs[ins.va])
    elif op == "push_lhs":
        mxu.push_lhs(vregs[ins.va])
    elif op == "push_lhs_acc":
        mxu.push_lhs(vregs[ins.va], acc=vregs[ins.vb])
    elif op == "pop":
        vregs[ins.vd] = mxu.pop()
    else:                                          # pragma: no cover - the table and this agree
        raise AssertionError(f"no semantics for {op}")


def execute(program, *, vregs=None, vmem=None, lanes=8, numerics="tpu", mxu=None,
            on_error="raise"):
    """Run ``program`` to its end (or its first fault); returns the final :class:`VPUState`.

    Parameters
    ----------
    program : str or 1-D integer array
        Assembly text or instruction words.
    vregs : uint32 [32, 8, lanes], optional
        Initial registers (default all 0). Not modified.
    vmem : 1-D uint32, optional
        Initial VMEM words, whole lines (default :data:`DEFAULT_VMEM_LINES` lines of 0).
        Not modified.
    lanes : int
        Lanes per vreg (words per VMEM line). The MXU link needs a multiple of 8.
    numerics : "tpu" or "ieee"
    mxu : MXUState or False, optional
        MXU state to continue from (it is updated in place); False for a VPU
        without an MXU; default a fresh one (unbounded result queue) when
        ``lanes`` allows it, else none.
    on_error : "raise" or "stop"
        What a program error (any of :data:`ERRORS` but "illegal") does:
        raise, or stop the run there as the RTL does, returning the state
        before the faulting instruction with ``error`` and ``error_kind``
        set. An illegal word always stops the run.

    Raises
    ------
    ValueError
        On bad arguments. With ``on_error="raise"``, :class:`ProgramError` (a
        ValueError) on a program error, its message naming the instruction:
        a VMEM line out of range, weights pushed into a full shadow tile, an
        LHS push beyond the MXU's ``capacity``, a pop with too few results,
        or an MXU instruction without an MXU.
    """
    check_numerics(numerics)
    _check_lanes(lanes)
    if on_error not in ("raise", "stop"):
        raise ValueError(f"on_error must be 'raise' or 'stop', not {on_error!r}")
    words = program_words(program)
    vregs = _initial_vregs(vregs, lanes)
    vmem = _initial_vmem(vmem, lanes)
    if mxu is False:
        mxu = None
    elif mxu is None:
        mxu = MXUState(lanes=lanes, numerics=numerics) if lanes % SUBLANES == 0 else None
    elif not isinstance(mxu, MXUState) or mxu.lanes != lanes or mxu.numerics != numerics:
        raise ValueError(f"mxu must be False, None or an MXUState with lanes={lanes} and "
                         f"numerics={numerics!r}")
    for index, word in enumerate(words):
        try:
            ins = decode(word)
        except IllegalInstruction:
            return VPUState(vregs, vmem, mxu, index, index, "illegal")
        try:
            if ins.spec.unit == "mxu" and mxu is None:
                why = f"lanes to be a multiple of {SUBLANES}, not {lanes}" if lanes % SUBLANES \
                    else "an MXU, and this VPU has none"
                raise ProgramError(f"the MXU link needs {why}", kind="no_mxu")
            _step(ins, vregs, vmem, mxu, lanes, numerics)
        except ProgramError as error:
            if on_error == "stop":
                return VPUState(vregs, vmem, mxu, index, index, error.kind)
            raise ProgramError(f"instruction {index} ({ins}): {error}", kind=error.kind,
                               index=index) from None
    return VPUState(vregs, vmem, mxu, len(words))
