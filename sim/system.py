"""Multi-chip systems (SPEC sections 4.8, 6): programs on every chip of a torus of
TensorCore chips joined by routers through the OCS, and the collectives that run on it.

:func:`run_programs` loads one program and memory image per chip into
``hdl.system.ChipSystem``, configures the routing tables and the OCS for the topology,
runs until every live chip has halted with its memory system drained, and reads every
chip's memories back, with no Python per cycle. :func:`collective` is SPEC section 6's
``sim.system.collective``: the programs of :mod:`sim.kernels.collective`, checked by the
caller against ``golden.collectives.collective``.

Link bandwidth: the system's flits are one word (``hdl.system.chip_node.FLIT_WORDS``), so
one link carries ``B`` = 4 bytes per cycle each way (:data:`LINK_BYTES_PER_CYCLE`).
"""

import gc
import inspect
import warnings
from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Shape, UnusedElaboratable
from amaranth.lib.wiring import Out

from golden import collectives as gc_golden
from golden import tensorcore as tc
from golden import topology as topo
from golden.routing import check_routing
from hdl.ici.layouts import MAX_VCS, max_local_ports
from hdl.memory.dma_push import DEFAULT_MAX_PAYLOAD, HEADER_WORDS
from hdl.lib.blackbox import BlackBox
from hdl.lib.params import check_int
from hdl.ocs import STATUSES
from hdl.system import ChipNode, ChipSystem, chip_node_signature, chip_system_signature
from hdl.tensorcore.isa import ERROR_CODES
from hdl.tensorcore.sequencer import STALL_CAUSES, State
from hdl.testbench.node import ADAPTIVE_ESCAPE_VCS

from .backends import check_backend, self_loading
from .backends.self_loading import add_to_module, loader_verilog
from .backends.whole_run import WholeRun, check_run, memory_depth, pack_words, unpack_words
from .blocks import MemoryImage, kept_by_params
from .checks import check_tracing, wave_format
from .system_chip import (LINK_BYTES_PER_CYCLE, SYSTEM_CHIP, collective_chip, collective_routing,
                          cost_params, plan_push_words)
from .verilog.export import mxu_of_instances, vpu_of_instances
from .verilog.repeated import emit
from .network import CONFIG_WATCHDOG, _lit, _ocs_beats, _rows, _topology
from .transactors import SimulationHang

__all__ = ["run_programs", "collective", "data_parallel_step", "SystemRun", "CollectiveRun",
           "StepRun", "SystemRunError", "SYSTEM_CHIP", "STEP_CHIP", "LINK_BYTES_PER_CYCLE",
           "BLOCK", "plan_push_words", "embedding_step", "EmbeddingRun", "EMBEDDING_CHIP",
           "router_defaults", "ROUTER_DEFAULTS", "LONGEST_PACKET_FLITS", "ADAPTIVE_ESCAPE_VCS"]

#: The block name of the system top in whole runs and builds.
BLOCK = "system"
#: The most output bits a system may have: Amaranth numbers a netlist cell's output bits
#: in 16 bits, and the whole-run harness holds the system as one cell.
MAX_READ_OUT_BITS = 1 << 16
#: Widths of a chip's ``error`` and ``state`` in the system's per-chip outputs.
ERROR_BITS = Shape.cast(range(len(ERROR_CODES))).width
STATE_BITS = Shape.cast(State).width


class SystemRunError(RuntimeError):
    """A system run in which a chip faulted, or which hung: the message names the chips,
    their pcs and bundles, and the flags they wait on."""


@dataclass(frozen=True)
class SystemRun:
    """What :func:`run_programs` leaves: per chip id, the final ``vmem`` (flat uint32,
    None for a failed chip) and ``flags``; the ``cycles`` from start until every live chip
    was done; ``link_flits`` [n_chips, 2*D], the flits each torus port sent; the
    simulator's ``seconds``; per chip id the final ``hbm`` when the run was given HBM
    images (else None); and ``stalls``, per cause of
    ``hdl.tensorcore.sequencer.STALL_CAUSES`` an int array [n_chips]: the cycles each
    chip's sequencer issued nothing for that cause (zeros for a failed chip)."""
    vmem: list
    flags: np.ndarray
    cycles: int
    link_flits: np.ndarray
    seconds: float
    hbm: list = None
    stalls: dict = None


