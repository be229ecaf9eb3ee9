"""The VPU: a dual-issue, in-order vector unit with a scoreboard (SPEC section 4.2)."""

from amaranth.hdl import Const, MemoryData, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..lib.params import check_bool, check_choice, check_int, check_numerics
from ..lib.memory_port import MemoryPortSignature, line_addr_width, window_members
from ..mxu.matrix_unit import lhs_layout, weights_layout
from .isa import check_ops, decode, pushes_lhs
from .layouts import PROGRAM_LAYOUT, SUBLANES, VREGS, vreg_bits
from .load_store_unit import LoadStoreUnit, check_window
from .mxu_link import LHSPusher, MXUPopper, WeightPusher
from .reduce_unit import ReduceOp, ReduceUnit
from .transcendental_unit import FUNCTIONS, Function, TranscendentalUnit
from .serial_alu import SerialALU, check_alu_width
from .vector_alu import ALU_OPS, VectorALU

__all__ = ["VPU", "Error", "ERRORS", "OPTIONAL_OPS", "REGFILES", "check_vpu_shape"]



class Error(enum.IntEnum, shape=3):
    """Why the VPU stopped: the shape of its ``error`` port (``NONE`` while it runs).

    The names are ``golden.vpu``'s error kinds. An ``IntEnum``, so a code read back from
    a run indexes :data:`ERRORS` as it always has.
    """
    NONE = 0
    ILLEGAL = 1
    VMEM_RANGE = 2
    WEIGHTS_FULL = 3
    RESULTS_FULL = 4
    POP_EMPTY = 5
    NO_MXU = 6
    UNSUPPORTED = 7


#: The names of :class:`Error`, in code order, as ``sim.vpu`` reports them.
ERRORS = tuple(member.name.lower() for member in Error)

#: The instructions a VPU may be built without (its ``ops`` parameter).
OPTIONAL_OPS = (*ALU_OPS, *FUNCTIONS, "rsum", "rmax", "rmin")
_REDUCTIONS = {"rsum": "sum", "rmax": "max", "rmin": "min"}

#: How the register file is built (the VPU's ``regfile`` parameter).
REGFILES = ("flops", "ram", "block_ram")


def _one_hot(reg):
    return (Const(1, VREGS) << reg)[:VREGS]


def check_vpu_shape(*, lanes, vmem_lines, mxu, mxu_results):
    """``(lanes, vmem_lines, mxu, mxu_results)`` of a VPU, checked (TypeError, ValueError):
    the VPU's own, and those of a sequencer that keeps the VPU's counts."""
    lanes = check_int("lanes", lanes, least=1)
    vmem_lines = check_int("vmem_lines", vmem_lines, least=SUBLANES, most=1 << 16)
    check_bool("mxu", mxu)
    if mxu and lanes % SUBLANES:
        raise ValueError(f"an MXU needs lanes to be a multiple of {SUBLANES}, not {lanes}")
    return lanes, vmem_lines, mxu, check_int("mxu_results", mxu_results, least=SUBLANES)


