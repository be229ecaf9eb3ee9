"""Where each router output's cycles go, read from a network run's waveform (VCD).

A saturated network leaves its busiest links idle part of the time; the question is why.
Every cycle of the measurement window, each output of each router
(``hdl.ici.Allocator``, by its signal names) is given one cause, the first that holds:

- ``busy``: it sent a flit (``send``);
- ``lost_at_input``: it sent nothing, but a head whose request named it was eligible
  (``eligible{i}_{v}``), and that head's input picked another of its VCs: the separable
  allocator's input-first pick, not the network, left the output idle;
- ``passed_over``: an adaptive header that did not move this cycle (``grant__{i}``) was
  eligible for another output, while this one, one of its minimal ports, had an
  adaptive VC (``escape_vcs`` and up) free with the credits it needs
  (``free{o}_{w}``, ``credits{o}_{w}``, ``need{i}_{v}``): the choice of output, made
  before the switch, sent it to an output it then did not get;
- ``no_room``: a valid head wanted it (its request, or for an adaptive header any of its
  minimal ports) and was not eligible: no output VC with room for it downstream;
- ``no_demand``: no head in the router wanted it.

The counts are per router and output, summed over the window's cycles; :func:`table`
averages them over the routers, output by output. Each input is counted too: the cycles
it had a valid head in some VC, an eligible one, and one that sent (``INPUT_STATES``),
which shows an injection input held back by the injection rule.

The reader takes the values each signal held just before each rising edge of the
allocator's ``clk``. It is written for the compiled path's VCDs (``tpu-rtl network
--waves``, Verilator), where every router's allocator is a scope named ``allocator``;
an FST needs converting to VCD first.
"""

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from golden.topology import PORT_NAMES
from hdl.ici.layouts import MAX_VCS
from hdl.testbench.node import ADAPTIVE_ESCAPE_VCS

__all__ = ["CAUSES", "INPUT_STATES", "Profile", "classify", "read_profile", "table"]

#: The causes, in the order they are tested.
CAUSES = ("busy", "lost_at_input", "passed_over", "no_room", "no_demand")

#: What :func:`read_profile` counts of each input, cycle by cycle.
INPUT_STATES = ("head", "eligible", "sent")

# The allocator's signals the causes are read from (names as Amaranth's Verilog has them).
_HEAD = re.compile(r"heads__(\d+)__(\d+)\.(valid|head|adapt|minimal|port)")
_REQUEST = re.compile(r"request(\d+)_(\d+)\.port")
_ELIGIBLE = re.compile(r"eligible(\d+)_(\d+)")
_PASSED = re.compile(r"(free|credits)\d+_\d+|need\d+_\d+|grant__\d+")


@dataclass(frozen=True)
class Profile:
    """:func:`read_profile`'s counts: ``outputs[(router scope, output)]`` and
    ``inputs[(router scope, input)]``, each a ``Counter`` of cycles by cause
    (:data:`CAUSES`) or state (:data:`INPUT_STATES`), over ``cycles`` cycles."""
    outputs: dict
    inputs: dict
    cycles: int


def _input_states(values):
    """``{input: the set of INPUT_STATES that hold this cycle}`` from the allocator's
    values (names as :func:`classify` reads them)."""
    states = defaultdict(set)
    for name, value in values.items():
        if (match := _HEAD.fullmatch(name)) and match[3] == "valid":
            i, v = int(match[1]), int(match[2])
            held = states.setdefault(i, set())     # an input counts with no head too
            if value:
                held.add("head")
                if values.get(f"eligible{i}_{v}"):
                    held.add("eligible")
        elif name.startswith("grant__") and value:
            states[int(name[7:])].add("sent")
    return states


