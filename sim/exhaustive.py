"""Exhaustive checks on a compiled Verilator harness, and the bf16 multiplier's.

An exhaustive check streams every operand of a unit through its exported RTL
on a compiled C++ harness, one operation per cycle, and compares the results
with the golden model itself (not a C++ re-implementation) in Python. The
engine here is shared by every such check; a check is described by a
:class:`StreamCheck`:

* The operands are numbered by a flat index, ``per_value`` results for each
  value of the sliced operand. The bf16 multiplier
  (``sim/backends/harness/bf16_mul_stream.cpp``) slices ``a`` and writes one
  block of 65536 results per ``a`` (all ``b``), so its index is
  ``a * 65536 + b``; a unary fp32 unit (:mod:`sim.exhaustive_unary`) slices
  its input and its index is the input.
* ``jobs`` harness processes each cover a contiguous slice of the operand;
  one reader thread per process keeps its pipe drained and checks the
  results in chunks of about a million (numpy releases the GIL while it
  computes and compares).
* A harness is built once per (Verilog, harness source, flags, Verilator
  version) in the shared build cache (``$TPU_RTL_CACHE``, by default
  ``build/sim``, :mod:`sim.toolchain.build_cache`); later runs reuse it.
"""

import fcntl
import operator
import queue
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from golden.arith import bf16_mul as golden_bf16_mul
from golden.formats import check_numerics

from .verilog.export import export
from .toolchain.build_cache import build_root, cached_build
from .toolchain import model_opt, tool_env, verilator, verilator_version

__all__ = ["ExhaustiveError", "ExhaustiveResult", "StreamCheck", "build_stream_harness",
           "run_stream_check", "merge_results", "HARNESS", "build_harness",
           "run_bf16_mul_exhaustive"]

#: The bf16 multiplier's C++ harness source; its text is part of the build cache key.
HARNESS = Path(__file__).parent / "backends" / "harness" / "bf16_mul_stream.cpp"

_BF16 = 65536           # bf16 patterns: values of a, and results per a (one per b)
# Results checked per golden call: 4 MiB arrays, large enough that numpy's
# per-call overhead vanishes. A multiple of every check's per_value.
_CHUNK = 1 << 20
_KEEP = 5               # mismatches reported in full
# The model's hot code is compiled with OPT_FAST=$TPU_RTL_OPT (-O3 unless set): -O3
# runs about 1.5x faster than Verilator's -Os; --threads would only slow a design
# this small down.
_FLAGS = ("--cc", "--exe", "--build", "-O3", "-j", "2", "-Wno-fatal")


class ExhaustiveError(RuntimeError):
    """The harness could not be built, crashed, or wrote fewer results than it owed."""


@dataclass
class ExhaustiveResult:
    """Outcome of an exhaustive check (or of a slice of one).

    ``checked`` counts results compared, each one ``unit`` (operand pairs of
    the bf16 multiplier, inputs of a unary unit); ``first_mismatches`` shows
    the first few as ``"<operands>: got 0x..., expected 0x..."`` in operand
    order. ``seconds`` is the wall time of streaming and checking (the
    harness build, if any, is ``build_seconds``). ``cycles_per_second`` is
    simulated cycles per wall second summed over all harness processes; one
    cycle is one result. ``name`` and ``unit`` default to the bf16
    multiplier's, the first check that had a result.
    """
    numerics: str
    checked: int
    mismatches: int
    first_mismatches: list = field(default_factory=list)
    seconds: float = 0.0
    cycles_per_second: float = 0.0
    build_seconds: float = 0.0
    name: str = "bf16_mul"
    unit: str = "pairs"

    @property
    def ok(self):
        return self.mismatches == 0

    @property
    def pairs_checked(self):
        """``checked``, by the bf16 multiplier's name for it."""
        return self.checked

    def summary(self):
        """One line for a log or a regression report."""
        verdict = "ok" if self.ok else f"{self.mismatches} MISMATCHES"
        return (f"{self.name} exhaustive ({self.numerics}): {self.checked} {self.unit}, "
                f"{verdict}, {self.seconds:.1f} s, {self.cycles_per_second / 1e6:.1f} M cycles/s")


