# amaranth: UnusedElaboratable=no
# (The parameter checks make components that raise before they can be elaborated.)
"""hdl.tensorcore: the scalar side (registers, SMEM, control flow, flags, faults) co-simulated
with golden.tensorcore.run on directed and seeded random scalar-only programs."""

import numpy as np
import pytest

from golden import tensorcore as tc
from hdl.tensorcore.core import TensorCore
from hdl.tensorcore.sequencer import Sequencer
from verif.suites.tensorcore.programs import initial_sregs, scalar_program

from .rtl_harness import CoreRunner, LocalCore, compare

SMEM, IMEM, VMEM_LINES, N_FLAGS = 64, 64, 16, 8
PARAMS = dict(imem_depth=IMEM, smem_words=SMEM, n_flags=N_FLAGS, lanes=1, ops=(),
              vmem_lines=VMEM_LINES)


@pytest.fixture(scope="module", params=[False, True], ids=["issue", "decode_stage"])
def runner(request):
    """Each test runs on both sequencers: one that commits a bundle in the cycle IMEM
    answers, and one that first puts its checks in registers."""
    return CoreRunner(LocalCore(**PARAMS, decode_stage=request.param))


def cosim(runner, program, *, smem=None, sregs=None, context=""):
    smem = np.zeros(SMEM, np.uint32) if smem is None else smem
    rtl = runner.run(program, smem=smem, sregs=sregs)
    iss = tc.run(program, smem=smem, sregs=sregs, imem_bundles=IMEM, lanes=1,
                 n_flags=N_FLAGS, vmem=np.zeros(VMEM_LINES, np.uint32))
    compare(rtl, iss, context=context)
    return rtl, iss


def test_bundle_rules(runner):
    start = np.arange(32, dtype=np.uint32)
    rtl, _ = cosim(runner, "addi s1, s2, 0 | addi s2, s1, 0\n"      # a swap: old values
                           "addi s3, s0, 100 | addi s3, s0, 200\n"   # slot 1 wins
                           "addi s0, s0, 5 | add s4, s0, s0\n"       # s0 stays 0
                           "sw s5, 3(s0) | addi s5, s0, 9\n"         # sw stores the old s5
                           "lw s7, 3(s0) | addi s7, s0, 1\n"         # slot 1 wins over lw
                           "lw s8, 3(s0)\nhalt", sregs=start)
    assert rtl.sregs[:9].tolist() == [0, 2, 1, 200, 0, 9, 6, 1, 5]


def test_memory_loops_and_control(runner):
    smem = np.zeros(SMEM, np.uint32)
    smem[0] = 7
    rtl, iss = cosim(runner, """
            lw s1, 0(s0)
      top:  add s2, s2, s1 | loop s1, top
            lui s3, 0xDEAD
            ori s3, s3, 0xBEEF | bne s3, s0, skip
            addi s4, s0, 1
      skip: sw s2, 63(s0) | sltiu s5, s3, -1
            sw s3, -1(s2)
            halt
    """, smem=smem)
    assert iss.halted and rtl.smem[63] == 28 and rtl.smem[27] == 0xDEADBEEF


@pytest.mark.parametrize("program, error", [
    ("addi s1, s0, 1\nbeq s0, s0, -2\nhalt", "imem_range"),      # to pc 2**32 - 1
    ("nop\n" * (IMEM - 1) + "addi s1, s0, 1", "imem_range"),      # off the end of IMEM
    ("addi s1, s0, 1\nj +63\nhalt", "imem_range"),               # to pc 64
    ("addi s1, s0, 1", "illegal"),                               # zeroed IMEM
    ("li s1, 60\nlw s2, 4(s1) | addi s3, s0, 1\nhalt", "smem_range"),
    ("li s1, -1\nsw s2, 65(s1) | addi s3, s0, 1\nhalt", "smem_range"),   # wraps to word 64
    ("li s1, 5\nfset f8, 1 | addi s3, s0, 2\nhalt", "flag_range"),
    ("wait f9, 0 | addi s3, s0, 2\nhalt", "flag_range"),
    ("addi s1, s0, 1\n.bundle 0, 0, 0, 0, 0, 0, 0, 0, 0, 0\nhalt", "illegal"),
])
def test_faults_stop_with_nothing_done(runner, program, error):
    rtl, iss = cosim(runner, program)
    assert iss.error == error and rtl.sregs[3] == 0


