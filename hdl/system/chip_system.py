# amaranth: UnusedElaboratable=no
# (The chips are made here, so runs can reach their memories, and used by this component's
# elaborate: if the system is never elaborated, the warning about it is the one that counts.)
"""The multi-chip system top (SPEC section 4.8): TensorCore chips with routers, joined
into any ``golden.topology`` torus through wired links and an OCS per axis."""

import math

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..ici.layouts import MAX_VCS
from ..lib.params import check_int
from ..ocs import status_layout
from ..tensorcore.encoding import Error
from ..tensorcore.sequencer import STALL_CAUSES, State
from .chip_node import ChipNode
from .fabric import (config_rows, face_ports, ocs_layout, ocs_switches, parse_dims,
                     record_refusal, wire_links)
from .layouts import row_layout

__all__ = ["ChipSystem", "chip_system_signature", "SYSTEM_PHASES"]

#: The phases of a run, by their code on ``phase``.
SYSTEM_PHASES = ("config", "run", "done")
#: Chip c's HBM jitter seed is the system's ``hbm_seed`` xor ``c`` times this (odd, 2**32
#: over the golden ratio), so that no two chips draw the same delays.
_SEED_MIX = 0x9E3779B9


def chip_system_signature(*, dims="2x2", vcs=2, reconfig_cycles=2, n_flags, routing="dor",
                          jitter=False):
    """The ports of a :class:`ChipSystem` (its docstring) of chips with ``n_flags`` flags
    each (and ``jitter``: HBM jitter, the ``hbm_seed`` port), its parameters checked as it
    checks them, without building one or its chips: a runner reads them to check a run."""
    dims = parse_dims(dims)
    n = math.prod(dims)
    check_int("vcs", vcs, least=2, most=MAX_VCS)
    check_int("reconfig_cycles", reconfig_cycles, least=0)
    ports = 2 * len(dims)
    most = max(len(p) for p in face_ports(dims))
    return wiring.Signature({
        "tables": In(stream.Signature(row_layout(n, len(dims), routing))),
        "ocs": In(stream.Signature(ocs_layout(dims))),
        **({"hbm_seed": In(32)} if jitter else {}),
        "alive": In(n), "finished": Out(1), "busy": Out(1), "config_error": Out(1),
        "phase": Out(2), "cycles": Out(32),
        "ocs_status": Out(data.StructLayout({"axis": 2, "status": status_layout(most)})),
        "done": Out(n), "waiting": Out(n),
        "state": Out(data.ArrayLayout(State, n)), "pc": Out(data.ArrayLayout(32, n)),
        "error": Out(data.ArrayLayout(Error, n)),
        "flags": Out(data.ArrayLayout(32, n * n_flags)),
        "link_flits": Out(data.ArrayLayout(32, n * ports)),
        "dropped": Out(32), "malformed": Out(32),
        "stalls": Out(data.ArrayLayout(32, n * len(STALL_CAUSES))),
    })


