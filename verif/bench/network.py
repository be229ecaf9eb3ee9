"""``tpu-rtl bench network``: every figure of docs/network.md (latency-load curves, the
twisted torus against the regular one, simulation speed), measured on the RTL."""

import math
from pathlib import Path

import numpy as np

from verif.report import plot_curves, write_marked

#: The markers around ``measure_goals``'s part of docs/network.md: it rewrites only what
#: lies between them, and the page's hand-written sections stay as they are.
GOALS_BEGIN, GOALS_END = "<!-- network goals -->", "<!-- /network goals -->"
TITLE = "# ICI network: measurements"

__all__ = ["measure_goals", "command", "PAPER", "compare_routing", "routing_markdown",
           "compare_twist", "twist_markdown", "TWIST_CONFIGS", "TWIST_RATES"]


def _summary(stats):
    """What the document keeps of a run: JSON-able numbers."""
    r = stats.run
    return {"offered": r.offered, "accepted": r.accepted, "latency_mean": r.latency_mean,
            "latency_p99": r.latency_p99, "hops_mean": r.hops_mean,
            "link_utilization": np.asarray(r.link_utilization).tolist(),
            "cycles": stats.cycles, "seconds": stats.seconds}


def _run(summary):
    from sim.network import NetworkRun
    return NetworkRun(*(summary[k] for k in NetworkRun._fields))


def measure_goals(path, *, backend="verilator", seed=1, out=Path("build/network"),
                  twisted=("4x4x8", "4x8x8")):
    """Measure every figure of docs/network.md's generated part (several builds: tens of
    minutes) and write it between the :data:`GOALS_BEGIN` and :data:`GOALS_END` markers of
    ``path`` (``verif.report.write_marked``: a page without them gets them at its end, a
    missing page starts with :data:`TITLE`). Each measurement is kept in ``out/goals.json`` as it
    completes, so an interrupted run resumes where it stopped. ``twisted``: the shapes
    whose regular and twisted tori are compared (each one build; 4x8x8 the largest)."""
    import json
    from golden import topology as topo
    from sim import network
    from verif.progress import ProgressLine
    store = out / "goals.json"
    header = {"seed": seed, "backend": backend}
    results = json.loads(store.read_text()) if store.exists() else {}
    if results.get("header") != header:
        results = {"header": header}
    line = ProgressLine("network goals")

    def measure(key, compute):
        if key not in results:
            line.update(text=key)
            results[key] = compute()
            out.mkdir(parents=True, exist_ok=True)
            store.write_text(json.dumps(results))
        return results[key]

    def checked(stats):
        if stats.problems():
            raise network.NetworkIntegrityError("; ".join(stats.problems()))
        return _summary(stats)

    def config(label, shape, **kwargs):
        def compute():
            topology = topo.torus(shape)
            low = network.run_stats(topology, rate=0.02, cycles=8000, warmup=1000, seed=seed,
                                    backend=backend, **kwargs)
            high = network.run_stats(topology, rate=float(kwargs.get("local_ports", 1)),
                                     cycles=4000, warmup=1000, seed=seed, backend=backend,
                                     **kwargs)
            return {"shape": shape, "zero": checked(low), "sat": checked(high)}
        return label, measure(label, compute), shape, kwargs

    def sweep(label, rates, **kwargs):
        def compute():
            return [checked(network.run_stats(topo.torus("4x4"), rate=rate, cycles=4000,
                                              warmup=1000, seed=seed, backend=backend,
                                              **kwargs)) for rate in rates]
        return measure(label, compute)

    def all_to_all(shape, twist):
        def compute():
            topology = topo.torus(shape, twist=twist)
            stats = network.run_stats(topology, traffic="all_to_all", rate=2.0, packet_flits=4,
                                      message_packets=16, local_ports=2, vcs=2, cycles=6000,
                                      warmup=2000, seed=seed, backend=backend)
            tables = topo.routing_tables(topology)
            return checked(stats) | {
                "bound": topo.all_to_all_bound(topology),
                "bound_tables": topo.all_to_all_bound(topology, tables=tables)}
        return measure(f"{shape} {'twisted' if twist else 'regular'} all-to-all", compute)

    try:
        # Grouped by build: 4x4 with 2 VCs, with 4, 8x8, 4x4x4, then the 3-D all-to-alls.
        rows = [config("4x4, 2 VCs", "4x4", vcs=2),
                config("4x4, 2 VCs, 4-flit packets", "4x4", vcs=2, packet_flits=4)]
        rows += [config(f"4x4, 2 VCs, {t}", "4x4", vcs=2, traffic=t)
                 for t in ("transpose", "bitcomp", "tornado")]
        curve = sweep("4x4 sweep, 2 VCs",
                      [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 1.0], vcs=2)
        rows.insert(1, config("4x4, 4 VCs", "4x4", vcs=4))
        curve4 = sweep("4x4 sweep, 4 VCs", [0.1, 0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 1.0], vcs=4)
        rows += [config("8x8, 2 VCs", "8x8", vcs=2), config("4x4x4, 2 VCs", "4x4x4", vcs=2)]
        twists = [(shape, {twist: all_to_all(shape, twist) for twist in (False, True)})
                  for shape in twisted]
        # Issue 44: the same all-to-all by routing, with the best levers, swept.
        by_routing = [_twist_from_json(measure(
            f"{shape} all-to-all by routing",
            lambda shape=shape: _twist_to_json(compare_twist(
                shape, configs=TWIST_CONFIGS, rates=TWIST_RATES, seed=seed, backend=backend,
                out=out)))) for shape in twisted]
    finally:
        line.close()
    curves = {"2 VCs": [(p["offered"], _Point(_run(p))) for p in curve],
              "4 VCs": [(p["offered"], _Point(_run(p))) for p in curve4]}
    plots = plot_curves(curves, out, "4x4", "uniform")
    speed = {"4x4": rows[0][1]["sat"], "8x8": rows[-2][1]["sat"],
             "4x4x4": rows[-1][1]["sat"]} | {shape: pair[True] for shape, pair in twists}
    path.parent.mkdir(parents=True, exist_ok=True)
    text = _goals_markdown(rows, curve, curve4, twists, speed, plots, seed, backend,
                           by_routing=by_routing)
    write_marked(path, text.rstrip("\n") + "\n", begin=GOALS_BEGIN, end=GOALS_END,
                 title=TITLE)


