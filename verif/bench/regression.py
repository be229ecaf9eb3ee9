"""Regression throughput: seeds per minute on the local executor and on a Dask LocalCluster.

``python -m verif.bench.regression`` runs the same seeds of ``regress SUITE``
on ``local -j N`` and on a ``LocalCluster`` of N workers, for each N asked
(by default 1 and 2, the cores here), one after the other in one run, and
writes the "Regression throughput" section of ``docs/benchmarks.md``
(replacing that section only). A warm-up seed first fills the build cache,
so no timed run builds a simulator.

*run* is ``run_regression`` from the first task to the merged reports;
*end to end* adds starting and stopping the cluster. Each run also records
how long merging took and how many bytes of results a seed sends back, the
two costs that grow with the farm.
"""

import argparse
import os
import re
import shutil
import sys
import time
from datetime import date
from pathlib import Path

from verif.regress.runner import merge_reports, run_regression
from verif.regress.executor import open_executor
from verif.regress.executor.seed import pack

__all__ = ["measure", "section", "write_section", "main"]

TITLE = "## Regression throughput"


def _shipped_bytes(folder):
    """Bytes a Dask task sends back per seed under ``folder/seeds``, as :func:`pack` packs them."""
    seeds = [p for p in (folder / "seeds").iterdir() if p.is_dir()]
    return sum(len(data) for seed in seeds for data in pack(seed).values()) / max(1, len(seeds))


def _one(suite, sim, seeds, workers, cluster, out):
    label = f"local:{workers} (Dask)" if cluster else f"local -j {workers}"
    print(f"bench: {label}, {seeds} seeds of {suite} on {sim}", file=sys.stderr, flush=True)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    with open_executor(f"local:{workers}" if cluster else None, jobs=workers) as executor:
        began = time.perf_counter()
        regression = run_regression(suite, seeds=seeds, sim=sim, seed_base=101, out=out,
                                    executor=executor)
        ran = time.perf_counter() - began
        stopping = time.perf_counter()
    stop = time.perf_counter() - stopping
    if regression.failed:
        raise RuntimeError(f"{label}: {len(regression.failed)} seeds failed; see {out}")
    return {"label": label, "workers": workers, "cluster": cluster, "seeds": seeds,
            "start": began - started, "run": ran, "stop": stop,
            "total": time.perf_counter() - started, "merge": regression.merge_seconds,
            "shipped": _shipped_bytes(out), "load": (load + os.getloadavg()[0]) / 2}


def measure(*, suite="arith", sim="verilator", seeds=6, workers=(1, 2),
            out=Path("build") / "bench" / "regress"):
    """Time ``seeds`` seeds of ``suite`` on each executor and worker count; returns the rows."""
    out = Path(out)
    began = time.perf_counter()
    warm = run_regression(suite, seeds=1, sim=sim, seed_base=101, out=out / "warm-up")
    warm_seconds = time.perf_counter() - began
    if warm.failed:
        raise RuntimeError(f"the warm-up seed failed; see {out / 'warm-up'}")
    rows = []
    for count in workers:
        # local, Dask, then (at the largest count, the comparison that matters) Dask and
        # local again: drift in the machine's other load falls on both alike.
        order = (False, True, True, False) if count == workers[-1] else (False, True)
        for repeat, cluster in enumerate(order):
            rows.append(_one(suite, sim, seeds, count, cluster,
                             out / f"{'dask' if cluster else 'local'}-{count}-{repeat}"))
    merged = _merge_cost(out / f"local-{workers[-1]}-0", copies=8, into=out / "merge")
    return {"suite": suite, "sim": sim, "seeds": seeds, "warm": warm_seconds, "rows": rows,
            "merge": merged}


def _merge_cost(folder, *, copies, into):
    """(seeds, seconds) of merging ``copies`` copies of every seed of ``folder``: the client's
    cost of a run that many times larger."""
    shutil.rmtree(into, ignore_errors=True)
    seeds = [p for p in (folder / "seeds").iterdir() if p.is_dir()]
    for copy in range(copies):
        for seed in seeds:
            target = into / "seeds" / f"{copy}-{seed.name}"
            target.mkdir(parents=True)
            for pattern in ("*.cov.xml", "*.dat"):      # what the merge reads
                for path in seed.glob(pattern):
                    shutil.copy(path, target / path.name)
    started = time.perf_counter()
    merge_reports(into)
    return copies * len(seeds), time.perf_counter() - started


def _sum(rows, key):
    return sum(r[key] for r in rows)


