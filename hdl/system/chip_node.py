# amaranth: UnusedElaboratable=no
# (The chip is made here, so runs can reach its memories, and used by this component's
# elaborate: if the node is never elaborated, the warning about it is the one that counts.)
"""One chip of a multi-chip system: a TensorCore chip, its router, and its outgoing links."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..ici import LinkSignature, Router
from ..ici.layouts import CHIP_BITS, MAX_VCS, max_local_ports
from ..lib.params import check_int
from ..lib.numbered_ports import port
from ..tensorcore import TensorCoreSystem
from ..tensorcore.encoding import Error
from ..tensorcore.sequencer import STALL_CAUSES, State
from .fabric import check_latencies, link_outputs
from .layouts import node_row_layout

__all__ = ["ChipNode", "chip_node_signature", "FLIT_WORDS"]

#: With ``routing="adaptive"``, the routers' ``escape_bias``: none, so a header takes the
#: minimal port whose VCs hold the most credits, the escape hop's on a tie. A system's
#: receivers drain at link rate, so a link's buffers stay nearly empty and only the flits
#: in flight tell a busy link from an idle one: with a bias of a buffer (the router's
#: default) every packet to a neighbour on a ring of two would keep to its dimension-order
#: link.
SYSTEM_ESCAPE_BIAS = 0

#: Words per flit of the system's links: one, so a link carries one word per cycle each
#: way, the rate of the DMA's packetizer and of the receive engine.
FLIT_WORDS = 1


def chip_node_signature(*, dims, vcs, n_flags, routing="dor", jitter=False):
    """The ports of a :class:`ChipNode` (its docstring), without building one; ``jitter``:
    whether the chip's HBM has jitter (the ``hbm_seed`` port)."""
    ports = 2 * dims
    link = LinkSignature(vcs=vcs, flit_words=FLIT_WORDS)
    return wiring.Signature({
        **({"hbm_seed": In(32)} if jitter else {}),
        "tx": Out(link).array(ports), "rx": In(link).array(ports),
        "setup_valid": In(1), "setup": In(node_row_layout(dims, routing)), "node": In(CHIP_BITS),
        "start": In(1), "lit": Out(ports), "moved": Out(1), "done": Out(1), "busy": Out(1),
        "state": Out(State), "pc": Out(32), "error": Out(Error),
        "waiting": Out(1), "flags": Out(data.ArrayLayout(32, n_flags)),
        "link_flits": Out(data.ArrayLayout(32, ports)), "dropped": Out(32),
        "malformed": Out(32), "stalls": Out(data.ArrayLayout(32, len(STALL_CAUSES))),
    })