#: ``compare_twist``'s configurations in ``measure_goals``: each routing with the levers
#: docs/network.md found best for it: 16-flit buffers, and 4 VCs for dimension order (its
#: tables use no more), 8 VCs and an input speed-up of 2 for adaptive routing.
TWIST_CONFIGS = (("dor", 4, 16), ("adaptive", 8, 16, 2))
#: Its offered loads (flits/node/cycle; 2 is the two local ports' limit).
TWIST_RATES = (0.5, 1.0, 1.5, 2.0)


def _twist_to_json(result):
    """``compare_twist``'s result as JSON data (lists for its tuple and boolean keys)."""
    return {"shape": result["shape"], "bound": [result["bound"][False], result["bound"][True]],
            "curves": [[list(config), [pair[False], pair[True]]]
                       for config, pair in result["curves"].items()]}


def _twist_from_json(data):
    """:func:`_twist_to_json` undone."""
    return {"shape": data["shape"], "bound": {False: data["bound"][0], True: data["bound"][1]},
            "curves": {tuple(config): {False: pair[0], True: pair[1]}
                       for config, pair in data["curves"]}}


def _twist_evidence(twists, f):
    """Where the all-to-all runs stand against their links: hops, link utilization (the
    long axis separately) and the fraction of the tables' fluid bound reached."""
    out = ["| shape, torus | hops | links: mean / max utilization | long-axis links: mean | "
           "accepted / fluid bound on the tables' routes |", "|---|---:|---:|---:|---:|"]
    for shape, pair in twists:
        long_axis = int(np.argmax([int(x) for x in shape.split("x")]))
        for twist, run in sorted(pair.items()):
            util = np.asarray(run["link_utilization"])
            out.append(f"| {shape} {'twisted' if twist else 'regular'} | "
                       f"{f(run['hops_mean'], 2)} | {f(util.mean())} / {f(util.max())} | "
                       f"{f(util[:, 2 * long_axis:2 * long_axis + 2].mean())} | "
                       f"{f(run['accepted'] / run['bound_tables'], 2)} |")
    return out


