# amaranth: UnusedElaboratable=no
# (Module-scoped runners are built once; a test run that deselects them never elaborates.)
"""hdl.tensorcore: ``dma`` bundles, their descriptor checks at issue, the VMEM fence and
the flags, co-simulated with golden.tensorcore.run on hdl.tensorcore.TensorCoreSystem (the
core on hdl.memory.DmaSystem)."""

import numpy as np
import pytest

from golden import memory
from golden import tensorcore as tc

from hdl.tensorcore.system import TensorCoreSystem
from verif.suites.tensorcore.programs import (
    dma_program, initial_sregs, random_descriptor_words)

from .rtl_harness import CoreRunner, compare

SMEM, IMEM, VMEM_LINES, N_FLAGS, HBM = 128, 48, 64, 8, 256
RECORDS = 72                       # descriptor records live at SMEM 72, 84, 96, 108
OPS = ("add",)


def _runner(**kw):
    return CoreRunner(TensorCoreSystem(imem_depth=IMEM, smem_words=SMEM, n_flags=N_FLAGS,
                                       lanes=1, vmem_lines=VMEM_LINES, hbm_words=HBM,
                                       ops=OPS, **kw))


@pytest.fixture(scope="module")
def runner():
    return _runner()


@pytest.fixture(scope="module")
def one_port_runner():
    """SMEM on one RAM port (the FPGA chips'): records read on one port."""
    return _runner(ram_ports=1)


@pytest.fixture(scope="module")
def staged_runner():
    """The FPGA prototype's stages: SMEM on one RAM port, the sequencer's decode stage, the
    vector queue's beat register, the registered VMEM fence and the DMA's beat queue."""
    return _runner(ram_ports=1, decode_stage=True, vector_register=True,
                   fence_register=True, beat_queue=True)


def cosim(runner, program, *, smem, rng, sregs=None, context=""):
    hbm = rng.integers(0, 1 << 32, HBM, dtype=np.uint64).astype(np.uint32)
    vmem = rng.integers(0, 1 << 32, VMEM_LINES, dtype=np.uint64).astype(np.uint32)
    kw = dict(smem=smem, sregs=sregs, vmem=vmem, hbm=hbm)
    iss = tc.run(program, **kw, imem_bundles=IMEM, lanes=1, n_flags=N_FLAGS)
    if iss.error == "race":
        return None, iss
    rtl = runner.run(program, **kw)
    compare(rtl, iss, context=context)
    return rtl, iss


def _smem(*records):
    smem = np.zeros(SMEM, np.uint32)
    for k, words in enumerate(records):
        smem[RECORDS + 12 * k:RECORDS + 12 * (k + 1)] = words
    return smem


def _copy(src, dst, counts, s, d, flag):
    return tc.descriptor_words(memory.Descriptor(src, dst, counts, s, d, flag=flag))


FENCE_RECORDS = (_copy(("hbm", 0), ("vmem", 0), (8,), (1,), (1,), 1),
                 _copy(("vmem", 8), ("hbm", 100), (4, 2), (1, 4), (2, 20), 2),
                 _copy(("hbm", 40), ("vmem", 32), (2, 2, 2), (-1, 5, 9), (1, 2, 4), 1))
FENCE_PROGRAM = f"""
    dma {RECORDS}
    wait f1, 8
    vld v1, 0, 1 | add v2, v1, v1 | vst v2, 8, 1 | dma {RECORDS + 12}
    dma {RECORDS + 24} | addi s3, s0, 16
    waitc f2, 8
    wait f1, s3+0
    fadd f2, 5
    halt
"""


def test_dma_fence_and_flags(runner):
    """A DMA issued in the bundle of a vst sees the stored words (the VMEM fence); waits,
    a consuming wait and fadd on DMA flags."""
    rtl, iss = cosim(runner, FENCE_PROGRAM, smem=_smem(*FENCE_RECORDS),
                     rng=np.random.default_rng(1))
    assert iss.halted and iss.dmas == 3 and rtl.flags[:3].tolist() == [0, 16, 5]