@dataclass(frozen=True)
class StreamCheck:
    """What one exhaustive check streams and how its results are judged.

    A harness takes ``LO HI`` (values of the sliced operand, ``0 <= LO < HI
    <= span``) and writes ``per_value`` native uint32 results per value, in
    flat-index order. ``expected(first, count)`` gives the golden results of
    flat indices ``[first, first + count)`` (``first`` and ``count`` are
    multiples of ``per_value``); ``describe(index, got, expected)`` is the
    text of one mismatch, fixed width so that text order is index order.
    """
    name: str               # the unit, in messages and summaries: "bf16_mul"
    unit: str               # what one result checks: "pairs", "inputs"
    operand: str            # the sliced operand, in messages: "a", "x"
    span: int
    per_value: int
    expected: Callable
    describe: Callable

    def slice_name(self, lo, hi):
        digits = len(f"{self.span - 1:X}")
        return f"slice {self.operand} in [0x{lo:0{digits}X}, 0x{hi:0{digits}X})"


# (block, params, source, prefix, cache root) -> executable: finding a cached
# harness means exporting the block's Verilog (a second or more), which a process
# running many slices need do only once.
_built = {}


def build_stream_harness(block, params, source, *, prefix=None):
    """Build (or reuse) the harness ``source`` around ``block``; return its executable.

    ``block`` is exported with ``params`` (:func:`sim.verilog.export.export`).
    ``prefix`` renames the Verilated model's class (``verilator --prefix``),
    so that one harness source serves several blocks; by default it is
    ``V<block>``. Cached with every other build
    (:mod:`sim.toolchain.build_cache`), and remembered for the life of the
    process while its executable exists.
    """
    key = (block, tuple(sorted(params.items())), str(source), prefix, build_root(), model_opt())
    exe = _built.get(key)
    if exe is None or not exe.exists():
        exe = _built[key] = _build_stream_harness(block, params, source, prefix)
    return exe


def _build_stream_harness(block, params, source, prefix):
    verilog = export(block, params).verilog
    text = Path(source).read_text()
    flags = (*_FLAGS, "-MAKEFLAGS", f"OPT_FAST={model_opt()}", "--top-module", block,
             *(("--prefix", prefix) if prefix else ()))

    def build(folder):
        (folder / f"{block}.v").write_text(verilog)
        (folder / "harness.cpp").write_text(text)
        proc = subprocess.run([verilator(), *flags, "-Mdir", "obj", "harness.cpp", f"{block}.v"],
                              cwd=folder, env=tool_env(), capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
            raise ExhaustiveError(f"building the {block} harness failed "
                                  f"(verilator exit status {proc.returncode}):\n{tail}")

    folder = cached_build("exhaustive", block, [verilog, text, " ".join(flags),
                                                verilator_version()], build)
    return folder / "obj" / (prefix or f"V{block}")


def check_range(value_range, span, name):
    """``(lo, hi)`` of ``value_range`` as integers with ``0 <= lo < hi <= span``, or ValueError."""
    try:
        lo, hi = (operator.index(x) for x in value_range)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair of integers (lo, hi), "
                         f"not {value_range!r}") from None
    if not 0 <= lo < hi <= span:
        raise ValueError(f"{name} must satisfy 0 <= lo < hi <= {span}, not ({lo}, {hi})")
    return lo, hi


def _check_jobs(jobs):
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, not {jobs!r}")
    return jobs


