"""Regression suite ``tensorcore``: random programs co-simulated on the chip and the ISS.

A seed runs, per numerics mode (one case each: ``tensorcore-tpu`` and
``tensorcore-ieee``), random programs of every kind (:data:`~.coverage.KINDS`, made by
:mod:`.programs`) on :data:`CHIP`, a ``hdl.tensorcore.TensorCoreSystem`` (sequencer,
VPU with its 8x8 MXU, DMA engine, HBM, VMEM, SMEM, flags), with ``sim.chip.execute``
on the regression's simulator, and on ``golden.tensorcore.run``:

* ``branchy``: forward branches and counted loops of scalar bundles with random vector
  slots (not the MXU's) and flag ops (some waits block);
* ``mxu``: straight-line MXU traffic kept legal (weights, LHS pushes with and without
  accumulators, pops) with random scalar and vector slots;
* ``dense``: every slot of every bundle full;
* ``dma``: descriptor records in SMEM issued with waits that cover them, 10% of them
  rejected at issue, and vector slots between;
* ``faulty``: any of those with faults dealt ten times as often.

Each program starts from random scalar and vector registers, SMEM, VMEM and HBM, 30% of
the data words special (zeros, infinities, NaNs, subnormals). The **whole architectural
state** is compared: how the core stopped (halted, blocked on a wait, or the fault and
its bundle), the pc, the bundles issued, every scalar and vector register, every word of
SMEM, VMEM and HBM, and every flag. A program the ISS finds breaking the memory-ordering
contract (``race``: a vector slot touching what an outstanding DMA moves) is replaced by
the next one, since the chip's result would depend on timing.

A third case, ``tensorcore-proto-<numerics>`` (the numerics alternate with the seed), runs
that mode's programs again on :data:`PROTO_CHIP`: the FPGA prototype's microarchitecture
(``hdl.tensorcore.presets``' ``proto``: the vector register file in RAM, VMEM and SMEM on
one RAM port each, 8-word HBM lines, its vector queue and the queue's beat register, the
MXU folded, the serial ALU, the sequencer's decode stage and the registered VMEM fence)
on :data:`CHIP`'s sizes and ops. Those levers change cycles, never values, so the ISS
must agree there too.

Functional coverage (:mod:`.coverage`) is sampled from the ISS's trace of each program
and from the chip's stall counters. On Verilator a case runs :data:`PROGRAMS` programs of
each kind; Amaranth and Icarus run one of each.
"""

import numpy as np
from cocotb_coverage.coverage import coverage_db

from golden import tensorcore as tc
from golden.formats import NUMERICS
from hdl.tensorcore.presets import preset
from sim import chip as sim_chip

from ..case import WholeCase
from .coverage import KINDS, Tracer, sampler, stall_causes, uncovered
from .programs import (REJECTS, dense_program, dma_program, initial_sregs, mxu_program,
                       random_descriptor_words, scalar_program, vector_slots)
from ...scoreboard import Tally

__all__ = ["CHIP", "PROTO_CHIP", "OPS", "PROGRAMS", "Program", "make_program", "expected",
           "differences", "check_case", "runs", "stimulus_coverage"]

#: The vector ALU-slot ops the programs use: the chip is built with only these.
OPS = ("add", "mul", "max", "iadd", "select", "f32_to_bf16", "bf16_to_f32", "rsum", "rcp")
_SMEM, _IMEM, _VMEM_LINES, _N_FLAGS, _HBM, _RESULTS, _LANES = 128, 64, 64, 8, 256, 16, 8
#: The chip of every program: small memories, a 4-bundle vector queue (so that the
#: sequencer stalls on it), HBM four cycles away.
CHIP = dict(imem_depth=_IMEM, smem_words=_SMEM, n_flags=_N_FLAGS, lanes=_LANES,
            vmem_lines=_VMEM_LINES, mxu_results=_RESULTS, vector_queue=4, ops=OPS,
            hbm_words=_HBM, read_latency=4, words_per_cycle=1)