def test_dma_fence_with_line_by_line_stores(runner, one_port_runner):
    """The fence program's ``vst`` is one VMEM request on the default chip (its VMEM
    window, with two RAM ports) and 8 line-by-line requests without one: a chip without
    the window and a chip on one RAM port end as the ISS too, in more cycles."""
    assert runner.core.core.vpu.window_lines == 8
    assert one_port_runner.core.core.vpu.window_lines == 0
    lines = _runner(vmem_window=0)
    assert lines.core.core.vpu.window_lines == 0
    whole, _ = cosim(runner, FENCE_PROGRAM, smem=_smem(*FENCE_RECORDS),
                     rng=np.random.default_rng(1))
    for slower in (lines, one_port_runner):
        rtl, iss = cosim(slower, FENCE_PROGRAM, smem=_smem(*FENCE_RECORDS),
                         rng=np.random.default_rng(1))
        assert iss.halted and rtl.flags[:3].tolist() == [0, 16, 5]
        assert rtl.cycles > whole.cycles


@pytest.mark.parametrize("stages", [dict(fence_register=True),
                                    dict(decode_stage=True, vector_register=True,
                                         fence_register=True, beat_queue=True)])
def test_a_registered_fence_is_never_early(stages):
    """With the fence from a flip-flop, a ``dma`` in the bundle of a ``vst`` still copies
    the stored words, on the sequencer that commits a bundle in the cycle IMEM answers
    (where a fence a cycle late would let the descriptor go first) and on the staged one."""
    rtl, iss = cosim(_runner(**stages), FENCE_PROGRAM, smem=_smem(*FENCE_RECORDS),
                     rng=np.random.default_rng(1))
    assert iss.halted and rtl.flags[:3].tolist() == [0, 16, 5]


@pytest.mark.parametrize("params, message", [
    (dict(ram_ports=1, vmem_window=8), "vmem_window=8 needs VMEM ports of its own"),
    (dict(vmem_window=4), "vmem_window must be 0"),
    (dict(vmem_window="8"), "vmem_window"),
])
def test_a_bad_vmem_window_is_named(params, message):
    with pytest.raises((TypeError, ValueError), match=message):
        TensorCoreSystem(**params)


def test_hbm_jitter_moves_when_words_land_and_changes_no_value(runner):
    """``jitter``: the chip's HBM reads take up to that many cycles more, seeded, and the
    program's every result is still the ISS's; the same program takes longer than on
    the chip without jitter (so the jitter is there)."""
    jittered = CoreRunner(TensorCoreSystem(imem_depth=IMEM, smem_words=SMEM, n_flags=N_FLAGS,
                                           lanes=1, vmem_lines=VMEM_LINES, hbm_words=HBM,
                                           ops=OPS, jitter=12))
    assert "hbm_seed" in jittered.core.signature.members
    assert "hbm_seed" not in runner.core.signature.members
    plain, _ = cosim(runner, FENCE_PROGRAM, smem=_smem(*FENCE_RECORDS),
                     rng=np.random.default_rng(1))
    late, iss = cosim(jittered, FENCE_PROGRAM, smem=_smem(*FENCE_RECORDS),
                      rng=np.random.default_rng(1))
    assert iss.halted and late.flags[:3].tolist() == [0, 16, 5]
    assert late.cycles > plain.cycles


@pytest.mark.parametrize("window, apart", [(None, 4), (0, 8)])
def test_back_to_back_dma_bundles_go_every_few_cycles(window, apart):
    """A run of ``dma`` bundles whose records sit one after another: each record is read
    while the one before is judged and sent, so the bundles go every 4 cycles with the
    default record window (SMEM's 8-word read port) and every 8 with one-word reads
    (``smem_window=0``); the cycles a program takes grow by that much a ``dma``. The
    results are the ISS's either way."""
    runner = _runner(**({} if window is None else dict(smem_window=window)))
    cycles = []
    for n in (1, 4):
        records = [_copy(("hbm", k), ("vmem", k), (1,), (1,), (1,), 1) for k in range(n)]
        program = "\n".join(f"dma {RECORDS + 12 * k}" for k in range(n))
        rtl, iss = cosim(runner, f"{program}\nwait f1, {n}\nhalt", smem=_smem(*records),
                         rng=np.random.default_rng(n))
        assert iss.halted and iss.dmas == n
        cycles.append(rtl.cycles)
    assert (cycles[1] - cycles[0]) == 3 * apart


