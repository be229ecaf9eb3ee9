"""A chip on an FPGA board, from the host (SPEC sections 4.10 and 6): ``sim.board.matmul``.

The host talks to the board's UARTBone bridge through a transport
(:mod:`sim.board.transport`): a serial port (pyserial) for a real board, or the board's
simulation (``hdl.board.board_core.BoardSim``, the bridge and the proto chip as built for
the FPGA) fed UART bytes in a compiled whole run. :class:`~sim.board.client.BoardClient`
loads a program and its images, starts the chip, waits for it, and reads back.
"""

import time

import numpy as np

from golden import tensorcore as tc
from golden.formats import check_numerics
from hdl.tensorcore.presets import preset

from ..chip import ChipRun
from ..kernels import plan_matmul
from .client import BoardClient, BoardError, BoardRun
from .transport import SerialTransport, SimulatedTransport, TransportError

__all__ = ["matmul", "BOARDS", "BoardClient", "BoardError", "BoardRun", "SerialTransport",
           "SimulatedTransport", "TransportError", "board_chip", "open_transport"]

#: Board name -> the chip preset its bitstream holds (``hdl.tensorcore.presets``) and the
#: UART rate of ``tpu-rtl board build``'s default.
BOARDS = {"ulx3s-85f": {"preset": "proto", "baud": 115_200}}


def board_chip(board):
    """The chip parameters of ``board``'s bitstream; ValueError naming ``board``."""
    if not isinstance(board, str) or board not in BOARDS:
        raise ValueError(f"board must be one of {', '.join(BOARDS)}, not {board!r}")
    return preset(BOARDS[board]["preset"])


def open_transport(board, port=None, *, backend="verilator", baud=None, progress=None):
    """The transport to ``board``: its serial ``port`` if given (opened now: ValueError
    naming the port if it cannot be), else its simulation on ``backend``."""
    board_chip(board)
    if port is not None:
        return SerialTransport(port, baud=baud or BOARDS[board]["baud"])
    return SimulatedTransport(chip=BOARDS[board]["preset"], backend=backend,
                              progress=progress)


def _plan(x, w, activation, chip):
    kernel = plan_matmul(x, w, activation=activation, vmem_lines=chip["vmem_lines"])
    (m, k), n = np.shape(x), np.shape(w)[1]
    words = len(tc.program_words(kernel.program))
    for name, size, most in (("HBM", kernel.hbm.size, chip["hbm_words"]),
                             ("SMEM", kernel.smem.size, chip["smem_words"]),
                             ("VMEM", kernel.vmem.size, chip["vmem_lines"] * chip["lanes"]),
                             ("IMEM", words, chip["imem_depth"]),
                             ("the MXU result queue", kernel.mxu_results,
                              chip["mxu_results"])):
        if size > most:
            raise ValueError(f"x and w: a {m}x{k} @ {k}x{n} matmul needs {size:,} words of "
                             f"{name}; the board's proto chip has {most:,}")
    return kernel


def matmul(x, w, *, activation=None, numerics="tpu", board="ulx3s-85f", port=None,
           backend="verilator", progress=None):
    """``sim.chip.matmul`` through a board's host bridge: ``activation(x @ w)`` on the
    board's proto chip, the program and its images loaded over UARTBone, started, waited
    for and read back.

    Over the serial ``port`` (such as ``"/dev/ttyUSB0"``) when given, with the board
    programmed with ``tpu-rtl board build``'s bitstream (docs/board.md); otherwise through
    the simulation of the board top (``backend``) fed the same UART bytes.

    Parameters
    ----------
    x, w : bf16 [M, K] and [K, N]
        ``ml_dtypes.bfloat16`` values or uint16 patterns.
    activation : None or "relu"
    numerics : "tpu"
        The board's chip is built with "tpu" numerics.
    board : str
        A name in :data:`BOARDS` (``"ulx3s-85f"``).
    port : str, optional
        The board's serial port.
    backend : "verilator", "icarus" or "amaranth"
        The simulator, without ``port``.
    progress : callable, optional
        ``progress(cycle, status)`` during a simulated run.

    Returns
    -------
    sim.chip.ChipRun
        ``out`` float32 [M, N], equal to ``golden.mxu.matmul`` (then relu) bit for bit;
        ``cycles`` from start to done as the board's counter has them.

    Raises
    ------
    ValueError
        A bad argument, each before any work: an unknown ``board``, a matmul larger than
        the board's chip holds (naming the memory), or a ``port`` that cannot be opened.
    sim.board.BoardError
        The chip stopped on a fault.
    """
    chip = board_chip(board)
    check_numerics(numerics)
    if numerics != chip.get("numerics", "tpu"):
        raise ValueError(f"numerics: the board's chip is built with "
                         f"{chip.get('numerics', 'tpu')!r}, not {numerics!r}")
    if port is not None and (not isinstance(port, str) or not port):
        raise ValueError(f"port must be a serial port's name, not {port!r}")
    kernel = _plan(x, w, activation, chip)
    began = time.perf_counter()
    config = dict(chip, n_flags=chip.get("n_flags", 16))
    with open_transport(board, port, backend=backend, progress=progress) as transport:
        client = BoardClient(transport, config)
        if port is not None:
            client.check_board()
        (mp, np_) = kernel.padded
        result = client.run(kernel.program, hbm=kernel.hbm, vmem=kernel.vmem,
                            smem=kernel.smem,
                            reads=[("hbm", kernel.out_base, mp * np_)])
    out = result.reads[("hbm", kernel.out_base)].reshape(mp, np_)
    m, n = kernel.shape
    out = out[:m, :n].copy().view(np.float32)
    cycles = max(result.cycles, 1)
    counters = result.counters
    return ChipRun(out=out, cycles=result.cycles, utilization=counters["mxu_beats"] / cycles,
                   overlap=counters["overlap_cycles"] / max(counters["dma_cycles"], 1),
                   seconds=time.perf_counter() - began, stalls=result.stalls)
