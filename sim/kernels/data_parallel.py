"""The data-parallel step as one TensorCore program per chip: each chip multiplies its
shard of a batch by the shared weights on its MXU (:mod:`sim.kernels.matmul`), then the
chips all-reduce the fp32 products (:mod:`sim.kernels.collective`).

A chip's program is three parts, run in turn:

1. *The matmul*, ``act(x_r @ w)`` from HBM to HBM, placed after the all-reduce's memories
   (below).
2. *The bridge*: wait for the matmul's last output DMA, then one 2-D DMA moves the
   [M, N] product from HBM into the all-reduce's buffer (VMEM words ``[0, M*N)``, row-major)
   on a flag of its own, and the program waits for its words.
3. *The all-reduce* of :func:`~sim.kernels.collective.plan_collective`, unchanged.

Placement. The all-reduce keeps its VMEM from line 0, its SMEM from word 0 and its flags
from 0 (its ``result`` reads VMEM there); the bridge's descriptor record follows its SMEM,
and the matmul's VMEM, SMEM and two flags follow the all-reduce's and the bridge's.

Why the parts may share a chip. The chips do not start the all-reduce together: a chip
whose matmul ends first pushes its products to a chip still multiplying. Those pushes
land in the all-reduce's staging area and count on its flags, which neither the matmul nor
the bridge touches, and the receiver consumes them only once it reaches its all-reduce.
Copies into the buffer itself (the all-gather half) carry sums that include the
receiver's own contribution, which it sends only after its bridge: they land after the
bridge has written the buffer.
"""

from dataclasses import dataclass

import numpy as np

from golden import collectives as gc
from golden import memory as golden_memory
from golden import tensorcore as tc
from golden.formats import BF16, as_bits

from .collective import CollectivePlan, plan_collective
from .matmul import MatmulKernel, plan_matmul

__all__ = ["DataParallelPlan", "plan_data_parallel"]

_LANES = 8               # words a VMEM line: the matmul kernel's lanes
_IMM = 1 << 15           # signed 16-bit immediates


@dataclass(frozen=True)
class DataParallelPlan:
    """A planned data-parallel step: per chip id the program and initial images (None for
    a failed chip), and the two plans it joins.

    ``programs`` (assembly text), ``hbm``, ``vmem`` and ``smem`` (flat uint32 images);
    ``n_flags``, ``vmem_lines``, ``smem_words``, ``hbm_words`` and ``imem_bundles``, what
    the programs need of a chip; ``mxu_results``, the MXU result queue the matmul needs;
    ``matmul`` the first live chip's :class:`~sim.kernels.matmul.MatmulKernel` (every
    chip's differs from it only in its HBM image), ``collective`` the all-reduce's
    :class:`~sim.kernels.collective.CollectivePlan`; ``shape`` (M, N), the product's.
    """
    programs: list
    hbm: list
    vmem: list
    smem: list
    n_flags: int
    vmem_lines: int
    smem_words: int
    hbm_words: int
    imem_bundles: int
    mxu_results: int
    matmul: MatmulKernel
    collective: CollectivePlan
    shape: tuple

    def result(self, vmems):
        """The all-reduced products, uint32 [C, M, N] (row r the r-th live chip's, every
        row the same sums), from the final flat VMEM images of every chip id."""
        return self.collective.result(vmems).reshape(-1, *self.shape)


