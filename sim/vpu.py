"""Vector programs, elementwise operations and reductions on the VPU RTL (SPEC sections 4.2 and 6).

::

    >>> run = sim.vpu.run("vld v1, 0\\nadd v2, v1, v1\\nvst v2, 8", vmem=vmem)
    >>> run.vregs, run.vmem, run.cycles, run.executed, run.dual, run.error, run.error_index
    >>> sim.vpu.elementwise("rsqrt", a)                 # a: uint32 bit patterns
    >>> sim.vpu.reduce("sum", a)                        # a: uint32 [N, 8]

Each call is one or more whole runs (:mod:`sim.backends.whole_run`) of a
:class:`~hdl.vpu.VPUSystem`: the registers and VMEM are loaded through its
memory images, the program is played in two words a beat (a beat's two
words may issue together), the run ends when the VPU is idle with the whole
program taken, and the registers and VMEM are read back. :func:`run` equals
``golden.vpu.execute(..., on_error="stop")`` bit for bit, a stopped program
included.

:func:`elementwise` and :func:`reduce` pack their operands into VMEM lines
and generate the program (:func:`plan_elementwise`, :func:`plan_reduce`):
loads, the operation, stores, a phase of several vregs at a time so that the
units overlap. An input of any length is cut into passes of one fixed VMEM
(:data:`VMEM_LINES` lines) and program memory (:data:`PROGRAM_DEPTH` beats),
so every size shares one build per operation, ``lanes`` and ``numerics``:
a VPU with just that operation (``ops``) and no MXU, a small design that
elaborates and compiles in a fraction of the full VPU's time.
"""

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Const

from golden import vpu as golden_vpu
from golden.formats import check_numerics
from hdl.vpu import ERRORS as RTL_ERRORS
from hdl.vpu import OPTIONAL_OPS, PROGRAM_LAYOUT
from hdl.vpu.isa import check_ops

from .backends import check_backend, run_whole
from .backends.whole_run import WholeRun, memory_depth, pack_words, unpack_words

__all__ = ["run", "elementwise", "reduce", "VPURun", "Pass", "plan_elementwise", "plan_reduce",
           "program_beats", "vreg_image", "vregs_from_image", "BLOCK", "VMEM_LINES",
           "PROGRAM_DEPTH", "MXU_RESULTS"]

#: The VPU's name in the block catalogue.
BLOCK = "vpu"
#: VMEM lines of the builds :func:`elementwise` and :func:`reduce` use (VPUSystem's default).
VMEM_LINES = 256
#: Smallest program memory of a build, in beats of two words: programs up to twice this
#: many instructions share one build.
PROGRAM_DEPTH = 256
#: Result rows the MXU may hold queued by default (VPUSystem's default).
MXU_RESULTS = 16

_SUBLANES = golden_vpu.SUBLANES
_VREGS = golden_vpu.VREGS
#: The most lines a load or store can address (the 16-bit base field, from line 0).
_MAX_VMEM_LINES = 1 << 16
_REDUCE_INSTRUCTIONS = {"sum": "rsum", "max": "rmax", "min": "rmin"}


@dataclass(frozen=True)
class VPURun:
    """Result of :func:`run`.

    ``vregs``: uint32 [32, 8, lanes], ``vregs[r, s, j]`` sublane ``s``, lane
    ``j`` of ``v<r>``; ``vmem``: the whole VMEM, flat uint32 (line ``l``, lane
    ``j`` is word ``l * lanes + j``); ``cycles``: the whole run, from start to
    idle with the program taken; ``executed``: instructions that issued;
    ``dual``: cycles in which two issued; ``error``: None, or the fault that
    stopped the program (one of ``golden.vpu.ERRORS``, or ``"unsupported"``
    for an instruction a build with ``ops`` left out) and ``error_index`` the
    faulting instruction (nothing from it on executed); ``seconds``: the
    simulator's own time for the run (loading and read-back included, the
    build not).
    """
    vregs: np.ndarray
    vmem: np.ndarray
    cycles: int
    executed: int
    dual: int
    error: str | None = None
    error_index: int | None = None
    seconds: float = 0.0


