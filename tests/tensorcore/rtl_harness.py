# amaranth: UnusedElaboratable=no
# (A top whose later part rejects its parameters leaves the earlier parts unelaborated.)
"""Running a program on hdl.tensorcore.TensorCore in Amaranth's simulator, and comparing
the result with golden.tensorcore.run. Expected values never come from here: they are
the ISS's."""

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from golden import tensorcore as tc
from golden import vpu as golden_vpu
from hdl.memory.sync_flags import SyncFlags
from hdl.memory.vmem import VMEM
from hdl.tensorcore.core import TensorCore
from hdl.tensorcore.sequencer import Sequencer, State
from verif.suites.tensorcore.suite import differences

from ..support import pack_lines, unpack_lines

CLOCK = 1e-8
STATUS = {State.HALTED: "halted", State.ERROR: "error"}


@dataclass
class RTLRun:
    """The final state of an RTL run: what ``golden.tensorcore.CoreState`` also holds."""
    status: str
    error: str
    error_pc: int | None
    pc: int
    bundles: int
    sregs: np.ndarray
    smem: np.ndarray
    vregs: np.ndarray | None
    vmem: np.ndarray | None
    hbm: np.ndarray | None
    dma_rejected: int
    flags: np.ndarray
    waiting: tuple | None
    cycles: int
    vpu_error: int
    stop_cycle: int
    message: str


def _top_ports(n_flags):
    """The ports of every top here, as :class:`~hdl.tensorcore.system.TensorCoreSystem`'s."""
    return {"start": In(1), "state": Out(State), "pc": Out(32), "error_pc": Out(32),
            "bundles": Out(32), "error": Out(range(len(tc.ERRORS))), "waiting": Out(1),
            "dma_busy": Out(1), "drained": Out(1), "done": Out(1), "vpu_error": Out(8),
            "dma_rejected": Out(32),
            "flags": Out(data.ArrayLayout(32, n_flags))}


_STATUS_PORTS = ("state", "pc", "error_pc", "bundles", "error", "waiting", "dma_busy")


class SequencerTop(wiring.Component):
    """A :class:`Sequencer` with IMEM, SMEM and flags but no VPU: its vector words are
    taken at once and dropped. The sequencer's faults and scalar state do not depend on
    the VPU, so this cheap top checks them (the MXU counts too) where a VPU with an MXU
    would take long to build."""

    def __init__(self, **params):
        self.sequencer = Sequencer(**params)
        self.imem = VMEM(lines=self.sequencer.imem_depth, lanes=tc.BUNDLE_WORDS)
        self.smem = VMEM(lines=self.sequencer.smem_words, lanes=1)
        self.sync_flags = SyncFlags(n_flags=self.sequencer.n_flags)
        self.lanes = None
        self.memory_images = {"imem": (self.imem.words, "imem.words"),
                              "smem": (self.smem.words, "smem.words"),
                              "sregs": (self.sequencer.sregs, "sequencer.sregs")}
        super().__init__(_top_ports(self.sequencer.n_flags))

    def elaborate(self, platform):
        m = Module()
        m.submodules.sequencer = seq = self.sequencer
        m.submodules.imem, m.submodules.smem = self.imem, self.smem
        m.submodules.flags = flags = self.sync_flags
        wiring.connect(m, seq.imem, self.imem.core)
        wiring.connect(m, seq.smem, self.smem.core)
        wiring.connect(m, seq.smem_record, self.smem.dma)
        wiring.connect(m, seq.flag_wait, flags.wait)
        wiring.connect(m, seq.flag_set, flags.set)
        m.d.comb += [seq.vector.ready.eq(1), seq.flag_values.eq(flags.values),
                     seq.start.eq(self.start), self.drained.eq(1), seq.fence.eq(1),
                     self.flags.eq(flags.values),
                     self.done.eq((seq.state == State.HALTED) | (seq.state == State.ERROR))]
        m.d.comb += [getattr(self, name).eq(getattr(seq, name)) for name in _STATUS_PORTS]
        return m


class LocalCore(wiring.Component):
    """A :class:`TensorCore` with a VMEM and a flag bank of its own and no DMA engine
    (a ``dma`` bundle would wait for ever): for programs without DMAs."""

    def __init__(self, **params):
        self.core = TensorCore(**params)
        self.sequencer, self.lanes = self.core.sequencer, self.core.lanes
        self.vmem = VMEM(lines=self.sequencer.vmem_lines, lanes=self.lanes)
        self.sync_flags = SyncFlags(n_flags=self.core.n_flags)
        self.memory_images = {name: (memory, f"core.{path}") for name, (memory, path)
                              in self.core.memory_images.items()}
        self.memory_images["vmem"] = (self.vmem.words, "vmem.words")
        super().__init__(_top_ports(self.core.n_flags))

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        m.submodules.vmem = vmem = self.vmem
        m.submodules.flags = flags = self.sync_flags
        wiring.connect(m, core.memory.vmem, vmem.core)
        wiring.connect(m, core.memory.flag_set, flags.set)
        wiring.connect(m, core.memory.flag_wait, flags.wait)
        m.d.comb += [core.flag_values.eq(flags.values), core.start.eq(self.start),
                     core.memory.waiting.eq(flags.waiting), self.flags.eq(flags.values),
                     self.vpu_error.eq(core.vpu_error), self.drained.eq(core.drained),
                     self.done.eq(core.done)]
        m.d.comb += [getattr(self, name).eq(getattr(core, name)) for name in _STATUS_PORTS]
        return m


