# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct components whose __init__ raises.)
"""Whole networks (``hdl.system.NetworkSystem`` through ``sim.network``): small regular,
ring, failed-chip and twisted topologies deliver every packet exactly once, intact (the
sinks' checks and the counts of every node); Amaranth, Verilator and Icarus agree on every
statistic, cycle for cycle; one build serves a shape's regular, twisted and failed-chip
topologies; a build with the node as a hierarchical block runs as the flat one; isolated
packets take exactly the latency their hop count gives; the test knobs' corrupted and
malformed packets are counted where they should be; a network that cannot make progress is
reported by the watchdog, naming what waits; bad parameters get a one-line error.

The default suite builds one shape (2x4) on Verilator; the comparisons of backends, the other
shapes' builds, the hierarchical build and the longer runs are marked slow
(``pytest -m slow``)."""

import math

import numpy as np
import pytest

from golden import topology as topo
from hdl.testbench import NetworkSystem
from sim import network
from sim.transactors import SimulationHang

SHAPES = {
    "2x2": lambda: topo.torus("2x2"),
    "4-ring": lambda: topo.torus((4, 1)),
    "3x3-failed": lambda: topo.torus("3x3", failed=[4]),
    "2x4-twisted": lambda: topo.torus("2x4", twist=True),
}


def short_run(topology, *, backend, seed, **kwargs):
    settings = dict(traffic="uniform", rate=0.4, packet_flits=2, cycles=160, warmup=40,
                    seed=seed, backend=backend) | kwargs
    return network.run_stats(topology, **settings)


def check_delivery(stats, topology):
    """Exactly once and intact, by the nodes' own counts; nothing left anywhere."""
    assert stats.problems() == []
    t = stats.total
    assert t("received") == t("injected") > 0
    assert t("header_errors") == t("sequence_errors") == t("payload_errors") == 0
    assert not stats.per_node["held"].any() and not stats.per_node["queued"].any()
    # Failed chips neither send nor receive, and their links carry nothing.
    dead = ~topology.alive
    assert not stats.per_node["created"][dead].any()
    assert not stats.per_node["received"][dead].any()
    dark = topology.ocs.reshape(topology.n_chips, -1) < 0
    assert not stats.run.link_utilization[dark].any()
    assert stats.run.link_utilization[~dark].any()


def hop_range(topology):
    tables = topo.routing_tables(topology)
    live = np.flatnonzero(topology.alive)
    lengths = [len(topo.route(topology, tables, s, d)) for s in live for d in live if s != d]
    return min(lengths), max(lengths)


@pytest.mark.parametrize("shape", ["2x2", "4-ring",
                                   pytest.param("3x3-failed", marks=pytest.mark.slow)])
def test_small_networks_deliver_everything(shape, seed):
    topology = SHAPES[shape]()
    stats = short_run(topology, backend="amaranth", seed=seed)
    check_delivery(stats, topology)
    lo, hi = hop_range(topology)
    assert lo <= stats.run.hops_mean <= hi
    assert 0.2 < stats.run.offered < 0.6 and stats.run.accepted > 0.2


def compare_backends(topology, seed, **kwargs):
    """The same run on every backend: every node's statistics, the histogram, the run's
    figures and the harness's cycle counts identical to Amaranth's."""
    a = short_run(topology, backend="amaranth", seed=seed, **kwargs)
    check_delivery(a, topology)
    for backend in ("verilator", "icarus"):
        check_same_run(a, short_run(topology, backend=backend, seed=seed, **kwargs), backend)
    return a


def check_same_run(a, b, label):
    """Every node's statistics, the histogram, the run's figures and the harness's cycle
    counts of ``b`` identical to ``a``'s."""
    assert (a.cycles, a.drain_cycles) == (b.cycles, b.drain_cycles), label
    for name in a.per_node:
        np.testing.assert_array_equal(a.per_node[name], b.per_node[name],
                                      err_msg=f"{label}: {name}")
    np.testing.assert_array_equal(a.histogram, b.histogram, err_msg=label)
    for x, y in zip(a.run, b.run):
        np.testing.assert_array_equal(x, y, err_msg=label)


