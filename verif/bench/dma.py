"""The DMA benchmarks of issue 11, measured on the RTL: throughput of back-to-back
descriptors as a fraction of the HBM's ``words_per_cycle``, the request and flag
latencies, and the HBM model's self-test.

::

    .venv/bin/python -m verif.bench.dma            # the table, on the compiled path

Every figure comes from cycle counts the RTL records (:class:`sim.dma.DmaStamps`):

* **fraction**: words moved / (``stream_cycles`` x ``words_per_cycle``), where
  ``stream_cycles`` is the longer of the batch's read span (first read accepted to the
  last) and its write span: the streaming rate once data flows, which the read latency
  does not bound when enough reads are in flight. The one-off latency of the first read
  is left out.
* **end to end**: words / (cycles from the first descriptor offered to the batch
  finished x ``words_per_cycle``), the start-up latency included, for reference.
* **request latency**: the batch's first descriptor accepted (the DMA idle) to the DMA's
  first memory request; **flag latency**: the batch's last write accepted to its flag
  visible.

Descriptors in flight obey Little's law too: streaming descriptors of ``W`` words takes
``outstanding >= 1 + words_per_cycle * (read_latency + ROUND_TRIP) / W`` of them, so each
case runs with the default ``outstanding`` (4) and, where that is short, with the least
that suffices.
"""

import math
from dataclasses import dataclass

import numpy as np

from golden.memory import Descriptor, addresses
from hdl.memory import ROUND_TRIP

from sim.dma import run_stamped

__all__ = ["Case", "BenchRow", "CASES", "needed_outstanding", "throughput", "hbm_self_test",
           "format_table", "main"]

#: HBM and VMEM words of every benchmark run (VMEM in lines of ``lanes``).
HBM_WORDS = VMEM_WORDS = 4096


@dataclass(frozen=True)
class Case:
    """A benchmark: ``count`` copies of one HBM -> VMEM descriptor shape, and its goal."""
    name: str
    count: int
    counts: tuple
    src_strides: tuple
    dst_strides: tuple
    goal: float

    @property
    def words(self):
        """Words per descriptor."""
        return math.prod(self.counts)

    def descriptors(self):
        return [Descriptor(("hbm", 0), ("vmem", 0), self.counts, self.src_strides,
                           self.dst_strides, k % 16) for k in range(self.count)]


#: Issue 11's cases: contiguous 4 KiB and 16 KiB back to back, four 512 B queued at once
#: (and, for comparison, a long stream of them), and 3-D transfers of 256 B rows (64
#: words) with strides between rows and planes.
CASES = (
    Case("contiguous 4 KiB", 8, (1024,), (1,), (1,), 0.95),
    Case("contiguous 16 KiB", 4, (4096,), (1,), (1,), 0.97),
    Case("contiguous 512 B, 4 queued", 4, (128,), (1,), (1,), 0.75),
    Case("contiguous 512 B, 16 streamed", 16, (128,), (1,), (1,), 0.75),
    Case("3-D, 256 B rows", 4, (64, 4, 4), (1, 128, 512), (1, 64, 256), 0.90),
)


@dataclass(frozen=True)
class BenchRow:
    """One measured case: its parameters, the words moved, the cycles they streamed
    (:attr:`sim.dma.DmaStamps.stream_cycles`), the fraction of ``words_per_cycle``
    reached, the end-to-end fraction, the request and flag latencies, and the goal."""
    case: str
    words_per_cycle: int
    read_latency: int
    outstanding: int
    words: int
    stream_cycles: int
    fraction: float
    end_to_end: float
    request_latency: int
    flag_latency: int
    goal: float

    @property
    def met(self):
        return self.fraction >= self.goal


def needed_outstanding(words, *, words_per_cycle, read_latency):
    """Descriptors of ``words`` words that must be in flight to stream them back to back."""
    return 1 + math.ceil(words_per_cycle * (read_latency + ROUND_TRIP) / words)


def _measure(case, *, words_per_cycle, read_latency, outstanding, lanes, backend, rng):
    hbm = rng.integers(0, 1 << 32, HBM_WORDS, dtype=np.uint32)
    vmem = np.zeros(VMEM_WORDS, np.uint32)
    descriptors = case.descriptors()
    run, stamps = run_stamped(hbm, vmem, descriptors, outstanding=outstanding,
                              read_latency=read_latency, words_per_cycle=words_per_cycle,
                              lanes=lanes, backend=backend)
    # A measurement is only worth anything if the transfer was right (every descriptor
    # of a case moves the same words).
    src, dst = addresses(descriptors[0])
    if not np.array_equal(run.vmem[dst], hbm[src]) or run.errors:
        raise RuntimeError(f"{case.name}: the DMA moved the wrong data")
    words = case.words * case.count
    return BenchRow(case.name, words_per_cycle, read_latency, outstanding, words,
                    stamps.stream_cycles, words / (stamps.stream_cycles * words_per_cycle),
                    words / (run.cycles * words_per_cycle), stamps.request_latency,
                    stamps.flag_latency, case.goal)


