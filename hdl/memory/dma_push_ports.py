"""The DMA's push ports: pushes dealt in turn to several packetizers, so a chip injects
several flits a cycle into its router."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..ici.arbiter import RoundRobin
from ..ici.layouts import flit_layout
from ..lib.params import check_int
from ..lib.numbered_ports import port, port_name
from ..lib.stream_queue import StreamQueue
from .dma_lanes import equals, pick
from .dma_push import DEFAULT_MAX_PAYLOAD, Packetizer, push_beat_layout, push_done_layout
from .layouts import CHIP_BITS

__all__ = ["PushPorts", "DEFAULT_PUSH_BEATS"]

#: Beats each port's queue holds by default (with 4-word lines, 256 words): a push of up
#: to that size is taken off the burst engine at its line rate while the port before it
#: still sends, so pushes to different neighbours leave side by side.
DEFAULT_PUSH_BEATS = 64


class PushPorts(wiring.Component):
    """``ports`` :class:`~hdl.memory.dma_push.Packetizer` s sharing one stream of push
    beats.

    **Dealing.** Pushes are dealt in turn: the n-th push whose beats arrive goes whole to
    port ``n mod ports``, through a queue of ``beats`` beats, so the burst engine moves on
    to the next push as soon as this one's beats are queued. Each port sends its pushes in
    order; pushes on different ports may arrive in either order (their flags add up the
    same; words they both write would race, as between chips). A program that pushes to
    its neighbours alternately (a bidirectional ring) keeps every port busy. With one port
    the beats go straight to the packetizer, with no queue.

    **Completions.** The packetizers' ``done`` offers share ``done`` by round robin; each
    offer is held until taken, so none is lost.

    Parameters
    ----------
    ports : int
        Packetizers, 1 to 8.
    max_words, flit_words, max_payload
        Each :class:`~hdl.memory.dma_push.Packetizer`'s.
    beats : int
        Beats each port's queue holds, with ``ports`` above 1 (default
        :data:`DEFAULT_PUSH_BEATS`).

    Ports
    -----
    beats_in : In(stream.Signature(push_beat_layout(max_words)))
        The burst engine's push beats; ``ready`` does not depend on ``valid``.
    chip : In(8)
        This chip's id, the packets' source.
    push, push1, ... : Out(stream.Signature(flit_layout(flit_words)))
        Each port's packets (the packetizer's ``flits``).
    done : Out(stream.Signature(push_done_layout))
        A push whose last flit has left.
    idle : Out(1)
        No beat queued, and every packetizer idle.

    Latency: one cycle more than a packetizer's through a queue (its registered output).
    Throughput: ``ports`` words a cycle out (one per packetizer) while the pushes alternate.
    """

    def __init__(self, *, ports, max_words, flit_words=1, max_payload=DEFAULT_MAX_PAYLOAD,
                 beats=DEFAULT_PUSH_BEATS):
        self.ports = check_int("ports", ports, least=1, most=8)
        self.queue_beats = check_int("beats", beats, least=1)
        self.packetizers = [Packetizer(max_words=max_words, flit_words=flit_words,
                                       max_payload=max_payload) for _ in range(ports)]
        flits = stream.Signature(flit_layout(flit_words))
        super().__init__({
            "beats_in": In(stream.Signature(push_beat_layout(max_words))),
            "chip": In(CHIP_BITS),
            **{port_name("push", j): Out(flits) for j in range(ports)},
            "done": Out(stream.Signature(push_done_layout)),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        k = self.ports
        for j, packetizer in enumerate(self.packetizers):
            m.submodules[f"packetizer{j}"] = packetizer
            wiring.connect(m, packetizer.flits, wiring.flipped(port(self, "push", j)))
            m.d.comb += packetizer.chip.eq(self.chip)
        if k == 1:
            packetizer = self.packetizers[0]
            wiring.connect(m, wiring.flipped(self.beats_in), packetizer.beats)
            wiring.connect(m, packetizer.done, wiring.flipped(self.done))
            m.d.comb += self.idle.eq(packetizer.idle)
            return m

        beats = self.beats_in
        turn = Signal(range(k))
        queues = []
        for j, packetizer in enumerate(self.packetizers):
            queue = StreamQueue(shape=beats.payload.shape(), depth=self.queue_beats,
                                buffered=True)
            m.submodules[f"queue{j}"] = queue
            queues.append(queue)
            m.d.comb += [queue.i.payload.eq(beats.payload),
                         queue.i.valid.eq(beats.valid & equals(turn, j))]
            wiring.connect(m, queue.o, packetizer.beats)
        m.d.comb += beats.ready.eq(pick([queue.i.ready for queue in queues], turn))
        with m.If(beats.valid & beats.ready & beats.payload.last):
            m.d.sync += turn.eq(Mux(equals(turn, k - 1), 0, turn + 1))

        m.submodules.arbiter = arbiter = RoundRobin(n=k)
        dones = [packetizer.done for packetizer in self.packetizers]
        m.d.comb += [
            arbiter.requests.eq(Cat(done.valid for done in dones)),
            arbiter.advance.eq(self.done.ready),
            self.done.valid.eq(arbiter.grant.any()),
            self.done.payload.eq(_granted([done.payload for done in dones], arbiter.grant)),
            *(done.ready.eq(self.done.ready & arbiter.grant[j]) for j, done in enumerate(dones)),
            self.idle.eq(Cat(*(packetizer.idle for packetizer in self.packetizers),
                             *(~queue.o.valid for queue in queues)).all()),
        ]
        return m


def _granted(values, grant):
    """The value whose bit of the one-hot ``grant`` is set (``values[0]`` when none is)."""
    result = values[0]
    for j in range(1, len(values)):
        result = Mux(grant[j], values[j], result)
    return result
