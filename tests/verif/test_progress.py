"""The one progress line: quiet on short runs in a log, redrawn on a terminal; builds
announced while it is open."""

import io
import re
import time

from sim.toolchain.build_cache import BUILD_LISTENERS, cached_build
from verif import progress
from verif.progress import ProgressLine


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_log_gets_the_last_step_and_messages_but_no_redraws():
    log = io.StringIO()
    line = ProgressLine("regress", total=3, unit="seeds", stream=log)
    line.update(advance=1, text="0 failed")
    line.log("seed 1: fail")
    line.update(advance=2, text="1 failed")
    line.close()
    lines = log.getvalue().splitlines()
    assert lines[0] == "seed 1: fail"
    assert lines[1].startswith("regress [########################] 3/3 seeds 1 failed (")
    assert len(lines) == 2


def test_a_log_line_every_interval(monkeypatch):
    monkeypatch.setattr(progress, "LOG_INTERVAL", 0.0)
    log = io.StringIO()
    line = ProgressLine("matmul", stream=log)
    for cycle in (1024, 2048):
        line.update(text=f"cycle {cycle}")
    assert [text.split(" (")[0] for text in log.getvalue().splitlines()] == \
        ["matmul cycle 1024", "matmul cycle 2048"]


def test_a_terminal_line_is_redrawn_in_place():
    tty = _Terminal()
    line = ProgressLine("bench", total=2, unit="steps", stream=tty)
    line.update(advance=1, text="fp32_add")
    line.close()
    text = tty.getvalue()
    assert text.startswith("\rbench [############............] 1/2 steps fp32_add (")
    assert text.endswith("\r\033[K") and "\n" not in text


def test_a_build_while_the_line_is_open_is_announced(tmp_path, monkeypatch):
    """A build can take minutes: its start and its end are lines of their own; a build
    found in the cache, or one after the line is closed, says nothing."""
    monkeypatch.setenv("TPU_RTL_CACHE", str(tmp_path))
    log = io.StringIO()
    line = ProgressLine("network", total=1, unit="runs", stream=log)
    built = []
    cached_build("whole-verilator", "network", ["a"], built.append)
    cached_build("whole-verilator", "network", ["a"], built.append)
    line.close()
    cached_build("whole-verilator", "network", ["b"], built.append)
    lines = log.getvalue().splitlines()
    assert len(built) == 2 and len(lines) == 2
    assert lines[0].startswith("building whole-verilator/network (once for this design; "
                               f"later runs reuse {tmp_path}/whole-verilator/network-")
    assert re.fullmatch(r"built whole-verilator/network in \d+ s", lines[1])
    assert line.log not in BUILD_LISTENERS


def test_a_quiet_line_beats_and_names_the_build_it_waits_on(tmp_path, monkeypatch):
    """A build of minutes updates nothing: the heartbeat draws the line again, naming it."""
    monkeypatch.setenv("TPU_RTL_CACHE", str(tmp_path))
    monkeypatch.setattr(progress, "HEARTBEAT", 0.05)
    log = io.StringIO()
    line = ProgressLine("chip", stream=log)
    line.update(text="loading")

    def build(folder):
        deadline = time.monotonic() + 30
        while "still building" not in log.getvalue():
            assert time.monotonic() < deadline, log.getvalue()
            time.sleep(0.01)
    cached_build("whole-verilator", "tensorcore", ["beat"], build)
    line.close()
    beats = [text for text in log.getvalue().splitlines() if "still building" in text]
    assert re.match(r"chip loading \(still building whole-verilator/tensorcore, \d+ s so far\) "
                    r"\(\d+ s\)$", beats[0]), beats[0]


def test_a_closed_line_stays_quiet(monkeypatch):
    monkeypatch.setattr(progress, "HEARTBEAT", 0.01)
    log = io.StringIO()
    line = ProgressLine("chip", stream=log)
    line.close()
    time.sleep(0.1)
    assert log.getvalue() == ""
