"""``tpu-rtl bench`` on a tiny plan: every section is measured and written.

The real numbers come from ``tpu-rtl bench`` (docs/benchmarks.md); here the
plan is shrunk (one arithmetic unit and the smallest MXU, each on every
simulation path) so the whole table is produced in about two minutes, and the test
checks its shape and that every measurement is a positive number. It builds seven
Verilator models and four Icarus ones of its own, so it is marked slow; how a run's
sections replace the old file's is tested in the default suite.
"""

import re

import pytest

import verif.bench.blocks
from verif.bench.blocks import Plan, SparseBench, run_bench

TINY = Plan(repeats=1, arith_ops=64, mxu_shape=(8, 4, 4), export_sizes=(4,),
            util_cases=(((8, 8, 8), 4, 4),), mxu_sizes=(2,),
            units=("bf16_mul",),  # the exhaustive harness is compared with it
            sparsecore=SparseBench(backend="amaranth", row_widths=(8,), read_latencies=(4,),
                                   gather_ids=16, alphas=(1.5,), zipf_rows=16, zipf_width=8,
                                   zipf_bags=2, bag=4, optimizer="sgd"))


def _numbers(row):
    return [float(cell.strip().replace(",", "").rstrip("x")) for cell in row.split("|")[3:-1]
            if cell.strip() != "n/a"]


@pytest.mark.slow
def test_tiny_bench_writes_every_section(tmp_path, monkeypatch):
    monkeypatch.setattr(verif.bench.blocks, "QUICK", TINY)
    output = tmp_path / "benchmarks.md"
    text = run_bench(quick=True, output=output)
    assert output.read_text() == text
    for heading in ("## Simulation speed", "## Verilog export", "## MXU utilization",
                    "## SparseCore"):
        assert heading in text

    speed = {row.split("|")[1].strip(): row for row in text.splitlines()
             if re.match(r"\| (fp32_add|bf16_mul|fp32_to_bf16|mxu \dx\d) \|", row)}
    assert set(speed) == {"bf16_mul", "mxu 2x2"}
    for row in speed.values():
        assert all(value > 0 for value in _numbers(row)), row
    assert re.search(r"harness streams the bf16 multiplier at [\d,]+ cycles per second", text)
    assert re.search(r"--public-flat-rw` \(\d+\.\d\dx\)", text)

    export_row = next(row for row in text.splitlines() if row.startswith("| 4x4 |"))
    seconds, memory, verilog = (float(cell) for cell in export_row.split("|")[2:5])
    assert seconds > 0 and memory > 10 and verilog > 0

    # 8x8x8 on a 4x4 array: 2 K-tiles x 2 N-tiles of 8 rows each, so the
    # utilization is 512 MACs over 16 PEs and the measured cycles.
    util_row = next(row for row in text.splitlines() if row.startswith("| 8x8x8 | 4x4 |"))
    cycles, utilization = (float(cell) for cell in util_row.split("|")[3:5])
    assert cycles >= 32 and utilization == round(512 / (16 * cycles), 3)


def test_a_full_run_keeps_the_sections_it_does_not_measure():
    old = ("# Benchmarks\n\n## Simulation speed\n\nold speed\n\n## Regression throughput\n\n"
           "| workers | seeds/min |\n|---:|---:|\n| 2 | 1.9 |\n")
    new = "# Benchmarks\n\n## Simulation speed\n\nnew speed\n"
    kept = verif.bench.blocks._keep_other_sections(old, new)
    assert "new speed" in kept and "old speed" not in kept
    assert kept.endswith("## Regression throughput\n\n| workers | seeds/min |\n|---:|---:|\n"
                         "| 2 | 1.9 |\n")
