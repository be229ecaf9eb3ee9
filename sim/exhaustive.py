"""Exhaustive check of the bf16 multiplier: every operand pair against golden.

A compiled Verilator harness (``sim/backends/harness/bf16_mul_stream.cpp``) streams
operand pairs through the exported RTL at one operation per cycle and writes
the fp32 results to a pipe, one block of 65536 results per ``a`` (all ``b``
in order). Python reads the blocks and compares them with
:func:`golden.arith.bf16_mul`, so the reference is the golden model itself,
not a C++ re-implementation. ``jobs`` harness processes each cover a
contiguous slice of ``a``; one reader thread per process keeps its pipe
drained (numpy releases the GIL while it computes and compares).

The harness is built once per (Verilog, harness source, flags, Verilator
version) in the shared build cache (``$TPU_RTL_CACHE``, by default
``build/sim``, :mod:`sim.backends.build_cache`); later runs reuse it.
"""

import fcntl
import operator
import queue
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from golden.arith import bf16_mul as golden_bf16_mul
from golden.formats import check_numerics

from .export import export
from .backends.build_cache import cached_build
from .backends.toolchain import tool_env, verilator, verilator_version

__all__ = ["ExhaustiveError", "ExhaustiveResult", "HARNESS", "build_harness",
           "run_bf16_mul_exhaustive"]

#: The C++ harness source; its text is part of the build cache key.
HARNESS = Path(__file__).parent / "backends" / "harness" / "bf16_mul_stream.cpp"

_TOP = "bf16_mul"
_BLOCK = 65536          # results per a: one per b
# a values checked per golden call: 16 x 256 KiB keeps the arrays in the
# megabytes, large enough that numpy's per-call overhead vanishes.
_GROUP = 16
_KEEP = 5               # mismatches reported in full
# OPT_FAST=-O3 compiles the model's hot code with -O3 instead of -Os, about
# 1.5x faster; --threads would only slow a design this small down.
_FLAGS = ("--cc", "--exe", "--build", "-O3", "-j", "2", "-MAKEFLAGS", "OPT_FAST=-O3",
          "-Wno-fatal", "--top-module", _TOP)


class ExhaustiveError(RuntimeError):
    """The harness could not be built, crashed, or wrote fewer results than it owed."""


@dataclass
class ExhaustiveResult:
    """Outcome of :func:`run_bf16_mul_exhaustive`.

    ``seconds`` is the wall time of streaming and checking (the harness build,
    if any, is ``build_seconds``). ``cycles_per_second`` is simulated cycles
    per wall second summed over all harness processes; one cycle is one
    operand pair.
    """
    numerics: str
    pairs_checked: int
    mismatches: int
    first_mismatches: list = field(default_factory=list)
    seconds: float = 0.0
    cycles_per_second: float = 0.0
    build_seconds: float = 0.0

    @property
    def ok(self):
        return self.mismatches == 0

    def summary(self):
        """One line for a log or a regression report."""
        verdict = "ok" if self.ok else f"{self.mismatches} MISMATCHES"
        return (f"bf16_mul exhaustive ({self.numerics}): {self.pairs_checked} pairs, {verdict}, "
                f"{self.seconds:.1f} s, {self.cycles_per_second / 1e6:.1f} M cycles/s")


