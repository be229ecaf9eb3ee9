"""The deepest register-to-register paths of a synthesized ECP5 netlist, before placement.

nextpnr names a design's critical path only once its router ends, and on a design that
fills the device (the proto chip: docs/fpga.md) that is hours, or never; its estimate
after placement gives a frequency but no path. This reads the netlist Yosys wrote
(``write_json``, hierarchy kept or not) and times every path from a register, a block
RAM's output or a top-level input to a register, a block RAM's input, a distributed
RAM's write or a top-level output, in seconds, so that the paths to cut are known before
any place and route.

The estimate of a path is its cells' delays plus :data:`NET_PS` for each net between
cells that is not a slice's own wire (a carry cell's ``CIN`` from the one before, a
wide multiplexer's inputs from its LUTs). Cell delays are the ECP5 cell library's, as
Yosys ships it for ``abc9`` (``share/ecp5/*.vh``, speed grade 6); the routing of a net
is a guess, so the figures rank paths and count their logic levels, and nextpnr's own
timing is the measure. Multipliers and distributed RAM reads count as one level of
:data:`UNKNOWN_PS`, block RAM outputs start at :data:`BRAM_CLOCK_TO_OUT_PS`.
"""

import json
import re
from collections import defaultdict
from dataclasses import dataclass

__all__ = ["TimedPath", "deepest_paths", "format_paths", "summary", "NET_PS"]

#: Input to output delays (ps) of the combinational cells.
CELL_PS = {
    "LUT4": {"A": 141, "B": 275, "C": 379, "D": 379},
    "PFUMX": {"ALUT": 98, "BLUT": 98, "C0": 151},
    "L6MUX21": {"D0": 140, "D1": 141, "SD": 148},
}
#: A carry cell's delays (ps), by output, then input.
CARRY_PS = {
    "S0": {"A0": 379, "B0": 379, "C0": 275, "D0": 141, "CIN": 257},
    "S1": {"A0": 630, "B0": 630, "C0": 526, "D0": 392, "A1": 379, "B1": 379, "C1": 275,
           "D1": 141, "CIN": 273},
    "COUT": {"A0": 516, "B0": 516, "C0": 412, "D0": 278, "A1": 516, "B1": 516, "C1": 412,
             "D1": 278, "CIN": 43},
}
#: The routing of one net between cells: a small block's (the router's routed critical
#: path, 22.06 ns of routing over 22 levels: docs/fpga.md). A full device's are longer.
NET_PS = 1_000
#: A block RAM's clock to data out (DP16KD without its output register).
BRAM_CLOCK_TO_OUT_PS = 3_500
#: A multiplier or a distributed RAM's read, input to output.
UNKNOWN_PS = 2_000
#: Inputs fed by a dedicated wire inside a slice: no routing.
_DEDICATED = {("CCU2C", "CIN"), ("PFUMX", "ALUT"), ("PFUMX", "BLUT"), ("L6MUX21", "D0"),
              ("L6MUX21", "D1")}
_REGISTERS = {"TRELLIS_FF", "DP16KD", "PDPW16KD"}
_DROP = {"$scopeinfo", "EHXPLLL", "TRELLIS_IO"}
#: Net names Yosys makes from a mapped cell's (``x_TRELLIS_FF_Q_3_DI_LUT4_Z``).
_MADE = re.compile(r"_(LUT4|TRELLIS_FF|CCU2C|PFUMX|L6MUX21|DP16KD|MULT18X18D|"
                   r"TRELLIS_DPR16X4)_|_D[IO][AB]?_?\d*(_|$)")


@dataclass(frozen=True)
class TimedPath:
    """One endpoint's deepest path: ``ps`` its estimate, ``levels`` its LUT4, carry and
    multiplexer cells (a carry chain counts once), ``nets`` its routed nets, ``start``
    and ``end`` the signals it runs between, ``blocks`` the design blocks (dotted
    hierarchical names) it crosses, in order."""
    ps: int
    levels: int
    nets: int
    start: str
    end: str
    blocks: tuple

    @property
    def mhz(self):
        return 1e6 / self.ps if self.ps else float("inf")

    def as_dict(self):
        """The path as JSON-ready fields (:meth:`from_dict` reads them back)."""
        return {"ps": self.ps, "levels": self.levels, "nets": self.nets,
                "start": self.start, "end": self.end, "blocks": list(self.blocks)}

    @classmethod
    def from_dict(cls, fields):
        return cls(**dict(fields, blocks=tuple(fields["blocks"])))


