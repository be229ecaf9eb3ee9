"""The TensorCore sequencer: fetch, decode, fault checks and issue of one bundle at a time."""

from amaranth.hdl import Array, Cat, Const, MemoryData, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..lib.memory_port import MemoryPortSignature, line_addr_width
from ..memory.dma_check import check_descriptor_check_params
from ..memory.layouts import CHIP_BITS, FLAG_BITS, descriptor_layout, flag_set_layout, \
    flag_wait_layout
from ..vpu.isa import FIELD_BITS as VPU_FIELDS
from ..vpu.isa import pushes_lhs
from ..vpu.layouts import SUBLANES
from ..vpu.vpu import check_vpu_shape
from .dma_issue import DmaIssue
from .encoding import VECTOR_SLOT_UNITS, Error
from .isa import (BUNDLE_WORDS, DEFAULT_HBM_WORDS, DESCRIPTOR_WORDS, SREGS, VECTOR_SLOTS,
                  decode_bundle)
from .scalar_alu import branch_taken, scalar_result
from .vector_queue import VECTOR_LAYOUT
from ..lib.params import check_bool, check_int

__all__ = ["Sequencer", "State", "STALL_CAUSES", "STALL_LAYOUT"]

_BASE_LOW, _BASE_BITS = VPU_FIELDS["base"]

#: Why the bundle at ``pc`` did not issue in a cycle, one cause per stalled cycle, in
#: priority order: ``fetch`` (no bundle yet: the fetch after ``start`` or after a stall
#: that lost the IMEM request, and with ``decode_stage`` a bundle's decode cycle),
#: ``delay`` (a ``delay x`` still counting), ``dma`` (this or an earlier ``dma`` reads its
#: record, is judged, or waits for the VMEM fence or the DMA engine), ``wait`` (a
#: ``wait``/``waitc`` not met), ``smem`` (an ``lw`` reading, or an ``sw`` SMEM does not
#: take) and ``vector`` (the vector queue is full).
STALL_CAUSES = ("fetch", "delay", "dma", "wait", "smem", "vector")
STALL_LAYOUT = data.StructLayout({cause: 1 for cause in STALL_CAUSES})


class State(enum.Enum, shape=3):
    """``idle`` before ``start``; ``fetch`` while the bundle at ``pc`` is requested;
    ``issue`` while it is decoded, checked and issued; ``halted``; ``error``."""
    IDLE = 0
    FETCH = 1
    ISSUE = 2
    HALTED = 3
    ERROR = 4


