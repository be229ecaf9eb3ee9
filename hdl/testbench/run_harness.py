"""A whole run in hardware: a design between stream players and recorders.

The harness owns every stream port of the design under test. Inputs are
played from memories and outputs recorded into memories, with seeded random
gaps on both sides, a cycle counter, time stamps and a watchdog, so a run is
"load the memories, set the counts, raise ``start``, wait for ``done``, read
the memories back". Nothing acts per cycle from outside, which is what lets a
compiled simulator run at full speed, and the same top synthesizes for an
FPGA.

Built ``streamed``, the memories are rings of a fixed depth that a host keeps
going between clock edges instead, so the build no longer depends on how much
data a run carries (the compiled backends' testbench is that host).
"""

import zlib

from amaranth.hdl import Cat, Const, Module, Mux, ShapeCastable, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .stream_endpoints import TIME_BITS, StreamPlayer, StreamRecorder
from ..lib.xorshift import GAP_BITS

__all__ = ["RunHarness", "stream_ports", "plain_ports"]


def stream_ports(signature):
    """``{name: (flow, payload shape)}`` of the stream members of a component signature."""
    ports = {}
    for name, member in signature.members.items():
        if member.is_signature and isinstance(member.signature, stream.Signature):
            ports[name] = (member.flow, member.signature.members["payload"].shape)
    return ports


def plain_ports(signature):
    """``{name: (flow, shape)}`` of the members of a signature that are plain ports."""
    return {name: (member.flow, member.shape) for name, member in signature.members.items()
            if member.is_port}