def _slices(lo, hi, jobs):
    """Split ``[lo, hi)`` into at most ``jobs`` contiguous, nearly equal slices."""
    jobs = min(jobs, hi - lo)
    bounds = [lo + (hi - lo) * i // jobs for i in range(jobs + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def _read_exact(stream, view):
    """Fill ``view`` from ``stream``; return the number of bytes read (short at EOF)."""
    got = 0
    while got < len(view):
        n = stream.readinto(view[got:])
        if not n:
            break
        got += n
    return got


class _Slice(threading.Thread):
    """Runs one harness process over operand values ``[lo, hi)`` and checks what it writes."""

    def __init__(self, check, exe, lo, hi, done, stop):
        super().__init__(name=f"{check.name} exhaustive {check.slice_name(lo, hi)}",
                         daemon=True)
        self.check, self.exe, self.lo, self.hi = check, exe, lo, hi
        self.done, self.stop = done, stop           # progress queue, abort event
        self.proc = None
        self.checked = 0
        self.mismatches = 0
        self.first = []                              # (index, got, expected)
        self.error = None

    def kill(self):
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()

    def run(self):
        try:
            with subprocess.Popen([str(self.exe), str(self.lo), str(self.hi)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  bufsize=0) as self.proc:
                try:
                    self._stream(self.proc)
                finally:
                    self.kill()
        except Exception as error:                   # reported by the main thread
            self.error = error

    def _stream(self, proc):
        # A 1 MiB pipe (Linux) means fewer wake-ups per chunk.
        try:
            fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)
        except (AttributeError, OSError):
            pass
        per_value = self.check.per_value
        start, stop = self.lo * per_value, self.hi * per_value
        buffer = np.empty(_CHUNK, dtype=np.uint32)
        for first in range(start, stop, _CHUNK):
            if self.stop.is_set():
                return
            got = buffer[:min(_CHUNK, stop - first)]
            view = memoryview(got).cast("B")
            n = _read_exact(proc.stdout, view)
            if self.stop.is_set():      # killed because another slice failed
                return
            if n < len(view):
                self._fail(proc, f"stopped after {self.checked + n // 4} of "
                                 f"{stop - start} results")
            self._compare(first, got, self.check.expected(first, got.size))
            self.checked += got.size
            self.done.put(got.size)
        if proc.stdout.read(1):
            self._fail(proc, "wrote more results than it owed")
        if proc.wait() != 0:
            self._fail(proc, "failed after writing all its results")

    def _compare(self, first, got, expected):
        wrong = np.flatnonzero(got != expected)
        if not wrong.size:
            return
        self.mismatches += wrong.size
        for i in wrong[:_KEEP - len(self.first)]:
            self.first.append((first + int(i), int(got[i]), int(expected[i])))

    def _fail(self, proc, what):
        self.kill()
        status = proc.wait()
        stderr = proc.stderr.read().decode(errors="replace").strip()
        detail = f": {stderr}" if stderr else ""
        raise ExhaustiveError(f"{self.check.name} harness for "
                              f"{self.check.slice_name(self.lo, self.hi)} {what} "
                              f"(exit status {status}){detail}")


def run_stream_check(check, build, numerics, value_range, *, jobs=2, progress=None):
    """Run ``check`` over operand values ``value_range`` on ``jobs`` harness processes.

    ``build()`` returns the harness executable (building it if need be; its
    time is the result's ``build_seconds``). ``numerics`` only labels the
    result: ``check`` and ``build`` already carry it. ``progress(done,
    total)`` is called with results checked after each chunk, and once at
    the end. Bad ``jobs`` or ``value_range`` (named ``<operand>_range``) is a
    ValueError raised before anything is built; a harness that fails to
    build, crashes or writes short is an :class:`ExhaustiveError` naming its
    slice, and stops the others.
    """
    _check_jobs(jobs)
    lo, hi = check_range(value_range, check.span, f"{check.operand}_range")
    started = time.perf_counter()
    exe = build()
    build_seconds = time.perf_counter() - started

    total = (hi - lo) * check.per_value
    done, stop = queue.Queue(), threading.Event()
    workers = [_Slice(check, exe, s_lo, s_hi, done, stop) for s_lo, s_hi in _slices(lo, hi, jobs)]
    started = time.perf_counter()
    finished = reported = 0
    try:
        for worker in workers:
            worker.start()
        while any(w.is_alive() for w in workers):
            try:
                finished += done.get(timeout=0.2)
            except queue.Empty:
                continue
            if progress is not None:
                progress(finished, total)
                reported = finished
            if any(w.error for w in workers):
                break
    finally:
        # On an error or an interrupt, stop the other harnesses too.
        if any(w.error for w in workers) or any(w.is_alive() for w in workers):
            stop.set()
            for worker in workers:
                worker.kill()
        for worker in workers:
            worker.join()
    seconds = time.perf_counter() - started
    errors = [w.error for w in workers if w.error is not None]
    if errors:
        raise errors[0]
    while not done.empty():
        finished += done.get_nowait()
    if progress is not None and finished != reported:
        progress(finished, total)

    first = sorted(m for w in workers for m in w.first)[:_KEEP]
    checked = sum(w.checked for w in workers)
    return ExhaustiveResult(
        numerics=numerics, checked=checked, mismatches=sum(w.mismatches for w in workers),
        first_mismatches=[check.describe(*m) for m in first], seconds=seconds,
        cycles_per_second=checked / seconds if seconds > 0 else 0.0,
        build_seconds=build_seconds, name=check.name, unit=check.unit)


def merge_results(results, seconds, *, name, numerics, unit):
    """Join the results of slices of one check (any order) into one of ``seconds`` wall time.

    Counts add up; the first mismatches are the first over all slices (their
    text is fixed width, so text order is operand order); ``build_seconds``
    is the longest build.
    """
    results = list(results)
    checked = sum(r.checked for r in results)
    return ExhaustiveResult(
        numerics=numerics, checked=checked, mismatches=sum(r.mismatches for r in results),
        first_mismatches=sorted(line for r in results for line in r.first_mismatches)[:_KEEP],
        seconds=seconds, cycles_per_second=checked / seconds if seconds > 0 else 0.0,
        build_seconds=max((r.build_seconds for r in results), default=0.0), name=name,
        unit=unit)


def build_harness(numerics="tpu"):
    """Build (or reuse) the Verilated bf16 multiplier harness for ``numerics``; return its
    executable."""
    return build_stream_harness("bf16_mul", {"numerics": check_numerics(numerics)}, HARNESS)


def _bf16_check(numerics):
    b = np.arange(_BF16, dtype=np.uint16)[None, :]

    def expected(first, count):
        # Whole blocks of one a each: broadcast a column of a against every b.
        a = np.arange(first // _BF16, (first + count) // _BF16, dtype=np.uint16)[:, None]
        return golden_bf16_mul(a, b, numerics=numerics).reshape(-1)

    def describe(index, got, expected):
        return (f"a=0x{index // _BF16:04X} b=0x{index % _BF16:04X}: got 0x{got:08X}, "
                f"expected 0x{expected:08X}")

    return StreamCheck("bf16_mul", "pairs", "a", span=_BF16, per_value=_BF16,
                       expected=expected, describe=describe)


def run_bf16_mul_exhaustive(numerics="tpu", *, jobs=2, a_range=(0, 65536), progress=None):
    """Check the RTL bf16 multiplier on every ``(a, b)`` with ``a`` in ``a_range``.

    Parameters
    ----------
    numerics : "tpu" or "ieee"
    jobs : int
        Harness processes run in parallel, each over a contiguous slice of ``a``.
    a_range : (lo, hi)
        ``a`` runs over ``lo <= a < hi`` (bf16 bit patterns); ``b`` always
        over all 65536 patterns. The default covers all 2^32 pairs.
    progress : callable, optional
        Called as ``progress(done_pairs, total_pairs)`` after each checked
        chunk, and once at the end.

    Returns
    -------
    ExhaustiveResult
        Mismatches are counted, not raised; ``first_mismatches`` shows the
        first few in ``(a, b)`` order.

    Raises
    ------
    ValueError
        Bad ``numerics``, ``jobs`` or ``a_range``.
    ExhaustiveError
        The harness failed to build, crashed or wrote short; the message
        names the slice.
    """
    check_numerics(numerics)
    # build_harness and golden_bf16_mul are looked up when called, so tests can replace them.
    return run_stream_check(_bf16_check(numerics), lambda: build_harness(numerics), numerics,
                            a_range, jobs=jobs, progress=progress)