def test_flags_waits_and_delay(runner):
    rtl, iss = cosim(runner, """
            fset f1, 10 | li s1, 3
            fadd f1, s1+1
            delay 5 | addi s4, s0, 1
            waitc f1, 4 | addi s2, s0, 1
            wait f1, s1+7
            fadd f2, -1
            delay s1
            waitc f2, s1
            halt
    """)
    assert iss.halted and rtl.flags[:3].tolist() == [0, 10, 0xFFFFFFFC]
    rtl, iss = cosim(runner, "fset f3, 4\nwait f3, 5 | addi s1, s0, 1\nhalt")
    assert iss.status == rtl.status == "blocked" and rtl.waiting == (3, 5)


@pytest.mark.parametrize("fault", [0.003, 0.04])
def test_random_scalar_programs(runner, seed, fault):
    """Each program's own seed comes from the test's: a failure names both."""
    seeds = np.random.default_rng(seed).integers(0, 1 << 32, 16)
    stops = set()
    for program_seed in seeds.tolist():
        rng = np.random.default_rng(program_seed)
        sregs = initial_sregs(rng, SMEM)
        text = scalar_program(rng, smem_words=SMEM, fault=fault, n_flags=N_FLAGS)
        smem = rng.integers(0, 1 << 32, SMEM, dtype=np.uint64).astype(np.uint32)
        _, iss = cosim(runner, text, smem=smem, sregs=sregs,
                       context=f"program seed {program_seed} of test seed {seed}:\n{text}")
        stops.add(iss.error)
    assert ("none" in stops) if fault < 0.01 else (stops - {"none"})     # both outcomes seen


def test_parameters_are_checked():
    with pytest.raises(TypeError, match="imem_depth"):
        Sequencer(imem_depth=2.0)
    with pytest.raises(ValueError, match="smem_words"):
        Sequencer(smem_words=0)
    with pytest.raises(ValueError, match="n_flags"):
        Sequencer(n_flags=129)
    with pytest.raises(TypeError, match="mxu"):
        Sequencer(mxu=1)
    with pytest.raises(ValueError, match="multiple of 8"):
        Sequencer(lanes=4, mxu=True)
    with pytest.raises(ValueError, match="depth"):
        TensorCore(vector_queue=1)
    with pytest.raises(TypeError, match="decode_stage must be a bool, not 1"):
        Sequencer(decode_stage=1)
    with pytest.raises(TypeError, match="registered must be a bool, not 'yes'"):
        TensorCore(vector_register="yes")
    with pytest.raises(TypeError, match="fence_register must be a bool, not 0"):
        TensorCore(fence_register=0)


def test_the_decode_stage_costs_a_cycle_a_bundle():
    """The docstring's rates: a bundle a cycle from the second cycle after ``start``, or
    with the decode stage one every two cycles from the third, so n bundles stop n cycles
    later; a taken branch costs nothing more in either."""
    program = "addi s1, s1, 1\n" * 6 + "beq s0, s0, 2\naddi s2, s0, 1\nhalt"
    stops = {}
    for staged in (False, True):
        rtl, iss = cosim(CoreRunner(LocalCore(**PARAMS, decode_stage=staged)), program)
        assert iss.halted and rtl.bundles == 8 and rtl.sregs[1] == 6 and rtl.sregs[2] == 0
        stops[staged] = rtl.stop_cycle
    # The halt (the eighth bundle) commits in cycle 2 + 7, or 3 + 2 * 7; the state shows
    # it a cycle later.
    assert stops == {False: 2 + 7 + 1, True: 3 + 2 * 7 + 1}
