"""Helpers of the OCS tests: a simulator runner and configuration, and (from
``verif.suites.network.ocs_ports``) the traffic model of the routers at every OCS port,
random maps and the configuration handshake. Expected values never come from the code
under test: the model predicts every delivery from the maps the test chose."""

from hdl.ocs import STATUSES, config_beats
from verif.suites.network.ocs_ports import Routers, random_map, send_beats

from ..support import simulate

__all__ = ["Routers", "configure", "random_map", "send_beats", "simulate"]


async def configure(ctx, ocs, new, current=None):
    """Program map ``new`` over ``current``; returns the status name and port of the commit."""
    await send_beats(ctx, ocs, config_beats(new, ports=ocs.ports, current=current))
    await ctx.tick().until(~ocs.busy)
    return STATUSES[ctx.get(ocs.status.code)], ctx.get(ocs.status.port)