@dataclass(frozen=True)
class CollectiveRun:
    """Result of :func:`collective` (SPEC section 6): ``out`` (shaped and typed as
    ``golden.collectives.collective``'s), ``cycles``, ``algbw`` and ``busbw`` (bytes per
    cycle, nccl-tests definitions), ``bus_bound`` (the link-bandwidth bound on busbw, bytes
    per cycle), ``link_utilization`` (float [n_chips, 2*D]: the fraction of the cycles
    each directed link carried a flit) and the simulator's ``seconds`` (loading and
    read-back included, the build not); then what ran: ``chunks`` per transfer, the
    ``chip``'s TensorCore parameters, the cycles ``golden.collective_cost`` predicted
    when ``chunks="auto"`` chose (else None), the ``routing``, and the chips' sequencer
    ``stalls`` (:class:`SystemRun`'s)."""
    out: np.ndarray
    cycles: int
    algbw: float
    busbw: float
    bus_bound: float
    link_utilization: np.ndarray
    seconds: float = 0.0
    chunks: int = 1
    chip: dict = None
    predicted_cycles: float = None
    routing: str = "dor"
    stalls: dict = None


def system_params(topology, chip, *, vcs=2, buffer_flits=8, link_latency=2, routing="dor",
                  speedup=1):
    """``ChipSystem`` parameters for ``topology`` and per-chip TensorCore ``chip`` ones
    (``routing`` appears only when "adaptive", and ``speedup`` only above 1, so other builds
    keep their parameters)."""
    return dict(dims=topology.dims, vcs=vcs, buffer_flits=buffer_flits,
                link_latency=link_latency, reconfig_cycles=2, chip=dict(chip),
                **({"routing": routing} if routing != "dor" else {}),
                **({"speedup": speedup} if speedup != 1 else {}))


def _node_images(node):
    """``{name: MemoryImage}`` of a :class:`ChipNode`'s memories, paths below it."""
    return {name: MemoryImage(path, memory.depth, Shape.cast(memory.shape).width)
            for name, (memory, path) in node.memory_images.items()}


@kept_by_params
def _chip_images(params):
    """:func:`_node_images` of the chips of a system built with ``params``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        probe = ChipNode(**_node_params(params))
        found = _node_images(probe)
        del probe
        gc.collect()
    return found


def _images(params):
    """``{chip<c>.<name>: MemoryImage}`` of every chip's memories."""
    found = _chip_images(params)
    n = int(np.prod(params["dims"]))
    return {f"chip{c}.{name}": MemoryImage(f"chip{c}.{image.path}", image.depth, image.width)
            for c in range(n) for name, image in found.items()}


def _node_params(params):
    return dict(dims=len(params["dims"]), vcs=params["vcs"],
                buffer_flits=params["buffer_flits"], link_latency=params["link_latency"],
                n_nodes=int(np.prod(params["dims"])), chip=params["chip"],
                routing=params.get("routing", "dor"), speedup=params.get("speedup", 1))