# ---------------------------------------------------------------- images and beats

def vreg_image(vregs):
    """The ``vregs`` memory image of uint32 [32, 8, lanes]: entry ``r`` holds ``v<r>``,
    sublane ``s`` lane ``j`` at bits ``32 * (s * lanes + j)``."""
    raw = np.ascontiguousarray(vregs, dtype="<u4").reshape(len(vregs), -1)
    return [int.from_bytes(entry.tobytes(), "little") for entry in raw]


def vregs_from_image(entries, lanes):
    """uint32 [32, 8, lanes] from the ``vregs`` memory image (the inverse of :func:`vreg_image`)."""
    size = 4 * _SUBLANES * lanes
    raw = b"".join(int(entry).to_bytes(size, "little") for entry in entries)
    return np.frombuffer(raw, "<u4").astype(np.uint32).reshape(-1, _SUBLANES, lanes)


def program_beats(words):
    """The ``program`` stream's payloads of instruction words: two words a beat, the
    first in ``words[0]``; the last beat holds one word if the count is odd."""
    words = [int(w) for w in words]
    beats = []
    for start in range(0, len(words), 2):
        pair = words[start:start + 2]
        value = PROGRAM_LAYOUT.const({"words": pair + [0] * (2 - len(pair)),
                                      "count": len(pair)})
        beats.append(Const.cast(value).value)
    return beats


# ---------------------------------------------------------------- checks

def _positive(value, name, *, least=1):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(f"{name} must be an integer >= {least}, not {value!r}")
    return int(value)


def _probability(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1), not {value!r}")
    return float(value)


def _bits(value, name):
    array = np.asarray(value)
    if array.dtype not in (np.uint32, np.float32, np.int32):
        raise ValueError(f"{name} must be a uint32 bit-pattern array (or float32 / int32), "
                         f"not {array.dtype}")
    return array.view(np.uint32)


def _initial_vregs(vregs, lanes):
    if vregs is None:
        return np.zeros((_VREGS, _SUBLANES, lanes), np.uint32)
    vregs = _bits(vregs, "vregs")
    if vregs.shape != (_VREGS, _SUBLANES, lanes):
        raise ValueError(f"vregs must be [{_VREGS}, {_SUBLANES}, {lanes}], "
                         f"not {list(vregs.shape)}")
    return vregs


def _initial_vmem(vmem, lanes, vmem_lines):
    """(VMEM words, lines): ``vmem`` as given, or zeros of ``vmem_lines`` (default
    :data:`VMEM_LINES`); its lines must agree with ``vmem_lines`` and fit the VPU."""
    if vmem is None:
        lines = VMEM_LINES if vmem_lines is None else vmem_lines
        vmem = np.zeros(lines * lanes, np.uint32)
    else:
        vmem = _bits(vmem, "vmem")
        if vmem.ndim != 1 or vmem.size == 0 or vmem.size % lanes:
            raise ValueError(f"vmem must be a flat array of whole {lanes}-word lines, "
                             f"not shape {list(vmem.shape)}")
        lines = vmem.size // lanes
        if vmem_lines is not None and lines != vmem_lines:
            raise ValueError(f"vmem holds {lines} lines, but vmem_lines is {vmem_lines}")
    if not _SUBLANES <= lines <= _MAX_VMEM_LINES:
        raise ValueError(f"the VMEM must have {_SUBLANES} to {_MAX_VMEM_LINES} lines, "
                         f"not {lines}")
    return vmem, lines


# ---------------------------------------------------------------- whole programs

def _error_name(code):
    return None if code == 0 else RTL_ERRORS[code]


def _check_ops(ops):
    try:
        return check_ops(ops, OPTIONAL_OPS, what="ops")
    except TypeError as error:          # runners report every bad argument as a ValueError
        raise ValueError(str(error)) from None


