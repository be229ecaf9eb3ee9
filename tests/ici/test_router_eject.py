# amaranth: UnusedElaboratable=no
# (The bad-parameter test constructs routers whose __init__ raises.)
"""Where an adaptive router ejects (``hdl.ici.Router(eject_by=...)``): by the packet's
source (the default, so that a flow's packets share a sink) or by the torus input it
arrives on (what a multi-chip system takes, ``hdl.system.ChipNode``), with the packets
whole while every sink stalls at random."""

import pytest

from golden import topology as topo
from hdl.ici import Router
from hdl.ici.layouts import adaptive_table_entries

from .test_router import EJECT, Bench, load_table, packet, simulate


# "source" is the adaptive network tests' default; the default suite runs "input".
@pytest.mark.parametrize("eject_by", ["input", pytest.param("source", marks=pytest.mark.slow)])
def test_an_adaptive_router_ejects_by_input_or_by_source(eject_by, rng, seed):
    # Chip 5 of a 4x4, 4 local ports. The packet from input p names source (p + 1) % 4, so
    # the two rules send it to different ports: p by its input, (p + 1) % 4 by its source.
    tables = topo.routing_tables(topo.torus((4, 4)), vcs=3, routing="adaptive")
    chip = 5
    router = Router(dims=2, n_nodes=16, vcs=3, local_ports=4, routing="adaptive",
                    eject_by=eject_by)
    bench = Bench(router, rng)
    uid = 0
    for port in range(4):
        src = (port + 1) % 4
        want = port if eject_by == "input" else src
        for vc in range(3):
            bench.send(port, vc, uid, packet(rng, uid=uid, dst=chip, src=src,
                                             flits=int(rng.integers(2, 6)), flit_words=1),
                       (EJECT, want))
            uid += 1

    async def run(ctx):
        await load_table(ctx, router, adaptive_table_entries(tables, chip, vcs=3))
        await bench.run(ctx)

    simulate(router, bench, run)
    seen = bench.check()
    assert set(seen.values()) == {(EJECT, j) for j in range(4)}, f"seed {seed}"


def test_eject_by_is_checked():
    with pytest.raises(ValueError, match="eject_by must be 'input' with routing='dor', "
                                         "not 'source'"):
        Router(eject_by="source")
    with pytest.raises(ValueError, match="eject_by must be 'input' or 'source' with "
                                         "routing='adaptive', not 'port'"):
        Router(vcs=3, routing="adaptive", eject_by="port")
