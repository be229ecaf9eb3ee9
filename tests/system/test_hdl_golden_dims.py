"""``hdl.system.fabric`` parses torus dimensions by ``golden.topology.parse_dims``
restated (``hdl`` imports nothing from ``golden``, SPEC section 2): the two agree on
every small shape, on strings, on numpy integers and on what they reject."""

import itertools

import numpy as np
import pytest

from golden import topology
from hdl.system import fabric

SHAPES = [dims for n in (1, 2, 3, 4) for dims in itertools.product(range(-1, 10), repeat=n)]
TEXTS = ["4x4x8", "4X4", "2x2", "1x2", "2x1x1", "16x16", "16x32", "8x8x4", " 4 x 4 ", "4x",
         "x4", "", "x", "2by2", "4x4x4x4", "1x1", "0x4", "-1x4", "4x-2", "0x10", "3.0x2",
         "0b10x2", "4x4x", "256x1", "2x128", "٤x٤"]
OTHERS = [(np.int64(4), np.int32(4)), (np.uint8(2), 3, np.int16(2)), np.array([4, 4]),
          [2, 3], (True, 2), (2, np.True_), (2.0, 2), (2, None), ("2", "2"), None, 5, 4.0,
          {4: 0, 2: 1}, range(2, 4), b"2x2"]


def _outcome(parse, dims):
    """What ``parse`` makes of ``dims``: ("ok", tuple) or ("error", type, message)."""
    try:
        out = parse(dims)
    except Exception as error:          # the error is the outcome compared
        return "error", type(error), str(error)
    return "ok", out, tuple(type(n) for n in out)


@pytest.mark.parametrize("inputs", [SHAPES, TEXTS, OTHERS], ids=["shapes", "texts", "others"])
def test_torus_dims_is_golden_s(inputs):
    for dims in inputs:
        assert _outcome(fabric._torus_dims, dims) == _outcome(topology.parse_dims, dims), dims


@pytest.mark.parametrize("inputs", [SHAPES, TEXTS, OTHERS], ids=["shapes", "texts", "others"])
def test_parse_dims_is_golden_s_up_to_256_nodes(inputs):
    for dims in inputs:
        golden = _outcome(topology.parse_dims, dims)
        if golden[0] == "ok" and np.prod(golden[1]) > 256:
            with pytest.raises(ValueError, match="a network has 2 to 256 nodes, not"):
                fabric.parse_dims(dims)
        else:
            assert _outcome(fabric.parse_dims, dims) == golden, dims


def test_generators_are_read_once():
    assert fabric.parse_dims(n for n in (4, 4)) == topology.parse_dims(n for n in (4, 4))