def run(program, *, vregs=None, vmem=None, lanes=8, numerics="tpu", backend="amaranth",
        vmem_lines=None, mxu=None, mxu_results=MXU_RESULTS, idle=0.0, seed=0, depth=None,
        ops=None, waves=None):
    """Run a vector program on the VPU RTL; returns a :class:`VPURun`.

    Parameters
    ----------
    program : str or 1-D integer array
        Assembly text (``golden.vpu.assemble``) or instruction words.
    vregs : uint32 [32, 8, lanes], optional
        Initial registers (default all 0).
    vmem : 1-D uint32, optional
        The initial VMEM, ``vmem_lines`` whole lines (default all 0).
    lanes : int
        Lanes of the VPU (words per VMEM line).
    numerics : "tpu" or "ieee"
    backend : "amaranth", "verilator" or "icarus"
    vmem_lines : int, optional
        VMEM lines of the build; by default those of ``vmem``, or :data:`VMEM_LINES`.
    mxu : bool, optional
        Build with a ``lanes x lanes`` MXU behind the VPU (default: when
        ``lanes`` is a multiple of 8).
    mxu_results : int
        MXU result rows the VPU may have queued (a push_lhs beyond that is an error).
    idle : float
        Probability of an idle cycle on the program stream (seeded by ``seed``):
        it changes the cycles, never the result.
    depth : int, optional
        Beats of the build's program memory; by default the least power of two
        that holds the program, at least :data:`PROGRAM_DEPTH`.
    ops : collection of str, optional
        Build a VPU with only these of its optional instructions
        (``hdl.vpu.OPTIONAL_OPS``: ALU, transcendental, reduction); by default
        all. A smaller build compiles faster; an instruction left out stops the
        program with the ``unsupported`` error.
    waves : path, optional
        A waveform of the run.

    The build is keyed by ``lanes``, ``numerics``, ``vmem_lines``, ``mxu``,
    ``mxu_results``, ``ops`` and the program memory's depth; anything else is data.
    The result equals ``golden.vpu.execute(program, ..., on_error="stop")``
    with an MXU of ``capacity=mxu_results`` (or ``mxu=False``).
    """
    lanes = _positive(lanes, "lanes")
    check_numerics(numerics)
    check_backend(backend)
    if vmem_lines is not None:
        vmem_lines = _positive(vmem_lines, "vmem_lines")
    if mxu is None:
        mxu = lanes % _SUBLANES == 0
    elif not isinstance(mxu, bool):
        raise ValueError(f"mxu must be True, False or None, not {mxu!r}")
    elif mxu and lanes % _SUBLANES:
        raise ValueError(f"an MXU needs lanes to be a multiple of {_SUBLANES}, not {lanes}")
    mxu_results = _positive(mxu_results, "mxu_results", least=_SUBLANES)
    idle = _probability(idle, "idle")
    words = golden_vpu.program_words(program)
    vregs = _initial_vregs(vregs, lanes)
    vmem, vmem_lines = _initial_vmem(vmem, lanes, vmem_lines)
    beats = program_beats(words)
    if depth is None:
        depth = max(PROGRAM_DEPTH, memory_depth(len(beats)))
    elif _positive(depth, "depth") < len(beats):
        raise ValueError(f"the program takes {len(beats)} beats, more than depth {depth}")
    params = dict(lanes=lanes, numerics=numerics, vmem_lines=vmem_lines, mxu=mxu,
                  mxu_results=mxu_results)
    if ops is not None:
        params["ops"] = _check_ops(ops)
    whole = WholeRun(
        BLOCK, params, play={"program": beats}, record={}, until="idle", seed=seed,
        gaps={"program": idle}, depth=depth,
        load={"vregs": vreg_image(vregs), "vmem": pack_words(vmem, lanes)},
        dump=("vregs", "vmem"), watchdog=1000 + 8 * lanes)
    result = run_whole(whole, backend=backend, waves=waves)
    out = result.outputs
    error = _error_name(out["error"])
    return VPURun(vregs_from_image(result.memories["vregs"], lanes),
                  unpack_words(result.memories["vmem"], lanes), result.cycles, out["executed"],
                  out["dual"], error, None if error is None else out["error_index"],
                  result.seconds)