class VPU(wiring.Component):
    """``lanes`` lanes of 8 sublanes, 32 vregs, two ALU slots and the units of SPEC section 4.2.

    Instructions (``golden.vpu``'s encoding) arrive two to a beat and issue in
    program order, up to two a cycle. An instruction issues when the
    registers it reads and writes have no write pending (the scoreboard: a
    busy bit per vreg, set at issue and cleared by the write-back) and its
    unit can take it; it reads its source vregs in the issue cycle. The second
    word of a beat issues in the same cycle as the first when it also can,
    neither reads nor writes the first one's destination, the two do not
    need the same unit (two ALU operations go to the two ALU slots), and they
    are not two MXU pushes (a ``push_lhs``'s swap is decided from the shadow
    tile before its cycle, which a ``push_weights`` beside it would change,
    though the two pushers are separate units). So the
    architectural state always equals sequential execution
    (``golden.vpu.execute``).

    Units and latencies, as the cycles from an instruction's issue to the
    earliest issue of an instruction that reads its result:

    * two :class:`~hdl.vpu.vector_alu.VectorALU` slots: every ``alu``
      instruction on a whole vreg, latency 2, one per slot per cycle;
    * :class:`~hdl.vpu.transcendental_unit.TranscendentalUnit`: ``rcp``,
      ``rsqrt``, ``exp``, one sublane a cycle, latency ``9 + D`` (``D`` the
      deepest core), one instruction per 8 cycles;
    * :class:`~hdl.vpu.reduce_unit.ReduceUnit`: ``rsum``, ``rmax``, ``rmin``,
      latency 9, one per 8 cycles;
    * :class:`~hdl.vpu.load_store_unit.LoadStoreUnit`: ``vld`` (latency 10
      with a single-cycle VMEM) and ``vst``, one VMEM line a cycle, the next
      instruction issuing as the last one's final line is requested; with
      ``vmem_window``, a stride-1 ``vld`` (latency 3) or ``vst`` in one request;
    * :class:`~hdl.vpu.mxu_link.WeightPusher` (``push_weights``) and, beside it,
      :class:`~hdl.vpu.mxu_link.LHSPusher` (``push_lhs``, ``push_lhs_acc``): 8 beats an
      instruction, one instruction at a time each, so a weight tile loads while LHS rows
      stream; :class:`~hdl.vpu.mxu_link.MXUPopper` (``pop``: waits for 8 MXU result rows).

    Program errors stop the VPU before the faulting instruction, with
    ``error`` naming it (:data:`ERRORS`) and ``error_index`` its position;
    instructions before it complete, and later beats are taken and dropped.
    The errors are an illegal word, a VMEM line out of range, weights pushed
    into a whole shadow tile, LHS rows that would queue more than
    ``mxu_results`` result rows, a pop with fewer than 8 rows queued, and an
    MXU instruction without an MXU: each would otherwise hang or corrupt.

    Parameters
    ----------
    lanes : int
        Words per sublane (default 8).
    numerics : "tpu" or "ieee"
    vmem_lines : int
        Lines of the VMEM behind ``vmem`` (default 256), for the range check.
    mxu : bool
        Whether an MXU of ``lanes x lanes`` is attached (needs ``lanes`` a
        multiple of 8).
    mxu_results : int
        Result rows the MXU can hold without a pop (default 16, at least 8).
    ops : collection of str, optional
        The ALU, transcendental and reduction instructions to build (default
        all). Units no instruction needs are left out and ALU slots build only
        their instructions, so a VPU for a known program is a smaller design
        that compiles faster. An instruction
        not built stops the VPU with the ``unsupported`` error. ``nop``,
        ``vld``, ``vst`` and the MXU link are always built.
    regfile : "flops", "ram" or "block_ram"
        How the register file is built. ``"flops"`` (default): the issue rules above, with
        six asynchronous read ports and a write port per unit, which synthesis can only
        build from flip-flops. ``"ram"``, for FPGAs: one write port and three read ports
        read a cycle ahead through registers (synchronous), which Yosys maps to block or
        distributed RAM (for 32 registers it picks distributed RAM: a copy per read port
        the build uses, in LUTs). ``"block_ram"`` is ``"ram"`` with the memory marked
        ``ram_style = "block"``, so Yosys puts each copy in block RAM instead (on an ECP5,
        ``ceil(1024 * lanes / 36)`` blocks a copy) and leaves the LUTs to logic. Either
        issues one instruction at a time (one ALU slot is built), an
        instruction issues only in the cycle after its source registers were read with
        nothing pending on them (so at most one every 2 cycles), and an instruction that
        writes a register issues only while no other write is pending (so at most one unit
        writes back in a cycle). Results are the same (sequential execution); the cycles
        are more.
    alu_width : int
        Sublanes the ALU slot computes a cycle: 8 (the default, the whole vreg), or 1, 2
        or 4 with ``regfile`` in RAM, for FPGAs: a :class:`~hdl.vpu.serial_alu.SerialALU`
        of ``alu_width * lanes`` word ALUs: an ALU instruction's result is due
        ``8 / alu_width + 1`` cycles after its issue instead of 1 (a reader issues 2 cycles
        after that, as with the RAM register file's full-width slot), and the same results
        take ``alu_width / 8`` of the word ALUs.
    vmem_window : int
        0 (the default: ``vld`` and ``vst`` move a line a cycle through ``vmem``), or 8:
        a stride-1 ``vld`` or ``vst`` moves its whole vreg in one request on the
        ``vmem_window`` port (a VMEM banked by sublane, as TPU v4's: an
        :class:`~hdl.memory.vmem.VMEM` with ``window=8`` and ``window_writes``). Results
        are the same; the cycles are fewer.

    Ports
    -----
    program : In(stream.Signature(PROGRAM_LAYOUT))
        Instruction words, ``count`` (1 or 2) per beat. A beat is taken when its
        last word issues.
    vmem : Out(MemoryPortSignature(addr_width=line_addr_width(vmem_lines), words=lanes))
    vmem_window : Out(MemoryPortSignature(addr_width=..., words=8 * lanes)), with ``vmem_window``
        Whole-vreg ``vld`` and ``vst``: sublane ``s`` is line ``base + s``.
    mxu_weights, mxu_lhs, mxu_acc : Out(stream.Signature(...))
    mxu_result : In(stream.Signature(...))
        Only with ``mxu``: the MXU's ``weights``, ``lhs``, ``acc_in`` and ``result``
        streams.
    idle : Out(1)
        No instruction taken so far is still executing.
    vmem_issue, vmem_idle : Out(1)
        A ``vld`` or ``vst`` issues to the load/store unit in this cycle; the load/store
        unit has no access in progress. With a count of the ``vld``/``vst`` words sent
        and not yet issued, they tell when every VMEM access sent so far has been
        performed, however much other work is still under way (a DMA's VMEM fence).
    error, error_index : Out(Error), Out(32)
        The stop reason and the index of the instruction that caused it.
    executed, dual : Out(32)
        Instructions issued, and cycles in which two issued.

    Attributes
    ----------
    regfile : MemoryData
        The vregs, built as the ``Memory`` submodule named ``regfile``: entry ``r`` is
        ``v<r>``, sublane ``s``, lane ``j`` in bits ``32 * (s * lanes + j)`` up.
    """

    def __init__(self, *, lanes=8, numerics="tpu", vmem_lines=256, mxu=False, mxu_results=16,
                 ops=None, regfile="flops", alu_width=SUBLANES, vmem_window=0):
        self.window_lines = check_window(vmem_window)
        self.lanes, self.vmem_lines, self.mxu, self.mxu_results = check_vpu_shape(
            lanes=lanes, vmem_lines=vmem_lines, mxu=mxu, mxu_results=mxu_results)
        self.numerics = check_numerics(numerics)
        self.ops = check_ops(ops, OPTIONAL_OPS, what="ops")
        self.regfile_kind = check_choice("regfile", regfile, REGFILES)
        self.alu_width = check_alu_width(alu_width, regfile=self.regfile_kind)
        #: What ``ops`` asks of each unit (an empty list: the unit is left out).
        self.alu_ops = [op for op in self.ops if op in ALU_OPS]
        self.functions = [op for op in self.ops if op in FUNCTIONS]
        self.reductions = [_REDUCTIONS[op] for op in self.ops if op in _REDUCTIONS]
        # The storage only: runs load and read it before anything is elaborated.
        self.regfile = MemoryData(shape=vreg_bits(lanes), depth=VREGS, init=[])
        members = {
            "program": In(stream.Signature(PROGRAM_LAYOUT)),
            "vmem": Out(MemoryPortSignature(addr_width=line_addr_width(vmem_lines),
                                            words=lanes)),
            **window_members("vmem_window", lines=vmem_lines, lanes=lanes,
                             window=vmem_window),
            "idle": Out(1), "vmem_issue": Out(1), "vmem_idle": Out(1),
            "error": Out(Error), "error_index": Out(32),
            "executed": Out(32), "dual": Out(32),
        }
        if mxu:
            members |= {
                "mxu_weights": Out(stream.Signature(weights_layout(lanes, True))),
                "mxu_lhs": Out(stream.Signature(lhs_layout(lanes))),
                "mxu_acc": Out(stream.Signature(data.ArrayLayout(32, lanes))),
                "mxu_result": In(stream.Signature(data.ArrayLayout(32, lanes))),
            }
        super().__init__(members)

    def make_alu(self, ops):
        """An ALU slot's :class:`~hdl.vpu.vector_alu.VectorALU`, ``alu_width`` sublanes wide.
        Export overrides this (and the next) to emit repeated cores once."""
        return VectorALU(words=self.alu_width * self.lanes, numerics=self.numerics, ops=ops)

    def make_transcendental(self, functions):
        return TranscendentalUnit(lanes=self.lanes, numerics=self.numerics, functions=functions)

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        style = {"ram_style": "block"} if self.regfile_kind == "block_ram" else None
        m.submodules.regfile = regfile = Memory(data=self.regfile, attrs=style)
        alu_ops, functions, reductions = self.alu_ops, self.functions, self.reductions
        in_ram = self.regfile_kind != "flops"
        slots = 1 if in_ram else 2
        alus = [self.make_alu(alu_ops) for _ in range(slots)] if alu_ops else []
        serial = self.alu_width < SUBLANES
        if serial:
            alus = [SerialALU(alu=alu, lanes=lanes) for alu in alus]
        for k, alu in enumerate(alus):
            m.submodules[f"alu{k}"] = alu
        if functions:
            m.submodules.trans = trans = self.make_transcendental(functions)
        if reductions:
            m.submodules.reduce = reduce = ReduceUnit(lanes=lanes, numerics=self.numerics,
                                                      ops=reductions)
        m.submodules.lsu = lsu = LoadStoreUnit(lanes=lanes, vmem_lines=self.vmem_lines,
                                               window=self.window_lines)
        wiring.connect(m, lsu.vmem, wiring.flipped(self.vmem))
        if self.window_lines:
            wiring.connect(m, lsu.window, wiring.flipped(self.vmem_window))
        m.submodules.weight_pusher = weight_pusher = WeightPusher(lanes=lanes)
        m.submodules.lhs_pusher = lhs_pusher = LHSPusher(lanes=lanes)
        m.submodules.popper = popper = MXUPopper(lanes=lanes)
        if self.mxu:
            wiring.connect(m, weight_pusher.weights, wiring.flipped(self.mxu_weights))
            wiring.connect(m, lhs_pusher.lhs, wiring.flipped(self.mxu_lhs))
            wiring.connect(m, lhs_pusher.acc_in, wiring.flipped(self.mxu_acc))
            wiring.connect(m, wiring.flipped(self.mxu_result), popper.result)

        # ---- the two candidates: the words of the beat not yet issued
        beat = self.program.payload
        second_only = Signal()            # the beat's first word has issued
        stopped = Signal()
        words = (Mux(second_only, beat.words[1], beat.words[0]), beat.words[1])
        present = (self.program.valid & ~stopped,
                   self.program.valid & ~stopped & ~second_only & (beat.count == 2))
        dec = [decode(m, word, name=f"i{k}") for k, word in enumerate(words)]
        reads = []
        for k, d in enumerate(dec[:slots]):
            # "ram": read every cycle at the oldest word's sources; the data is that word's
            # operands in the next cycle (``primed``, below).
            ports = [regfile.read_port(domain="sync" if in_ram else "comb", transparent_for=())
                     for _ in range(3)]
            for port, addr in zip(ports, (d.src_a, d.src_b, d.src_c)):
                m.d.comb += port.addr.eq(addr)
            reads.append([port.data for port in ports])
        if in_ram:
            reads.append(reads[0])        # the second word never issues beside the first

        # ---- the scoreboard
        busy = Signal(VREGS)

        def is_busy(reg):
            return (busy >> reg)[0]

        def waits(d):
            return ((d.reads_a & is_busy(d.src_a)) | (d.reads_b & is_busy(d.src_b)) |
                    (d.reads_c & is_busy(d.src_c)) | (d.writes & is_busy(d.dest)))

        def needs(d):
            return {"trans": d.unit["trans"], "reduce": d.unit["reduce"],
                    "vmem": d.unit["load"] | d.unit["store"],
                    "weights": d.is_op["push_weights"], "lhs": pushes_lhs(d),
                    "pop": d.unit["pop"]}

        # A unit that was not built is never free (its instructions fault first).
        ready = {"trans": trans.issue.ready if functions else 0,
                 "reduce": reduce.issue.ready if reductions else 0,
                 "vmem": lsu.issue.ready, "weights": weight_pusher.issue.ready,
                 "lhs": lhs_pusher.issue.ready, "pop": popper.issue.ready}

        def unit_free(d):
            free = 1
            for unit, need in needs(d).items():
                free = free & (~need | ready[unit])
            return free

        # ---- program errors, checked on the oldest word before it issues
        shadow = Signal(range(lanes + 1))           # weight rows in the MXU's shadow tile
        queued = Signal(range(self.mxu_results + 1))  # result rows the MXU owes pops

        def fault(d):
            last_line = d.base + (SUBLANES - 1) * d.stride
            code = Signal(Error)
            m.d.comb += code.eq(Error.NONE)
            missing = 0
            for name in OPTIONAL_OPS:
                if name not in self.ops:
                    missing = missing | d.is_op[name]
            with m.If(~d.legal):
                m.d.comb += code.eq(Error.ILLEGAL)
            with m.Elif(missing):
                m.d.comb += code.eq(Error.UNSUPPORTED)
            with m.Elif((d.unit["load"] | d.unit["store"]) & (last_line >= self.vmem_lines)):
                m.d.comb += code.eq(Error.VMEM_RANGE)
            with m.Elif((d.unit["mxu"] | d.unit["pop"]) & int(not self.mxu)):
                m.d.comb += code.eq(Error.NO_MXU)
            with m.Elif(d.is_op["push_weights"] & (shadow + SUBLANES > lanes)):
                m.d.comb += code.eq(Error.WEIGHTS_FULL)
            with m.Elif(pushes_lhs(d) & (queued + SUBLANES > self.mxu_results)):
                m.d.comb += code.eq(Error.RESULTS_FULL)
            with m.Elif(d.is_op["pop"] & (queued < SUBLANES)):
                m.d.comb += code.eq(Error.POP_EMPTY)
            return code

        faults = [fault(d) for d in dec]
        go = [Signal(name="go0"), Signal(name="go1")]
        may_issue = present[0] & ~faults[0].any() & ~waits(dec[0]) & unit_free(dec[0])
        if in_ram:
            # The oldest word's sources were read in the previous cycle with no write pending
            # on them (the word was the oldest then too: it only changes when one issues), so
            # the read ports hold its operands. A write issues only when no write is pending.
            primed = Signal()
            m.d.sync += primed.eq(present[0] & ~waits(dec[0]) & ~go[0])
            may_issue = may_issue & primed & ~(dec[0].writes & busy.any())
        m.d.comb += go[0].eq(may_issue)
        d0, d1 = dec
        after_first = (
            (d1.reads_a & d0.writes & (d1.src_a == d0.dest)) |
            (d1.reads_b & d0.writes & (d1.src_b == d0.dest)) |
            (d1.reads_c & d0.writes & (d1.src_c == d0.dest)) |
            (d1.writes & d0.writes & (d1.dest == d0.dest)))
        same_unit = 0
        for (unit, need0), need1 in zip(needs(d0).items(), needs(d1).values()):
            same_unit = same_unit | (need0 & need1)
        # Two MXU pushes never issue together: an LHS push's swap is decided from the
        # shadow tile before the cycle, which a weight push beside it would change.
        same_unit = same_unit | (d0.unit["mxu"] & d1.unit["mxu"])
        # A fault of the second word waits for it to be the oldest: it stops the VPU then.
        if not in_ram:
            m.d.comb += go[1].eq(go[0] & present[1] & ~faults[1].any() & ~waits(d1) &
                                 unit_free(d1) & ~after_first & ~same_unit)

        with m.If(stopped):
            m.d.comb += self.program.ready.eq(1)          # drop the rest of the program
        with m.Elif(go[0] & (go[1] | ~present[1])):
            m.d.comb += self.program.ready.eq(1)
            m.d.sync += second_only.eq(0)
        with m.Elif(go[0]):
            m.d.sync += second_only.eq(1)
        with m.If(present[0] & (faults[0] != 0)):
            m.d.sync += [stopped.eq(1), self.error.eq(faults[0]),
                         self.error_index.eq(self.executed)]
        m.d.sync += [self.executed.eq(self.executed + go[0] + go[1]),
                     self.dual.eq(self.dual + go[1])]

        # ---- MXU bookkeeping, in program order at issue
        swap = Signal()
        m.d.comb += swap.eq(shadow == lanes)
        shadow_next, queued_next = shadow, queued
        for k, d in enumerate(dec):
            shadow_next = Mux(go[k] & d.is_op["push_weights"], shadow_next + SUBLANES,
                              Mux(go[k] & pushes_lhs(d) & swap, 0, shadow_next))
            queued_next = Mux(go[k] & pushes_lhs(d), queued_next + SUBLANES,
                              Mux(go[k] & d.is_op["pop"], queued_next - SUBLANES, queued_next))
        m.d.sync += [shadow.eq(shadow_next), queued.eq(queued_next)]

        # ---- dispatch: each unit takes the candidate that issues to it
        def dispatch(unit_issue, unit, fields):
            picks = [go[k] & needs(dec[k])[unit] for k in range(2)]
            m.d.comb += unit_issue.valid.eq(picks[0] | picks[1])
            for name, values in fields.items():
                m.d.comb += getattr(unit_issue.payload, name).eq(
                    Mux(picks[0], values[0], values[1]))

        src_a = [r[0] for r in reads]
        writebacks = [lsu.writeback, popper.writeback]
        if functions:
            dispatch(trans.issue, "trans", {
                "fn": [Mux(d.is_op["rcp"], Function.RCP, Mux(d.is_op["rsqrt"], Function.RSQRT,
                                                          Function.EXP)) for d in dec],
                "dest": [d.dest for d in dec], "src": src_a})
            writebacks.append(trans.writeback)
        if reductions:
            dispatch(reduce.issue, "reduce", {
                "op": [Mux(d.is_op["rsum"], ReduceOp.SUM, Mux(d.is_op["rmax"], ReduceOp.MAX,
                                                           ReduceOp.MIN)) for d in dec],
                "dest": [d.dest for d in dec], "src": src_a})
            writebacks.append(reduce.writeback)
        vmem_pick = [go[k] & (dec[k].unit["load"] | dec[k].unit["store"]) for k in range(2)]
        m.d.comb += lsu.issue.valid.eq(vmem_pick[0] | vmem_pick[1])
        for name, values in {"store": [d.unit["store"] for d in dec], "dest": [d.dest for d in dec],
                             "base": [d.base for d in dec], "stride": [d.stride for d in dec],
                             "src": src_a}.items():
            m.d.comb += getattr(lsu.issue.payload, name).eq(Mux(vmem_pick[0], *values))
        dispatch(weight_pusher.issue, "weights", {"src": src_a})
        dispatch(lhs_pusher.issue, "lhs", {
            "swap": [swap, swap], "acc": [d.is_op["push_lhs_acc"] for d in dec],
            "src": src_a, "acc_src": [r[1] for r in reads]})
        dispatch(popper.issue, "pop", {"dest": [d.dest for d in dec]})

        # ---- the ALU slots: word k of a beat goes to slot k
        for k, alu in enumerate(alus):
            m.d.comb += [alu.op.eq(words[k][26:]), alu.a.eq(reads[k][0]), alu.b.eq(reads[k][1]),
                         alu.c.eq(reads[k][2])]
            dest = Signal(5, name=f"alu{k}_dest", reset_less=True)
            if serial:
                # Its write stays pending until `done`, so no other ALU word issues first.
                m.d.comb += alu.start.eq(go[k] & dec[k].unit["alu"])
                with m.If(alu.start):
                    m.d.sync += dest.eq(dec[k].dest)
                writebacks.append((alu.done, dest, alu.result))
                continue
            valid = Signal(name=f"alu{k}_valid")
            m.d.sync += [valid.eq(go[k] & dec[k].unit["alu"]), dest.eq(dec[k].dest)]
            writebacks.append((valid, dest, alu.result))

        # ---- write-backs into the register file, clearing busy bits
        cleared = 0
        # "ram": at most one write is pending (the issue rule), so at most one unit writes
        # back in a cycle: one port, its inputs the OR of the units' gated by their valids.
        merged = [0, 0, 0]
        for writeback in writebacks:
            if isinstance(writeback, tuple):
                valid, dest, value = writeback
            else:
                valid, dest, value = (writeback.valid, writeback.payload.dest,
                                      writeback.payload.data)
            if not in_ram:
                port = regfile.write_port()
                m.d.comb += [port.en.eq(valid), port.addr.eq(dest), port.data.eq(value)]
            else:
                merged = [merged[0] | valid, merged[1] | Mux(valid, dest, 0),
                          merged[2] | Mux(valid, value, 0)]
            cleared = cleared | Mux(valid, _one_hot(dest), 0)
        if in_ram:
            port = regfile.write_port()
            m.d.comb += [port.en.eq(merged[0]), port.addr.eq(merged[1]),
                         port.data.eq(merged[2])]
        claimed = 0
        for k, d in enumerate(dec):
            claimed = claimed | Mux(go[k] & d.writes, _one_hot(d.dest), 0)
        m.d.sync += busy.eq((busy & ~cleared) | claimed)

        m.d.comb += [self.idle.eq(~busy.any() & lsu.idle & weight_pusher.issue.ready &
                                  lhs_pusher.issue.ready),
                     self.vmem_issue.eq(lsu.issue.valid & lsu.issue.ready),
                     self.vmem_idle.eq(lsu.idle)]
        return m
