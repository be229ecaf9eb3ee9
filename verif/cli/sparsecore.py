"""``tpu-rtl sparsecore``: a lookup and an update on the SparseCore tile RTL, against golden.

One batch of Zipf-distributed ids (:func:`verif.suites.sparsecore.stimulus.zipf_ids`) over a
random table goes through
:func:`sim.sparsecore.lookup` and :func:`sim.sparsecore.update`. Every output word (the
lookup's rows; the whole table and the accumulators after the update) is scored bit for
bit against :mod:`golden.sparsecore`, and the tile's count of HBM row reads against the
number of unique ids, exactly. The figures are the RTL's own: cycles, row reads before
dedup (one per id) and after (the tile's count), the gather's bandwidth as a fraction of
the HBM model's ``words_per_cycle``, and the scVPU lanes' busy fraction during the combine.

:func:`run_command` is the command; the batch and its checks are
:mod:`verif.suites.sparsecore.batch`, which ``tpu-rtl bench sparsecore`` reuses.
"""

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from verif.cli.common import (CommandError, add_backend, add_gaps, check_outputs, exponent,
                              flushed, fraction, natural, positive)
from verif.progress import ProgressLine

if TYPE_CHECKING:    # the batch imports every suite, and the parser needs none of them
    from verif.suites.sparsecore.batch import Batch, OpCheck


#: The options that shape a run, in the order the reproduce command lists them.
RUN_OPTIONS = ("rows", "width", "batch", "bag", "alpha", "combiner", "weighted", "optimizer",
               "lr", "numerics", "special_density", "words_per_cycle", "read_latency", "jitter",
               "idle", "stall", "backend", "seed")


@dataclass
class SparseCheck:
    """The command's outcome: both :class:`OpCheck` s, the batch, and how to reproduce it."""
    batch: "Batch"
    lookup: "OpCheck"
    update: "OpCheck"
    reproduce: str

    @property
    def passed(self):
        return self.lookup.passed and self.update.passed

    def failures(self):
        return self.lookup.failures() + self.update.failures()


def reproduce_command(args):
    """The ``tpu-rtl sparsecore`` command line that repeats the run ``args`` describes,
    every option spelled out so that later changes of the defaults do not alter it."""
    words = ["tpu-rtl", "sparsecore"]
    for name in RUN_OPTIONS:
        value = getattr(args, name)
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            words += [flag] if value else []
        else:
            words += [flag, str(value)]
    return shlex.join(words)


def _waves(path, op):
    """``build/sc.vcd`` -> ``build/sc.lookup.vcd``: one file per run."""
    if path is None:
        return None
    path = Path(path)
    return str(path.with_name(f"{path.stem}.{op}{path.suffix or '.vcd'}"))


def _row(check, out, *, wpc):
    stats = check.run.stats
    verdict = "bit-exact" if check.passed else "MISMATCH"
    results = sum(board.checked for board in check.boards)
    out(f"  {check.name:<27}{results:>8} words {verdict:<9}  cycles {check.run.cycles:>7,}  "
        f"rows read {check.run.hbm_reads:>5,}  gather {stats.gather_bandwidth:6.1%} of "
        f"{wpc} words/cycle  lanes busy {stats.lane_busy:6.1%}")


def _report(args, check):
    batch = check.batch
    ids, unique = len(batch.indices), batch.unique
    return {
        "command": "sparsecore", "passed": check.passed, "reproduce": check.reproduce,
        "options": {name: getattr(args, name) for name in RUN_OPTIONS},
        "ids": ids, "unique": unique,
        "hbm_reads": {"before_dedup": ids, "after_dedup": unique,
                      "saved": 1 - unique / ids if ids else 0.0},
        "lookup": check.lookup.figures(), "update": check.update.figures(),
        "failures": check.failures(),
    }


