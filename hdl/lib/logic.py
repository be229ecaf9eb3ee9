"""Wide logic written so that simulators compile it quickly."""

from amaranth.hdl import Cat, Value

__all__ = ["any_of"]


def any_of(terms):
    """1 when any of the one-bit ``terms`` is 1, and 0 when there are none.

    One OR reduction rather than a chain of two-input ORs: the same gates, but the
    Amaranth simulator's compile time of a chain grows with the square of its length
    (each OR works out the width of the whole chain below it).

    Raises
    ------
    ValueError
        If a term is not one bit wide.
    """
    values = [Value.cast(term) for term in terms]
    wide = [len(value) for value in values if len(value) != 1]
    if wide:
        raise ValueError(f"any_of takes one-bit terms, not terms {wide} bits wide")
    return Cat(*values).any()
