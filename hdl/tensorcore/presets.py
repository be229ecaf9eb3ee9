"""Named chip configurations: ``TensorCoreSystem`` parameters for a purpose.

``proto`` is the FPGA prototype's chip (SPEC section 4.10, issue 43): what the matmul
kernel (``sim.kernels.plan_matmul``) needs, an 8-lane VPU with an 8x8 MXU, with its
memories sized for block RAM (an LFE5U-85F has 208 18-kbit blocks, 416 KiB):

- HBM 24 Ki words (96 KiB, 48 blocks), lines of 8 words, read latency 4;
- VMEM 512 lines of 8 words (16 KiB); SMEM 1024 words; IMEM 256 bundles;
- the VPU built with only the optional ops the kernel uses (``xor``, ``max``);
- the VPU's register file in block RAM (``regfile="block_ram"``: one write port and
  synchronous reads, which Yosys maps to block RAM instead of 65,536 flip-flops, 114
  blocks for its two read ports; one instruction at a time, so the same results in more
  cycles: ``hdl.vpu.VPU``), and its ALU one sublane a cycle (``alu_width=1``: 8 word
  ALUs instead of 64, an ALU instruction in 9 cycles);
- VMEM and SMEM on one RAM port each (``ram_ports=1``: their two initiators in turns,
  which a block RAM holds as it is, where two ports that may both write do not map to
  one: ``hdl.memory.vmem.VMEM``);
- the MXU folded to one column of 8 PEs (``mxu_fold=8``: each PE holds a row of the
  8x8 tile and takes its columns one a cycle, ``hdl.mxu.MXU``'s ``fold``), the same
  results from an eighth of the PEs, a row every 8 cycles;
- pipeline stages where the chip's clock needs them, each a cycle here and there for the
  same results (docs/fpga.md, "Which paths hold the proto chip's clock"): the
  sequencer's decode stage (``decode_stage=True``: a bundle's checks, operands and next
  pc in registers before it commits, ``hdl.tensorcore.sequencer.Sequencer``), the vector
  queue's beats from a register (``vector_register=True``,
  ``hdl.tensorcore.vector_queue.VectorQueue``) and the VMEM fence a ``dma`` waits for
  from a register (``fence_register=True``, ``hdl.tensorcore.core.TensorCore``), and the
  DMA engine's beats through a queue (``beat_queue=True``, ``hdl.memory.dma.DMA``).

The register file's 114 blocks are why HBM is 24 Ki words, not 32: the device has 208.
docs/fpga.md ("The proto chip") has its area.
"""

__all__ = ["PRESETS", "preset"]

#: Preset name -> ``TensorCoreSystem`` keyword parameters.
PRESETS = {
    "proto": dict(lanes=8, mxu_results=80, vector_queue=16, vmem_lines=512, imem_depth=256,
                  words_per_cycle=8, read_latency=4, ops=("xor", "max"), hbm_words=24 << 10,
                  smem_words=1024, regfile="block_ram", ram_ports=1, mxu_fold=8,
                  alu_width=1, decode_stage=True,
                  vector_register=True, fence_register=True, beat_queue=True),
}


def preset(name):
    """A copy of preset ``name``'s parameters; ValueError naming the presets otherwise."""
    if name not in PRESETS:
        raise ValueError(f"preset must be one of {', '.join(PRESETS)}, not {name!r}")
    return dict(PRESETS[name])
