"""The exhaustive bf16 multiplier check, on small slices of ``a``.

The full 2^32-pair run is the ``bf16_mul_exhaustive`` regression suite; here
each run covers two ``a`` values (131072 pairs). The Verilated harness is
built once per numerics in the shared build cache and reused after that.
"""

import stat
import subprocess

import numpy as np
import pytest

import sim.exhaustive
from sim.exhaustive import ExhaustiveError, build_harness, run_bf16_mul_exhaustive

PAIRS = 2 * 65536


@pytest.mark.parametrize("numerics", ["tpu", "ieee"])
@pytest.mark.parametrize("a_range", [
    (0x3F80, 0x3F82),       # 1.0 and the next bf16 up
    (0x007F, 0x0081),       # largest subnormal, smallest normal: flush vs keep
    (0xFF80, 0xFF82),       # -inf and a signalling NaN
], ids=["normal", "subnormal", "special"])
def test_slice_matches_golden(numerics, a_range):
    calls = []
    result = run_bf16_mul_exhaustive(numerics, jobs=2, a_range=a_range,
                                     progress=lambda done, total: calls.append((done, total)))
    assert result.numerics == numerics
    assert result.pairs_checked == PAIRS
    assert result.mismatches == 0 and result.first_mismatches == [] and result.ok
    assert calls[-1] == (PAIRS, PAIRS)
    assert result.seconds > 0 and result.cycles_per_second > 0


def test_a_wrong_result_is_reported(monkeypatch):
    # A golden that is off by one ulp at a single pair: the check must name it.
    # 1.0 x 2.0 = 2.0 = 0x40000000, which the RTL gets right.
    real = sim.exhaustive.golden_bf16_mul

    def off_by_one(a, b, *, numerics):
        expected = real(a, b, numerics=numerics)
        expected[(a == 0x3F80) & (b == 0x4000)] ^= 1
        return expected

    monkeypatch.setattr(sim.exhaustive, "golden_bf16_mul", off_by_one)
    result = run_bf16_mul_exhaustive("tpu", jobs=1, a_range=(0x3F80, 0x3F82))
    assert result.pairs_checked == PAIRS
    assert result.mismatches == 1 and not result.ok
    assert result.first_mismatches == ["a=0x3F80 b=0x4000: got 0x40000000, expected 0x40000001"]
    assert "1 MISMATCHES" in result.summary()


def test_harness_output_is_the_product():
    # Read the harness directly, independently of sim.exhaustive's reader:
    # 1.5 x b for a few b whose products are known by hand.
    exe = build_harness("tpu")
    out = subprocess.run([str(exe), "0x3FC0", "0x3FC1"], capture_output=True, check=True).stdout
    got = np.frombuffer(out, dtype=np.uint32)
    assert got.size == 65536
    assert got[0x3F80] == 0x3FC00000        # 1.5 x 1.0
    assert got[0xC000] == 0xC0400000        # 1.5 x -2.0
    assert got[0x0000] == 0x00000000        # 1.5 x +0
    assert got[0x7F80] == 0x7F800000        # 1.5 x inf
    assert got[0x7FC1] == 0x7FC00000        # NaN in, canonical NaN out


def test_harness_is_cached():
    exe = build_harness("tpu")
    mtime = exe.stat().st_mtime_ns
    assert build_harness("tpu") == exe
    assert exe.stat().st_mtime_ns == mtime
    assert build_harness("ieee") != exe


def test_harness_rejects_bad_arguments():
    exe = build_harness("tpu")
    for args in (["5", "5"], ["0", "65537"], ["x", "1"], ["1"]):
        proc = subprocess.run([str(exe), *args], capture_output=True, text=True)
        assert proc.returncode == 2 and "usage" in proc.stderr


def test_a_short_harness_is_an_error(monkeypatch, tmp_path):
    # A harness that dies after part of a block: the error names the slice
    # and shows what the harness said.
    fake = tmp_path / "fake_harness"
    fake.write_text("#!/bin/sh\nhead -c 1000 /dev/zero\necho 'simulated crash' >&2\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(sim.exhaustive, "build_harness", lambda numerics: fake)
    with pytest.raises(ExhaustiveError, match=r"slice a in \[0x3F80, 0x3F82\) stopped after "
                                              r"250 of 131072 results \(exit status 3\): "
                                              r"simulated crash"):
        run_bf16_mul_exhaustive("tpu", jobs=1, a_range=(0x3F80, 0x3F82))


@pytest.mark.parametrize("kwargs, message", [
    ({"numerics": "fast"}, "numerics must be one of"),
    ({"a_range": (5, 5)}, r"0 <= lo < hi <= 65536"),
    ({"a_range": (-1, 3)}, r"0 <= lo < hi <= 65536"),
    ({"a_range": (0, 65537)}, r"0 <= lo < hi <= 65536"),
    ({"a_range": (0.5, 3)}, "pair of integers"),
    ({"a_range": 7}, "pair of integers"),
    ({"jobs": 0}, "jobs must be a positive integer"),
    ({"jobs": 1.5}, "jobs must be a positive integer"),
])
def test_bad_input_is_a_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        run_bf16_mul_exhaustive(**kwargs)