def plan_data_parallel(shards, w, *, topology, activation=None, chunks=1, push_words=None):
    """Plan the data-parallel step (module docstring); returns a :class:`DataParallelPlan`.

    Parameters
    ----------
    shards : [C, M, K] bf16 (``ml_dtypes.bfloat16`` values or uint16 patterns), row r the
        r-th live chip's shard of the batch
    w : [K, N] bf16, the weights every chip holds
    topology : golden.topology.Topology, or a shape such as "2x2"
    activation : None or "relu", applied to each chip's product before the all-reduce
    chunks, push_words : the all-reduce's (:func:`~sim.kernels.collective.plan_collective`)

    The result equals ``golden.collectives.collective("all_reduce", P, topology=...)``
    where row r of P is ``golden.mxu.matmul(shards[r], w)`` (then ReLU) flattened.

    Raises
    ------
    ValueError
        With a one-line reason: bad shapes, or products whose all-reduce blocks are not
        whole VMEM lines (the message says which M*N work).
    """
    topology = gc._topology(topology)
    chips = np.flatnonzero(topology.alive).tolist()
    shards = as_bits(shards, BF16, name="shards")
    w = as_bits(w, BF16, name="w")
    if shards.ndim != 3 or shards.shape[0] != len(chips):
        raise ValueError(f"shards must be [C, M, K] with C = {len(chips)}, the live chips of "
                         f"{topology!r}, not {list(shards.shape)}")
    m, n = shards.shape[1], w.shape[-1]
    if m * n >= _IMM:
        raise ValueError(f"the products have {m * n} words a chip, more than a wait operand "
                         f"holds ({_IMM - 1}): use a smaller batch shard")
    try:
        collective = plan_collective("all_reduce", np.zeros((len(chips), m * n), np.uint32),
                                     topology=topology, lanes=_LANES, chunks=chunks,
                                     push_words=push_words, align=1)
    except ValueError as error:
        raise ValueError(f"the all-reduce of {m}x{n} products: {error}") from None
    if not collective.layout.identity:
        # The bridge moves the product into words [0, M*N) in one DMA: the all-reduce's
        # blocks must start on lines there, not be spread by its LineLayout.
        period = len(chips) * len(gc._plan(topology).axes) * 2 * _LANES
        raise ValueError(f"the all-reduce of {m}x{n} products: the bridge needs reduce "
                         f"blocks of whole VMEM lines, so M*N must be a multiple of "
                         f"C*K*2*lanes = {period}, not {m * n}")
    bridge_at, bridge_flag = collective.smem_words, collective.n_flags
    if bridge_flag + 3 > golden_memory.MAX_FLAGS:
        raise ValueError(f"the all-reduce in {chunks} chunks uses {bridge_flag} flags, and the "
                         f"matmul needs 3 more of the {golden_memory.MAX_FLAGS}: use fewer "
                         f"chunks")
    place = dict(vmem_base=collective.vmem_lines, flag_base=bridge_flag + 1,
                 smem_base=bridge_at + tc.DESCRIPTOR_WORDS, halt=False)
    kernels = [plan_matmul(shard, w, activation=activation, **place) for shard in shards]
    first = kernels[0]
    # The [M, N] product out of the padded [Mp, Np] one, row-major into words [0, M*N).
    bridge = golden_memory.Descriptor(("hbm", first.out_base), ("vmem", 0), (n, m),
                                      (1, first.padded[1]), (1, n), bridge_flag)
    bridge_text = (f"wait f{first.out_flag}, {first.out_words}\n"
                   f"dma {bridge_at}\n"
                   f"wait f{bridge_flag}, {m * n}\n")

    programs, hbm, vmem, smem = ([None] * topology.n_chips for _ in range(4))
    for chip, kernel in zip(chips, kernels):
        programs[chip] = kernel.program + bridge_text + collective.programs[chip]
        hbm[chip] = kernel.hbm
        vmem[chip] = kernel.vmem.copy()
        vmem[chip][:collective.vmem[chip].size] = collective.vmem[chip]
        smem[chip] = kernel.smem.copy()
        smem[chip][:collective.smem[chip].size] = collective.smem[chip]
        smem[chip][bridge_at:bridge_at + tc.DESCRIPTOR_WORDS] = tc.descriptor_words(bridge)
    bundles = max(len(tc.program_words(p)) for p in programs if p is not None)
    return DataParallelPlan(
        programs=programs, hbm=hbm, vmem=vmem, smem=smem,
        n_flags=max(16, 1 << first.out_flag.bit_length()),
        vmem_lines=first.vmem.size // _LANES, smem_words=first.smem.size,
        hbm_words=first.hbm.size, imem_bundles=bundles, mxu_results=first.mxu_results,
        matmul=first, collective=collective, shape=(m, n))
