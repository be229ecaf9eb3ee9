"""One chip's whole runs: a TensorCore program on ``hdl.tensorcore.TensorCoreSystem``.

:func:`run` loads IMEM, SMEM, VMEM and HBM, raises ``start``, runs until the core has
halted and the memory system is idle, and reads the memories back, with no Python per
cycle on any backend. :func:`execute` does the same for any program, also one that
faults or blocks, and returns the whole architectural state, registers included, for
co-simulation with ``golden.tensorcore.run``. :func:`matmul` is SPEC section 6's
``sim.chip.matmul``: the :mod:`sim.kernels.matmul` program, HBM to HBM.
"""

from dataclasses import dataclass

import numpy as np

from golden import tensorcore as tc
from golden import vpu
from golden.formats import check_numerics
from hdl.tensorcore.presets import preset as chip_preset
from hdl.tensorcore.sequencer import STALL_CAUSES

from .backends import check_backend, run_whole
from .backends.whole_run import WholeRun, memory_depth, pack_words, unpack_words
from .kernels import plan_matmul
from .transactors import SimulationHang

__all__ = ["ChipRun", "CoreRun", "ProgramRun", "ChipError", "COUNTERS", "execute", "run",
           "matmul", "MATMUL_CHIP"]

BLOCK = "tensorcore"

#: The chip ``matmul`` builds: 8 lanes and an 8x8 MXU, an 80-row MXU result queue (the
#: kernel keeps 10 pushes in flight), a 16-bundle vector queue (the sequencer runs that far
#: ahead of the VPU through flag waits and DMA issue), a VMEM line per cycle from HBM, and
#: only the ALU operations the kernel uses (a smaller build). Its memories have fixed sizes,
#: so one build serves every matmul that fits (1 MiB of HBM: 256x256x256 does, with room to
#: spare); a larger one is refused before any work.
MATMUL_CHIP = dict(lanes=8, mxu_results=80, vector_queue=16, vmem_lines=512, imem_depth=256,
                   words_per_cycle=8, read_latency=4, ops=("xor", "max"), hbm_words=1 << 18,
                   smem_words=1024)


class ChipError(RuntimeError):
    """A chip run that stopped with a core fault, or hung: the message names the pc, the
    bundle there and the flags."""


#: The chip's performance counters (``hdl.tensorcore.TensorCoreSystem``'s outputs).
COUNTERS = ("mxu_beats", "dma_cycles", "overlap_cycles",
            *(f"stall_{cause}" for cause in STALL_CAUSES))


@dataclass(frozen=True)
class CoreRun:
    """What :func:`execute` leaves: how the core stopped and its architectural state,
    everything ``golden.tensorcore.run``'s ``CoreState`` holds.

    ``status`` is "halted", "error" (``error`` names the fault, a
    ``golden.tensorcore.ERRORS`` name, and ``error_pc`` its bundle) or "blocked" (a wait
    that nothing in flight could end held the core for the watchdog's cycles; ``pc`` is
    the waiting bundle). ``sregs`` [32], ``vregs`` [32, 8, lanes], ``smem``, ``vmem`` and
    ``hbm`` (flat) are uint32; ``cycles`` counts from ``start`` to done (None when
    blocked); ``counters`` maps each of :data:`COUNTERS` to its value; ``vpu_error`` is
    the VPU's stop reason (0 unless the chip lacks an op the program uses);
    ``dma_rejected`` counts descriptors the DMA engine refused (0: the core judges each
    ``dma`` before it issues).
    """
    status: str
    error: str
    error_pc: int | None
    pc: int
    bundles: int
    sregs: np.ndarray
    vregs: np.ndarray
    smem: np.ndarray
    vmem: np.ndarray
    hbm: np.ndarray
    flags: np.ndarray
    cycles: int
    counters: dict
    vpu_error: int
    dma_rejected: int
    seconds: float
    message: str


