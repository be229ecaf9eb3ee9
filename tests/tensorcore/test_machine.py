"""The ISS as a machine: DMA, vector and MXU slots together, the memory-ordering contract,
and every error code."""

import ml_dtypes
import numpy as np
import pytest
import softfloatpy as sf

from golden import memory, tensorcore as tc
from golden.formats import NUMERICS
from golden.mxu import matmul

from ..vpu import oracle_vpu

FP32_SPECIALS = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
                          0x7F800001, 0x00000001, 0x807FFFFF, 0x00800000, 0x80800000,
                          0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0x00400000, 0x3F800001],
                         np.uint32)
BF16_SPECIALS = np.array([0, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x0001, 0x807F,
                          0x0080, 0x7F7F, 0x3F80, 0xBF80], np.uint16)


@pytest.fixture(autouse=True)
def _round_to_nearest_even():
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)


def _smem(*descriptors, size=256):
    smem = np.zeros(size, np.uint32)
    for i, d in enumerate(descriptors):
        smem[tc.DESCRIPTOR_WORDS * i:tc.DESCRIPTOR_WORDS * (i + 1)] = tc.descriptor_words(d)
    return smem


def _fp32(rng, n):
    values = rng.standard_normal(n).astype(np.float32).view(np.uint32)
    special = rng.random(n) < 0.3
    values[special] = rng.choice(FP32_SPECIALS, int(special.sum()))
    return values


def _copy(src, dst, words, flag):
    return memory.Descriptor(src, dst, (words,), (1,), (1,), flag=flag)


@pytest.mark.parametrize("numerics", NUMERICS)
def test_hbm_to_vmem_to_vector_ops_and_back(numerics, rng):
    """Two DMAs in, a loop walking VMEM with a scalar base register, one DMA out."""
    a, b = _fp32(rng, 256), _fp32(rng, 256)
    hbm = np.zeros(4096, np.uint32)
    hbm[0:256], hbm[1024:1280] = a, b
    smem = _smem(_copy(("hbm", 0), ("vmem", 0), 256, 1),          # a -> lines 0..31
                 _copy(("hbm", 1024), ("vmem", 256), 256, 1),     # b -> lines 32..63
                 _copy(("vmem", 512), ("hbm", 2048), 256, 2))     # out <- lines 64..95
    program = """
            dma 0 | li s2, 4                       # four chunks of one vreg each
            dma 12
            wait f1, 512
      top:  vld v1, s1
            vld v2, s1+32 | add v3, v1, v2         # the add sees this bundle's vld
            mul v4, v3, v1 | vst v4, s1+64 | addi s1, s1, 8 | loop s2, top
            dma 24
            wait f2, 256
            halt
    """
    r = tc.run(program, hbm=hbm, smem=smem, numerics=numerics)
    assert r.status == "halted", r.message
    total = oracle_vpu.elementwise("add", numerics, a.tolist(), b.tolist())
    expected = oracle_vpu.elementwise("mul", numerics, total, a.tolist())
    assert r.hbm[2048:2304].tolist() == expected
    assert r.vmem[512:768].tolist() == expected
    assert r.flags[:3].tolist() == [0, 512, 256] and r.dmas == 3
    assert r.bundles == 3 + 4 * 3 + 3


def test_strided_dma_transposes():
    a = np.arange(128, dtype=np.uint32).reshape(16, 8) * 3 + 7
    hbm = np.zeros(1024, np.uint32)
    hbm[:128] = a.ravel()
    # Element (i0, i1) moves A[i0, i1] to VMEM word i1 * 16 + i0.
    transpose = memory.Descriptor(("hbm", 0), ("vmem", 0), (16, 8), (8, 1), (1, 16), flag=0)
    r = tc.run("dma 0\nwait f0, 128\ndma 12\nwait f0, 256\nhalt", hbm=hbm,
               smem=_smem(transpose, _copy(("vmem", 0), ("hbm", 512), 128, 0)))
    assert r.halted and np.array_equal(r.hbm[512:640], a.T.ravel())


