"""Whole runs: stream data in, run to completion, read results back, no Python per cycle.

A :class:`WholeRun` says what each stream port of a block plays or records;
:func:`run_whole` runs it on any backend inside a
:class:`~hdl.lib.run_harness.RunHarness` and returns a :class:`WholeRunResult`.
Every backend simulates the same harness RTL, gap generators included, so
results and cycle counts are identical on all of them for the same data and
seed.
"""

from dataclasses import dataclass, field

from amaranth.hdl import Shape
from amaranth.lib.wiring import In

from hdl.lib.run_harness import RunHarness, stream_ports
from hdl.lib.xorshift import gap_threshold

from ..blocks import block_signature, build
from ..transactors import SimulationHang

__all__ = ["WholeRun", "StreamStats", "WholeRunResult", "run_whole", "make_harness",
           "memory_depth", "MIN_DEPTH"]

#: Smallest memory of a player or recorder; depths are powers of two from here,
#: so runs of similar size share one build.
MIN_DEPTH = 16


def memory_depth(beats):
    """The memory depth that holds ``beats`` entries: a power of two, at least :data:`MIN_DEPTH`."""
    return max(MIN_DEPTH, 1 << max(0, beats - 1).bit_length())


@dataclass(frozen=True)
class WholeRun:
    """One run of ``block`` built with ``params``.

    Parameters
    ----------
    play : dict of str to list of int
        Packed payloads to send into each input stream, in order.
    record : dict of str to int
        Beats to accept from each output stream.
    loopbacks : dict of str to (str, int)
        ``{player: (recorder, total)}``: the player sends its ``play`` beats,
        then the recorder's beats as they arrive, ``total`` beats in all.
    gaps : dict of str to float
        Per stream, the probability of an idle cycle (players) or of a
        backpressure cycle (recorders); 0 by default.
    seed : int
        Seed of every gap generator.
    watchdog : int
        Cycles with no transfer on any stream after which the run is hung.
    depth : int, optional
        Memory entries of every player and recorder. By default each gets the
        smallest power of two that holds its beats; a fixed depth lets runs of
        any size up to it share one build.
    """
    block: str
    params: dict
    play: dict
    record: dict
    loopbacks: dict = field(default_factory=dict)
    gaps: dict = field(default_factory=dict)
    seed: int = 0
    watchdog: int = 1000
    depth: int | None = None

    def total(self, port):
        """Beats that cross ``port`` in the whole run."""
        if port in self.record:
            return self.record[port]
        if port in self.loopbacks:
            return self.loopbacks[port][1]
        return len(self.play[port])

    @property
    def depths(self):
        return {port: self.depth or memory_depth(self.total(port))
                for port in (*self.play, *self.record)}

    def settings(self):
        """The harness input ports and their values for this run (``start`` aside)."""
        ports = {"seed": self.seed, "watchdog": self.watchdog}
        for port in (*self.play, *self.record):
            ports[f"{port}_count"] = self.total(port)
            ports[f"{port}_gap"] = gap_threshold(self.gaps.get(port, 0.0))
        for player in self.loopbacks:
            ports[f"{player}_loaded"] = len(self.play[player])
        return ports


@dataclass(frozen=True)
class StreamStats:
    """What crossed one stream: beats, and the harness cycle of the first and last (None if none)."""
    transfers: int
    first: int | None
    last: int | None


@dataclass(frozen=True)
class WholeRunResult:
    """``recorded`` payloads per output stream, ``streams`` stats per stream, ``cycles`` in all.

    ``seconds`` is the simulator's own wall time for the run (loading and
    read-back included, process start-up and builds excluded).
    """
    recorded: dict
    streams: dict
    cycles: int
    seconds: float


