"""``hdl.ici.layouts.eject_port`` is ``golden.routing.eject_port`` restated (``hdl``
imports nothing from ``golden``, SPEC section 2): the two agree on every torus input of
every router shape, and the router ejects by the hdl copy."""

import pytest

import hdl.ici.router
from golden import routing
from hdl.ici import layouts


@pytest.mark.parametrize("dims", range(2, layouts.MAX_DIMS + 1))
def test_eject_port_is_golden_s(dims):
    torus_ports = 2 * dims
    # Every local port count a router can have, and a few beyond it.
    for local_ports in range(1, layouts.max_local_ports(dims) + 3):
        for in_port in range(torus_ports):
            assert layouts.eject_port(in_port, torus_ports=torus_ports,
                                      local_ports=local_ports) \
                == routing.eject_port(in_port, torus_ports=torus_ports,
                                      local_ports=local_ports), (dims, local_ports, in_port)


def test_router_ejects_by_the_hdl_copy():
    assert hdl.ici.router.eject_port is layouts.eject_port
