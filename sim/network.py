"""Network measurements on the ICI RTL (SPEC sections 4.4, 4.5 and 6).

::

    >>> r = sim.network.run(golden.topology.torus("4x4"), rate=0.3, cycles=3000, warmup=1000)
    >>> r.offered, r.accepted, r.latency_mean, r.latency_p99, r.hops_mean
    >>> curve = sim.network.sweep("4x4", rates=[0.1, 0.3, 0.5, 0.7, 0.9])

Each call is one whole run of a :class:`hdl.system.NetworkSystem` built for the topology's
shape: routing tables, hop counts, node settings and OCS maps are streamed in, the
traffic runs with no Python per cycle, and the statistics stream out at the end. A twist
or a failed chip changes only that streamed-in data, so every topology of one shape, and
every traffic, rate and packet size, share one build.

Definitions
    - Packets are ``packet_flits`` flits of 2 words (``hdl.system.layouts``: a 1-flit
      packet is a ``flag_add``).
    - ``rate`` is offered flits per node per cycle: each node's generators create a packet
      each cycle with probability ``rate / (local_ports * packet_flits)``.
    - Nodes: the live nodes that send under the pattern (a permutation's fixed points and
      failed chips do not); ``offered`` and ``accepted`` are flits per such node per cycle.
    - Window: cycles ``warmup .. cycles - 1`` of the run. ``offered`` counts packets
      created in the window, ``accepted`` flits ejected in it. Latency, hops and the
      histogram cover the packets whose tail is ejected in the window: latency from the
      packet's creation (source queueing included) to the cycle its tail is ejected.
    - ``latency_p99``: exact below 128 cycles; above, the upper edge of the histogram bin
      that holds the 99th percentile (bins are 1/8 of an octave wide: within 12.5%).
    - ``link_utilization``: float array [n_chips, 2D], the flits sent out of each torus
      port per cycle of the window (0 for dark ports), laid out like
      ``golden.topology.all_to_all_load``.
    - After ``cycles``, creation stops and the run continues until every packet is
      delivered; every packet is checked (source, sequence, payload) and counted, and
      :func:`run` raises :class:`NetworkIntegrityError` unless each was delivered exactly
      once, intact.

Patterns (``traffic``): ``uniform`` (random destination among the other live nodes),
``transpose`` (coordinates reversed; the shape must read the same both ways),
``bitcomp`` (each coordinate x to ``n - 1 - x``), ``tornado`` (each coordinate plus
``ceil(n/2) - 1``), ``neighbor`` (each coordinate plus 1), ``all_to_all`` (every node
sends ``message_packets`` packets to each other live node in turn, starting at a random
one).
"""

import inspect
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from golden import topology as topo
from golden.routing import check_routing, walk
from hdl.ici import table_entries
from hdl.ici.router import SWITCHINGS
from hdl.ici.layouts import (MAX_VCS, adaptive_entry_layout, adaptive_table_entries,
                             route_entry_layout)
from hdl.lib.blackbox import BlackBox
from hdl.lib.xorshift import xorshift32
from hdl.ocs import STATUSES
from hdl.system import face_ports, parse_dims, wired_neighbor
from hdl.system.layouts import (BUCKETS, HOP_BITS, MAX_LOCAL_PORTS, MAX_PACKET_FLITS, MODES,
                                bucket_range, latency_bucket, node_layout)
from hdl.system.fabric import ocs_layout
from hdl.testbench import (PHASES, NetworkSystem, network_system_signature, node_signature,
                           readout_beats)
from hdl.system.layouts import row_layout
from hdl.testbench.node import ADAPTIVE_ESCAPE_VCS, node_stats

from .backends import check_backend
from .backends.whole_run import WholeRun, check_run
from .checks import check_tracing, wave_format
from .transactors import SimulationHang
from .verilog.repeated import emit

__all__ = ["run", "sweep", "run_stats", "NetworkRun", "NetworkStats", "NetworkIntegrityError",
           "TRAFFIC", "BLOCK", "system_params", "percentile"]

#: The traffic patterns (module docstring).
TRAFFIC = ("uniform", "transpose", "bitcomp", "tornado", "neighbor", "all_to_all")
#: The block name of the network top in whole runs and builds.
BLOCK = "network"
#: Cycles the harness waits with no stream moving while configuring (the OCS checks its
#: map one port a cycle).
CONFIG_WATCHDOG = 10_000


class NetworkRun(NamedTuple):
    """Result of :func:`run` (module docstring for the definitions)."""
    offered: float
    accepted: float
    latency_mean: float
    latency_p99: float
    hops_mean: float
    link_utilization: np.ndarray


class NetworkIntegrityError(RuntimeError):
    """A network run lost, duplicated, misrouted or corrupted packets."""


