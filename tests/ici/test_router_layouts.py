"""The router's layouts agree with ``golden.ici``, and its table entries, read with the
rule of ``hdl.ici.layouts`` restated here, give ``golden.routing.next_vc`` for every
chip, destination, arrival port and VC of regular, twisted, mesh and failed-chip
tables."""

import itertools

import numpy as np
import pytest

from golden import ici, memory
from golden import topology as topo
from golden.routing import next_vc
from hdl.ici import layouts


def test_route_word_matches_golden():
    fields = {f.name: (f.lo, f.width) for f in ici.FIELDS if f.word == 0}
    assert {name: (f.offset, f.width) for name, f in layouts.route_word_layout} == fields
    assert layouts.CHIP_BITS == memory.CHIP_BITS == ici.DST.width
    assert layouts.LENGTH_BITS == ici.LENGTH.width
    assert layouts.MAX_FLIT_WORDS == ici.MAX_FLIT_WORDS
    # The route word's 2-bit vc field and a table entry's name the same VCs; the router's
    # own VC fields are wider.
    assert layouts.ENTRY_VCS == ici.MAX_VCS == 1 << layouts.route_entry_layout["vc"].width
    assert layouts.MAX_VCS == 1 << layouts.VC_BITS > ici.MAX_VCS
    assert layouts.OPCODES == ici.OPCODES


def test_flit_and_table_layouts():
    assert layouts.flit_layout(3).size == 96
    assert layouts.table_write_layout(16).size == 4 + layouts.route_entry_layout.size
    with pytest.raises(ValueError, match="flit_words must be at most 8"):
        layouts.flit_layout(9)
    with pytest.raises(ValueError, match="n_nodes must be at most 256"):
        layouts.table_write_layout(257)


def decode_entry(value):
    """The entry's fields, from bit 0: reachable, port (4), fixed, vc (2), straight."""
    return dict(reachable=value & 1, port=value >> 1 & 15, fixed=value >> 5 & 1,
                vc=value >> 6 & 3, straight=value >> 8 & 1)


def rule(entry, in_port, in_vc):
    """The output VC of ``hdl.ici.layouts``' docstring: a non-fixed entry's ``vc`` is its
    class's first VC b, and going straight on in b + 1 keeps b + 1."""
    if entry["fixed"]:
        return entry["vc"]
    straight = entry["straight"] and in_vc == entry["vc"] + 1 and in_port == entry["port"] ^ 1
    return entry["vc"] + int(straight)


@pytest.mark.parametrize("shape, kwargs, vcs", [
    ((4, 4), {}, 2),
    ((4, 1), {}, 2),
    ((3, 3), dict(wrap=False), 2),
    ((2, 4), dict(twist=True), 2),
    ((2, 2, 4), dict(twist=True), 3),
    ((4, 4), dict(failed=[5]), 2),
    ((4, 4), dict(failed=[5, 10]), 3),
    ((3, 3), dict(wrap=False, failed=[4]), 2),
    ((4, 4), {}, 4),
    ((2, 2, 4), dict(twist=True), 4),
    ((3, 3), dict(wrap=False), 4),
    ((4, 4), dict(failed=[5]), 4),
])
def test_table_entries_give_the_golden_vc(shape, kwargs, vcs):
    topology = topo.torus(shape, **kwargs)
    tables = topo.routing_tables(topology, vcs=vcs)
    n, ports = topology.n_chips, topology.n_ports
    for chip in range(n):
        entries = layouts.table_entries(tables, chip, vcs=vcs)
        assert len(entries) == n
        for dst, value in enumerate(entries):
            e = decode_entry(value)
            out = int(tables.port[chip, dst])
            if out < 0:
                assert value == 0
                continue
            assert e["reachable"] and e["port"] == out
            if out == ports:
                continue
            arrivals = [(-1, -1)] + list(itertools.product(range(ports), range(vcs)))
            for in_port, in_vc in arrivals:
                want = int(next_vc(tables, chip, dst, in_port, in_vc, out))
                assert rule(e, in_port, in_vc) == want, (chip, dst, in_port, in_vc)


def test_encode_route_entry():
    assert layouts.encode_route_entry(port=-1) == 0
    assert decode_entry(layouts.encode_route_entry(port=5, fixed=True, vc=2,
                                                   straight=False)) == \
        dict(reachable=1, port=5, fixed=1, vc=2, straight=0)
    with pytest.raises(ValueError, match="port must be at most 6"):
        layouts.encode_route_entry(port=7)
    with pytest.raises(ValueError, match="vc must be at most 3"):
        layouts.encode_route_entry(port=0, vc=4)


def test_table_entries_reject_bad_input():
    tables = topo.routing_tables(topo.torus((4, 4), failed=[5, 10]), vcs=3)
    assert tables.escape_vc == 2
    with pytest.raises(ValueError, match="escape VC 2 needs more than vcs=2"):
        layouts.table_entries(tables, 0, vcs=2)
    with pytest.raises(ValueError, match="chip must be at most 15"):
        layouts.table_entries(tables, 16, vcs=3)
    assert np.all(np.array(layouts.table_entries(tables, 5, vcs=3)) == 0)  # failed chip


def test_four_vcs_use_two_classes():
    """With 4 VCs a torus's destinations split into classes {0, 1} and {2, 3} by
    coordinate parity; every entry for a class-1 destination names VC 2 or 3."""
    topology = topo.torus((4, 4))
    tables = topo.routing_tables(topology, vcs=4)
    parity = topology.coords.sum(1) % 2
    assert list(tables.vc_base) == list(2 * parity)
    for chip in range(topology.n_chips):
        for dst, value in enumerate(layouts.table_entries(tables, chip, vcs=4)):
            e = decode_entry(value)
            if dst != chip:
                assert e["vc"] in ((2, 3) if parity[dst] else (0, 1)), (chip, dst)
    with pytest.raises(ValueError, match="VC classes need 4 VCs, more than vcs=3"):
        layouts.table_entries(tables, 0, vcs=3)
