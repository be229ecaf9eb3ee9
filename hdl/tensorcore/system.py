# amaranth: UnusedElaboratable=no
# (The parts are made here, so runs can reach their memories, and used by this component's
# elaborate: if the system is never elaborated, the warning about it is the one that counts.)
"""A TensorCore joined to the memory system: DMA engine, HBM model, VMEM and sync flags."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..ici.layouts import CHIP_BITS, flit_layout
from ..lib.params import check_int
from ..memory.dma import COUNT_BITS
from ..lib.numbered_ports import port, port_name
from ..memory.dma_system import DmaSystem
from ..sparsecore.engine import SparseCoreEngine
from .core import VMEM_WINDOW, TensorCore
from .encoding import Error
from .isa import DEFAULT_HBM_WORDS
from .sequencer import STALL_CAUSES, State
from .sparse_issue import SparseIssue

__all__ = ["TensorCoreSystem"]

_FROM_CORE = ("state", "pc", "error_pc", "bundles", "error", "waiting", "dma_busy",
              "vpu_error")


class TensorCoreSystem(wiring.Component):
    """A :class:`~hdl.tensorcore.core.TensorCore` on a
    :class:`~hdl.memory.dma_system.DmaSystem`: the VPU loads and stores the system's
    VMEM, the sequencer sets and waits on its flags, and ``dma`` bundles go to its DMA
    engine. On its own it is a chip without a router: a run loads the memories
    (:attr:`memory_images`), raises ``start`` and waits for ``done``; the final state
    then equals ``golden.tensorcore.run``'s with ``hbm`` and ``vmem`` of the same sizes.
    With ``n_chips`` above 1 it also has the memory system's packet ports, for a router
    (``hdl.system.ChipNode``): remote pushes leave on ``push`` (and ``push1``, ... with
    ``network_ports`` above 1), and packets for this chip arrive on ``receive`` (and
    ``receive1``, ...).

    Parameters
    ----------
    imem_depth, smem_words, n_flags, lanes, numerics, vmem_lines, mxu, mxu_results, \