class RunHarness(wiring.Component):
    """Runs ``dut`` from stream players into stream recorders until every count is met.

    Parameters
    ----------
    dut : wiring.Component
        The design under test; every stream port of its signature must be in
        ``depths``. Its plain ports (not streams) pass through as harness
        ports ``dut_<name>``, so a run can set its inputs and read its outputs;
        the inputs of any other interface are held at their reset values.
    depths : dict of str to int
        Memory entries for each stream port: a player for an input stream, a
        recorder for an output stream (powers of two if ``streamed``).
    until : str, optional
        A 1-bit plain output of the design that says it has finished; with it
        the run is done once every player has sent its count and this output
        is high, and ``<port>_count`` of a recorder is the most it accepts
        (for outputs whose length the design decides, such as error
        records). The design must hold it low while any output beat is
        still to come.
    busy : str, optional
        A 1-bit plain output of the design that is high while it makes
        progress of its own that no stream shows (a long DMA transfer between
        memories): it holds the watchdog off like a transfer does.
    loopbacks : dict of str to str
        ``{player: recorder}``: the recorder's beats are also written into
        the player's memory after the ``<player>_loaded`` preloaded beats (at
        most up to the player's count), and the player may send them as soon
        as they are written. This chains results back in, as the MXU's
        K-tiles chain through ``acc_in``. Streamed, the loop runs through the
        host instead (see ``streamed``).
    streamed : bool
        Every player and recorder is a ring of its depth (see
        :mod:`.stream_endpoints`) that a host keeps going while the run goes
        on, so the memories need not hold the run and one build serves any
        amount of data. The host writes each player's beats ahead of it and
        reads each recorder's behind it, and loops a recorder's beats back
        into its player itself: the harness has ``<player>_available`` and
        ``<recorder>_drained`` ports and no ``<player>_loaded``. A host that
        does its work between clock edges (a simulator's testbench) leaves
        every cycle as it is preloaded.

    Ports
    -----
    start : In(1)
        Raise and hold for the run. While low, every endpoint idles and reseeds.
    seed : In(32)
        Seed of every gap generator (each stream mixes in its name).
    watchdog : In(32)
        Cycles without any transfer (and with ``busy`` low) after which the run is
        ``hung``; 0 disables it.
    done : Out(1)
        Every player has sent, and every recorder received, its count.
    hung : Out(1)
        The watchdog expired first.
    cycles : Out(32)
        Cycles since ``start``, frozen once the run is done or hung.
    <port>_count, <port>_gap : In
        Beats to transfer, and the gap probability in units of 2^-16.
    <port>_loaded : In, looped-back players only, not streamed
        Beats preloaded ahead of the looped-back ones.
    <player>_available : In(COUNT_BITS), streamed only
        Beats the host has written into the player's ring so far.
    <recorder>_drained : In(COUNT_BITS), streamed only
        Beats the host has read out of the recorder's ring so far.
    <port>_transfers, <port>_first, <port>_last : Out
        Beats transferred, and the ``cycles`` value at the first and the
        latest transfer.
    dut_<name> : In or Out
        Each plain port of the design, passed through.
    """

    def __init__(self, *, dut, depths, loopbacks=None, until=None, busy=None, streamed=False):
        self.dut = dut
        self.until = until
        self.busy = busy
        self.streamed = bool(streamed)
        self.streams = stream_ports(dut.signature)
        self.loopbacks = dict(loopbacks or {})
        missing = sorted(set(self.streams) - set(depths))
        extra = sorted(set(depths) - set(self.streams))
        if missing or extra:
            raise ValueError(f"depths must name every stream port of the design "
                             f"({', '.join(self.streams)}); "
                             + (f"missing {', '.join(missing)}" if missing else
                                f"not stream ports: {', '.join(extra)}"))
        for player, recorder in self.loopbacks.items():
            if self.streams.get(player, (None,))[0] != In or \
                    self.streams.get(recorder, (None,))[0] != Out:
                raise ValueError(f"loopback {player!r} <- {recorder!r} must go from an output "
                                 f"stream to an input stream")
        self.endpoints = {}
        for name, (flow, shape) in self.streams.items():
            kind = StreamPlayer if flow == In else StreamRecorder
            self.endpoints[name] = kind(shape=shape, depth=depths[name], ring=self.streamed)

        ports = {"start": In(1), "seed": In(32), "watchdog": In(32),
                 "done": Out(1), "hung": Out(1), "cycles": Out(TIME_BITS)}
        for name, endpoint in self.endpoints.items():
            count = endpoint.count.shape()
            ports |= {f"{name}_count": In(count), f"{name}_gap": In(GAP_BITS + 1),
                      f"{name}_transfers": Out(count), f"{name}_first": Out(TIME_BITS),
                      f"{name}_last": Out(TIME_BITS)}
            if self.streamed:
                ports[f"{name}_available" if name in self._players else f"{name}_drained"] = \
                    In(count)
            elif name in self.loopbacks:
                ports[f"{name}_loaded"] = In(count)
        self.plain = plain_ports(dut.signature)
        for role, name in (("until", until), ("busy", busy)):
            if name is not None and self.plain.get(name, (In,))[0] == In:
                raise ValueError(f"{role} must name a plain output port of the design, "
                                 f"not {name!r}")
        for name, (flow, shape) in self.plain.items():
            ports[f"dut_{name}"] = In(shape) if flow == In else Out(shape)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        running = Signal()
        quiet = Signal(32)
        moved = Signal()
        finished = self.done | self.hung
        m.d.comb += running.eq(self.start & ~finished)

        all_done, any_moved = [], []
        until_port = None if self.until is None else getattr(dut, self.until)
        for name, endpoint in self.endpoints.items():
            m.submodules[f"{'play' if name in self._players else 'record'}_{name}"] = endpoint
            port = getattr(self, f"{name}_count")
            m.d.comb += [
                endpoint.start.eq(running), endpoint.count.eq(port),
                endpoint.gap.eq(getattr(self, f"{name}_gap")),
                # Each stream mixes its name into the seed, so no two draw alike.
                endpoint.seed.eq(self.seed ^ zlib.crc32(name.encode())),
                endpoint.now.eq(self.cycles),
                getattr(self, f"{name}_transfers").eq(endpoint.transfers),
                getattr(self, f"{name}_first").eq(endpoint.first),
                getattr(self, f"{name}_last").eq(endpoint.last),
            ]
            if name in self._players:
                wiring.connect(m, endpoint.stream, getattr(dut, name))
            else:
                wiring.connect(m, getattr(dut, name), endpoint.stream)
            any_moved.append(endpoint.stream.valid & endpoint.stream.ready)
            if name in self._players or until_port is None:
                all_done.append(endpoint.transfers == port)

        for name, (flow, _shape) in self.plain.items():
            outer, inner = getattr(self, f"dut_{name}"), getattr(dut, name)
            m.d.comb += inner.eq(outer) if flow == In else outer.eq(inner)
        # Inputs of any other interface (a core port a run leaves idle) are held at
        # their reset values: left undriven they would be X in an event simulator.
        for path, member, value in dut.signature.flatten(dut):
            if path[0] not in self.streams and path[0] not in self.plain and member.flow == In:
                m.d.comb += Value.cast(value).eq(_reset_value(member))

        if self.streamed:
            # The host keeps the rings going, loopbacks included.
            for name, endpoint in self.endpoints.items():
                if name in self._players:
                    m.d.comb += endpoint.available.eq(getattr(self, f"{name}_available"))
                else:
                    m.d.comb += endpoint.drained.eq(getattr(self, f"{name}_drained"))
        for name in () if self.streamed else self._players:
            player = self.endpoints[name]
            if name not in self.loopbacks:
                m.d.comb += player.available.eq(player.count)
                continue
            recorder = self.endpoints[self.loopbacks[name]]
            loaded = getattr(self, f"{name}_loaded")
            slot = Signal(range(2 * player.depth + 1))
            m.d.comb += [
                slot.eq(loaded + recorder.transfers),
                # Clipped to the count: the sum may not fit the player's port.
                player.available.eq(Mux(slot < player.count, slot, player.count)),
                player.fill.addr.eq(slot), player.fill.data.eq(recorder.written.data),
                player.fill.en.eq(recorder.written.en & (slot < player.count)),
            ]

        if until_port is not None:
            all_done.append(until_port)
        if self.busy is not None:
            any_moved.append(getattr(dut, self.busy))
        m.d.comb += [self.done.eq(self.start & Cat(*all_done).all()),
                     moved.eq(Cat(*any_moved).any())]
        with m.If(running):
            m.d.sync += self.cycles.eq(self.cycles + 1)
            with m.If(moved):
                m.d.sync += quiet.eq(0)
            with m.Else():
                m.d.sync += quiet.eq(quiet + 1)
                with m.If((self.watchdog != 0) & (quiet + 1 == self.watchdog)):
                    m.d.sync += self.hung.eq(1)
        return m

    @property
    def _players(self):
        return [name for name, (flow, _) in self.streams.items() if flow == In]


def _reset_value(member):
    if isinstance(member.shape, ShapeCastable):
        return Const.cast(member.shape.const(member.init))
    return member.init or 0
