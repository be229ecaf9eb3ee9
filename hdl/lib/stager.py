"""Placing pipeline registers at a datapath's candidate cut points.

A datapath is written once as a chain of combinational steps with a numbered
candidate cut point after each step. The ``stages`` parameter of the unit
chooses how many of those cuts become register stages, so the same source
serves a shallow pipeline (fewer flip-flops) and a deep one (higher Fmax)
without rewriting the datapath. All registers share one clock enable: when it
is low, the whole datapath holds, which is how the stream wrappers and the
systolic array stall without losing anything.
"""

from amaranth.hdl import Signal

from .params import check_int

__all__ = ["Stager", "check_stages"]


def check_stages(stages, n_cuts, *, name="stages"):
    """Validate a pipeline depth against the number of cut points a datapath offers."""
    check_int(name, stages)
    # One "between" message rather than check_int's two bounds: a caller reads the range.
    if not 1 <= stages <= n_cuts:
        raise ValueError(f"{name} must be between 1 and {n_cuts}, not {stages}")
    return stages


class Stager:
    """Registers values at the chosen cut points of one datapath.

    Parameters
    ----------
    m : Module
        Module the registers are added to.
    enable : Value
        Clock enable shared by every register (the pipeline advances when high).
    preference : sequence of int
        Cut point indices in the order they come into use as ``stages`` grows.
        The first entry is the datapath's output, so every depth ends in a
        register.
    stages : int
        How many cut points become registers: the datapath's latency in cycles.
    prefix : str
        Prefix of the register names, to keep waveforms and Verilog readable.
    """

    def __init__(self, m, *, enable, preference, stages, prefix):
        check_stages(stages, len(preference))
        self._m = m
        self._enable = enable
        self._prefix = prefix
        self.cuts = frozenset(preference[:stages])

    def __call__(self, index, **values):
        """Return ``values`` after cut point ``index``: registered if the cut is in use.

        The result is a tuple in keyword order, so call sites read
        ``a, b = stage(3, a=a, b=b)``.
        """
        if index not in self.cuts:
            return tuple(values.values())
        registers = tuple(Signal(value.shape(), name=f"{self._prefix}_s{index}_{name}",
                                 reset_less=True)
                          for name, value in values.items())
        with self._m.If(self._enable):
            self._m.d.sync += [reg.eq(value) for reg, value in zip(registers, values.values())]
        return registers
