# amaranth: UnusedElaboratable=no
# (The parts are made here, so runs can reach their memories, and used by this component's
# elaborate: if the system is never elaborated, the warning about it is the one that counts.)
"""A VPU with its VMEM and, when the lanes allow, its MXU: the unit a whole run drives."""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int, check_numerics
from ..memory.vmem import VMEM
from ..mxu.matrix_unit import MXU
from .layouts import PROGRAM_LAYOUT, SUBLANES
from .vpu import VPU, Error

__all__ = ["VPUSystem"]


class VPUSystem(wiring.Component):
    """A :class:`~hdl.vpu.vpu.VPU`, a :class:`~hdl.memory.vmem.VMEM` and an optional
    ``lanes x lanes`` :class:`~hdl.mxu.matrix_unit.MXU`.

    A run loads ``vregs`` and ``vmem``, plays a program into ``program`` and
    waits for ``idle`` after the last beat; the final state is then in the
    same memories. It equals ``golden.vpu.execute`` on the same program and
    state (with an ``MXUState`` of capacity ``mxu_results``).

    Parameters
    ----------
    lanes : int
        Words per sublane and per VMEM line (default 8).
    numerics : "tpu" or "ieee"
    vmem_lines : int
        VMEM lines (default 256).
    mxu : bool or None
        Attach an MXU; by default when ``lanes`` is a multiple of 8.
    mxu_results : int
        MXU result rows a program may queue before it pops (default 16). The
        MXU's result FIFO holds them all, so pushes never wait on a pop that
        comes later in the program.
    ops : collection of str, optional
        The optional instructions to build (see :class:`~hdl.vpu.vpu.VPU`).
    regfile : "flops", "ram" or "block_ram"
        How the VPU's register file is built (see :class:`~hdl.vpu.vpu.VPU`).
    alu_width : int
        Sublanes the VPU's ALU computes a cycle (see :class:`~hdl.vpu.vpu.VPU`).
    vmem_window : int
        0 (the default) or 8: whole-vreg ``vld``/``vst`` on the VMEM's window port (see
        :class:`~hdl.vpu.vpu.VPU`).

    Ports
    -----
    program : In(stream.Signature(PROGRAM_LAYOUT))
    idle, error, error_index, executed, dual : Out
        As the :class:`~hdl.vpu.vpu.VPU`'s.

    Attributes
    ----------
    memory_images : dict
        ``"vregs"``: the register file (entry ``r`` is ``v<r>``); ``"vmem"``: the
        VMEM lines.
    """

    def __init__(self, *, lanes=8, numerics="tpu", vmem_lines=256, mxu=None, mxu_results=16,
                 ops=None, regfile="flops", alu_width=8, vmem_window=0):
        check_int("lanes", lanes, least=1)
        check_numerics(numerics)
        if mxu is None:
            mxu = lanes % SUBLANES == 0
        self.vpu = self.make_vpu(lanes=lanes, numerics=numerics, vmem_lines=vmem_lines, mxu=mxu,
                                 mxu_results=mxu_results, ops=ops, regfile=regfile,
                                 alu_width=alu_width, vmem_window=vmem_window)
        self.vmem = VMEM(lines=vmem_lines, lanes=lanes, window=vmem_window,
                         window_writes=bool(vmem_window))
        # Two rows of headroom: the MXU holds its array while its FIFO could fill.
        self.mxu = self.make_mxu(rows=lanes, cols=lanes, numerics=numerics,
                                 fifo_depth=mxu_results + 2) if mxu else None
        # What a whole run may load and read back (sim.blocks.memory_images).
        # The VPU's instance is "core": a top module named "vpu" with an instance "vpu"
        # makes hierarchical names Icarus cannot resolve.
        self.memory_images = {"vregs": (self.vpu.regfile, "core.regfile"),
                              "vmem": (self.vmem.words, "vmem.words")}
        super().__init__({
            "program": In(stream.Signature(PROGRAM_LAYOUT)),
            "idle": Out(1), "error": Out(Error), "error_index": Out(32),
            "executed": Out(32), "dual": Out(32),
        })

    def make_vpu(self, **params):
        """The VPU. Export overrides this (and the next) to emit repeated modules once."""
        return VPU(**params)

    def make_mxu(self, **params):
        return MXU(**params)

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = vpu = self.vpu
        m.submodules.vmem = vmem = self.vmem
        wiring.connect(m, wiring.flipped(self.program), vpu.program)
        wiring.connect(m, vpu.vmem, vmem.core)
        if vpu.window_lines:
            wiring.connect(m, vpu.vmem_window, vmem.window)
        if self.mxu is not None:
            m.submodules.mxu = mxu = self.mxu
            wiring.connect(m, vpu.mxu_weights, mxu.weights)
            wiring.connect(m, vpu.mxu_lhs, mxu.lhs)
            wiring.connect(m, vpu.mxu_acc, mxu.acc_in)
            wiring.connect(m, mxu.result, vpu.mxu_result)
        m.d.comb += [getattr(self, name).eq(getattr(vpu, name))
                     for name in ("idle", "error", "error_index", "executed", "dual")]
        return m
