"""The TensorCore's work items for its chip's SparseCore: a doorbell and a work item in SMEM."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.memory_port import WORD_BITS, MemoryPortSignature, line_addr_width
from ..lib.params import check_int
from ..sparsecore.engine import CONTROL_FIELDS, WORK_FIELDS, work_layout

__all__ = ["SparseIssue", "doorbell_address", "work_address"]


def doorbell_address(smem_words):
    """SMEM word of the SparseCore's doorbell: the last one."""
    return smem_words - 1


def work_address(smem_words):
    """First SMEM word of the SparseCore's work item, just below the doorbell."""
    return smem_words - 1 - len(WORK_FIELDS)


class SparseIssue(wiring.Component):
    """Hands the core's work items to the SparseCore engine.

    The core posts work as it would a DMA descriptor, in SMEM: it stores the item's
    words (``hdl.sparsecore.WORK_FIELDS``, one word each, at :func:`work_address`) and
    then the number of items it has posted so far in the doorbell (:func:`doorbell_address`,
    1 for the first). After ``start``, this unit reads the doorbell again and again through
    its SMEM port; whenever it differs from the items taken, it reads the item and offers
    it on ``work`` (``control`` packs ``hdl.sparsecore.CONTROL_FIELDS``; addresses are HBM
    lines). The core must not rewrite the item before
    the engine has taken it: waiting for the item's flag, as it waits for a DMA, is enough.

    Parameters
    ----------
    smem_words : int
        SMEM words, at least ``len(WORK_FIELDS) + 1``.
    addr_width : int
        Bits of an HBM line address (the work item's).

    Ports
    -----
    start : In(1)
    smem : Out(MemoryPortSignature(addr_width=line_addr_width(smem_words), words=1))
    work : Out(stream.Signature(work_layout(addr_width)))
    idle : Out(1)
        The last doorbell read equalled the items taken, and no item is being read or
        offered.
    """

    def __init__(self, *, smem_words, addr_width):
        self.smem_words = check_int("smem_words", smem_words, least=len(WORK_FIELDS) + 1)
        self.addr_width = addr_width
        super().__init__({
            "start": In(1),
            "smem": Out(MemoryPortSignature(addr_width=line_addr_width(smem_words), words=1)),
            "work": Out(stream.Signature(work_layout(addr_width))),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n = len(WORK_FIELDS)
        words = Signal(data.ArrayLayout(WORD_BITS, n))
        taken = Signal(WORD_BITS)
        index = Signal(range(n + 1))
        seen = Signal(WORD_BITS)                         # the last doorbell read
        req, resp = self.smem.req, self.smem.resp
        m.d.comb += [req.payload.write.eq(0), resp.ready.eq(1)]

        field = {name: words[i] for i, name in enumerate(WORK_FIELDS)}
        control = field["control"]
        payload = self.work.payload
        m.d.comb += [
            *(getattr(payload, name).eq(control[low:low + bits])
              for name, (low, bits) in CONTROL_FIELDS.items()),
            *(getattr(payload, name).eq(field[name])
              for name in ("lr", "n_rows", "n_ids", "n_bags", "table", "ids", "weights",
                           "ends", "grads", "out", "flag")),
        ]
        with m.FSM():
            with m.State("reset"):
                with m.If(self.start):
                    m.next = "poll"
            with m.State("poll"):
                m.d.comb += [req.valid.eq(1),
                             req.payload.addr.eq(doorbell_address(self.smem_words))]
                with m.If(req.ready):
                    m.next = "doorbell"
            with m.State("doorbell"):
                with m.If(resp.valid):
                    m.d.sync += seen.eq(resp.payload.data[0])
                    with m.If(resp.payload.data[0] != taken):
                        m.d.sync += index.eq(0)
                        m.next = "read"
                    with m.Else():
                        m.next = "poll"
            with m.State("read"):
                m.d.comb += [req.valid.eq(1),
                             req.payload.addr.eq(work_address(self.smem_words) + index)]
                with m.If(req.ready):
                    m.next = "word"
            with m.State("word"):
                with m.If(resp.valid):
                    m.d.sync += [words[n - 1].eq(resp.payload.data[0]),
                                 *(words[i].eq(words[i + 1]) for i in range(n - 1)),
                                 index.eq(index + 1)]
                    with m.If(index == n - 1):
                        m.next = "offer"
                    with m.Else():
                        m.next = "read"
            with m.State("offer"):
                m.d.comb += self.work.valid.eq(1)
                with m.If(self.work.ready):
                    m.d.sync += taken.eq(taken + 1)
                    m.next = "poll"
        m.d.comb += self.idle.eq((seen == taken) & ~self.work.valid)
        return m
