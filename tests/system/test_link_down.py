"""A link taken down mid-run (issue 12's OCS faults): the routers at its two ends finish
the packet each is sending on it, then give up every packet routed over it, counted as
``undeliverable``; nothing is lost silently and nothing else changes.

The expected counts come from ``golden.routing.walk`` over the topology's tables, never
from the RTL: under a permutation pattern each destination hears from one source, so a
source whose route avoids the link must have every packet it injected delivered, and the
packets missing from the sources whose route crosses it must add up to exactly what the
two routers counted."""

import numpy as np
import pytest

from golden import topology as topo
from golden.routing import walk
from sim import network

DOWN_AT = 60


def crossing_sources(topology, traffic, ends):
    """(dst per source, whether the source's route takes either direction of the link)."""
    tables = topo.routing_tables(topology, vcs=2)
    dst = network._destinations(topology, traffic)
    src = np.arange(topology.n_chips)
    crosses = np.zeros(topology.n_chips, dtype=bool)
    for pair, chip, port, _ in walk(topology, tables, src, dst):
        for c, p in ends:
            crosses[pair[(chip == c) & (port == p)]] = True
    return dst, crosses


# Both on the one 2x4 Verilator build the network tests share (regular and twisted tori
# differ only in what is streamed in).
@pytest.mark.parametrize("shape, link", [
    ("2x4", (1, 2)),                # a wired link inside the torus
    ("2x4-twisted", (1, 1)),        # a twisted wrap link, through the OCS
])
def test_a_link_taken_down_mid_run_gives_up_exactly_its_routes(shape, link, seed):
    topology = topo.torus("2x4", twist=shape.endswith("twisted"))
    stats = network.run_stats(topology, traffic="neighbor", rate=0.5, packet_flits=3,
                              cycles=240, warmup=20, seed=seed, backend="verilator",
                              link_down=(*link, DOWN_AT))
    far = divmod(int(topology.ocs[link[0] * topology.n_ports + link[1]]), topology.n_ports)
    assert stats.down == (link, far)
    dst, crosses = crossing_sources(topology, "neighbor", stats.down)
    assert crosses.any() and not crosses.all(), "the case must cut some routes and not others"

    per = stats.per_node
    received = per["received"][dst]            # per source: what its destination got
    injected = per["injected"]
    np.testing.assert_array_equal(received[~crosses], injected[~crosses],
                                  f"seed {seed}: routes that avoid the link lost packets")
    # Packets of the cut routes got through before the fault, and not all after it.
    assert (received[crosses] > 0).all(), f"seed {seed}: nothing crossed before the fault"
    missing = int((injected - received)[crosses].sum())
    assert missing > 0
    assert stats.total("undeliverable") == missing, f"seed {seed}"
    given_up = np.flatnonzero(per["undeliverable"])
    assert set(given_up.tolist()) <= {link[0], far[0]}, f"seed {seed}: {given_up}"

    assert stats.problems() == []
    for name in ("header_errors", "sequence_errors", "payload_errors", "dropped", "held",
                 "queued"):
        assert stats.total(name) == 0, f"seed {seed}: {name}"


def test_without_a_fault_nothing_is_undeliverable(seed):
    stats = network.run_stats("2x4", traffic="neighbor", rate=0.5, packet_flits=3,
                              cycles=120, warmup=20, seed=seed, backend="verilator")
    assert stats.down is None and stats.total("undeliverable") == 0
    assert stats.total("received") == stats.total("injected") > 0


def test_problems_name_packets_given_up_with_no_link_down(seed):
    """The integrity check cannot be satisfied by a router giving packets up: without a
    fault at its chip, an undeliverable count is a problem, and so is a shortfall."""
    stats = network.run_stats("2x4", traffic="neighbor", rate=0.5, packet_flits=3,
                              cycles=120, warmup=20, seed=seed, backend="verilator")
    per = dict(stats.per_node)
    per["undeliverable"] = per["undeliverable"].copy()
    per["undeliverable"][5] = 2
    forged = network.NetworkStats(stats.run, per, stats.histogram, stats.nodes, stats.window,
                                  stats.cycles, stats.drain_cycles, stats.seconds,
                                  stats.params, ((0, 2), (1, 3)))
    assert forged.problems() == [
        "routers at chips [5] gave up 2 packets, but no link of theirs went down",
        f"{stats.total('received')} packets ejected where {stats.total('injected') - 2} "
        f"were injected well-formed and not given up at a down link"]


@pytest.mark.parametrize("link_down, message", [
    ((0, 2), r"link_down must be \(chip, port, cycle\), not \(0, 2\)"),
    ("0:2@5", r"link_down must be \(chip, port, cycle\)"),
    ((8, 0, 5), "link_down chip must be a number from 0 to 7, not 8"),
    ((0, 4, 5), "link_down port must be a number from 0 to 3, not 4"),
    ((0, 1, 0), "link_down cycle must be a number from 1 to"),
    ((0, 0, 1.5), "link_down cycle must be an int"),
])
def test_bad_link_down(link_down, message):
    with pytest.raises(ValueError, match=message):
        network.run_stats("2x4", rate=0.5, cycles=100, warmup=10, link_down=link_down)


def test_a_dark_port_has_no_link_to_take_down():
    mesh = topo.torus("2x4", wrap=False)
    with pytest.raises(ValueError, match=r"link_down: chip 3 \(0, 3\) \+y has no link to "
                                         r"take down \(it is dark in"):
        network.run_stats(mesh, rate=0.5, cycles=100, warmup=10, link_down=(3, 2, 5))


def test_configuration_rows_mark_only_the_link_ends():
    """``sim.system`` streams its chips' configuration rows with no link down (it passes
    no ``down``): the same rows as an all-up ``down``; marking a port changes only the row
    of that port's chip."""
    topology = topo.torus("2x2")
    tables = topo.routing_tables(topology, vcs=2)
    zeros = np.zeros(4, np.int64)
    lit = network._lit(topology, topology.dims)
    args = (topology, tables, 2, topology.dims, (0, zeros, zeros), [0] * 4, lit)
    up = np.zeros((4, topology.n_ports), dtype=bool)
    plain = network._rows(*args)
    assert len(plain) == 4 and plain == network._rows(*args, up)
    down = up.copy()
    down[2, 1] = True
    marked = network._rows(*args, down)
    assert [a != b for a, b in zip(plain, marked)] == [False, False, True, False]