def run_programs(topology, programs, *, vmem, smem=None, hbm=None, chip=None, vcs=None,
                 buffer_flits=None, link_latency=2, routing="dor", speedup=1,
                 backend="verilator", seed=0, watchdog=20_000, waves=None, progress=None):
    """Run ``programs[c]`` on chip c of ``topology`` until every live chip is done.

    Parameters
    ----------
    topology : golden.topology.Topology or a shape such as "2x2"
    programs : list, per chip id, of assembly text or bundles (None: a failed chip)
    vmem, smem, hbm : lists, per chip id, of flat uint32 initial images (None: zeros;
        with ``hbm``, the run reads every chip's HBM back)
    chip : dict
        TensorCore parameters of every chip (:data:`SYSTEM_CHIP` and these); IMEM grows to
        the power of two that holds the longest program.
    vcs, buffer_flits, link_latency : the routers' and links' (``link_latency`` an int, or
        one per torus port: ``hdl.system.ChipNode``); ``vcs`` and ``buffer_flits`` by
        default :func:`router_defaults`
    routing : "dor" (default) or "adaptive" (SPEC 4.4; ``hdl.system.ChipNode``)
    speedup : int
        The routers' input speed-up, 1 (default) to ``vcs``: each router input sends up to
        that many flits a cycle, of different VCs to different outputs
        (``hdl.ici.Router``).
    backend, seed, waves, progress : as every runner's; with ``jitter`` in ``chip`` (HBM
        read latency jitter, cycles: ``hdl.tensorcore.TensorCoreSystem``), ``seed`` also
        seeds it (``hdl.system.ChipSystem``'s ``hbm_seed``)
    watchdog : int
        Cycles with no chip working and no flit moving before the run is hung.

    Raises
    ------
    SystemRunError
        A chip faulted, or the system hung (the message names the waiting chips).
    ValueError
        On bad arguments.
    """
    topology = _topology(topology)
    check_backend(backend)
    n = topology.n_chips
    if len(programs) != n:
        raise ValueError(f"{topology.shape} has {n} chips; give a program (or None) for "
                         f"each, not {len(programs)}")
    alive = [bool(a) for a in topology.alive]
    for c in range(n):
        if (programs[c] is None) == alive[c]:
            raise ValueError(f"chip {c} is {'alive' if alive[c] else 'failed'}: it "
                             f"{'needs a program' if alive[c] else 'takes no program'}")
    words = [None if p is None else tc.program_words(p) for p in programs]
    params = dict(SYSTEM_CHIP) | dict(chip or {})
    vcs, buffer_flits = _check_system(topology, params, vcs=vcs, buffer_flits=buffer_flits,
                                      routing=routing, speedup=speedup)
    lanes = params["lanes"]
    longest = max(len(w) for w in words if w is not None)
    params["imem_depth"] = max(params["imem_depth"], memory_depth(longest))
    params = system_params(topology, params, vcs=vcs, buffer_flits=buffer_flits,
                           link_latency=link_latency, routing=routing, speedup=speedup)
    chip_params = params["chip"]
    load = {}
    for c in range(n):
        if words[c] is None:
            continue
        load[f"chip{c}.imem"] = pack_words(words[c], tc.BUNDLE_WORDS)
        if vmem[c] is not None:
            image = np.asarray(vmem[c], np.uint32).ravel()
            if image.size > chip_params["vmem_lines"] * lanes:
                raise ValueError(f"chip {c}'s VMEM image has {image.size} words, more than "
                                 f"{chip_params['vmem_lines'] * lanes}")
            load[f"chip{c}.vmem"] = pack_words(np.pad(image, (0, -image.size % lanes)), lanes)
        if smem is not None and smem[c] is not None:
            load[f"chip{c}.smem"] = pack_words(np.asarray(smem[c], np.uint32).ravel(), 1)
        if hbm is not None and hbm[c] is not None:
            load[f"chip{c}.hbm"] = _hbm_image(c, hbm[c], chip_params)
    dims = topology.dims
    lit = _lit(topology, dims)
    tables = topo.routing_tables(topology, vcs=vcs, routing=routing)
    zeros = np.zeros(n, np.int64)
    rows = _rows(topology, tables, vcs, dims, (0, zeros, zeros), [0] * n, lit)
    whole = WholeRun(
        BLOCK, params, play={"tables": rows, "ocs": _ocs_beats(topology, dims)}, record={},
        until="finished", busy="busy", watchdog=max(watchdog, CONFIG_WATCHDOG), seed=seed,
        inputs={"alive": sum(1 << c for c in range(n) if alive[c]),
                **({"hbm_seed": seed & 0xFFFF_FFFF} if chip_params.get("jitter") else {})},
        load=load,
        dump=tuple(f"chip{c}.{name}" for c in range(n) if alive[c]
                   for name in ("vmem", "hbm")[:1 + (hbm is not None)]))
    try:
        result = _simulate(whole, backend=backend, waves=waves, progress=progress)
    except SimulationHang as hang:
        out = hang.outputs or {}
        faulted = _per_chip(out.get("error", 0), n, ERROR_BITS).any()
        raise SystemRunError(_explain(topology, words, out, chip_params,
                                      "stopped on a fault" if faulted else "hung")) from None
    out = result.outputs
    if out.get("config_error"):
        status = out["ocs_status"]
        raise SystemRunError(f"system {topology.shape}: the OCS of axis {'xyz'[status & 3]} "
                           f"refused its map ({STATUSES[status >> 2 & 7]})")
    errors = _per_chip(out.get("error", 0), n, ERROR_BITS)
    if any(errors[c] for c in range(n) if alive[c]):
        raise SystemRunError(_explain(topology, words, out, chip_params, "faulted"))
    n_flags = chip_params.get("n_flags", 16)
    flags = _per_chip(out.get("flags", 0), n * n_flags, 32).reshape(n, n_flags)
    links = _per_chip(out.get("link_flits", 0), n * topology.n_ports, 32)
    vmems = [unpack_words(result.memories[f"chip{c}.vmem"], lanes) if alive[c] else None
             for c in range(n)]
    hbms = None if hbm is None else [
        unpack_words(result.memories[f"chip{c}.hbm"], chip_params["words_per_cycle"])
        if alive[c] else None for c in range(n)]
    stalls = _per_chip(out.get("stalls", 0), n * len(STALL_CAUSES), 32).reshape(
        n, len(STALL_CAUSES))
    return SystemRun(vmem=vmems, flags=flags, cycles=int(out["cycles"]),
                     link_flits=links.reshape(n, topology.n_ports), seconds=result.seconds,
                     hbm=hbms, stalls={cause: stalls[:, k].astype(np.int64)
                                       for k, cause in enumerate(STALL_CAUSES)})


def _hbm_image(c, image, chip):
    """Chip ``c``'s HBM image as the memory's entries of ``words_per_cycle`` words."""
    image = np.asarray(image, np.uint32).ravel()
    if image.size > chip["hbm_words"]:
        raise ValueError(f"chip {c}'s HBM image has {image.size} words, more than "
                         f"{chip['hbm_words']}")
    per = chip["words_per_cycle"]
    return pack_words(np.pad(image, (0, -image.size % per)), per)


