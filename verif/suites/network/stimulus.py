"""Random network configurations for the ``network`` regression: one build per seed, and
whole runs on it.

A seed's **build** (``hdl.system.NetworkSystem`` parameters, one Verilator model) is its
shape, routing, VCs, buffer flits per VC and link latency. The dimensionality, the routing
with its VCs and flow control, and the shape are dealt by seed (:data:`DEAL`,
:func:`shape_of`): seeds 1 to 4 (and every eighth on) build dimension-order routers on a
2-D and a 3-D network with 2 and with 4 VCs each (seeds 1 and 2 wormhole with one
injection FIFO, seed 3 cut-through and seed 4 wormhole, both with injection queues), seeds
5 to 8 adaptive routers (cut-through, with injection queues) on a 2-D and a 3-D network
with 3 and with 4 VCs each; within 8 seeds
each routing has a twisted shape and a 3-D one, and within 16 every 2-D shape meets both
routings (dealt, not drawn: a drawn shape left the rarer ones, which alone reach some
bins, to chance). The rest is drawn from the seed's generator:

* buffer flits per VC: 1 (the least the router takes) to 8;
* link latency: 0 (a wire) to 3 cycles.

Its **runs** share that build (a topology of one shape is only streamed-in data). The
first four are a regular torus, the twisted torus (a second regular one where the shape
cannot twist), a mesh and a torus with one failed chip (drawn); the rest draw their kind.
The runs deal the traffic patterns (``sim.network.TRAFFIC``, transpose only on shapes that
read the same both ways) in a shuffled order, so that a seed of 8 runs has each; each
run draws its packet length (1 to 8 flits; with cut-through, always with adaptive routing,
at most a buffer), offered load (0.05 to 1.0 flits
per node per cycle), all-to-all message length, random link stalls (none in one run of
four, else holding each link 2% to 40% of the cycles) and the seed of every random choice
in the hardware (creation, destinations, stalls). The last run of a seed also takes one
of its live links down mid-run (``link_down``: a link and a cycle in the middle half of
the traffic, from a generator of its own, so the other draws are as they were).

Everything comes from ``numpy.random.default_rng([seed, ...])``: a seed is reproducible
alone.
"""

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from golden import topology as topo
from sim.network import TRAFFIC

__all__ = ["SHAPES_2D", "SHAPES_3D", "Deal", "DEAL", "KINDS", "ROUTINGS", "FLOW_CONTROLS",
           "flow_control", "Build", "Run", "build",
           "shape_of", "runs", "topology_of", "RUNS", "CYCLES"]

#: 2-D shapes, in the order seeds deal them: ``2x4`` twists (k x 2k); the rings of 3 and 4
#: have datelines; the meshes of 3 and more go straight through a router; ``4x4`` and
#: ``3x3`` take transpose traffic.
SHAPES_2D = ("4x4", "3x4", "2x4", "3x3")
#: 3-D shapes: ``2x2x4`` twists (k x k x 2k); both have z rings with a dateline.
SHAPES_3D = ("2x2x4", "2x2x3")


def flow_control(routing, switching, injection_queues):
    """The name of a router's flow control (a :data:`FLOW_CONTROLS` bin)."""
    return f"{routing} {switching}, {'queues' if injection_queues else 'one FIFO'}"


class Deal(NamedTuple):
    """What a seed's build is dealt (``hdl.ici.Router``'s parameters of those names)."""
    dims: int
    vcs: int
    routing: str
    speedup: int
    switching: str = "wormhole"
    injection_queues: bool = False

    @property
    def flow_control(self):
        """Its :data:`FLOW_CONTROLS` bin."""
        return flow_control(self.routing, self.switching, self.injection_queues)