def build_harness(numerics="tpu"):
    """Build (or reuse) the Verilated harness for ``numerics``; return its executable.

    Cached with every other build (:mod:`sim.backends.build_cache`).
    """
    verilog = export(_TOP, {"numerics": check_numerics(numerics)}).verilog
    source = HARNESS.read_text()

    def build(folder):
        (folder / f"{_TOP}.v").write_text(verilog)
        (folder / "harness.cpp").write_text(source)
        proc = subprocess.run([verilator(), *_FLAGS, "-Mdir", "obj", "harness.cpp", f"{_TOP}.v"],
                              cwd=folder, env=tool_env(), capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
            raise ExhaustiveError(f"building the bf16_mul harness failed "
                                  f"(verilator exit status {proc.returncode}):\n{tail}")

    folder = cached_build("exhaustive", _TOP, [verilog, source, " ".join(_FLAGS),
                                               verilator_version()], build)
    return folder / "obj" / f"V{_TOP}"


def _check_range(a_range):
    try:
        lo, hi = (operator.index(x) for x in a_range)
    except (TypeError, ValueError):
        raise ValueError(f"a_range must be a pair of integers (lo, hi), not {a_range!r}") from None
    if not 0 <= lo < hi <= _BLOCK:
        raise ValueError(f"a_range must satisfy 0 <= lo < hi <= 65536, not ({lo}, {hi})")
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
    """Runs one harness process over ``a`` in ``[lo, hi)`` and checks what it writes."""

    def __init__(self, exe, lo, hi, numerics, done, stop):
        super().__init__(name=f"bf16_mul exhaustive {lo:#06x}-{hi:#06x}", daemon=True)
        self.exe, self.lo, self.hi, self.numerics = exe, lo, hi, numerics
        self.done, self.stop = done, stop           # progress queue, abort event
        self.proc = None
        self.checked = 0
        self.mismatches = 0
        self.first = []                              # (a, b, got, expected)
        self.error = None

    def name_slice(self):
        return f"slice a in [0x{self.lo:04X}, 0x{self.hi:04X})"

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
        # A 1 MiB pipe (Linux) means fewer wake-ups per 256 KiB block.
        try:
            fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)
        except (AttributeError, OSError):
            pass
        b = np.arange(_BLOCK, dtype=np.uint16)[None, :]
        buffer = np.empty((_GROUP, _BLOCK), dtype=np.uint32)
        for first_a in range(self.lo, self.hi, _GROUP):
            if self.stop.is_set():
                return
            count = min(_GROUP, self.hi - first_a)
            got = buffer[:count]
            view = memoryview(got).cast("B")
            n = _read_exact(proc.stdout, view)
            if self.stop.is_set():      # killed because another slice failed
                return
            if n < len(view):
                self._fail(proc, f"stopped after {self.checked + n // 4} of "
                                 f"{(self.hi - self.lo) * _BLOCK} results")
            a = np.arange(first_a, first_a + count, dtype=np.uint16)[:, None]
            expected = golden_bf16_mul(a, b, numerics=self.numerics)
            self._compare(first_a, got, expected)
            self.checked += got.size
            self.done.put(got.size)
        if proc.stdout.read(1):
            self._fail(proc, "wrote more results than it owed")
        if proc.wait() != 0:
            self._fail(proc, "failed after writing all its results")

    def _compare(self, first_a, got, expected):
        wrong = got != expected
        n = int(np.count_nonzero(wrong))
        if not n:
            return
        self.mismatches += n
        for row, col in np.argwhere(wrong)[:_KEEP - len(self.first)]:
            self.first.append((first_a + int(row), int(col), int(got[row, col]),
                               int(expected[row, col])))

    def _fail(self, proc, what):
        self.kill()
        status = proc.wait()
        stderr = proc.stderr.read().decode(errors="replace").strip()
        detail = f": {stderr}" if stderr else ""
        raise ExhaustiveError(f"bf16_mul harness for {self.name_slice()} {what} "
                              f"(exit status {status}){detail}")


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
        group of blocks, and once at the end.

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
    _check_jobs(jobs)
    lo, hi = _check_range(a_range)
    started = time.perf_counter()
    exe = build_harness(numerics)
    build_seconds = time.perf_counter() - started

    total = (hi - lo) * _BLOCK
    done, stop = queue.Queue(), threading.Event()
    workers = [_Slice(exe, s_lo, s_hi, numerics, done, stop)
               for s_lo, s_hi in _slices(lo, hi, jobs)]
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
        numerics=numerics,
        pairs_checked=checked,
        mismatches=sum(w.mismatches for w in workers),
        first_mismatches=[f"a=0x{a:04X} b=0x{b:04X}: got 0x{g:08X}, expected 0x{e:08X}"
                          for a, b, g, e in first],
        seconds=seconds,
        cycles_per_second=checked / seconds if seconds > 0 else 0.0,
        build_seconds=build_seconds,
    )
