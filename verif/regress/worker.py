"""One seed of a regression, run in its own process by :mod:`verif.regress`.

A seed runs each of its suite's simulator runs, writes the functional
coverage and (Verilator) code coverage of each next to it, and records the
outcome in ``result.json``. Its own process means a simulator that crashes
or hangs takes down this seed only. Exit status 0 when every run passed.
Run as a program, it ends (with its simulators) when the process that
started it dies, so a killed runner or Dask worker leaves nothing running.
"""

import argparse
import contextlib
import functools
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from sim.backends import coverage_build, run_program
from sim.collector import collect_less
from sim.toolchain.build_cache import BUILD_LISTENERS

from verif.suites import SUITES
from verif.suites.case import WholeCase

__all__ = ["run_seed", "main"]

#: Faults a test of the regression runner itself can inject into one seed.
#: ``golden-no-flush`` (arith, mxu) and ``golden-fault`` (dma) corrupt the expected results;
#: ``starve-nan`` (arith) takes every operation with a NaN operand out of the stimulus.
INJECTIONS = ("golden-no-flush", "golden-fault", "crash", "hang", "starve-nan")


def run_seed(suite, seed, sim, out, *, waves=False, code_coverage=False, inject=None,
             only=None):
    """Run one seed; returns its result record (also written to ``out/result.json``).

    ``only`` keeps just the runs whose name (such as ``fp32_add-tpu``) contains it.
    """
    out = Path(out).resolve()          # simulators run in folders of their own
    out.mkdir(parents=True, exist_ok=True)
    if inject == "crash":
        os._exit(86)                    # as a simulator dying with the process would
    if inject == "hang":
        time.sleep(1e6)
    started = time.perf_counter()
    # Code coverage of whole runs: Verilator's coverage builds, their points summed over the
    # seed's cases per build and written as <suite>.<build>.dat (with the build's source map
    # beside it) when the seed ends; a file a case would repeat them (97 MB a case for a
    # 4-chip system).
    with (coverage_build.collecting(out, prefix=suite) if code_coverage and sim == "verilator"
          else contextlib.nullcontext()):
        cases = _run_cases(suite, seed, sim, out, waves=waves, code_coverage=code_coverage,
                           inject=inject, only=only)
    if not cases:
        raise SystemExit(f"no run of suite {suite} matches {only!r}")
    record = {"suite": suite, "seed": seed, "sim": sim, "cases": cases,
              "status": "pass" if all(c["status"] == "pass" for c in cases) else "fail",
              "seconds": round(time.perf_counter() - started, 2)}
    (out / "result.json").write_text(json.dumps(record, indent=1, default=str))
    return record


def _run_cases(suite, seed, sim, out, *, waves, code_coverage, inject, only):
    """The records of the seed's cases (those ``only`` keeps), each run and checked."""
    cases = []
    for run in SUITES[suite].runs(seed, inject=inject):
        name = run.name if isinstance(run, WholeCase) else run[2]
        if only and only not in name:
            continue
        case = {"case": name}
        wave_file = out / f"{name}.{'vcd' if sim != 'icarus' else 'fst'}" if waves else None
        try:
            if isinstance(run, WholeCase):
                case |= run.check(backend=sim, coverage=out / f"{name}.cov.xml",
                                  waves=wave_file)
            else:
                block, params, name, program = run
                case |= run_program(
                    block, params, functools.partial(program, coverage=out / f"{name}.cov.xml"),
                    backend=sim, waves=wave_file,
                    coverage=out / f"{name}.dat" if code_coverage else None,
                    run_dir=out / name if sim != "amaranth" else None)
                if code_coverage:
                    _write_source_map(block, params, out / f"{name}.src.json")
            case["status"] = "pass" if case["mismatches"] == 0 else "fail"
        except Exception as error:      # a hang, a protocol error, a simulator failure
            case |= {"status": "error", "error": f"{type(error).__name__}: {error}",
                     "traceback": traceback.format_exc()}
        cases.append(case)
    return cases


def _write_source_map(block, params, path):
    """The ``hdl/`` line owning each line of the block's exported Verilog (the one the
    coverage build compiled), for :mod:`verif.regress.source_coverage`."""
    from sim.verilog.source_map import export_with_source, generated_lines, source_map
    plain, attributed = export_with_source(block, params)
    lines = source_map(attributed, plain)
    path.write_text(json.dumps({"block": block, "params": params, "lines": plain.count("\n"),
                                "owners": lines, "generated": generated_lines(plain)},
                               default=str))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m verif.regress.worker")
    parser.add_argument("suite", choices=SUITES)
    parser.add_argument("seed", type=int)
    parser.add_argument("--sim", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--waves", action="store_true")
    parser.add_argument("--code-coverage", action="store_true")
    parser.add_argument("--inject", choices=INJECTIONS)
    parser.add_argument("--only")
    args = parser.parse_args(argv)
    collect_less()
    # Builds take minutes: say so in the seed's log, where the runner's progress line
    # looks for them (stderr goes to worker.log).
    BUILD_LISTENERS.append(lambda message: print(message, file=sys.stderr, flush=True))
    record = run_seed(args.suite, args.seed, args.sim, args.out, waves=args.waves,
                      code_coverage=args.code_coverage, inject=args.inject, only=args.only)
    return 0 if record["status"] == "pass" else 1


def _exit_with_parent(poll=1.0):
    """End this process soon after the one that started it dies.

    A seed runs in a session of its own, so a killed runner (or Dask
    worker) takes no signal down to it; without this it would run on.
    """
    # The runner names itself: it may have died before this process got here.
    parent = int(os.environ.get("TPU_RTL_SEED_PARENT", os.getppid()))

    def watch():
        while os.getppid() == parent:
            time.sleep(poll)
        if os.getpgid(0) == os.getpid():     # our own group: take the simulators along
            os.killpg(0, signal.SIGKILL)
        os._exit(70)
    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


if __name__ == "__main__":
    _exit_with_parent()
    sys.exit(main())
