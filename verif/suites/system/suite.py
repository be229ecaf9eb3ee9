"""Regression suite ``system``: random collectives on a multi-chip system, every output word
against ``golden.collectives.collective``.

A seed is one system build (:func:`.stimulus.build`: a torus shape, a link parameter set
and a numerics mode, dealt by seed; the chips are ``sim.system.SYSTEM_CHIP``'s) and its
cases (:func:`.stimulus.cases`) are collectives on it, one :class:`~..case.WholeCase`
each, named ``caseNN.<kind>.<dtype>[.failed<chip>]`` so that ``--only caseNN.`` runs one
alone: on Verilator every kind in float32 and int32 on the regular torus, and on a 2x2
build every kind again with a chip failed; a size of a random class, 1 to 3 chunks, and
float32 data with about 15% special values. Each case runs
``sim.system.collective`` on the regression's simulator and compares every word of its
output, as bit patterns, with ``golden.collectives.collective`` of the same inputs,
topology, dtype and numerics. A chip fault or a hang (``sim.system.SystemRunError``, with
the chips, pcs and flags it names) fails the case with that message. A failure names the
seed, the build, the case and the command that reproduces it.

The Amaranth simulator and Icarus run a 2x2 build only, at the smallest sizes, one case
of each kind and the first failed-chip case (:func:`.stimulus.slow_indices`; the other
cases return a record with nothing checked): a system of TensorCores is orders of
magnitude slower there.

Functional coverage (:mod:`.coverage`) is sampled per case from its configuration. With
``inject="golden-fault"`` the expected output of every case the simulator runs has a bit
flipped (every case, so that a seed narrowed by ``--only`` fails too): the seed must fail.
"""

import numpy as np
from cocotb_coverage.coverage import coverage_db

from golden import collectives as golden
from sim import system as sim_system

from ..case import WholeCase
from .coverage import sampler, topology_bin
from .stimulus import Case, build, case as make_case, inputs_of, plan, topology_of

__all__ = ["check_case", "runs", "repro_command"]


def repro_command(seed, backend, case):
    """The command that runs ``case`` of ``seed`` alone."""
    return f"tpu-rtl regress system --backend {backend} --seed {seed} --only {case.name}"


def check_case(seed, case, *, backend, coverage=None, waves=None, inject=None):
    """Run ``case`` of ``seed`` on ``backend``; returns the case record: ``checked`` (output
    words), ``mismatches`` (words that differ; 1 for a run that faulted or hung),
    ``first_mismatch`` and ``cycles``."""
    b = build(seed, backend)
    topology = topology_of(b, case.failed)
    bits = inputs_of(case)
    want = golden.collective(case.kind, bits, topology=topology, dtype=case.dtype,
                             numerics=b.numerics).view(np.uint32).ravel().copy()
    if inject == "golden-fault":
        want[0] ^= 1
    label = f"system seed {seed} ({b.describe()}) {case.name}: {case.describe()}"
    record = {"case": case.name, "checked": int(want.size), "mismatches": 0,
              "first_mismatch": None, "cycles": 0, "build": b.describe(),
              "collective": case.describe()}
    problem = None
    try:
        run = sim_system.collective(case.kind, bits, topology=topology, dtype=case.dtype,
                                    backend=backend, seed=case.data_seed,
                                    numerics=b.numerics, chunks=case.chunks, waves=waves,
                                    chip=sim_system.SYSTEM_CHIP, **b.link_params)
    except sim_system.SystemRunError as error:      # a chip faulted, or the system hung
        run, problem = None, str(error)
        record["mismatches"] = 1
    else:
        got = np.asarray(run.out).view(np.uint32).ravel()
        if got.size != want.size:
            problem = f"{got.size} output words, expected {want.size}"
            record["mismatches"] = 1
        elif (wrong := np.flatnonzero(got != want)).size:
            at = int(wrong[0])
            problem = (f"{wrong.size} of {want.size} words differ, first at flat index {at} "
                       f"(output shape {list(np.shape(run.out))}): chip {got[at]:#010x}, "
                       f"golden {want[at]:#010x}")
            record["mismatches"] = int(wrong.size)
        record |= {"cycles": run.cycles, "busbw": round(run.busbw, 3),
                   "bus_bound": round(run.bus_bound, 3)}
    if problem:
        record["first_mismatch"] = (f"{label}: {problem}; reproduce: "
                                    f"{repro_command(seed, backend, case)}")
    if coverage is not None:
        coverage_db.clear()
        sample = sampler()
        if run is not None:         # a run that hung reached nothing
            sample(dict(topology=topology_bin(b.shape, case.failed), kind=case.kind,
                        dtype=case.dtype, numerics=b.numerics, chunks=case.chunks,
                        link=b.link, size=case.size, failed=case.failed))
        coverage_db.export_to_xml(str(coverage))
    return record


def runs(seed, *, inject=None):
    """The whole-run cases of a seed, one collective each (module docstring). A case a
    slow simulator skips returns a record with nothing checked and ``skipped`` set."""
    for index, (kind, dtype, failed) in enumerate(plan(seed)):
        name = Case(index, kind, dtype, failed, (), 1, "", 0).name

        def check(*, backend, coverage=None, waves=None, index=index, name=name):
            case = make_case(seed, index, backend)
            if case is None:
                return {"case": name, "checked": 0, "mismatches": 0, "first_mismatch": None,
                        "cycles": 0, "skipped": f"not run on {backend} (slow_indices)"}
            return check_case(seed, case, backend=backend, coverage=coverage, waves=waves,
                              inject=inject)
        yield WholeCase(name, check)

#: The broken golden model ``--inject`` can switch on in this suite.
GOLDEN_INJECTION = "golden-fault"
