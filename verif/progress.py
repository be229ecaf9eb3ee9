"""The one progress line of every long-running command (regressions, bench, runs, exhaustive checks).

On a terminal the line is redrawn in place; on a pipe or a log file it is
written as a plain line at most every :data:`LOG_INTERVAL` seconds (and on
the last step), so CI logs show progress without thousands of lines and a
short run prints none. A heartbeat keeps it alive when nothing updates it (a
simulator build of minutes, a long run between progress reports): every
:data:`LOG_INTERVAL` seconds in a log, every second on a terminal, it is drawn
again with its elapsed time and the build it waits on, if any, with that build's own time.
Permanent messages (a failing seed, say) go through :meth:`ProgressLine.log`,
which keeps them above the bar.
"""

import sys
import threading
import time

from sim.toolchain.build_cache import BUILD_LISTENERS, active_builds

__all__ = ["ProgressLine", "LOG_INTERVAL", "HEARTBEAT"]

#: Seconds between progress lines when the stream is not a terminal.
LOG_INTERVAL = 10.0
#: Seconds of quiet after which the heartbeat draws the line again: in a log, and on a
#: terminal (where it keeps the elapsed time ticking).
HEARTBEAT = 10.0
TTY_HEARTBEAT = 1.0
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
        self._logged = self._drawn = self.started
        self._lock = threading.Lock()
        # Builds started while the line is open say so above it (they can take minutes).
        BUILD_LISTENERS.append(self.log)
        self._closed = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, daemon=True,
                                      name=f"progress {label}")
        self._beat.start()

    def _heartbeat(self):
        """Draw the line again whenever it has been quiet for a heartbeat."""
        while True:
            period = TTY_HEARTBEAT if self.tty else HEARTBEAT
            if self._closed.wait(max(0.01, period - (time.perf_counter() - self._drawn))):
                return
            with self._lock:
                if not self._closed.is_set() and time.perf_counter() - self._drawn >= period:
                    try:
                        self._draw(force=True)
                    except (OSError, ValueError):   # the stream went away: a line left open
                        return

    def _line(self):
        elapsed = time.perf_counter() - self.started
        parts = [self.label]
        if self.total:
            filled = _BAR * min(self.done, self.total) // self.total
            parts.append(f"[{'#' * filled}{'.' * (_BAR - filled)}] {self.done:,}/{self.total:,}"
                         + (f" {self.unit}" if self.unit else ""))
        if self.text:
            parts.append(self.text)
        builds = active_builds()
        if builds:
            # The build's own time beside the line's: a build may start well into a step.
            parts.append("(still building " + ", ".join(f"{name}, {seconds:.0f} s so far"
                                                       for name, seconds in builds) + ")")
        return " ".join(parts) + f" ({elapsed:.0f} s)"

    def _draw(self, force=False):
        now = time.perf_counter()
        if self.tty:
            self.stream.write(f"\r{self._line()}\033[K")
            self._drawn = now
        elif force or now - self._logged >= LOG_INTERVAL:
            self.stream.write(self._line() + "\n")
            self._logged = self._drawn = now
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
        """Stop the heartbeat; clear the line on a terminal (a log keeps its last line)."""
        self._closed.set()
        if self.log in BUILD_LISTENERS:
            BUILD_LISTENERS.remove(self.log)
        with self._lock:
            if self.tty:
                self.stream.write("\r\033[K")
                self.stream.flush()