@dataclass(frozen=True)
class ProgramRun:
    """What :func:`run` leaves: the final ``hbm``, ``vmem`` and ``smem`` (flat uint32),
    the ``flags``, the ``cycles`` from ``start`` to done, the bundles issued, and the
    performance counters (``hdl.tensorcore.TensorCoreSystem``'s): ``mxu_beats``,
    ``dma_cycles``, ``overlap_cycles``, and ``stalls``, the cycles the sequencer issued
    nothing by cause (``hdl.tensorcore.sequencer.STALL_CAUSES``)."""
    hbm: np.ndarray
    vmem: np.ndarray
    smem: np.ndarray
    flags: np.ndarray
    cycles: int
    bundles: int
    mxu_beats: int
    dma_cycles: int
    overlap_cycles: int
    stalls: dict
    seconds: float


@dataclass(frozen=True)
class ChipRun:
    """Result of :func:`matmul`.

    ``out`` is float32 [M, N]; ``cycles`` counts from ``start`` to the last result in
    HBM. ``utilization`` is the MXU's busy fraction of those cycles (a busy cycle takes
    an LHS row into the whole array); ``overlap`` the fraction of the cycles with DMA in
    flight during which the MXU also worked; ``stalls`` the sequencer's idle cycles by
    cause (:class:`ProgramRun`).
    """
    out: np.ndarray
    cycles: int
    utilization: float
    overlap: float
    seconds: float
    stalls: dict


def _flag_values(flags, n_flags):
    """The ``flags`` port's packed value as ``n_flags`` words."""
    return [(flags >> (32 * i)) & 0xFFFFFFFF for i in range(n_flags)]


def _image(name, words, size, per_entry=1):
    words = np.asarray(words, dtype=np.uint32).ravel()
    if words.size > size:
        raise ValueError(f"{name} holds {words.size} words, more than the chip's {size}")
    if words.size % per_entry:
        words = np.concatenate([words, np.zeros(per_entry - words.size % per_entry,
                                                np.uint32)])
    return pack_words(words, per_entry)


def _explain(program_words, outputs, n_flags):
    """``pc N (bundle text), flags [...]`` from a stopped or hung chip's outputs."""
    pc = outputs.get("pc", 0)
    bundle = "outside the program"
    if 0 <= pc < len(program_words):
        bundle = tc.disassemble(program_words[pc:pc + 1]).strip().splitlines()[-1].strip()
    values = _flag_values(outputs.get("flags", 0), n_flags)
    shown = ", ".join(f"f{i}={v}" for i, v in enumerate(values) if v)
    return f"pc {pc} ({bundle}); flags: {shown or 'all 0'}"


