"""The VPU's VMEM port: ``vld`` and ``vst`` of whole vregs, one sublane (VMEM line) a cycle."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.memory_port import MemoryPortSignature, line_addr_width
from .layouts import REG_BITS, SUBLANES, gather_rows, select_row, vreg_bits, writeback_signature
from ..lib.params import check_int

__all__ = ["LoadStoreUnit"]


class LoadStoreUnit(wiring.Component):
    """Moves a vreg between the register file and VMEM lines ``base + s * stride``.

    Sublane ``s`` is line ``base + s * stride``. A store writes the lines in
    sublane order, so with stride 0 sublane 7 stays in the line.

    Parameters
    ----------
    lanes : int
        Words per VMEM line.
    vmem_lines : int
        Lines of the VMEM behind ``vmem``. The issuer checks that every line
        of an instruction is below it; this unit does not.

    Ports
    -----
    issue : In(stream.Signature(StructLayout({"store": 1, "dest": 5, "base": 16,
            "stride": 5, "src": 256 * lanes})))
        A load into ``dest``, or a store of ``src`` (read at issue).
    vmem : Out(MemoryPortSignature(addr_width=line_addr_width(vmem_lines), words=lanes))
        Eight requests per instruction, one per cycle the memory takes.
    writeback : Out(writeback_signature(lanes))
        A loaded vreg, valid in the cycle its last line arrives; always taken.

    idle : Out(1)
        No access in progress: every request sent and every response in.

    Throughput and stalls: an instruction issues once the one before it has
    sent its last request (``issue.ready`` also in the cycle that request goes),
    so back-to-back instructions keep one line a cycle going; a load's responses
    may still be arriving while the next instruction sends (two loads at most
    await responses). Requests go in program order, so a store followed by a
    load of the same lines reads what was stored. With a single-cycle VMEM a
    store takes 8 cycles and a load ``8 + 1``, from the cycle after issue;
    ``vmem.req`` backpressure and a slow ``vmem.resp`` stretch them, and
    nothing is lost.
    """

    def __init__(self, *, lanes, vmem_lines):
        self.lanes = check_int("lanes", lanes, least=1)
        self.vmem_lines = check_int("vmem_lines", vmem_lines, least=1)
        layout = data.StructLayout({"store": 1, "dest": REG_BITS, "base": 16, "stride": 5,
                                    "src": vreg_bits(lanes)})
        super().__init__({
            "issue": In(stream.Signature(layout)),
            "vmem": Out(MemoryPortSignature(addr_width=line_addr_width(vmem_lines),
                                            words=lanes)),
            "writeback": Out(writeback_signature(lanes)),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        src = Signal(vreg_bits(lanes), reset_less=True)
        store = Signal(reset_less=True)
        stride = Signal(5, reset_less=True)
        addr = Signal(16 + 8, reset_less=True)           # base + s * stride, s <= 7
        to_send = Signal(range(SUBLANES + 1))
        sent = Signal(range(SUBLANES))
        # The loads whose responses are awaited, oldest first: their destinations and count.
        dests = [Signal(REG_BITS, name=f"dest{k}", reset_less=True) for k in range(2)]
        waiting = Signal(range(3))
        received = Signal(range(SUBLANES))              # the oldest load's responses so far

        req = self.vmem.req
        resp = self.vmem.resp
        sending = req.valid & req.ready
        last_response = resp.valid & (received == SUBLANES - 1)
        issue = self.issue.payload
        take = self.issue.valid & self.issue.ready
        m.d.comb += self.issue.ready.eq(
            (~to_send.any() | ((to_send == 1) & sending)) & ((waiting < 2) | last_response))
        m.d.comb += self.idle.eq(~to_send.any() & ~waiting.any())

        with m.If(sending):
            m.d.sync += [to_send.eq(to_send - 1), sent.eq(sent + 1), addr.eq(addr + stride)]
        with m.If(take):
            m.d.sync += [src.eq(issue.src), store.eq(issue.store), stride.eq(issue.stride),
                         addr.eq(issue.base), to_send.eq(SUBLANES), sent.eq(0)]

        m.d.comb += [
            req.valid.eq(to_send != 0),
            req.payload.addr.eq(addr),
            req.payload.write.eq(store),
            req.payload.data.eq(select_row(src, sent, lanes)),
            req.payload.mask.eq(-1),
        ]

        m.d.comb += resp.ready.eq(1)
        with m.If(resp.valid):
            m.d.sync += received.eq(received + 1)
        loading = take & ~issue.store
        staying = Signal(range(3))              # loads still waiting after this cycle
        m.d.comb += staying.eq(waiting - last_response)
        # The queue of destinations: the oldest leaves with its last response, a new load
        # joins behind whatever stays.
        with m.If(last_response):
            m.d.sync += dests[0].eq(dests[1])
        with m.If(loading):
            with m.If(~staying.any()):
                m.d.sync += dests[0].eq(issue.dest)
            with m.Else():
                m.d.sync += dests[1].eq(issue.dest)
        m.d.sync += waiting.eq(staying + loading)
        loaded = gather_rows(m, arriving=resp.valid, index=received, value=resp.payload.data,
                             lanes=lanes, name="loaded")
        m.d.comb += [
            self.writeback.valid.eq(last_response),
            self.writeback.payload.dest.eq(dests[0]),
            self.writeback.payload.data.eq(loaded),
        ]
        return m
