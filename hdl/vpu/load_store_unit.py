"""The VPU's VMEM ports: ``vld`` and ``vst`` of whole vregs, one sublane (VMEM line) a cycle,
or with a window port a whole vreg a request when its lines are in a row."""

from amaranth.hdl import C, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.memory_port import MemoryPortSignature, line_addr_width, window_members
from .layouts import REG_BITS, SUBLANES, gather_rows, select_row, vreg_bits, writeback_signature
from ..lib.params import check_int

__all__ = ["LoadStoreUnit", "check_window"]


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
    window : int
        0 (the default: every line goes through ``vmem``), or 8: a ``window`` port
        that moves the 8 lines of a stride-1 ``vld`` or ``vst`` in one request
        (:class:`~hdl.memory.vmem.VMEM`'s ``window`` with ``window_writes``).

    Ports
    -----
    issue : In(stream.Signature(StructLayout({"store": 1, "dest": 5, "base": 16,
            "stride": 5, "src": 256 * lanes})))
        A load into ``dest``, or a store of ``src`` (read at issue).
    vmem : Out(MemoryPortSignature(addr_width=line_addr_width(vmem_lines), words=lanes))
        Eight requests per instruction, one per cycle the memory takes.
    window : Out(MemoryPortSignature(addr_width=..., words=8 * lanes)), with ``window``
        One request per stride-1 instruction instead: sublane ``s`` is line
        ``base + s``.
    writeback : Out(writeback_signature(lanes))
        A loaded vreg, valid in the cycle its last line (or its ``window`` answer)
        arrives; always taken.

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
    nothing is lost. With ``window``, a stride-1 store takes 1 cycle and a
    load 2; a load for one port sends its request no earlier than the cycle
    the loads before it on the other port have answered, so that loaded vregs
    are written back in program order whatever either port's latency.
    """

    def __init__(self, *, lanes, vmem_lines, window=0):
        self.lanes = check_int("lanes", lanes, least=1)
        self.vmem_lines = check_int("vmem_lines", vmem_lines, least=1)
        self.window_lines = check_window(window, "window")
        layout = data.StructLayout({"store": 1, "dest": REG_BITS, "base": 16, "stride": 5,
                                    "src": vreg_bits(lanes)})
        super().__init__({
            "issue": In(stream.Signature(layout)),
            "vmem": Out(MemoryPortSignature(addr_width=line_addr_width(vmem_lines),
                                            words=lanes)),
            **window_members("window", lines=vmem_lines, lanes=lanes, window=window),
            "writeback": Out(writeback_signature(lanes)),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        src = Signal(vreg_bits(lanes), reset_less=True)
        store = Signal(reset_less=True)
        whole = Signal(reset_less=True)                 # this one goes through ``window``
        stride = Signal(5, reset_less=True)
        addr = Signal(16 + 8, reset_less=True)           # base + s * stride, s <= 7
        to_send = Signal(range(SUBLANES + 1))
        sent = Signal(range(SUBLANES))
        # The loads whose responses are awaited, oldest first: their destinations, whether
        # each is on the window port, and their count.
        dests = [Signal(REG_BITS, name=f"dest{k}", reset_less=True) for k in range(2)]
        wholes = [Signal(name=f"whole{k}", reset_less=True) for k in range(2)]
        waiting = Signal(range(3))
        received = Signal(range(SUBLANES))              # the oldest load's responses so far

        req = self.vmem.req
        resp = self.vmem.resp
        issue = self.issue.payload
        take = self.issue.valid & self.issue.ready
        last_line = resp.valid & (received == SUBLANES - 1)
        if self.window_lines:
            wreq, wresp = self.window.req, self.window.resp
            sending = (req.valid & req.ready) | (wreq.valid & wreq.ready)
            last_response = Mux(wholes[0], wresp.valid, last_line)
            taking_whole = issue.stride == 1
        else:
            sending = req.valid & req.ready
            last_response = last_line
            taking_whole = C(0)
        m.d.comb += self.issue.ready.eq(
            (~to_send.any() | ((to_send == 1) & sending)) & ((waiting < 2) | last_response))
        m.d.comb += self.idle.eq(~to_send.any() & ~waiting.any())

        with m.If(sending):
            m.d.sync += [to_send.eq(to_send - 1), sent.eq(sent + 1), addr.eq(addr + stride)]
        with m.If(take):
            m.d.sync += [src.eq(issue.src), store.eq(issue.store), stride.eq(issue.stride),
                         addr.eq(issue.base), whole.eq(taking_whole),
                         to_send.eq(Mux(taking_whole, 1, SUBLANES)), sent.eq(0)]

        # A load waits to send while an older load on the other port has not answered (it
        # is then the second of two awaited), so that loads answer in program order; in
        # the cycle the older one's last answer comes, it may go.
        held = ~store & (waiting == 2) & ~last_response & (wholes[0] != whole)
        m.d.comb += [
            req.valid.eq(to_send.any() & ~whole & ~held),
            req.payload.addr.eq(addr),
            req.payload.write.eq(store),
            req.payload.data.eq(select_row(src, sent, lanes)),
            req.payload.mask.eq(-1),
            resp.ready.eq(1),
        ]
        if self.window_lines:
            m.d.comb += [
                wreq.valid.eq(to_send.any() & whole & ~held),
                wreq.payload.addr.eq(addr),
                wreq.payload.write.eq(store),
                wreq.payload.data.eq(src),
                wreq.payload.mask.eq(-1),
                wresp.ready.eq(1),
            ]

        with m.If(resp.valid):
            m.d.sync += received.eq(received + 1)
        loading = take & ~issue.store
        staying = Signal(range(3))              # loads still waiting after this cycle
        m.d.comb += staying.eq(waiting - last_response)
        # The queue of loads: the oldest leaves with its last response, a new load joins
        # behind whatever stays.
        with m.If(last_response):
            m.d.sync += [dests[0].eq(dests[1]), wholes[0].eq(wholes[1])]
        with m.If(loading):
            with m.If(~staying.any()):
                m.d.sync += [dests[0].eq(issue.dest), wholes[0].eq(taking_whole)]
            with m.Else():
                m.d.sync += [dests[1].eq(issue.dest), wholes[1].eq(taking_whole)]
        m.d.sync += waiting.eq(staying + loading)
        loaded = gather_rows(m, arriving=resp.valid, index=received, value=resp.payload.data,
                             lanes=lanes, name="loaded")
        if self.window_lines:
            loaded = Mux(wholes[0], wresp.payload.data, loaded)
        m.d.comb += [
            self.writeback.valid.eq(last_response),
            self.writeback.payload.dest.eq(dests[0]),
            self.writeback.payload.data.eq(loaded),
        ]
        return m


def check_window(window, name="vmem_window"):
    """A :class:`LoadStoreUnit`'s ``window``, ``name`` of the VPU and cores that pass it
    on: 0 or 8, checked (TypeError, ValueError)."""
    check_int(name, window, least=0)
    if window not in (0, SUBLANES):
        raise ValueError(f"{name} must be 0 (line by line) or {SUBLANES} (a whole vreg a "
                         f"request), not {window}")
    return window