#: The flits of the chips' longest packet (a ``write`` of the DMA's most data words).
LONGEST_PACKET_FLITS = HEADER_WORDS + DEFAULT_MAX_PAYLOAD
#: The routers' VCs and buffer flits by routing (:func:`router_defaults`).
ROUTER_DEFAULTS = {"dor": (2, 8), "adaptive": (4, 3 * LONGEST_PACKET_FLITS // 2)}


def router_defaults(routing, vcs=None, buffer_flits=None):
    """``(vcs, buffer_flits)``, each as given or else :data:`ROUTER_DEFAULTS`'s for
    ``routing``: with "dor" 2 VCs of 8 flits; with "adaptive" the escape VCs and two
    adaptive ones, of one and a half of the chips' longest packets each: cut-through
    allocation takes a VC only with room for a whole packet, and the half lets the next
    packet take the VC while the last one's flits are in flight. (Two whole packets
    would make the injection rule ask an injected packet for an empty buffer.)"""
    routing = check_routing(routing)
    default_vcs, default_flits = ROUTER_DEFAULTS[routing]
    return (default_vcs if vcs is None else vcs,
            default_flits if buffer_flits is None else buffer_flits)


def _check_system(topology, chip, *, vcs, buffer_flits, routing="dor", speedup=1):
    """ChipNode's checks, made before any part is built or planned, so that a bad value is
    one error and leaves no half-built parts behind; returns ``(vcs, buffer_flits)``,
    :func:`router_defaults` filling what is None."""
    vcs, buffer_flits = router_defaults(routing, vcs, buffer_flits)
    check_int("network_ports", chip["network_ports"], least=1,
              most=max_local_ports(len(topology.dims)))
    check_int("outstanding", chip["outstanding"], least=1)
    check_int("jitter", chip.get("jitter", 0), least=0, most=1 << 20)   # the HBM model's
    check_int("vcs", vcs, least=2, most=MAX_VCS)
    check_int("buffer_flits", buffer_flits, least=1)
    check_int("speedup", speedup, least=1, most=vcs)
    if check_routing(routing) == "adaptive":
        longest = LONGEST_PACKET_FLITS
        if vcs <= ADAPTIVE_ESCAPE_VCS:
            raise ValueError(f"routing='adaptive' needs vcs above {ADAPTIVE_ESCAPE_VCS} (the "
                             f"escape VCs), not vcs={vcs}")
        if buffer_flits < longest:
            raise ValueError(f"routing='adaptive' cuts packets through, so buffer_flits must "
                             f"hold the chips' longest packet ({longest} flits), not "
                             f"{buffer_flits}")
    return vcs, buffer_flits


def _per_chip(value, count, bits):
    mask = (1 << bits) - 1
    return np.array([(int(value) >> (bits * i)) & mask for i in range(count)], np.int64)


def _explain(topology, words, out, chip, what):
    """``system 2x2 hung: chip 1 at pc 7 (wait f3, 64) with f3=32; ...``."""
    n = topology.n_chips
    n_flags = chip.get("n_flags", 16)
    pcs = _per_chip(out.get("pc", 0), n, 32)
    states = _per_chip(out.get("state", 0), n, STATE_BITS)
    errors = _per_chip(out.get("error", 0), n, ERROR_BITS)
    flags = _per_chip(out.get("flags", 0), n * n_flags, 32).reshape(n, n_flags)
    waiting = int(out.get("waiting", 0))
    parts = []
    for c in range(n):
        if words[c] is None or State(int(states[c])) == State.HALTED:
            continue
        pc = int(pcs[c])
        bundle = "outside the program"
        if pc < len(words[c]):
            bundle = tc.disassemble(words[c][pc:pc + 1]).strip().splitlines()[-1].strip()
        note = f"chip {c} at pc {pc} ({bundle})"
        if errors[c]:
            note += f" stopped with {tc.ERRORS[int(errors[c])]}"
        elif waiting >> c & 1:
            shown = ", ".join(f"f{f}={v}" for f, v in enumerate(flags[c]) if v)
            note += f" waits, flags {shown or 'all 0'}"
        parts.append(note)
    return f"system {topology.shape} {what}: " + ("; ".join(parts) or "every chip halted")


def collective(kind, inputs, *, topology, dtype="float32", backend="verilator", seed=0,
               numerics="tpu", chunks="auto", chip=None, vcs=None, buffer_flits=None,
               link_latency=2, routing=None, speedup=1, waves=None, progress=None):
    """Run collective ``kind`` on ``inputs`` over the chips of ``topology`` (SPEC section 6).

    ``inputs`` [C, n] (all_to_all [C, C, m]) for the C live chips, float32/int32 values or
    uint32 bit patterns, any n >= 1 (reduce_scatter: a multiple of C) and m >= 1;
    ``dtype`` "float32" or "int32". The chips run the programs of
    :func:`sim.kernels.collective.plan_collective` (bidirectional rings per dimension,
    the shards of a 2-D/3-D torus in rotated dimension orders, each reduce block from a
    VMEM line); ``out`` equals ``golden.collectives.collective(kind, inputs, topology=...,
    dtype=..., numerics=...)`` bit for bit. Returns a :class:`CollectiveRun`, which says
    the chip and chunking it ran.

    ``chip``: TensorCore parameters over :data:`SYSTEM_CHIP`; by default the collectives'
    chip of the topology (``sim.system_chip.collective_chip``: a network port per torus
    link direction, 2*D; lanes at least 4 x the ports, 8, 16 or 32, so that the DMA's VMEM
    port stays half free and the reduce keeps up; two DMA descriptors in flight a port;
    memories for a 1 MiB all-reduce), so that every size on a topology shares one build.
    A message that needs larger memories grows them to the next power of two (a new
    build).

    ``chunks``: pieces per transfer, or "auto" (the default), the chunking
    ``golden.collective_cost`` predicts fastest on that chip within its flags
    (``sim.kernels.collective.choose_chunks``).

    ``vcs``, ``buffer_flits``, ``link_latency``, ``routing`` and ``speedup`` are the routers'
    and links' (:func:`run_programs`): ``routing="adaptive"`` lets a packet take any
    minimal route, so on a ring of two chips both links to the neighbour carry its words.
    By default ``routing`` goes with the chip: on the topology's default chip (no
    ``chip=``) the topology's routing (``sim.system_chip.collective_routing``: "adaptive"
    with a ring of two chips, else "dor"); on a given chip "dor", as :func:`run_programs`.
    :class:`CollectiveRun` reports it.

    Raises
    ------
    ValueError
        On bad input (kind, shape, dtype, chunks; a message larger than the chips' memories
        can address).
    SystemRunError
        A chip faulted or the run hung.
    """
    from .kernels.collective import plan_collective
    topology = _topology(topology)
    bits, as_type = _bits(inputs, dtype)
    if chunks != "auto" and (isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer))
                             or chunks < 1):
        raise ValueError(f"chunks must be a positive integer or 'auto', not {chunks!r}")
    if routing is None:
        routing = collective_routing(topology, chip)
    chip = (collective_chip(topology) if chip is None else dict(SYSTEM_CHIP) | dict(chip)) | \
        {"numerics": numerics}
    vcs, buffer_flits = _check_system(topology, chip, vcs=vcs, buffer_flits=buffer_flits,
                                      routing=routing, speedup=speedup)
    plan = plan_collective(kind, bits, topology=topology, dtype=dtype, lanes=chip["lanes"],
                           chunks=chunks, push_words=plan_push_words(chip, kind),
                           push_ports=chip["network_ports"],
                           cost=cost_params(chip, topology, kind), max_flags=chip["n_flags"])
    need = dict(n_flags=plan.n_flags, vmem_lines=plan.vmem_lines, smem_words=plan.smem_words,
                imem_depth=plan.imem_bundles)
    chip |= {name: max(chip[name], memory_depth(value)) for name, value in need.items()}
    run = run_programs(topology, plan.programs, vmem=plan.vmem, smem=plan.smem, chip=chip,
                       vcs=vcs, buffer_flits=buffer_flits, link_latency=link_latency,
                       routing=routing, speedup=speedup, backend=backend, seed=seed,
                       waves=waves, progress=progress)
    out = plan.result(run.vmem).astype(np.uint32)
    cycles = max(run.cycles, 1)
    algbw, busbw = gc_golden.bandwidth(kind, bits.shape, cycles)
    return CollectiveRun(
        out=out.view(as_type) if as_type is not None else out, cycles=run.cycles,
        algbw=algbw, busbw=busbw,
        bus_bound=gc_golden.bus_bound(kind, topology, LINK_BYTES_PER_CYCLE),
        link_utilization=run.link_flits / cycles, seconds=run.seconds, chunks=plan.chunks,
        chip=chip, predicted_cycles=plan.predicted_cycles, routing=routing,
        stalls=run.stalls)


