"""``tpu-rtl bench [SECTION]``: every measurement that writes docs/*.md, behind one command.

::

    tpu-rtl bench                          # blocks: speed, export cost, MXU utilization
    tpu-rtl bench system --quick           # collectives on the 1x4 ring (docs/system.md)
    tpu-rtl bench network                  # the goals of docs/network.md
    tpu-rtl bench embedding                # the embedding step on the 4x4 (docs/system.md)
    tpu-rtl bench dma                      # DMA throughput and latencies (a table)
    tpu-rtl bench blocks --update-docs     # rewrite docs/benchmarks.md in place

A section that writes a document writes it under ``build/bench/`` unless ``--out FILE``
names another file or ``--update-docs`` asks for the tracked copy under ``docs/``: a
benchmark never overwrites a tracked file by default. ``dma`` and ``vpu`` print a table.
The old entry points (``tpu-rtl system bench``, ``tpu-rtl network --goals``, ``python -m
verif.bench.dma``, ``python -m verif.bench.vpu``, ``python -m verif.bench.regression``)
run the same code.
"""

import sys
from pathlib import Path

from verif.cli.common import CommandError, natural, positive

__all__ = ["SECTIONS", "add_parser", "run"]

#: Each section: (what it measures, the document it writes or None for a printed table).
SECTIONS = {
    "blocks": ("simulation speed by backend, export cost, MXU utilization, the large array",
               "benchmarks.md"),
    "sparsecore": ("the SparseCore tile's gather bandwidth and dedup (a section of "
                   "benchmarks.md, replaced in place)", "benchmarks.md"),
    "system": ("collectives on the 1x4 ring and the 4x4 torus, against the cost model",
               "system.md"),
    "collectives": ("collectives through sim.system.collective's defaults: the goals, and "
                    "busbw against size on the 4x4 (a section of system.md)", "system.md"),
    "embedding": ("the embedding step on the 4x4 torus: cycles by phase, the all-to-alls "
                  "against the bisection bound, the gather against the HBM, dedup's speed-up, "
                  "the prereduced mode's gradients (a section of system.md)", "system.md"),
    "network": ("latency-load curves and the twisted torus against the regular one",
                "network.md"),
    "regression": ("seeds per minute on the local executor and a Dask LocalCluster (a "
                   "section of benchmarks.md, replaced in place)", "benchmarks.md"),
    "dma": ("DMA throughput and latencies, and the HBM model's self-test", None),
    "vpu": ("the VPU's dual-issue rate and simulated cycles per second", None),
}

#: The options that apply to only some sections.
_ONLY_FOR = {"quick": ("blocks", "system"), "large_array": ("blocks",),
             "twisted": ("network",), "suite": ("regression",), "workers": ("regression",),
             "seeds": ("regression",)}


def _document(args):
    """Where the section's document goes, or None for a printed table."""
    name = SECTIONS[args.section][1]
    if name is None:
        if args.out is not None or args.update_docs:
            raise CommandError(f"bench {args.section} prints a table and writes no document: "
                               f"drop --out and --update-docs", status=2)
        return None
    if args.out is not None and args.update_docs:
        raise CommandError("give --out FILE or --update-docs, not both", status=2)
    if args.update_docs:
        return Path("docs") / name
    return Path(args.out) if args.out is not None else Path("build/bench") / name


def _check_options(args):
    for option, sections in _ONLY_FOR.items():
        if getattr(args, option) is not None and args.section not in sections:
            flag = "--" + option.replace("_", "-")
            raise CommandError(f"{flag} applies to bench {' and '.join(sections)}, not to "
                               f"bench {args.section}", status=2)


def run(args):
    _check_options(args)
    path = _document(args)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and not path.is_file():
            raise CommandError(f"--out {path}: not a file", status=2)
    print(f"bench {args.section}: measuring (progress on stderr)", flush=True)
    section = args.section
    if section in ("blocks", "sparsecore"):
        from verif.bench.blocks import run_bench
        print(run_bench(quick=bool(args.quick), output=str(path), seed=args.seed,
                        large_array=args.large_array,
                        only="sparsecore" if section == "sparsecore" else None))
    elif section == "system":
        from verif.bench.system import measure
        measure(path, seed=args.seed, quick=bool(args.quick),
                out=lambda text: print(text, flush=True))
    elif section == "collectives":
        from verif.bench.collectives import measure
        measure(path, seed=args.seed, out=lambda text: print(text, flush=True),
                plot=None if args.update_docs else path.with_name("busbw_4x4.png"))
    elif section == "embedding":
        from verif.bench.embedding import measure
        measure(path, seed=args.seed, out=lambda text: print(text, flush=True))
    elif section == "network":
        from verif.bench.network import measure_goals
        twisted = [x for x in (args.twisted or "4x4x8,4x8x8").split(",") if x.strip()]
        measure_goals(path, seed=args.seed, twisted=twisted)
    elif section == "regression":
        from verif.bench import regression
        workers = tuple(int(w) for w in (args.workers or "1,2").split(",") if w.strip())
        if not workers or min(workers) < 1:
            raise CommandError(f"--workers must be positive counts separated by commas, not "
                               f"{args.workers!r}", status=2)
        result = regression.measure(suite=args.suite or "arith", seeds=args.seeds or 6,
                                    workers=workers)
        text = regression.section(result, "tpu-rtl bench regression")
        regression.write_section(text, str(path))
        print(text)
    elif section == "dma":
        from verif.bench import dma
        dma.main()
    else:
        from verif.bench import vpu
        vpu.main([])
    if path is not None:
        print(f"wrote {path}", file=sys.stderr)


def add_parser(subparsers, help):
    """Add ``bench`` to the ``tpu-rtl`` subcommands."""
    listing = "; ".join(f"{name}: {what}" for name, (what, _doc) in SECTIONS.items())
    p = subparsers.add_parser(
        "bench", help=help,
        description=f"Measure one section of the benchmarks (default blocks). Sections: "
                    f"{listing}. A document goes to build/bench/ unless --out or "
                    f"--update-docs says otherwise.")
    p.add_argument("section", nargs="?", default="blocks", choices=tuple(SECTIONS),
                   metavar="SECTION", help=f"one of {', '.join(SECTIONS)} (default blocks)")
    p.add_argument("--out", metavar="FILE.md",
                   help="where the document goes (default build/bench/<its docs/ name>)")
    p.add_argument("--update-docs", action="store_true",
                   help="write the tracked document under docs/ (what the README's figures "
                        "come from)")
    p.add_argument("--seed", type=natural, default=1, help="seed of the data (default 1)")
    p.add_argument("--quick", action="store_true", default=None,
                   help="blocks, system: a short run (fewer sizes; system leaves out the 4x4)")
    p.add_argument("--large-array", type=int, metavar="N",
                   help="blocks: edge of the large MXU built on the compiled path (default 32; "
                        "0 skips it; 64 needs about 8 GB and half an hour)")
    p.add_argument("--twisted", metavar="SHAPES",
                   help="network: the shapes whose regular and twisted tori are compared "
                        "(default 4x4x8,4x8x8)")
    p.add_argument("--suite", help="regression: the suite whose seeds are timed (default arith)")
    p.add_argument("--seeds", type=positive, help="regression: seeds per run (default 6)")
    p.add_argument("--workers", metavar="N,N",
                   help="regression: worker counts, comma-separated (default 1,2)")
    p.set_defaults(func=run)