def _flatten(modules, top):
    """The leaf cells of ``top`` with nets numbered in one space, readable net names and
    the top's ports: ``(cells, names, ports)``, each cell ``(name, type, {port:
    (direction, [bits])})``."""
    cells, names = [], {}
    counter = [0]

    def fresh():
        counter[0] += 1
        return ("n", counter[0])

    def walk(name, prefix, outer):
        module = modules[name]
        local = {}

        def bit(b):
            if isinstance(b, str):
                return b
            if b not in local:
                local[b] = outer.get(b) or fresh()
            return local[b]

        for net, info in module.get("netnames", {}).items():
            if info.get("hide_name"):
                continue
            label = prefix + net
            for i, b in enumerate(info["bits"]):
                key = bit(b)
                text = label if len(info["bits"]) == 1 else f"{label}[{i}]"
                # A name of the design before a Yosys-made one; then the innermost, which
                # says which block a net belongs to.
                rank = (bool(_MADE.search(net)), -text.count("."), len(text))
                if key not in names or rank < names[key][0]:
                    names[key] = (rank, text)
        for cell_name, cell in module.get("cells", {}).items():
            kind = cell["type"]
            if kind in _DROP:
                continue
            inner = modules.get(kind)
            if inner is not None and "blackbox" not in inner.get("attributes", {}) \
                    and inner.get("cells"):
                ports = {}
                for port, bits in cell["connections"].items():
                    for sub, b in zip(inner["ports"][port]["bits"], bits):
                        if not isinstance(sub, str):
                            ports[sub] = bit(b)
                walk(kind, f"{prefix}{cell_name}.", ports)
                continue
            directions = cell.get("port_directions", {})
            cells.append((prefix + cell_name, kind,
                          {port: (directions.get(port, "input"), [bit(b) for b in bits])
                           for port, bits in cell["connections"].items()}))

    top_module = modules[top]
    outer = {}
    for port, info in top_module["ports"].items():
        for b in info["bits"]:
            if not isinstance(b, str):
                outer[b] = ("p", port, b)
    walk(top, "", outer)
    return cells, {key: text for key, (_, text) in names.items()}, top_module["ports"]


def _arcs(kind, ports):
    """The cell's timing arcs ``(input bit, output bit, ps, dedicated, level)``, or None
    for a register-like cell (its outputs start paths, its inputs end them)."""
    if kind in _REGISTERS:
        return None
    outputs = [(p, bits) for p, (d, bits) in ports.items() if d == "output"]
    inputs = [(p, bits) for p, (d, bits) in ports.items() if d == "input"]
    arcs = []
    if kind in CELL_PS:
        (_, (z,)), = outputs
        for p, (bits) in inputs:
            if p in CELL_PS[kind]:
                arcs.append((bits[0], z, CELL_PS[kind][p], (kind, p) in _DEDICATED, 1))
    elif kind == "CCU2C":
        for out, bits in outputs:
            for p, ibits in inputs:
                if p in CARRY_PS.get(out, {}):
                    arcs.append((ibits[0], bits[0], CARRY_PS[out][p], p == "CIN",
                                 0 if p == "CIN" else 1))
    elif kind == "TRELLIS_DPR16X4":     # its write is a register's, its read is not
        dout = ports.get("DO", ("output", []))[1]
        arcs = [(i, o, UNKNOWN_PS, False, 1) for i in ports.get("RAD", ("input", []))[1]
                for o in dout]
    else:   # a multiplier or anything unknown: every input to every output
        for _, obits in outputs:
            for _, ibits in inputs:
                arcs += [(i, o, UNKNOWN_PS, False, 1) for i in ibits for o in obits]
    return arcs


