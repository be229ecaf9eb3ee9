"""The DMA's push ports: pushes dealt in turn to several packetizers, so a chip injects
several flits a cycle into its router."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..ici.arbiter import RoundRobin
from ..ici.layouts import flit_layout
from ..lib.params import check_choice, check_int
from ..lib.numbered_ports import port, port_name
from ..lib.stream_queue import StreamQueue
from .dma_lanes import equals, pick
from .dma_push import DEFAULT_MAX_PAYLOAD, Packetizer, push_beat_layout, push_done_layout
from .layouts import CHIP_BITS

__all__ = ["PushPorts", "DEFAULT_PUSH_BEATS", "DEALINGS"]

#: Beats each port's queue holds by default (with 4-word lines, 256 words): a push of up
#: to that size is taken off the burst engine at its line rate while the port before it
#: still sends, so pushes to different neighbours leave side by side.
DEFAULT_PUSH_BEATS = 64
#: How pushes are dealt to the ports (:class:`PushPorts`).
DEALINGS = ("turn", "empty")


class PushPorts(wiring.Component):
    """``ports`` :class:`~hdl.memory.dma_push.Packetizer` s sharing one stream of push
    beats.

    **Dealing.** Each push goes whole to one port, through a queue of ``beats`` beats, so
    the burst engine moves on to the next push as soon as this one's beats are queued.
    With ``dealing="turn"`` the n-th push goes to port ``n mod ports``: a program that
    pushes to its neighbours alternately (a bidirectional ring) keeps every port busy, and
    one that deals its pushes by direction knows each push's port. With ``"empty"`` a
    push goes to the first port, from the one after the last push's, whose queue is empty,
    and waits while none is: a port whose packets wait in the network then holds up only
    its own queue, not the pushes dealt behind it. Each port sends its pushes in order;
    pushes on different ports may arrive in either order (their flags add up the same;
    words they both write would race, as between chips). With one port the beats go
    straight to the packetizer, with no queue.

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
    dealing : str
        ``"turn"`` (default) or ``"empty"`` (**Dealing**).

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
                 beats=DEFAULT_PUSH_BEATS, dealing="turn"):
        self.ports = check_int("ports", ports, least=1, most=8)
        self.dealing = check_choice("dealing", dealing, DEALINGS)
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
        turn = Signal(range(k))                         # the port of the next push
        queues = []
        for j, packetizer in enumerate(self.packetizers):
            queue = StreamQueue(shape=beats.payload.shape(), depth=self.queue_beats,
                                buffered=True)
            m.submodules[f"queue{j}"] = queue
            queues.append(queue)
            m.d.comb += queue.i.payload.eq(beats.payload)
            wiring.connect(m, queue.o, packetizer.beats)
        to, free = turn, 1                              # this beat's port, and whether it may go
        if self.dealing == "empty":
            # A push's port is chosen at its first beat and kept to its last.
            mid, held = Signal(), Signal(range(k))
            chosen, found = Signal(range(k)), Signal()
            for offset in reversed(range(k)):           # the nearest after the turn wins
                j = Signal(range(k), name=f"after{offset}")
                m.d.comb += j.eq(Mux(turn >= k - offset, turn - (k - offset), turn + offset))
                with m.If(~pick([queue.o.valid for queue in queues], j)):
                    m.d.comb += [chosen.eq(j), found.eq(1)]
            to, free = Mux(mid, held, chosen), mid | found
            with m.If(beats.valid & beats.ready):
                m.d.sync += [mid.eq(~beats.payload.last), held.eq(to)]
        for j, queue in enumerate(queues):
            m.d.comb += queue.i.valid.eq(beats.valid & free & equals(to, j))
        m.d.comb += beats.ready.eq(free & pick([queue.i.ready for queue in queues], to))
        with m.If(beats.valid & beats.ready & beats.payload.last):
            m.d.sync += turn.eq(Mux(equals(to, k - 1), 0, to + 1))

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
