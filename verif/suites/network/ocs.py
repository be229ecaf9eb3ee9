"""The ``network`` regression's OCS case: reconfiguration under traffic, on the OCS alone.

The network top configures its OCS before traffic starts, so switching under traffic is
checked here, around an :class:`hdl.ocs.OpticalCircuitSwitch` with a credit-based
wormhole sender and a receiver at every port (the model of :mod:`.ocs_ports`; the
OCS is small, so the Amaranth simulator runs it with the model acting every cycle,
whatever the regression's simulator). A seed draws the OCS (10 or 12 ports: not a power
of two, so that out-of-range ports and targets can be encoded), its dark cycles, a
starting map, and a shuffled deck of commits made while traffic flows:

* ``switch``: a new random map; it must be switched in (``ok``);
* ``light``: two dark ports lit (the affected links carry nothing, so they drain at once);
* ``stuck``: a new map while the receiver behind an affected link has stopped, so that
  link cannot drain; it must be refused (``timeout``) and the old map kept;
* ``self_loop``, ``asymmetric``, ``target_range``, ``port_range``: a map the OCS must
  refuse with that status before draining anything.

Checked, every cycle: every flit sent into port i comes out of the partner of i in the
map in force, in the same cycle, and nowhere else; every credit likewise; no receive
buffer overflows. At the end: every flit delivered exactly once, each commit's status as
the deck says, and the OCS's ``reconfigs``, ``refused`` and ``violations`` counters.
The statuses and the drains are sampled into ``network.ocs_commit`` and
``network.ocs_drain`` (:mod:`.coverage`).
"""

import numpy as np
from amaranth.sim import Simulator

from hdl.ocs import STATUSES, OpticalCircuitSwitch, config_beats

from .ocs_ports import OcsCheckError, Routers, random_map, send_beats

__all__ = ["EVENTS", "plan", "run_case"]

#: The commits of a seed, shuffled.
EVENTS = ("switch", "switch", "light", "stuck", "self_loop", "asymmetric", "target_range",
          "port_range")
BUFFER = 3
MAX_LEN = 4
DRAIN_TIMEOUT = 120


def plan(seed):
    """The OCS case of ``seed``: (ports, reconfig_cycles, start map, events, rng)."""
    rng = np.random.default_rng([seed, 0x0C5])
    ports = int(rng.choice([10, 12]))
    events = [EVENTS[k] for k in rng.permutation(len(EVENTS))]
    return ports, int(rng.integers(0, 6)), random_map(rng, ports), events, rng


def _bad_map(kind, current, rng, ports):
    """Beats of a request the OCS must refuse with status ``kind``, over ``current``."""
    m = list(current)
    i = int(rng.integers(ports))
    if kind == "self_loop":
        if m[i] >= 0:
            m[m[i]] = -1
        m[i] = i
    elif kind == "asymmetric":
        j = int((i + 1 + rng.integers(ports - 1)) % ports)
        m[i] = j                        # j keeps (or lacks) its own partner, never i
        if current[j] == i:
            m[j] = -1
    elif kind == "target_range":
        if m[i] >= 0:                   # else the old partner, if lower, is asymmetric first
            m[m[i]] = -1
        m[i] = int(rng.integers(ports, 1 << (ports - 1).bit_length()))
    else:                               # port_range: an entry beat beyond the ports
        port = int(rng.integers(ports, 1 << (ports - 1).bit_length()))
        return [{"commit": 0, "port": port, "lit": 1, "target": 0},
                {"commit": 1, "port": 0, "lit": 0, "target": 0}]
    return config_beats(m, ports=ports, current=current)