#: What ``(seed - 1) % 8`` deals. Seeds 1 and 2 are the regression's dimension-order
#: builds before adaptive routing came (wormhole, one injection FIFO); seeds 3 and 4 give
#: dimension order injection queues (issue 44), seed 3 with cut-through. Adaptive routing
#: needs a VC above its 2 escape VCs, and is always cut-through with injection queues.
#: Seeds 5 and 6 have the routers' input speed-up (``hdl.ici.Router(speedup=2)``), seed 5
#: with 8 VCs (6 adaptive).
DEAL = (Deal(2, 2, "dor", 1), Deal(3, 4, "dor", 1),
        Deal(2, 4, "dor", 1, "cut_through", True), Deal(3, 2, "dor", 1, "wormhole", True),
        *(Deal(dims, vcs, "adaptive", speedup, "cut_through", True)
          for dims, vcs, speedup in ((2, 8, 2), (3, 4, 2), (2, 3, 1), (3, 3, 1))))
#: The routings of a build (``sim.network.run_stats(routing=)``).
ROUTINGS = ("dor", "adaptive")
#: The routers' flow control: routing, switching and injection, as :data:`DEAL` has them.
FLOW_CONTROLS = tuple(dict.fromkeys(deal.flow_control for deal in DEAL))
#: Topology kinds of a run.
KINDS = ("regular", "twisted", "mesh", "failed")
#: Runs per seed, by simulator: Verilator runs the full set; the others, being slower
#: by orders of magnitude, the four kinds on short runs.
RUNS = {"verilator": 8, "icarus": 4, "amaranth": 4}
#: Cycles of traffic per run (creation stops after them; the drain then delivers all).
CYCLES = {"verilator": 4000, "icarus": 300, "amaranth": 150}
#: Shapes small enough for the slower simulators.
SLOW_SHAPES = {2: ("2x4",), 3: ("2x2x3",)}


@dataclass(frozen=True)
class Build:
    """One seed's network top: ``shape`` and the ``sim.network.run_stats`` parameters
    that make its build."""
    shape: str
    vcs: int
    buffer_flits: int
    link_latency: int
    routing: str = "dor"
    speedup: int = 1
    switching: str = "wormhole"
    injection_queues: bool = False

    @property
    def cut_through(self):
        """Whether its routers cut packets through (so a packet must fit a buffer)."""
        return self.switching == "cut_through"

    @property
    def flow_control(self):
        """Its :data:`FLOW_CONTROLS` bin."""
        return flow_control(self.routing, self.switching, self.injection_queues)

    @property
    def dims(self):
        return tuple(int(x) for x in self.shape.split("x"))

    def can_twist(self):
        dims = self.dims
        k = min(dims)
        return k >= 2 and set(dims) == {k, 2 * k}