def throughput(*, cases=CASES, words_per_cycle=(8, 1), read_latency=(50, 500), lanes=8,
               backend="verilator", seed=0):
    """Measure ``cases`` for every ``words_per_cycle`` and ``read_latency``, with the default
    ``outstanding`` (4) and, where Little's law asks for more, with the least that
    suffices. Returns a list of :class:`BenchRow`."""
    rng = np.random.default_rng(seed)
    rows = []
    for wpc in words_per_cycle:
        for latency in read_latency:
            for case in cases:
                need = needed_outstanding(case.words, words_per_cycle=wpc,
                                          read_latency=latency)
                # Four queued at once need only be in flight together.
                if case.count <= 4:
                    need = min(need, case.count)
                for outstanding in sorted({4, max(4, need)}):
                    rows.append(_measure(case, words_per_cycle=wpc, read_latency=latency,
                                         outstanding=outstanding, lanes=lanes,
                                         backend=backend, rng=rng))
    return rows


def hbm_self_test(*, words_per_cycle=8, read_latency=(50, 500), lines=2048):
    """The HBM model alone (Amaranth simulator): a lone read's latency, and the fraction
    of ``words_per_cycle`` a stream of ``lines`` reads reaches from its first response to
    its last. Returns ``{read_latency: (lone_latency, streaming_fraction)}``."""
    from amaranth.sim import Simulator

    from hdl.memory import HBM

    results = {}
    for latency in read_latency:
        hbm = HBM(size=lines * words_per_cycle, words_per_cycle=words_per_cycle,
                  read_latency=latency)
        seen = {}

        async def tb(ctx, hbm=hbm, seen=seen, latency=latency):
            ctx.set(hbm.port.resp.ready, 1)
            ctx.set(hbm.port.req.payload.addr, 5)
            ctx.set(hbm.port.req.valid, 1)           # a lone read, accepted at cycle 0
            await ctx.tick()
            ctx.set(hbm.port.req.valid, 0)
            cycle = 1
            while not ctx.get(hbm.port.resp.valid):
                await ctx.tick()
                cycle += 1
            seen["lone"] = cycle
            await ctx.tick()
            # Then a stream: one request offered every cycle, responses always taken.
            sent = answered = 0
            first = last = None
            cycle = 0
            while answered < lines:
                ctx.set(hbm.port.req.valid, sent < lines)
                ctx.set(hbm.port.req.payload.addr, sent % lines)
                _, _, taken, valid = await ctx.tick().sample(
                    hbm.port.req.valid & hbm.port.req.ready, hbm.port.resp.valid)
                sent += taken
                if valid:
                    answered += 1
                    first = cycle if first is None else first
                    last = cycle
                cycle += 1
            seen["stream"] = lines / (last - first + 1)

        sim = Simulator(hbm)
        sim.add_clock(1e-8)
        sim.add_testbench(tb)
        sim.run()
        results[latency] = (seen["lone"], seen["stream"])
    return results


def format_table(rows):
    """The rows as a fixed-width text table."""
    head = (f"{'case':30} {'wpc':>3} {'lat':>4} {'outst':>5} {'words':>6} {'cycles':>6} "
            f"{'fraction':>8} {'e2e':>6} {'req':>3} {'flag':>4} {'goal':>5}  ")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.case:30} {r.words_per_cycle:3d} {r.read_latency:4d} "
                     f"{r.outstanding:5d} {r.words:6d} {r.stream_cycles:6d} "
                     f"{r.fraction:8.1%} {r.end_to_end:6.1%} {r.request_latency:3d} "
                     f"{r.flag_latency:4d} {r.goal:5.0%}  {'ok' if r.met else 'MISSED'}")
    return "\n".join(lines)


def main():
    rows = throughput()
    print(format_table(rows))
    print()
    for latency, (lone, stream) in hbm_self_test().items():
        print(f"HBM self-test (Amaranth, words_per_cycle 8, read_latency {latency}): "
              f"lone read {lone} cycles, streaming {stream:.2%} of words_per_cycle")


if __name__ == "__main__":
    main()