def classify(values, *, n_out, escape_vcs=ADAPTIVE_ESCAPE_VCS):
    """The cause (:data:`CAUSES`) of each of the ``n_out`` outputs in one cycle.

    ``values`` maps the allocator's signal names to their values: ``send`` (bit o:
    output o sent), and per input ``i`` and VC ``v`` ``heads__i__v.valid``, ``.head``,
    ``.port``, and for adaptive heads ``.adapt`` and ``.minimal``, ``eligible{i}_{v}``,
    and with adaptive or cut-through allocation ``request{i}_{v}.port`` (the output the
    head asks for; otherwise its ``port``); for ``passed_over`` also ``grant__i``,
    ``need{i}_{v}``, and per torus output ``o`` and VC ``w`` ``free{o}_{w}`` and
    ``credits{o}_{w}``. Missing names read as 0. ``escape_vcs``: the VCs below it are
    escape VCs, which an adaptive choice does not take."""
    heads = defaultdict(dict)
    for name, value in values.items():
        if match := _HEAD.fullmatch(name):
            heads[int(match[1]), int(match[2])][match[3]] = value
    eligible_for, wanted, passed = set(), set(), set()
    for (i, v), head in heads.items():
        if not head.get("valid"):
            continue
        port = values.get(f"request{i}_{v}.port", head.get("port", 0))
        adaptive = head.get("head") and head.get("adapt")
        minimal = head.get("minimal", 0) if adaptive else 0
        if values.get(f"eligible{i}_{v}"):
            eligible_for.add(port)
            if not values.get(f"grant__{i}", 0) >> v & 1:
                need = values.get(f"need{i}_{v}", 0)
                passed.update(
                    o for o in range(n_out) if minimal >> o & 1 and o != port and any(
                        values.get(f"free{o}_{w}") and values.get(f"credits{o}_{w}", 0) >= need
                        for w in range(escape_vcs, MAX_VCS)))
            continue
        wanted.add(port)
        wanted.update(o for o in range(n_out) if minimal >> o & 1)
    send = values.get("send", 0)
    causes = []
    for o in range(n_out):
        if send >> o & 1:
            causes.append("busy")
        elif o in eligible_for:
            causes.append("lost_at_input")
        elif o in passed:
            causes.append("passed_over")
        elif o in wanted:
            causes.append("no_room")
        else:
            causes.append("no_demand")
    return causes


def _wanted(name):
    return (name in ("send", "clk") or _HEAD.fullmatch(name) or _REQUEST.fullmatch(name)
            or _ELIGIBLE.fullmatch(name) or _PASSED.fullmatch(name))


def _header(lines):
    """Parse the VCD header: (``{id: [(allocator scope, name)]}``, ``{scope: n_out}``,
    the first ``window`` variable's id or None)."""
    scope, ids, widths, window = [], defaultdict(list), {}, None
    for line in lines:
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "$enddefinitions":
            return ids, widths, window
        if parts[0] == "$scope":
            scope.append(parts[2])
        elif parts[0] == "$upscope":
            scope.pop()
        elif parts[0] == "$var":
            width, ident, name = int(parts[2]), parts[3], parts[4]
            if scope and scope[-1] == "allocator" and _wanted(name):
                owner = ".".join(scope[:-1])
                ids[ident].append((owner, name))
                if name == "send":
                    widths[owner] = width
            elif name == "window" and window is None:
                window = ident
    raise ValueError("the waveform has no $enddefinitions: not a VCD file")


