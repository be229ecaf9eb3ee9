"""hdl.lib.params: each validator's accepted values, and the type and message of each refusal."""

import pytest

from golden.formats import NUMERICS as GOLDEN_NUMERICS
from hdl.lib.params import (NUMERICS, check_bool, check_choice, check_int, check_numerics,
                            check_power_of_two)


def test_numerics_match_golden():
    """hdl restates golden's numerics (it may not import golden); this holds them equal."""
    assert tuple(NUMERICS) == tuple(GOLDEN_NUMERICS)


@pytest.mark.parametrize("value, bounds", [
    (0, {}), (-5, {}), (1 << 40, {}),
    (1, dict(least=1)), (7, dict(most=7)), (3, dict(least=3, most=3)),
])
def test_check_int_accepts(value, bounds):
    assert check_int("n", value, **bounds) == value


@pytest.mark.parametrize("value, bounds, error, message", [
    (1.0, {}, TypeError, "n must be an integer, not 1.0"),
    ("4", {}, TypeError, "n must be an integer, not '4'"),
    (True, dict(least=0), TypeError, "n must be an integer, not True"),
    (None, {}, TypeError, "n must be an integer, not None"),
    (0, dict(least=1), ValueError, "n must be at least 1, not 0"),
    (9, dict(least=1, most=8), ValueError, "n must be at most 8, not 9"),
])
def test_check_int_refuses(value, bounds, error, message):
    with pytest.raises(error, match=f"^{message}$"):
        check_int("n", value, **bounds)


@pytest.mark.parametrize("value", [1, 2, 4, 1024, 1 << 32])
def test_check_power_of_two_accepts(value):
    assert check_power_of_two("words", value) == value


@pytest.mark.parametrize("value, bounds, error, message", [
    (2.0, {}, TypeError, "words must be an integer, not 2.0"),
    (False, {}, TypeError, "words must be an integer, not False"),
    (0, {}, ValueError, "words must be at least 1, not 0"),
    (-4, {}, ValueError, "words must be at least 1, not -4"),
    (6, {}, ValueError, "words must be a power of two, not 6"),
    (16, dict(most=8), ValueError, "words must be at most 8, not 16"),
])
def test_check_power_of_two_refuses(value, bounds, error, message):
    with pytest.raises(error, match=f"^{message}$"):
        check_power_of_two("words", value, **bounds)


@pytest.mark.parametrize("value", [True, False])
def test_check_bool_accepts(value):
    assert check_bool("flag", value) is value


@pytest.mark.parametrize("value", [0, 1, None, "yes"])
def test_check_bool_refuses(value):
    with pytest.raises(TypeError, match=f"^flag must be a bool, not {value!r}$"):
        check_bool("flag", value)


def test_check_choice():
    assert check_choice("mode", "b", ("a", "b")) == "b"
    with pytest.raises(ValueError, match=r"^mode must be one of 'a', 'b', not 'c'$"):
        check_choice("mode", "c", ("a", "b"))
    # An unhashable value against a set is refused like any other, not a TypeError.
    with pytest.raises(ValueError, match=r"^mode must be one of 'a', not \['a'\]$"):
        check_choice("mode", ["a"], {"a"})


def test_check_numerics():
    assert [check_numerics(n) for n in NUMERICS] == list(NUMERICS)
    with pytest.raises(ValueError, match=r"^numerics must be one of 'tpu', 'ieee', not 'ftz'$"):
        check_numerics("ftz")