# ---------------------------------------------------------------- elementwise and reduce

@dataclass(frozen=True)
class Pass:
    """One whole run of :func:`elementwise` or :func:`reduce`: its ``program`` (words), the
    initial ``vmem`` (flat uint32) and ``results``, the VMEM words (flat indices) that
    hold its results afterwards, in order."""
    program: np.ndarray
    vmem: np.ndarray
    results: np.ndarray


def _encode(op, **fields):
    return golden_vpu.encode(golden_vpu.Instruction(op, **fields))


def _phases(chunks, group):
    """Chunk indices in phases of ``group``: each phase's loads, then its operations, then
    its stores, so that a phase's operations overlap and its registers are its own."""
    return [range(start, min(start + group, chunks)) for start in range(0, chunks, group)]


def plan_elementwise(op, operands, *, lanes, vmem_lines=VMEM_LINES):
    """The passes of ``op`` on ``operands`` (flat uint32 arrays of one length).

    A chunk is one vreg, ``8 * lanes`` elements. Operand ``t`` of a pass lies in VMEM
    as ``C`` chunks of 8 lines each from line ``8 * C * t`` (``C = vmem_lines //
    (8 * arity)``, the last chunk padded with zeros); chunk ``i`` is loaded into a
    register group of its own, operated on, and its result stored over operand 0's
    chunk, so a pass's results are the VMEM's first words.
    """
    arity = len(operands)
    per_chunk = _SUBLANES * lanes
    capacity = vmem_lines // (_SUBLANES * arity)
    if capacity < 1:
        raise ValueError(f"{op} needs at least {_SUBLANES * arity} VMEM lines, not {vmem_lines}")
    fields = ("va", "vb", "vc")[:arity]
    group = _VREGS // (arity + 1)
    total = operands[0].size
    passes = []
    for first in range(0, total, capacity * per_chunk):
        count = min(capacity * per_chunk, total - first)
        chunks = -(-count // per_chunk)
        vmem = np.zeros(vmem_lines * lanes, np.uint32)
        for t, operand in enumerate(operands):
            start = t * capacity * per_chunk
            vmem[start:start + count] = operand[first:first + count]
        words = []
        for phase in _phases(chunks, group):
            def reg(i, slot):
                return (i % group) * (arity + 1) + slot
            words += [_encode("vld", vr=reg(i, t), base=_SUBLANES * (t * capacity + i), stride=1)
                      for i in phase for t in range(arity)]
            words += [_encode(op, vd=reg(i, arity),
                              **{f: reg(i, t) for t, f in enumerate(fields)}) for i in phase]
            words += [_encode("vst", vr=reg(i, arity), base=_SUBLANES * i, stride=1)
                      for i in phase]
        passes.append(Pass(np.array(words, np.uint32), vmem, np.arange(count)))
    return passes


def plan_reduce(op, a, *, lanes, vmem_lines=VMEM_LINES):
    """The passes of reduction ``op`` ("sum", "max", "min") of ``a`` (uint32 [N, 8]).

    A chunk is ``lanes`` rows, one vreg: VMEM line ``8 * i + s``, lane ``j`` holds
    ``a[i * lanes + j, s]`` (chunk ``i`` of the pass). Each chunk is loaded, reduced
    (``rsum``, ``rmax``, ``rmin``) and its totals stored with line stride 0 over line
    ``8 * i`` (every sublane holds the totals, so the last write leaves them).
    """
    capacity = vmem_lines // _SUBLANES
    if capacity < 1:
        raise ValueError(f"reduce needs at least {_SUBLANES} VMEM lines, not {vmem_lines}")
    instruction = _REDUCE_INSTRUCTIONS[op]
    group = _VREGS // 2
    passes = []
    for first in range(0, len(a), capacity * lanes):
        count = min(capacity * lanes, len(a) - first)
        chunks = -(-count // lanes)
        rows = np.zeros((chunks * lanes, _SUBLANES), np.uint32)
        rows[:count] = a[first:first + count]
        vmem = np.zeros(vmem_lines * lanes, np.uint32)
        vmem[:rows.size] = rows.reshape(chunks, lanes, _SUBLANES).transpose(0, 2, 1).ravel()
        words = []
        for phase in _phases(chunks, group):
            words += [_encode("vld", vr=i % group, base=_SUBLANES * i, stride=1) for i in phase]
            words += [_encode(instruction, vd=group + i % group, va=i % group) for i in phase]
            words += [_encode("vst", vr=group + i % group, base=_SUBLANES * i, stride=0)
                      for i in phase]
        row = np.arange(count)
        results = (row // lanes) * _SUBLANES * lanes + row % lanes
        passes.append(Pass(np.array(words, np.uint32), vmem, results))
    return passes


def _run_passes(passes, instruction, *, lanes, numerics, backend, waves):
    """Every pass on one build (:data:`VMEM_LINES`, :data:`PROGRAM_DEPTH`, no MXU, only
    ``instruction`` of the optional ones); the results of all of them, in order."""
    results = []
    for index, step in enumerate(passes):
        got = run(step.program, vmem=step.vmem, lanes=lanes, numerics=numerics,
                  backend=backend, mxu=False, ops=(instruction,), depth=PROGRAM_DEPTH,
                  waves=waves if index == 0 else None)
        if got.error is not None:       # the runner's own programs are legal: an RTL bug
            raise RuntimeError(f"the VPU stopped a generated program at instruction "
                               f"{got.error_index} with error {got.error!r}")
        results.append(got.vmem[step.results])
    return np.concatenate(results) if results else np.zeros(0, np.uint32)


def elementwise(op, a, b=None, c=None, *, numerics="tpu", lanes=8, backend="amaranth",
                waves=None):
    """``golden.vpu.elementwise`` on the VPU RTL (SPEC section 6).

    Takes what the golden function takes, with the same checks and errors, and
    returns the same: ``uint32`` bit patterns of the operands' shape (compares
    give 0/1), ``uint16`` for ``f32_to_bf16``. ``lanes`` is the VPU's width,
    ``backend`` the simulator; ``waves`` records the first pass. Operands of any
    length run in passes of one build (see the module docstring).
    """
    operands = golden_vpu.elementwise_operands(op, a, b, c, numerics=numerics)
    lanes = _positive(lanes, "lanes")
    check_backend(backend)
    shape = operands[0].shape
    flat = [np.ascontiguousarray(x).ravel() for x in operands]
    out = _run_passes(plan_elementwise(op, flat, lanes=lanes), op, lanes=lanes,
                      numerics=numerics, backend=backend, waves=waves).reshape(shape)
    return out.astype(np.uint16) if op == "f32_to_bf16" else out


def reduce(op, a, *, numerics="tpu", lanes=8, backend="amaranth", waves=None):
    """``golden.vpu.reduce`` on the VPU RTL (SPEC section 6): each row of ``a`` (uint32
    [N, 8]) folded over its 8 sublanes from sublane 0; returns uint32 [N]. Arguments and
    errors as the golden function's, plus ``lanes``, ``backend`` and ``waves`` as in
    :func:`elementwise`."""
    a = golden_vpu.reduce_operand(op, a, numerics=numerics)
    lanes = _positive(lanes, "lanes")
    check_backend(backend)
    return _run_passes(plan_reduce(op, a, lanes=lanes), _REDUCE_INSTRUCTIONS[op], lanes=lanes,
                       numerics=numerics, backend=backend, waves=waves)