@pytest.mark.parametrize("lanes", [8, 16])
@pytest.mark.parametrize("numerics", NUMERICS)
def test_matmul_through_push_and_pop(numerics, lanes, rng):
    m, k = 16, lanes
    x = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16).view(np.uint16)
    w = rng.standard_normal((k, lanes)).astype(ml_dtypes.bfloat16).view(np.uint16)
    x.ravel()[rng.choice(x.size, 10, replace=False)] = rng.choice(BF16_SPECIALS, 10)
    w.ravel()[rng.choice(w.size, 6, replace=False)] = rng.choice(BF16_SPECIALS, 6)
    hbm = np.zeros(8192, np.uint32)
    hbm[:w.size] = w.ravel()                  # bf16 in the low half of each word
    hbm[4096:4096 + x.size] = x.ravel()
    out = 2048
    smem = _smem(_copy(("hbm", 0), ("vmem", 0), w.size, 1),
                 _copy(("hbm", 4096), ("vmem", 64 * lanes), x.size, 1),
                 _copy(("vmem", 128 * lanes), ("hbm", out), m * lanes, 2))
    weights = ["vld v1, 0", "vld v2, 8 | push_weights v1", "push_weights v2"][:k // 8 + 1]
    if k == 8:
        weights = ["vld v1, 0", "push_weights v1"]
    program = "\n".join([
        "dma 0", "dma 12", f"wait f1, {w.size + x.size}", *weights,
        "vld v3, 64 | push_lhs v3",
        "vld v4, 72 | push_lhs v4 | pop v5 | vst v5, 128",
        "pop v6 | vst v6, 136",
        "dma 24", f"wait f2, {m * lanes}", "halt"])
    r = tc.run(program, hbm=hbm, smem=smem, numerics=numerics, lanes=lanes,
               vmem=np.zeros(256 * lanes, np.uint32))
    assert r.status == "halted", r.message
    expected = matmul(x, w, numerics=numerics).view(np.uint32)
    assert np.array_equal(r.hbm[out:out + m * lanes].reshape(m, lanes), expected)


def test_slot_order_inside_a_bundle():
    """A DMA sees its bundle's vst; its descriptor is read before its bundle's sw."""
    vmem = np.zeros(64, np.uint32)
    vregs = np.zeros((32, 8, 8), np.uint32)
    vregs[1] = np.arange(64).reshape(8, 8) + 100
    smem = _smem(_copy(("vmem", 0), ("hbm", 0), 64, 0))
    r = tc.run("lui s1, 0xFFFF\nsw s1, 0(s0) | vst v1, 0 | dma 0\nhalt", vmem=vmem,
               vregs=vregs, smem=smem, hbm=np.zeros(64, np.uint32))
    assert r.halted and r.hbm.tolist() == list(range(100, 164))
    assert r.smem[0] == 0xFFFF0000 and r.flags[0] == 64


def test_misc_ops_and_counters():
    r = tc.run("""
        addi s1, s0, 40 | fset f3, 1000
        fadd f3, s1+2
        delay s1
        waitc f3, 42
        delay 5
        wait f3, s1-40
        fset f4, -1
        halt
    """)
    assert r.halted and r.flags[3] == 1000 and r.flags[4] == 0xFFFFFFFF
    assert r.delay_cycles == 45 and r.pc == 7 and r.bundles == 8


def test_blocked_wait_names_the_flag():
    r = tc.run("fadd f2, 5\nwait f2, 6 | addi s1, s0, 1\nhalt")
    assert r.status == "blocked" and r.waiting == (2, 6) and r.pc == 1 and r.sregs[1] == 0
    assert "f2 >= 6" in r.message and "which is 5" in r.message


def test_remote_push_is_recorded_with_its_sent_flag():
    push = memory.Descriptor(("vmem", 8), ("remote", 1, "hbm", 4), (8,), (1,), (1,), flag=5,
                             sent_flag=6)
    vmem = np.arange(64, dtype=np.uint32)
    r = tc.run("dma 0\nwait f6, 8\nhalt", vmem=vmem, smem=_smem(push), n_chips=2)
    assert r.halted and r.flags[6] == 8 and r.flags[5] == 0
    assert len(r.pushes) == 1 and r.pushes[0].data.tolist() == list(range(8, 16))


# --------------------------------------------------------------------- races

def _race_run(program, **kw):
    smem = _smem(_copy(("hbm", 0), ("vmem", 0), 64, 1),      # -> lines 0..7
                 _copy(("hbm", 0), ("vmem", 64), 64, 1),     # -> lines 8..15
                 _copy(("vmem", 128), ("hbm", 64), 64, 2))   # lines 16..23 ->
    return tc.run(program, smem=smem, hbm=np.arange(256, dtype=np.uint32), **kw)


@pytest.mark.parametrize("program, race", [
    ("dma 0\nvld v1, 0\nhalt", True),                       # reads a destination
    ("dma 0\nvld v1, 8\nhalt", False),                      # elsewhere
    ("dma 0\nvst v1, 7\nhalt", True),                       # line 7..14 meets line 7
    ("dma 24\nvld v1, 16\nhalt", False),                    # reading a source is fine
    ("dma 24\nvst v1, 16\nhalt", True),                     # writing a source is not
    ("dma 0\nwait f1, 64\nvld v1, 0\nhalt", False),
    ("dma 0\ndma 12\nwait f1, 64\nvld v1, 0\nhalt", True),  # either may be the one done
    ("dma 0\ndma 12\nwait f1, 65\nvld v1, 0 | vst v1, 8\nhalt", False),
    ("dma 0\ndma 12\nwaitc f1, 64\nvld v1, 0\nhalt", True),
    ("dma 0\ndma 12\nwaitc f1, 64\nwaitc f1, 64\nvld v1, 0\nvst v1, 8\nhalt", False),
    ("dma 0\nwait f1, 64 | vld v1, 0\nhalt", False),         # a wait precedes its bundle
    ("dma 0\nfset f1, 0\nhalt", True),
    ("dma 0\nfset f2, 0\nfadd f1, 1\nhalt", False),
])
def test_memory_ordering_contract(program, race):
    r = _race_run(program)
    if race:
        assert (r.status, r.error) == ("error", "race"), r.message
        assert r.error_pc == program.count("\n") - 1
        assert _race_run(program, races="ignore").halted
    else:
        assert r.halted, r.message


# --------------------------------------------------------------------- every error code

GOOD = _copy(("hbm", 0), ("vmem", 0), 8, 1)


def _bad(**changes):
    d = dict(src=GOOD.src, dst=GOOD.dst, counts=GOOD.counts, src_strides=GOOD.src_strides,
             dst_strides=GOOD.dst_strides, flag=GOOD.flag)
    d.update(changes)
    return memory.Descriptor(**d)


_FORMAT = tc.descriptor_words(GOOD)
_FORMAT[0] |= 1 << 30

# error -> (faulting bundle, run arguments); the fault sits at pc 1 after "addi s8, s0, 1".
ERROR_CASES = {
    "illegal": (".bundle " + ", ".join(["0"] * 10), {}),
    "imem_range": ("j +7", {}),
    "smem_range": ("lw s1, 1024(s0) | addi s9, s0, 7", {}),
    "vmem_range": ("vld v1, 1017 | addi s9, s0, 7", {}),
    "flag_range": ("wait f16, 0 | addi s9, s0, 7", {}),
    "weights_full": ("vld v1, 0 | push_weights v1 | addi s9, s0, 7",
                     {"vregs_setup": "push_weights v2"}),
    "results_full": ("vld v1, 0 | push_lhs v1 | addi s9, s0, 7",
                     {"vregs_setup": "push_lhs v2", "mxu_results": 8}),
    "pop_empty": ("vld v1, 0 | pop v2 | addi s9, s0, 7", {}),
    "no_mxu": ("vld v1, 0 | push_lhs v1 | addi s9, s0, 7", {"mxu": False}),
    "dma_format": ("dma 12 | addi s9, s0, 7", {"smem_words": _FORMAT}),
    "dma_count": ("dma 12 | addi s9, s0, 7", {"desc": _bad(counts=(8, 0, 1), src_strides=(1, 0, 0),
                                                          dst_strides=(1, 0, 0))}),
    "dma_chip": ("dma 12 | addi s9, s0, 7", {"desc": _bad(dst=("remote", 1, "vmem", 0))}),
    "dma_flag": ("dma 12 | addi s9, s0, 7", {"desc": _bad(flag=16)}),
    "dma_sent_flag": ("dma 12 | addi s9, s0, 7",
                      {"desc": memory.Descriptor(("hbm", 0), ("remote", 0, "vmem", 0), (8,),
                                                 (1,), (1,), flag=1, sent_flag=16)}),
    "dma_src_range": ("dma 12 | addi s9, s0, 7", {"desc": _bad(src=("hbm", 4090))}),
    "dma_dst_range": ("dma 12 | addi s9, s0, 7", {"desc": _bad(dst=("vmem", 8190))}),
    "race": ("vld v1, 0 | addi s9, s0, 7", {"setup": "dma 0"}),
}


def test_every_error_code_has_a_case():
    assert set(ERROR_CASES) == set(tc.ERRORS[1:])


@pytest.mark.parametrize("error", list(ERROR_CASES))
def test_each_error_stops_the_core_before_its_bundle(error):
    bundle, kw = ERROR_CASES[error]
    kw = dict(kw)
    setup = kw.pop("setup", None) or kw.pop("vregs_setup", None)
    smem = _smem(GOOD, kw.pop("desc", GOOD))
    if "smem_words" in kw:
        smem[12:24] = kw.pop("smem_words")
    lines = ["addi s8, s0, 1", *([setup] if setup else []), bundle, "halt"]
    vmem = np.full(1024 * 8, 0x3F800000, np.uint32)
    r = tc.run("\n".join(lines), smem=smem, hbm=np.zeros(4096, np.uint32), vmem=vmem, **kw)
    pc = len(lines) - 2 + (error == "imem_range") * 7
    assert (r.status, r.error, r.error_pc, r.pc) == ("error", error, pc, pc), r.message
    assert r.error_code == tc.ERRORS.index(error) > 0
    assert r.bundles == len(lines) - 2 + (error == "imem_range")
    assert r.sregs[8] == 1 and r.sregs[9] == 0
    assert not r.vregs[1].any()            # the faulting bundle's vld did not happen either
    assert r.message


def test_vmem_base_must_fit_sixteen_bits():
    regs = np.zeros(32, np.uint32)
    regs[3] = 0xFFFFFFFF
    r = tc.run("vst v1, s3+1\nhalt", sregs=regs)
    assert r.error == "vmem_range" and "16 bits" in r.message


def test_zeroed_imem_is_illegal():
    r = tc.run("nop", imem_bundles=4)
    assert (r.error, r.error_pc) == ("illegal", 1)


@pytest.mark.parametrize("kw, match", [
    ({"numerics": "fast"}, "numerics"), ({"lanes": 0}, "lanes"), ({"n_flags": 129}, "n_flags"),
    ({"races": "warn"}, "races"), ({"mxu": 1}, "mxu"), ({"max_bundles": 0}, "max_bundles"),
    ({"imem_bundles": 0}, "imem_bundles"), ({"hbm": np.zeros(4, np.int32)}, "hbm"),
    ({"vmem": np.zeros(12, np.uint32)}, "whole 8-word lines"),
    ({"flags": np.zeros(3, np.uint32)}, "flags"), ({"vregs": np.zeros(3, np.uint32)}, "vregs"),
    ({"sregs": np.zeros(31, np.uint32)}, "sregs"), ({"mxu_results": 0}, "mxu_results"),
])
def test_bad_run_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        tc.run("nop\nhalt", **kw)