@pytest.mark.slow
def test_backends_agree_on_a_twisted_torus(seed):
    topology = SHAPES["2x4-twisted"]()
    lo, hi = hop_range(topology)
    stats = compare_backends(topology, seed)
    assert lo <= stats.run.hops_mean <= hi


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["2x2", "4-ring", "3x3-failed"])
def test_backends_agree(shape, seed):
    compare_backends(SHAPES[shape](), seed, traffic="all_to_all", message_packets=3)


@pytest.fixture
def build_folders(monkeypatch):
    """The folders of the Verilator builds the test's runs use, in order."""
    folders = []
    build = network._compiled_build

    def spy(*args, **kwargs):
        folders.append(build(*args, **kwargs))
        return folders[-1]
    monkeypatch.setattr(network, "_compiled_build", spy)
    return folders


@pytest.mark.long
def test_one_build_serves_every_topology_of_a_shape(build_folders, seed):
    """The regular, twisted and failed-chip 2x4 tori run on one Verilator build (only the
    streamed-in OCS maps and tables differ); each delivers everything, and the twist
    shortens the long axis' paths: fewer hops on average for the same traffic."""
    shapes = {"regular": topo.torus("2x4"), "twisted": topo.torus("2x4", twist=True),
              "failed": topo.torus("2x4", failed=[5])}
    runs = {name: short_run(t, backend="verilator", seed=seed, traffic="all_to_all", rate=0.5)
            for name, t in shapes.items()}
    assert len(build_folders) == 3 and len(set(build_folders)) == 1
    for name, stats in runs.items():
        check_delivery(stats, shapes[name])
    assert runs["twisted"].run.hops_mean < runs["regular"].run.hops_mean


@pytest.mark.slow
def test_a_hierarchical_build_runs_as_the_flat_one(build_folders, monkeypatch, seed):
    """The node verilated as a hierarchical block, as networks of
    ``network.HIERARCHICAL_NODES`` nodes and more are: a 2x2's run is the flat build's,
    statistic for statistic and cycle for cycle."""
    topology = SHAPES["2x2"]()
    flat = short_run(topology, backend="verilator", seed=seed, traffic="all_to_all")
    check_delivery(flat, topology)
    monkeypatch.setattr(network, "HIERARCHICAL_NODES", 4)
    check_same_run(flat, short_run(topology, backend="verilator", seed=seed,
                                   traffic="all_to_all"), "hierarchical")
    configs = [(folder / "config.vlt").read_text() for folder in build_folders]
    assert 'hier_block -module "network_node"' not in configs[0]
    assert 'hier_block -module "network_node"' in configs[1]


