"""Verification suites, one package per block: stimulus, coverage model and checks.

Each suite module has ``runs(seed, *, inject=None)``, yielding the simulator
runs of one regression seed: ``(block, params, name, program)`` for a cocotb
test program that acts on every cycle, or a :class:`~.case.WholeCase` for a
whole run (stimulus in, results out).
"""

from .arith import suite as arith
from .dma import suite as dma
from .mxu import suite as mxu
from .network import suite as network
from .sparsecore import suite as sparsecore
from .system import suite as system
from .system_embedding import suite as system_embedding
from .tensorcore import suite as tensorcore
from .vpu import suite as vpu

__all__ = ["SUITES"]

#: Suites whose seeds a regression worker runs: name -> module with ``runs``.
SUITES = {"arith": arith, "mxu": mxu, "dma": dma, "network": network, "sparsecore": sparsecore,
          "system": system, "system_embedding": system_embedding, "tensorcore": tensorcore,
          "vpu": vpu}
