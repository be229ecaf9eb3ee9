"""Regression suite ``vpu``: constrained-random programs on the VPU RTL against the golden executor.

A seed runs, per numerics mode (one case each: ``vpu-tpu`` and ``vpu-ieee``),
programs of :mod:`.stimulus` on each of :data:`BUILDS`: an 8-lane VPU with its
8x8 MXU, and a 1-lane VPU without one (where MXU instructions are errors).
Each program starts from random registers and VMEM, runs whole on the RTL
(``sim.vpu.run``) and on ``golden.vpu.execute(..., on_error="stop")``, and the
**full architectural state** is compared: every word of the 32 vregs and of
the VMEM, the error that stopped the program (kind and instruction index), and
the instructions executed. A program dealt an error must stop exactly there,
with nothing after it executed. Half the programs have idle cycles on the
program stream, so instructions arrive singly and in pairs at random.

Functional coverage (:mod:`.coverage`) is sampled from the golden trace of
each program. On Verilator a case runs :data:`PROGRAMS` programs of about
:data:`LENGTH` words per build, which reaches every bin in one seed; its builds
(two per mode) are shared by every seed and are ``sim.vpu``'s default builds
for those lanes and numerics (the program memory's depth fixed, :data:`DEPTH`).
Amaranth and Icarus, slower by orders of magnitude, run two short programs per
build.
"""

from pathlib import Path

import numpy as np
from cocotb_coverage.coverage import coverage_db

from golden import vpu as golden_vpu
from golden.formats import NUMERICS
from sim import vpu as sim_vpu
from sim.backends.compiled import CompiledRunError
from sim.transactors import SimulationHang

from ..case import WholeCase
from .coverage import sample_program, sampler, trace, uncovered
from .stimulus import Build, deal, make_program
from ...scoreboard import Scoreboard, Tally

__all__ = ["BUILDS", "PROGRAMS", "LENGTH", "DEPTH", "IDLE", "plan", "program", "expected",
           "check_case", "stimulus_coverage", "runs"]

#: The VPU builds of every case: 8 lanes with an MXU, 1 lane without.
BUILDS = (Build(lanes=8, mxu=True), Build(lanes=1, mxu=False))
#: Programs per build and case, and their length in words, by simulator.
PROGRAMS = {"verilator": 16, "icarus": 2, "amaranth": 2}
LENGTH = {"verilator": 300, "icarus": 40, "amaranth": 40}
#: Program memory of every build, in beats (two words each): ``sim.vpu``'s default, so one
#: build serves every program of a case and every ``sim.vpu`` call of those parameters.
DEPTH = sim_vpu.PROGRAM_DEPTH
#: Idle probability of the program stream, in every other program.
IDLE = 0.3


def plan(seed, numerics, backend):
    """The programs of case ``numerics`` of ``seed``: a list of ``(Build, [Program, ...])``."""
    mode = NUMERICS.index(numerics)
    count = PROGRAMS[backend]
    out = []
    for index, build in enumerate(BUILDS):
        rng = np.random.default_rng([seed, mode, index, 0x5E0])
        # The slow simulators run a few short programs: a full deal would not fit them.
        moves, errors = deal(rng, build, count)
        if backend != "verilator":
            moves = [m[:4] for m in moves]
        programs = [make_program(rng, build, m, e, length=LENGTH[backend],
                                 idle=IDLE if k % 2 else 0.0)
                    for k, (m, e) in enumerate(zip(moves, errors))]
        longest = max(len(p.words) for p in programs)
        if longest > 2 * DEPTH:         # the stimulus stays well within it
            raise RuntimeError(f"a program of {longest} words does not fit {DEPTH} beats")
        out.append((build, programs))
    return out


def program(seed, numerics, lanes, index, backend="verilator"):
    """``(Build, Program)``: program ``index`` on the ``lanes``-lane build of case
    ``numerics`` of ``seed``, as the regression on ``backend`` ran it (a failure report
    names it so; ``sim.vpu.run`` and ``golden.vpu.disassemble`` take it from there)."""
    for build, programs in plan(seed, numerics, backend):
        if build.lanes == lanes:
            return build, programs[index]
    raise ValueError(f"no build of {lanes} lanes; builds: {[b.lanes for b in BUILDS]}")


def _mxu(build, numerics):
    return golden_vpu.MXUState(lanes=build.lanes, numerics=numerics,
                               capacity=build.mxu_results) if build.mxu else False


def expected(program, build, numerics):
    """``golden.vpu.execute`` of ``program`` on ``build``, stopping at its error."""
    return golden_vpu.execute(program.words, vregs=program.vregs, vmem=program.vmem,
                              lanes=build.lanes, numerics=numerics, mxu=_mxu(build, numerics),
                              on_error="stop")


