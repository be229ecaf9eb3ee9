"""The constants of ``golden.collective_cost`` measured on the RTL system, by
microbenchmarks on a 1x4 ring (programs of a few bundles, each run against a baseline).

Each figure is the difference of two runs that differ only in what it measures, so the
runs' start and halt overheads cancel:

- ``alpha``: a one-word push to a neighbour and its wait there, against idle chips.
- ``hop_cycles``: the same push two hops away, against one hop.
- ``group_cycles``/``line_cycles``: 64 against 32 iterations of the collective programs'
  reduce loop (8 lines with ``vld``/``vld``+``add``+``vst``; one line, stride 0).
- ``descriptor_cycles``: 64 against 32 back-to-back 8-word pushes, dealt to two
  neighbours (so neither port nor link limits them).
- ``fill_cycles``: a 64-word push against a 32-word one, less a flit time per word.

The rest come from the chip's parameters: ports, lanes, the collective programs' push size
(``sim.system.plan_push_words``), packet size and header flits (``golden.ici``), the DMA's
queue and in-flight slots (``outstanding`` each), and the push ports' queues
(``sim.system_chip.queue_words``). ``event_cycles`` is the one fitted constant
(:data:`EVENT_CYCLES`).
"""

import numpy as np

from sim.system_chip import MEASURED_CYCLES

__all__ = ["calibrate", "EVENT_CYCLES"]

#: A receive event's own cycles (its ``wait`` and the reduce's set-up), the one constant not
#: isolated by a microbenchmark: ``sim.system_chip.MEASURED_CYCLES`` says how it was fitted.
EVENT_CYCLES = MEASURED_CYCLES["event_cycles"]

_IDLE = "halt\n"


def _run(programs, chip, backend, *, smem=None, vmem_words=8):
    from sim import system
    images = [np.zeros(vmem_words, np.uint32)] * 4
    smem = smem or [np.zeros(4, np.uint32)] * 4
    return system.run_programs("1x4", programs, vmem=images, smem=smem, chip=chip,
                               backend=backend).cycles


def _pushes(records):
    """SMEM words of remote pushes ``(src word, chip, dst word, words)``, flag 1, sent
    flag 0."""
    from golden import tensorcore as tc
    from golden.memory import Descriptor
    return np.concatenate([tc.descriptor_words(Descriptor(
        ("vmem", src), ("remote", chip, "vmem", dst), (n,), (1,), (1,), 1, sent_flag=0))
        for src, chip, dst, n in records]).astype(np.uint32)


def _push_run(records, chip, backend):
    """Cycles of chip 0 issuing ``records`` back to back, waiting for them to leave, while
    each receiver waits for its words."""
    words = {}
    for _, dst, _, n in records:
        words[dst] = words.get(dst, 0) + n
    sent = sum(n for *_, n in records)
    issue = "dma 0" if len(records) == 1 else \
        f"li s8, 0 | li s9, {len(records)}\nL1: dma s8 | addi s8, s8, 12 | loop s9, L1"
    programs = [f"{issue}\nwait f0, {sent}\nhalt\n"] + \
        [f"wait f1, {words[c]}\nhalt\n" if c in words else _IDLE for c in (1, 2, 3)]
    smem = [_pushes(records)] + [np.zeros(4, np.uint32)] * 3
    return _run(programs, chip, backend, smem=smem, vmem_words=8 * 2048)


def _loop_run(iterations, stride, chip, backend):
    """Cycles of chip 0 running ``iterations`` of the reduce loop (``stride`` 1: 8 lines
    an iteration; 0: one line)."""
    step = 8 if stride else 1
    body = [f"li s4, 0 | li s5, 1024\nli s6, {iterations}",
            f"L1: vld v1, s4+0, {stride} | addi s4, s4, {step}",
            f"vld v2, s5+0, {stride} | add v3, v1, v2 | vst v3, s5+0, {stride} | "
            f"addi s5, s5, {step} | loop s6, L1", "halt"]
    return _run(["\n".join(body) + "\n", _IDLE, _IDLE, _IDLE], chip, backend,
                vmem_words=8 * 2048)


def calibrate(chip, *, backend="verilator"):
    """``golden.collective_cost.CostParams`` of TensorCore parameters ``chip`` (as
    ``sim.system.collective`` takes them), measured on the 1x4 RTL ring of ``backend``."""
    from golden import ici
    from golden.collective_cost import CostParams
    from golden.collectives import WORD_BYTES
    from hdl.memory.dma_push import DEFAULT_MAX_PAYLOAD
    from sim import system
    from sim.system_chip import queue_words
    chip = dict(system.SYSTEM_CHIP) | dict(chip)
    idle = _run([_IDLE] * 4, chip, backend)
    alpha = _push_run([(0, 1, 64, 1)], chip, backend) - idle
    hop = _push_run([(0, 2, 64, 1)], chip, backend) - idle - alpha
    groups = (_loop_run(64, 1, chip, backend) - _loop_run(32, 1, chip, backend)) / 32
    lines = (_loop_run(64, 0, chip, backend) - _loop_run(32, 0, chip, backend)) / 32

    def eights(n):
        return [(8 * i, 1 + 2 * (i % 2), 16384 + 8 * i, 8) for i in range(n)]
    descriptor = (_push_run(eights(64), chip, backend) -
                  _push_run(eights(32), chip, backend)) / 32
    word_cycles = WORD_BYTES / system.LINK_BYTES_PER_CYCLE
    fill = (_push_run([(0, 1, 16384, 64)], chip, backend) -
            _push_run([(0, 1, 16384, 32)], chip, backend)) / 32 - word_cycles
    header = len(ici.encode_write(dst=1, src=0, space="vmem", address=0, flag=1,
                                  data=np.zeros(1, np.uint32), vc=0, flit_words=1)) - 1
    return CostParams(
        alpha=alpha, link_bytes_per_cycle=system.LINK_BYTES_PER_CYCLE,
        ports=chip["network_ports"], lanes=chip["lanes"],
        push_words=system.plan_push_words(chip), packet_words=DEFAULT_MAX_PAYLOAD,
        header_flits=header, group_cycles=groups, line_cycles=lines,
        descriptor_cycles=descriptor, fill_cycles=fill, dma_slots=2 * chip["outstanding"],
        queue_words=queue_words(chip),
        event_cycles=EVENT_CYCLES, hop_cycles=hop)