#: :data:`CHIP` with the FPGA prototype's microarchitecture (module docstring).
PROTO_CHIP = CHIP | {name: preset("proto")[name]
                     for name in ("regfile", "ram_ports", "words_per_cycle", "vector_queue",
                                  "mxu_fold", "alu_width", "decode_stage",
                                  "vector_register", "fence_register", "beat_queue")}
#: Programs of each kind per case, by simulator.
PROGRAMS = {"verilator": 8, "icarus": 1, "amaranth": 1}
#: Descriptor records of a ``dma`` program live at SMEM 80, 92, ... (below: data).
_RECORDS, _N_RECORDS = 80, 4
#: Cycles a blocked wait is watched before the run counts as blocked.
_WATCHDOG = 300
_SPECIALS = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001,
                      0x807FFFFF, 0x3F800000, 0x00400000, 0x7F7FFFFF, 0x0000FFFF, 0x00017F80],
                     np.uint32)


class Program:
    """One program of a case: its ``kind``, assembly ``text``, initial state (``smem``,
    ``sregs``, ``vregs``, ``vmem``, ``hbm``) and the ``seed`` it came from."""

    def __init__(self, kind, seed, text, *, smem, sregs, vregs, vmem, hbm):
        self.kind, self.seed, self.text = kind, seed, text
        self.smem, self.sregs, self.vregs, self.vmem, self.hbm = smem, sregs, vregs, vmem, hbm

    def state(self):
        return dict(smem=self.smem, sregs=self.sregs, vregs=self.vregs, vmem=self.vmem,
                    hbm=self.hbm)


def _data(rng, n):
    words = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    special = rng.random(n) < 0.3
    words[special] = rng.choice(_SPECIALS, int(special.sum()))
    return words


def _text(rng, kind, smem, fault, *, overflow=False, reject=None):
    """Assembly of one ``kind`` program (``faulty`` picks another kind); ``overflow`` ends an
    ``mxu`` program with a ``results_full`` fault, ``reject`` breaks every record of a
    ``dma`` program for that reason (:data:`~.programs.REJECTS`)."""
    common = dict(smem_words=_RECORDS, n_flags=_N_FLAGS)
    if kind == "branchy":
        # No MXU slots: unchecked pushes and pops fault within a few bundles, and these
        # programs are for the branches, the loops and what ends them (``mxu`` has MXU
        # faults).
        return scalar_program(rng, blocks=10, fault=fault, extra=vector_slots(
            OPS, vmem_lines=_VMEM_LINES, fault=fault), **common)
    if kind == "mxu":
        return mxu_program(rng, lanes=_LANES, vmem_lines=_VMEM_LINES, mxu_results=_RESULTS,
                           ops=OPS, fault=fault, overflow=overflow, **common)
    if kind == "dense":
        return dense_program(rng, lanes=_LANES, vmem_lines=_VMEM_LINES, ops=OPS,
                             mxu_results=_RESULTS, smem_words=_RECORDS, n_flags=_N_FLAGS)
    records = [random_descriptor_words(rng, hbm_words=_HBM, vmem_words=_VMEM_LINES * _LANES,
                                       n_flags=_N_FLAGS, bad=0.1 + 30 * fault, reject=reject)
               for _ in range(_N_RECORDS)]
    for k, words in enumerate(records):
        smem[_RECORDS + 12 * k:_RECORDS + 12 * (k + 1)] = words
    # A rewrite would mix records broken for one reason into another's.
    return dma_program(rng, records=records, record_base=_RECORDS, smem_words=_RECORDS,
                       vmem_lines=_VMEM_LINES, ops=OPS, rewrite=0.0 if reject else 0.3)


