"""A compiler wrapper that compiles Verilator's run-time library once, not once a build.

Every Verilator build compiles the same run-time sources (``verilated.cpp``,
``verilated_threads.cpp``, and for cocotb ``verilated_vpi.cpp`` and
``verilated_dpi.cpp``) from the wheel's ``include/`` folder: about 12 s of
g++ a build, more than a small model's own code takes. Verilator's makefiles
put ``$(OBJCACHE)`` in front of every compile, and :func:`~sim.backends.
toolchain.tool_env` sets it to this script, run by the same Python::

    python runtime_objects.py c++ -Os ... -c -o verilated.o .../include/verilated.cpp

A compile of a run-time source is looked up in ``$TPU_RTL_RUNTIME_OBJECTS`` by
a hash of its command line, its source text, the Verilator version header and
the compiler's identity, and copied from there (object and ``-MMD``
dependency file) when found; otherwise it runs and its outputs are stored.
Every other compile (the model's own code, which differs from build to
build) runs untouched. The outputs are stored through a rename, so parallel
builds never read half an object.

The script uses the standard library only: it runs outside the package.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: The environment variable naming the cache folder; unset, nothing is cached.
CACHE_VARIABLE = "TPU_RTL_RUNTIME_OBJECTS"


def _runtime_source(command, include):
    """The run-time library source ``command`` compiles to an object, or None."""
    if "-c" not in command or "-o" not in command:
        return None
    # A precompiled header would tie the object to one model's headers.
    if any(arg == "-include" or arg.endswith((".gch", "__pch.h.fast", "__pch.h.slow"))
           for arg in command):
        return None
    sources = [Path(arg) for arg in command[1:] if arg.endswith((".cpp", ".c", ".cc"))]
    if len(sources) != 1 or sources[0].parent.resolve() != include.resolve():
        return None
    return sources[0]


def _key(command, source, include):
    digest = hashlib.sha256()
    digest.update("\0".join(command).encode())
    digest.update(source.read_bytes())
    digest.update((include / "verilated_config.h").read_bytes())
    compiler = shutil.which(command[0])
    if compiler:
        stat = Path(compiler).resolve().stat()
        digest.update(f"{Path(compiler).resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:24]


def main(command):
    cache = os.environ.get(CACHE_VARIABLE)
    root = os.environ.get("VERILATOR_ROOT")
    source = _runtime_source(command, Path(root) / "include") if cache and root else None
    if source is None:
        os.execvp(command[0], command)
    output = Path(command[command.index("-o") + 1])
    outputs = {"object.o": output, "object.d": output.with_suffix(".d")}
    entry = Path(cache) / _key(command, source, Path(root) / "include")
    if (entry / "object.o").exists():
        for stored, made in outputs.items():
            if (entry / stored).exists():
                shutil.copyfile(entry / stored, made)
        return 0
    status = subprocess.run(command).returncode
    if status == 0 and output.exists():
        Path(cache).mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=cache))
        for stored, made in outputs.items():
            if made.exists():
                shutil.copyfile(made, staging / stored)
        try:
            staging.rename(entry)
        except OSError:                 # another build stored the same object first
            shutil.rmtree(staging, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
