"""Whole runs: stream data in, run to completion, read results back, no Python per cycle.

A :class:`WholeRun` says what each stream port of a block plays or records;
:func:`sim.backends.run_whole` runs it on any backend inside a
:class:`~hdl.testbench.run_harness.RunHarness` and returns a :class:`WholeRunResult`.
Every backend simulates the same harness RTL, gap generators included, so
results and cycle counts are identical on all of them for the same data and
seed.

The Amaranth backend sizes the harness memories to the data (:attr:`WholeRun.depths`);
the compiled backends build the harness ``streamed``, with rings of
:data:`RING_DEPTH` entries that their testbench refills and empties between
clock edges, so one build of a design serves every amount of data, and the
cycles stay the same.
"""

from dataclasses import dataclass, field

import numpy as np

from amaranth.hdl import Shape
from amaranth.lib.wiring import In

from hdl.testbench.run_harness import RunHarness, plain_ports, stream_ports
from hdl.lib.xorshift import gap_threshold

from ..transactors import SimulationHang

__all__ = ["WholeRun", "StreamStats", "WholeRunResult", "check_run", "make_harness", "finish",
           "memory_depth", "MIN_DEPTH", "RING_DEPTH", "pack_words", "unpack_words"]

#: Smallest memory of a player or recorder; depths are powers of two from here,
#: so runs of similar size share one build.
MIN_DEPTH = 16
#: Entries of each player's and recorder's ring in a streamed harness (the compiled
#: backends), whatever the data. The testbench tops the rings up every cycle, so two
#: entries would do; more lets a slower host work in bursts and costs nothing.
RING_DEPTH = 1024


def memory_depth(beats):
    """The memory depth that holds ``beats`` entries: a power of two, at least :data:`MIN_DEPTH`."""
    return max(MIN_DEPTH, 1 << max(0, beats - 1).bit_length())


def pack_words(words, per_entry):
    """Flat uint32 ``words`` as memory entries or stream beats of ``per_entry`` words
    each (Python integers, word ``j`` at bits ``32*j``), as ``load`` and ``play`` take
    them."""
    raw = np.ascontiguousarray(words, dtype="<u4").reshape(-1, per_entry)
    return [int.from_bytes(entry.tobytes(), "little") for entry in raw]


def unpack_words(entries, per_entry):
    """The inverse of :func:`pack_words`: flat uint32 words of ``entries``."""
    raw = b"".join(int(entry).to_bytes(4 * per_entry, "little") for entry in entries)
    return np.frombuffer(raw, "<u4").astype(np.uint32)


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
        Cycles with no transfer on any stream (and ``busy`` low) after which the run
        is hung.
    depth : int, optional
        Memory entries of every player and recorder, and the most beats any
        stream may carry. By default each gets the smallest power of two that
        holds its beats; a fixed depth lets runs of any size up to it share one
        kept simulation on the Amaranth backend. The compiled backends stream
        through rings of :data:`RING_DEPTH` entries whatever the depth, so one
        build serves runs of every size there.
    inputs : dict of str to int
        Values of the block's plain (non-stream) input ports for the run; the
        others stay at their reset values.
    load : dict of str to sequence of int
        Initial contents of memories the block offers (its ``memory_images``),
        from entry 0; the rest of each memory is zero.
    dump : tuple of str
        Memories to read back whole at the end.
    until : str, optional
        A 1-bit plain output of the block that ends the run when high (once
        every input is sent); ``record`` counts are then the most each output
        may carry (see :class:`~hdl.testbench.run_harness.RunHarness`).
    busy : str, optional
        A 1-bit plain output of the block that is high while it makes progress no
        stream shows; it holds the watchdog off.
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
    inputs: dict = field(default_factory=dict)
    load: dict = field(default_factory=dict)
    dump: tuple = ()
    until: str | None = None
    busy: str | None = None

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
        ports |= {f"dut_{name}": value for name, value in self.inputs.items()}
        return ports


@dataclass(frozen=True)
class StreamStats:
    """What crossed one stream: beats, and the harness cycle of the first and last (None if none)."""
    transfers: int
    first: int | None
    last: int | None


