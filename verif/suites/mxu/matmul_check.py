"""One matmul on the MXU RTL, checked against the golden model."""

from dataclasses import dataclass

import numpy as np

from golden import mxu as golden_mxu
from sim import mxu as sim_mxu

from ...scoreboard import Scoreboard

__all__ = ["MatmulCheck", "check_matmul"]


@dataclass
class MatmulCheck:
    run: sim_mxu.MatmulRun
    board: Scoreboard

    @property
    def passed(self):
        return self.board.passed


def check_matmul(x, w, *, acc=None, rows=8, cols=8, numerics="tpu", backend="amaranth",
                 waves=None, progress=None, seed=0, idle=0.0, stall=0.0, waves_scope=None):
    """Run ``x @ w`` (+ ``acc``) on the RTL and score it against :func:`golden.mxu.matmul`."""
    expected = golden_mxu.matmul(x, w, numerics=numerics, acc=acc)
    run = sim_mxu.matmul(x, w, rows=rows, cols=cols, numerics=numerics, acc=acc,
                         backend=backend, waves=waves, progress=progress, seed=seed, idle=idle,
                         stall=stall, waves_scope=waves_scope)
    n = expected.shape[1]
    board = Scoreboard(f"matmul {x.shape[0]}x{x.shape[1]}x{n}/{numerics}",
                       expected.view(np.uint32), where=lambda i: f"out[{i // n}, {i % n}]")
    board.check_all(run.out.view(np.uint32))
    return MatmulCheck(run, board)
