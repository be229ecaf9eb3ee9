"""Functional coverage of the TensorCore (cocotb-coverage), sampled from what each program
did: the ISS's trace of every bundle that issued, and the chip's stall counters.

Items, named ``tensorcore.*``. Per issued bundle (``golden.tensorcore.run``'s ``trace``):

* ``slot.<slot>``: what each slot held: ``scalar0`` an ALU op, ``lw`` or ``sw``;
  ``scalar1`` an ALU op, a branch taken or not, a ``loop`` taken or exiting; each vector
  slot its unit (``valu0``/``valu1``: ALU, transcendental or reduction; ``push``: weights,
  LHS, LHS with accumulators); ``misc`` its op;
* ``slot_pairs``: every pair of slots used in one bundle, and ``all`` (every slot);
* ``hazard``: a bundle reading a scalar register the bundle before wrote, by reader
  (:data:`HAZARDS`): another ALU op, a branch, an ``sw``'s data, a ``vld``/``vst`` base
  register, the misc operand; an ``lw``'s result used at once; both scalar slots writing
  one register; a ``vld`` of a VMEM line a ``vst`` wrote one to three bundles before; a
  ``dma`` one to three bundles after a ``vst`` (the VMEM fence); a vector slot in the
  bundle after a met ``wait``/``waitc`` (in DMA programs, the data the DMA brought); a
  ``dma`` of the record after the last ``dma``'s (the one the chip reads ahead); a
  ``dma`` of a record an ``sw`` wrote since the last ``dma`` (so a record read ahead is
  read again).

Per program: ``stall``, each cause (``hdl.tensorcore.sequencer.STALL_CAUSES``) the chip
counted at least one cycle of; ``stop``, how it ended (:data:`STOPS`); ``kind`` x
``numerics``.
"""

from cocotb_coverage.coverage import CoverCross, CoverPoint, coverage_db, coverage_section

from golden import tensorcore as tc
from golden import vpu as golden_vpu
from hdl.tensorcore.sequencer import STALL_CAUSES

__all__ = ["KINDS", "SLOT_KINDS", "SLOT_NAMES", "HAZARDS", "STOPS", "Tracer", "sampler",
           "stall_causes", "uncovered"]

#: Program kinds of the suite (``verif.suites.tensorcore.suite``).
KINDS = ("branchy", "mxu", "dense", "dma", "faulty")
_BRANCHES = ("beq", "bne", "blt", "bge", "bltu", "bgeu")
#: What each slot may hold (``slot.<slot>``).
SLOT_KINDS = {
    "scalar0": ("alu", "lw", "sw"),
    "scalar1": ("alu", "branch_taken", "branch_not_taken", "loop_taken", "loop_exit"),
    "vld": ("load",), "valu0": ("alu", "trans", "reduce"), "valu1": ("alu", "trans", "reduce"),
    "push": ("push_weights", "push_lhs", "push_lhs_acc"), "pop": ("pop",), "vst": ("store",),
    "misc": ("halt", "dma", "wait", "waitc", "fset", "fadd", "delay"),
}
SLOT_NAMES = tuple(SLOT_KINDS)
_PAIRS = [f"{a}+{b}" for i, a in enumerate(SLOT_NAMES) for b in SLOT_NAMES[i + 1:]]
HAZARDS = ("alu_after_write", "branch_after_write", "sw_data_after_write",
           "vaddr_after_write", "misc_after_write", "load_use", "same_rd",
           "vld_after_vst", "dma_after_vst", "vector_after_wait", "dma_next_record",
           "dma_record_written")
#: How a program may end: halted, blocked on a wait, or each fault the stimulus deals
#: (``race`` is the ISS's own, and such programs are not run; the chip always has an MXU
#: and names no other chip, so ``no_mxu``, ``dma_chip`` and ``dma_sent_flag`` cannot be).
STOPS = ("halted", "blocked", "illegal", "imem_range", "smem_range", "vmem_range",
         "flag_range", "weights_full", "results_full", "pop_empty", "dma_format",
         "dma_count", "dma_flag", "dma_src_range", "dma_dst_range")