def deepest_paths(netlist, *, top=None, count=10, net_ps=NET_PS):
    """The ``count`` deepest paths of the Yosys JSON ``netlist`` (a path or its parsed
    dict), one per endpoint signal (a bus's bits as one), deepest first; ``count=None``:
    every endpoint's. ``net_ps``: the routing estimate of a net (:data:`NET_PS`).

    ``top``: the top module (default: the one with the ``top`` attribute). Raises
    ValueError on a netlist without modules or a combinational loop."""
    if not isinstance(netlist, dict):
        with open(netlist) as f:
            netlist = json.load(f)
    modules = netlist.get("modules") or {}
    if not modules:
        raise ValueError("netlist: no modules (not a Yosys write_json netlist?)")
    if top is None:
        tops = [n for n, m in modules.items() if m.get("attributes", {}).get("top")]
        if len(tops) != 1:
            raise ValueError(f"netlist: give top=, one of {', '.join(sorted(modules))[:200]}")
        top = tops[0]
    cells, names, top_ports = _flatten(modules, top)

    arrival, back = {}, {}        # bit -> ps; bit -> (from bit, cell, level, routed)
    fanin = defaultdict(list)     # output bit -> arcs into it
    ends = []                     # (bit, the endpoint's name)
    starts = {}                   # bit -> the start point's name
    for name, kind, ports in cells:
        arcs = _arcs(kind, ports)
        if arcs is None:
            # A flip-flop is named by the signal it holds, a block RAM by its memory.
            q = ports.get("Q", ("output", [None]))[1][0]
            label = names.get(q, name) if kind == "TRELLIS_FF" else _memory(name)
            for port, (direction, bits) in ports.items():
                for b in bits:
                    if isinstance(b, str):
                        continue
                    if direction == "output":
                        arrival[b] = 0 if kind == "TRELLIS_FF" else BRAM_CLOCK_TO_OUT_PS
                        back[b] = None
                        starts[b] = label
                    elif not port.startswith("CLK"):
                        ends.append((b, label))
            continue
        if kind == "TRELLIS_DPR16X4":
            ends += [(b, _memory(name)) for port in ("DI", "WAD", "WRE")
                     for b in ports.get(port, ("input", []))[1] if not isinstance(b, str)]
        for i, o, ps, dedicated, level in arcs:
            if not isinstance(i, str):
                fanin[o].append((i, ps, not dedicated, level, name))
    for port, info in top_ports.items():
        for b in info["bits"]:
            key = ("p", port, b)
            if info["direction"] == "input":
                arrival[key], back[key], starts[key] = 0, None, port
            else:
                ends.append((key, port))

    def settle(bit):
        # Iterative depth-first longest path: deep carry chains overflow recursion.
        stack = [bit]
        on_stack = set()
        while stack:
            b = stack[-1]
            if b in arrival:
                stack.pop()
                continue
            pending = [arc[0] for arc in fanin.get(b, ()) if arc[0] not in arrival]
            if pending:
                if b in on_stack:
                    raise ValueError(f"netlist: a combinational loop through "
                                     f"{names.get(b, b)}")
                on_stack.add(b)
                stack.extend(pending)
                continue
            best, via = 0, None
            for i, ps, routed, level, cell in fanin.get(b, ()):
                ps += arrival[i] + (net_ps if routed else 0)
                if ps > best or via is None:
                    best, via = ps, (i, cell, level, routed)
            arrival[b], back[b] = best, via
            on_stack.discard(b)
            stack.pop()
        return arrival[bit]

    by_end = {}
    for b, label in ends:
        ps = settle(b) + net_ps
        label = _bus(label)
        if label not in by_end or ps > by_end[label][0]:
            by_end[label] = (ps, b)
    deepest = sorted(by_end.items(), key=lambda item: -item[1][0])[:count]
    return [_path(label, ps, b, back, starts) for label, (ps, b) in deepest]


def _bus(name):
    # A bus's bits are one endpoint, and so are the data outputs of a memory's block RAMs
    # ("<memory>.<row>.<column>_DOA0", or the flip-flops that hold them).
    return re.sub(r"(\.\d+)+_DO[AB]?\d+$", "", re.sub(r"(\[\d+\])+$", "", str(name)))


def _memory(cell):
    # A memory's block RAMs are cells "<memory>.<row>.<column>", maybe with a port's name.
    return re.sub(r"(\.\d+)+(_[A-Z]+\d*)?$", "", cell)


def _path(label, ps, bit, back, starts):
    levels, nets, blocks, b = 0, 1, [], bit
    while back.get(b):
        b, cell, level, routed = back[b]
        levels, nets = levels + level, nets + routed
        block = cell.rsplit(".", 1)[0] if "." in cell else ""
        if not blocks or blocks[-1] != block:
            blocks.append(block)
    return TimedPath(ps=ps, levels=levels, nets=nets, start=_bus(starts.get(b, b)),
                     end=label, blocks=tuple(reversed(blocks)))


def summary(path, prefix=""):
    """One line: the estimate, logic levels and routed nets, start -> end."""
    return (f"{path.ps / 1000:.1f} ns ({path.mhz:.1f} MHz), {_count(path.levels, 'level')}, "
            f"{_count(path.nets, 'net')}: "
            f"{_short(path.start, prefix)} -> {_short(path.end, prefix)}")


def format_paths(paths, *, prefix=None):
    """Two lines a path (:class:`TimedPath` or its ``as_dict``): :func:`summary`, then the
    blocks it crosses, each to three levels below ``prefix`` (default: the dotted prefix all
    the names share, which is left out of every name)."""
    paths = [TimedPath.from_dict(p) if isinstance(p, dict) else p for p in paths]
    if prefix is None:
        names = [n for p in paths for n in (p.start, p.end, *p.blocks) if n]
        common = names[0].split(".")[:-1] if names else []
        for name in names:
            parts = name.split(".")[:-1]
            while common and parts[:len(common)] != common:
                common.pop()
        prefix = "".join(f"{part}." for part in common)
    lines = []
    for p in paths:
        blocks = []
        for block in p.blocks:
            block = ".".join(_short(block, prefix).split(".")[:3]) if block else "(top)"
            if not blocks or blocks[-1] != block:
                blocks.append(block)
        lines += [summary(p, prefix), f"    through {' > '.join(blocks)}"]
    return lines


def _short(name, prefix):
    return name[len(prefix):] if prefix and name.startswith(prefix) else name


def _count(n, noun):
    return f"{n} {noun}{'' if n == 1 else 's'}"
