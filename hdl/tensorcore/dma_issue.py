"""The misc slot's ``dma``: take its descriptor record from SMEM, judge it before the
bundle commits, and hand it to the DMA engine once the VPU has drained."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.memory_port import MemoryPortSignature, line_addr_width
from ..lib.params import check_int
from ..memory.dma_check import DescriptorCheck, check_descriptor_check_params
from ..memory.layouts import ADDRESS_BITS, DIMS, Reason, descriptor_layout
from .encoding import Error
from .isa import CONTROL_FIELDS, DESCRIPTOR_FIELDS, DESCRIPTOR_WORDS
from .record_reader import RecordReader

__all__ = ["DmaIssue", "check_layout", "verdict_layout"]

#: The sequencer's request: judge the record at SMEM word ``address``.
check_layout = data.StructLayout({"address": 32})
#: The verdict: ``code`` ``NONE`` (accepted: the descriptor is held for ``dma``) or an error.
verdict_layout = data.StructLayout({"code": Error})

_STRIDES = [f"{side}_stride{i}" for side in ("src", "dst") for i in range(DIMS)]


class _Phase(enum.Enum, shape=3):
    IDLE = 0
    READ = 1
    FORMAT = 2
    JUDGE = 3
    VERDICT = 4
    SEND = 5


def _control(word, name):
    low, width = CONTROL_FIELDS[name]
    return word[low:low + width]


class DmaIssue(wiring.Component):
    """Issues one ``dma`` at a time, with every fault known before its bundle commits.

    On ``check`` it takes the :data:`~golden.tensorcore.DESCRIPTOR_WORDS`-word record
    from SMEM (the caller has range-checked it) through a
    :class:`~hdl.tensorcore.record_reader.RecordReader`, which reads it through two ports
    and reads the next record ahead, and judges it as the ISS does: a record
    no ``golden.memory.Descriptor`` can hold is ``dma_format`` (reserved control bits, a
    chip or sent flag on a local transfer, a sent flag without ``has_sent``, a base or
    count over 24 bits, a stride outside ``(-2**24, 2**24)``, counts moving ``2**24`` words
    or more); otherwise a :class:`~hdl.memory.dma_check.DescriptorCheck` of its own, with
    the DMA engine's sizes, gives ``golden.memory.validate``'s verdict (``dma_count`` ...
    ``dma_dst_range``). The DMA engine would reject the same descriptors, but only after
    the bundle had issued; judging here keeps a faulting bundle from doing anything.

    Parameters
    ----------
    smem_words : int
        SMEM words.
    hbm_words, vmem_words : int
        The DMA engine's space sizes, in words.
    n_flags, n_chips : int
    record_ports : int
        2 (the default): records are read through ``smem`` and ``smem_spare``; 1: through
        ``smem`` alone (no ``smem_spare``), for an SMEM with one RAM port.
    record_window : int
        Words ``smem`` reads a request (default 1; 8 reads a record as fast as this
        judges them: below).

    Ports
    -----
    check : In(stream.Signature(check_layout))
        Taken when no descriptor is being judged or held, or in the cycle the one held
        goes to the DMA engine.
    verdict : Out(stream.Signature(verdict_layout))
        Held until taken. Taking an accepting verdict is the commit: the descriptor is
        then held for ``dma``.
    smem : Out(MemoryPortSignature(addr_width, words=record_window))
        Record reads, one request a cycle; responses are always taken.
    smem_spare : Out(MemoryPortSignature(addr_width, words=1)), with ``record_ports=2``
        Record reads on a port shared with others: requests may wait for theirs.
    written : In(1)
        SMEM is written this cycle (a record read before is read again).
    fence : In(1)
        The VPU has performed every VMEM access issued before (the vector queue is empty
        and the VPU idle).
    dma : Out(stream.Signature(descriptor_layout))
        The accepted descriptor, offered once ``fence`` is high, for the DMA engine.
    busy : Out(1)
        A descriptor is being read, judged or held: the sequencer issues nothing else,
        but a ``dma`` bundle while ``sending``.
    sending : Out(1)
        The held descriptor goes to the DMA engine this cycle, and ``check`` may be taken
        (until the engine has it, nothing else may count on it being there).

    Latency: the record is taken with ``check`` when it was read ahead (the record after
    the last one taken, SMEM not written since), else after the reader's time
    (:class:`~hdl.tensorcore.record_reader.RecordReader`: 8 cycles for a record on
    one-word ports, 4 with ``record_window=8``); then one cycle for the format check and
    the :class:`~hdl.memory.dma_check.DescriptorCheck`'s (2 cycles when accepted, at most
    33 for a range rejection), the verdict offered in the last; an accepted descriptor
    is offered to the DMA engine in the cycle after its verdict is taken. Throughput: one
    descriptor at a time; ``check`` is taken again in the cycle the last is sent, so
    back-to-back ``dma`` bundles whose records are read ahead go every 4 cycles (when
    the reader keeps up, and ``fence`` and the DMA engine do not hold them).
    """

    def __init__(self, *, smem_words, hbm_words, vmem_words, n_flags, n_chips=1,
                 record_ports=2, record_window=1):
        self.smem_words = check_int("smem_words", smem_words, least=DESCRIPTOR_WORDS)
        self.record_ports = check_int("record_ports", record_ports, least=1, most=2)
        self.record_window = check_int("record_window", record_window, least=1)
        # The check is built in elaborate; its parameters are refused here, at once.
        self.check_params = dict(hbm_size=hbm_words, vmem_size=vmem_words, n_flags=n_flags,
                                 n_chips=n_chips, queue_depth=1)
        check_descriptor_check_params(**self.check_params)
        self.port_signature = MemoryPortSignature(addr_width=line_addr_width(smem_words),
                                                  words=1)
        record_port = MemoryPortSignature(addr_width=line_addr_width(smem_words),
                                          words=record_window)
        super().__init__({
            "check": In(stream.Signature(check_layout)),
            "verdict": Out(stream.Signature(verdict_layout)),
            "smem": Out(record_port),
            **({"smem_spare": Out(self.port_signature)} if record_ports == 2 else {}),
            "written": In(1),
            "fence": In(1),
            "dma": Out(stream.Signature(descriptor_layout)),
            "busy": Out(1),
            "sending": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.precheck = precheck = DescriptorCheck(**self.check_params)
        m.submodules.reader = reader = RecordReader(
            smem_words=self.smem_words, words=DESCRIPTOR_WORDS, ports=self.record_ports,
            window=self.record_window)
        wiring.connect(m, reader.smem, wiring.flipped(self.smem))
        if self.record_ports == 2:
            wiring.connect(m, reader.spare, wiring.flipped(self.smem_spare))
        phase = Signal(_Phase)
        address = Signal(32)
        words = [Signal(32, name=f"record{k}") for k in range(DESCRIPTOR_WORDS)]
        code = Signal(Error)
        held = Signal(descriptor_layout)

        # ---- the record, as a descriptor, and what no descriptor can hold
        w = dict(zip(DESCRIPTOR_FIELDS, words))
        control = w["control"]
        used = sum(((1 << width) - 1) << low for low, width in CONTROL_FIELDS.values())
        remote, has_sent = _control(control, "remote"), _control(control, "has_sent")
        chip, sent_flag = _control(control, "chip"), _control(control, "sent_flag")
        counts = [w[f"count{i}"] for i in range(DIMS)]
        too_wide = Cat(*(w[n][ADDRESS_BITS:].any() for n in
                         ("src_base", "dst_base", "count0", "count1", "count2")))
        # int32 in (-2**24, 2**24): bits 31..24 all equal, and not exactly -2**24.
        bad_stride = Cat(*(~((w[n][ADDRESS_BITS:] == 0) |
                             ((w[n][ADDRESS_BITS:] == 0xFF) & w[n][:ADDRESS_BITS].any()))
                           for n in _STRIDES))
        # The words moved, for the format check: the first product is taken with the record
        # (from the reader's registers), so that no cycle holds two multipliers in a row.
        pairs = Signal(2 * ADDRESS_BITS)
        words_moved = pairs * counts[2][:ADDRESS_BITS]
        bad_format = ((control & ~used & 0xFFFFFFFF).any()
                      | (~remote & (chip.any() | has_sent | sent_flag.any()))
                      | (~has_sent & sent_flag.any())
                      | too_wide.any() | bad_stride.any()
                      | (words_moved >= (1 << ADDRESS_BITS)))
        desc = Signal(descriptor_layout)
        m.d.comb += [
            desc.src_space.eq(_control(control, "src_vmem")), desc.src_base.eq(w["src_base"]),
            desc.dst_space.eq(_control(control, "dst_vmem")), desc.dst_base.eq(w["dst_base"]),
            desc.flag.eq(_control(control, "flag")), desc.remote.eq(remote), desc.chip.eq(chip),
            desc.sent.eq(has_sent), desc.sent_flag.eq(sent_flag),
        ]
        for i in range(DIMS):
            m.d.comb += [desc.counts[i].eq(counts[i]),
                         desc.src_strides[i].eq(w[f"src_stride{i}"].as_signed()),
                         desc.dst_strides[i].eq(w[f"dst_stride{i}"].as_signed())]

        # Each DescriptorCheck reason the core reports as its Error of the same name.
        reason_code = Error.NONE
        for reason in Reason:
            if f"DMA_{reason.name}" in Error.__members__:
                reason_code = Mux(precheck.errors.payload.reason == reason,
                                  Error[f"DMA_{reason.name}"], reason_code)

        sending = self.sending
        # The verdict is offered in the cycle the check answers, and held if not taken.
        judged = (phase == _Phase.JUDGE) & (precheck.jobs.valid | precheck.errors.valid)
        judged_code = Mux(precheck.jobs.valid, Error.NONE, reason_code)
        m.d.comb += [
            self.busy.eq(phase != _Phase.IDLE),
            sending.eq((phase == _Phase.SEND) & self.dma.valid & self.dma.ready),
            reader.written.eq(self.written),
            self.verdict.valid.eq((phase == _Phase.VERDICT) | judged),
            self.verdict.payload.code.eq(Mux(phase == _Phase.VERDICT, code, judged_code)),
            precheck.descriptors.payload.eq(desc),
            self.dma.payload.eq(held),
            self.dma.valid.eq((phase == _Phase.SEND) & self.fence),
        ]

        def take_record():
            record = dict(zip(DESCRIPTOR_FIELDS, reader.record))
            m.d.sync += [phase.eq(_Phase.FORMAT),
                         *(word.eq(reader.record[k]) for k, word in enumerate(words)),
                         pairs.eq(record["count0"][:ADDRESS_BITS] *
                                  record["count1"][:ADDRESS_BITS])]

        def take_check():
            """Take ``check``; its record at once if it was read ahead."""
            m.d.comb += [self.check.ready.eq(1), reader.request.valid.eq(self.check.valid),
                         reader.request.payload.address.eq(self.check.payload.address)]
            with m.If(self.check.valid):
                m.d.sync += address.eq(self.check.payload.address)
                with m.If(reader.request.ready):
                    take_record()
                with m.Else():
                    m.d.sync += phase.eq(_Phase.READ)

        def verdict_taken(verdict_code):
            with m.If(self.verdict.ready):
                m.d.sync += phase.eq(Mux(verdict_code == 0, _Phase.SEND, _Phase.IDLE))

        with m.Switch(phase):
            with m.Case(_Phase.IDLE):
                take_check()
            with m.Case(_Phase.READ):
                m.d.comb += [reader.request.valid.eq(1),
                             reader.request.payload.address.eq(address)]
                with m.If(reader.request.ready):
                    take_record()
            with m.Case(_Phase.FORMAT):
                with m.If(bad_format):
                    m.d.sync += [code.eq(Error.DMA_FORMAT), phase.eq(_Phase.VERDICT)]
                with m.Else():
                    m.d.comb += precheck.descriptors.valid.eq(1)
                    with m.If(precheck.descriptors.ready):
                        m.d.sync += [held.eq(desc), phase.eq(_Phase.JUDGE)]
            with m.Case(_Phase.JUDGE):
                m.d.comb += [precheck.jobs.ready.eq(1), precheck.errors.ready.eq(1)]
                with m.If(judged):
                    m.d.sync += [code.eq(judged_code), phase.eq(_Phase.VERDICT)]
                    verdict_taken(judged_code)
            with m.Case(_Phase.VERDICT):
                verdict_taken(code)
            with m.Case(_Phase.SEND):
                with m.If(sending):
                    m.d.sync += phase.eq(_Phase.IDLE)
                    take_check()
        return m