def run_command(args, *, out=print):
    """Run ``tpu-rtl sparsecore`` as ``args`` (its argparse namespace) asks; returns the
    :class:`SparseCheck`, whose ``passed`` decides the exit status. Prints the figures,
    and writes them to ``args.json`` when given, failed or not."""
    check_outputs(args, files=("waves", "json"))
    from verif.suites.sparsecore.batch import check_lookup, check_update, make_batch, shared_tile

    rng = np.random.default_rng(args.seed)
    batch = make_batch(rng, rows=args.rows, width=args.width, batch=args.batch, bag=args.bag,
                       alpha=args.alpha, weighted=args.weighted,
                       special_density=args.special_density)
    ids, unique = len(batch.indices), batch.unique
    out(f"sparsecore: {args.batch} bags of {args.bag} ids ({ids:,} ids, {unique:,} unique, "
        f"Zipf alpha {args.alpha:g}) over a {args.rows}x{args.width} table (numerics "
        f"{args.numerics}, seed {args.seed}, backend {args.backend})")
    hbm = dict(seed=args.seed, jitter=args.jitter, read_latency=args.read_latency,
               words_per_cycle=args.words_per_cycle, idle=args.idle,
               tile=shared_tile(args.combiner, args.optimizer))
    # A Verilator build takes minutes: the line names it and beats while it runs.
    line = ProgressLine("sparsecore")
    try:
        line.update(text="lookup")
        lookup = check_lookup(batch, combiner=args.combiner, numerics=args.numerics,
                              backend=args.backend, stall=args.stall,
                              waves=_waves(args.waves, "lookup"), **hbm)
        line.update(text="update")
        update = check_update(batch, optimizer=args.optimizer, lr=args.lr,
                              numerics=args.numerics, backend=args.backend,
                              waves=_waves(args.waves, "update"), **hbm)
    finally:
        line.close()
    _row(lookup, out, wpc=args.words_per_cycle)
    _row(update, out, wpc=args.words_per_cycle)
    saved = 1 - unique / ids
    out(f"  HBM row reads: {ids:,} before dedup (one per id), {unique:,} after (the unique "
        f"ids; the tile read {lookup.run.hbm_reads:,} in the lookup, "
        f"{update.run.hbm_reads:,} in the update): {saved:.1%} saved")
    if args.waves:
        out(f"  waves: {_waves(args.waves, 'lookup')}, {_waves(args.waves, 'update')}")
    check = SparseCheck(batch, lookup, update, reproduce_command(args))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(_report(args, check), indent=2) + "\n")
        out(f"  figures: {args.json}")
    if not check.passed:
        for line in check.failures():
            out(f"  FAILED {line}")
        out(f"  seed {args.seed}; reproduce: {check.reproduce}")
    return check


def run(args):
    from verif.cli.sparsecore import run_command
    check = run_command(args, out=flushed)
    if not check.passed:
        raise CommandError(f"mismatch: {check.failures()[0]}; reproduce: {check.reproduce}")


def add_parser(subparsers, help):
    """Add ``sparsecore`` to the ``tpu-rtl`` subcommands."""
    p = subparsers.add_parser("sparsecore", help=help,
                       description="Run a lookup and an update of one batch on the SparseCore "
                                   "tile RTL: B bags of L ids drawn from a Zipf law of "
                                   "exponent A over a random V x D fp32 table. "
                                   "Prints the bit-exact verdict of every output word, the "
                                   "cycles, the HBM row reads before and after dedup, the "
                                   "gather's bandwidth as a fraction of the HBM model's "
                                   "words per cycle and the scVPU lanes' use; exits non-zero "
                                   "on any mismatch, printing the seed and the command that "
                                   "reproduces it.")
    p.add_argument("--rows", type=positive, default=64, metavar="V",
                   help="table rows (default 64)")
    p.add_argument("--width", type=positive, default=16, metavar="D",
                   help="words per row (default 16; the tile pads to a multiple of 8)")
    p.add_argument("--batch", type=positive, default=8, metavar="B", help="bags (default 8)")
    p.add_argument("--bag", type=positive, default=8, metavar="L", help="ids per bag (default 8)")
    p.add_argument("--alpha", type=exponent, default=1.15, metavar="A",
                   help="Zipf exponent of the ids, truncated to the table (default 1.15; "
                        "0 is uniform)")
    p.add_argument("--combiner", choices=("sum", "mean", "sqrtn"), default="sum",
                   help="lookup combiner (default sum)")
    p.add_argument("--weighted", action="store_true", help="random per-id lookup weights")
    p.add_argument("--optimizer", choices=("sgd", "adagrad", "rowwise_adagrad"), default="sgd",
                   help="update optimizer (default sgd; the Adagrads start from 0.1)")
    p.add_argument("--lr", type=float, default=0.01, help="learning rate (default 0.01)")
    p.add_argument("--numerics", choices=("tpu", "ieee"), default="tpu")
    p.add_argument("--special-density", type=fraction, default=0.0, metavar="P",
                   help="fraction of table, weight and gradient values replaced by special "
                        "values (default 0)")
    p.add_argument("--words-per-cycle", type=int, choices=(1, 2, 4, 8), default=8,
                   help="HBM model bandwidth in words per cycle (default 8)")
    p.add_argument("--read-latency", type=positive, default=8, metavar="CYCLES",
                   help="HBM model read latency in cycles (default 8)")
    p.add_argument("--jitter", type=natural, default=0, metavar="CYCLES",
                   help="HBM model's seeded extra latency, up to this many cycles (default 0)")
    add_gaps(p, stalled="the lookup's rows")
    p.add_argument("--seed", type=natural, default=0,
                   help="seed of the batch, the HBM jitter and the gaps (default 0)")
    p.add_argument("--json", metavar="FILE.json", help="also write the figures as JSON")
    p.add_argument("--waves", metavar="FILE.vcd",
                   help="write waveforms of both runs (FILE.lookup.vcd, FILE.update.vcd)")
    add_backend(p)
    p.set_defaults(func=run)
