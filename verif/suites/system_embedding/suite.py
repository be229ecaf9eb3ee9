"""Regression suite ``system_embedding``: random multi-chip embedding steps on chips with a
SparseCore, every output word, the whole table and the whole state against
``golden.embedding.step``.

A seed is one system build (:func:`.stimulus.build`: a topology shape and a numerics mode,
dealt by seed: 2x2, 1x4, 2x2x2 and a twisted 2x2x4, each with its routers; the chips are
:func:`.stimulus.build_chip`'s) and its cases (:func:`.stimulus.case`) are steps on it, one
:class:`~..case.WholeCase` each, named ``caseNN.<combiner>.<backward>[.failed<chip>]`` so
that ``--only caseNN.`` runs one alone. Each case runs ``sim.system.embedding_step`` on the
regression's simulator and compares, as bit patterns, every chip's lookups, the whole table
and the whole optimizer state with ``golden.embedding.step`` of the same inputs, and
``hbm_reads`` (counted by the RTL) and ``ici_words`` with golden's. A case whose capacity is
one below its largest pair's unique ids must raise ``golden.embedding.CapacityOverflow`` on
both sides, with the same message, before anything is built or run; the case then runs the
same step without a capacity, so that every case runs the RTL. A chip fault or a hang
(``sim.system.SystemRunError``) fails the case with its message. A failure names the seed,
the build, the case and the command that reproduces it.

The Amaranth simulator and Icarus run a 2x2 build only, and only the first two cases of
a seed (the others return a record with nothing checked): a system of chips with a
SparseCore is orders of magnitude slower there.

Functional coverage (:mod:`.coverage`) is sampled per case from its configuration. With
``inject="golden-fault"`` the expected table of every case has a bit flipped (and an
overflow case expects another message): the seed must fail.
"""

import numpy as np
from cocotb_coverage.coverage import coverage_db

from golden import embedding as golden
from sim import system as sim_system

from ..case import WholeCase
from .coverage import sampler, topology_bin
from .stimulus import build, case as make_case, inputs_of, plan

__all__ = ["check_case", "runs", "repro_command", "GOLDEN_INJECTION", "SLOW_CASES"]

#: The broken golden model ``--inject`` can switch on in this suite.
GOLDEN_INJECTION = "golden-fault"
#: Cases a slow simulator (Amaranth, Icarus) runs of a seed.
SLOW_CASES = 2


def repro_command(seed, backend, case):
    """The command that runs ``case`` of ``seed`` alone."""
    return (f"tpu-rtl regress system_embedding --backend {backend} --seed {seed} "
            f"--only {case.name}")


def _compare(got, want, what):
    """``(words, differing, first problem or None)`` of two bit-pattern arrays."""
    got = np.asarray(got).view(np.uint32).ravel()
    want = np.asarray(want).view(np.uint32).ravel()
    if got.size != want.size:
        return want.size, max(1, want.size), f"{what}: {got.size} words, expected {want.size}"
    wrong = np.flatnonzero(got != want)
    if not wrong.size:
        return want.size, 0, None
    at = int(wrong[0])
    return want.size, int(wrong.size), (f"{what}: {wrong.size} of {want.size} words differ, "
                                         f"first at flat index {at}: RTL {got[at]:#010x}, "
                                         f"golden {want[at]:#010x}")


