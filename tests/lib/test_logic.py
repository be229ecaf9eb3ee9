"""hdl.lib.logic: ``any_of`` against Python's ``any`` on every input, and its refusals."""

import itertools

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from hdl.lib.logic import any_of


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_any_of_is_or_on_every_input(n):
    m = Module()
    terms = [Signal(name=f"t{k}") for k in range(n)]
    result = Signal()
    m.d.comb += result.eq(any_of(term for term in terms))      # any iterable
    seen = []

    async def testbench(ctx):
        for bits in itertools.product((0, 1), repeat=n):
            for term, bit in zip(terms, bits):
                ctx.set(term, bit)
            seen.append((bits, ctx.get(result)))

    sim = Simulator(m)
    sim.add_testbench(testbench)
    sim.run()
    assert len(seen) == 2 ** n
    assert all(got == int(any(bits)) for bits, got in seen), seen


def test_a_wide_term_is_refused():
    with pytest.raises(ValueError, match=r"^any_of takes one-bit terms, not terms \[4\] bits "
                                         r"wide$"):
        any_of([Signal(), Signal(4)])
