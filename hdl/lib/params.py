"""The one home of parameter validation (SPEC section 4: keyword-only, validated parameters).

Every component checks its constructor's parameters with these, so a bad parameter fails
where it is given, with one line naming the parameter and what it may be, instead of deep
inside ``elaborate``. Each validator returns the value it accepts, so a check reads as an
assignment (``lanes = check_int("lanes", lanes, least=1)``); a wrong type is a
``TypeError``, a wrong value a ``ValueError``.
"""

__all__ = ["NUMERICS", "check_int", "check_bool", "check_choice", "check_numerics",
           "check_power_of_two"]

#: The numerics every floating-point unit offers (SPEC section 3); restated from
#: ``golden.formats`` (hdl never imports golden) and held equal by a test.
NUMERICS = ("tpu", "ieee")


def _is_int(value):
    # A bool is an int to Python, but True as a size or a count is always a mistake.
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(name, value, *, least=None, most=None):
    """``value`` as an int in ``[least, most]`` (either bound may be omitted).

    Parameters
    ----------
    name : str
        The parameter's name, for the message.
    value : object
        What was given.
    least, most : int or None
        The inclusive bounds.

    Returns
    -------
    int
        ``value``.

    Raises
    ------
    TypeError
        If ``value`` is not an int (bools are not).
    ValueError
        If ``value`` is out of range.
    """
    if not _is_int(value):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if least is not None and value < least:
        raise ValueError(f"{name} must be at least {least}, not {value}")
    if most is not None and value > most:
        raise ValueError(f"{name} must be at most {most}, not {value}")
    return value


def check_power_of_two(name, value, *, most=None):
    """``value`` as a power of two (1, 2, 4, ...) of at most ``most``.

    Parameters
    ----------
    name : str
        The parameter's name, for the message.
    value : object
        What was given.
    most : int or None
        The inclusive upper bound.

    Returns
    -------
    int
        ``value``.

    Raises
    ------
    TypeError
        If ``value`` is not an int.
    ValueError
        If ``value`` is below 1, above ``most`` or not a power of two.
    """
    check_int(name, value, least=1, most=most)
    if value & (value - 1):
        raise ValueError(f"{name} must be a power of two, not {value}")
    return value


def check_bool(name, value):
    """``value`` if it is a bool.

    Parameters
    ----------
    name : str
        The parameter's name, for the message.
    value : object
        What was given.

    Returns
    -------
    bool
        ``value``.

    Raises
    ------
    TypeError
        If ``value`` is not a bool (0 and 1 are not: a flag is spelled True or False).
    """
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {value!r}")
    return value


def check_choice(name, value, choices):
    """``value`` if it is one of ``choices``.

    Parameters
    ----------
    name : str
        The parameter's name, for the message.
    value : object
        What was given.
    choices : sequence
        The allowed values, in the order the message lists them.

    Returns
    -------
    object
        ``value``.

    Raises
    ------
    ValueError
        If ``value`` is not among ``choices`` (whatever its type: a choice is a value).
    """
    try:
        allowed = value in choices
    except TypeError:               # an unhashable value against a set or a dict
        allowed = False
    if not allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, "
                         f"not {value!r}")
    return value


def check_numerics(numerics):
    """``numerics`` if it is one of :data:`NUMERICS`; ``ValueError`` otherwise."""
    return check_choice("numerics", numerics, NUMERICS)