def check_case(seed, case, *, backend, coverage=None, waves=None, inject=None):
    """Run ``case`` of ``seed`` on ``backend``; returns the case record: ``checked``
    (words compared), ``mismatches``, ``first_mismatch`` and ``cycles``."""
    b = build(seed, backend)
    table, indices, offsets, kwargs = inputs_of(case, b)
    label = f"system_embedding seed {seed} ({b.describe()}) {case.name}: {case.describe()}"
    record = {"case": case.name, "checked": 0, "mismatches": 0, "first_mismatch": None,
              "cycles": 0, "build": b.describe(), "step": case.describe()}
    try:
        want, expected_error = golden.step(table, indices, offsets, **kwargs), None
    except golden.CapacityOverflow as error:
        want, expected_error = None, str(error)
    if inject == GOLDEN_INJECTION:
        if want is None:
            expected_error += " (injected)"
        else:
            want.table.view(np.uint32).reshape(-1)[0] ^= 1
    problems, ran, overflowed = [], False, False
    if want is None:
        # The overflow, raised before anything is built; then the same step without a
        # capacity, so that the case still runs the RTL.
        try:
            sim_system.embedding_step(table, indices, offsets, backend=backend,
                                      seed=case.data_seed, waves=waves, **b.system,
                                      **kwargs)
        except golden.CapacityOverflow as error:
            overflowed = True
            if expected_error != str(error):
                problems.append(f"the RTL raised {error}, golden {expected_error}")
        else:
            problems.append(f"the RTL ran a step golden refused: {expected_error}")
        record |= {"checked": 1, "mismatches": len(problems)}
        kwargs = dict(kwargs, capacity=None)
        want = golden.step(table, indices, offsets, **kwargs)
        if inject == GOLDEN_INJECTION:
            want.table.view(np.uint32).reshape(-1)[0] ^= 1
    try:
        run = sim_system.embedding_step(table, indices, offsets, backend=backend,
                                        seed=case.data_seed, waves=waves, **b.system,
                                        **kwargs)
    except sim_system.SystemRunError as error:      # a chip faulted, or the system hung
        record["mismatches"] = 1
        problems.append(str(error))
    else:
        ran = True
        parts = [(run.out[r], want.out[r], f"out of rank {r}") for r in range(len(want.out))]
        parts += [(run.table, want.table, "table")]
        if want.state is not None:
            parts += [(run.state, want.state, "state")]
        parts += [(np.asarray(run.hbm_reads, np.uint32), want.hbm_reads.astype(np.uint32),
                   "hbm_reads"),
                  (np.array([run.ici_words], np.uint32),
                   np.array([want.ici_words], np.uint32), "ici_words")]
        for got, expected, what in parts:
            words, wrong, problem = _compare(got, expected, what)
            record["checked"] += words
            record["mismatches"] += wrong
            if problem:
                problems.append(problem)
        record |= {"cycles": run.cycles, "hbm_reads": [int(x) for x in run.hbm_reads],
                   "ici_words": int(run.ici_words)}
    if problems:
        record["first_mismatch"] = (f"{label}: {problems[0]}; reproduce: "
                                    f"{repro_command(seed, backend, case)}")
    if coverage is not None:
        coverage_db.clear()
        sample = sampler()
        if ran or overflowed:
            sample(dict(topology=topology_bin(b.shape, case.failed), combiner=case.combiner,
                        weighted=case.weighted, backward=case.backward, alpha=case.alpha,
                        rows=case.rows, width=case.width,
                        capacity="overflow" if overflowed else
                        ("none" if case.capacity == "none" else "tight"),
                        edge=case.edge, numerics=b.numerics, failed=case.failed,
                        hbm="jitter" if b.jitter else "fixed", router=b.router))
        coverage_db.export_to_xml(str(coverage))
    return record


def runs(seed, *, inject=None):
    """The whole-run cases of a seed, one step each (module docstring). A case a slow
    simulator skips returns a record with nothing checked and ``skipped`` set."""
    for index, failed in enumerate(plan(seed)):
        name = make_case(seed, index).name

        def check(*, backend, coverage=None, waves=None, index=index, name=name):
            if backend != "verilator" and index >= SLOW_CASES:
                return {"case": name, "checked": 0, "mismatches": 0, "first_mismatch": None,
                        "cycles": 0, "skipped": f"not run on {backend} (SLOW_CASES)"}
            return check_case(seed, make_case(seed, index, backend), backend=backend,
                              coverage=coverage, waves=waves, inject=inject)
        yield WholeCase(name, check)
