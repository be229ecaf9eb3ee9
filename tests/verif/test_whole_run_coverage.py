"""Code coverage of the compiled whole-run harness (``sim.backends.coverage_build``): a
regression seed's whole-run cases run on coverage builds, and their points reach the
``hdl/`` lines through the lcov report; plain runs keep their own build and write
nothing."""

import json
from pathlib import Path

import numpy as np
import pytest

import sim.arith
from sim.backends import compiled, coverage_build
from sim.backends.whole_run import WholeRun
from verif.regress import source_coverage, worker
from verif.suites.case import WholeCase

CHECKOUT = Path(__file__).resolve().parents[2]
NAN_LINE = "is_nan=Signal("         # hdl/arith/float_ops.py: owns the NaN test's wire
INF_LINE = "is_inf=Signal("


def _line_of(path, text):
    found = [n for n, line in enumerate((CHECKOUT / path).read_text().splitlines(), 1)
             if text in line]
    assert len(found) == 1, (path, text, found)
    return found[0]


def _no_nan_case(seed, *, inject=None):
    """A suite of two whole-run cases on one build: fp32_to_bf16 on operands with
    infinities and no NaN."""
    def check(*, backend, coverage, waves):
        # 1, -2.5, +-inf, 0, 65280: exact; 1 + 2^-8 and 1 + 3 * 2^-8: ties, to even;
        # the smallest bf16 subnormal, kept in ieee numerics. No NaN.
        a = np.array([0x3F800000, 0xC0200000, 0x7F800000, 0xFF800000, 0, 0x477F0000,
                      0x3F808000, 0x3F818000, 0x00010000], dtype=np.uint32)
        got = sim.arith.fp32_to_bf16(a, numerics="ieee", backend=backend)
        expected = [0x3F80, 0xC020, 0x7F80, 0xFF80, 0, 0x477F, 0x3F80, 0x3F82, 0x0001]
        return {"checked": len(a), "mismatches": int(np.sum(got != expected)),
                "first_mismatch": None, "cycles": 0}
    yield WholeCase("no-nan", check)
    yield WholeCase("no-nan-again", check)      # a second case on the same build


class _Suite:
    runs = staticmethod(_no_nan_case)


def test_a_seed_writes_whole_run_code_coverage_that_reaches_the_hdl_lines(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setitem(worker.SUITES, "no_nan", _Suite)
    record = worker.run_seed("no_nan", 1, "verilator", tmp_path / "seed", code_coverage=True)
    assert record["status"] == "pass", record
    # One file per build for the whole seed, both cases' points summed in it.
    dats = sorted((tmp_path / "seed").glob("*.dat"))
    assert [d.name.split(".")[0] for d in dats] == ["no_nan"]
    assert dats[0].with_suffix(".src.json").exists()
    text = dats[0].read_text(encoding="latin-1")
    build = dats[0].name.split(".")[1]
    # Every point names its build, and none is the test equipment's (harness, testbench).
    points = [line for line in text.splitlines() if line.startswith("C '")]
    assert points and all(f"\x01f\x02whole-verilator/{build}/design.v\x01" in p
                          for p in points)
    assert all("\x01h\x02TOP.tb.dut.dut" in p for p in points)
    # Yosys' $ names (temporaries, unnamed signals) have no toggle points: no hdl line owns them.
    toggles = [p for p in points if "\x01t\x02toggle" in p]
    assert toggles and not any("\x01o\x02__024" in p for p in toggles)

    coverage = source_coverage.collect(dats)
    lcov = source_coverage.write_lcov(coverage, tmp_path / "lcov.info")
    records = source_coverage.parse_lcov(lcov)
    assert all(name.startswith("hdl/") for name in records)
    lines = records["hdl/arith/float_ops.py"]["lines"]
    assert lines[_line_of("hdl/arith/float_ops.py", INF_LINE)] > 0
    assert lines[_line_of("hdl/arith/float_ops.py", NAN_LINE)] == 0
    assert records["hdl/arith/fp32_to_bf16.py"]["lines"]
    assert all(count > 0 for count in records["hdl/arith/fp32_to_bf16.py"]["lines"].values())


def test_plain_runs_keep_their_build_and_write_no_coverage(tmp_path):
    run = WholeRun(block="fp32_to_bf16", params={"numerics": "ieee"}, play={"operands": [0]},
                   record={"result": 1})
    plain = compiled.build(run, simulator="verilator")
    with coverage_build.collecting(tmp_path, prefix="x"):
        covered = compiled.build(run, simulator="verilator")
    assert plain != covered
    assert (covered / coverage_build.SOURCE_MAP).exists()
    assert not (plain / coverage_build.SOURCE_MAP).exists()
    assert "VM_COVERAGE = 1" in (covered / "obj" / "Vtb_classes.mk").read_text()
    assert "VM_COVERAGE = 0" in (plain / "obj" / "Vtb_classes.mk").read_text()
    sim.arith.fp32_to_bf16(np.array([0x3F800000], dtype=np.uint32), numerics="ieee",
                           backend="verilator")
    assert list(tmp_path.iterdir()) == []


def test_the_source_map_names_only_lines_of_the_block(tmp_path):
    run = WholeRun(block="fp32_to_bf16", params={"numerics": "ieee"}, play={"operands": [0]},
                   record={"result": 1})
    with coverage_build.collecting(tmp_path, prefix="x"):
        folder = compiled.build(run, simulator="verilator")
    srcmap = json.loads((folder / coverage_build.SOURCE_MAP).read_text())
    assert srcmap["error"] is None and srcmap["owners"]
    design = (folder / "design.v").read_text().splitlines()
    harness = design.index(coverage_build.HARNESS_OFF.strip())
    assert all(int(line) <= harness for line in srcmap["owners"])
    assert {owner.split(":")[0] for owner in srcmap["owners"].values()} >= {
        "hdl/arith/float_ops.py", "hdl/arith/fp32_to_bf16.py"}


def test_collecting_refuses_a_prefix_that_is_no_file_name(tmp_path):
    with pytest.raises(ValueError, match="prefix must be a plain file name part"):
        with coverage_build.collecting(tmp_path, prefix="a/b"):
            pass


def test_code_coverage_is_asked_of_verilator_seeds_unless_turned_off(tmp_path):
    from verif.cli import _parser
    from verif.regress.executor.seed import SeedTask
    assert "--code-coverage" in SeedTask("dma", 1, "verilator").command(tmp_path)
    assert "--code-coverage" not in SeedTask("dma", 1, "verilator",
                                             code_coverage=False).command(tmp_path)
    assert "--code-coverage" not in SeedTask("dma", 1, "icarus").command(tmp_path)
    args = _parser("regress").parse_args(["regress", "all", "--no-code-coverage"])
    assert args.no_code_coverage