def _goal_summary(rows, twists, f):
    """The issue's goals against the measurements: met, or missed by how much."""
    by_label = {label: row for label, row, *_ in rows}

    def verdict(ok, miss):
        return "met" if ok else f"**missed** by {miss}"
    out = ["## Goals", "", "| goal | target | measured | verdict |", "|---|---|---:|---|"]
    zero = by_label["4x4, 2 VCs"]["zero"]["latency_mean"]
    out.append(f"| zero-load latency, 4x4 uniform, 1-flit, 2 VCs | <= 14 cycles | "
               f"{f(zero, 2)} | {verdict(zero <= 14, f'{zero - 14:.2f} cycles')} |")
    for vcs, goal in ((2, 0.70), (4, 0.85)):
        sat = by_label[f"4x4, {vcs} VCs"]["sat"]["accepted"]
        out.append(f"| saturation throughput, {vcs} VCs | >= {goal:.2f} flits/node/cycle | "
                   f"{f(sat)} | {verdict(sat >= goal, f'{goal - sat:.3f}')} |")
    for shape, pair in twists:
        ratio = pair[True]["accepted"] / pair[False]["accepted"]
        lo, hi = 0.9 * PAPER[shape], 1.1 * PAPER[shape]
        miss = f"{lo - ratio:.2f}x (below the band's {lo:.2f}x)" if ratio < lo else \
            f"{ratio - hi:.2f}x (above the band's {hi:.2f}x)"
        out.append(f"| twisted / regular all-to-all throughput, {shape} | {PAPER[shape]:.2f}x "
                   f"+-10% ({lo:.2f}x to {hi:.2f}x) | {ratio:.2f}x | "
                   f"{verdict(lo <= ratio <= hi, miss)} |")
    return out + [""]


class _Point:
    """A sweep point as ``plot_curves`` reads it."""

    def __init__(self, run):
        self.run = run


PAPER = {"4x4x8": 1.63, "4x8x8": 1.31}


def command(shape, rates, *, cycles, warmup, seed, backend="verilator", twist=False,
            **kwargs):
    """The ``tpu-rtl network`` command line that measures ``rates`` as ``measure_goals``
    does (the same ``sim.network.run_stats`` calls, so the same figures)."""
    words = ["tpu-rtl network --topology", shape] + (["--compare-twist"] if twist else [])
    for name, value in kwargs.items():
        if (name, value) != ("vcs", 2):           # the CLI's default
            words += [f"--{name.replace('_', '-')}", str(value)]
    words += ["--rates", ",".join(f"{r:g}" for r in rates), "--cycles", str(cycles),
              "--warmup", str(warmup), "--seed", str(seed), "--all-points"]
    if backend != "verilator":
        words += ["--backend", backend]
    return " ".join(words)


