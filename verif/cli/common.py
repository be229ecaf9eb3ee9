"""What the ``tpu-rtl`` commands share: the one-line error, progress, argument types and
the options every command spells the same way."""

import argparse
import os
import sys

__all__ = ["CommandError", "BLOCK_NAMES", "progress_printer", "flushed", "flushed_stderr",
           "parse_size", "lo_hi_range", "positive", "natural", "number", "fraction",
           "exponent", "chip_ids", "output_file", "output_folder", "check_outputs", "add_gaps", "add_block", "add_backend", "add_fail"]

#: The block catalogue's names (sim.blocks.BLOCKS, which a test holds this to), spelled
#: out so that building the parser imports no HDL.
BLOCK_NAMES = ("fp32_add", "bf16_mul", "fp32_to_bf16", "fp32_mul", "fp32_div", "fp32_sqrt",
               "fp32_rcp", "fp32_rsqrt", "fp32_exp", "pe", "mxu", "dma", "router",
               "sparsecore", "vpu", "vpu_core", "vpu_transcendental", "tensorcore")

_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1 << 20, "mb": 1 << 20,
               "mib": 1 << 20}


class CommandError(Exception):
    """A failure to report as one line, with exit status ``status``."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


def progress_printer(label):
    """A ``progress(cycle, status)`` callback that shows one progress line on stderr; call
    its ``close()`` when the run ends."""
    from verif.progress import ProgressLine
    line = ProgressLine(label)

    def show(cycle, status):
        line.update(text=f"cycle {cycle:,}: {status}")
    show.close = line.close
    return show


def flushed(*text):
    print(*text, flush=True)


def flushed_stderr(*text):
    print(*text, file=sys.stderr, flush=True)


def parse_size(text):
    """Bytes in ``"64KiB"``, ``"4096"`` or ``"1M"``; ValueError otherwise."""
    import re
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(text))
    if not match or match.group(2).lower() not in _SIZE_UNITS:
        raise ValueError(f"a size looks like 4096, 16KiB or 1MiB, not {text!r}")
    size = int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]
    if size < 4:
        raise ValueError(f"a size is at least one 4-byte word, not {text!r}")
    return size


def lo_hi_range(text):
    """``LO:HI`` (decimal or 0x hex) as a pair of integers with ``0 <= LO < HI``."""
    lo, sep, hi = text.partition(":")
    try:
        value = (int(lo, 0), int(hi, 0))
    except ValueError:
        value = None
    if not sep or value is None or not 0 <= value[0] < value[1]:
        raise argparse.ArgumentTypeError(f"must be LO:HI with 0 <= LO < HI, not {text!r}")
    return value


def _integer(text, what):
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}") from None


def positive(text):
    value = _integer(text, "a positive integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {value}")
    return value


def natural(text):
    value = _integer(text, "a non-negative integer")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, not {value}")
    return value


def number(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, not {text!r}") from None


def fraction(text):
    """A probability of an idle or stall cycle, or a density: in [0, 1)."""
    value = number(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 1, not {text}")
    return value


def exponent(text):
    value = number(text)
    if not (value >= 0.0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, not {text}")
    return value


def chip_ids(text):
    """``5`` or ``1,2``: chip numbers, each >= 0."""
    try:
        ids = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        ids = None
    if not ids or min(ids) < 0:
        raise argparse.ArgumentTypeError(f"must be chip numbers >= 0 such as 5 or 1,2, not "
                                         f"{text!r}")
    return ids


def add_fail(parser):
    parser.add_argument("--fail", "--failed", dest="fail", type=chip_ids, action="extend",
                        default=[], metavar="CHIP",
                        help="a failed chip, routed around (repeatable, or comma-separated)")


def _make_folder(option, value, folder):
    """Make ``folder`` for ``option`` ``value``: at any depth under ``build/`` (where
    generated files go), elsewhere only when its parent exists, as ``mkdir`` would, so a
    mistyped path creates nothing far away."""
    if folder.is_dir():
        return
    ours = not folder.is_absolute() and folder.parts[:1] == ("build",)
    if not ours and not folder.parent.is_dir():
        raise CommandError(f"{option} {value}: no folder {folder.parent}", status=2)
    try:
        folder.mkdir(parents=ours, exist_ok=True)
    except OSError as error:
        raise CommandError(f"{option} {value}: cannot make {folder} ({error.strerror})",
                           status=2) from None


def output_file(option, path):
    """``path`` as a file ``option`` can write, tried before any work: a folder, a missing
    folder far from ``build/`` or a place that cannot be written is a usage error naming the
    option. Nothing is left behind by the try."""
    from pathlib import Path
    path = Path(path)
    if path.is_dir():
        raise CommandError(f"{option} {path}: a folder; give a file name", status=2)
    _make_folder(option, path, path.parent)
    existed = path.exists()
    try:
        with open(path, "a"):
            pass
    except OSError as error:
        raise CommandError(f"{option} {path}: cannot write it ({error.strerror})",
                           status=2) from None
    if not existed:
        path.unlink()
    return path


def output_folder(option, path):
    """``path`` as a folder for ``option``'s files, made if missing (see
    :func:`output_file`); a file there, or a folder that cannot be written, is a usage
    error naming the option."""
    from pathlib import Path
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise CommandError(f"{option} {path}: a file; give a folder", status=2)
    _make_folder(option, path, path)
    if not os.access(path, os.W_OK):
        raise CommandError(f"{option} {path}: not writable", status=2)
    return path


def check_outputs(args, *, files=(), folders=()):
    """Check, before any work, every output path the command was given: ``files`` and
    ``folders`` name ``args`` attributes (``--waves`` also needs a .vcd or .fst name)."""
    for name in files:
        value = getattr(args, name, None)
        if value is None:
            continue
        option = "-o" if name == "output" else f"--{name.replace('_', '-')}"
        path = output_file(option, value)
        if name == "waves" and path.suffix not in (".vcd", ".fst"):
            raise CommandError(f"--waves {path}: name a .vcd or .fst file (the format follows "
                               f"the suffix)", status=2)
    for name in folders:
        value = getattr(args, name, None)
        if value is not None:
            output_folder(f"--{name}", value)


def add_gaps(parser, *, stalled):
    parser.add_argument("--idle", type=fraction, default=0.0, metavar="P",
                        help="probability of an idle cycle on each input stream (default 0)")
    parser.add_argument("--stall", type=fraction, default=0.0, metavar="P",
                        help=f"probability of backpressure on {stalled} each cycle (default 0)")


def add_block(parser):
    parser.add_argument("block", help=", ".join(BLOCK_NAMES))
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="block parameter, repeatable (e.g. rows=16, numerics=ieee)")


def add_backend(parser, *, default="amaranth"):
    parser.add_argument("--backend", choices=("amaranth", "verilator", "icarus"),
                        default=default, help=f"simulator (default {default})")