#: Bundles back from a ``vst`` within which a ``vld`` of its lines, or a ``dma``, counts.
_WINDOW = 3


def _scalar_writes(ins):
    spec = ins.spec
    return ins.rd if spec.fmt in ("r", "i", "u", "l") and ins.rd else None


def _scalar_reads(ins):
    """The registers an instruction reads, by role: ``(alu/address, data, branch)``."""
    fmt = ins.spec.fmt
    if fmt in ("r",):
        return {ins.ra, ins.rb}, set(), set()
    if fmt in ("i", "l"):
        return {ins.ra}, set(), set()
    if fmt == "s":
        return {ins.ra}, {ins.rd}, set()
    if fmt in ("b",):
        return set(), set(), {ins.rd, ins.ra}
    if fmt == "loop":
        return set(), set(), {ins.rd}
    return set(), set(), set()


def _lines(ins, reg_value):
    base = (ins.base + reg_value) & 0xFFFFFFFF
    return {base + k * ins.stride for k in range(golden_vpu.SUBLANES)}


class Tracer:
    """``golden.tensorcore.run``'s ``trace``: turns each issued bundle into samples of one
    program (:meth:`bundles`, after the run, with the final pc for the last branch)."""

    def __init__(self):
        self.steps = []

    def __call__(self, pc, bundle, sregs):
        self.steps.append((pc, bundle, sregs))

    def bundles(self, final_pc):
        """``(slot kinds, slot pairs, hazards)`` per issued bundle."""
        out = []
        recent_vst, prev = [], None
        last_record, stored_words = None, set()    # the last dma's record; sw since
        pcs = [pc for pc, _, _ in self.steps[1:]] + [final_pc]
        for (pc, b, regs), next_pc in zip(self.steps, pcs):
            kinds = self._kinds(b, next_pc - pc)
            hazards = set()
            written = set() if prev is None else prev[0]
            loaded = None if prev is None else prev[1]
            alu_reads = set().union(*(_scalar_reads(s)[0] for s in (b.scalar0, b.scalar1)))
            data_reads = _scalar_reads(b.scalar0)[1]
            branch_reads = _scalar_reads(b.scalar1)[2]
            vaddr = {r for r, ins in ((b.vld_reg, b.vld), (b.vst_reg, b.vst))
                     if r and ins.op != "nop"}
            misc_reads = {b.misc.ra} if b.misc.ra and b.misc.spec.operand else set()
            every = alu_reads | data_reads | branch_reads | vaddr | misc_reads
            for name, reads in (("alu_after_write", alu_reads),
                                ("branch_after_write", branch_reads),
                                ("sw_data_after_write", data_reads),
                                ("vaddr_after_write", vaddr),
                                ("misc_after_write", misc_reads)):
                if reads & written - {0}:
                    hazards.add(name)
            if loaded and loaded in every:
                hazards.add("load_use")
            w0, w1 = _scalar_writes(b.scalar0), _scalar_writes(b.scalar1)
            if w0 and w0 == w1:
                hazards.add("same_rd")
            if b.vld.op != "nop":
                lines = _lines(b.vld, int(regs[b.vld_reg]))
                if any(lines & stored for stored in recent_vst):
                    hazards.add("vld_after_vst")
            if b.misc.op == "dma" and any(recent_vst):
                hazards.add("dma_after_vst")
            if b.misc.op == "dma":
                record = (int(regs[b.misc.ra]) + b.misc.imm) & 0xFFFFFFFF
                if last_record is not None and record == last_record + tc.DESCRIPTOR_WORDS:
                    hazards.add("dma_next_record")
                if stored_words & set(range(record, record + tc.DESCRIPTOR_WORDS)):
                    hazards.add("dma_record_written")
                last_record, stored_words = record, set()
            if b.scalar0.op == "sw":
                stored_words.add((int(regs[b.scalar0.ra]) + b.scalar0.imm) & 0xFFFFFFFF)
            if prev is not None and prev[2] and any(
                    getattr(b, slot).op != "nop" for slot in tc.VECTOR_SLOTS):
                hazards.add("vector_after_wait")
            stored = _lines(b.vst, int(regs[b.vst_reg])) if b.vst.op != "nop" else set()
            recent_vst = ([stored] + recent_vst)[:_WINDOW]
            prev = ({w for w in (w0, w1) if w}, b.scalar0.rd if b.scalar0.op == "lw" else None,
                    b.misc.op in ("wait", "waitc"))
            used = [slot for slot in SLOT_NAMES if kinds.get(slot)]
            pairs = [f"{a}+{c}" for i, a in enumerate(used) for c in used[i + 1:]]
            if len(used) == len(SLOT_NAMES):
                pairs.append("all")
            out.append((kinds, pairs, sorted(hazards)))
        return out

    @staticmethod
    def _kinds(b, step):
        kinds = {}
        s0, s1 = b.scalar0, b.scalar1
        if s0.op != "nop":
            kinds["scalar0"] = s0.op if s0.op in ("lw", "sw") else "alu"
        if s1.op in _BRANCHES:
            kinds["scalar1"] = "branch_taken" if step != 1 else "branch_not_taken"
        elif s1.op == "loop":
            kinds["scalar1"] = "loop_taken" if step != 1 else "loop_exit"
        elif s1.op != "nop":
            kinds["scalar1"] = "alu"
        for slot in tc.VECTOR_SLOTS:
            ins = getattr(b, slot)
            if ins.op == "nop":
                continue
            unit = ins.spec.unit
            kinds[slot] = ins.op if slot == "push" else {"load": "load", "store": "store",
                                                         "mxu": "pop"}.get(unit, unit)
        if b.misc.op != "nop":
            kinds["misc"] = b.misc.op
        return kinds