class ChipSystem(wiring.Component):
    """``dims`` chips (:class:`~hdl.system.ChipNode`: a TensorCore chip and its router),
    their torus ports joined as in :class:`~hdl.system.NetworkSystem`: wired links inside
    the torus, an :class:`~hdl.ocs.OpticalCircuitSwitch` per axis on its faces, whose maps
    make the topology regular, twisted, a mesh, or one with failed chips.

    A run, in phases (``SYSTEM_PHASES``):

    1. ``config``: ``tables`` takes one row per destination r (``layouts.row_layout``;
       with ``routing``'s entries; only each chip's routing entry for r and chip r's
       ``lit`` bits are used), ``ocs``
       each OCS's map and a commit. When every row is in and every OCS reports ``ok``,
       the run starts; an OCS that refuses its map sets ``config_error`` and ends the run.
    2. ``run``: every chip of ``alive`` starts its program (load the memories through
       :attr:`memory_images` before); the others stay idle. ``cycles`` counts the cycles.
       The phase ends when every live chip is ``done``: halted or faulted, with its memory
       system drained (everything it sent has left, everything it received has landed).
    3. ``done``: ``finished``.

    A run that stops making progress (no chip ``busy``, no flit moving) is for the
    harness's watchdog to end; ``state``, ``pc``, ``waiting`` and ``flags`` then say
    which chips wait on which flags.

    Parameters
    ----------
    dims : str or tuple
        ``"2x2"``, ``"2x2x2"`` or a tuple: 2 or 3 axes, 2 to 256 chips.
    vcs, buffer_flits, link_latency, routing, speedup
        Of every chip's router and links (:class:`~hdl.system.ChipNode`).
    reconfig_cycles : int
        Of every OCS.
    chip : dict
        Every chip's :class:`~hdl.tensorcore.TensorCoreSystem` parameters.

    Ports
    -----
    hbm_seed : In(32), with ``jitter`` in ``chip``
        Seed of the chips' HBM jitter: chip c's is ``hbm_seed ^ (c * 0x9E3779B9)`` (mod
        2**32).
    tables : In(stream.Signature(row_layout(n_chips, len(dims), routing)))
    ocs : In(stream.Signature(ocs_layout(dims)))
    alive : In(n_chips)
        Bit c: chip c runs.
    finished, busy, config_error : Out(1)
    phase : Out(2)
    ocs_status : Out(StructLayout(axis, status))
        The OCS that refused its map (``NetworkSystem``'s).
    cycles : Out(32)
        Cycles of the ``run`` phase.
    done, waiting : Out(n_chips)
        Per chip: done; waiting on a flag.
    state, pc, error : Out(ArrayLayout(..., n_chips))
        Per chip, the core's.
    flags : Out(ArrayLayout(32, n_chips * n_flags))
        Flag f of chip c at ``c * n_flags + f``.
    link_flits : Out(ArrayLayout(32, n_chips * 2 * len(dims)))
        Flits sent out of torus port p of chip c, at ``c * 2 * len(dims) + p``.
    dropped, malformed : Out(32)
        Malformed packets dropped by the routers, and by the receive engines (0 in a
        correct run).
    stalls : Out(ArrayLayout(32, n_chips * len(STALL_CAUSES)))
        Chip c's sequencer's stalled cycles of cause k (``STALL_CAUSES``) at
        ``c * len(STALL_CAUSES) + k``.

    Attributes
    ----------
    memory_images : dict
        ``chip<c>.<name>`` for every chip's memories (``TensorCoreSystem``'s names).
    """

    def __init__(self, *, dims="2x2", vcs=2, buffer_flits=8, link_latency=2,
                 reconfig_cycles=2, chip=None, routing="dor", speedup=1):
        self.dims = parse_dims(dims)
        self.n_chips = n = math.prod(self.dims)
        check_int("vcs", vcs, least=2, most=MAX_VCS)
        check_int("reconfig_cycles", reconfig_cycles, least=0)
        self.node_params = dict(dims=len(self.dims), vcs=vcs, buffer_flits=buffer_flits,
                                link_latency=link_latency, n_nodes=n, chip=dict(chip or {}),
                                routing=routing, speedup=speedup)
        self.vcs, self.reconfig_cycles = vcs, reconfig_cycles
        self.faces = face_ports(self.dims)
        self.nodes = [self.make_node(c) for c in range(n)]
        self.memory_images = {
            f"chip{c}.{name}": (memory, f"chip{c}.{path}")
            for c, node in enumerate(self.nodes)
            for name, (memory, path) in getattr(node, "memory_images", {}).items()}
        self.n_flags = self.nodes[0].flags.shape().length
        self.jitter = dict(chip or {}).get("jitter", 0)
        super().__init__(chip_system_signature(dims=dims, vcs=vcs,
                                               reconfig_cycles=reconfig_cycles,
                                               n_flags=self.n_flags, routing=routing,
                                               jitter=bool(self.jitter)))

    def make_node(self, chip):
        """Chip ``chip``'s component (an export replaces it by an instance of one module)."""
        return ChipNode(**self.node_params)

    def elaborate(self, platform):
        m = Module()
        n, nodes = self.n_chips, self.nodes
        phase = Signal(range(len(SYSTEM_PHASES)))
        code = {name: i for i, name in enumerate(SYSTEM_PHASES)}
        in_phase = {name: phase == i for name, i in code.items()}
        m.d.comb += self.phase.eq(phase)

        rows, take_row = config_rows(m, self.tables, n, configuring=in_phase["config"])
        row = self.tables.payload
        n_flags, ports = self.n_flags, 2 * len(self.dims)
        for c, node in enumerate(nodes):
            m.submodules[f"chip{c}"] = node
            m.d.comb += [node.setup_valid.eq(take_row), node.setup.row.eq(rows),
                         node.setup.entry.eq(row.entries[c]), node.setup.node.eq(row.node),
                         node.node.eq(c), node.start.eq(in_phase["run"] & self.alive[c]),
                         self.done[c].eq(node.done), self.waiting[c].eq(node.waiting),
                         self.state[c].eq(node.state), self.pc[c].eq(node.pc),
                         self.error[c].eq(node.error)]
            if self.jitter:
                # Each chip its own sequence: the seed xor an odd multiple of its id.
                m.d.comb += node.hbm_seed.eq(self.hbm_seed ^ (c * _SEED_MIX & 0xFFFF_FFFF))
            m.d.comb += [self.flags[c * n_flags + f].eq(node.flags[f])
                         for f in range(n_flags)]
            m.d.comb += [self.link_flits[c * ports + p].eq(node.link_flits[p])
                         for p in range(ports)]
            causes = len(STALL_CAUSES)
            m.d.comb += [self.stalls[c * causes + k].eq(node.stalls[k])
                         for k in range(causes)]
        m.d.comb += [self.dropped.eq(sum(node.dropped for node in nodes)[:32]),
                     self.malformed.eq(sum(node.malformed for node in nodes)[:32])]

        wire_links(m, self.dims, nodes)
        switches = ocs_switches(m, self.faces, nodes, config=self.ocs, vcs=self.vcs,
                                reconfig_cycles=self.reconfig_cycles,
                                configuring=in_phase["config"])
        refused = record_refusal(m, self.faces, switches, status=self.ocs_status,
                                 config_error=self.config_error)
        status_ok = Cat(s.status.code == 1 for s in switches).all()
        settling = Cat(s.busy for s in switches).any()

        finished_chips = Cat(node.done | ~self.alive[c] for c, node in enumerate(nodes)).all()
        with m.Switch(phase):
            with m.Case(code["config"]):
                with m.If(refused.any()):
                    m.d.sync += [self.config_error.eq(1), phase.eq(code["done"])]
                with m.Elif((rows == n) & status_ok & ~settling):
                    m.d.sync += phase.eq(code["run"])
            with m.Case(code["run"]):
                m.d.sync += self.cycles.eq(self.cycles + 1)
                with m.If(finished_chips):
                    m.d.sync += phase.eq(code["done"])
        moving = Cat(node.moved for node in nodes).any()
        working = Cat(node.busy & self.alive[c] for c, node in enumerate(nodes)).any()
        m.d.comb += [self.finished.eq(in_phase["done"]),
                     self.busy.eq(in_phase["run"] & (moving | working))]
        return m
