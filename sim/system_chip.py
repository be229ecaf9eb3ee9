"""The TensorCore parameters of a system's chips (SPEC section 4.8): the system chip, the
chip :func:`sim.system.collective` builds for a topology when it is given none, and the
timing of a chip that ``golden.collective_cost`` predicts collectives with.

The collectives' default chip (:func:`collective_chip`), from the topology alone, so that
every message size on one topology shares one build:

- **network ports**: one per torus link direction the collectives use, ``2 * D`` for the D
  axes of two or more chips (2 on a ring, 4 on a 2-D torus, 6 on a 3-D one). Fewer ports
  cap busbw below the link bound: each chip then injects and ejects fewer words a cycle
  than its links carry.
- **lanes**: the smallest power of two, at least 8, whose VMEM lines keep the DMA's VMEM
  port (a line a cycle) at most half busy and whose reduce keeps up with the ports. At
  the links' rate the push engines read ``ports`` words a cycle and the receive engines
  write as many, ``2 * ports / lanes`` lines a cycle of the DMA's port, so ``lanes >= 4 *
  ports``; the reduce adds 8 VMEM lines in ``group_cycles`` (7) cycles, ``8 * lanes / 7``
  words a cycle, which must reach the ``ports`` words a cycle the receive engines land
  (8 lanes do for up to 9 ports). 8 lanes for 2 ports, 16 for 4, 32 for 6: on the 2x2x2
  all-reduce of 64 KiB (pushes of 256 words; 2 and 3 chunks), 8 lanes took 7,821 and
  7,746 cycles, 16 lanes 5,974 and 5,322, 32 lanes 5,384 and 5,373 (docs/system.md).
- **push size** (:data:`PUSH_WORDS`): at most 256 words a push descriptor in the ring
  collectives (half a push queue in an all-to-all).
- **DMA descriptors in flight** (``outstanding``): two per network port, so that every
  port has a push queued behind the one it sends (4 for 2 ports, as :data:`SYSTEM_CHIP`;
  8 for 4: the 4x4 reduce-scatter of 256 KiB, 0.845 of its bound with 4, is predicted
  at 0.894 with 8).
- **memories** (:data:`COLLECTIVE_MEMORIES`): VMEM for a 1 MiB all-reduce with its
  staging at every lane count, SMEM (its 256-word pushes' descriptors), IMEM and flags for
  the programs of every chunking ``chunks="auto"`` picks. A message that needs more grows
  them to the next power of two (a new build).
"""

import numpy as np

from golden.collective_cost import CostParams
from golden.ici import encode_write
from hdl.ici.layouts import max_local_ports
from hdl.memory.dma_push import DEFAULT_MAX_PAYLOAD
from hdl.memory.dma_push_ports import DEFAULT_PUSH_BEATS
from hdl.system.chip_node import FLIT_WORDS

__all__ = ["SYSTEM_CHIP", "COLLECTIVE_MEMORIES", "MEASURED_CYCLES", "LINK_BYTES_PER_CYCLE",
           "PUSH_WORDS", "plan_push_words", "queue_words", "collective_ports", "collective_lanes",
           "collective_chip", "collective_routing", "cost_params"]

#: One link's bandwidth each way, bytes per cycle: a one-word flit per cycle.
LINK_BYTES_PER_CYCLE = 4 * FLIT_WORDS

#: Every system chip's TensorCore parameters, unless a run gives others: 8 lanes (4 x
#: the two ports: :func:`collective_lanes`; on a line a cycle, before whole-vreg
#: ``vld``/``vst``, 4 lanes held a 1x4 reduce-scatter to 0.44 of its bound), no MXU,
#: only the VPU operations collectives use,
#: a small HBM (collectives work in VMEM), a VMEM line per cycle for the DMA, 4 DMAs in
#: flight, two network ports (two push and two receive engines on two router local
#: ports, so a chip sends both ways round a ring at once), and memories and flags that
#: hold the programs and data of every test size, so that one build per topology serves
#: them all (a larger run grows them to the next power of two).
SYSTEM_CHIP = dict(numerics="tpu", lanes=8, mxu=False, ops=("add", "iadd"), hbm_words=1024,
                   words_per_cycle=4, read_latency=4, outstanding=4, network_ports=2,
                   vector_queue=8, n_flags=64, vmem_lines=512, smem_words=1024,
                   imem_depth=1024)

#: The collectives' default chip's memories (module docstring): VMEM words (the lines
#: follow from the lanes), SMEM words, IMEM bundles and sync flags. 64 flags keep a 4x4's
#: read-out within what a run takes (``sim.system``).
COLLECTIVE_MEMORIES = dict(vmem_words=1 << 19, smem_words=1 << 15, imem_depth=2048, n_flags=64)

#: The cost model's constants in cycles, measured on the 1x4 RTL ring of 8-lane system
#: chips by ``tpu-rtl bench system`` (``verif.bench.calibration``, docs/system.md), which
#: warns when they drift. Cycles, so the lanes do not change them. ``event_cycles`` (a
#: receive event's ``wait`` and the reduce's set-up) is not isolated by a microbenchmark:
#: 14 puts the most runs of the bench's 1x4 chunk sweep within +-5% of the RTL, and then
#: the least mean error (13 puts as many in, with more error; 12 and 15 one fewer).
MEASURED_CYCLES = dict(alpha=28.0, hop_cycles=3.0, group_cycles=7.0, line_cycles=28.0,
                       descriptor_cycles=5.0, fill_cycles=1.0, event_cycles=14.0)