@dataclass(frozen=True)
class Run:
    """One whole run on a :class:`Build`: the topology (``kind``, and the ``failed``
    chip), and the traffic (``sim.network.run_stats`` parameters)."""
    kind: str
    failed: int | None
    traffic: str
    packet_flits: int
    rate: float
    message_packets: int
    stall: float
    seed: int
    cycles: int
    link_down: tuple | None = None

    def settings(self):
        """The keyword arguments of ``sim.network.run_stats`` for this run."""
        return dict(traffic=self.traffic, rate=self.rate, packet_flits=self.packet_flits,
                    message_packets=self.message_packets, stall=self.stall, seed=self.seed,
                    cycles=self.cycles, warmup=self.cycles // 4, link_down=self.link_down)

    def describe(self):
        failed = f" (chip {self.failed} failed)" if self.failed is not None else ""
        stall = f", links stalled {self.stall:.0%}" if self.stall else ""
        down = ""
        if self.link_down is not None:
            chip, port, cycle = self.link_down
            down = f", the link out of chip {chip} {topo.PORT_NAMES[port]} down at {cycle}"
        return (f"{self.kind}{failed}, {self.traffic} at {self.rate:.2f}, "
                f"{self.packet_flits}-flit packets{stall}{down}, run seed {self.seed}")


def shape_of(seed, backend="verilator"):
    """The shape dealt to ``seed``: the 2-D seeds (odd) take :data:`SHAPES_2D` in turn,
    moved on by two every 8 seeds (so that 16 seeds give each 2-D shape both routings);
    the 3-D seeds (even) take :data:`SHAPES_3D` in the order that gives each with 2 and
    with 4 VCs within 8 seeds, and each routing the twisted one."""
    dims = DEAL[(seed - 1) % len(DEAL)].dims
    if backend != "verilator":
        shapes = SLOW_SHAPES[dims]
    elif dims == 2:
        return SHAPES_2D[((seed - 1) // 2 + 2 * ((seed - 1) // 8)) % len(SHAPES_2D)]
    else:
        shapes = SHAPES_3D[::-1] if (seed - 1) // 4 % 2 else SHAPES_3D
    return shapes[(seed - 1) // 2 % len(shapes)]


def build(seed, backend="verilator"):
    """The :class:`Build` of ``seed``."""
    rng = np.random.default_rng([seed, 0x4E7])
    deal = DEAL[(seed - 1) % len(DEAL)]
    return Build(shape=shape_of(seed, backend), vcs=deal.vcs,
                 buffer_flits=int(rng.integers(1, 9)), link_latency=int(rng.integers(0, 4)),
                 routing=deal.routing, speedup=deal.speedup, switching=deal.switching,
                 injection_queues=deal.injection_queues)


def topology_of(b, run):
    """The ``golden.topology.Topology`` of ``run`` on build ``b``."""
    if run.kind == "twisted":
        return topo.torus(b.shape, twist=True)
    if run.kind == "mesh":
        return topo.torus(b.shape, wrap=False)
    if run.kind == "failed":
        return topo.torus(b.shape, failed=[run.failed])
    return topo.torus(b.shape)


def _traffics(rng, b, count):
    """``count`` patterns: every one ``b`` can take, shuffled, then again."""
    symmetric = b.dims == b.dims[::-1]
    choices = [t for t in TRAFFIC if symmetric or t != "transpose"]
    out = []
    while len(out) < count:
        out += [choices[k] for k in rng.permutation(len(choices))]
    return out[:count]


def runs(seed, b, backend="verilator"):
    """The :class:`Run` s of ``seed`` on its build ``b``."""
    rng = np.random.default_rng([seed, 0x52C])
    n = int(np.prod(b.dims))
    out = []
    traffics = _traffics(rng, b, RUNS[backend])
    for index in range(RUNS[backend]):
        kind = KINDS[index] if index < len(KINDS) else KINDS[int(rng.integers(len(KINDS)))]
        if kind == "twisted" and not b.can_twist():
            kind = "regular"
        failed = int(rng.integers(n)) if kind == "failed" else None
        stall = 0.0 if index % 4 == 3 else round(float(rng.uniform(0.02, 0.4)), 3)
        flits = int(rng.integers(1, 9))
        if b.cut_through:               # a packet fits a buffer
            flits = min(flits, b.buffer_flits)
        out.append(Run(kind=kind, failed=failed, traffic=traffics[index],
                       packet_flits=flits,
                       rate=round(float(rng.uniform(0.05, 1.0)), 3),
                       message_packets=int(rng.integers(1, 9)), stall=stall,
                       seed=int(rng.integers(1, 1 << 31)), cycles=CYCLES[backend]))
    last = out[-1]
    out[-1] = replace(last, link_down=_draw_link_down(seed, topology_of(b, last), last.cycles))
    return out


def _draw_link_down(seed, topology, cycles):
    """A live link of ``topology`` and a cycle in the middle half of ``cycles``:
    ``sim.network.run_stats``'s ``link_down``."""
    rng = np.random.default_rng([seed, 0x11D])
    lit = np.flatnonzero(topology.ocs >= 0)
    chip, port = divmod(int(lit[rng.integers(lit.size)]), topology.n_ports)
    return chip, port, int(rng.integers(cycles // 4, 3 * cycles // 4))