@dataclass(frozen=True)
class WholeRunResult:
    """What a whole run left behind.

    ``recorded``: the payloads of each output stream; ``streams``: a
    :class:`StreamStats` per stream; ``cycles``: the run's length;
    ``outputs``: the final value of each plain output port of the block;
    ``memories``: the contents of each dumped memory. ``seconds`` is the
    simulator's own wall time for the run (loading and read-back included,
    process start-up and builds excluded).
    """
    recorded: dict
    streams: dict
    cycles: int
    seconds: float
    outputs: dict = field(default_factory=dict)
    memories: dict = field(default_factory=dict)


def check_run(run, signature, images):
    """Check ``run`` against the ports of ``signature`` and the memory ``images`` of its block.

    Raises ValueError naming the port or memory at fault.
    """
    _check_plain(run, signature)
    _check_images(run, images)
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


def _check_plain(run, signature):
    plain = plain_ports(signature)
    for role, name in (("until", run.until), ("busy", run.busy)):
        if name is not None and (plain.get(name, (In,))[0] == In
                                 or Shape.cast(plain[name][1]).width != 1):
            raise ValueError(f"{run.block}: {role} must name a 1-bit output port, not "
                             f"{name!r}")
    for name, value in run.inputs.items():
        if plain.get(name, (None,))[0] != In:
            inputs = [n for n, (flow, _) in plain.items() if flow == In]
            raise ValueError(f"{run.block}: {name!r} is not a plain input port; inputs: "
                             f"{', '.join(inputs) or 'none'}")
        width = Shape.cast(plain[name][1]).width
        if not isinstance(value, int) or not 0 <= value < 1 << width:
            raise ValueError(f"{run.block}: input {name} is {value!r}, which does not fit "
                             f"its {width} bits")


def _check_images(run, images):
    for name in (*run.load, *run.dump):
        if name not in images:
            raise ValueError(f"{run.block}: no memory {name!r} to load or dump; memories: "
                             f"{', '.join(images) or 'none'}")
    for name, words in run.load.items():
        image = images[name]
        if len(words) > image.depth:
            raise ValueError(f"{run.block}: {len(words)} entries for memory {name}, which "
                             f"holds {image.depth}")
        for index, word in enumerate(words):
            if not isinstance(word, int) or not 0 <= word < 1 << image.width:
                raise ValueError(f"{run.block}: memory {name} entry {index} is {word!r}, "
                                 f"which does not fit its {image.width} bits")


def make_harness(run, dut, *, streamed=False):
    """The :class:`RunHarness` for ``run`` around ``dut`` (a component or a black box).

    ``streamed``: rings of :data:`RING_DEPTH` entries that a testbench keeps
    going, rather than memories of :attr:`WholeRun.depths` (see
    :class:`RunHarness`); the harness then depends on no data of ``run``.
    """
    depths = ({port: RING_DEPTH for port in (*run.play, *run.record)} if streamed
              else run.depths)
    return RunHarness(dut=dut, depths=depths, until=run.until, busy=run.busy, streamed=streamed,
                      loopbacks={player: recorder for player, (recorder, _total)
                                 in run.loopbacks.items()})


def finish(run, status, recorded, seconds, memories=None):
    """Turn the harness' final port values into a result, or raise if the run hung.

    ``status`` maps every output port of the harness (``done``, ``hung``,
    ``cycles``, ``<port>_transfers/_first/_last``, ``dut_<output>``) to its value.
    """
    streams = {}
    for port in (*run.play, *run.record):
        transfers = status[f"{port}_transfers"]
        streams[port] = StreamStats(transfers, status[f"{port}_first"] if transfers else None,
                                    status[f"{port}_last"] if transfers else None)
    outputs = {name.removeprefix("dut_"): value for name, value in status.items()
               if name.startswith("dut_")}
    if not status["done"]:
        progress = "; ".join(
            f"{port}: {'sent' if port in run.play else 'received'} "
            f"{streams[port].transfers}/{run.total(port)}" for port in streams)
        quiet = "nothing moved on any stream" + (f" and {run.busy} stayed low" if run.busy
                                                 else "")
        why = (f"{quiet} for {run.watchdog} cycles" if status["hung"]
               else "the simulation stopped before the run was done")
        hang = SimulationHang(f"{run.block} hung at cycle {status['cycles']}: {why}; {progress}")
        hang.outputs = outputs          # the block's plain outputs then, for a runner to explain
        hang.memories = dict(memories or {})    # and its dumped memories
        raise hang
    return WholeRunResult(recorded, streams, status["cycles"], seconds, outputs,
                          dict(memories or {}))
