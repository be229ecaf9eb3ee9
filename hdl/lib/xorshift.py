"""A seeded pseudo-random source for gaps and jitter inside a simulation."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Xorshift32", "xorshift32", "GAP_BITS", "gap_threshold"]

#: Random bits compared against a gap threshold: probabilities in steps of 2^-16.
GAP_BITS = 16


def xorshift32(state):
    """The successor of a 32-bit xorshift state (Marsaglia's 13, 17, 5 triple).

    The same function over Python ints and Amaranth values, so a model of the
    sequence and the hardware are one definition.
    """
    mask = 0xFFFF_FFFF
    state = state ^ ((state << 13) & mask if isinstance(state, int) else (state << 13)[:32])
    state = state ^ (state >> 17)
    return state ^ ((state << 5) & mask if isinstance(state, int) else (state << 5)[:32])


def gap_threshold(probability):
    """The threshold that makes a gap ``probability`` likely each cycle (0.0 to 1.0).

    A cycle is a gap when the low :data:`GAP_BITS` bits of the random word are
    below the threshold, so 0 never gaps and ``2**GAP_BITS`` always does.
    """
    if not isinstance(probability, (int, float)) or not 0.0 <= probability <= 1.0:
        raise ValueError(f"a gap probability must be a number from 0 to 1, not {probability!r}")
    return round(probability * (1 << GAP_BITS))


class Xorshift32(wiring.Component):
    """A 32-bit xorshift generator that steps every cycle ``run`` is high.

    While ``run`` is low the state loads ``seed`` (a zero seed, which xorshift
    cannot leave, loads 1 instead), so a run's sequence depends only on its
    seed and the number of cycles since it started.

    Ports
    -----
    seed : In(32)
    run : In(1)
    value : Out(32)
        The current state; a new word every cycle while running.
    """

    seed: In(32)
    run: In(1)
    value: Out(32)

    def elaborate(self, platform):
        m = Module()
        state = Signal(32, init=1)
        with m.If(self.run):
            m.d.sync += state.eq(xorshift32(state))
        with m.Else():
            m.d.sync += state.eq(Mux(self.seed == 0, 1, self.seed))
        m.d.comb += self.value.eq(state)
        return m