def _index(i):
    return lambda sample: sample[i]


def _member(value, bin_):
    return bin_ in value


def sampler():
    """A fresh model (after ``coverage_db.clear()``); returns ``(sample_bundle,
    sample_program)``: ``sample_bundle((kinds, pairs, hazards))`` per issued bundle
    (:meth:`Tracer.bundles`), ``sample_program((kind, numerics, stop, stalls))`` per
    program, ``stalls`` the causes with a non-zero count."""
    slot_points = [CoverPoint(f"tensorcore.slot.{slot}",
                              xf=lambda sample, slot=slot: sample[0].get(slot),
                              bins=list(kinds))
                   for slot, kinds in SLOT_KINDS.items()]

    @coverage_section(
        *slot_points,
        CoverPoint("tensorcore.slot_pairs", xf=_index(1), rel=_member, inj=False,
                   bins=[*_PAIRS, "all"]),
        CoverPoint("tensorcore.hazard", xf=_index(2), rel=_member, inj=False,
                   bins=list(HAZARDS)))
    def sample_bundle(sample):
        pass

    @coverage_section(
        CoverPoint("tensorcore.kind", xf=_index(0), bins=list(KINDS)),
        CoverPoint("tensorcore.numerics", xf=_index(1), bins=["tpu", "ieee"]),
        CoverCross("tensorcore.kind_x_numerics", items=["tensorcore.kind",
                                                        "tensorcore.numerics"]),
        CoverPoint("tensorcore.stop", xf=_index(2), bins=list(STOPS)),
        CoverPoint("tensorcore.stall", xf=_index(3), rel=_member, inj=False,
                   bins=list(STALL_CAUSES)))
    def sample_program(sample):
        pass

    return sample_bundle, sample_program


def uncovered():
    """Every bin of the current ``tensorcore`` model not hit yet, as ``"item: bin"``."""
    return [f"{name}: {b}" for name, item in coverage_db.items()
            if name.startswith("tensorcore.") and isinstance(item, (CoverPoint, CoverCross))
            for b, hits in item.detailed_coverage.items() if hits < item.at_least]


def stall_causes(counters):
    """The stall causes a program's counters (``sim.chip.CoreRun.counters``) saw."""
    return [cause for cause in STALL_CAUSES if counters.get(f"stall_{cause}", 0)]