class ChipNode(wiring.Component):
    """A :class:`~hdl.tensorcore.TensorCoreSystem` whose memory system's packet ports meet
    a :class:`~hdl.ici.Router` (injection and ejection), with a :class:`~hdl.ici.Link` on
    each torus output.

    The chip's ``network_ports`` (in ``chip``, default 1) are the router's local ports:
    push port j injects on local port j, and local port j ejects to receive port j (the
    router ejects by the torus input a packet arrives on, so with 2 ports the packets
    from the two directions of an axis land through different receive engines).

    With ``routing="adaptive"`` the router is adaptive (:class:`~hdl.ici.Router`, with
    :data:`SYSTEM_ESCAPE_BIAS`), and it ejects a packet by the torus input it arrives on as
    well, not by its source: the receive engines need no order, and so the packets of one
    neighbour that come over two links (both ways round a ring of two) land through two
    receive engines at once; and it keeps packets (``keep_packets``): a receive engine
    takes one packet at a time, so a link that turned flit by flit among the packets in
    flight on it would feed each at a share of its rate.

    Every chip of a system is the same module: its id comes in on ``node``, its routing
    table and lit ports in the configuration rows (``node_row_layout``, as
    :class:`~hdl.system.NetworkNode` takes them; the hop counts and traffic settings are
    not used). Row r (``setup_valid`` high) writes the router's entry for destination r,
    and if r is this chip, its lit torus ports.

    Parameters
    ----------
    dims, vcs, buffer_flits, n_nodes, routing, speedup
        The router's (:class:`~hdl.ici.Router`; flits of :data:`FLIT_WORDS` word).
        ``speedup`` (1 to ``vcs``, default 1) is its input speed-up: each input sends up
        to that many flits a cycle, of different VCs to different outputs.
    link_latency : int, or a tuple of ``2*dims`` ints
        Cycles of each outgoing link, or of the link out of each torus port ``p`` (axis
        ``p // 2``, ``+`` for even ``p``): the same on every chip, since every chip is one
        module, so a tuple makes one direction of an axis slower than the other.
    chip : dict
        The :class:`~hdl.tensorcore.TensorCoreSystem`'s parameters (``n_chips`` and
        ``flit_words`` are set here).

    Ports
    -----
    tx, rx : the outgoing links' far ends, and the router's inputs
    setup_valid, setup, node : the configuration rows, and this chip's id
    start : In(1)
        The core's (held high for the run).
    hbm_seed : In(32), with ``jitter`` in ``chip``
        The chip's HBM jitter seed (``TensorCoreSystem``'s).
    lit : Out(2*dims)
        The chip's lit torus ports, from its settings.
    moved : Out(1)
        A flit was injected, ejected or sent on a link this cycle.
    done, busy, state, pc, error, waiting, flags
        The chip's (:class:`~hdl.tensorcore.TensorCoreSystem`).
    link_flits : Out(ArrayLayout(32, 2*dims))
        Flits sent out of each torus port.
    dropped, malformed : Out(32)
        Malformed packets dropped by the router, and by the receive engine.
    stalls : Out(ArrayLayout(32, len(STALL_CAUSES)))
        The core's stall counters (``TensorCoreSystem``'s ``stall_<cause>``), in the order
        of ``hdl.tensorcore.sequencer.STALL_CAUSES``.

    Attributes
    ----------
    memory_images : dict
        The chip's (``TensorCoreSystem.memory_images``), paths below this node.
    """

    def __init__(self, *, dims=2, vcs=2, buffer_flits=8, link_latency=2, n_nodes=4,
                 chip=None, routing="dor", speedup=1):
        check_int("dims", dims, least=2, most=3)
        check_int("vcs", vcs, least=2, most=MAX_VCS)
        check_int("speedup", speedup, least=1, most=vcs)
        check_int("buffer_flits", buffer_flits, least=1)
        link_latency = check_latencies(link_latency, ports=2 * dims)
        check_int("n_nodes", n_nodes, least=2, most=1 << CHIP_BITS)
        chip = dict(chip or {})
        for name in ("n_chips", "flit_words"):
            if name in chip:
                raise TypeError(f"a system chip's {name} is set by the system, not by chip=")
        self.dims, self.vcs, self.buffer_flits = dims, vcs, buffer_flits
        self.link_latency, self.n_nodes = link_latency, n_nodes
        self.routing, self.speedup = routing, speedup
        # Checked before the chip is built, so that a refused count leaves no part behind.
        self.local_ports = check_int("network_ports", chip.get("network_ports", 1), least=1,
                                     most=max_local_ports(dims))
        self.tensorcore = TensorCoreSystem(**chip, n_chips=n_nodes, flit_words=FLIT_WORDS)
        self.memory_images = {name: (memory, f"tensorcore.{path}") for name, (memory, path)
                              in self.tensorcore.memory_images.items()}
        self.n_flags = self.tensorcore.flags.shape().length
        self.jitter = self.tensorcore.jitter
        super().__init__(chip_node_signature(dims=dims, vcs=vcs, n_flags=self.n_flags,
                                             routing=routing, jitter=bool(self.jitter)))

    def elaborate(self, platform):
        m = Module()
        ports = 2 * self.dims
        m.submodules.tensorcore = chip = self.tensorcore
        m.submodules.router = router = Router(
            dims=self.dims, vcs=self.vcs, buffer_flits=self.buffer_flits,
            flit_words=FLIT_WORDS, n_nodes=self.n_nodes, local_ports=self.local_ports,
            routing=self.routing, eject_by="input", speedup=self.speedup,
            **({"escape_bias": SYSTEM_ESCAPE_BIAS, "keep_packets": True}
               if self.routing == "adaptive" else {}))
        local = range(self.local_ports)
        for j in local:
            wiring.connect(m, port(chip, "push", j), router.local("inject", j))
            wiring.connect(m, router.local("eject", j), port(chip, "receive", j))

        lit = Signal(ports)
        cfg = self.setup
        m.d.comb += [router.table.valid.eq(self.setup_valid),
                     router.table.payload.dst.eq(cfg.row),
                     router.table.payload.entry.eq(cfg.entry), self.lit.eq(lit),
                     chip.chip.eq(self.node), chip.start.eq(self.start)]
        if self.jitter:
            m.d.comb += chip.hbm_seed.eq(self.hbm_seed)
        with m.If(self.setup_valid & (cfg.row == self.node)):
            m.d.sync += lit.eq(cfg.node.lit)

        link_outputs(m, router, self, vcs=self.vcs, flit_words=FLIT_WORDS,
                     latency=self.link_latency)
        m.d.comb += [self.link_flits[p].eq(router.forwarded[p]) for p in range(ports)]

        moves = [port.valid & port.ready for j in local
                 for port in (router.local("inject", j), router.local("eject", j))]
        m.d.comb += [
            self.moved.eq(Cat(*moves, *(router.tx[p].valid for p in range(ports))).any()),
            self.done.eq(chip.done), self.busy.eq(chip.busy), self.state.eq(chip.state),
            self.pc.eq(chip.pc), self.error.eq(chip.error), self.waiting.eq(chip.waiting),
            self.flags.eq(chip.flags), self.dropped.eq(router.dropped),
            self.malformed.eq(chip.system.malformed),
        ]
        m.d.comb += [self.stalls[k].eq(getattr(chip, f"stall_{cause}"))
                     for k, cause in enumerate(STALL_CAUSES)]
        return m