@dataclass(frozen=True)
class NetworkStats:
    """Everything one run measured: :attr:`run` (the :class:`NetworkRun`), the per-node
    statistics ``per_node[name]`` (int arrays [n_chips], ``hdl.testbench.node.node_stats``
    of the run's routing: ``hdl.system.layouts.STATS``, and the adaptive router's coverage;
    ``latency`` joins ``latency_lo`` and ``latency_hi``), the latency ``histogram``
    (``BUCKETS`` bins over every node), the sending ``nodes``, the ``window`` in cycles,
    the harness ``cycles`` (configuration, run, drain and read-out), ``drain_cycles``,
    the simulator's ``seconds``, the build's ``params``, and ``down``: the two ends
    ``((chip, port), (chip, port))`` of the link taken down mid-run, or None."""
    run: NetworkRun
    per_node: dict
    histogram: np.ndarray
    nodes: int
    window: int
    cycles: int
    drain_cycles: int
    seconds: float
    params: dict = field(default_factory=dict)
    down: tuple | None = None

    def total(self, name):
        """The sum over the nodes of statistic ``name``."""
        return int(self.per_node[name].sum())

    @property
    def cycles_per_second(self):
        return self.cycles / self.seconds if self.seconds else math.inf

    def problems(self):
        """What broke exactly-once, intact delivery: a list of one-line reasons, empty
        when every packet created and queued was injected, and every one injected was
        ejected once, in sequence and intact (or, if made malformed on purpose, dropped; or,
        routed over a link taken down, given up by a router at its end and counted
        ``undeliverable``).

        With adaptive routing and packets given up at a down link, the sinks' per-flow set
        check (``sequence_errors``) is left out: a flow that lost a packet there may deliver
        its later ones by another path (dimension order loses all of them), so its sum of
        sequence numbers less counts cannot end at 0. The counts below still account for
        every packet (injected = ejected + given up), and the header and payload checks
        stand."""
        t = self.total
        found = []
        gaps = self.params.get("routing", "dor") == "adaptive" and t("undeliverable") > 0
        for name in ("header_errors", "sequence_errors"):
            if name == "sequence_errors" and gaps:
                continue
            if t(name):
                found.append(f"{t(name)} {name.replace('_', ' ')}")
        if t("payload_errors") != t("corrupted"):
            found.append(f"{t('payload_errors')} payload errors where {t('corrupted')} "
                         f"packets were sent corrupted")
        if t("dropped") != t("malformed"):
            found.append(f"routers dropped {t('dropped')} malformed packets where "
                         f"{t('malformed')} were sent")
        ends = set() if self.down is None else {chip for chip, _ in self.down}
        giving_up = set(np.flatnonzero(self.per_node["undeliverable"]).tolist())
        if giving_up - ends:
            found.append(f"routers at chips {sorted(giving_up - ends)} gave up "
                         f"{t('undeliverable')} packets, but no link of theirs went down")
        delivered = t("injected") - t("malformed") - t("undeliverable")
        if t("received") != delivered:
            found.append(f"{t('received')} packets ejected where {delivered} were injected "
                         f"well-formed and not given up at a down link")
        if t("created") != t("injected") + t("overflow"):
            found.append(f"{t('created')} packets created, but {t('injected')} injected and "
                         f"{t('overflow')} lost to full source queues")
        if t("protocol"):
            chips = np.flatnonzero(self.per_node["protocol"]).tolist()
            found.append(f"the credit protocol broke at chips {chips}")
        return found


def percentile(histogram, fraction):
    """The latency at ``fraction`` (0 to 1) of a ``BUCKETS``-bin histogram: exact in the
    linear bins, else the upper edge of the bin that holds it; NaN when empty."""
    counts = np.asarray(histogram, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return math.nan
    rank = math.ceil(fraction * total)
    bucket = int(np.searchsorted(np.cumsum(counts), max(rank, 1)))
    return float(bucket_range(bucket)[1])


def _topology(topology):
    if isinstance(topology, str):
        return topo.torus(topology)
    if not isinstance(topology, topo.Topology):
        raise ValueError(f"topology must be a golden.topology.Topology or a shape such as "
                         f"'4x4', not {type(topology).__name__}")
    return topology


def _number(name, value, least, most=None):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value) or value < least or (most is not None and value > most):
        bound = f"from {least} to {most}" if most is not None else f"at least {least}"
        raise ValueError(f"{name} must be a number {bound}, not {value!r}")
    return value


def _int(name, value, least, most=None):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an int, not {value!r}")
    return int(_number(name, value, least, most))


