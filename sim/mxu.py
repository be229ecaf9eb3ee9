"""Matrix multiplies on the MXU RTL: tiling, streaming and the result (SPEC section 5).

::

    >>> run = sim.mxu.matmul(x, w, rows=8, cols=8)      # x: bf16 [M, K], w: bf16 [K, N]
    >>> run.out, run.cycles, run.utilization

The runner cuts K into tiles of ``rows`` and N into tiles of ``cols``
(zero-padded), and streams every tile back to back: the next tile's weights
load into the shadow buffer while the current one computes. Tiles go K-tile
by K-tile, all N-tiles of one K-tile in turn, and every K-tile after the
first starts its partial sums from the previous K-tile's results through
``acc_in``, so each output is the sequential MAC loop over all of K.
"""

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from golden.formats import BF16, FP32, check_numerics
from hdl.mxu import mxu_latency

from .backends import check_backend, run_whole
from .backends.whole_run import WholeRun
from .checks import check_probability
from .transactors import StreamSink, StreamSource, run_transactors

__all__ = ["matmul", "MatmulRun", "MatmulPlan", "plan_matmul", "matmul_run", "run_plan",
           "stream_matmul", "matmul_cycles"]

# K padding must not disturb a sum: (-0) * (+0) = -0, and x + (-0) == x for
# every x, including -0 (whereas -0 + +0 would round to +0).
_PAD_X, _PAD_W = 0x8000, 0x0000


@dataclass(frozen=True)
class MatmulRun:
    """Result of :func:`matmul`.

    ``out`` is float32 [M, N]; ``cycles`` counts clock cycles from the first
    input beat accepted to the last result beat delivered; ``utilization`` is
    useful MACs / (rows * cols * cycles).
    """
    out: np.ndarray
    cycles: int
    utilization: float


def _pack_rows(matrix, lane_bits):
    """One integer per row of ``matrix``: lane ``i`` at bits ``[i*lane_bits, (i+1)*lane_bits)``."""
    dtype = f"<u{lane_bits // 8}"
    raw = np.ascontiguousarray(matrix, dtype=dtype)
    return [int.from_bytes(row.tobytes(), "little") for row in raw]


def _unpack_rows(beats, lanes):
    return np.stack([np.frombuffer(beat.to_bytes(4 * lanes, "little"), "<u4")
                     for beat in beats]) if beats else np.zeros((0, lanes), np.uint32)


@dataclass(frozen=True)
class MatmulPlan:
    """The beat streams of one tiled matmul, and how to read the result back."""
    rows: int
    cols: int
    shape: tuple              # (M, K, N)
    k_tiles: int
    n_tiles: int
    weight_beats: list
    lhs_beats: list
    acc_beats: list           # starting partial sums of the first K-tile (user acc)

    @property
    def n_results(self):
        return self.k_tiles * self.n_tiles * self.shape[0]

    @property
    def final_from(self):
        """Index of the first result beat that belongs to the last K-tile."""
        return (self.k_tiles - 1) * self.n_tiles * self.shape[0]

    @property
    def stream_args(self):
        """The keyword arguments of :func:`stream_matmul` that carry this plan."""
        return dict(weight_beats=self.weight_beats, lhs_beats=self.lhs_beats,
                    acc_beats=self.acc_beats, n_results=self.n_results,
                    final_from=self.final_from)

    def utilization(self, cycles):
        """Useful MACs of the unpadded matmul / (rows * cols * cycles)."""
        m, k, n = self.shape
        return m * k * n / (self.rows * self.cols * cycles)

    def assemble(self, final_beats):
        m, _, n = self.shape
        lanes = _unpack_rows(final_beats, self.cols).reshape(self.n_tiles, m, self.cols)
        return lanes.transpose(1, 0, 2).reshape(m, -1)[:, :n].copy().view(np.float32)


