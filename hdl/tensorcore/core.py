# amaranth: UnusedElaboratable=no
# (The parts are made here, so runs can reach their memories, and used by this component's
# elaborate: if the core is never elaborated, the warning about it is the one that counts.)
"""The TensorCore: sequencer, IMEM, SMEM, the vector queue, the VPU and the MXU."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.memory_port import MemoryPortSignature, line_addr_width
from ..lib.params import check_bool, check_int, check_numerics
from ..memory.dma_system import core_signature
from ..memory.layouts import descriptor_layout
from ..memory.port_share import PortShare
from ..memory.vmem import VMEM
from ..mxu.matrix_unit import MXU
from ..vpu import Error as VpuError
from ..vpu import isa as vpu_isa
from ..vpu.layouts import SUBLANES
from ..vpu.vpu import VPU
from .encoding import Error
from .isa import BUNDLE_WORDS, VECTOR_SLOTS
from .sequencer import STALL_LAYOUT, Sequencer, State
from .vector_queue import VectorQueue

__all__ = ["TensorCore", "SMEM_WINDOW", "VMEM_WINDOW"]

#: Words the ``dma`` records' SMEM port reads a request, by default with two RAM ports: a
#: record of 12 words in two requests, with the sequencer's port reading from its end.
SMEM_WINDOW = 8

#: VMEM lines a chip's whole-vreg ``vld``/``vst`` moves a request by default, with two RAM
#: ports (``TensorCoreSystem``'s ``vmem_window``): a vreg's 8 sublanes, as a VMEM banked
#: by sublane gives (TPU v4's VPU loads and stores a whole vreg a cycle).
VMEM_WINDOW = SUBLANES


class TensorCore(wiring.Component):
    """A :class:`~hdl.tensorcore.sequencer.Sequencer` with IMEM, SMEM, the VPU and its MXU.

    IMEM (a bundle a line) and SMEM (a word a line) are single-cycle
    :class:`~hdl.memory.vmem.VMEM` arrays: the sequencer holds IMEM's core port (the
    ``dma`` port is left for a host) and both of SMEM's (loads and stores, and DMA
    descriptor records, which also use the first in the cycles without loads or
    stores). Each bundle's vector words go through a
    :class:`~hdl.tensorcore.vector_queue.VectorQueue` to the :class:`~hdl.vpu.vpu.VPU`,
    so scalar execution runs up to ``vector_queue`` bundles ahead of it; an optional
    ``lanes x lanes`` :class:`~hdl.mxu.matrix_unit.MXU` sits behind the VPU.

    VMEM and the sync flags are not in here but behind ``memory``, the
    :func:`hdl.memory.dma_system.core_signature` port, so that a chip joins the core to
    a :class:`~hdl.memory.dma_system.DmaSystem` (its VMEM, flags and DMA engine): the
    VPU's VMEM port and the sequencer's flag set and wait go there, the flags' values
    come back on ``flag_values``, and checked descriptors leave on ``dma``. Joined so (or
    to a VMEM and :class:`~hdl.memory.sync_flags.SyncFlags` alone, for programs without
    ``dma``), the final state equals ``golden.tensorcore.run``'s on the same program and
    images (``mxu_results`` as the ISS's, ``imem_depth`` its ``imem_bundles``).

    Parameters
    ----------
    imem_depth, smem_words, n_flags, vmem_lines, mxu_results, hbm_words, n_chips : int
        As the :class:`~hdl.tensorcore.sequencer.Sequencer`'s.
    lanes : int
        VPU lanes and VMEM words per line (default 8).
    numerics : "tpu" or "ieee"
    mxu : bool or None
        Attach an MXU (default: when ``lanes`` is a multiple of 8).
    vector_queue : int
        Bundles the vector queue holds (default 4).
    ops : collection of str, optional
        The VPU's optional instructions to build (:class:`~hdl.vpu.vpu.VPU`'s ``ops``):
        a program may use only these; another stops the VPU with ``vpu_error``
        ``unsupported``, a reason the ISS does not have.
    regfile : "flops", "ram" or "block_ram"
        How the VPU's register file is built (:class:`~hdl.vpu.vpu.VPU`'s ``regfile``;
        ``"ram"`` and ``"block_ram"`` for FPGAs: the same results in more cycles).
    alu_width : int
        Sublanes the VPU's ALU computes a cycle (:class:`~hdl.vpu.vpu.VPU`'s ``alu_width``):
        8 (the default), or fewer with ``regfile`` in RAM, for FPGAs.
    smem_guests : int
        0 (the default) or 1: with 1, ``smem_guest`` reads SMEM through its second port,
        in turns with the DMA issue's descriptor reads when they take that port
        (``smem_window=0``; a chip's SparseCore reading its work items).
    ram_ports : int
        Ports of the SMEM's storage (:class:`~hdl.memory.vmem.VMEM`'s ``ram_ports``): 2
        (the default), or 1 for FPGA block RAM, the sequencer's and the descriptor reads
        in turns (the descriptor records then read on one port: a second gains nothing).
    mxu_fold : int
        Columns of the MXU's tile per PE (:class:`~hdl.mxu.matrix_unit.MXU`'s ``fold``,
        dividing ``lanes``): 1 (the default), or more for FPGAs, the same results from
        ``lanes / mxu_fold`` columns of PEs at a row every ``mxu_fold`` cycles.
    smem_window : int or None
        Words a request of the ``dma`` records' own SMEM port reads (SMEM's read-only
        ``window`` port, :class:`~hdl.memory.vmem.VMEM`), or 0: the records are read on
        SMEM's second port, a word a request. Default (None): 8 with ``ram_ports=2``, so
        that back-to-back ``dma`` bundles go every 4 cycles (8 on one-word reads:
        :class:`~hdl.tensorcore.dma_issue.DmaIssue`), and 0 with ``ram_ports=1``, whose
        storage has no more ports.
    decode_stage : bool
        The :class:`~hdl.tensorcore.sequencer.Sequencer`'s: False (the default), or True
        for FPGAs, a register between a bundle's decode and its commit (a cycle more a
        bundle; the same results).
    vector_register : bool
        The vector queue's beats leave from a register
        (:class:`~hdl.tensorcore.vector_queue.VectorQueue`'s ``registered``): False (the
        default), or True for FPGAs, a cycle more from a bundle to the VPU.
    fence_register : bool
        The VMEM fence a ``dma`` waits for comes from a flip-flop: False (the default), or
        True for FPGAs, a cycle later, which the VPU's load/store unit no longer reaches
        through the DMA issue into the sequencer in one cycle.
    vmem_window : int
        0 (the default) or 8: the VPU's stride-1 ``vld`` and ``vst`` move a whole vreg a
        request on ``memory.vmem_window`` (:class:`~hdl.vpu.vpu.VPU`'s ``vmem_window``);
        the memory behind ``memory`` must then have that port (a
        :class:`~hdl.memory.dma_system.DmaSystem` with ``vmem_window=8``).

    Ports
    -----
    start : In(1)
        Starts the core at pc 0 (once, from reset).
    smem_guest : In(MemoryPortSignature(addr_width, words=1)), with ``smem_guests=1``
    memory : Out(core_signature(vmem_lines=vmem_lines, lanes=lanes, vmem_window=vmem_window))
        VMEM (the VPU's loads and stores), flag set and flag wait.
    flag_values : In(ArrayLayout(32, n_flags))
        The flags' values, for ``fadd`` and ``waitc``.
    dma : Out(stream.Signature(descriptor_layout))
        Issued DMA descriptors, already checked, each after the VMEM fence.
    state, pc, error, error_pc, bundles, waiting, dma_busy, stall : Out
        The sequencer's.
    drained : Out(1)
        The vector queue is empty and the VPU has finished every instruction it took.
        (A ``dma`` waits for less: every ``vld``/``vst`` before it performed, whatever
        else the VPU and MXU still do.)
    done : Out(1)
        The core has stopped (halted or an error) and is ``drained`` (a chip waits for
        its DMAs too).
    vpu_error : Out(hdl.vpu.Error)
        The VPU's stop reason; 0 unless the VPU lacks an op the program uses.

    Attributes
    ----------
    memory_images : dict
        ``imem``, ``smem``, ``sregs``, ``vregs``: ``(Memory, path)`` for a run to load and
        read back.
    """

    def __init__(self, *, imem_depth=256, smem_words=1024, n_flags=16, lanes=8,
                 numerics="tpu", vmem_lines=256, mxu=None, mxu_results=16, vector_queue=4,
                 ops=None, hbm_words=1 << 16, n_chips=1, smem_guests=0, regfile="flops",
                 ram_ports=2, mxu_fold=1, alu_width=8, smem_window=None, vmem_window=0,
                 decode_stage=False, vector_register=False, fence_register=False):
        check_int("lanes", lanes, least=1)
        check_int("ram_ports", ram_ports, least=1, most=2)
        if smem_window is None:
            smem_window = SMEM_WINDOW if ram_ports == 2 else 0
        self.smem_window = check_int("smem_window", smem_window, least=0)
        check_numerics(numerics)
        if mxu is None:
            mxu = lanes % SUBLANES == 0
        self.sequencer = Sequencer(imem_depth=imem_depth, smem_words=smem_words,
                                   n_flags=n_flags, lanes=lanes, vmem_lines=vmem_lines,
                                   mxu=mxu, mxu_results=mxu_results, hbm_words=hbm_words,
                                   n_chips=n_chips, record_ports=ram_ports,
                                   record_window=max(smem_window, 1),
                                   decode_stage=decode_stage)
        self.queue = VectorQueue(depth=vector_queue, registered=vector_register)
        self.fence_register = check_bool("fence_register", fence_register)
        self.imem = VMEM(lines=imem_depth, lanes=BUNDLE_WORDS)
        self.smem = VMEM(lines=smem_words, lanes=1, ram_ports=ram_ports, window=smem_window)
        self.smem_guests = check_int("smem_guests", smem_guests, least=0, most=1)
        guest = {}
        if smem_guests:
            self.smem_signature = MemoryPortSignature(addr_width=line_addr_width(smem_words),
                                                      words=1)
            guest = {"smem_guest": In(self.smem_signature)}
        self.vpu = VPU(lanes=lanes, numerics=numerics, vmem_lines=vmem_lines, mxu=mxu,
                       mxu_results=mxu_results, ops=ops, regfile=regfile, alu_width=alu_width,
                       vmem_window=vmem_window)
        # Two rows of headroom, as hdl.vpu.VPUSystem: the MXU holds its array while its
        # FIFO could fill.
        self.mxu = MXU(rows=lanes, cols=lanes, numerics=numerics, fold=mxu_fold,
                       fifo_depth=mxu_results + 2) if mxu else None
        self.lanes, self.n_flags = lanes, n_flags
        self.memory_images = {
            "imem": (self.imem.words, "imem.words"), "smem": (self.smem.words, "smem.words"),
            "sregs": (self.sequencer.sregs, "sequencer.sregs"),
            "vregs": (self.vpu.regfile, "vpu.regfile"),
        }
        super().__init__({
            **guest,
            "start": In(1),
            "memory": Out(core_signature(vmem_lines=vmem_lines, lanes=lanes,
                                         vmem_window=vmem_window)),
            "flag_values": In(data.ArrayLayout(32, n_flags)),
            "dma": Out(stream.Signature(descriptor_layout)),
            "state": Out(State), "pc": Out(32), "error_pc": Out(32), "bundles": Out(32),
            "error": Out(Error), "waiting": Out(1), "dma_busy": Out(1),
            "stall": Out(STALL_LAYOUT),
            "drained": Out(1), "done": Out(1), "vpu_error": Out(VpuError),
        })

    def _vmem_fence(self, m, seq, vpu):
        """High when every ``vld``/``vst`` sent to the vector queue has been performed:
        none is waiting in the queue or the VPU, and the load/store unit is idle (or the
        VPU has stopped, dropping the rest). Unlike ``drained`` it does not wait for the
        MXU, the ALUs or pops, so a DMA can start while the MXU works. With
        ``fence_register``, from a flip-flop, a cycle later."""
        nop = vpu_isa.Opcode.NOP
        words = seq.vector.payload.words
        entering = seq.vector.valid & seq.vector.ready
        loads_stores = [words[VECTOR_SLOTS.index(slot)][26:] != nop for slot in ("vld", "vst")]
        waiting = Signal(16)          # at most two per bundle the queue and the VPU hold
        m.d.sync += waiting.eq(waiting + Mux(entering, loads_stores[0] + loads_stores[1], 0)
                               - vpu.vmem_issue)
        fence = Signal()
        if self.fence_register:
            # A cycle late, and low in a cycle a vld or vst enters: then it holds in the
            # next cycle too, so it is never high early.
            m.d.sync += fence.eq(((waiting == 0) & vpu.vmem_idle & ~(entering & (
                loads_stores[0] | loads_stores[1]))) | (vpu.error != 0))
        else:
            m.d.comb += fence.eq(((waiting == 0) & vpu.vmem_idle) | (vpu.error != 0))
        return fence

    def elaborate(self, platform):
        m = Module()
        m.submodules.sequencer = seq = self.sequencer
        m.submodules.imem = imem = self.imem
        m.submodules.smem = smem = self.smem
        m.submodules.queue = queue = self.queue
        m.submodules.vpu = vpu = self.vpu
        wiring.connect(m, seq.imem, imem.core)
        wiring.connect(m, seq.smem, smem.core)
        if self.smem_window:
            wiring.connect(m, seq.smem_record, smem.window)
            if self.smem_guests:
                wiring.connect(m, wiring.flipped(self.smem_guest), smem.dma)
        elif self.smem_guests:
            # The DMA issue's descriptor reads and a guest's (the SparseCore's work items)
            # take turns on SMEM's second port.
            m.submodules.smem_share = share = PortShare(signature=self.smem_signature,
                                                        initiators=2, depth=2)
            wiring.connect(m, seq.smem_record, share.initiators[0])
            wiring.connect(m, wiring.flipped(self.smem_guest), share.initiators[1])
            wiring.connect(m, share.memory, smem.dma)
        else:
            wiring.connect(m, seq.smem_record, smem.dma)
        wiring.connect(m, seq.vector, queue.bundles)
        wiring.connect(m, queue.program, vpu.program)
        wiring.connect(m, seq.dma, wiring.flipped(self.dma))
        wiring.connect(m, vpu.vmem, wiring.flipped(self.memory.vmem))
        if vpu.window_lines:
            wiring.connect(m, vpu.vmem_window, wiring.flipped(self.memory.vmem_window))
        wiring.connect(m, seq.flag_set, wiring.flipped(self.memory.flag_set))
        wiring.connect(m, seq.flag_wait, wiring.flipped(self.memory.flag_wait))
        if self.mxu is not None:
            m.submodules.mxu = mxu = self.mxu
            wiring.connect(m, vpu.mxu_weights, mxu.weights)
            wiring.connect(m, vpu.mxu_lhs, mxu.lhs)
            wiring.connect(m, vpu.mxu_acc, mxu.acc_in)
            wiring.connect(m, mxu.result, vpu.mxu_result)
        stopped = (seq.state == State.HALTED) | (seq.state == State.ERROR)
        m.d.comb += [
            seq.flag_values.eq(self.flag_values), seq.start.eq(self.start),
            seq.fence.eq(self._vmem_fence(m, seq, vpu)),
            *(getattr(self, name).eq(getattr(seq, name))
              for name in ("state", "pc", "error_pc", "bundles", "error", "waiting",
                           "dma_busy", "stall")),
            self.vpu_error.eq(vpu.error),
            self.drained.eq(queue.empty & vpu.idle),
            self.done.eq(stopped & self.drained),
        ]
        return m
