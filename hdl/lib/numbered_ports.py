"""Numbered copies of a port: ``name``, ``name1``, ``name2``, ... Copy 0 keeps the plain name,
so a component built with one copy has the port its single-port users already know."""

__all__ = ["port_name", "port"]


def port_name(name, j):
    """The name of copy ``j`` of port ``name``."""
    return name if j == 0 else f"{name}{j}"


def port(component, name, j):
    """Copy ``j`` of ``component``'s port ``name``."""
    return getattr(component, port_name(name, j))
