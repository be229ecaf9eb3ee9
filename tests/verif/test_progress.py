"""The one progress line: quiet on short runs in a log, redrawn on a terminal."""

import io

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
