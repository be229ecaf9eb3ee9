"""Verification suites, one package per block: stimulus, coverage model and checks.

Each suite module has ``runs(seed, *, inject=None)``, yielding the simulator
runs of one regression seed as ``(block, params, name, program)``.
"""

from .arith import suite as arith
from .mxu import suite as mxu

__all__ = ["SUITES"]

#: Suites whose seeds a regression worker runs: name -> module with ``runs``.
SUITES = {"arith": arith, "mxu": mxu}