def _rate(seeds, seconds):
    return 60 * seeds / seconds


def section(result, command):
    """The Markdown section for ``result`` of :func:`measure`."""
    rows = result["rows"]
    lines = [
        TITLE, "",
        f"Written by `{command}` on {date.today().isoformat()}; every number comes from that "
        f"one run, on {os.cpu_count()} cores shared with other work (the load column is the "
        f"1-minute load average around each run). {result['seeds']} seeds (101 to "
        f"{100 + result['seeds']}) of `regress {result['suite']} --backend {result['sim']}` on "
        f"each executor; a warm-up seed ({result['warm']:.0f} s) filled the build cache "
        f"first. *run*: from the first task to the merged reports; *end to end*: also "
        f"starting and stopping the cluster; *merge*: merging the seeds' functional and "
        f"code coverage; *sent back*: a seed's result files as a Dask task returns them "
        f"(compressed).", "",
        "| executor | workers | run (s) | seeds/min | end to end (s) | seeds/min end to end "
        "| cluster start + stop (s) | merge (s) | sent back per seed (MB) | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['label']} | {r['workers']} | {r['run']:.1f} | "
                     f"{_rate(r['seeds'], r['run']):.2f} | {r['total']:.1f} | "
                     f"{_rate(r['seeds'], r['total']):.2f} | {r['start'] + r['stop']:.1f} | "
                     f"{r['merge']:.1f} | {r['shipped'] / 1e6:.2f} | {r['load']:.1f} |")
    lines.append("")
    for count in sorted({r["workers"] for r in rows}):
        local, dask = ([r for r in rows if r["workers"] == count and r["cluster"] == cluster]
                       for cluster in (False, True))
        runs = f" ({len(local)} runs each, summed)" if len(local) > 1 else ""
        lines.append(f"- {count} worker{'s' * (count > 1)}{runs}: the Dask path's overhead is "
                     f"{100 * (_sum(dask, 'run') / _sum(local, 'run') - 1):+.1f}% on the run "
                     f"and {100 * (_sum(dask, 'total') / _sum(local, 'total') - 1):+.1f}% end "
                     f"to end (goal: at most 10%).")
    seeds, seconds = result["merge"]
    lines.append(f"- Merging: {seeds} seeds' coverage (copies of the local run's) merges in "
                 f"{seconds:.1f} s, {seconds / seeds:.2f} s per seed on the client.")
    counts = sorted({r["workers"] for r in rows})
    if len(counts) > 1:
        for cluster in (False, True):
            few, many = ([r for r in rows if r["workers"] == n and r["cluster"] == cluster]
                         for n in (counts[0], counts[-1]))
            speedup = (_sum(few, "run") / len(few)) / (_sum(many, "run") / len(many))
            lines.append(f"- {'Dask' if cluster else 'local'}: {counts[-1]} workers run "
                         f"{speedup:.2f}x the seeds per minute of {counts[0]} (ideal: "
                         f"{counts[-1] / counts[0]:.0f}x).")
    return "\n".join(lines) + "\n"


def write_section(text, path):
    """Put ``text`` in ``path`` in place of its old "Regression throughput" section (or last)."""
    path = Path(path)
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(TITLE)}\n.*?(?=^## |\Z)", re.S | re.M)
    new = pattern.sub(lambda _: text + "\n", old, count=1) if pattern.search(old) else \
        old.rstrip("\n") + "\n\n" + text
    path.write_text(new.rstrip("\n") + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m verif.bench.regression",
                                     description="Seeds per minute of a regression on the local "
                                                 "executor and on a Dask LocalCluster.")
    parser.add_argument("--suite", default="arith")
    parser.add_argument("--sim", default="verilator", choices=("amaranth", "verilator", "icarus"))
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    parser.add_argument("-o", "--output", default="docs/benchmarks.md")
    args = parser.parse_args(argv)
    workers = tuple(int(w) for w in args.workers.split(","))
    if args.seeds < 1 or not workers or min(workers) < 1:
        parser.error("--seeds and every --workers count must be positive")
    result = measure(suite=args.suite, sim=args.sim, seeds=args.seeds, workers=workers)
    command = "python -m verif.bench.regression" + "".join(
        f" {flag} {value}" for flag, value, default in (
            ("--suite", args.suite, "arith"), ("--sim", args.sim, "verilator"),
            ("--seeds", args.seeds, 6), ("--workers", args.workers, "1,2"))
        if value != default)
    text = section(result, command)
    write_section(text, args.output)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
