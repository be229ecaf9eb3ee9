"""``verif.bench.dma`` on a small case: the figures it reports are the ones the timing of the
DMA and the HBM model imply (the full benchmark runs from the command line)."""

import pytest

from verif.bench import dma as dma_bench


def test_a_small_contiguous_case_streams_at_full_rate():
    case = dma_bench.Case("small", 3, (256,), (1,), (1,), 0.95)
    rows = dma_bench.throughput(cases=(case,), words_per_cycle=(8,), read_latency=(7,),
                                backend="amaranth")
    assert len(rows) == 1                      # four in flight are plenty: one run
    row = rows[0]
    assert (row.words, row.outstanding, row.read_latency) == (768, 4, 7)
    assert row.stream_cycles == 96 and row.fraction == 1.0 and row.met
    assert (row.request_latency, row.flag_latency) == (3, 2)
    # End to end: the first request 3 cycles in, each line written read_latency + 2 after
    # its read, and the harness' own cycles around the run.
    assert row.end_to_end < row.fraction
    assert "small" in dma_bench.format_table(rows)


@pytest.mark.parametrize("words, wpc, latency, need", [
    (1024, 8, 500, 5), (4096, 8, 500, 2), (128, 8, 50, 5), (1024, 1, 500, 2),
])
def test_needed_outstanding_is_littles_law(words, wpc, latency, need):
    assert dma_bench.needed_outstanding(words, words_per_cycle=wpc, read_latency=latency) == need


def test_hbm_self_test():
    results = dma_bench.hbm_self_test(words_per_cycle=4, read_latency=(3, 11), lines=64)
    assert results == {3: (3, 1.0), 11: (11, 1.0)}