def system_params(topology, *, vcs=2, buffer_flits=8, link_latency=2, local_ports=1,
                  source_queue=64, routing="dor", escape_bias=None, speedup=1,
                  switching=None, injection_queues=None):
    """The :class:`~hdl.system.NetworkSystem` parameters of a run on ``topology``: the
    build, shared by every topology of its shape (``routing`` appears only when
    "adaptive", ``escape_bias`` only when given, ``speedup`` only above 1, and
    ``switching`` and ``injection_queues`` only when they are not the routing's own, so
    "dor" builds keep their parameters)."""
    return dict(dims="x".join(map(str, topology.dims)), vcs=vcs, buffer_flits=buffer_flits,
                link_latency=link_latency, local_ports=local_ports, source_queue=source_queue,
                reconfig_cycles=2, **({"routing": routing} if routing != "dor" else {}),
                **({"escape_bias": escape_bias} if escape_bias is not None else {}),
                **({"speedup": speedup} if speedup != 1 else {}),
                **({"switching": switching}
                   if switching not in (None, _default_switching(routing)) else {}),
                **({"injection_queues": injection_queues}
                   if injection_queues not in (None, routing == "adaptive") else {}))


def _default_switching(routing):
    return "cut_through" if routing == "adaptive" else "wormhole"


