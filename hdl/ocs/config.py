"""The OCS configuration stream and status: payload layouts, status codes, and the beats
that program a map.

A map is ``golden.topology``'s OCS map format: a sequence of ``ports`` ints, ``map[i] = j``
when port i is connected to port j and -1 when it is dark; a legal map is a symmetric
partial permutation (``golden.topology.check_ocs_map`` checks one in Python, with a
one-line reason).

The hardware holds the map in force (*active*) and a *staged* copy. An entry beat
(``commit = 0``) edits the staged copy: ``staged[port] = target`` if ``lit``, else dark.
A commit beat (``commit = 1``; its other fields are ignored) asks for the staged map to be
checked and switched in; afterwards, applied or refused, the staged copy equals the active
map again, so every request is a set of edits relative to the map in force.
"""

from amaranth.hdl import unsigned
from amaranth.lib import data, enum

from ..lib.params import check_int

__all__ = ["Status", "STATUSES", "port_bits", "entry_layout", "config_layout",
           "status_layout", "config_beats"]


class Status(enum.IntEnum, shape=3):
    """The outcome of the last commit: the shape of a status ``code``.

    - ``NONE``: no commit yet;
    - ``OK``: the staged map was switched in;
    - ``PORT_RANGE``: an entry beat named a port at or above ``ports`` (``port`` is it);
    - ``TARGET_RANGE``: port ``port`` maps to a target at or above ``ports``;
    - ``SELF_LOOP``: port ``port`` maps to itself;
    - ``ASYMMETRIC``: port ``port`` maps to a port that does not map back to it (a target
      shared by two ports shows as this: the target can map back to only one of them);
    - ``TIMEOUT``: the affected links did not drain within ``drain_timeout`` cycles;
      ``port`` is the lowest affected port that was not idle.

    Every code but ``NONE`` and ``OK`` is a refusal: nothing was switched. An ``IntEnum``,
    so a code read back from a run indexes :data:`STATUSES` as it always has.
    """
    NONE = 0
    OK = 1
    PORT_RANGE = 2
    TARGET_RANGE = 3
    SELF_LOOP = 4
    ASYMMETRIC = 5
    TIMEOUT = 6


#: The names of :class:`Status`, in code order, as sim and the suites report them.
STATUSES = tuple(member.name.lower() for member in Status)


def port_bits(ports):
    """Bits of a port number for an OCS of ``ports`` ports (at least 1)."""
    check_int("ports", ports, least=1)
    return max(1, (ports - 1).bit_length())


def entry_layout(ports):
    """One map entry: ``lit`` and, when lit, the ``target`` port (0 when dark)."""
    return data.StructLayout({"lit": 1, "target": unsigned(port_bits(ports))})


def config_layout(ports):
    """A configuration beat: ``commit``, or an entry edit ``port``, ``lit``, ``target``."""
    bits = port_bits(ports)
    return data.StructLayout({"commit": 1, "port": unsigned(bits), "lit": 1,
                              "target": unsigned(bits)})


def status_layout(ports):
    """The outcome of the last commit: ``code`` and the ``port`` it names (0 for ``NONE``
    and ``OK``)."""
    return data.StructLayout({"code": Status, "port": unsigned(port_bits(ports))})


def _as_map(values, ports, name):
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{name} must be a sequence of {ports} ints, not {values!r}")
    try:
        values = list(values)
    except TypeError:
        raise ValueError(f"{name} must be a sequence of {ports} ints, not {values!r}") from None
    if len(values) != ports:
        raise ValueError(f"{name} must have {ports} entries, not {len(values)}")
    out = []
    limit = 1 << port_bits(ports)
    for i, v in enumerate(values):
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise ValueError(f"{name}[{i}] must be an int, not {v!r}")
        v = int(v)
        if not -1 <= v < limit:
            raise ValueError(f"{name}[{i}] = {v} cannot be encoded: -1 (dark) or "
                             f"0..{limit - 1}")
        out.append(v)
    return out


def config_beats(new, *, ports, current=None):
    """The configuration beats that switch the OCS from map ``current`` to map ``new``.

    Parameters
    ----------
    new : sequence of ``ports`` ints, -1 dark
        The map wanted. It is encoded whether or not it is a partial permutation (so that
        the hardware's own check can be exercised): check it with
        ``golden.topology.check_ocs_map`` first.
    ports : int
    current : sequence of ``ports`` ints, or None for the reset map (every port dark)
        The map in force, which the staged copy starts from.

    Returns
    -------
    list of dict, ``config_layout(ports)`` payloads: one entry beat per port whose entry
    changes, in port order, then a commit beat.
    """
    check_int("ports", ports, least=1)
    new = _as_map(new, ports, "new")
    current = [-1] * ports if current is None else _as_map(current, ports, "current")
    beats = [{"commit": 0, "port": i, "lit": int(n >= 0), "target": max(n, 0)}
             for i, (n, c) in enumerate(zip(new, current)) if n != c]
    return beats + [{"commit": 1, "port": 0, "lit": 0, "target": 0}]
