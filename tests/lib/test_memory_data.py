# amaranth: UnusedElaboratable=no
"""memory_data: the storage a component keeps from its __init__, made or passed in.

(The pragma: a constructor that refuses its parameters leaves an unused component.)"""

import pytest
from amaranth.hdl import MemoryData, unsigned
from amaranth.lib import data

from hdl.lib.memory_port import memory_data
from hdl.memory.hbm import HBM

PAIR = data.StructLayout({"a": 8, "b": 8})


def test_made_when_not_given():
    words = memory_data("words", None, shape=64, depth=12)
    assert isinstance(words, MemoryData)
    assert (words.shape, words.depth, words.name) == (64, 12, "words")
    assert list(words.init) == [0] * 12


@pytest.mark.parametrize("shape, given", [(64, 64), (64, unsigned(64)), (PAIR, PAIR)])
def test_given_is_kept(shape, given):
    store = MemoryData(shape=given, depth=4, init=[])
    assert memory_data("words", store, shape=shape, depth=4) is store


@pytest.mark.parametrize("given, error, match", [
    ([0] * 4, TypeError, "words must be a MemoryData"),
    (MemoryData(shape=32, depth=4, init=[]), ValueError, "words must be 4 entries of 64"),
    (MemoryData(shape=64, depth=5, init=[]), ValueError, "words must be 4 entries of 64"),
    (MemoryData(shape=PAIR, depth=4, init=[]), ValueError, "words must be 4 entries of 64"),
])
def test_given_is_checked(given, error, match):
    with pytest.raises(error, match=match):
        memory_data("words", given, shape=64, depth=4)


def test_hbm_uses_the_storage_it_is_given():
    store = MemoryData(shape=64, depth=8, init=[])
    assert HBM(size=16, words_per_cycle=2, words=store).words is store
    with pytest.raises(ValueError, match="words must be 16 entries of 32, not 8 of 64"):
        HBM(size=16, words=store)