def _destinations(topology, traffic):
    """Per node: its destination under a permutation pattern (maybe itself)."""
    dims, coords = np.array(topology.dims), topology.coords
    if traffic == "transpose":
        if tuple(dims) != tuple(dims[::-1]):
            raise ValueError(f"transpose traffic reverses coordinates, so the shape must read "
                             f"the same both ways, not {topology.shape}")
        target = coords[:, ::-1]
    elif traffic == "bitcomp":
        target = dims - 1 - coords
    elif traffic == "tornado":
        target = (coords + (dims + 1) // 2 - 1) % dims
    else:                                   # neighbor
        target = (coords + 1) % dims
    return np.ravel_multi_index(tuple(target.T), tuple(dims))


def _seeds(seed, n):
    """A 32-bit seed per node, mixed from the run's seed (never 0)."""
    out = []
    for c in range(n):
        s = (seed ^ (0x9E37_79B9 * (c + 1))) & 0xFFFF_FFFF or 1
        for _ in range(3):
            s = xorshift32(s)
        out.append(s)
    return out


def _hops(topology, tables):
    """[n, n] hop counts of every routed pair (0 elsewhere)."""
    n = topology.n_chips
    live = np.flatnonzero(topology.alive)
    src, dst = (a.ravel() for a in np.meshgrid(live, live, indexing="ij"))
    keep = (src != dst) & (tables.port[src, dst] >= 0)
    src, dst = src[keep], dst[keep]
    hops = np.zeros((n, n), dtype=np.int64)
    for pair, *_ in walk(topology, tables, src, dst):
        hops[src[pair], dst[pair]] += 1
    if hops.max(initial=0) >= 1 << HOP_BITS:
        raise ValueError(f"a route of {hops.max()} hops does not fit the sink's counter")
    return hops


def _node_settings(topology, traffic, seed):
    """(mode, per-node dst, per-node sends): what each generator does."""
    n, alive = topology.n_chips, topology.alive
    rng = np.random.default_rng(seed)
    if traffic in ("uniform", "all_to_all"):
        sends = alive & (alive.sum() >= 2)
        dst = np.zeros(n, dtype=np.int64)
        if traffic == "all_to_all":
            for c in np.flatnonzero(sends):
                others = np.flatnonzero(alive & (np.arange(n) != c))
                dst[c] = rng.choice(others)
        return MODES[traffic], dst, sends
    dst = _destinations(topology, traffic)
    sends = alive & alive[dst] & (dst != np.arange(n))
    return MODES["fixed"], np.where(sends, dst, 0), sends


def _ocs_beats(topology, dims):
    """The ``ocs`` stream: each axis's map (every port, lit or dark) then a commit."""
    layout, faces = ocs_layout(dims), face_ports(dims)
    index = {}
    for a, ports in enumerate(faces):
        for i, (c, p) in enumerate(ports):
            index[c * topology.n_ports + p] = (a, i)
    beats = []
    for a, ports in enumerate(faces):
        if not ports:
            continue
        for i, (c, p) in enumerate(ports):
            target = int(topology.ocs[c * topology.n_ports + p])
            if target >= 0:
                b, j = index.get(target, (None, None))
                if b != a:
                    far = topology.describe(*divmod(target, topology.n_ports))
                    raise ValueError(f"the network top cannot realize {topology!r}: "
                                     f"{topology.describe(c, p)} is on a face, so it goes "
                                     f"through the OCS, but its link leads to {far}, which "
                                     f"is not on the opposite face")
            beat = {"commit": 0, "port": i, "lit": int(target >= 0),
                    "target": j if target >= 0 else 0}
            beats.append(layout.const({"axis": a, "beat": beat}).as_value().value)
        beats.append(layout.const({"axis": a, "beat": {"commit": 1}}).as_value().value)
    return beats


def _lit(topology, dims):
    """Per node, the lit bits of its wired (inside the torus) ports; raises if a link of
    the topology differs from the wiring."""
    lit = np.zeros((topology.n_chips, topology.n_ports), dtype=bool)
    for c in range(topology.n_chips):
        for p in range(topology.n_ports):
            q = wired_neighbor(dims, c, p)
            if q is None:
                continue
            target = int(topology.ocs[c * topology.n_ports + p])
            if target >= 0 and target != q * topology.n_ports + (p ^ 1):
                raise ValueError(f"the network top cannot realize {topology!r}: "
                                 f"{topology.describe(c, p)} is wired to "
                                 f"{topology.describe(q, p ^ 1)}, not to "
                                 f"{topology.describe(target // topology.n_ports)}")
            lit[c, p] = target >= 0
    return lit


def _link_down(topology, link_down):
    """``(down, ends, fault_at)`` of ``run_stats``'s ``link_down``: per node the torus ports
    that go down (bool [n_chips, 2D]), the link's two ends ``((chip, port), (chip,
    port))`` (None without a fault) and the cycle they go down (0: never)."""
    down = np.zeros((topology.n_chips, topology.n_ports), dtype=bool)
    if link_down is None:
        return down, None, 0
    if isinstance(link_down, (str, bytes)) or not hasattr(link_down, "__len__") or \
            len(link_down) != 3:
        raise ValueError(f"link_down must be (chip, port, cycle), not {link_down!r}")
    chip = _int("link_down chip", link_down[0], 0, topology.n_chips - 1)
    port = _int("link_down port", link_down[1], 0, topology.n_ports - 1)
    cycle = _int("link_down cycle", link_down[2], 1, (1 << 32) - 1)
    far = int(topology.ocs[chip * topology.n_ports + port])
    if far < 0:
        raise ValueError(f"link_down: {topology.describe(chip, port)} has no link to take "
                         f"down (it is dark in {topology!r})")
    ends = ((chip, port), divmod(far, topology.n_ports))
    for c, p in ends:
        down[c, p] = True
    return down, ends, cycle


def _rows(topology, tables, vcs, dims, settings, seeds, lit, down=None):
    """The ``tables`` stream: row r holds every node's entry for r, hop count from r, and
    node r's settings (``down``: bool [n_chips, 2D], the torus ports a link fault takes
    down; None, the default, for none: ``sim.system``'s chips have no link faults)."""
    n = topology.n_chips
    if down is None:
        down = np.zeros((n, topology.n_ports), dtype=bool)
    adaptive = tables.routing == "adaptive"
    layout = row_layout(n, len(dims), tables.routing)
    entry_of = adaptive_table_entries if adaptive else table_entries
    entries = np.array([entry_of(tables, c, vcs=vcs) for c in range(n)], dtype=object)
    hops = _hops(topology, tables)
    _, dst, sends = settings
    ebits = (adaptive_entry_layout if adaptive else route_entry_layout).size
    node = node_layout(len(dims))
    off_entries, off_hops = layout["entries"].offset, layout["hops"].offset
    off_node = layout["node"].offset
    rows = []
    for r in range(n):
        value = 0
        for c in range(n):
            value |= int(entries[c, r]) << (off_entries + c * ebits)
            value |= int(hops[r, c]) << (off_hops + c * HOP_BITS)
        settings_r = node.const({"dst": int(dst[r]), "sends": int(sends[r]),
                                 "lit": int(sum(1 << p for p in np.flatnonzero(lit[r]))),
                                 "seed": seeds[r],
                                 "down": int(sum(1 << p for p in np.flatnonzero(down[r])))
                                 }).as_value().value
        rows.append(value | settings_r << off_node)
    return rows


def _check_params(traffic, rate, packet_flits, vcs, buffer_flits, link_latency,
                  cycles, warmup, seed, local_ports, message_packets, source_queue, watchdog,
                  corrupt_every, malformed_every):
    if traffic not in TRAFFIC:
        raise ValueError(f"traffic must be one of {', '.join(TRAFFIC)}, not {traffic!r}")
    _int("packet_flits", packet_flits, 1, MAX_PACKET_FLITS)
    _int("local_ports", local_ports, 1, MAX_LOCAL_PORTS)
    _number("rate", rate, 0, local_ports)
    _int("vcs", vcs, 2, MAX_VCS)
    _int("buffer_flits", buffer_flits, 1)
    _int("link_latency", link_latency, 0)
    _int("cycles", cycles, 1, (1 << 32) - 1)
    _int("warmup", warmup, 0, cycles - 1)
    _int("seed", seed, 0, (1 << 32) - 1)
    _int("message_packets", message_packets, 1, (1 << 16) - 1)
    _int("source_queue", source_queue, 1)
    _int("watchdog", watchdog, 1, (1 << 32) - 1)
    _int("corrupt_every", corrupt_every, 0, (1 << 16) - 1)
    _int("malformed_every", malformed_every, 0, (1 << 16) - 1)


def _routing(routing, vcs=None, packet_flits=None, buffer_flits=None):
    """``routing`` checked (``golden.routing.ROUTINGS``), with what "adaptive" needs: VCs
    above the escape ones, and packets that fit a buffer (cut-through)."""
    if check_routing(routing) == "adaptive":
        if vcs is not None and vcs <= ADAPTIVE_ESCAPE_VCS:
            raise ValueError(f"routing='adaptive' needs vcs above {ADAPTIVE_ESCAPE_VCS} (the "
                             f"escape VCs), not vcs={vcs}")
        if packet_flits is not None and packet_flits > buffer_flits:
            raise ValueError(f"routing='adaptive' cuts packets through, so packet_flits "
                             f"({packet_flits}) must fit buffer_flits ({buffer_flits})")
    return routing


def _switching(switching, routing, packet_flits, buffer_flits):
    """``switching`` checked against ``routing``, and cut-through's packets against a
    buffer."""
    if switching is None:
        return
    allowed = ("cut_through",) if routing == "adaptive" else SWITCHINGS
    if switching not in allowed:
        raise ValueError(f"switching must be {' or '.join(map(repr, allowed))} with "
                         f"routing={routing!r}, not {switching!r}")
    if switching == "cut_through" and packet_flits > buffer_flits:
        raise ValueError(f"switching='cut_through' needs packet_flits ({packet_flits}) to "
                         f"fit buffer_flits ({buffer_flits})")


def run_stats(topology, *, traffic="uniform", rate, packet_flits=1, vcs=2, buffer_flits=8,
              link_latency=2, cycles, warmup, seed=0, backend="verilator", local_ports=1,
              message_packets=8, source_queue=64, watchdog=None, corrupt_every=0,
              malformed_every=0, stall=0.0, link_down=None, waves=None, progress=None,
              routing="dor", escape_bias=None, speedup=1, switching=None,
              injection_queues=None):
    """One network run; returns :class:`NetworkStats` (no integrity check: see
    :meth:`NetworkStats.problems`). Parameters as :func:`run`, and the test knobs:

    ``corrupt_every``, ``malformed_every``: every n-th packet of a generator is sent with
    a payload bit flipped, or a malformed header (0: none). ``stall``: the probability,
    0 to 1 in steps of 2**-16, that a torus output of a router is held (sends nothing)
    in a cycle, drawn per output and cycle from the seed (``hdl.system.NetworkNode``);
    0 (the default) never holds, and leaves every figure as it was.

    ``link_down``: ``(chip, port, cycle)`` takes the link out of torus port ``port`` of
    ``chip`` down, both ways, at cycle ``cycle`` (1 or more) of the run and until its
    end (``hdl.ici.Router``'s ``down``): the packet each end is sending on it finishes,
    and every later packet routed over it is given up by the router at that end and
    counted ``undeliverable``, never lost silently. None (the default): no fault.

    ``escape_bias``: with ``routing="adaptive"``, the routers' ``escape_bias``
    (``hdl.ici.Router``: credits the escape hop's port is counted with beyond its own
    when the adaptive choice compares ports), at least 0; None (the default) is the
    router's default, one buffer.

    ``speedup``: the routers' input speed-up (``hdl.ici.Router``), 1 (the default: one
    flit per input a cycle into the switch) to ``vcs`` (a flit per VC).

    ``switching``: the routers' (``hdl.ici.Router``): with "dor", "wormhole" (None, the
    default) or "cut_through" (a header moves only with room for its whole packet, so
    ``packet_flits`` must fit ``buffer_flits``); "adaptive" is always cut-through.

    ``injection_queues``: the routers' (``hdl.ici.Router``): True gives every injection
    port a queue per direction (``min(2*dims, vcs)`` queues, a packet in its first hop's),
    so one blocked direction does not stall the packets behind it for others; None (the
    default) is the routing's own, queues with "adaptive" and one FIFO with "dor".

    Raises
    ------
    ValueError
        On bad parameters, or a topology the network top cannot realize.
    SimulationHang
        When no flit moved for ``watchdog`` cycles while packets were outstanding; the
        message names the phase, the packets outstanding and where flits and packets wait.
    """
    topology = _topology(topology)
    _routing(routing, vcs, packet_flits, buffer_flits)
    if escape_bias is not None:
        if routing != "adaptive":
            raise ValueError(f"escape_bias is for routing='adaptive', not {routing!r}")
        _int("escape_bias", escape_bias, 0)
    if watchdog is None:
        watchdog = 1000 + 20 * (link_latency + packet_flits)
    _check_params(traffic, rate, packet_flits, vcs, buffer_flits, link_latency,
                  cycles, warmup, seed, local_ports, message_packets, source_queue, watchdog,
                  corrupt_every, malformed_every)
    _int("speedup", speedup, 1, vcs)
    _switching(switching, routing, packet_flits, buffer_flits)
    if injection_queues is not None and not isinstance(injection_queues, bool):
        raise ValueError(f"injection_queues must be True, False or None, not "
                         f"{injection_queues!r}")
    _number("stall", stall, 0, 1)
    check_backend(backend)
    params = system_params(topology, vcs=vcs, buffer_flits=buffer_flits,
                           link_latency=link_latency, local_ports=local_ports,
                           source_queue=source_queue, routing=routing,
                           escape_bias=escape_bias, speedup=speedup, switching=switching,
                           injection_queues=injection_queues)
    dims = topology.dims
    lit, ocs = _lit(topology, dims), _ocs_beats(topology, dims)   # realizable?
    down, ends, fault_at = _link_down(topology, link_down)
    settings = _node_settings(topology, traffic, seed)
    mode, _, sends = settings
    if not sends.any():
        raise ValueError(f"no node of {topology!r} sends {traffic} traffic")
    tables = topo.routing_tables(topology, vcs=vcs, routing=routing)
    rows = _rows(topology, tables, vcs, dims, settings, _seeds(seed, topology.n_chips), lit,
                 down)
    threshold = round(rate / (local_ports * packet_flits) * (1 << 16))
    whole = WholeRun(
        BLOCK, params, play={"tables": rows, "ocs": ocs},
        record={"stats": readout_beats(topology.n_chips, routing, injection_queues)},
        until="finished", busy="busy",
        watchdog=CONFIG_WATCHDOG, seed=seed,
        inputs={"alive": int(sum(1 << int(c) for c in np.flatnonzero(topology.alive))),
                "mode": mode, "threshold": threshold, "packet_flits": packet_flits,
                "message_packets": message_packets, "cycles": cycles, "warmup": warmup,
                "watchdog": watchdog, "corrupt_every": corrupt_every,
                "malformed_every": malformed_every, "stall": round(stall * (1 << 16)),
                "fault_at": fault_at})
    result = _simulate(whole, backend=backend, waves=waves, progress=progress)
    return _stats(topology, result, whole, nodes=int(sends.sum()), window=cycles - warmup,
                  packet_flits=packet_flits, watchdog=watchdog, down=ends, routing=routing,
                  injection_queues=injection_queues)


def run(topology, *, traffic="uniform", rate, packet_flits=1, vcs=2, buffer_flits=8,
        link_latency=2, cycles, warmup, seed=0, backend="verilator", local_ports=1,
        message_packets=8, source_queue=64, watchdog=None, waves=None, progress=None,
        routing="dor", escape_bias=None, speedup=1, switching=None, injection_queues=None):
    """Run ``traffic`` at ``rate`` on ``topology`` and measure it (module docstring).

    Parameters
    ----------
    topology : golden.topology.Topology, or a shape such as ``"4x4"`` (a regular torus)
    traffic : str
        ``TRAFFIC``.
    rate : float
        Offered flits per node per cycle, 0 to ``local_ports``.
    packet_flits : int
        Flits per packet (2 words each), 1 to 256.
    vcs, buffer_flits, link_latency : int
        Of every router and link.
    cycles, warmup : int
        Cycles of traffic; the first ``warmup`` are not measured.
    seed : int
        Every random choice: creation, destinations, all-to-all start points.
    backend : "verilator" (default), "amaranth" or "icarus"
        All give identical results.
    local_ports : int
        Injection and ejection ports per node (1 or 2).
    message_packets : int
        Packets per all-to-all message.
    source_queue : int
        Packets each generator can queue (created beyond that are not sent).
    watchdog : int, optional
        Cycles without any flit moving, while packets are outstanding, after which the run
        is hung (default ``1000 + 20 * (link_latency + packet_flits)``).
    waves : path, optional
        Write a VCD of the run (Verilator builds a traced model once).
    progress : callable, optional
        ``progress(cycle, status)`` while the simulation runs.
    routing : "dor" (default) or "adaptive"
        ``"dor"``: dimension order with dateline VC classes (``golden.routing``).
        ``"adaptive"`` (SPEC 4.4): minimal adaptive routing over escape VCs with
        cut-through and per-direction injection queues (``hdl.ici.Router``); needs
        ``vcs`` of 3 or more and ``packet_flits <= buffer_flits``. Packets of a flow may
        then arrive out of order: the sinks check each flow's packets as a set (every
        one exactly once), not their order. ``hops_mean`` counts the escape routes' hops
        (minimal on tori and meshes, so the hops every packet takes).
    escape_bias : int, optional
        With ``routing="adaptive"``: as :func:`run_stats`.
    speedup : int
        The routers' input speed-up, 1 (default) to ``vcs``: as :func:`run_stats`.
    switching : "wormhole" or "cut_through", optional
        With "dor": as :func:`run_stats`.
    injection_queues : bool, optional
        A queue per direction at each injection port: as :func:`run_stats`.

    Returns
    -------
    NetworkRun

    Raises
    ------
    ValueError, SimulationHang
        As :func:`run_stats`.
    NetworkIntegrityError
        When any packet was lost, duplicated, misrouted or corrupted.
    """
    stats = run_stats(topology, traffic=traffic, rate=rate, packet_flits=packet_flits, vcs=vcs,
                      buffer_flits=buffer_flits, link_latency=link_latency, cycles=cycles,
                      warmup=warmup, seed=seed, backend=backend, local_ports=local_ports,
                      message_packets=message_packets, source_queue=source_queue,
                      watchdog=watchdog, waves=waves, progress=progress, routing=routing,
                      escape_bias=escape_bias, speedup=speedup, switching=switching,
                      injection_queues=injection_queues)
    problems = stats.problems()
    if problems:
        raise NetworkIntegrityError(f"{traffic} traffic at rate {rate} on "
                                    f"{_topology(topology)!r}: " + "; ".join(problems))
    return stats.run


def sweep(topology, *, rates=None, stop_at_saturation=True, progress=None, **kwargs):
    """A latency-load curve: :func:`run` at each of ``rates`` (default 0.1, 0.2, ... up to
    ``local_ports``), in order.

    ``stop_at_saturation`` ends the curve after the first point whose accepted load falls
    below 90% of its offered load (past saturation latency only measures the source
    queues). ``progress(index, total, run)`` is called after each point; the other
    parameters are :func:`run`'s.

    Returns
    -------
    list of NetworkRun
    """
    if rates is None:
        top = kwargs.get("local_ports", 1)
        rates = [round(0.1 * k, 10) for k in range(1, 10 * top + 1)]
    rates = list(rates)
    if not rates:
        raise ValueError("rates must name at least one rate")
    _routing(kwargs.get("routing", "dor"), kwargs.get("vcs", 2),
             kwargs.get("packet_flits", 1), kwargs.get("buffer_flits", 8))
    curve = []
    for index, rate in enumerate(rates):
        point = run(topology, rate=rate, **kwargs)
        curve.append(point)
        if progress is not None:
            progress(index + 1, len(rates), point)
        if stop_at_saturation and point.accepted < 0.9 * point.offered:
            break
    return curve


def _stats(topology, result, whole, *, nodes, window, packet_flits, watchdog, down=None,
           routing="dor", injection_queues=None):
    outputs = result.outputs
    words = np.array(result.recorded["stats"], dtype=np.int64)
    n = topology.n_chips
    names = node_stats(routing, injection_queues)
    table = words[:n * len(names)].reshape(n, len(names))
    per_node = {name: table[:, i] for i, name in enumerate(names)}
    histogram = np.zeros(BUCKETS, dtype=np.int64)
    bins = latency_bucket(int(per_node["latency_max"].max())) + 1
    if len(words) != n * len(names) + bins:
        raise NetworkIntegrityError(f"network {topology.shape}: the read-out gave {len(words)} "
                                    f"words, not {n * len(names) + bins}")
    histogram[:bins] = words[n * len(names):]
    per_node["latency"] = per_node["latency_lo"] + (per_node["latency_hi"] << 32)
    if outputs["config_error"]:
        status = outputs["ocs_status"]
        raise SimulationHang(f"network {topology.shape}: the OCS of axis "
                             f"{'xyz'[status & 3]} refused its map "
                             f"({STATUSES[status >> 2 & 7]} at OCS port {status >> 5}) "
                             f"before the run started")
    if outputs["hung"]:
        raise SimulationHang(_hang_message(topology, outputs, per_node, watchdog))
    t = {name: int(per_node[name].sum()) for name in per_node}
    packets = t["packets_window"]
    ports = topology.n_ports
    links = np.stack([per_node[f"link{p}"] for p in range(ports)], axis=1) / window
    net = NetworkRun(
        offered=t["created_window"] * packet_flits / (nodes * window),
        accepted=t["flits_window"] / (nodes * window),
        latency_mean=t["latency"] / packets if packets else math.nan,
        latency_p99=percentile(histogram, 0.99),
        hops_mean=t["hops_window"] / packets if packets else math.nan,
        link_utilization=links)
    return NetworkStats(net, per_node, histogram, nodes, window, result.cycles,
                        outputs["drain_cycles"], result.seconds, dict(whole.params), down)


def _hang_message(topology, outputs, per_node, watchdog):
    phase = PHASES[outputs["hang_phase"]]
    held = {int(c): int(per_node["held"][c]) for c in np.flatnonzero(per_node["held"])}
    queued = {int(c): int(per_node["queued"][c]) for c in np.flatnonzero(per_node["queued"])}

    def listing(found, what):
        items = sorted(found.items(), key=lambda kv: -kv[1])[:8]
        more = f" and {len(found) - 8} more" if len(found) > 8 else ""
        return f"{what} at " + ", ".join(f"{topology.describe(c)} ({k})" for c, k in items) \
            + more if found else f"no {what}"
    return (f"network {topology.shape} hung in the {phase} phase after "
            f"{outputs['run_cycles'] + outputs['drain_cycles']} cycles: no flit moved for "
            f"{watchdog} cycles while {outputs['outstanding']} packets were outstanding; "
            f"{listing(held, 'flits held in routers')}; "
            f"{listing(queued, 'packets waiting in source queues')}")


# --- Simulation: Amaranth directly; Verilator and Icarus through a compiled harness whose
# Verilog holds the node module once (sim.verilog.export flattens a block, which for 256 routers
# would be 80 MB of Verilog), cached like every other build.

NODE_MODULE = "network_node"
#: From this many nodes on, Verilator builds the node as a hierarchical block (one library
#: every node calls) instead of scheduling each node's logic as C++ of its own. The build
#: then stays small (a 4x8x8's flat C++ did not compile in an hour). Every call crosses the
#: block's ports, and the top evaluates the nodes again while their outputs change, so a
#: 4x4 runs about 4x slower this way, while a 4x4x8 runs faster (350 against 218 cycles/s,
#: its flat model's size costing more); docs/network.md, "Simulation speed".
HIERARCHICAL_NODES = 128


class _NetworkOfInstances(NetworkSystem):
    def make_node(self, chip):
        return BlackBox(NODE_MODULE, node_signature(**_signature_params(self.node_params)))


def _signature_params(params):
    return {k: params[k] for k in ("dims", "vcs", "n_nodes", "local_ports", "routing")
            if k in params}


def _simulate(whole, *, backend, waves, progress, threads=None):
    """``whole`` on ``backend``; ``threads`` of a Verilator model as in
    :func:`sim.toolchain.model_threads` (``$TPU_RTL_THREADS`` by default)."""
    check_tracing(backend, waves)
    # The routers' own knobs change no port of the top.
    ports = {k: v for k, v in whole.params.items()
             if k not in ("escape_bias", "speedup", "switching", "injection_queues")}
    check_run(whole, network_system_signature(**ports), {})
    if backend == "amaranth":
        from .backends.amaranth_sim import simulate_whole
        return simulate_whole(whole, NetworkSystem, waves=waves, progress=progress)
    return _simulate_compiled(whole, simulator=backend, waves=waves, progress=progress,
                              threads=threads)


def _export(params):
    """Verilog of the network top with the node module emitted once, its signature, and
    the repeated module."""
    from hdl.testbench.node import NetworkNode
    top = _NetworkOfInstances(**params)
    text = emit([(NODE_MODULE, NetworkNode(**top.node_params)), (BLOCK, top)],
                header=f"// Generated by tpu-rtl (sim/network.py): network top {params}\n\n")
    return text, top.signature, [NODE_MODULE]


def _compiled_build(whole, *, simulator, waves, threads=None):
    from .backends import compiled
    # What shapes the build: the hdl sources (in the digest) and the code here that turns
    # them into Verilog, not this module's other text.
    makers = "".join(inspect.getsource(f) for f in (_NetworkOfInstances, _signature_params,
                                                     _export))
    return compiled.build_top(whole, simulator=simulator,
                              design=lambda: _export(whole.params), key=[makers], waves=waves,
                              threads=threads, what="the network harness",
                              hierarchical=[NODE_MODULE] if _hierarchical(whole.params) else [])


def _hierarchical(params):
    """Whether Verilator builds the node as a hierarchical block: for networks of
    ``HIERARCHICAL_NODES`` nodes or more (see :data:`HIERARCHICAL_NODES`)."""
    return math.prod(parse_dims(params["dims"])) >= HIERARCHICAL_NODES


def _simulate_compiled(whole, *, simulator, waves, progress, threads=None):
    """``sim.backends.compiled.simulate_whole`` on the build of :func:`_compiled_build`."""
    from .backends import compiled
    folder = _compiled_build(whole, simulator=simulator, waves=wave_format(waves),
                             threads=threads)
    return compiled.run_built(folder, whole, {}, simulator=simulator, waves=waves,
                              progress=progress)
