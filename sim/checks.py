"""Checks every runner makes of its arguments before any simulation: a clear one-line
``ValueError`` (``TypeError`` for a wrong type) naming the argument and what it allows, so
bad input costs nothing and leaves nothing behind."""

import math
import re
from pathlib import Path

__all__ = ["WAVE_SUFFIXES", "check_waves", "wave_format", "check_waves_scope",
           "check_tracing", "check_probability", "check_finite"]

#: The waveform formats, by the file's suffix.
WAVE_SUFFIXES = (".vcd", ".fst")


def check_waves(waves):
    """``waves`` (None, or a path to write) as a Path, tried before the run: its folder
    must exist (a mistyped path creates nothing), its suffix names the format, and the
    file must be writable. The try leaves nothing behind."""
    if waves is None:
        return None
    if not isinstance(waves, (str, Path)):
        raise TypeError(f"waves must be a path to a .vcd or .fst file, not "
                        f"{type(waves).__name__}")
    path = Path(waves)
    if path.suffix not in WAVE_SUFFIXES:
        raise ValueError(f"waves={str(path)!r}: name a .vcd or .fst file (the format follows "
                         f"the suffix)")
    if path.is_dir():
        raise ValueError(f"waves={str(path)!r} is a folder; name a file in it")
    if not path.parent.is_dir():
        raise ValueError(f"waves={str(path)!r}: no folder {str(path.parent)!r}")
    existed = path.exists()
    try:
        with open(path, "a"):
            pass
    except OSError as error:
        raise ValueError(f"waves={str(path)!r}: cannot write it ({error.strerror})") from None
    if not existed:
        path.unlink()
    return path


def wave_format(waves):
    """``"vcd"`` or ``"fst"``, the format ``waves`` (a path) names by its suffix; None for no
    waves."""
    return None if waves is None else Path(waves).suffix.lstrip(".")


_SCOPE = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)*")


def check_waves_scope(scope):
    """``scope`` (None: the whole design, or a dotted instance path below the run's harness,
    ``"dut"`` for the block itself) as given, refused before the run if it is not one."""
    if scope is None:
        return None
    if not isinstance(scope, str):
        raise TypeError(f"waves_scope must be a dotted instance path such as 'dut', not "
                        f"{type(scope).__name__}")
    if not _SCOPE.fullmatch(scope):
        raise ValueError(f"waves_scope={scope!r}: name a dotted instance path below the "
                         f"harness, such as 'dut' (the block) or 'dut.array'")
    return scope


def check_tracing(backend, waves, waves_scope=None):
    """Refuse, before the run, what ``backend`` cannot trace: Amaranth's simulator writes
    VCD only, of the whole design. Returns ``waves_scope`` checked."""
    waves = check_waves(waves)
    waves_scope = check_waves_scope(waves_scope)
    if backend != "amaranth" or waves is None:
        return waves_scope
    if waves.suffix == ".fst":
        raise ValueError(f"waves={str(waves)!r}: the amaranth backend writes VCD only; name "
                         f"a .vcd file, or run on backend 'verilator' or 'icarus' for FST "
                         f"(gtkwave's vcd2fst converts a VCD)")
    if waves_scope is not None:
        raise ValueError(f"waves_scope={waves_scope!r}: the amaranth backend traces the whole "
                         f"design; leave waves_scope out, or run on backend 'verilator' or "
                         f"'icarus'")
    return waves_scope


def check_probability(name, value):
    """A probability of a gap or a stall each cycle: a number in [0, 1). At 1 nothing
    would ever move, which is a hang, not a run."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number in [0, 1), not {type(value).__name__}")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be at least 0 and below 1 (at 1 nothing moves), "
                         f"not {value!r}")
    return float(value)


def check_finite(name, value):
    """A finite real number (a learning rate, say): NaN or inf would write NaN everywhere."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) and \
            not hasattr(value, "__float__"):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    if not math.isfinite(float(value)):
        raise ValueError(f"{name} must be a finite number, not {value!r}")
    return value