def make_program(seed, numerics, index, kind):
    """Program ``index`` of ``kind`` in case ``numerics`` of ``seed`` (a failure report
    names it so): the first of its seeds that does not race.

    ``faulty`` programs take their base kind by ``index % 3``; the rare faults are dealt,
    not left to chance, so that every seed stops on each: ``faulty`` program 4 (an ``mxu``
    one) ends with ``results_full``, and programs 2 and 5 (``dma`` ones) break their
    records for a reason of :data:`~.programs.REJECTS` dealt by index and numerics."""
    rng = np.random.default_rng([seed, NUMERICS.index(numerics), KINDS.index(kind), index,
                                 0x7C0])
    while True:
        program_seed = int(rng.integers(0, 1 << 32))
        draw = np.random.default_rng(program_seed)
        base = kind if kind != "faulty" else ("branchy", "mxu", "dma")[index % 3]
        overflow = kind == "faulty" and index == 4
        reject = REJECTS[(index // 3 + 2 * NUMERICS.index(numerics)) % len(REJECTS)] \
            if kind == "faulty" and base == "dma" else None
        smem = _data(draw, _SMEM)
        program = Program(kind, program_seed, "", smem=smem, sregs=initial_sregs(draw, _RECORDS),
                          vregs=_data(draw, 32 * 8 * _LANES).reshape(32, 8, _LANES),
                          vmem=_data(draw, _VMEM_LINES * _LANES), hbm=_data(draw, _HBM))
        fault = 0.0 if overflow else 0.03 if kind == "faulty" else 0.003
        program.text = _text(draw, base, smem, fault, overflow=overflow, reject=reject)
        if expected(program, numerics).error != "race":
            return program


def expected(program, numerics, trace=None):
    """``golden.tensorcore.run`` of ``program`` on :data:`CHIP`."""
    return tc.run(program.text, **program.state(), imem_bundles=_IMEM, lanes=_LANES,
                  n_flags=_N_FLAGS, mxu_results=_RESULTS, numerics=numerics, trace=trace)


def differences(rtl, iss):
    """What differs between a chip's final state (``sim.chip.CoreRun``, or a test
    harness's run with the same fields) and the ISS's ``CoreState``: a list of one-line
    descriptions, empty when they agree. A VPU error or a descriptor the DMA engine
    rejected is always a difference (the ISS has neither); ``None`` memory or register
    fields of ``rtl`` (a part the top lacks) are not compared."""
    found = []
    if rtl.vpu_error:
        found.append(f"the VPU stopped with error {rtl.vpu_error}")
    if rtl.dma_rejected:
        found.append(f"the DMA engine rejected {rtl.dma_rejected} descriptors")
    stop, want = (rtl.status, rtl.error, rtl.error_pc), (iss.status, iss.error, iss.error_pc)
    if stop != want:
        found.append(f"stop: chip {stop} ({rtl.message}), ISS {want}: {iss.message}")
    for name in ("pc", "bundles"):
        if getattr(rtl, name) != getattr(iss, name):
            found.append(f"{name}: chip {getattr(rtl, name)}, ISS {getattr(iss, name)}")
    for name in ("sregs", "smem", "flags", "vregs", "vmem", "hbm"):
        mine = getattr(rtl, name)
        if mine is None:
            continue
        theirs = np.asarray(getattr(iss, name), np.uint32)
        if mine.shape != theirs.shape:
            found.append(f"{name}: chip shape {mine.shape}, ISS {theirs.shape}")
        elif not np.array_equal(mine, theirs):
            bad = tuple(int(i) for i in np.argwhere(mine != theirs)[0])
            found.append(f"{name}{list(bad)}: chip {int(mine[bad]):#010x}, ISS "
                         f"{int(theirs[bad]):#010x} ({int((mine != theirs).sum())} words "
                         f"differ)")
    return found


class _Tally(Tally):
    def __init__(self):
        super().__init__()
        self.cycles = self.bundles = self.programs = self.faults = self.blocked = 0


def _check_program(tally, label, program, numerics, *, backend, waves, inject, samplers,
                   chip=CHIP):
    tracer = Tracer() if samplers else None
    want = expected(program, numerics, trace=tracer)
    if inject == "golden-fault":
        want.sregs[1 + program.seed % 31] ^= 1
    got = sim_chip.execute(program.text, **program.state(), numerics=numerics,
                           backend=backend, chip=chip, watchdog=_WATCHDOG, waves=waves)
    found = differences(got, want)
    tally.check(not found, f"{label}: " + "; ".join(found[:4]))
    tally.programs += 1
    tally.cycles += got.cycles or 0
    tally.bundles += want.bundles
    tally.faults += want.status == "error"
    tally.blocked += want.status == "blocked"
    if samplers:
        _sample(samplers, tracer, want, program.kind, numerics, stall_causes(got.counters))


def _sample(samplers, tracer, state, kind, numerics, stalls):
    """Sample one program's coverage: each bundle it issued (``tracer``), and how it ended
    (the ISS's final ``state``) with the stall causes the chip counted."""
    sample_bundle, sample_program = samplers
    for sample in tracer.bundles(state.pc):
        sample_bundle(sample)
    stop = state.error if state.status == "error" else state.status
    sample_program((kind, numerics, stop, stalls))


def check_case(seed, numerics, *, backend, coverage=None, waves=None, inject=None,
               proto=False):
    """Run every program of ``seed`` in ``numerics`` on ``backend``, on :data:`CHIP` (or
    with ``proto`` on :data:`PROTO_CHIP`); returns the case record."""
    samplers = None
    if coverage is not None:
        coverage_db.clear()
        samplers = sampler()
    tally = _Tally()
    inject_next = inject              # a golden fault goes into the first program only
    for index in range(PROGRAMS[backend]):
        for kind in KINDS:
            program = make_program(seed, numerics, index, kind)
            label = (f"tensorcore seed {seed} {numerics}{' proto' * proto} {kind} program "
                     f"{index} (program seed {program.seed}; verif.suites.tensorcore.suite."
                     f"make_program({seed}, {numerics!r}, {index}, {kind!r}) makes it)")
            _check_program(tally, label, program, numerics, backend=backend, waves=waves,
                           inject=inject_next, samplers=samplers,
                           chip=PROTO_CHIP if proto else CHIP)
            inject_next = None
    if coverage is not None:
        coverage_db.export_to_xml(str(coverage))
    return {"case": case_name(numerics, proto=proto), "checked": tally.checked,
            "mismatches": tally.mismatches, "first_mismatch": tally.first,
            "cycles": tally.cycles, "programs": tally.programs, "bundles": tally.bundles,
            "fault_programs": tally.faults, "blocked_programs": tally.blocked}


def case_name(numerics, *, proto=False):
    """A case's name: ``tensorcore-<numerics>``, or ``tensorcore-proto-<numerics>``."""
    return f"tensorcore-{'proto-' * proto}{numerics}"


def runs(seed, *, inject=None):
    """The whole-run cases of a seed: one per numerics mode on :data:`CHIP`, then one on
    :data:`PROTO_CHIP` in the mode of the seed's parity (ieee for odd seeds)."""
    cases = [(numerics, False) for numerics in NUMERICS] + [(NUMERICS[seed % 2], True)]
    for numerics, proto in cases:
        def check(*, backend, coverage=None, waves=None, numerics=numerics, proto=proto):
            return check_case(seed, numerics, backend=backend, coverage=coverage, waves=waves,
                              inject=inject, proto=proto)
        yield WholeCase(case_name(numerics, proto=proto), check)


def stimulus_coverage(seeds, *, backend="verilator"):
    """The bins that the programs of ``seeds`` (both modes, as many as a ``backend`` case
    runs) leave uncovered when only the ISS runs them, as :func:`.coverage.uncovered`
    lists them. The stall bins need the chip's counters, so they are always listed."""
    coverage_db.clear()
    samplers = sampler()
    for seed in seeds:
        for numerics in NUMERICS:
            for index in range(PROGRAMS[backend]):
                for kind in KINDS:
                    tracer = Tracer()
                    want = expected(make_program(seed, numerics, index, kind), numerics,
                                    trace=tracer)
                    _sample(samplers, tracer, want, kind, numerics, [])
    return uncovered()

#: The broken golden model ``--inject`` can switch on in this suite.
GOLDEN_INJECTION = "golden-fault"