#: The data-parallel step's chips: :data:`SYSTEM_CHIP` with an 8x8 MXU (the matmul kernel's
#: 8 lanes) and the ALU operations the matmul adds (``xor`` zeroes its sums, ``max`` is
#: its ReLU).
STEP_CHIP = dict(SYSTEM_CHIP, mxu=True, ops=("add", "iadd", "xor", "max"))


@dataclass(frozen=True)
class StepRun:
    """Result of :func:`data_parallel_step`: ``out``, float32 [C, M, N], the all-reduced
    products on each live chip (row r the r-th live chip's); ``products``, float32
    [C, M, N], each chip's own matmul product as it left in HBM; ``cycles`` from start
    until every live chip was done, the matmul and the all-reduce; ``link_utilization``
    and ``seconds`` as :class:`CollectiveRun`'s."""
    out: np.ndarray
    products: np.ndarray
    cycles: int
    link_utilization: np.ndarray
    seconds: float = 0.0


def data_parallel_step(shards, w, *, topology, activation=None, numerics="tpu", chunks=1,
                       chip=None, vcs=None, buffer_flits=None, link_latency=2, routing="dor",
                       speedup=1, backend="verilator", seed=0, waves=None, progress=None):
    """A data-parallel step, one program per chip (:mod:`sim.kernels.data_parallel`): chip
    r multiplies ``shards[r]`` by ``w`` on its MXU, from HBM to HBM, then the chips
    all-reduce the fp32 products.

    ``shards`` bf16 [C, M, K] for the C live chips, ``w`` bf16 [K, N]; ``out`` equals
    ``golden.collectives.collective("all_reduce", P, topology=...)`` bit for bit, where row
    r of P is ``golden.mxu.matmul(shards[r], w)`` (then ``max(v, +0.0)`` with ReLU),
    flattened. ``chip`` overrides :data:`STEP_CHIP` (8 lanes and an MXU, which the matmul
    kernel needs; the operations it uses are added); the other parameters are
    :func:`collective`'s. Returns a :class:`StepRun`.

    Raises
    ------
    ValueError
        On bad input (shapes; products the all-reduce cannot cut into VMEM lines; a chip
        without 8 lanes and an MXU).
    SystemRunError
        A chip faulted or the run hung.
    """
    from .kernels.data_parallel import plan_data_parallel
    topology = _topology(topology)
    chip = dict(STEP_CHIP) | dict(chip or {}) | {"numerics": numerics}
    if chip["lanes"] != 8 or not chip["mxu"]:
        raise ValueError(f"the matmul kernel runs on chips of 8 lanes with an MXU, not "
                         f"lanes={chip['lanes']}, mxu={chip['mxu']}")
    plan = plan_data_parallel(shards, w, topology=topology, activation=activation,
                              chunks=chunks, push_words=plan_push_words(chip))
    if chip["ops"] is not None:
        chip["ops"] = tuple(dict.fromkeys([*chip["ops"], "add", "xor"] +
                                          ["max"] * (activation == "relu")))
    need = dict(n_flags=plan.n_flags, vmem_lines=plan.vmem_lines, smem_words=plan.smem_words,
                imem_depth=plan.imem_bundles, hbm_words=plan.hbm_words)
    chip |= {name: max(chip[name], memory_depth(value)) for name, value in need.items()}
    chip["mxu_results"] = max(chip.get("mxu_results", 16), plan.mxu_results)
    run = run_programs(topology, plan.programs, vmem=plan.vmem, smem=plan.smem, hbm=plan.hbm,
                       chip=chip, vcs=vcs, buffer_flits=buffer_flits,
                       link_latency=link_latency, routing=routing, speedup=speedup,
                       backend=backend, seed=seed, waves=waves, progress=progress)
    products = np.stack([plan.matmul.result(run.hbm[c]) for c in plan.collective.chips])
    return StepRun(out=plan.result(run.vmem).view(np.float32),
                   products=products.view(np.float32), cycles=run.cycles,
                   link_utilization=run.link_flits / max(run.cycles, 1), seconds=run.seconds)


