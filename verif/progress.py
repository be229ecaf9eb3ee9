"""The one progress line of every long-running command (regressions, bench, runs, exhaustive checks).

On a terminal the line is redrawn in place; on a pipe or a log file it is
written as a plain line at most every :data:`LOG_INTERVAL` seconds (and on
the last step), so CI logs show progress without thousands of lines and a
short run prints none.
Permanent messages (a failing seed, say) go through :meth:`ProgressLine.log`,
which keeps them above the bar.
"""

import sys
import threading
import time

from sim.toolchain.build_cache import BUILD_LISTENERS

__all__ = ["ProgressLine", "LOG_INTERVAL"]

#: Seconds between progress lines when the stream is not a terminal.
LOG_INTERVAL = 10.0
_BAR = 24


class ProgressLine:
    """A progress line labelled ``label``, counting to ``total`` ``unit`` (or open-ended).

    Thread-safe: regression workers report from several threads.
    """

    def __init__(self, label, *, total=None, unit="", stream=None):
        self.label, self.total, self.unit = label, total, unit
        self.stream = sys.stderr if stream is None else stream
        self.tty = self.stream.isatty()
        self.done = 0
        self.text = ""
        self.started = time.perf_counter()
        # A log gets its first line after an interval too: short runs stay quiet.
        self._logged = self.started
        self._lock = threading.Lock()
        # Builds started while the line is open say so above it (they can take minutes).
        BUILD_LISTENERS.append(self.log)

    def _line(self):
        elapsed = time.perf_counter() - self.started
        parts = [self.label]
        if self.total:
            filled = _BAR * min(self.done, self.total) // self.total
            parts.append(f"[{'#' * filled}{'.' * (_BAR - filled)}] {self.done:,}/{self.total:,}"
                         + (f" {self.unit}" if self.unit else ""))
        if self.text:
            parts.append(self.text)
        return " ".join(parts) + f" ({elapsed:.0f} s)"

    def _draw(self, force=False):
        now = time.perf_counter()
        if self.tty:
            self.stream.write(f"\r{self._line()}\033[K")
        elif force or now - self._logged >= LOG_INTERVAL:
            self.stream.write(self._line() + "\n")
            self._logged = now
        self.stream.flush()

    def update(self, done=None, text=None, *, advance=0):
        """Set (``done``) or advance (``advance``) the count and the status text; redraw."""
        with self._lock:
            if done is not None:
                self.done = done
            self.done += advance
            if text is not None:
                self.text = text
            self._draw(force=bool(self.total) and self.done >= self.total)

    def log(self, message):
        """Write ``message`` as a line of its own, above the progress line."""
        with self._lock:
            self.stream.write(("\r\033[K" if self.tty else "") + message + "\n")
            if self.tty:
                self._draw()
            self.stream.flush()

    def close(self):
        """Clear the line on a terminal (a log keeps its last line)."""
        if self.log in BUILD_LISTENERS:
            BUILD_LISTENERS.remove(self.log)
        with self._lock:
            if self.tty:
                self.stream.write("\r\033[K")
                self.stream.flush()