@pytest.mark.parametrize("link_latency", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_isolated_packets_take_their_hop_latency(link_latency, seed):
    """Neighbour traffic on a ring, one flit per packet, seldom: every packet goes one hop
    alone, so its latency from creation to ejection is exactly 2 + (1 + link_latency)
    (queue read, injection, one router, the link, the last router)."""
    topology = SHAPES["4-ring"]()
    stats = short_run(topology, backend="amaranth", seed=seed, traffic="neighbor",
                      rate=0.05, packet_flits=1, cycles=300, warmup=0,
                      link_latency=link_latency)
    check_delivery(stats, topology)
    want = 2 + (1 + link_latency)
    assert stats.run.hops_mean == 1
    assert stats.run.latency_mean == stats.run.latency_p99 == want
    assert stats.per_node["latency_max"].max() == want
    # Each node receives exactly what its left neighbour sent.
    np.testing.assert_array_equal(stats.per_node["received"],
                                  np.roll(stats.per_node["injected"], 1))


def test_test_knobs_are_counted(seed):
    """Every 3rd packet corrupted: each one a payload error at its sink; every 4th packet
    malformed: each dropped by its first router and never ejected."""
    topology = SHAPES["2x2"]()
    stats = short_run(topology, backend="amaranth", seed=seed, corrupt_every=3,
                      malformed_every=4)
    t = stats.total
    assert stats.problems() == []
    assert t("payload_errors") == t("corrupted") > 0
    assert t("dropped") == t("malformed") > 0
    assert t("received") == t("injected") - t("malformed")
    assert t("header_errors") == t("sequence_errors") == 0


def test_two_local_ports(seed):
    """Two injection and ejection ports per node carry more than one flit per node and
    cycle, still exactly once and in order per lane."""
    topology = SHAPES["2x2"]()
    stats = short_run(topology, backend="amaranth", seed=seed, rate=1.6, local_ports=2,
                      packet_flits=1, cycles=80, warmup=20)
    check_delivery(stats, topology)
    assert stats.run.accepted > 1.1


def test_watchdog_names_what_waits(monkeypatch, seed):
    """A ring whose wired links are dark, though its tables use them: flits sent into them
    never arrive nor return credits, the routers run out, and the watchdog reports the
    phase, the packets outstanding, and the chips where flits and packets wait."""
    topology = SHAPES["4-ring"]()
    monkeypatch.setattr(network, "_lit", lambda t, dims: np.zeros((4, 4), dtype=bool))
    with pytest.raises(SimulationHang, match=r"network 4x1 hung in the (run|drain) phase "
                       r"after \d+ cycles: no flit moved for 60 cycles while \d+ packets were "
                       r"outstanding; flits held in routers at chip \d .*packets waiting in "
                       r"source queues at chip"):
        short_run(topology, backend="amaranth", seed=seed, rate=0.5, watchdog=60)


def test_sweep_gives_a_curve(seed):
    curve = network.sweep(SHAPES["2x4-twisted"](), rates=[0.1, 0.3, 0.5], cycles=300,
                          warmup=100, seed=seed, stop_at_saturation=False,
                          backend="verilator")
    assert len(curve) == 3
    offered = [p.offered for p in curve]
    assert offered == sorted(offered) and all(math.isfinite(p.latency_mean) for p in curve)
    with pytest.raises(ValueError, match="rates must name at least one rate"):
        network.sweep("2x2", rates=[], cycles=10, warmup=0)


def crossed_ring():
    """A 3x3 torus whose +x link from chip 0 goes to chip 6 instead of chip 3: a legal OCS
    map, but not one the network top's wiring can realize."""
    base = topo.torus("3x3")
    ocs = base.ocs.copy()
    ocs[[0, 25, 12, 13]] = [25, 0, 13, 12]
    return topo.Topology(base.dims, True, False, (), base.shift, ocs)


@pytest.mark.parametrize("kwargs, message", [
    (dict(traffic="zipf"), "traffic must be one of uniform, transpose"),
    (dict(rate=1.5), "rate must be a number from 0 to 1, not 1.5"),
    (dict(rate=2.5, local_ports=2), "rate must be a number from 0 to 2"),
    (dict(warmup=100), "warmup must be a number from 0 to 99"),
    (dict(packet_flits=0), "packet_flits must be a number from 1 to 256"),
    (dict(cycles=1.5), "cycles must be an int"),
    (dict(vcs=1), "vcs must be a number from 2 to 8"),
    (dict(vcs=2, speedup=3), "speedup must be a number from 1 to 2, not 3"),
    (dict(switching="store"), "switching must be 'wormhole' or 'cut_through' with "
                              "routing='dor', not 'store'"),
    (dict(switching="cut_through", packet_flits=9),
     r"switching='cut_through' needs packet_flits \(9\) to fit buffer_flits \(8\)"),
    (dict(routing="adaptive", vcs=3, switching="wormhole"),
     "switching must be 'cut_through' with routing='adaptive'"),
    (dict(injection_queues="yes"), "injection_queues must be True, False or None, not 'yes'"),
    (dict(injection_queues=1), "injection_queues must be True, False or None, not 1"),
    (dict(backend="modelsim"), "backend must be one of"),
    (dict(topology="2x4", traffic="transpose"), "transpose traffic reverses coordinates"),
    (dict(topology=42), "topology must be a golden.topology.Topology"),
    (dict(topology=crossed_ring()), "cannot realize .*chip 0 \\(0, 0\\) \\+x is wired to "
                                    "chip 3 \\(1, 0\\) -x, not to chip 6"),
])
def test_bad_parameters(kwargs, message):
    settings = dict(topology="2x2", rate=0.5, cycles=100, warmup=10) | kwargs
    with pytest.raises(ValueError, match=message):
        network.run(settings.pop("topology"), **settings)


@pytest.mark.parametrize("params, message", [
    (dict(dims="4x"), "dims must look like '4x4x8'"),
    (dict(dims=(1, 1)), r"a topology needs at least 2 chips, not \(1, 1\)"),
    (dict(dims="16x32"), "a network has 2 to 256 nodes, not 512"),
    (dict(vcs=9), "vcs must be at most 8"),
    (dict(local_ports=3), "local_ports must be at most 2"),
])
def test_system_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        NetworkSystem(**params)