def plan_matmul(x_bits, w_bits, acc_bits=None, *, rows, cols, transpose_load=False):
    """Tile ``x_bits`` [M, K] @ ``w_bits`` [K, N] (bf16 patterns) into beat streams.

    With ``transpose_load`` each weight tile is sent column by column with the
    ``transpose`` flag set, which the MXU loads as the same tile (square arrays).
    """
    m, k = x_bits.shape
    n = w_bits.shape[1]
    k_tiles, n_tiles = -(-k // rows), -(-n // cols)
    x = np.full((m, k_tiles * rows), _PAD_X, np.uint16)
    x[:, :k] = x_bits
    w = np.full((k_tiles * rows, n_tiles * cols), _PAD_W, np.uint16)
    w[:k, :n] = w_bits
    flag = 1 << (16 * cols)               # the weights payload's transpose bit
    swap, use_acc = 1 << (16 * rows), 1 << (16 * rows + 1)

    weight_beats, lhs_beats = [], []
    for t in range(k_tiles):
        lhs = _pack_rows(x[:, t * rows:(t + 1) * rows], 16)
        first_flags = swap | (use_acc if t > 0 or acc_bits is not None else 0)
        rest_flags = first_flags & ~swap
        for j in range(n_tiles):
            tile = w[t * rows:(t + 1) * rows, j * cols:(j + 1) * cols]
            if transpose_load:
                weight_beats += [beat | flag for beat in _pack_rows(tile.T, 16)]
            else:
                weight_beats += _pack_rows(tile, 16)
            lhs_beats += [lhs[0] | first_flags] + [beat | rest_flags for beat in lhs[1:]]

    acc_beats = []
    if acc_bits is not None:
        acc = np.zeros((m, n_tiles * cols), np.uint32)
        acc[:, :n] = acc_bits
        for j in range(n_tiles):
            acc_beats += _pack_rows(acc[:, j * cols:(j + 1) * cols], 32)
    return MatmulPlan(rows, cols, (m, k, n), k_tiles, n_tiles, weight_beats, lhs_beats,
                      acc_beats)


async def stream_matmul(bench, *, weight_beats, lhs_beats, acc_beats, n_results, final_from,
                        watchdog=2000, progress=None, source=StreamSource, sink=StreamSink):
    """Test program: stream a :class:`MatmulPlan` through the MXU.

    Intermediate result beats (index < ``final_from``) go straight back in as
    ``acc_in`` beats, after the user's ``acc_beats``. ``source`` and ``sink``
    make the transactors (``verif`` passes agents with random gaps and
    protocol checks); ``progress`` is passed to
    :func:`~sim.transactors.run_transactors`. Returns the final result beats
    and, per stream port, the bench cycles of its first and last transfer.
    """
    n_acc = len(acc_beats) + final_from
    acc_source = source("acc_in", acc_beats, total=n_acc)

    def route(index, payload, _cycle):
        if index < final_from:
            acc_source.beats.append(payload)

    result = sink("result", n_results, on_beat=route)
    inputs = [source("weights", weight_beats), source("lhs", lhs_beats), acc_source]
    await run_transactors(bench, inputs + [result], watchdog=watchdog, progress=progress)
    spans = {t.port: (t.first_cycle, t.last_cycle) for t in inputs + [result]}
    return result.beats[final_from:], spans


def matmul_run(plan, params, *, seed=0, idle=0.0, stall=0.0):
    """The :class:`~sim.backends.whole_run.WholeRun` that streams ``plan`` through an MXU.

    ``params`` are the MXU's; intermediate K-tile results loop back into
    ``acc_in`` inside the simulation. ``idle`` and ``stall`` are the
    probabilities of a gap on each input stream and of backpressure on
    ``result``, drawn from ``seed``.
    """
    return WholeRun(
        "mxu", params,
        play={"weights": plan.weight_beats, "lhs": plan.lhs_beats, "acc_in": plan.acc_beats},
        record={"result": plan.n_results},
        loopbacks={"acc_in": ("result", len(plan.acc_beats) + plan.final_from)},
        gaps={"weights": idle, "lhs": idle, "acc_in": idle, "result": stall}, seed=seed,
        # A result overdue by several latencies means a hang, not a slow run.
        watchdog=1000 + 4 * mxu_latency(**params))


def run_plan(plan, *, numerics="tpu", backend="amaranth", waves=None, mxu_params=None,
             progress=None, seed=0, idle=0.0, stall=0.0, waves_scope=None):
    """Run ``plan`` on an MXU of the plan's shape as a whole run; returns a :class:`MatmulRun`.

    See :func:`matmul_run` for ``seed``, ``idle`` and ``stall``;
    ``progress(cycle, status)`` is called now and then during the run.
    """
    params = dict(rows=plan.rows, cols=plan.cols, numerics=numerics, **(mxu_params or {}))
    run = matmul_run(plan, params, seed=seed, idle=idle, stall=stall)
    result = run_whole(run, backend=backend, waves=waves, waves_scope=waves_scope,
                       progress=progress)
    spans = {port: (stats.first, stats.last) for port, stats in result.streams.items()}
    cycles = matmul_cycles(spans)
    return MatmulRun(plan.assemble(result.recorded["result"][plan.final_from:]), cycles,
                     plan.utilization(cycles))


def matmul_cycles(spans):
    """Cycles from the first input beat accepted to the last result delivered, both included.

    ``spans`` is what :func:`stream_matmul` returns beside the results.
    """
    first_in = min(first for first, _ in (spans[p] for p in ("weights", "lhs", "acc_in"))
                   if first is not None)
    return spans["result"][1] - first_in + 1


#: The largest array edge a run accepts: the tpu_v6e preset's 256. (Larger arrays do not
#: build on a 24 GB machine; docs/simulation.md.)
MAX_EDGE = 256


def _check_matrix(value, name, dtype, ndim=2):
    """``value`` as an array of ``dtype``; its bit patterns (uint16 for bf16, uint32 for
    fp32) are taken too, as :func:`sim.chip.matmul` and the command line take them."""
    bits = np.uint16 if np.dtype(dtype).itemsize == 2 else np.uint32
    if isinstance(value, np.ndarray) and value.dtype == bits:
        value = value.view(dtype)
    if not isinstance(value, np.ndarray) or value.dtype != dtype:
        got = value.dtype if isinstance(value, np.ndarray) else type(value).__name__
        raise ValueError(f"{name} must be a numpy array of {np.dtype(dtype).name} (or its "
                         f"{np.dtype(bits).name} bit patterns), not {got}")
    if value.ndim != ndim or 0 in value.shape:
        raise ValueError(f"{name} must be a non-empty 2-D array, not shape {value.shape}")
    return value


def _check_size(value, name):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")
    if value > MAX_EDGE:
        raise ValueError(f"{name} must be at most {MAX_EDGE} (the tpu_v6e preset), not "
                         f"{value:,}")


def matmul(x, w, *, rows=8, cols=8, numerics="tpu", acc=None, backend="amaranth", waves=None,
           progress=None, seed=0, idle=0.0, stall=0.0, waves_scope=None):
    """``x @ w`` on an MXU RTL of ``rows x cols`` PEs; returns :class:`MatmulRun`.

    ``x`` is ``ml_dtypes.bfloat16`` [M, K], ``w`` bfloat16 [K, N] and ``acc``,
    if given, ``np.float32`` [M, N]: each output starts from ``acc`` (else
    +0.0) and accumulates k = 0..K-1 in order, bit-identical to
    :func:`golden.mxu.matmul` (uint16 and uint32 bit patterns are taken too).
    ``rows`` and ``cols`` are at most :data:`MAX_EDGE`. ``waves`` names a .vcd or .fst
    file to write, of the instances below ``waves_scope`` (such as ``"dut.array"``; the
    compiled backends only) or of everything; ``progress`` is called now and then with
    (cycle, status) during the run.
    ``idle`` and ``stall`` (probabilities, default 0) add seeded random gaps
    to the input streams and backpressure on the results, inside the
    simulation; the results do not change, the cycles do.
    """
    x = _check_matrix(x, "x", ml_dtypes.bfloat16)
    w = _check_matrix(w, "w", ml_dtypes.bfloat16)
    if x.shape[1] != w.shape[0]:
        raise ValueError(f"x is {x.shape[0]}x{x.shape[1]} but w is {w.shape[0]}x{w.shape[1]}: "
                         f"their K differ")
    if acc is not None:
        acc = _check_matrix(acc, "acc", np.float32)
        if acc.shape != (x.shape[0], w.shape[1]):
            raise ValueError(f"acc must be {x.shape[0]}x{w.shape[1]}, not {acc.shape}")
    _check_size(rows, "rows")
    _check_size(cols, "cols")
    check_probability("idle", idle)
    check_probability("stall", stall)
    check_numerics(numerics)
    check_backend(backend)
    plan = plan_matmul(x.view(BF16.bits_dtype), w.view(BF16.bits_dtype),
                       None if acc is None else acc.view(FP32.bits_dtype), rows=rows, cols=cols)
    return run_plan(plan, numerics=numerics, backend=backend, waves=waves, progress=progress,
                    seed=seed, idle=idle, stall=stall, waves_scope=waves_scope)