class CoreRunner:
    """A top (:class:`~hdl.tensorcore.system.TensorCoreSystem`, or :class:`LocalCore` or
    :class:`SequencerTop` of this module) in one Amaranth simulator, reset between runs, so
    that many programs share one elaboration."""

    def __init__(self, core):
        self.core = core
        self.lanes = core.lanes
        self.sim = Simulator(self.core)
        self.sim.add_clock(CLOCK)
        self.sim.add_testbench(self._bench)
        self.case, self.out, self.used = None, None, False

    def run(self, program, *, smem=None, sregs=None, vregs=None, vmem=None, hbm=None,
            max_cycles=5000):
        """Run ``program`` (words or text) until the core is done, a wait blocks with the
        VPU drained (``status`` "blocked": only this core changes flags), or ``max_cycles``
        pass ("watchdog"); returns an :class:`RTLRun`."""
        imem = tc.program_words(program)
        if len(imem) > self.core.sequencer.imem_depth:
            raise ValueError(f"{len(imem)} bundles do not fit imem_depth "
                             f"{self.core.sequencer.imem_depth}")
        lanes = self.lanes or 1
        self.case = {"imem": pack_lines(imem.ravel(), tc.BUNDLE_WORDS),
                     "smem": [] if smem is None else [int(w) for w in smem],
                     "sregs": [] if sregs is None else [int(w) for w in sregs],
                     "vregs": [] if vregs is None else
                     pack_lines(np.asarray(vregs).ravel(), golden_vpu.SUBLANES * lanes),
                     "vmem": [] if vmem is None else pack_lines(vmem, lanes),
                     "hbm": [] if hbm is None else [int(w) for w in hbm],
                     "max_cycles": max_cycles}
        if self.used:
            self.sim.reset()
        self.used = True
        self.sim.run()
        out = self.out
        return RTLRun(
            status=out["status"], error=tc.ERRORS[out["error"]],
            error_pc=out["error_pc"] if out["status"] == "error" else None, pc=out["pc"],
            bundles=out["bundles"], sregs=np.array(out["sregs"], np.uint32),
            smem=np.array(out["smem"], np.uint32),
            vregs=None if self.lanes is None else unpack_lines(
                out["vregs"], golden_vpu.SUBLANES * lanes).reshape(
                golden_vpu.VREGS, golden_vpu.SUBLANES, lanes),
            vmem=None if self.lanes is None else unpack_lines(out["vmem"], lanes),
            hbm=np.array(out["hbm"], np.uint32) if "hbm" in out else None,
            dma_rejected=out["dma_rejected"],
            flags=out["flags"], waiting=out.get("waiting"), message=out["message"],
            cycles=out["cycles"], vpu_error=out["vpu_error"], stop_cycle=out["stop_cycle"])

    async def _bench(self, ctx):
        core, case, out = self.core, self.case, {}
        images = core.memory_images
        for name in images:
            memory = images[name][0]
            for index, value in enumerate(case[name]):
                ctx.set(memory[index], value)
        ctx.set(core.start, 1)
        cycles, status, stop_cycle = 0, None, None
        while status is None:
            await ctx.tick()
            cycles += 1
            if stop_cycle is None and ctx.get(core.state) in STATUS:
                stop_cycle = cycles
            if ctx.get(core.done):
                status = STATUS[ctx.get(core.state)]
            elif ctx.get(core.waiting) and ctx.get(core.drained):
                status = "blocked"
            elif cycles >= case["max_cycles"]:
                status = "watchdog"
        out["status"], out["cycles"], out["stop_cycle"] = status, cycles, stop_cycle
        for name in ("error", "error_pc", "pc", "bundles", "vpu_error"):
            out[name] = ctx.get(getattr(core, name))
        wait = core.sequencer.flag_wait.payload
        if status == "blocked":
            out["waiting"] = (ctx.get(wait.flag), ctx.get(wait.value))
        out["message"] = f"{status} at pc {out['pc']} after {cycles} cycles"
        if status == "watchdog":                # name what the core waits on
            if ctx.get(core.waiting):
                out["message"] += f": waits for f{ctx.get(wait.flag)} >= {ctx.get(wait.value)}"
            elif ctx.get(core.dma_busy):
                out["message"] += ": a dma waits for its check, the VPU or the DMA engine"
            elif not ctx.get(core.drained):
                out["message"] += ": the VPU (or the DMA engine) has not finished"
        out["flags"] = np.array([ctx.get(core.flags[i]) for i in range(len(core.flags))],
                                np.uint32)
        out["dma_rejected"] = ctx.get(core.dma_rejected)
        for name in images:
            memory = images[name][0]
            out[name] = [ctx.get(memory[i]) for i in range(memory.depth)]
        self.out = out


def compare(rtl, iss, *, context=""):
    """Assert that an RTL run ends as the ISS's ``CoreState`` does, naming what differs
    (``verif.suites.tensorcore.suite.differences``, and a blocked wait's flag and value)."""
    found = differences(rtl, iss)
    if iss.status == "blocked" and rtl.waiting != iss.waiting:
        found.append(f"waiting: chip {rtl.waiting}, ISS {iss.waiting}")
    assert not found, "; ".join(found) + (f" ({context})" if context else "")