def run_case(seed, sample=None):
    """Run the OCS case of ``seed``; returns its record (``checked`` commits and flits,
    ``mismatches``, ``first_mismatch``, ``cycles``). ``sample(item, value)`` gets the
    coverage samples: ``("commit", status)`` and ``("drain", "busy" or "idle")``."""
    ports, reconfig_cycles, start, events, rng = plan(seed)
    ocs = OpticalCircuitSwitch(ports=ports, payload_width=20, credit_width=2,
                               reconfig_cycles=reconfig_cycles, drain_timeout=DRAIN_TIMEOUT)
    ends = Routers(ocs, rng, buffer=BUFFER, max_len=MAX_LEN)
    results = []                     # (event, expected status, status got)
    state = {}

    async def commit(ctx, beats, new=None):
        ends.pending = new
        await send_beats(ctx, ocs, beats)
        start = ends.cycle
        await ctx.tick().until(~ocs.busy)
        await ctx.tick()             # the model takes the new map as quiesce falls
        if ends.pending is not None:  # refused: the old map stays
            ends.pending = None
        # The drain: did an affected (quiesced) port carry flits after quiesce rose?
        busy = any(seen["quiesce"] & sum(1 << p for p in seen["sent"])
                   for seen in ends.log[start:])
        return STATUSES[ctx.get(ocs.status.code)], busy

    async def control(ctx):
        current = start
        status, _ = await commit(ctx, config_beats(start, ports=ports), start)
        results.append(("start", "ok", status))
        for event in events:
            await ctx.tick().repeat(int(rng.integers(10, 60)))
            if event in ("switch", "stuck", "light"):
                new = _new_map(event, current, rng, ports)
                if event == "stuck":
                    stuck = _stuck_port(current, new)
                    ends.stalled.add(stuck)
                    while not any(ends.buffers[stuck]):
                        await ctx.tick()
                status, busy = await commit(ctx, config_beats(new, ports=ports,
                                                              current=current), new)
                ends.stalled.clear()
                want = "timeout" if event == "stuck" else "ok"
                if status == "ok":
                    current = new
                if sample:
                    sample("drain", "busy" if busy else "idle")
            else:
                want = event
                status, _ = await commit(ctx, _bad_map(event, current, rng, ports))
            results.append((event, want, status))
            if sample:
                sample("commit", status)
        await ctx.tick().repeat(40)
        ends.stop = True
        while not ends.empty():
            await ctx.tick()
        state.update({name: ctx.get(getattr(ocs, name))
                      for name in ("reconfigs", "refused", "violations")})

    sim = Simulator(ends.top)
    sim.add_clock(1e-8)
    sim.add_testbench(ends.run)
    sim.add_testbench(control)
    problems = []
    try:
        sim.run()
    except OcsCheckError as error:
        problems.append(str(error))
    problems += [f"{event}: status {got}, expected {want}" for event, want, got in results
                 if got != want]
    if not problems:
        lost = ends.lost()
        if lost:
            problems.append(f"{len(lost)} flits lost or misdelivered, the first {lost[:5]}")
        ok = sum(want == "ok" for _, want, _ in results)
        want = {"reconfigs": ok, "refused": len(results) - ok, "violations": 0}
        if state != want:
            problems.append(f"OCS counters {state}, expected {want}")
    return {"case": "ocs", "checked": len(results) + len(ends.sent),
            "mismatches": len(problems),
            "first_mismatch": f"ocs seed {seed} ({ports} ports, {reconfig_cycles} dark "
                              f"cycles, events {events}): {problems[0]}" if problems else None,
            "cycles": ends.cycle, "flits": len(ends.sent), "commits": len(results)}


def _new_map(event, current, rng, ports):
    if event == "light":
        dark = [i for i in range(ports) if current[i] < 0]
        if len(dark) >= 2:
            a, b = rng.choice(dark, 2, replace=False)
            new = list(current)
            new[a], new[b] = int(b), int(a)
            return new
    while True:
        new = random_map(rng, ports)
        if new != current and (event != "stuck" or _stuck_port(current, new) is not None):
            return new


def _stuck_port(current, new):
    """A receiver to stall so that an affected link cannot drain: a port whose entry
    changes and whose old partner sends to it (None if there is none)."""
    for i in range(len(current)):
        if current[i] != new[i] and current[i] >= 0:
            return i
    return None
