"""Stream transactors and the cycle loop that runs them on any :class:`~sim.backends.bench.Bench`.

A transactor owns one stream port of the design. Every cycle the loop asks
each transactor what to drive (``drive()``), advances the clock once for all
of them, and hands each the cycle number and the samples it asked for
(``observe(cycle, *samples)``, True when a beat moved). Keeping every transactor in one loop
means one simulator round trip per cycle, whatever the number of streams.

``idle`` and ``stall`` are hooks for gaps: a callable returning True to keep
``valid`` (source) or ``ready`` (sink) low this cycle. ``verif`` supplies
seeded random ones; without them streams run at full rate.
"""

__all__ = ["StreamSource", "StreamSink", "SimulationHang", "run_transactors"]


class SimulationHang(RuntimeError):
    """No stream transferred anything for longer than the watchdog allows.

    ``outputs``, where known, maps the block's plain output ports to their values then,
    and ``memories`` the contents of the memories the run dumps.
    """

    outputs = None
    memories = None


class _Transactor:
    #: Bench cycles of this stream's first and last transfer (None before any).
    first_cycle = None
    last_cycle = None


class StreamSource(_Transactor):
    """Drives a design's input stream with a list of packed payloads.

    Once ``valid`` is raised it stays raised, with the same payload, until the
    design accepts the beat, as the stream rules require. With ``total``
    larger than the initial list, the source waits (``valid`` low) for more
    beats to be appended to :attr:`beats`, e.g. by another transactor's
    callback, and is done after ``total`` beats.
    """

    def __init__(self, port, beats, *, total=None, idle=None):
        self.port = port
        self.beats = list(beats)
        self.total = len(self.beats) if total is None else total
        self.sent = 0
        self._idle = idle
        self._valid = False
        self._valid_path = f"{port}.valid"
        self._payload_path = f"{port}.payload"
        self.samples = (f"{port}.ready",)

    @property
    def done(self):
        return self.sent == self.total

    def status(self):
        return f"{self.port}: sent {self.sent}/{self.total}"

    def drive(self):
        if not self._valid and self.sent < len(self.beats):
            self._valid = self._idle is None or not self._idle()
        if not self._valid:
            return {self._valid_path: 0}
        return {self._valid_path: 1, self._payload_path: self.beats[self.sent]}

    def observe(self, cycle, ready):
        if self._valid and ready:
            self.sent += 1
            self._valid = False
            return True
        return False


class StreamSink(_Transactor):
    """Accepts ``count`` beats from a design's output stream and keeps their payloads.

    ``on_beat(index, payload, cycle)``, if given, sees each beat as it arrives
    (a monitor or a scoreboard hooks in here).
    """

    def __init__(self, port, count, *, stall=None, on_beat=None):
        self.port = port
        self.count = count
        self.beats = []
        self._stall = stall
        self._on_beat = on_beat
        self._ready = 0
        self._ready_path = f"{port}.ready"
        self.samples = (f"{port}.valid", f"{port}.payload")

    @property
    def done(self):
        return len(self.beats) == self.count

    def status(self):
        return f"{self.port}: received {len(self.beats)}/{self.count}"

    def drive(self):
        self._ready = 0 if self.done or (self._stall is not None and self._stall()) else 1
        return {self._ready_path: self._ready}

    def observe(self, cycle, valid, payload):
        if valid and self._ready:
            if self._on_beat is not None:
                self._on_beat(len(self.beats), payload, cycle)
            self.beats.append(payload)
            return True
        return False


PROGRESS_EVERY = 256     # cycles between progress reports


async def run_transactors(bench, transactors, *, watchdog=1000, progress=None):
    """Run ``transactors`` on ``bench`` until all are done.

    Raises :class:`SimulationHang` naming every stream's progress if no beat
    moves on any stream for ``watchdog`` consecutive cycles. ``progress``, if
    given, is called every :data:`PROGRESS_EVERY` cycles with the cycle count
    and a one-line status of every stream.
    """
    quiet = 0
    sample_paths = tuple(p for t in transactors for p in t.samples)
    spans = []
    start = 0
    for t in transactors:
        spans.append((t, start, start + len(t.samples)))
        start += len(t.samples)
    while not all(t.done for t in transactors):
        drive = {}
        for t in transactors:
            drive.update(t.drive())
        values = await bench.cycle(drive, sample_paths)
        moved = False
        for t, lo, hi in spans:
            if t.observe(bench.cycles, *values[lo:hi]):
                moved = True
                if t.first_cycle is None:
                    t.first_cycle = bench.cycles
                t.last_cycle = bench.cycles
        quiet = 0 if moved else quiet + 1
        if progress is not None and bench.cycles % PROGRESS_EVERY == 0:
            progress(bench.cycles, "; ".join(t.status() for t in transactors))
        if quiet > watchdog:
            raise SimulationHang(
                f"simulation hung: nothing moved on any stream for {watchdog} cycles "
                f"(at cycle {bench.cycles}); " + "; ".join(t.status() for t in transactors))