@pytest.mark.parametrize("record, error", [
    (_copy(("hbm", 250), ("vmem", 0), (8,), (1,), (1,), 1), "dma_src_range"),
    (_copy(("hbm", 0), ("vmem", 60), (2, 3), (1, 1), (1, 2), 1), "dma_dst_range"),
    (_copy(("hbm", 0), ("vmem", 0), (3, 0), (1, 1), (1, 1), 1), "dma_count"),
    (_copy(("hbm", 0), ("vmem", 0), (3,), (1,), (1,), N_FLAGS), "dma_flag"),
    (_copy(("hbm", 0), ("remote", 3, "vmem", 0), (3,), (1,), (1,), 1), "dma_chip"),
])
def test_rejected_descriptors_stop_the_core(runner, record, error):
    rtl, iss = cosim(runner, f"addi s1, s0, 1\ndma {RECORDS} | addi s2, s0, 1 | "
                             f"vst v1, 0, 1\nhalt", smem=_smem(record),
                     rng=np.random.default_rng(2))
    assert iss.error == error and iss.error_pc == 1 and rtl.sregs[2] == 0


def test_record_format_and_range(runner):
    record = _copy(("hbm", 0), ("vmem", 0), (3,), (1,), (1,), 1)
    for word, value in ((0, 1 << 31), (2, 1 << 24), (6, 1 << 24), (9, 0xFF000000)):
        bad = record.copy()
        bad[word] = value
        _, iss = cosim(runner, f"dma {RECORDS}\nhalt", smem=_smem(bad),
                       rng=np.random.default_rng(3))
        assert iss.error == "dma_format"
    # Counts whose product is 2**24 words or more are a format fault; just below, a range.
    for counts, error in (((4096, 4096, 1), "dma_format"), ((1, 4096, 4096), "dma_format"),
                          ((4096, 4095, 1), "dma_dst_range")):
        big = record.copy()
        big[3:6] = counts
        _, iss = cosim(runner, f"dma {RECORDS}\nhalt", smem=_smem(big),
                       rng=np.random.default_rng(5))
        assert iss.error == error
    _, iss = cosim(runner, f"li s1, {SMEM - 11}\ndma s1+0\nhalt", smem=_smem(record),
                   rng=np.random.default_rng(4))
    assert iss.error == "smem_range" and iss.error_pc == 1


@pytest.mark.parametrize("chip", ["runner", "staged_runner"])
def test_random_dma_programs(request, chip, seed):
    runner = request.getfixturevalue(chip)
    seeds = np.random.default_rng(seed).integers(0, 1 << 32, 14).tolist()
    compared = 0
    for program_seed in seeds:
        rng = np.random.default_rng(program_seed)
        records = [random_descriptor_words(rng, hbm_words=HBM, vmem_words=VMEM_LINES,
                                           n_flags=N_FLAGS) for _ in range(4)]
        smem = _smem(*records)
        smem[:RECORDS] = rng.integers(0, 1 << 32, RECORDS, dtype=np.uint64)
        sregs = initial_sregs(rng, 64)
        text = dma_program(rng, records=records, record_base=RECORDS, smem_words=64,
                           vmem_lines=VMEM_LINES, ops=OPS)
        rtl, _ = cosim(runner, text, smem=smem, rng=rng, sregs=sregs,
                       context=f"program seed {program_seed} of test seed {seed}:\n{text}")
        compared += rtl is not None
    assert compared >= len(seeds) // 2


@pytest.mark.parametrize("ports", [2, 1])
def test_a_record_written_after_it_was_read_ahead_is_used_as_written(request, ports):
    """The second record is read ahead while the first is judged; an ``sw`` then moves
    its destination, and its ``dma`` copies to the new one. An ``sw`` in the bundle of a
    ``dma`` is not seen by it (its record is read first, as in the ISS), but by the next."""
    records = [_copy(("hbm", 8 * k), ("vmem", 8 * k), (8,), (1,), (1,), 1) for k in range(3)]
    dst = [RECORDS + 12 * k + 2 for k in range(3)]   # word 2 of a record: dst_base
    program = f"""
        dma {RECORDS} | addi s1, s0, 40
        delay 20
        sw s1, {dst[1]}(s0)
        addi s1, s0, 48
        sw s1, {dst[2]}(s0) | dma {RECORDS + 12}
        addi s1, s0, 56
        sw s1, {dst[2]}(s0) | dma {RECORDS + 24}
        wait f1, 24
        halt
    """
    runner = request.getfixturevalue("runner" if ports == 2 else "one_port_runner")
    rtl, iss = cosim(runner, program, smem=_smem(*records), rng=np.random.default_rng(5))
    assert iss.halted and iss.dmas == 3
    assert rtl.vmem[40:48].tolist() == rtl.hbm[8:16].tolist()
    assert rtl.vmem[48:56].tolist() == rtl.hbm[16:24].tolist()
