"""``sim.verilog.logic_depth``: the deepest register-to-register paths of a netlist, on
netlists written by hand, whose paths are worked out below from the ECP5 cell library's
delays (Yosys' ``share/ecp5/*.vh``). A netlist Yosys synthesizes: tests/sim/test_fpga.py."""

import json

import pytest

from sim.verilog.logic_depth import TimedPath, deepest_paths, format_paths
from verif.cli import main

NET = 1_000       # the routing estimate the expected figures use


def _cell(kind, **pins):
    outputs = {"Q", "Z", "S0", "S1", "COUT"}
    return {"type": kind, "parameters": {}, "attributes": {},
            "port_directions": {p: "output" if p in outputs else "input" for p in pins},
            "connections": {p: bits if isinstance(bits, list) else [bits]
                            for p, bits in pins.items()}}


def _lut(pin, a, z):
    return _cell("LUT4", **{p: (a if p == pin else "0") for p in "ABCD"}, Z=z)


def _netlist(top_cells, *, inner=True):
    """``top``: a flip-flop ``q0`` fed by port ``a``; from ``q0`` three LUTs (the middle
    one inside submodule ``sub``) to ``q1``, which drives port ``y``, and a two-cell carry
    chain to ``q2``."""
    modules = {"top": {
        "attributes": {"top": "00000000000000000000000000000001"},
        "ports": {"clk": {"direction": "input", "bits": [1]},
                  "a": {"direction": "input", "bits": [2]},
                  "y": {"direction": "output", "bits": [8]}},
        "cells": top_cells,
        "netnames": {"q0": {"hide_name": 0, "bits": [4]}, "q1": {"hide_name": 0, "bits": [8]},
                     "q2": {"hide_name": 0, "bits": [11]},
                     "carry": {"hide_name": 1, "bits": [9]}},
    }}
    if inner:
        modules["inner"] = {
            "attributes": {},
            "ports": {"i": {"direction": "input", "bits": [2]},
                      "o": {"direction": "output", "bits": [3]}},
            "cells": {"l": _lut("D", 2, 3)},
            "netnames": {"i": {"hide_name": 0, "bits": [2]}},
        }
    return {"modules": modules}


def _design():
    return _netlist({
        "ff0": _cell("TRELLIS_FF", CLK=1, DI=2, Q=4),
        "lut0": _lut("A", 4, 5),
        "sub": {"type": "inner", "parameters": {}, "attributes": {},
                "connections": {"i": [5], "o": [6]}},
        "lut2": _lut("C", 6, 7),
        "ff1": _cell("TRELLIS_FF", CLK=1, DI=7, Q=8),
        "c0": _cell("CCU2C", A0=4, COUT=9),
        "c1": _cell("CCU2C", CIN=9, S0=10),
        "ff2": _cell("TRELLIS_FF", CLK=1, DI=10, Q=11),
    })


def test_each_endpoint_s_deepest_path_from_the_cells_delays_and_its_nets():
    paths = deepest_paths(_design(), count=10, net_ps=NET)
    by_end = {p.end: p for p in paths}
    assert set(by_end) == {"q0", "q1", "q2", "y"}
    # q0 -> LUT A (141 ps) -> sub's LUT D (379) -> LUT C (379) -> q1: four nets.
    assert by_end["q1"] == TimedPath(ps=141 + 379 + 379 + 4 * NET, levels=3, nets=4,
                                     start="q0", end="q1", blocks=("", "sub", ""))
    # A carry chain: A0 -> COUT (516), then CIN -> S0 (257) on the slice's own wire.
    assert by_end["q2"] == TimedPath(ps=516 + 257 + 2 * NET, levels=1, nets=2,
                                     start="q0", end="q2", blocks=("",))
    assert by_end["q0"] == TimedPath(ps=NET, levels=0, nets=1, start="a", end="q0", blocks=())
    assert by_end["y"].ps == NET and by_end["y"].start == "q1"
    # Deepest first; q0 and y tie, in the netlist's order (cells, then ports).
    assert [p.end for p in paths] == ["q1", "q2", "q0", "y"]
    assert [p.end for p in deepest_paths(_design(), count=1)] == ["q1"]


def test_a_path_reads_back_from_its_dict_and_prints_its_figures(tmp_path):
    path = tmp_path / "netlist.json"
    path.write_text(json.dumps(_design()))
    deepest = deepest_paths(path, count=1, net_ps=NET)[0]
    assert TimedPath.from_dict(json.loads(json.dumps(deepest.as_dict()))) == deepest
    lines = format_paths([deepest.as_dict()])
    assert lines == ["4.9 ns (204.1 MHz), 3 levels, 4 nets: q0 -> q1",
                     "    through (top) > sub > (top)"]


def test_a_combinational_loop_and_a_netlist_without_modules_are_refused():
    looped = _netlist({"l0": _lut("A", 20, 21), "l1": _lut("A", 21, 20),
                       "ff": _cell("TRELLIS_FF", CLK=1, DI=21, Q=4)}, inner=False)
    with pytest.raises(ValueError, match="combinational loop"):
        deepest_paths(looped)
    with pytest.raises(ValueError, match="no modules"):
        deepest_paths({"creator": "not yosys"})


def test_a_negative_count_of_paths_is_a_usage_error(capsys):
    assert main(["fpga", "fp32_to_bf16", "--paths", "-1"]) == 2
    assert "--paths: must be a non-negative integer" in capsys.readouterr().err