vector_queue, ops, regfile, mxu_fold, alu_width, smem_window, \
decode_stage, vector_register, fence_register
        The :class:`~hdl.tensorcore.core.TensorCore`'s.
    vmem_window : int or None
        The core's and the memory system's: 8 (a stride-1 ``vld`` or ``vst`` moves its
        whole vreg in one VMEM request, as a VMEM banked by sublane does) or 0 (a line a
        cycle). Default (None): 8 with ``ram_ports=2``
        (:data:`~hdl.tensorcore.core.VMEM_WINDOW`), and 0 with ``ram_ports=1``, whose
        storage has no more ports.
    hbm_words : int
        HBM words (default ``golden.tensorcore.DEFAULT_HBM_WORDS``, at most ``2**24``).
    read_latency, words_per_cycle, outstanding : int
        The memory system's (:class:`~hdl.memory.dma_system.DmaSystem`).
    beat_queue : bool
        The DMA engine's (:class:`~hdl.memory.dma.DMA`): False (the default), or True to
        queue its beats between address generation and the bursts, for FPGAs.
    ram_ports : int
        Ports of the VMEM's and SMEM's storages: 2 (the default), or 1, each memory's two
        initiators in turns on one read-write port, which FPGA block RAM holds
        (:class:`~hdl.memory.vmem.VMEM`'s ``ram_ports``): the same results in more cycles.
    jitter : int
        Up to this many cycles of seeded latency added to each HBM read (default 0: the
        fixed ``read_latency``), the HBM model's (:class:`~hdl.memory.hbm.HBM`); the DMA
        engine and the SparseCore see it alike. Results do not change, only when they
        land.
    n_chips : int
        Chips a remote push may name (default 1: none, and no packet ports).
    flit_words : int
        Words per flit of the packet ports (default 1).
    network_ports : int
        Push ports and receive ports, with ``n_chips`` above 1 (default 1): the memory
        system's (:class:`~hdl.memory.dma_system.DmaSystem`).
    push_dealing : str
        How the DMA deals pushes to its ``network_ports``: ``"turn"`` (default) or
        ``"empty"`` (:class:`~hdl.memory.dma_push_ports.PushPorts`).
    sparsecores : int
        0 (the default: the chip as it was) or 1: a SparseCore
        (:class:`~hdl.sparsecore.SparseCoreEngine`) on the chip's HBM, shared with the DMA
        engine turn by turn; the core posts its work items in SMEM
        (:class:`~hdl.tensorcore.sparse_issue.SparseIssue`: the item below a doorbell in the
        last SMEM words) and waits for the item's flag.
    sparsecore : dict, optional
        The SparseCore tile's parameters (``hdl.sparsecore.SparseCoreTile``; ``numerics``
        and ``words_per_cycle`` are the chip's), and ``spmem_rows``, the engine's Spmem
        (:class:`~hdl.sparsecore.SparseCoreEngine`; default 0).

    Ports
    -----
    start : In(1)
    hbm_seed : In(32), with ``jitter`` above 0
        Seed of the HBM jitter, held from before ``start`` until the first DMA descriptor
        (the memory system's ``seed``): a run's jitter is a function of it.
    sparse_status, sparse_batches, sparse_hbm_reads : Out, with ``sparsecores=1``
        The SparseCore engine's ``status``, ``batches`` and ``hbm_reads``.
    state, pc, error, error_pc, bundles, waiting, dma_busy, vpu_error : Out
        The core's.
    flags : Out(ArrayLayout(32, n_flags))
        The sync flags.
    dma_rejected : Out(32)
        Descriptors the DMA engine rejected: 0, since the sequencer issues only
        descriptors its own check accepted (a fault of the core otherwise).
    drained : Out(1)
        The VPU has finished and the memory system holds no transfer.
    done : Out(1)
        The core has stopped and the system is ``drained`` (and the SparseCore idle, with
        no work item posted and not taken).
    busy : Out(1)
        Not ``done``, and not a wait that nothing in flight can end (the core waits on
        a flag while the system is ``drained``): a run's watchdog counts the cycles it
        is low.
    push, push1, ... : Out(stream.Signature(flit_layout(flit_words))), with ``n_chips`` > 1
        Packets of remote pushes, to the router's injection ports.
    receive, receive1, ... : In(stream.Signature(flit_layout(flit_words))), with ``n_chips`` > 1
        Packets for this chip, from the router's ejection ports.
    chip : In(8), with ``n_chips`` > 1
        This chip's id.
    mxu_beats, dma_cycles, overlap_cycles : Out(32)
        Performance counters from ``start``: LHS rows the MXU took (each a cycle of
        the whole array), cycles with a DMA transfer in flight, and cycles with both.
    stall_fetch, stall_delay, stall_dma, stall_wait, stall_smem, stall_vector : Out(32)
        Cycles from ``start`` until the core halts or faults in which the sequencer
        issued nothing, one cause each (``hdl.tensorcore.sequencer.STALL_CAUSES``); the
        cycles after a halt in which the VPU and DMA engine finish count in none.

    Attributes
    ----------
    memory_images : dict
        ``imem``, ``smem``, ``sregs``, ``vregs``, ``vmem``, ``hbm``: ``(Memory, path)``.
    """

    def __init__(self, *, imem_depth=256, smem_words=1024, n_flags=16, lanes=8,
                 numerics="tpu", vmem_lines=256, mxu=None, mxu_results=16, vector_queue=4,
                 ops=None, hbm_words=DEFAULT_HBM_WORDS, read_latency=4, words_per_cycle=1,
                 outstanding=4, n_chips=1, flit_words=1, network_ports=1, sparsecores=0,
                 sparsecore=None, regfile="flops", jitter=0, ram_ports=2, mxu_fold=1,
                 alu_width=8, push_dealing="turn", smem_window=None, vmem_window=None,
                 decode_stage=False, vector_register=False, fence_register=False,
                 beat_queue=False):
        self.sparsecores = check_int("sparsecores", sparsecores, least=0, most=1)
        if sparsecore is not None and not sparsecores:
            raise ValueError("sparsecore= gives the SparseCore's parameters: it needs "
                             "sparsecores=1")
        if vmem_window is None:
            vmem_window = VMEM_WINDOW if ram_ports == 2 else 0
        tile = dict(sparsecore or {})
        spmem_rows = tile.pop("spmem_rows", 0)
        for name in ("numerics", "words_per_cycle", "hbm"):
            if name in tile:
                raise TypeError(f"the SparseCore's {name} is the chip's, not sparsecore=")
        self.core = TensorCore(imem_depth=imem_depth, smem_words=smem_words, n_flags=n_flags,
                               lanes=lanes, numerics=numerics, vmem_lines=vmem_lines, mxu=mxu,
                               mxu_results=mxu_results, vector_queue=vector_queue, ops=ops,
                               hbm_words=hbm_words, n_chips=n_chips, smem_guests=sparsecores,
                               regfile=regfile, ram_ports=ram_ports, mxu_fold=mxu_fold,
                               alu_width=alu_width, smem_window=smem_window,
                               vmem_window=vmem_window, decode_stage=decode_stage,
                               vector_register=vector_register,
                               fence_register=fence_register)
        self.system = DmaSystem(hbm_size=hbm_words, vmem_lines=vmem_lines, lanes=lanes,
                                n_flags=n_flags, read_latency=read_latency,
                                words_per_cycle=words_per_cycle, outstanding=outstanding,
                                n_chips=n_chips, flit_words=flit_words,
                                network_ports=network_ports, push_dealing=push_dealing,
                                guests=sparsecores,
                                jitter=jitter, ram_ports=ram_ports, vmem_window=vmem_window,
                                beat_queue=beat_queue)
        self.jitter = jitter
        self.engine = self.sparse_issue = None
        if sparsecores:
            addr_width = self.system.hbm_signature.addr_width
            self.engine = SparseCoreEngine(
                tile=dict(tile, numerics=numerics, words_per_cycle=words_per_cycle),
                addr_width=addr_width, spmem_rows=spmem_rows)
            self.sparse_issue = SparseIssue(smem_words=smem_words, addr_width=addr_width)
        self.networked = n_chips > 1
        self.network_ports = self.system.network_ports
        self.sequencer, self.lanes = self.core.sequencer, lanes
        self.memory_images = {name: (memory, f"core.{path}")
                              for name, (memory, path) in self.core.memory_images.items()}
        self.memory_images |= {"vmem": (self.system.vmem_words, "system.vmem.words"),
                               "hbm": (self.system.hbm_words, "system.hbm.words")}
        packets = {}
        if self.networked:
            flits = stream.Signature(flit_layout(flit_words))
            packets = {"chip": In(CHIP_BITS)}
            for j in range(network_ports):
                packets |= {port_name("push", j): Out(flits), port_name("receive", j): In(flits)}
        sparse = {}
        if sparsecores:
            sparse = {"sparse_status": Out(self.engine.status.shape()),
                      "sparse_batches": Out(32), "sparse_hbm_reads": Out(32)}
        seed = {"hbm_seed": In(32)} if jitter else {}
        super().__init__({
            **packets, **sparse, **seed, "start": In(1), "state": Out(State), "pc": Out(32),
            "error_pc": Out(32),
            "bundles": Out(32), "error": Out(Error), "waiting": Out(1),
            "dma_busy": Out(1), "vpu_error": Out(self.core.vpu_error.shape()),
            "flags": Out(data.ArrayLayout(32, n_flags)), "dma_rejected": Out(COUNT_BITS),
            "drained": Out(1), "done": Out(1), "busy": Out(1),
            "mxu_beats": Out(32), "dma_cycles": Out(32), "overlap_cycles": Out(32),
            **{f"stall_{cause}": Out(32) for cause in STALL_CAUSES},
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        m.submodules.system = system = self.system
        wiring.connect(m, core.memory, system.core)
        wiring.connect(m, core.dma, system.descriptors)
        if self.networked:
            for j in range(self.network_ports):
                wiring.connect(m, port(system, "push", j), wiring.flipped(port(self, "push", j)))
                wiring.connect(m, wiring.flipped(port(self, "receive", j)),
                               port(system, "receive", j))
            m.d.comb += system.chip.eq(self.chip)
        if self.jitter:
            m.d.comb += system.seed.eq(self.hbm_seed)
        drained, done = core.drained & system.finished, core.done & system.finished
        if self.sparsecores:
            m.submodules.sparsecore = engine = self.engine
            m.submodules.sparse_issue = issue = self.sparse_issue
            wiring.connect(m, issue.smem, core.smem_guest)
            wiring.connect(m, issue.work, engine.work)
            wiring.connect(m, engine.hbm, system.guest_hbm)
            wiring.connect(m, engine.flag_add, system.guest_flag)
            m.d.comb += [issue.start.eq(self.start), self.sparse_status.eq(engine.status),
                         self.sparse_batches.eq(engine.batches),
                         self.sparse_hbm_reads.eq(engine.hbm_reads)]
            drained, done = drained & engine.idle & issue.idle, done & engine.idle & issue.idle
        m.d.comb += [
            system.errors.ready.eq(1),                  # counted in ``rejected``
            core.flag_values.eq(system.flags), core.start.eq(self.start),
            self.flags.eq(system.flags), self.dma_rejected.eq(system.rejected),
            self.drained.eq(drained), self.done.eq(done),
            *(getattr(self, name).eq(getattr(core, name)) for name in _FROM_CORE),
            self.busy.eq(~self.done & ~(core.waiting & self.drained)),
        ]
        computing = Signal()
        if core.mxu is not None:
            m.d.comb += computing.eq(core.mxu.lhs.valid & core.mxu.lhs.ready)
        moving = ~system.finished
        with m.If(self.start & ~self.done):
            m.d.sync += [self.mxu_beats.eq(self.mxu_beats + computing),
                         self.dma_cycles.eq(self.dma_cycles + moving),
                         self.overlap_cycles.eq(self.overlap_cycles + (computing & moving))]
            for cause in STALL_CAUSES:
                counter = getattr(self, f"stall_{cause}")
                m.d.sync += counter.eq(counter + core.stall[cause])
        return m