def check_run(run, signature):
    """Check ``run`` against the stream ports of ``signature``; raise ValueError naming the port."""
    ports = stream_ports(signature)
    given = {**run.play, **run.record}
    missing = sorted(set(ports) - set(given))
    unknown = sorted(set(given) - set(ports))
    if missing or unknown:
        raise ValueError(f"{run.block}: a whole run must give every stream port "
                         f"({', '.join(ports)}); " + (f"missing {', '.join(missing)}" if missing
                                                      else f"unknown {', '.join(unknown)}"))
    for port, beats in run.play.items():
        flow, shape = ports[port]
        if flow != In:
            raise ValueError(f"{run.block}: {port} is an output stream; record it, not play it")
        width = Shape.cast(shape).width
        for index, beat in enumerate(beats):
            if not isinstance(beat, int) or not 0 <= beat < 1 << width:
                raise ValueError(f"{run.block}: {port} beat {index} is {beat!r}, which does not "
                                 f"fit the port's {width}-bit payload")
    for port, count in run.record.items():
        if ports[port][0] == In:
            raise ValueError(f"{run.block}: {port} is an input stream; play it, not record it")
        if not isinstance(count, int) or count < 0:
            raise ValueError(f"{run.block}: {port} count must be a non-negative integer, "
                             f"not {count!r}")
    for player, (recorder, total) in run.loopbacks.items():
        if player not in run.play or recorder not in run.record:
            raise ValueError(f"{run.block}: loopback {player} <- {recorder} needs a played "
                             f"input and a recorded output")
        if total < len(run.play[player]):
            raise ValueError(f"{run.block}: loopback {player} total {total} is less than its "
                             f"{len(run.play[player])} preloaded beats")
    for port, probability in run.gaps.items():
        if port not in ports:
            raise ValueError(f"{run.block}: gap for unknown stream {port!r}")
        gap_threshold(probability)
    for port, depth in run.depths.items():
        if run.total(port) > depth:
            raise ValueError(f"{run.block}: {port} carries {run.total(port)} beats, more than "
                             f"the harness memory's {depth}")
    if not isinstance(run.seed, int) or not 0 <= run.seed < 1 << 32:
        raise ValueError(f"seed must be an integer from 0 to 2**32 - 1, not {run.seed!r}")
    if not isinstance(run.watchdog, int) or run.watchdog < 1:
        raise ValueError(f"watchdog must be a positive number of cycles, not {run.watchdog!r}")


def make_harness(run, dut):
    """The :class:`RunHarness` for ``run`` around ``dut`` (a component or a black box)."""
    return RunHarness(dut=dut, depths=run.depths,
                      loopbacks={player: recorder for player, (recorder, _total)
                                 in run.loopbacks.items()})


def finish(run, status, recorded, seconds):
    """Turn the harness' final port values into a result, or raise if the run hung.

    ``status`` maps ``done``, ``hung``, ``cycles`` and every
    ``<port>_transfers/_first/_last`` to its value.
    """
    streams = {}
    for port in (*run.play, *run.record):
        transfers = status[f"{port}_transfers"]
        streams[port] = StreamStats(transfers, status[f"{port}_first"] if transfers else None,
                                    status[f"{port}_last"] if transfers else None)
    if not status["done"]:
        progress = "; ".join(
            f"{port}: {'sent' if port in run.play else 'received'} "
            f"{streams[port].transfers}/{run.total(port)}" for port in streams)
        why = (f"nothing moved on any stream for {run.watchdog} cycles" if status["hung"]
               else "the simulation stopped before the run was done")
        raise SimulationHang(f"{run.block} hung at cycle {status['cycles']}: {why}; {progress}")
    return WholeRunResult(recorded, streams, status["cycles"], seconds)


def run_whole(run, *, backend="amaranth", waves=None, progress=None):
    """Run ``run`` on ``backend``; returns a :class:`WholeRunResult`.

    Raises :class:`~sim.transactors.SimulationHang` naming every stream's
    progress if the watchdog expires, and ValueError for a run that does
    not fit the block.
    """
    from . import check_backend
    check_backend(backend)
    check_run(run, block_signature(run.block, run.params))
    if backend == "amaranth":
        from .amaranth_sim import simulate_whole
        return simulate_whole(run, build(run.block, run.params), waves=waves, progress=progress)
    from .compiled import simulate_whole
    return simulate_whole(run, simulator=backend, waves=waves, progress=progress)
