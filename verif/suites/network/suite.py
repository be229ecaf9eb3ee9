"""Regression suite ``network``: random ICI networks under random traffic and link stalls,
whole runs, and the OCS switched under traffic.

A seed has two cases:

* ``network``: one random build (:func:`.stimulus.build`: 2-D or 3-D shape, dimension-order
  routing with 2 or 4 VCs (wormhole with one injection FIFO, or with injection queues,
  wormhole or cut-through) or adaptive routing (cut-through, injection queues) with 3, 4
  or 8, 1 to 8 buffer flits per VC, links of 0 to 3 cycles) and
  :data:`.stimulus.RUNS` whole
  runs on it (:func:`.stimulus.runs`: regular, twisted, mesh and failed-chip topologies;
  every traffic pattern; random packet lengths, loads and link stalls), each through
  ``sim.network.run_stats``. After the traffic stops the run drains, and each run is
  checked (:func:`check_stats`): every packet created and not lost to a full source
  queue was injected, and every packet injected was ejected exactly once, at its
  destination, in sequence and intact (the sinks check source, sequence and every
  payload word; with adaptive routing, which may reorder a flow, each flow as a set); no
  router dropped a packet, none broke the credit protocol, and nothing
  is left in a router or a source queue; the link stall knob held links exactly when it
  was asked to; with dimension-order routing, in a regular torus or a mesh every switch
  turn taken is one of dimension order; with adaptive routing, no packet turned back
  (in to and out of the same port: never on a minimal route) outside a failed-chip
  torus. In the run that takes a link down mid-run, the packets given
  up as undeliverable are exactly those injected and not delivered, all at the link's
  two ends (``NetworkStats.problems``), and none are given up in any other run. The forward-progress watchdog firing
  (``SimulationHang``) is a failure of the run, with its message.
* ``ocs``: :func:`.ocs.run_case`, the OCS reconfigured under traffic (drained, or
  refused, never losing a flit), and refusing bad maps.

Functional coverage (:mod:`.coverage`) is read from what the routers observed and the
OCS reported. With ``inject="golden-fault"`` the first run sends every fifth packet
with a payload bit flipped while the check still expects none, so the seed must fail.
"""

from cocotb_coverage.coverage import coverage_db

from sim import network as sim_network
from sim.transactors import SimulationHang

from ..case import WholeCase
from . import ocs as ocs_case
from .coverage import TURNS, Sampler, turn_name
from .stimulus import build, runs as plan_runs, topology_of

__all__ = ["INJECT_CORRUPT_EVERY", "check_stats", "check_network", "check_ocs", "runs"]

#: ``corrupt_every`` of the first run under ``inject="golden-fault"``.
INJECT_CORRUPT_EVERY = 5
#: Counters the stimulus never asks for: each must read 0.
ZERO = ("corrupted", "malformed", "payload_errors", "dropped", "held", "queued")