def execute(program, *, hbm=None, vmem=None, smem=None, sregs=None, vregs=None,
            numerics="tpu", backend="verilator", chip=None, watchdog=10_000, waves=None,
            progress=None):
    """Run a TensorCore program on the chip RTL until it stops, whatever the reason;
    returns a :class:`CoreRun` (a fault or a blocking wait is a result here, not an
    error: :func:`run` is the strict form).

    Parameters
    ----------
    program : str or integer words
        Assembly text (``golden.tensorcore.assemble``) or bundles.
    hbm, vmem, smem : 1-D uint32, optional
        Initial images (the rest of each memory is zero).
    sregs : uint32 [32], optional
        Initial scalar registers (``s0`` must be 0); default zeros.
    vregs : uint32 [32, 8, lanes], optional
        Initial vector registers; default zeros.
    numerics : "tpu" or "ieee"
    backend : "amaranth", "verilator" or "icarus"
    chip : dict, optional
        ``TensorCoreSystem`` parameters (default ``TensorCoreSystem``'s own); ``hbm_words``
        and ``smem_words`` grow to powers of two that hold the images.
    watchdog : int
        Cycles the core may wait on a flag with nothing in flight before it is blocked.
    waves : path, optional
    progress : callable, optional
        ``progress(cycle, status)`` now and then on long runs.

    Raises
    ------
    ValueError
        On bad arguments.
    """
    check_numerics(numerics)
    check_backend(backend)
    words = tc.program_words(program)
    params = dict(chip or {})
    params["numerics"] = numerics
    lanes = params.get("lanes", 8)
    per_hbm_line = params.get("words_per_cycle", 1)
    hbm = np.zeros(0, np.uint32) if hbm is None else np.asarray(hbm, np.uint32).ravel()
    smem = np.zeros(0, np.uint32) if smem is None else np.asarray(smem, np.uint32).ravel()
    # Powers of two, so that images of similar sizes share a build.
    params.setdefault("hbm_words", max(tc.DEFAULT_HBM_WORDS, memory_depth(hbm.size)))
    params.setdefault("smem_words", max(tc.DEFAULT_SMEM_WORDS, memory_depth(smem.size)))
    imem_depth = params.setdefault("imem_depth", 256)
    if len(words) > imem_depth:
        raise ValueError(f"the program has {len(words)} bundles, more than IMEM's "
                         f"{imem_depth}")
    n_flags = params.get("n_flags", 16)
    vreg_words = vpu.SUBLANES * lanes
    load = {"imem": pack_words(words, tc.BUNDLE_WORDS),
            "hbm": _image("hbm", hbm, params["hbm_words"], per_hbm_line),
            "smem": _image("smem", smem, params["smem_words"])}
    if vmem is not None:
        load["vmem"] = _image("vmem", vmem, params.get("vmem_lines", 256) * lanes, lanes)
    if sregs is not None:
        sregs = np.asarray(sregs, np.uint32)
        if sregs.shape != (tc.SREGS,) or sregs[0]:
            raise ValueError(f"sregs must be {tc.SREGS} words with s0 = 0")
        load["sregs"] = _image("sregs", sregs, tc.SREGS)
    if vregs is not None:
        load["vregs"] = _image("vregs", vregs, vpu.VREGS * vreg_words, vreg_words)
    dump = ("hbm", "vmem", "smem", "sregs", "vregs")
    whole = WholeRun(BLOCK, params, play={}, record={}, until="done", busy="busy",
                     inputs={"start": 1}, load=load, dump=dump, watchdog=watchdog)
    try:
        result = run_whole(whole, backend=backend, waves=waves, progress=progress)
        out, memories, cycles = result.outputs, result.memories, result.cycles
        seconds, status = result.seconds, "halted"
    except SimulationHang as hang:
        out, memories, seconds = hang.outputs or {}, hang.memories or {}, 0.0
        cycles, status = None, "blocked"
        message = f"the chip hung: {_explain(words, out, n_flags)} ({hang})"
    if out.get("error"):
        status = "error"
        message = (f"the core stopped with error {tc.ERRORS[out['error']]}: "
                   f"{_explain(words, {**out, 'pc': out['error_pc']}, n_flags)}")
    elif status == "halted":
        message = f"halted: {_explain(words, out, n_flags)}"
    return CoreRun(
        status=status, error=tc.ERRORS[out.get("error", 0)],
        error_pc=out["error_pc"] if status == "error" else None, pc=out.get("pc", 0),
        bundles=out.get("bundles", 0),
        sregs=unpack_words(memories.get("sregs", []), 1),
        vregs=unpack_words(memories.get("vregs", []), vreg_words).reshape(-1, vpu.SUBLANES,
                                                                          lanes),
        smem=unpack_words(memories.get("smem", []), 1),
        vmem=unpack_words(memories.get("vmem", []), lanes),
        hbm=unpack_words(memories.get("hbm", []), per_hbm_line),
        flags=np.array(_flag_values(out.get("flags", 0), n_flags), np.uint32),
        cycles=cycles, counters={name: out.get(name, 0) for name in COUNTERS},
        vpu_error=out.get("vpu_error", 0), dma_rejected=out.get("dma_rejected", 0),
        seconds=seconds, message=message)