def _bits(inputs, dtype):
    """(uint32 bit patterns, the dtype to view ``out`` as, or None for uint32)."""
    if dtype not in gc_golden.DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(gc_golden.DTYPES)}, not {dtype!r}")
    array = np.asarray(inputs)
    if array.dtype == np.uint32:
        return array, None
    want = np.float32 if dtype == "float32" else np.int32
    if not isinstance(inputs, np.ndarray):
        # Nested lists of Python numbers, as a user writes them: floats are values (rounded
        # to fp32), integers int32 values; numpy arrays keep their own dtype's meaning.
        if dtype == "float32" and array.dtype.kind in "fiu":
            array = array.astype(np.float32)
        elif dtype == "int32" and array.dtype.kind in "iu":
            if array.size and (array.min() < -2**31 or array.max() >= 2**31):
                raise ValueError("int32 inputs must lie in [-2**31, 2**31)")
            array = array.astype(np.int32)
    if array.dtype != want:
        raise ValueError(f"{dtype} inputs must be {np.dtype(want).name} values or uint32 bit "
                         f"patterns, not {array.dtype}")
    return array.view(np.uint32), want


# --- Simulation: Amaranth directly; Verilator and Icarus through a compiled harness whose
# Verilog holds the chip module once.

CHIP_MODULE = "system_chip"