class Sequencer(wiring.Component):
    """Runs ``golden.tensorcore`` bundles from IMEM: the scalar unit, SMEM loads and
    stores, control flow, flags, and the vector slots handed to the VPU queue.

    A bundle issues as a whole in one cycle (its *commit*), or not at all: every fault
    is known at issue, so a faulting bundle changes nothing and the core stops with
    ``error`` and ``error_pc``. The checks, in ``docs/isa.md``'s priority order: an
    illegal bundle; a flag >= ``n_flags``; (a ``wait``/``waitc`` then holds the bundle
    until its flag is high enough); the ``lw``/``sw`` address; the vector slots in VPU
    order (a vld/vst base over 16 bits or a line outside VMEM; then the MXU faults, from
    counts kept here in program order, as the VPU keeps them: weight rows in the shadow
    tile and result rows queued); a ``dma``'s record range, then its
    :class:`~hdl.tensorcore.dma_issue.DmaIssue` verdict (``dma_format``, ``dma_<reason>``).
    The VPU and the DMA engine downstream therefore never fault.

    Every slot reads the registers as they were before the bundle; at commit slot 0
    writes, then slot 1 (slot 1 wins a register both write), the ``sw`` goes to SMEM,
    the vector words (vld/vst bases patched with their ``vaddr`` registers) to
    ``vector``, the flag op to the flag bank, and the pc moves on.

    Parameters
    ----------
    imem_depth : int
        Bundles of IMEM (default 256).
    smem_words : int
        Words of SMEM (default 1024).
    n_flags : int
        Sync flags (default 16), 1 to 128.
    lanes : int
        VPU lanes; the MXU's shadow tile is ``lanes`` weight rows.
    vmem_lines : int
        VMEM lines, for the vld/vst range check (default 256, at least 8).
    mxu : bool
        Whether an MXU is attached (else MXU ops fault ``no_mxu``).
    mxu_results : int
        Result rows the MXU may hold unpopped (default 16, at least 8).
    hbm_words : int
        Words of the HBM behind the DMA engine (default
        ``golden.tensorcore.DEFAULT_HBM_WORDS``), for the descriptor check; VMEM has
        ``vmem_lines * lanes``.
    n_chips : int
        Chips a remote push may name (default 1).
    record_ports : int
        2 (the default): ``dma`` records are read on ``smem_record`` and, in the cycles
        without ``lw``/``sw``, on ``smem``; 1: on ``smem_record`` alone (an SMEM whose
        ports share one RAM port, where the second reads nothing more).
    record_window : int
        Words ``smem_record`` reads a request (default 1: SMEM's second port; more: its
        ``window`` port, :class:`~hdl.memory.vmem.VMEM`).
    decode_stage : bool
        False (the default): a bundle is decoded, checked and committed in the cycle IMEM
        answers. True, for FPGAs: its fault codes, operands, next pc and MXU counts are
        computed in that cycle into registers, with the bundle itself, the registers its
        slots read and its vector words, and it commits from them at the earliest in the
        next (IMEM holds its answer until it is taken), decoding the kept bundle again:
        the same results, a cycle more a bundle, and no commit-cycle path from IMEM's
        output (the issue's deepest path went from 26 levels to 18 on the proto chip,
        docs/fpga.md).

    Ports
    -----
    start : In(1)
        In ``idle``, starts the core at pc 0.
    imem : Out(MemoryPortSignature(addr_width, words=BUNDLE_WORDS))
        Bundle fetch; IMEM line ``p`` is bundle ``p``. Responses are taken at commit.
    smem : Out(MemoryPortSignature(addr_width, words=1))
        ``lw`` reads and ``sw`` writes, and with ``record_ports=2`` in cycles without them
        the DmaIssue's record reads (its ``smem_spare``). A read accepted in cycle ``t``
        must be answered in cycle ``t + 1`` (as SMEM's ``VMEM`` port does); responses are
        always taken.
    smem_record : Out(MemoryPortSignature(addr_width, words=record_window))
        DMA descriptor record reads, of ``record_window`` words from a request's address.
    dma : Out(stream.Signature(descriptor_layout))
        Issued descriptors, for the DMA engine, each offered once ``fence`` is high.
    fence : In(1)
        The VPU has performed every VMEM access (``vld``, ``vst``) issued so far.
    vector : Out(stream.Signature(VECTOR_LAYOUT))
        A bundle's vector words, offered only when the rest of the bundle can commit; a
        bundle waits for ``ready``.
    flag_wait : Out(stream.Signature(flag_wait_layout))
        A ``wait``/``waitc`` bundle's precondition, offered until ``ready``.
    flag_set : Out(stream.Signature(flag_set_layout))
        ``fset``, ``fadd`` (the flag's value plus the operand) and ``waitc`` (minus it);
        always taken (SyncFlags' ``set``). A DMA's add in the same cycle lands on top, so
        ``fadd`` and ``waitc`` are atomic with respect to the DMA.
    flag_values : In(ArrayLayout(32, n_flags))
        The flags, for ``fadd`` and ``waitc``.
    state : Out(State)
    pc, error_pc, bundles : Out(32)
        The pc (the halt, the faulting or the waiting bundle once stopped), the faulting
        bundle, and bundles issued.
    error : Out(Error)
        The stop reason (``NONE`` while it runs).
    waiting : Out(1)
        A wait is offered and not met: its flag and value are on ``flag_wait.payload``.
    dma_busy : Out(1)
        A ``dma``'s descriptor is being read or judged, or waits for the fence or the DMA
        engine: with ``waiting``, what a watchdog reports the core is waiting on.
    stall : Out(STALL_LAYOUT)
        Running, no bundle issued this cycle, and why (:data:`STALL_CAUSES`; at most one
        bit is set): for performance counters and functional coverage.

    Pipeline: ``fetch`` requests IMEM[pc]; in ``issue`` the bundle is the IMEM response,
    decoded and checked combinationally, and the commit cycle requests the next pc's
    bundle, computed in the same cycle, so a taken branch costs nothing.

    With ``decode_stage``, a bundle's first cycle in ``issue`` is its decode cycle, in
    which it cannot commit, and the commit cycle's checks read their registers.

    Latency and throughput: two cycles from ``start`` to the first issue; then one
    bundle a cycle (with ``decode_stage``, three and one every two cycles), except that
    an ``lw`` bundle takes two extra cycles (SMEM read), a ``dma`` bundle waits for its
    record (none when it was read ahead) and its check (3 cycles:
    :class:`~hdl.tensorcore.dma_issue.DmaIssue`), and the next bundle waits until the
    descriptor has left (after the VPU drained: the VMEM fence), but a ``dma``, which is
    checked in the cycle it leaves: back-to-back ``dma`` bundles go every 4 cycles with
    ``record_window=8`` and both record ports, 8 with one-word reads; a ``delay x``
    bundle holds the next one ``x`` cycles, and a bundle stalls while its wait is not met
    or the vector queue is full.

    Attributes
    ----------
    sregs : MemoryData
        The scalar registers, built as the ``Memory`` submodule named ``sregs`` (``s0`` is
        never written, so it reads 0 when loaded with 0).
    issue_params : dict
        The parameters of the ``dma`` reader and judge, the
        :class:`~hdl.tensorcore.dma_issue.DmaIssue` submodule named ``issue``.
    """

    def __init__(self, *, imem_depth=256, smem_words=1024, n_flags=16, lanes=8,
                 vmem_lines=256, mxu=False, mxu_results=16, hbm_words=DEFAULT_HBM_WORDS,
                 n_chips=1, record_ports=2, record_window=1, decode_stage=False):
        self.imem_depth = check_int("imem_depth", imem_depth, least=1)
        self.smem_words = check_int("smem_words", smem_words, least=1)
        self.n_flags = check_int("n_flags", n_flags, least=1, most=1 << FLAG_BITS)
        self.lanes, self.vmem_lines, self.mxu, self.mxu_results = check_vpu_shape(
            lanes=lanes, vmem_lines=vmem_lines, mxu=mxu, mxu_results=mxu_results)
        self.decode_stage = check_bool("decode_stage", decode_stage)
        # The storage only: runs load and read it before anything is elaborated.
        self.sregs = MemoryData(shape=32, depth=SREGS, init=[])
        check_int("hbm_words", hbm_words, least=1, most=1 << 24)
        check_int("n_chips", n_chips, least=1, most=1 << CHIP_BITS)
        self.issue_params = dict(smem_words=max(smem_words, DESCRIPTOR_WORDS),
                                 hbm_words=hbm_words, vmem_words=vmem_lines * lanes,
                                 n_flags=n_flags, n_chips=n_chips,
                                 record_ports=check_int("record_ports", record_ports,
                                                        least=1, most=2),
                                 record_window=check_int("record_window", record_window,
                                                         least=1))
        # DmaIssue is built in elaborate; what it would refuse is refused here, at once.
        check_descriptor_check_params(hbm_size=hbm_words, vmem_size=vmem_lines * lanes,
                                      n_flags=n_flags, n_chips=n_chips, queue_depth=1)
        super().__init__({
            "start": In(1),
            "imem": Out(MemoryPortSignature(addr_width=line_addr_width(imem_depth),
                                            words=BUNDLE_WORDS)),
            "smem": Out(MemoryPortSignature(addr_width=line_addr_width(smem_words), words=1)),
            "smem_record": Out(MemoryPortSignature(addr_width=line_addr_width(smem_words),
                                                   words=record_window)),
            "dma": Out(stream.Signature(descriptor_layout)),
            "fence": In(1),
            "vector": Out(stream.Signature(VECTOR_LAYOUT)),
            "flag_wait": Out(stream.Signature(flag_wait_layout)),
            "flag_set": Out(stream.Signature(flag_set_layout)),
            "flag_values": In(data.ArrayLayout(32, n_flags)),
            "state": Out(State), "pc": Out(32), "error_pc": Out(32), "bundles": Out(32),
            "error": Out(Error), "waiting": Out(1), "dma_busy": Out(1),
            "stall": Out(STALL_LAYOUT),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.sregs = sregs = Memory(data=self.sregs)
        m.submodules.issue = issue = DmaIssue(**self.issue_params)
        wiring.connect(m, issue.dma, wiring.flipped(self.dma))
        # The DmaIssue's ports are as wide as a record needs, which SMEM may not be.
        _join_reads(m, issue.smem, self.smem_record)
        m.d.comb += [issue.fence.eq(self.fence), self.dma_busy.eq(issue.busy)]
        pc = self.pc
        answered = (self.state == State.ISSUE) & self.imem.resp.valid
        present = Signal()       # the bundle may commit this cycle
        deciding = Signal()      # with decode_stage: its checks go into their registers
        if self.decode_stage:
            decoded = Signal()
            m.d.comb += [deciding.eq(answered & ~decoded), present.eq(answered & decoded)]
        else:
            m.d.comb += present.eq(answered)

        def staged(value, name=None):
            """``value``, or with ``decode_stage`` its register, loaded in the decode cycle
            (what it depends on, the registers and MXU counts, changes only at commit)."""
            if not self.decode_stage:
                return value
            kept = Signal.like(value, name=f"{name or value.name}_staged")
            with m.If(deciding):
                m.d.sync += kept.eq(value)
            return kept
        fetched = self.imem.resp.payload.data.as_value()
        d = decode_bundle(m, fetched, name="b")
        s0, s1, misc = d.scalar[0], d.scalar[1], d.misc

        def read(addr, name):
            port = sregs.read_port(domain="comb")
            m.d.comb += port.addr.eq(addr)
            value = Signal(32, name=name)
            m.d.comb += value.eq(port.data)
            return value

        r0 = {f: read(getattr(s0, f), f"s0_{f}") for f in ("rd", "ra", "rb")}
        r1 = {f: read(getattr(s1, f), f"s1_{f}") for f in ("rd", "ra", "rb")}
        base_reg = {"vld": read(d.vld_reg, "vld_base"), "vst": read(d.vst_reg, "vst_base")}
        operand = Signal(32)
        m.d.comb += operand.eq(read(misc.ra, "misc_ra") + misc.imm)

        # ---- faults, each a (condition, code) in priority order
        prefault = [(~d.legal, Error.ILLEGAL),
                    (misc.names_flag & (misc.flag >= self.n_flags), Error.FLAG_RANGE)]
        smem_addr = Signal(32)
        m.d.comb += smem_addr.eq(r0["ra"] + s0.imm)
        memory_op = s0.load | s0.store
        faults = [(memory_op & (smem_addr >= self.smem_words), Error.SMEM_RANGE)]
        smem_addr = staged(smem_addr)
        shadow = Signal(range(self.lanes + 1))          # weight rows in the shadow tile
        queued = Signal(range(self.mxu_results + 1))    # result rows not yet popped
        shadow_next, queued_next = shadow, queued
        packet = Signal(VECTOR_LAYOUT)
        for k, slot in enumerate(VECTOR_SLOTS):
            v, word, used = d.vector[slot], d.vector_words[slot], d.vector_used[slot]
            m.d.comb += packet.used[k].eq(used)
            if slot in ("vld", "vst"):
                line = Signal(33, name=f"{slot}_line")
                m.d.comb += line.eq(base_reg[slot] + v.base)
                last = line[:_BASE_BITS] + (SUBLANES - 1) * v.stride
                faults.append((used & (line[_BASE_BITS:].any() | (last >= self.vmem_lines)),
                               Error.VMEM_RANGE))
                word = Cat(word[:_BASE_LOW], line[:_BASE_BITS], word[_BASE_LOW + _BASE_BITS:])
            m.d.comb += packet.words[k].eq(word)
            mxu_op = v.unit["mxu"] | v.unit["pop"]
            if not self.mxu:
                faults.append((mxu_op, Error.NO_MXU))
                continue
            if not {"push", "pop"} & set(VECTOR_SLOT_UNITS[slot]):
                # An MXU op in this slot makes the bundle illegal, a fault before these:
                # the counts run through the two MXU slots only, a shorter chain.
                continue
            faults += [(v.is_op["push_weights"] & (shadow_next + SUBLANES > self.lanes),
                        Error.WEIGHTS_FULL),
                       (pushes_lhs(v) & (queued_next + SUBLANES > self.mxu_results),
                        Error.RESULTS_FULL),
                       (v.is_op["pop"] & (queued_next < SUBLANES), Error.POP_EMPTY)]
            # The counts after this slot, as signals so that each slot's logic is built
            # once. A push_lhs(_acc) into a whole shadow tile swaps it in first
            # (golden.vpu.MXUState). Values past the limits only occur in a bundle that
            # faults, which commits nothing.
            after = (Signal(range(self.lanes + SUBLANES + 1), name=f"{slot}_shadow"),
                     Signal(range(self.mxu_results + SUBLANES + 1), name=f"{slot}_queued"))
            m.d.comb += [
                after[0].eq(Mux(v.is_op["push_weights"], shadow_next + SUBLANES,
                                Mux(pushes_lhs(v) & (shadow_next == self.lanes), 0,
                                    shadow_next))),
                after[1].eq(Mux(pushes_lhs(v), queued_next + SUBLANES,
                                Mux(v.is_op["pop"], queued_next - SUBLANES, queued_next))),
            ]
            shadow_next, queued_next = after
        faults.append((misc.is_op["dma"] & (operand + DESCRIPTOR_WORDS > self.smem_words),
                       Error.SMEM_RANGE))

        def first_code(checks):
            code = Error.NONE
            for condition, error in reversed(checks):
                code = Mux(condition, error, code)
            return code

        early, late = Signal(Error), Signal(Error)
        m.d.comb += [early.eq(first_code(prefault)), late.eq(first_code(faults))]
        early, late, operand = staged(early), staged(late), staged(operand)
        # The flag a wait compares and a flag op writes: from a register, the wait's
        # compare with the flag's live value starts a cycle's logic.
        flag = staged(misc.flag, "flag")
        shadow_next, queued_next = staged(shadow_next), staged(queued_next)
        next_pc = Signal(32)
        m.d.comb += next_pc.eq(Mux(branch_taken(s1, a=r1["ra"], d=r1["rd"]), pc + s1.imm,
                                   pc + 1))
        next_pc = staged(next_pc)

        # From here on, the commit cycle's view of the bundle. With decode_stage it is
        # decoded again from a register, and the registers it reads and the vector words
        # are the decode cycle's, so that no commit-cycle path starts at IMEM's output.
        if self.decode_stage:
            d = decode_bundle(m, staged(fetched, "bundle"), name="c")
            s0, s1, misc = d.scalar[0], d.scalar[1], d.misc
            r0, r1 = ({f: staged(v) for f, v in r.items()} for r in (r0, r1))
            packet = staged(packet, "packet")
        is_dma = misc.is_op["dma"]

        # ---- when the bundle can go
        delay = Signal(32)
        # delay != 0, kept in a flip-flop beside the count: every bundle's issue waits on
        # it, and a 32-bit compare would start each issue path with three levels.
        delaying = Signal()
        waits = misc.is_op["wait"] | misc.is_op["waitc"]
        checking = Signal()      # decoded, its flag known good, no delay or DMA pending
        asked = Signal()         # this bundle's descriptor is with the DmaIssue
        # A dma may be checked as the one before goes to the DMA engine; anything else
        # waits until it is there (a wait or halt counts on it).
        m.d.comb += checking.eq(present & (early == 0) & ~delaying &
                                (~issue.busy | asked | (is_dma & issue.sending)))
        m.d.comb += [self.flag_wait.valid.eq(checking & waits),
                     self.flag_wait.payload.flag.eq(flag),
                     self.flag_wait.payload.value.eq(operand),
                     self.waiting.eq(self.flag_wait.valid & ~self.flag_wait.ready)]
        clear = Signal()         # the wait is met and nothing faults
        m.d.comb += clear.eq(checking & (~waits | self.flag_wait.ready) & (late == 0))

        loaded = Signal(32)
        load_state = Signal(range(3))                   # 0 none, 1 requested, 2 loaded
        own = Signal()                                  # an lw or sw on `smem`
        spare = self._spare(m, issue, own)
        spare_read = Signal()                           # this cycle's answer is the spare's
        m.d.sync += spare_read.eq(spare.req.valid & spare.req.ready)
        m.d.comb += [self.smem.resp.ready.eq(1),
                     spare.resp.valid.eq(self.smem.resp.valid & spare_read),
                     spare.resp.payload.eq(self.smem.resp.payload)]
        with m.If(self.smem.resp.valid & ~spare_read):
            m.d.sync += [loaded.eq(self.smem.resp.payload.data[0]), load_state.eq(2)]
        has_vector = packet.used.any()
        verdict = issue.verdict
        dma_fault = Signal()
        m.d.comb += [issue.check.valid.eq(clear & is_dma & ~asked),
                     issue.check.payload.address.eq(operand),
                     dma_fault.eq(clear & is_dma & verdict.valid & (verdict.payload.code != 0))]
        with m.If(issue.check.valid & issue.check.ready):
            m.d.sync += asked.eq(1)
        ready = clear & (~s0.load | (load_state == 2)) & \
            (~is_dma | (verdict.valid & (verdict.payload.code == 0)))
        store_ok = ~s0.store | self.smem.req.ready
        vector_ok = ~has_vector | self.vector.ready
        commit = Signal()
        m.d.comb += [
            self.vector.valid.eq(ready & has_vector & store_ok),
            self.vector.payload.eq(packet),
            commit.eq(ready & store_ok & vector_ok),
            own.eq(Mux(s0.store, ready & vector_ok, clear & s0.load & (load_state == 0))),
            self.smem.req.valid.eq(own | spare.req.valid),
            self.smem.req.payload.addr.eq(Mux(own, smem_addr, spare.req.payload.addr)),
            self.smem.req.payload.data[0].eq(r0["rd"]),
            self.smem.req.payload.mask.eq(1),
            self.smem.req.payload.write.eq(own & s0.store),
            issue.written.eq(own & s0.store & self.smem.req.ready),
            self.imem.resp.ready.eq(commit),
            verdict.ready.eq(commit | dma_fault),
        ]
        with m.If(own & self.smem.req.ready & ~s0.store):
            m.d.sync += load_state.eq(1)
        self._stall_causes(m, present=present, delay=delaying,
                           dma=issue.busy | (clear & is_dma), wait=self.waiting,
                           smem=clear & ((s0.load & (load_state != 2)) | ~store_ok),
                           vector=ready & store_ok, commit=commit)

        # ---- commit: registers, flags, MXU counts, the next pc
        values = [scalar_result(m, s, a=r["ra"], b=r["rb"], d=r["rd"], loaded=loaded,
                                name=f"s{k}") for k, (s, r) in enumerate(((s0, r0), (s1, r1)))]
        writes = [Signal(name="s0_write"), Signal(name="s1_write")]
        m.d.comb += [writes[1].eq(commit & s1.writes & s1.rd.any()),
                     writes[0].eq(commit & s0.writes & s0.rd.any() &
                                  ~(writes[1] & (s1.rd == s0.rd)))]
        for s, write, value in zip((s0, s1), writes, values):
            port = sregs.write_port()
            m.d.comb += [port.en.eq(write), port.addr.eq(s.rd), port.data.eq(value)]
        flag_now = Array(self.flag_values[i] for i in range(self.n_flags))[flag]
        m.d.comb += [
            self.flag_set.valid.eq(commit & (misc.is_op["fset"] | misc.is_op["fadd"] |
                                             misc.is_op["waitc"])),
            self.flag_set.payload.flag.eq(flag),
            self.flag_set.payload.value.eq(Mux(misc.is_op["fset"], operand,
                                               Mux(misc.is_op["fadd"], flag_now + operand,
                                                   flag_now - operand))),
        ]
        in_range = next_pc < self.imem_depth
        halting = misc.is_op["halt"]
        if self.decode_stage:
            with m.If(deciding):
                m.d.sync += decoded.eq(1)
            with m.Elif(commit):
                m.d.sync += decoded.eq(0)

        with m.Switch(self.state):
            with m.Case(State.IDLE):
                with m.If(self.start):
                    m.d.sync += [pc.eq(0), self.state.eq(State.FETCH)]
            with m.Case(State.FETCH):
                m.d.comb += [self.imem.req.valid.eq(1), self.imem.req.payload.addr.eq(pc)]
                with m.If(self.imem.req.ready):
                    m.d.sync += self.state.eq(State.ISSUE)
            with m.Case(State.ISSUE):
                with m.If(delaying):
                    m.d.sync += [delay.eq(delay - 1), delaying.eq(delay != 1)]
                with m.If(present & (early != 0)):
                    m.d.sync += [self.state.eq(State.ERROR), self.error.eq(early),
                                 self.error_pc.eq(pc)]
                with m.Elif(checking & (~waits | self.flag_wait.ready) & (late != 0)):
                    m.d.sync += [self.state.eq(State.ERROR), self.error.eq(late),
                                 self.error_pc.eq(pc)]
                with m.Elif(dma_fault):
                    m.d.sync += [self.state.eq(State.ERROR), self.error.eq(verdict.payload.code),
                                 self.error_pc.eq(pc)]
                with m.Elif(commit):
                    m.d.sync += [self.bundles.eq(self.bundles + 1), load_state.eq(0),
                                 asked.eq(0), shadow.eq(shadow_next), queued.eq(queued_next)]
                    with m.If(misc.is_op["delay"]):
                        m.d.sync += [delay.eq(operand), delaying.eq(operand != 0)]
                    with m.If(halting):
                        m.d.sync += self.state.eq(State.HALTED)
                    with m.Elif(~in_range):
                        m.d.sync += [pc.eq(next_pc), self.state.eq(State.ERROR),
                                     self.error.eq(Error.IMEM_RANGE),
                                     self.error_pc.eq(next_pc)]
                    with m.Else():
                        m.d.sync += pc.eq(next_pc)
                        m.d.comb += [self.imem.req.valid.eq(1),
                                     self.imem.req.payload.addr.eq(next_pc)]
                        with m.If(~self.imem.req.ready):
                            m.d.sync += self.state.eq(State.FETCH)
        return m

    def _spare(self, m, issue, own):
        """The DmaIssue's record reads on ``smem`` (its ``smem_spare``, after this core's
        own requests), or with one record port a stand-in that never asks."""
        if self.issue_params["record_ports"] == 2:
            spare = issue.smem_spare
        else:
            spare = issue.port_signature.create(path=("no_spare",))
        m.d.comb += spare.req.ready.eq(self.smem.req.ready & ~own)
        return spare

    def _stall_causes(self, m, *, present, delay, dma, wait, smem, vector, commit):
        """Drive ``stall``: each argument but ``present`` and ``commit`` is the condition
        under which that cause holds a present bundle, tried in :data:`STALL_CAUSES` order."""
        running = (self.state == State.FETCH) | (self.state == State.ISSUE)
        causes = {"fetch": running & ~present, "delay": present & delay,
                  "dma": present & dma, "wait": present & wait, "smem": present & smem,
                  "vector": present & vector}
        taken = Const(0)
        for cause in STALL_CAUSES:
            hit = causes[cause] & ~commit & ~taken
            m.d.comb += self.stall[cause].eq(hit)
            taken = taken | hit


def _join_reads(m, initiator, memory):
    """Joins a read-only initiator port to a memory port of another address width."""
    m.d.comb += [memory.req.valid.eq(initiator.req.valid),
                 memory.req.payload.addr.eq(initiator.req.payload.addr),
                 initiator.req.ready.eq(memory.req.ready),
                 initiator.resp.valid.eq(memory.resp.valid),
                 initiator.resp.payload.eq(memory.resp.payload),
                 memory.resp.ready.eq(initiator.resp.ready)]
