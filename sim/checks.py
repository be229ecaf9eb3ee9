"""Checks every runner makes of its arguments before any simulation: a clear one-line
``ValueError`` (``TypeError`` for a wrong type) naming the argument and what it allows, so
bad input costs nothing and leaves nothing behind."""

import math
from pathlib import Path

__all__ = ["WAVE_SUFFIXES", "check_waves", "check_probability", "check_finite"]

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