def _hierarchical(waves):
    """The modules Verilator builds as hierarchical blocks: the chip, verilated and compiled
    once for all its instances, unless the run is traced (a hierarchical block's inside
    is missing from Verilator's traces). A 2x2 of 4-lane chips then builds in 102 s (180 s
    flat) and runs 2.5x faster; a 4x4 of 16-lane chips builds in 6 minutes within 1.1 GB
    (34 minutes and 14 GB flat) and runs 11% to 25% slower (docs/simulation.md)."""
    return () if waves else (CHIP_MODULE,)


def _n_flags(params):
    """Flags a chip of a system built with ``params`` has (TensorCoreSystem's default 16)."""
    return dict(params.get("chip") or {}).get("n_flags", 16)


def _jitter(params):
    """Whether the chips of a system built with ``params`` have HBM jitter."""
    return bool(dict(params.get("chip") or {}).get("jitter", 0))


class _SystemOfInstances(ChipSystem):
    def make_node(self, chip):
        return BlackBox(CHIP_MODULE, chip_node_signature(
            dims=self.node_params["dims"], vcs=self.node_params["vcs"],
            n_flags=_n_flags(self.node_params), routing=self.node_params["routing"],
            jitter=_jitter(self.node_params)))


def _export(params):
    """Verilog of the system top with the chip module emitted once, and in it the VPU's
    word ALUs and transcendental cores; its signature, and the repeated modules.

    Every chip loads and dumps its own memories (:mod:`sim.backends.self_loading`,
    plusargs ``+mem_chip<c>.<name>_in``/``_out``), so that the chip can be a
    hierarchical block."""
    top = _SystemOfInstances(**params)
    node = ChipNode(**top.node_params)
    leaves = vpu_of_instances(node.tensorcore.core.vpu)
    if node.tensorcore.core.mxu is not None:
        leaves |= mxu_of_instances(node.tensorcore.core.mxu, prefix="chip_mxu")
    loader = loader_verilog(_node_images(node), number="node", prefix="chip")
    text = emit([*leaves.items(),
                 (CHIP_MODULE, node, lambda text: add_to_module(text, CHIP_MODULE, loader)),
                 (BLOCK, top)],
                header=f"// Generated by tpu-rtl (sim/system.py): system top {params}\n\n")
    return text, top.signature, [*leaves, CHIP_MODULE]


def _check_read_out(signature, dims):
    """Refuse a system whose outputs the whole-run harness cannot instantiate: Amaranth
    numbers a netlist cell's output bits in 16 bits, and the harness holds the system as
    one cell (an instance on Verilator and Icarus)."""
    bits = sum(Shape.cast(member.shape).width for _, member in signature.members.flatten()
               if member.is_port and member.flow == Out)
    if bits > MAX_READ_OUT_BITS:
        shape = "x".join(map(str, dims))
        raise ValueError(f"system {shape}: its read-out (every chip's flags, pc, state, link "
                         f"and stall counters) is {bits:,} bits, more than the "
                         f"{MAX_READ_OUT_BITS:,} a run can take; use fewer chips (an 8x8 with "
                         f"16 flags a chip fits) or fewer flags")


def _simulate(whole, *, backend, waves, progress, threads=None):
    """``whole`` on ``backend``; ``threads`` of a Verilator model as in
    :func:`sim.toolchain.model_threads` (``$TPU_RTL_THREADS`` by default)."""
    check_tracing(backend, waves)
    images = _images(whole.params)
    params = whole.params
    signature = chip_system_signature(dims=params["dims"], vcs=params["vcs"],
                                      reconfig_cycles=params["reconfig_cycles"],
                                      n_flags=_n_flags(params),
                                      routing=params.get("routing", "dor"),
                                      jitter=_jitter(params))
    _check_read_out(signature, params["dims"])
    if backend == "amaranth":
        from .backends.amaranth_sim import simulate_whole
        return simulate_whole(whole, ChipSystem, waves=waves, progress=progress)
    from .backends import compiled
    check_run(whole, signature, images)
    makers = "".join(inspect.getsource(f) for f in (_SystemOfInstances, _export))
    # The chips load their own memories: the testbench is given none to reach into.
    folder = compiled.build_top(whole, simulator=backend, design=lambda: _export(whole.params),
                                key=[makers, inspect.getsource(self_loading)],
                                waves=wave_format(waves), threads=threads,
                                what="the system harness",
                                hierarchical=_hierarchical(waves))
    return compiled.run_built(folder, whole, images, simulator=backend, waves=waves,
                              progress=progress)


# ------------------------------------------------------------------------------ embedding

#: The embedding step's chips: :data:`SYSTEM_CHIP` with a VPU of one operation (the
#: programs use none; a smaller chip builds faster). The SparseCore's parameters are the
#: plan's (``sim.kernels.embedding``).
EMBEDDING_CHIP = dict(SYSTEM_CHIP, ops=("iadd",))