#: The most words a push descriptor of the ring collectives' programs moves: 4 of the DMA's
#: 64-word packets. Smaller pushes let a piece's words spread over every route and land
#: soon after its last push leaves: on the 2x2x2 all-reduce of 64 KiB (32 lanes), pushes
#: of 1,024 words (half a queue) took 6,593 cycles, of 512 6,161, of 256 5,384 and of 128
#: 5,326; on the 4x4 all-reduce of 256 KiB (16 lanes) 512 words 31,984 and 256 31,890. An
#: all-to-all keeps half a queue: its 4x4 run of 128 KiB in 8 chunks (6 ports, 16 lanes)
#: took 18,167 cycles with 512 and 21,184 with 256 (docs/system.md).
PUSH_WORDS = 256


def plan_push_words(chip, kind=None):
    """Words per push descriptor in the programs of collective ``kind`` (None: any but
    ``all_to_all``) for ``chip`` (TensorCore parameters): with several network ports, half a
    push port's queue of VMEM lines (``hdl.memory.dma_push_ports``), so that the pushes a
    chip deals to its ports in turn are queued while the others send, and but for an
    ``all_to_all`` at most :data:`PUSH_WORDS`; with one port, None (a descriptor per run of
    words)."""
    if chip.get("network_ports", 1) == 1:
        return None
    words = DEFAULT_PUSH_BEATS * chip["lanes"] // 2
    return words if kind == "all_to_all" else min(words, PUSH_WORDS)


def queue_words(chip):
    """Words each push port's queue holds on a chip with TensorCore parameters ``chip``
    (``hdl.memory.dma_push_ports``: ``DEFAULT_PUSH_BEATS`` VMEM lines), or 0 for a chip
    with one network port, whose pushes go straight to its packetizer."""
    return DEFAULT_PUSH_BEATS * chip["lanes"] if chip.get("network_ports", 1) > 1 else 0


def collective_ports(topology):
    """Network ports of the collectives' chip on ``topology``: ``2 * D`` for its D axes of
    two or more chips, within what its routers take."""
    axes = sum(1 for n in topology.dims if n >= 2)
    return max(1, min(2 * axes, max_local_ports(len(topology.dims))))


def collective_lanes(ports):
    """Lanes for ``ports`` network ports (module docstring): the smallest power of two, at
    least 8, with ``lanes >= 4 * ports`` (the DMA's VMEM port at most half busy) and a
    reduce (``8 * lanes / group_cycles`` words a cycle) that keeps up with ``ports`` words
    a cycle."""
    lanes = 8
    while lanes < 4 * ports or 8 * lanes / MEASURED_CYCLES["group_cycles"] < ports:
        lanes *= 2
    return lanes


def collective_routing(topology, chip=None):
    """The routing :func:`sim.system.collective` uses on ``topology`` when it is given none:
    with its default chip (``chip`` None), "adaptive" when an axis is a ring of two chips,
    else "dor"; with a given ``chip``, "dor" (the routing goes with the chip).

    On a ring of two the schedule sends half of each block each way round, but both ways
    lead to the one neighbour, and dimension-order tables send both halves over one of
    the two links; adaptive routing takes both (its minimal routes are both ways round).
    On longer rings the schedules send only to neighbours, whose minimal route is one
    link either way, so adaptive routing would change no route and cost its larger
    buffers (cut-through)."""
    if chip is not None:
        return "dor"
    return "adaptive" if 2 in tuple(topology.dims) else "dor"


def collective_chip(topology, **given):
    """The TensorCore parameters :func:`sim.system.collective` gives the chips of
    ``topology`` (a ``golden.topology.Topology``) when it is given none (module
    docstring): :data:`SYSTEM_CHIP` with the ports, lanes and memories of the rule.

    ``given`` parameters win, and the rule derives the rest from them: the lanes and the
    descriptors in flight from ``network_ports``, the VMEM lines from the lanes."""
    ports = given.get("network_ports", collective_ports(topology))
    lanes = given.get("lanes", collective_lanes(ports))
    memories = dict(COLLECTIVE_MEMORIES)
    vmem_lines = max(1, memories.pop("vmem_words") // lanes)
    return dict(SYSTEM_CHIP, network_ports=ports, lanes=lanes, vmem_lines=vmem_lines,
                outstanding=2 * ports, **memories) | given


def cost_params(chip, topology, kind=None):
    """``golden.collective_cost.CostParams`` of a chip with TensorCore parameters ``chip``
    (all of them) on ``topology``: :data:`MEASURED_CYCLES` and the chip's ports, lanes,
    push size (for collective ``kind``: :func:`plan_push_words`), DMA slots and push
    queues, and the routers' torus ports."""
    header = len(encode_write(dst=1, src=0, space="vmem", address=0, flag=1,
                              data=np.zeros(1, np.uint32), vc=0, flit_words=1)) - 1
    return CostParams(link_bytes_per_cycle=LINK_BYTES_PER_CYCLE, ports=chip["network_ports"],
                      torus_ports=topology.n_ports,
                      lanes=chip["lanes"], push_words=plan_push_words(chip, kind),
                      packet_words=DEFAULT_MAX_PAYLOAD, header_flits=header,
                      dma_slots=2 * chip["outstanding"], queue_words=queue_words(chip),
                      **MEASURED_CYCLES)