def _where(program, build, stop):
    """A mismatch's place in the state, and the last instruction before ``stop`` that wrote
    it, so a failure report points at the program."""
    lanes, words = build.lanes, program.words[:stop]
    vreg_words = golden_vpu.VREGS * golden_vpu.SUBLANES * lanes

    def writer(test):
        for index in range(len(words) - 1, -1, -1):
            try:
                ins = golden_vpu.decode(words[index])
            except golden_vpu.IllegalInstruction:
                continue
            if test(ins):
                return f"; last written by instruction {index} ({ins})"
        return "; not written by the program"

    def where(i):
        if i < vreg_words:
            r, rest = divmod(i, golden_vpu.SUBLANES * lanes)
            s, j = divmod(rest, lanes)
            return f"v{r} sublane {s} lane {j}" + writer(
                lambda ins: ins.spec.writes and getattr(ins, ins.spec.writes[0]) == r)
        line, j = divmod(i - vreg_words, lanes)
        return f"vmem line {line} lane {j}" + writer(
            lambda ins: ins.op == "vst" and line in ins.base + ins.stride * np.arange(8))
    return where


def _sample(samplers, program, build, numerics):
    """Sample the bins ``program`` reaches, from its golden trace."""
    steps, final = trace(program.words, vregs=program.vregs, vmem=program.vmem,
                         lanes=build.lanes, numerics=numerics, mxu=_mxu(build, numerics))
    sample_program(samplers, program, build, numerics, steps, final)


class _Tally(Tally):
    def __init__(self):
        super().__init__()
        self.cycles = self.executed = self.dual = self.errors = 0


def _check_program(tally, label, program, build, numerics, *, backend, waves, inject, rng):
    want = expected(program, build, numerics)
    try:
        got = sim_vpu.run(program.words, vregs=program.vregs, vmem=program.vmem,
                          lanes=build.lanes, numerics=numerics, backend=backend,
                          vmem_lines=build.vmem_lines, mxu=build.mxu,
                          mxu_results=build.mxu_results, idle=program.idle, seed=program.seed,
                          depth=DEPTH, waves=waves)
    except (SimulationHang, CompiledRunError) as error:
        # A hung VPU fails this program; the others still run.
        tally.check(False, f"{label}: {type(error).__name__}: {error}")
        return
    state = np.concatenate([want.vregs.ravel(), want.vmem])
    if inject == "golden-fault":
        state[int(rng.integers(state.size))] ^= 1
    stop = want.error if want.error is not None else len(program.words)
    board = Scoreboard(label, state, where=_where(program, build, stop))
    board.check_all(np.concatenate([got.vregs.ravel(), got.vmem]))
    tally.board(board)
    stopped = (got.error, got.error_index)
    tally.check(stopped == (want.error_kind, want.error),
                f"{label}: the VPU stopped with {stopped}, expected "
                f"{(want.error_kind, want.error)} (error, instruction)")
    tally.check(got.executed == want.executed,
                f"{label}: {got.executed} instructions executed, expected {want.executed}")
    tally.cycles += got.cycles
    tally.executed += got.executed
    tally.dual += got.dual
    tally.errors += want.error is not None


def check_case(seed, numerics, *, backend, coverage=None, waves=None, inject=None):
    """Run every program of ``seed`` in ``numerics`` on ``backend``; returns the case record."""
    if coverage is not None:
        coverage_db.clear()
        samplers = sampler()
    tally = _Tally()
    programs = 0
    rng = np.random.default_rng([seed, 0xFA17])
    inject_next = inject          # a golden fault goes into the first program only
    for build, batch in plan(seed, numerics, backend):
        for index, case_program in enumerate(batch):
            label = (f"vpu seed {seed} {numerics} lanes {build.lanes} program {index} "
                     f"({len(case_program.words)} words, idle {case_program.idle}; "
                     f"verif.suites.vpu.suite.program({seed}, {numerics!r}, {build.lanes}, "
                     f"{index}, {backend!r}) makes it)")
            wave = None if waves is None else Path(waves).with_name(
                f"{Path(waves).stem}-{build.lanes}-{index}{Path(waves).suffix}")
            _check_program(tally, label, case_program, build, numerics, backend=backend,
                           waves=wave, inject=inject_next, rng=rng)
            inject_next = None
            programs += 1
            if coverage is not None:
                _sample(samplers, case_program, build, numerics)
    if coverage is not None:
        coverage_db.export_to_xml(str(coverage))
    return {"case": f"vpu-{numerics}", "checked": tally.checked,
            "mismatches": tally.mismatches, "first_mismatch": tally.first,
            "cycles": tally.cycles, "programs": programs, "executed": tally.executed,
            "dual_cycles": tally.dual, "error_programs": tally.errors}


def stimulus_coverage(seed, *, backend="verilator", numerics=NUMERICS):
    """The bins the programs of ``seed`` reach, judged from their golden traces alone (no
    RTL): the ``coverage.uncovered()`` list of a model sampled with the cases of
    ``numerics``. A seed that reaches every bin this way reaches 100% on an RTL that
    matches golden."""
    coverage_db.clear()
    samplers = sampler()
    for mode in numerics:
        for build, programs in plan(seed, mode, backend):
            for case_program in programs:
                _sample(samplers, case_program, build, mode)
    return uncovered()


def runs(seed, *, inject=None):
    """The whole-run cases of a seed, one per numerics mode."""
    for numerics in NUMERICS:
        def check(*, backend, coverage=None, waves=None, numerics=numerics):
            return check_case(seed, numerics, backend=backend, coverage=coverage, waves=waves,
                              inject=inject)
        yield WholeCase(f"vpu-{numerics}", check)

#: The broken golden model ``--inject`` can switch on in this suite.
GOLDEN_INJECTION = "golden-fault"