def _goals_markdown(rows, curve, curve4, twists, speed, plots, seed, backend="verilator",
                    by_routing=()):
    def f(x, digits=3):
        return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) \
            else f"{x:.{digits}f}"
    out = ["Measured by `tpu-rtl network --goals docs/network.md --goals-twisted "
           + ",".join(shape for shape, _ in twists) + "` "
           f"(seed {seed}, Verilator whole runs, on a shared 2-core machine). Every run also "
           "checked every packet: delivered exactly once, in sequence, intact "
           "(`sim.network.NetworkStats.problems()` empty).",
           ""]
    out += _GOALS_INTRO
    out += _goal_summary(rows, twists, f)
    out += ["## Zero-load latency and saturation throughput", "",
            "Zero load: offered 0.02 flits/node/cycle, 8,000 cycles (1,000 warm-up). "
            "Saturation: offered 1.0 (the injection port's limit), 4,000 cycles (1,000 "
            "warm-up); the accepted load is the saturation throughput.", "",
            "| configuration | zero-load latency (mean) | p99 | hops | saturation "
            "(flits/node/cycle) | latency at saturation |",
            "|---|---:|---:|---:|---:|---:|"]
    commands = []
    for label, row, shape, kwargs in rows:
        rate = float(kwargs.get("local_ports", 1))
        commands += [f"- {label}, zero load: `"
                     + command(shape, [0.02], cycles=8000, warmup=1000, seed=seed,
                               backend=backend, **kwargs) + "`",
                     f"- {label}, saturation: `"
                     + command(shape, [rate], cycles=4000, warmup=1000, seed=seed,
                               backend=backend, **kwargs) + "`"]
        low, high = row["zero"], row["sat"]
        out.append(f"| {label} | {f(low['latency_mean'], 2)} | {f(low['latency_p99'], 0)} | "
                   f"{f(low['hops_mean'], 2)} | {f(high['accepted'])} | "
                   f"{f(high['latency_mean'], 1)} |")
    out += ["", "Commands (each prints the same figures in its table):", ""] + commands
    sweeps = (("2 VCs", curve, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 1.0],
               {}),
              ("4 VCs", curve4, [0.1, 0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 1.0], {"vcs": 4}))
    for title, points, rates, kwargs in sweeps:
        out += ["", f"## Latency against load, 4x4 uniform, 1-flit packets, {title}", "",
                "`" + command("4x4", rates, cycles=4000, warmup=1000, seed=seed,
                              backend=backend, **kwargs) + "`", "",
                "| offered | accepted | latency | p99 |", "|---:|---:|---:|---:|"]
        out += [f"| {f(p['offered'])} | {f(p['accepted'])} | {f(p['latency_mean'], 1)} | "
                f"{f(p['latency_p99'], 0)} |" for p in points]
    out += ["", f"Plots: `{plots[0]}` and `{plots[1]}` (written by the same command).", "",
            "## Twisted against regular tori: all-to-all", "",
            "All-to-all, every node sending 16-packet messages of 4-flit packets to every "
            "other node in turn (from a random first one), offered 2 flits/node/cycle: "
            "more than the network carries, so the accepted load is its all-to-all "
            "throughput. Nodes have 2 injection and 2 ejection ports (`local_ports=2`) so "
            "that the network, not the node, is the limit (network only); 2 VCs; 6,000 "
            "cycles (2,000 warm-up). The fluid bounds (`golden.topology.all_to_all_bound`) "
            "assume links of 1 flit/cycle and nothing else: split over all shortest paths, "
            "or along the routing tables' dimension-order routes.", "",
            "| shape | regular (flits/node/cycle) | twisted | ratio | paper | fluid bound "
            "regular / twisted / ratio | fluid bound on the tables' routes |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for shape, pair in twists:
        reg, tw = pair[False], pair[True]
        ratio = tw["accepted"] / reg["accepted"]
        out.append(f"| {shape} | {f(reg['accepted'])} | {f(tw['accepted'])} | "
                   f"**{ratio:.2f}x** | {PAPER[shape]:.2f}x | {f(reg['bound'], 2)} / "
                   f"{f(tw['bound'], 2)} / {tw['bound'] / reg['bound']:.2f}x | "
                   f"{f(reg['bound_tables'], 2)} / {f(tw['bound_tables'], 2)} / "
                   f"{tw['bound_tables'] / reg['bound_tables']:.2f}x |")
    from golden import topology as topo
    measured = {shape for shape, _ in twists}
    for shape in (x for x in PAPER if x not in measured):
        bounds = {}
        for twist in (False, True):
            t = topo.torus(shape, twist=twist)
            bounds[twist] = (topo.all_to_all_bound(t),
                             topo.all_to_all_bound(t, tables=topo.routing_tables(t)))
        out.append(f"| {shape} | not measured | not measured | | {PAPER[shape]:.2f}x | "
                   f"{f(bounds[False][0], 2)} / {f(bounds[True][0], 2)} / "
                   f"{bounds[True][0] / bounds[False][0]:.2f}x | {f(bounds[False][1], 2)} / "
                   f"{f(bounds[True][1], 2)} / {bounds[True][1] / bounds[False][1]:.2f}x |")
    if measured != set(PAPER):
        out += ["", "Not measured on the RTL: " + ", ".join(x for x in PAPER if x not in measured)
                + " (left out with `--goals-twisted`; its fluid bounds are above)."]
    out += [""] + _twist_evidence(twists, f)
    out += ["", "Commands (the table's regular and twisted columns side by side):", ""]
    out += [f"- {shape}: `" + command(shape, [2], cycles=6000, warmup=2000, seed=seed,
                                      backend=backend, twist=True, traffic="all_to_all",
                                      packet_flits=4, message_packets=16, local_ports=2)
            + "`" for shape, _ in twists]
    for result in by_routing:
        out += ["", f"### {result['shape']}: dimension order against adaptive routing "
                "(issue 44)", "",
                "The same all-to-all swept over offered loads of "
                + ", ".join(f"{r:g}" for r in TWIST_RATES) + " flits/node/cycle, "
                + " and ".join(_config_label(c) for c in TWIST_CONFIGS)
                + "; throughput is the peak accepted "
                "load (`verif.bench.network.compare_twist`, plot "
                f"`latency_{result['shape']}.png`).", "", twist_markdown(result).rstrip()]
    out += ["", "## Simulation speed (compiled Verilator whole runs)", "",
            "Cycles of a whole run (configuration, traffic, drain and read-out) per second "
            "of the simulator's own time, on saturated runs (the busiest): 1 local port for "
            "the 2-D and 4x4x4 networks, 2 for the twisted all-to-all ones.", "",
            "The runs are the saturation rows and the twisted all-to-all runs above, with "
            "their commands; `tpu-rtl network` prints each curve's last point's speed.", "",
            "| network | cycles | seconds | cycles/s |", "|---|---:|---:|---:|"]
    for shape, run in speed.items():
        out.append(f"| {shape} | {run['cycles']:,} | {run['seconds']:.2f} | "
                   f"{run['cycles'] / run['seconds']:,.0f} |")
    out += ["", "The machine was shared: other jobs kept its load average at 6 to 8 on its "
            "2 cores while these ran, so the speeds are lower bounds and noisy (a rerun of "
            "the twisted 4x4x8 all-to-all gave 72 to 150 cycles/s). The cost per node and "
            "cycle still grows with the network (16 nodes: about 54,000 cycles/s; 64: 2,000 "
            "to 4,000; 128: about 200), more than the node count explains; the cause (the "
            "top's wide configuration and read-out logic, or Verilator's scheduling of 128 "
            "node instances) is not profiled yet."]
    out += [""] + _GOALS_NOTES
    return "\n".join(out)


_GOALS_INTRO = [
    "## Set-up",
    "",
    "- **Network top** (`hdl.system.NetworkSystem`): per node a router "
    "(`hdl.ici.Router`, pipeline 1), a link pipeline per torus output, and per local "
    "port a traffic generator and a sink. Links inside the torus are wired; the face "
    "links go through one OCS (`hdl.ocs.OpticalCircuitSwitch`) per axis, whose map is "
    "loaded at run time, so a twist or a failed chip changes only streamed-in data.",
    "- **Packets**: flits of 2 words. A 1-flit packet is a `flag_add` (route word + "
    "target word); longer ones are `write`s. The target word carries the creation cycle "
    "and a per-destination sequence tag; data words are a checkable function of source, "
    "destination, tag and index.",
    "- **Traffic**: seeded Bernoulli creation into a 64-packet source queue; latency is "
    "from creation to the ejection of the tail, so source queueing is included.",
    "- **Configuration** of the issue's goals: 4x4 torus, uniform random traffic, "
    "1-flit packets, 8-flit buffers per VC, 2-cycle links, 1-cycle injection and "
    "ejection. With 4 VCs the routing tables split destinations into two VC classes "
    "(`golden.routing`), so all 4 VCs carry traffic.",
    "",
]


_GOALS_NOTES = [
    "## Notes",
    "",
    "- **1-flit packets.** `golden.ici`'s shortest packet is 2 words (route word and target "
    "word), so network runs use 2-word flits (`hdl.system.layouts.FLIT_WORDS`): a 1-flit "
    "packet is a `flag_add`, whose target word carries the time stamp (24 bits: latencies "
    "are measured modulo 2^24 cycles) and the tag. No opcode was added to `golden.ici`.",
    "- **Latency and p99.** Latency runs from the cycle a packet is created (a Bernoulli "
    "success, before its source queue) to the cycle its tail is ejected, for packets "
    "ejected in the measurement window. The sinks' histogram has one bin per cycle below "
    "128 cycles and 8 bins per octave above, so p99 is exact below 128 cycles and, above, "
    "the upper edge of its bin (at most 12.5% high).",
    "- **Saturation** is the accepted load at an offered load of 1 flit/node/cycle, the "
    "injection port's limit: each source queue (64 packets) then overflows, and the "
    "packets created while it is full are counted and not sent, so the latency at "
    "saturation is bounded by the queue, not by the run's length.",
    "- **4 VCs.** `golden.routing` gives 4-VC tables two classes: destinations of even "
    "coordinate sum use VCs 0-1, odd ones VCs 2-3 (each class dimension order with its "
    "own dateline VC). The deadlock proof covers both; the router's table entry names "
    "each class's first VC. Without the classes, dimension-order tables with datelines "
    "use VCs 0-1 only, and VCs 2-3 would sit idle: 4 VCs could not beat 2. With them, "
    "the two classes' packets wait in separate input buffers, so a packet blocked at the "
    "head of one buffer no longer holds up a packet of the other class behind it.",
    "- **Network only, all-to-all.** With one injection port a node offers at most 1 "
    "flit/cycle, while the twisted 4x4x8 torus carries up to 1.73 (fluid bound): the "
    "comparison would measure the port, not the network. The routers therefore have 2 "
    "local ports (`hdl.ici.Router(local_ports=2)`); a packet ejects on the port its "
    "arrival input is mapped to, so each route's packets keep their order.",
    "- **Why the twisted/regular ratio falls short of the paper's.** The paper's ratio, "
    "like the fluid bounds, compares what the links can carry. Both RTL tori stay far "
    "below that (the evidence table: about 40% of the regular torus's bound, 30% of the "
    "twisted one's), with the links mostly idle (mean utilization about 0.25, the busiest "
    "link about 0.8): the limit is in the routers, not the links. The twist does what it "
    "should where it acts (fewer hops, lighter long-axis links), but that relieves links "
    "that were not the bottleneck. The routers' limits are head-of-line blocking: routing "
    "is deterministic and the dateline VC classes leave each packet one VC per hop, each "
    "injection port is one FIFO (a blocked packet stalls every packet its generator "
    "queued behind it), and with wormhole switching a blocked 4-flit packet holds "
    "buffers on several routers. Nor is it the all-to-all schedule: on the same 4x4x8 "
    "build, every node starting at its successor (each step a shift permutation while the "
    "nodes keep pace) instead of a random node gave 0.418 and 0.440 "
    "flits/node/cycle, 1.05x (a one-off experiment, seed 1, by replacing "
    "`sim.network._node_settings`; not a CLI option). "
    "Reaching the links' bound (and so the paper's ratio) "
    "needs adaptive or multi-VC-choice routing and VC'd injection; not attempted here.",
    "",
]


def compare_routing(shape="4x4", *, rates=(0.02, 0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0),
                    configs=(("dor", 2), ("dor", 3), ("adaptive", 3)), traffic="uniform",
                    packet_flits=1, local_ports=1, cycles=4000, warmup=1000, seed=1,
                    backend="verilator", progress=None):
    """Issue 44's side by side: for each ``(routing, vcs)`` of ``configs``, one run per
    offered rate on a regular torus of ``shape``; every run's integrity checked
    (``NetworkStats.problems()`` must be empty). Returns ``{(routing, vcs): [summary
    per rate]}`` (``_summary``'s numbers); :func:`routing_markdown` tabulates it."""
    from sim.network import NetworkIntegrityError, run_stats
    out = {}
    for routing, vcs in configs:
        curve = []
        for rate in rates:
            stats = run_stats(shape, traffic=traffic, rate=rate, packet_flits=packet_flits,
                              vcs=vcs, cycles=cycles, warmup=warmup, seed=seed,
                              backend=backend, local_ports=local_ports, routing=routing)
            if stats.problems():
                raise NetworkIntegrityError(f"{routing}, {vcs} VCs, rate {rate}: "
                                            + "; ".join(stats.problems()))
            curve.append(_summary(stats))
            if progress is not None:
                progress(f"{routing} vcs={vcs} rate {rate}: accepted "
                         f"{stats.run.accepted:.3f}, latency {stats.run.latency_mean:.1f}")
        out[routing, vcs] = curve
    return out


def routing_markdown(results):
    """The table of :func:`compare_routing`: offered load, then per configuration the
    accepted load and the mean and p99 latency; and the peak accepted load of each."""
    keys = list(results)
    head = "| offered | " + " | ".join(f"{r} {v} VCs: accepted / latency / p99"
                                       for r, v in keys) + " |"
    lines = [head, "|---:|" + "---:|" * len(keys)]
    for k in range(len(results[keys[0]])):
        cells = [f"{results[keys[0]][k]['offered']:.3f}"]
        for key in keys:
            p = results[key][k]
            cells.append(f"{p['accepted']:.3f} / {p['latency_mean']:.1f} / "
                         f"{p['latency_p99']:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    peak = ", ".join(f"{r} {v} VCs {max(p['accepted'] for p in results[r, v]):.3f}"
                     for r, v in keys)
    return "\n".join(lines) + f"\n\nPeak accepted load: {peak}.\n"


def _config_label(config):
    routing, vcs, *more = config
    return (f"{routing}, {vcs} VCs" + (f", {more[0]}-flit buffers" if more else "")
            + (f", speed-up {more[1]}" if len(more) > 1 else ""))


def compare_twist(shape, *, configs=(("dor", 2), ("adaptive", 3)), rates=(0.5, 1.0, 1.5, 2.0),
                  cycles=6000, warmup=2000, seed=1, backend="verilator", buffer_flits=8,
                  out=None, progress=None):
    """Issue 44's twist figures: for each ``(routing, vcs)`` of ``configs`` (or ``(routing,
    vcs, buffer_flits)``, which overrides ``buffer_flits`` for it, or ``(routing, vcs,
    buffer_flits, speedup)``, which also gives the routers' input speed-up) and each torus
    of ``shape`` (regular, then twisted), the all-to-all of "Twisted against regular tori"
    (4-flit packets, 16-packet messages, 2 local ports: network only) at each offered
    rate of ``rates``, every run's integrity checked. Throughput is the peak accepted load
    over the rates. Returns ``{"shape", "bound": {twist: fluid bound}, "curves":
    {(routing, vcs): {twist: [summary per rate]}}}``; :func:`twist_markdown` tabulates it.
    With ``out``, also writes the latency-load plot ``latency_<shape>.png`` there (one
    curve per routing and torus). Each configuration is one build per routing: tens of
    minutes for a 4x4x8."""
    from golden import topology as topo
    from sim.network import NetworkIntegrityError, run_stats
    bound = {twist: topo.all_to_all_bound(topo.torus(shape, twist=twist))
             for twist in (False, True)}
    curves = {}
    for config in configs:
        routing, vcs, *more = config
        buffers = more[0] if more else buffer_flits
        speedup = more[1] if len(more) > 1 else 1
        for twist in (False, True):
            curve = []
            for rate in rates:
                stats = run_stats(topo.torus(shape, twist=twist), traffic="all_to_all",
                                  rate=rate, packet_flits=4, message_packets=16, local_ports=2,
                                  vcs=vcs, buffer_flits=buffers, cycles=cycles,
                                  warmup=warmup, seed=seed, backend=backend, routing=routing,
                                  speedup=speedup)
                if stats.problems():
                    raise NetworkIntegrityError(
                        f"{shape} {'twisted' if twist else 'regular'}, {_config_label(config)}, "
                        f"rate {rate}: " + "; ".join(stats.problems()))
                curve.append(_summary(stats))
                if progress is not None:
                    progress(f"{shape} {'twisted' if twist else 'regular'} "
                             f"{_config_label(config)} rate {rate}: accepted "
                             f"{stats.run.accepted:.3f}")
            curves.setdefault(tuple(config), {})[twist] = curve
    result = {"shape": shape, "bound": bound, "curves": curves}
    if out is not None:
        plot_curves({f"{_config_label(c)}, {'twisted' if t else 'regular'}":
                     [(p["offered"], _Point(_run(p))) for p in curve]
                     for c, pair in curves.items() for t, curve in pair.items()},
                    Path(out), shape, "all-to-all")
    return result


def twist_markdown(result):
    """The table of :func:`compare_twist`: per configuration the peak accepted load on
    the regular and the twisted torus, the twist's gain, each as a fraction of its fluid
    bound, beside the fluid bounds' gain and the paper's (``PAPER``, where known)."""
    shape, bound = result["shape"], result["bound"]
    fluid = bound[True] / bound[False]
    paper = f"{PAPER[shape]:.2f}x" if shape in PAPER else "not given"
    lines = ["| routing | regular: peak accepted (flits/node/cycle) | twisted | twist gain | "
             "regular / twisted, of the fluid bound | fluid bounds regular / twisted / gain | "
             "paper's gain |", "|---|---:|---:|---:|---:|---:|---:|"]
    for config, pair in result["curves"].items():
        peak = {t: max(p["accepted"] for p in curve) for t, curve in pair.items()}
        lines.append(f"| {_config_label(config)} | {peak[False]:.3f} | {peak[True]:.3f} | "
                     f"{peak[True] / peak[False]:.2f}x | {peak[False] / bound[False]:.2f} / "
                     f"{peak[True] / bound[True]:.2f} | {bound[False]:.2f} / {bound[True]:.2f} "
                     f"/ {fluid:.2f}x | {paper} |")
    return "\n".join(lines) + "\n"