def run(program, *, hbm=None, vmem=None, smem=None, numerics="tpu", backend="verilator",
        chip=None, watchdog=10_000, waves=None, progress=None):
    """Run a TensorCore program on the chip RTL to its ``halt``; returns a
    :class:`ProgramRun`. Parameters as :func:`execute`.

    Raises
    ------
    ChipError
        The core stopped on a fault, or the run hung; the message names the pc, its
        bundle and the flags.
    ValueError
        On bad arguments.
    """
    done = execute(program, hbm=hbm, vmem=vmem, smem=smem, numerics=numerics,
                   backend=backend, chip=chip, watchdog=watchdog, waves=waves,
                   progress=progress)
    if done.status != "halted":
        raise ChipError(done.message)
    counters = done.counters
    return ProgramRun(
        hbm=done.hbm, vmem=done.vmem, smem=done.smem, flags=done.flags, cycles=done.cycles,
        bundles=done.bundles, mxu_beats=counters["mxu_beats"],
        dma_cycles=counters["dma_cycles"], overlap_cycles=counters["overlap_cycles"],
        stalls={cause: counters[f"stall_{cause}"] for cause in STALL_CAUSES},
        seconds=done.seconds)


def matmul(x, w, *, activation=None, numerics="tpu", backend="verilator", waves=None,
           progress=None, preset=None):
    """``activation(x @ w)`` on one chip, HBM -> DMA -> VMEM -> MXU -> VPU -> DMA -> HBM.

    ``x`` bf16 [M, K] and ``w`` bf16 [K, N] (``ml_dtypes.bfloat16`` values or uint16
    patterns), any M, K, N; ``activation`` None or ``"relu"`` (``max(v, +0.0)``: relu(-0)
    is +0 and NaN stays NaN). The result equals ``golden.mxu.matmul(x, w)`` (then
    ``golden.vpu``'s ``max`` with +0.0) bit for bit. Returns a :class:`ChipRun`.

    The program (:func:`sim.kernels.plan_matmul`) runs on :data:`MATMUL_CHIP`, or with
    ``preset`` on that chip of ``hdl.tensorcore.presets.PRESETS`` (``"proto"``: the FPGA
    prototype's, behind ``sim.board``'s host bridge): the same result, in its cycles. A
    matmul past the chip's HBM or SMEM is a ValueError before anything is built.
    """
    check_numerics(numerics)
    check_backend(backend)
    base = MATMUL_CHIP if preset is None else chip_preset(preset)
    kernel = plan_matmul(x, w, activation=activation, vmem_lines=base["vmem_lines"])
    chip = dict(base, mxu_results=max(base["mxu_results"], kernel.mxu_results))
    for name, image in (("hbm_words", kernel.hbm), ("smem_words", kernel.smem)):
        if image.size > chip[name]:
            memory = name.removesuffix("_words").upper()
            (m, k), n = np.shape(x), np.shape(w)[1]
            which = "sim.chip.MATMUL_CHIP" if preset is None else f"the {preset} preset"
            raise ValueError(f"a {m}x{k} @ {k}x{n} matmul "
                             f"needs {image.size:,} words of {memory}; the chip has "
                             f"{chip[name]:,} ({which})")
    result = run(kernel.program, hbm=kernel.hbm, vmem=kernel.vmem, smem=kernel.smem,
                 numerics=numerics, backend=backend, chip=chip, waves=waves,
                 progress=progress)
    out = kernel.result(result.hbm).view(np.float32)
    cycles = max(result.cycles, 1)
    return ChipRun(out=out, cycles=result.cycles, utilization=result.mxu_beats / cycles,
                   overlap=result.overlap_cycles / max(result.dma_cycles, 1),
                   seconds=result.seconds, stalls=result.stalls)
