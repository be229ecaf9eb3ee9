"""Stream driver and monitor: seeded random gaps, protocol checks, a transfer log.

Both build on the cycle-based transactors of :mod:`sim.transactors`, so they
run unchanged on every backend. Every random choice comes from the
``numpy.random.Generator`` they are given, which the caller derives from the
run's seed: the same seed gives the same gaps on Amaranth, Verilator and Icarus.
"""

from collections import Counter

from sim.transactors import StreamSink, StreamSource

__all__ = ["Driver", "Monitor", "ProtocolError"]


class ProtocolError(AssertionError):
    """The design broke a stream rule (valid dropped, or payload changed, before a transfer)."""


def _gaps(rng, probability):
    if rng is None or not probability:
        return None
    return lambda: rng.random() < probability


class Driver(StreamSource):
    """Drives an input stream; with ``idle`` > 0, ``valid`` stays low at random.

    ``transfers`` lists the cycle of every beat the design accepted.
    """

    def __init__(self, port, beats, *, rng=None, idle=0.0, total=None):
        super().__init__(port, beats, total=total, idle=_gaps(rng, idle))
        self.transfers = []

    def observe(self, cycle, ready):
        moved = super().observe(cycle, ready)
        if moved:
            self.transfers.append(cycle)
        return moved


class Monitor(StreamSink):
    """Receives an output stream; with ``stall`` > 0, ``ready`` stays low at random.

    It checks the stream rules on the design's side: once ``valid`` is high
    it must stay high, with the same payload, until a transfer. ``stalls``
    counts runs of cycles a valid beat waited, by length.
    """

    def __init__(self, port, count, *, rng=None, stall=0.0, on_beat=None):
        super().__init__(port, count, stall=_gaps(rng, stall), on_beat=on_beat)
        self.stalls = Counter()
        self._waiting = None       # payload offered but not taken last cycle
        self._streak = 0

    def observe(self, cycle, valid, payload):
        if self._waiting is not None and (not valid or payload != self._waiting):
            raise ProtocolError(
                f"{self.port}: at cycle {cycle} the design "
                + ("dropped valid" if not valid else
                   f"changed the payload from {self._waiting:#x} to {payload:#x}")
                + " before the beat was accepted")
        moved = super().observe(cycle, valid, payload)
        if valid and not moved:
            self._waiting, self._streak = payload, self._streak + 1
        else:
            if self._streak:
                self.stalls[self._streak] += 1
            self._waiting, self._streak = None, 0
        return moved