def read_profile(path, *, window=True, escape_vcs=ADAPTIVE_ESCAPE_VCS, progress=None):
    """Count the causes of every allocator output in the VCD at ``path``.

    Parameters
    ----------
    path : str or Path
        A VCD of a run whose routers' allocators are in it (``tpu-rtl network --waves``).
    window : bool
        Count only the cycles where the first ``window`` signal of the VCD is high (the
        network testbench's measurement window); False counts every cycle.
    escape_vcs : int
        The routers' escape VCs (:func:`classify`; default the network testbench's,
        ``hdl.testbench.node.ADAPTIVE_ESCAPE_VCS``).
    progress : callable, optional
        Called as ``progress(megabytes read)`` every 16 MB or so (a network's VCD runs to
        gigabytes).

    Returns
    -------
    Profile

    Raises
    ------
    ValueError
        Not a VCD (no ``$enddefinitions``), no allocator in the waveform, or ``window``
        asked for and no ``window`` signal.
    """
    path = Path(path)
    with path.open() as f:
        ids, widths, window_id = _header(f)
        if not widths:
            raise ValueError(f"{path}: no router allocator (a 'send' signal in a scope named "
                             f"'allocator') in the waveform")
        if window and window_id is None:
            raise ValueError(f"{path}: no 'window' signal to take the measured cycles from; "
                             f"count every cycle instead")
        state = {owner: {} for owner in widths}
        clocks = {ident for ident, uses in ids.items() if any(n == "clk" for _, n in uses)}
        counts, inputs, cycles = defaultdict(Counter), defaultdict(Counter), 0
        open_window = not window
        pending, rising = [], False

        def sample():
            for owner, n_out in widths.items():
                for o, cause in enumerate(classify(state[owner], n_out=n_out,
                                                   escape_vcs=escape_vcs)):
                    counts[owner, o][cause] += 1
                for i, held in _input_states(state[owner]).items():
                    inputs[owner, i].update(held)

        read, reported = 0, 0
        for line in f:
            read += len(line)
            if progress is not None and read - reported >= 1 << 24:
                reported = read
                progress(read >> 20)
            if line[0] == "#":
                # Everything before this time held through the cycle that ends at a
                # rising edge in this time step: sample it, then apply the step.
                if rising and open_window:
                    sample()
                    cycles += 1
                for ident, value in pending:
                    if ident == window_id:
                        open_window = bool(value) or not window
                    for owner, name in ids.get(ident, ()):
                        state[owner][name] = value
                pending, rising = [], False
                continue
            if line[0] in "bB":
                text, ident = line[1:].split()
                value = int(re.sub("[xzXZ]", "0", text), 2)
            elif line[0] in "01xzXZ":
                ident, value = line[1:].strip(), int(line[0] == "1")
            else:
                continue
            if ident in clocks and value:
                rising = True
            if ident in ids or ident == window_id:
                pending.append((ident, value))
        if rising and open_window:          # the last time step's edge
            sample()
            cycles += 1
    return Profile(dict(counts), dict(inputs), cycles)


def table(profile, *, torus_ports=None):
    """Markdown tables of a :class:`Profile`: per output, the share of its cycles of each
    cause, then per input the share of cycles in each state, averaged over the routers.
    Outputs and inputs below ``torus_ports`` are named by their port (``+x``, ...), the
    rest ``eject j`` and ``inject j``; None names them all by number."""
    def name(k, local):
        if torus_ports is None:
            return str(k)
        return PORT_NAMES[k] if k < torus_ports else f"{local} {k - torus_ports}"

    def rows(counts, columns, local, cycles_of):
        merged = defaultdict(Counter)
        for (_, k), counter in counts.items():
            merged[k].update(counter)
        return [f"| {name(k, local)} | " + " | ".join(
                    f"{merged[k][c] / max(1, cycles_of(merged[k], k)):.3f}" for c in columns)
                + " |" for k in sorted(merged)]

    routers = Counter(k for _, k in profile.inputs)
    lines = ["| output | " + " | ".join(CAUSES) + " |", "|---|" + "---:|" * len(CAUSES)]
    lines += rows(profile.outputs, CAUSES, "eject", lambda c, k: sum(c.values()))
    lines += ["", "| input | " + " | ".join(INPUT_STATES) + " |",
              "|---|" + "---:|" * len(INPUT_STATES)]
    lines += rows(profile.inputs, INPUT_STATES, "inject",
                  lambda c, k: profile.cycles * routers[k])
    return "\n".join(lines)
