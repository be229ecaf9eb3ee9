"""One seed of a regression as a task: its worker process, time limit, outcome and files.

Every executor runs a seed the same way, through :func:`run_seed`: a
:mod:`verif.regress.worker` process in a folder, killed with everything it
started when it overruns its time limit or the run is cancelled. The local
executor points the folder at ``build/regress/<suite>/seeds/<seed>/``; a
Dask worker points it at scratch space of its own and sends the files that
the reports are merged from back with the outcome (:func:`pack`,
:func:`unpack`).
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Outcome", "SeedTask", "run_seed", "kill_running", "pack", "unpack",
           "RESULT_FILES", "CLUSTER_INJECTIONS"]

#: The files of a seed folder that the merged reports are made from (plus waves).
RESULT_FILES = ("result.json", "worker.log", "*.cov.xml", "*.dat", "*.src.json", "*.vcd",
                "*.fst")

#: Injections that the executor carries out rather than the seed's process:
#: they kill the Dask worker running the seed (``-once``: on its first attempt only).
CLUSTER_INJECTIONS = ("kill-worker", "kill-worker-once")


@dataclass
class Outcome:
    """The verdict on one seed (or one numerics mode of an exhaustive check)."""
    seed: int | str
    status: str              # pass, fail, crash, timeout
    message: str = ""
    seconds: float = 0.0
    record: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SeedTask:
    """Everything a worker needs to run one seed; small and picklable.

    ``run_id`` groups the processes of one regression, so that cancelling it
    (:func:`kill_running`) stops no other regression sharing the worker.
    """
    suite: str
    seed: int
    sim: str
    waves: bool = False
    timeout: float = 1800.0
    inject: str | None = None
    only: str | None = None
    run_id: str = ""
    code_coverage: bool = True      # Verilator only: coverage builds and their .dat files

    def command(self, folder):
        command = [sys.executable, "-m", "verif.regress.worker", self.suite, str(self.seed),
                   "--sim", self.sim, "--out", str(folder)]
        command += ["--waves"] if self.waves else []
        command += ["--code-coverage"] if self.sim == "verilator" and self.code_coverage \
            else []
        if self.inject and self.inject not in CLUSTER_INJECTIONS:
            command += ["--inject", self.inject]
        command += ["--only", self.only] if self.only else []
        return command


_running = {}                   # run_id -> set of Popen
_lock = threading.Lock()


def kill_running(run_id):
    """Kill every seed process of ``run_id`` on this machine (and what each started).

    Returns how many were killed; their :func:`run_seed` calls return a crash.
    """
    with _lock:
        procs = list(_running.get(run_id, ()))
    for proc in procs:
        _kill_group(proc)
    return len(procs)


def _kill_group(proc):
    # Each seed leads a process group of its own, so its simulators die with it.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_seed(task, folder, *, shown=None):
    """Run ``task`` with ``folder`` as its output folder; return its :class:`Outcome`.

    ``shown`` is the folder named in messages (where the files end up), by
    default ``folder``. A crash, a hang past ``task.timeout`` or a kill is
    this seed's outcome, never an exception.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    log = Path(shown or folder) / "worker.log"
    started = time.perf_counter()
    with open(folder / "worker.log", "w") as f:
        # A session of its own: a terminal's Ctrl-C reaches the runner, which
        # decides what to stop, and the seed's simulators can be killed as a group.
        proc = subprocess.Popen(task.command(folder.resolve()), stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env=dict(os.environ, TPU_RTL_SEED_PARENT=str(os.getpid())))
        with _lock:
            _running.setdefault(task.run_id, set()).add(proc)
        try:
            proc.wait(timeout=task.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()
            return Outcome(task.seed, "timeout", f"no result after {task.timeout:.0f} s; "
                                                 f"log: {log}", time.perf_counter() - started)
        finally:
            with _lock:
                _running[task.run_id].discard(proc)
                if not _running[task.run_id]:
                    del _running[task.run_id]
    seconds = time.perf_counter() - started
    result = folder / "result.json"
    if not result.exists():
        return Outcome(task.seed, "crash", f"worker exited with status {proc.returncode} and "
                                           f"no result; log: {log}", seconds)
    record = json.loads(result.read_text())
    bad = [c for c in record["cases"] if c["status"] != "pass"]
    message = "; ".join(c.get("error") or c.get("first_mismatch") or c["status"] for c in bad)
    return Outcome(task.seed, record["status"], message, seconds, record)


def pack(folder):
    """The result files of a seed folder (see :data:`RESULT_FILES`), as ``{name: bytes}``.

    Compressed: Verilator's code coverage text is most of a seed's bytes and
    shrinks some twentyfold at zlib's fastest level (20 MB to 1 MB for an
    arith seed, in 50 ms).
    """
    folder = Path(folder)
    files = {}
    for pattern in RESULT_FILES:
        for path in sorted(folder.glob(pattern)):
            files[path.name] = zlib.compress(path.read_bytes(), 1)
    return files


def unpack(files, folder):
    """Write what :func:`pack` returned into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        if Path(name).name != name:        # only plain names: nothing lands outside folder
            raise ValueError(f"result file name {name!r} is not a plain file name")
        (folder / name).write_bytes(zlib.decompress(data))
