"""The one cache of simulator builds, shared by every backend and harness.

A build lives in ``<root>/<kind>/<name>-<hash>/``, the hash taken over
everything that goes into it (Verilog, harness sources, flags, tool
versions), so one build serves every run of the same design. The root is
``$TPU_RTL_CACHE``, by default ``build/sim`` of the checkout. Parallel workers build a
design once: the first takes a lock beside the folder and builds, the others
wait on the lock and then find the finished build's stamp.

A build can take minutes (a 128-node network, a 4x4 system of chips: half an hour), so
it is announced: every callable in :data:`BUILD_LISTENERS` gets a line when one starts and
when it ends (a command's progress line, :class:`verif.progress.ProgressLine`, listens
while it is open), and :func:`active_builds` names those under way and how long each has
taken so far, for the line's heartbeat.
"""

import fcntl
import hashlib
import os
import shutil
import time
from pathlib import Path

__all__ = ["build_root", "cached_build", "active_builds", "BUILD_LISTENERS"]

#: Callables given a one-line message when a build starts and when it ends.
BUILD_LISTENERS = []

#: ``kind/name`` of the builds under way in this process, and when each started
#: (``time.perf_counter()``), for a heartbeat to name.
_ACTIVE = {}


def active_builds():
    """The builds under way in this process, oldest first: ``(kind/name, seconds so far)``."""
    now = time.perf_counter()
    return [(name, now - started) for name, started in list(_ACTIVE.items())]


def _announce(message):
    for listener in list(BUILD_LISTENERS):
        listener(message)


#: The checkout this package runs from (an editable install's source tree).
_CHECKOUT = Path(__file__).resolve().parents[2]


def build_root():
    """Where builds are cached: ``$TPU_RTL_CACHE``, by default ``build/sim`` of the checkout
    (whatever the current directory), or ``~/.cache/tpu-rtl`` for an installed package.
    Absolute: simulators run with a run's own folder as their working directory."""
    if "TPU_RTL_CACHE" in os.environ:
        return Path(os.environ["TPU_RTL_CACHE"]).resolve()
    if (_CHECKOUT / "pyproject.toml").is_file():
        return _CHECKOUT / "build" / "sim"
    return Path.home() / ".cache" / "tpu-rtl"


def cached_build(kind, name, key_parts, build):
    """The folder of the build ``name`` of ``kind`` for ``key_parts``, built once.

    ``build(folder)`` fills an empty ``folder`` the first time; if it raises,
    the half-built folder is removed and the error propagates, so the next
    call starts afresh.
    """
    key = hashlib.sha256("\0".join(map(str, key_parts)).encode()).hexdigest()[:12]
    folder = build_root() / kind / f"{name}-{key}"
    stamp = folder / "built"
    if stamp.exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists():                 # another worker built it while we waited
            return folder
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        _announce(f"building {kind}/{name} (once for this design; later runs reuse "
                  f"{folder})")
        started = _ACTIVE[f"{kind}/{name}"] = time.perf_counter()
        try:
            build(folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        finally:
            del _ACTIVE[f"{kind}/{name}"]
        stamp.touch()
        _announce(f"built {kind}/{name} in {time.perf_counter() - started:.0f} s")
    return folder