@dataclass(frozen=True)
class EmbeddingRun:
    """Result of :func:`embedding_step` (SPEC section 6): ``out`` (list of float32 [B_c, D]
    per live chip in rank order), ``table`` and ``state`` (the whole table and optimizer
    state after the update; unchanged without ``grads``), ``cycles``, ``hbm_reads`` (int64
    [C]: the rows each owner's gather read, the unique ids it serves), ``ici_words`` (the
    words the step's all-to-alls carried between chips), and, beyond the contract,
    ``link_utilization`` (float [n_chips, 2*D], the fraction of the cycles each directed
    link carried a flit) and the simulator's ``seconds``."""
    out: list
    table: np.ndarray
    state: object
    cycles: int
    hbm_reads: np.ndarray
    ici_words: int
    link_utilization: np.ndarray = None
    seconds: float = 0.0


def embedding_step(table, indices, offsets, *, grads=None, weights=None, topology,
                   combiner="sum", optimizer="sgd", lr=0.01, state=None, mode="exact",
                   capacity=None, numerics="tpu", backend="verilator", seed=0, chip=None,
                   vcs=None, buffer_flits=None, link_latency=2, routing="dor", speedup=1,
                   waves=None, progress=None):
    """The multi-chip embedding step (SPEC sections 4.9 and 6) on the system RTL, with a
    SparseCore on every chip: the programs of :func:`sim.kernels.embedding.plan_embedding`.
    Results equal :func:`golden.embedding.step`'s bit for bit, on every topology.

    Arguments as :func:`golden.embedding.step` (checked by it, so a bad id or a capacity
    overflow raises its error before anything is built or run); ``backend``, ``seed``,
    ``chip`` (overrides of :data:`EMBEDDING_CHIP`), ``vcs``, ``buffer_flits``,
    ``link_latency``, ``routing``, ``speedup``, ``waves`` and ``progress`` as
    :func:`collective`'s.

    The RTL runs both modes with every optimizer (``"sgd"``, ``"adagrad"``,
    ``"rowwise_adagrad"``). ``hbm_reads`` is what the
    RTL counted: the rows each owner's SparseCore gather read (its gather flag).

    Raises
    ------
    ValueError
        On bad input, as golden does, or a step the programs cannot hold.
    SystemRunError
        A chip faulted or the run hung.
    """
    from golden import embedding as golden_embedding
    from .kernels.embedding import FLAGS, plan_embedding
    topology = _topology(topology)
    # golden's checks of every argument, ids and capacity included, before anything is
    # planned or built (its result is not needed here).
    golden_embedding.step(table, indices, offsets, grads=grads, weights=weights,
                          topology=topology, combiner=combiner, optimizer=optimizer, lr=lr,
                          state=state, mode=mode, capacity=capacity, numerics=numerics)
    chip = dict(EMBEDDING_CHIP) | dict(chip or {}) | {"numerics": numerics}
    vcs, buffer_flits = _check_system(topology, chip, vcs=vcs, buffer_flits=buffer_flits,
                                      routing=routing, speedup=speedup)
    plan = plan_embedding(table, indices, offsets, grads=grads, weights=weights,
                          topology=topology, combiner=combiner, optimizer=optimizer, lr=lr,
                          state=state, mode=mode, capacity=capacity, chip=chip)
    run = run_programs(topology, plan.programs, vmem=[None] * topology.n_chips,
                       smem=plan.smem, hbm=plan.hbm, chip=plan.chip, vcs=vcs,
                       buffer_flits=buffer_flits, link_latency=link_latency, routing=routing,
                       speedup=speedup, backend=backend, seed=seed, waves=waves,
                       progress=progress)
    bits = np.asarray(table).view(np.uint32)
    state_bits = None if state is None else np.asarray(state).view(np.uint32)
    if grads is not None and optimizer != "sgd" and state_bits is None:
        from golden.sparsecore import DEFAULT_INITIAL_ACCUMULATOR, fp32_scalar
        shape = bits.shape[:1] if optimizer == "rowwise_adagrad" else bits.shape
        state_bits = np.full(shape, fp32_scalar(DEFAULT_INITIAL_ACCUMULATOR,
                                                name="initial_accumulator"), np.uint32)
    out, new_table, new_state = plan.results(run.hbm, table=bits, state=state_bits,
                                             optimizer=optimizer)
    if grads is None and state is None:
        new_state = None
    cycles = max(run.cycles, 1)
    return EmbeddingRun(out=out, table=new_table, state=new_state, cycles=run.cycles,
                        hbm_reads=run.flags[plan.chips, FLAGS["gather"]].astype(np.int64),
                        ici_words=plan.ici_words,
                        link_utilization=run.link_flits / cycles, seconds=run.seconds)
