# amaranth: UnusedElaboratable=no
# (The bad-parameter test constructs a component whose __init__ raises.)
"""SparseIssue: the work item below the doorbell in SMEM reaches the SparseCore engine once
per doorbell count, with every field in place, and only after start."""

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring

from hdl.memory import VMEM
from hdl.sparsecore import WORK_FIELDS
from hdl.tensorcore.sparse_issue import SparseIssue, doorbell_address, work_address

from ..support import simulate

SMEM_WORDS = 64


class IssueOnSmem(wiring.Component):
    def __init__(self):
        self.smem = VMEM(lines=SMEM_WORDS, lanes=1)
        self.issue = SparseIssue(smem_words=SMEM_WORDS, addr_width=16)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.smem = self.smem
        m.submodules.issue = self.issue
        wiring.connect(m, self.issue.smem, self.smem.dma)
        return m


def test_each_doorbell_count_hands_over_one_item():
    dut = IssueOnSmem()
    issue = dut.issue
    # control: op 1, combiner 2, rowwise Adagrad (2), weighted, gather, 12 columns; then
    # op 1 alone.
    items = [[12 << 8 | 0b1110101, 0x3F000000, 20, 17, 5, 4096, 1, 2, 3, 4, 5, 9],
             [0b0000001, 0x3E800000, 7, 3, 2, 100, 200, 300, 400, 500, 600, 3]]
    got = []

    async def bench(ctx):
        base = work_address(SMEM_WORDS)
        for i, word in enumerate(items[0]):
            ctx.set(dut.smem.words[base + i], word)
        for _ in range(20):                       # nothing before start, nothing posted
            _, _, valid = await ctx.tick().sample(issue.work.valid)
            assert not valid
        ctx.set(issue.start, 1)
        for _ in range(20):
            _, _, valid, idle = await ctx.tick().sample(issue.work.valid, issue.idle)
            assert not valid and idle
        for count, item in enumerate(items, start=1):
            for i, word in enumerate(item):
                ctx.set(dut.smem.words[base + i], word)
            ctx.set(dut.smem.words[doorbell_address(SMEM_WORDS)], count)
            ctx.set(issue.work.ready, 0)
            for _ in range(200):
                _, _, valid, payload = await ctx.tick().sample(issue.work.valid,
                                                               issue.work.payload)
                if valid:
                    break
            else:
                raise AssertionError(f"doorbell {count}: no work item offered")
            for _ in range(5):                    # held until taken
                _, _, valid = await ctx.tick().sample(issue.work.valid)
                assert valid
            ctx.set(issue.work.ready, 1)
            await ctx.tick()
            ctx.set(issue.work.ready, 0)
            got.append(payload)
            for _ in range(30):                   # once per count
                _, _, valid = await ctx.tick().sample(issue.work.valid)
                assert not valid
            assert ctx.get(issue.idle)

    simulate(dut, bench)
    for payload, item in zip(got, items):
        fields = dict(zip(WORK_FIELDS, item))
        control = fields.pop("control")
        assert (payload.op.value, payload.combiner.value, payload.optimizer.value,
                int(payload.weighted), int(payload.gather), int(payload.columns)) == \
            (control & 1, control >> 1 & 3, control >> 3 & 3, control >> 5 & 1,
             control >> 6 & 1, control >> 8)
        for name, value in fields.items():
            assert int(getattr(payload, name)) == value, name


def test_smem_must_hold_an_item_and_the_doorbell():
    with pytest.raises(ValueError, match="smem_words"):
        SparseIssue(smem_words=len(WORK_FIELDS), addr_width=16)
