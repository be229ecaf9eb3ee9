"""Timing checks shared by the streamed arithmetic units' tests.

Each runs a unit (a :class:`~hdl.lib.stream_pipeline.StreamPipeline`) in
Amaranth's simulator, asserts its stream timing, and returns the results for
the caller to check against its own golden.
"""

from sim.backends.amaranth_sim import simulate
from sim.transactors import StreamSink, StreamSource, run_transactors

__all__ = ["check_latency_and_rate", "run_with_backpressure"]


def check_latency_and_rate(dut, beats):
    """One result exactly ``dut.latency`` cycles after its operands, then a stream of the
    other beats accepted and delivered one per cycle. Returns every result, in order."""
    async def program(bench):
        spans = []
        for batch in (beats[:1], beats[1:]):
            source, sink = StreamSource("operands", batch), StreamSink("result", len(batch))
            await run_transactors(bench, [source, sink])
            spans.append((source.first_cycle, source.last_cycle,
                          sink.first_cycle, sink.last_cycle, sink.beats))
        return spans

    single, stream = simulate(dut, program)
    assert single[2] - single[0] == dut.latency
    first_in, last_in, first_out, last_out, results = stream
    assert last_in - first_in == len(beats) - 2, "operands were not accepted back to back"
    assert first_out - first_in == dut.latency
    assert last_out - first_out == len(beats) - 2, "results did not leave back to back"
    return single[4] + results


def run_with_backpressure(dut, beats, rng, *, idle, stall):
    """Stream ``beats`` with random idle cycles and backpressure; asserts no result comes
    after the last one (a duplicate would), and returns the results in order."""
    async def program(bench):
        sink = StreamSink("result", len(beats), stall=lambda: rng.random() < stall)
        source = StreamSource("operands", beats, idle=lambda: rng.random() < idle)
        await run_transactors(bench, [source, sink])
        extra = []
        for _ in range(2 * dut.latency + 4):
            valid, = await bench.cycle({"result.ready": 1, "operands.valid": 0},
                                       ("result.valid",))
            extra.append(valid)
        return sink.beats, extra

    results, extra = simulate(dut, program)
    assert not any(extra), "a result was delivered twice"
    return results