def check_stats(stats, run, topology, routing="dor"):
    """The problems of one run on a build of ``routing`` (a list of one-line reasons, empty
    if it passed)."""
    found = list(stats.problems())
    t = stats.total
    for name in ZERO:
        if t(name):
            found.append(f"{name} is {t(name)}, expected 0")
    if t("received") == 0:
        found.append("no packet was delivered")
    stalled = t("stalled")
    if (stalled > 0) != (run.stall > 0):
        found.append(f"the stall knob at {run.stall} held links for {stalled} port-cycles")
    dead = [int(c) for c in range(topology.n_chips) if not topology.alive[c]]
    for c in dead:
        for name in ("created", "received", "turns_lo", "turns_hi"):
            if stats.per_node[name][c]:
                found.append(f"failed chip {c} has {name} {int(stats.per_node[name][c])}")
    n_ports = topology.n_ports
    for c in range(topology.n_chips):
        turns = int(stats.per_node["turns_lo"][c]) | int(stats.per_node["turns_hi"][c]) << 32
        taken = [turn_name(b // 8, b % 8, n_ports) for b in range(64) if turns >> b & 1]
        if routing == "dor" and run.kind in ("regular", "mesh"):
            odd = [name for name in taken if name not in TURNS]
            if odd:
                found.append(f"chip {c} routed turns outside dimension order: {odd}")
        if routing == "adaptive" and run.kind != "failed":
            back = [turn_name(b // 8, b % 8, n_ports) for b in range(64) if turns >> b & 1
                    and b // 8 == b % 8 and b // 8 < n_ports]
            if back:
                found.append(f"chip {c} turned packets back: {back}")
    return found


def _label(seed, b, run):
    return f"network seed {seed} ({_build_label(b)}): {run.describe()}"


def _build_label(b):
    speedup = f", speed-up {b.speedup}" if b.speedup > 1 else ""
    return (f"{b.shape}, {b.flow_control}, {b.vcs} VCs{speedup}, {b.buffer_flits} buffer "
            f"flits, {b.link_latency}-cycle links")


def check_network(seed, *, backend, coverage=None, waves=None, inject=None):
    """Every run of ``seed``'s ``network`` case; returns the case record."""
    b = build(seed, backend)
    if coverage is not None:
        coverage_db.clear()
        sampler = Sampler()
    checked = mismatches = cycles = packets = undeliverable = 0
    first = None
    for index, run in enumerate(plan_runs(seed, b, backend)):
        topology = topology_of(b, run)
        settings = run.settings()
        if inject == "golden-fault" and index == 0:
            settings["corrupt_every"] = INJECT_CORRUPT_EVERY
        try:
            stats = sim_network.run_stats(topology, vcs=b.vcs, buffer_flits=b.buffer_flits,
                                          link_latency=b.link_latency, backend=backend,
                                          waves=waves, routing=b.routing,
                                          speedup=b.speedup, switching=b.switching,
                                          injection_queues=b.injection_queues, **settings)
        except SimulationHang as error:
            problems, stats = [f"the watchdog fired: {error}"], None
        else:
            problems = check_stats(stats, run, topology, b.routing)
        checked += 1
        if problems:
            mismatches += 1
            first = first or f"{_label(seed, b, run)}: {'; '.join(problems)}"
        if stats is None:
            continue
        cycles += stats.cycles
        packets += stats.total("received")
        undeliverable += stats.total("undeliverable")
        if coverage is not None:
            alive = [int(c) for c in range(topology.n_chips) if topology.alive[c]]
            sampler.observed(stats.per_node, topology.n_ports, alive, b.routing)
            sampler.stall("held" if stats.total("stalled") else "none")
            if run.link_down is None or stats.total("undeliverable"):
                sampler.link_down("up" if run.link_down is None else "given_up")
            if run.link_down is not None and stats.total("undeliverable"):
                sampler.routing_link_down(f"{b.routing} given_up")
            sampler.topology(run.kind)
            sampler.dims(len(b.dims))
            sampler.traffic(run.traffic)
            sampler.vcs(b.vcs)
            sampler.speedup(b.speedup)
            sampler.flow_control(b.flow_control)
            sampler.routing_vcs(f"{b.routing} {b.vcs}")
            sampler.routing_topology(f"{b.routing} {run.kind}")
    if coverage is not None:
        coverage_db.export_to_xml(str(coverage))
    return {"case": "network", "checked": checked, "mismatches": mismatches,
            "first_mismatch": first, "cycles": cycles, "packets": packets,
            "undeliverable": undeliverable,
            "build": _build_label(b)}


def check_ocs(seed, *, coverage=None):
    """``seed``'s OCS case (:func:`.ocs.run_case`, on the Amaranth simulator whatever the
    regression's); returns its record."""
    if coverage is not None:
        coverage_db.clear()
        sampler = Sampler()
        points = {"commit": sampler.ocs_commit, "drain": sampler.ocs_drain}

        def sample(item, value):
            points[item](value)
    record = ocs_case.run_case(seed, sample=sample if coverage is not None else None)
    if coverage is not None:
        coverage_db.export_to_xml(str(coverage))
    return record


def runs(seed, *, inject=None):
    """The two whole-run cases of a seed: ``network`` and ``ocs``."""
    def network(*, backend, coverage=None, waves=None):
        return check_network(seed, backend=backend, coverage=coverage, waves=waves,
                             inject=inject)

    def ocs(*, backend, coverage=None, waves=None):
        return check_ocs(seed, coverage=coverage)
    yield WholeCase("network", network)
    yield WholeCase("ocs", ocs)

#: The broken golden model ``--inject`` can switch on in this suite.
GOLDEN_INJECTION = "golden-fault"
