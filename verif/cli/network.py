"""``tpu-rtl network``: latency-load curves of the ICI network RTL, plots, and the goals of
docs/network.md.

::

    tpu-rtl network --topology 4x4                    # uniform traffic, a load sweep
    tpu-rtl network --topology 4x4x8 --compare-twist --traffic all_to_all --local-ports 2
    tpu-rtl network --goals docs/network.md           # every measurement of the doc
    tpu-rtl network --topology 4x4 --link-down 5:+y@2000   # a link taken down mid-run
    tpu-rtl network --topology 4x8 --rates 2 --traffic all_to_all --local-ports 2 \
        --routing adaptive --vcs 4 --packet-flits 4 --buffer-flits 16 \
        --waves build/network/a2a.vcd --router-profile    # why the links idle

A sweep prints one table row per load point (side by side when ``--compare-twist`` sets
the regular and the twisted torus apart), then writes two PNG plots under ``--out`` (default
``build/network``): latency against offered load, and the per-link utilization of the
highest load point as a heat map. Progress goes to stderr.

``--waves FILE`` (.vcd or .fst) records one load point's run; ``--router-profile`` then
reads that VCD and prints, per router output, the share of the measured cycles it sent
a flit, lost its request at an input's pick, was passed over by an adaptive choice, had
no room downstream, or had no request, and per input the cycles it had a head, an
eligible one, and sent (``verif.bench.router_profile``).
"""

from pathlib import Path

from verif.cli.common import add_fail, check_outputs, natural, positive
from verif.report import latency_table, link_down_report, plot_curves

__all__ = ["add_parser", "cmd_network", "parse_link_down"]


def parse_link_down(text):
    """``CHIP:PORT@CYCLE`` (PORT ``+x``, ``-y``, ... or its number) as ``sim.network``'s
    ``link_down`` ``(chip, port, cycle)``; ValueError with the expected form otherwise."""
    from golden.topology import PORT_NAMES
    form = f"--link-down takes CHIP:PORT@CYCLE, e.g. 5:+y@2000, not {text!r}"
    try:
        where, cycle = text.split("@")
        chip, port = where.split(":")
        port = PORT_NAMES.index(port) if port in PORT_NAMES else int(port)
        return int(chip), port, int(cycle)
    except ValueError:
        raise ValueError(form) from None


def add_parser(subparsers, help):
    """Add ``network`` to the ``tpu-rtl`` subcommands."""
    p = subparsers.add_parser(
        "network", help=help,
        description="Run a network of routers, links, traffic generators and sinks "
                    "(hdl.testbench) at increasing offered load and print the latency-load "
                    "table; write latency and link-utilization plots (PNG) under --out. "
                    "--compare-twist sets the regular and twisted torus of the shape side by "
                    "side. --goals measures every figure of docs/network.md instead.")
    p.add_argument("--topology", default="4x4", metavar="SHAPE",
                   help="torus shape, e.g. 4x4, 8x8, 4x4x8 (default 4x4)")
    p.add_argument("--twist", action="store_true",
                   help="the twisted torus of SHAPE (k x k x 2k or k x 2k x 2k), as in "
                        "tpu-rtl system")
    p.add_argument("--compare-twist", action="store_true",
                   help="the regular and the twisted torus of SHAPE, side by side")
    p.add_argument("--mesh", action="store_true", help="no wraparound links")
    add_fail(p)
    p.add_argument("--traffic", default="uniform",
                   help="uniform, transpose, bitcomp, tornado, neighbor or all_to_all")
    p.add_argument("--rates", metavar="R,R,...",
                   help="offered loads in flits/node/cycle (default 0.1, 0.2, ... up to "
                        "--local-ports)")
    p.add_argument("--packet-flits", type=positive, default=1, help="flits per packet (default 1)")
    p.add_argument("--message-packets", type=positive, default=8,
                   help="packets per all-to-all message (default 8)")
    p.add_argument("--vcs", type=positive, default=2,
                   help="virtual channels, 2 to 8 (default 2; adaptive routing needs 3)")
    p.add_argument("--routing", choices=("dor", "adaptive"), default="dor",
                   help="dimension order, or minimal adaptive over escape VCs with "
                        "cut-through (default dor)")
    p.add_argument("--switching", choices=("wormhole", "cut_through"),
                   help="with --routing dor: wormhole (the default) or virtual cut-through "
                        "(a packet moves only with room for all of it); adaptive routing is "
                        "always cut-through")
    p.add_argument("--speedup", type=positive, default=1, metavar="K",
                   help="routers' input speed-up: each input sends up to K flits a cycle, "
                        "of K VC groups, 1 to --vcs (default 1)")
    p.add_argument("--injection-queues", action="store_true",
                   help="with --routing dor: a queue per direction at each injection port, "
                        "so a blocked direction does not stall the packets behind it for "
                        "others (adaptive routing always has them)")
    p.add_argument("--escape-bias", type=natural, metavar="CREDITS",
                   help="with --routing adaptive: credits the dimension-order port is "
                        "favoured by (default one buffer, --buffer-flits)")
    p.add_argument("--buffer-flits", type=positive, default=8, help="flits per VC (default 8)")
    p.add_argument("--link-latency", type=positive, default=2, help="cycles (default 2)")
    p.add_argument("--local-ports", type=positive, default=1,
                   help="injection and ejection ports per node (default 1)")
    p.add_argument("--cycles", type=positive, default=4000, help="cycles per point (default 4000)")
    p.add_argument("--warmup", type=natural, default=1000,
                   help="unmeasured cycles at the start of each point (default 1000)")
    p.add_argument("--seed", type=natural, default=0, help="seed of the traffic (default 0)")
    p.add_argument("--backend", choices=("verilator", "amaranth", "icarus"),
                   default="verilator", help="simulator (default verilator)")
    p.add_argument("--out", default="build/network", metavar="DIR",
                   help="where the plots go (default build/network)")
    p.add_argument("--link-down", metavar="CHIP:PORT@CYCLE",
                   help="take the link out of PORT (+x, -x, +y, ...) of CHIP down, both "
                        "ways, at CYCLE of every run; the packets routed over it are "
                        "given up and counted as undeliverable")
    p.add_argument("--all-points", action="store_true",
                   help="do not stop the sweep at saturation")
    p.add_argument("--waves", metavar="FILE",
                   help="write a waveform (.vcd or .fst) of the run: one load point, so "
                        "one rate in --rates and no --compare-twist")
    p.add_argument("--router-profile", action="store_true",
                   help="after the run, print per router output the share of the measured "
                        "cycles it was busy, lost its request at an input's pick, was passed "
                        "over by an adaptive choice, had no room downstream or had no "
                        "request (and per input: a head, an eligible one, sent), read from "
                        "--waves FILE.vcd")
    p.add_argument("--goals", metavar="FILE.md",
                   help="measure the goals of docs/network.md and write them into FILE.md "
                        "between its <!-- network goals --> markers (the rest of the page "
                        "stays; a page without them gets them at its end)")
    p.add_argument("--goals-twisted", default="4x4x8,4x8x8", metavar="SHAPES",
                   help="with --goals: the shapes whose regular and twisted tori are "
                        "compared (default 4x4x8,4x8x8)")
    p.set_defaults(func=cmd_network)
    return p


def _topologies(args):
    from golden import topology as topo
    failed = list(args.fail)
    if args.compare_twist:
        return {"regular": topo.torus(args.topology, failed=failed),
                "twisted": topo.torus(args.topology, twist=True, failed=failed)}
    shape = topo.torus(args.topology, wrap=not args.mesh, twist=args.twist, failed=failed)
    return {"mesh" if args.mesh else "twisted" if args.twist else "torus": shape}


def _rates(args):
    if args.rates is None:
        return [round(0.1 * k, 10) for k in range(1, 10 * args.local_ports + 1)]
    try:
        rates = [float(x) for x in args.rates.split(",")]
    except ValueError:
        raise ValueError(f"--rates must be numbers separated by commas, not "
                         f"{args.rates!r}") from None
    bad = [x for x in rates if not 0 < x <= args.local_ports]
    if bad:
        raise ValueError(f"--rates {args.rates}: a rate is offered flits per node per cycle, "
                         f"above 0 and at most --local-ports ({args.local_ports}), not "
                         f"{bad[0]:g}")
    return rates


def _check_router_flags(args):
    """The router flags together, refused by their names before any build."""
    if args.routing == "adaptive":
        if args.vcs < 3:
            raise ValueError(f"--routing adaptive needs --vcs 3 or more (2 escape VCs and "
                             f"an adaptive one), not {args.vcs}")
        if args.packet_flits > args.buffer_flits:
            raise ValueError(f"--routing adaptive cuts packets through, so --packet-flits "
                             f"({args.packet_flits}) must fit --buffer-flits "
                             f"({args.buffer_flits})")
        if args.switching == "wormhole":
            raise ValueError("--routing adaptive is cut-through: --switching wormhole is "
                             "for --routing dor")
        if args.injection_queues:
            raise ValueError("--injection-queues would do nothing with --routing adaptive, "
                             "which always has them")
    elif args.escape_bias is not None:
        raise ValueError("--escape-bias would do nothing without --routing adaptive")
    if args.switching == "cut_through" and args.packet_flits > args.buffer_flits:
        raise ValueError(f"--switching cut_through needs --packet-flits ({args.packet_flits}) "
                         f"to fit --buffer-flits ({args.buffer_flits})")
    if args.speedup > args.vcs:
        raise ValueError(f"--speedup {args.speedup} needs as many VCs to deal to its groups: "
                         f"at most --vcs ({args.vcs})")


def _check_waves(args, points):
    """``--waves`` and ``--router-profile`` together, refused by their names before any
    build; ``points`` is the runs the sweep would make."""
    if args.router_profile and not args.waves:
        raise ValueError("--router-profile reads the run's waveform: give --waves FILE.vcd")
    if args.router_profile and Path(args.waves).suffix != ".vcd":
        raise ValueError(f"--router-profile reads a VCD: name --waves FILE.vcd, not "
                         f"{args.waves}")
    if args.waves and points != 1:
        raise ValueError(f"--waves records one run: give one rate in --rates and no "
                         f"--compare-twist, not {points} runs")


def _link_down(args):
    """``--link-down`` as ``sim.network``'s ``link_down``, refused past the run's end."""
    if not args.link_down:
        return None
    chip, port, cycle = parse_link_down(args.link_down)
    if not 0 <= cycle < args.cycles:
        raise ValueError(f"--link-down {args.link_down}: cycle {cycle} is outside the run "
                         f"(cycles 0 to {args.cycles - 1}, --cycles {args.cycles})")
    return chip, port, cycle


def _progress(label, total):
    from verif.progress import ProgressLine
    line = ProgressLine(label, total=total, unit="runs")

    def cycles(cycle, status):
        line.update(text=f"cycle {cycle:,}")
    return line, cycles


def cmd_network(args):
    """Run the sweep (or ``--goals``); a packet lost, duplicated or corrupted is a
    ``CommandError`` (exit status 1, one line), like any mismatch."""
    from sim.network import NetworkIntegrityError
    from verif.cli.common import CommandError
    try:
        _network(args)
    except NetworkIntegrityError as error:
        raise CommandError(str(error)) from None


def _network(args):
    _check_router_flags(args)
    if args.goals and (args.waves or args.router_profile):
        raise ValueError("--waves and --router-profile would do nothing with --goals, "
                         "which runs its own measurements")
    if not args.goals:
        _check_waves(args, len(_topologies(args)) * len(_rates(args)))
    check_outputs(args, folders=() if args.goals else ("out",), files=("goals", "waves"))
    if args.goals:
        from verif.bench.network import measure_goals
        twisted = [x for x in args.goals_twisted.split(",") if x.strip()]
        measure_goals(Path(args.goals), backend=args.backend, seed=args.seed,
                      twisted=twisted)
        print(f"wrote {args.goals}")
        return
    from sim import network
    if args.warmup >= args.cycles:
        raise ValueError(f"--warmup {args.warmup} leaves nothing to measure of --cycles "
                         f"{args.cycles}")
    topologies, rates = _topologies(args), _rates(args)
    settings = dict(traffic=args.traffic, packet_flits=args.packet_flits, vcs=args.vcs,
                    buffer_flits=args.buffer_flits, link_latency=args.link_latency,
                    cycles=args.cycles, warmup=args.warmup, seed=args.seed,
                    backend=args.backend, local_ports=args.local_ports,
                    message_packets=args.message_packets,
                    link_down=_link_down(args), routing=args.routing, speedup=args.speedup,
                    escape_bias=args.escape_bias, switching=args.switching,
                    injection_queues=args.injection_queues or None, waves=args.waves)
    speedup = f", speed-up {args.speedup}" if args.speedup > 1 else ""
    queues = ", injection queues" if args.injection_queues else ""
    print(f"network {args.topology}: {args.traffic} traffic, {args.packet_flits}-flit "
          f"packets, {args.routing} routing"
          f"{', cut-through' if args.switching == 'cut_through' else ''}, "
          f"{args.vcs} VCs x {args.buffer_flits} flits"
          f"{speedup}{queues}, {args.link_latency}-cycle links, {args.local_ports} local port(s), "
          f"{args.cycles} cycles per point "
          f"({args.warmup} warm-up), seed {args.seed}, {args.backend}", flush=True)
    line, cycles = _progress("network", len(rates) * len(topologies))
    curves, last, notes = {}, {}, []
    try:
        for name, topology in topologies.items():
            curve = []
            for rate in rates:
                line.update(text=f"{name} rate {rate:g}")
                stats = network.run_stats(topology, rate=rate, progress=cycles, **settings)
                problems = stats.problems()
                if problems:
                    raise network.NetworkIntegrityError(
                        f"{name} at rate {rate:g}: " + "; ".join(problems))
                curve.append((rate, stats))
                line.update(advance=1)
                r = stats.run
                # A link taken down loses packets by design: that is not saturation.
                if not (args.all_points or args.link_down) and r.accepted < 0.9 * r.offered:
                    skipped = rates[len(curve):]
                    if skipped:                         # the points past saturation
                        line.update(advance=len(skipped))
                        notes.append(f"{name}: saturated at rate {rate:g} (accepted "
                                     f"{r.accepted:.3f} of {r.offered:.3f}); rates "
                                     f"{', '.join(f'{x:g}' for x in skipped)} not measured "
                                     f"(--all-points measures them)")
                    break
            curves[name], last[name] = curve, curve[-1][1]
    finally:
        line.close()
    print(latency_table(curves))
    for note in notes:
        print(f"note: {note}")
    if args.link_down:
        print(link_down_report(curves))
    out = Path(args.out)
    for path in plot_curves(curves, out, args.topology, args.traffic):
        print(f"wrote {path}")
    for name, stats in last.items():
        print(f"  {name}: {stats.cycles:,} cycles in {stats.seconds:.2f} s "
              f"({stats.cycles_per_second:,.0f} cycles/s)")
    if args.waves:
        print(f"  waves: {args.waves}")
    if args.router_profile:
        _print_profile(args.waves, next(iter(topologies.values())))


def _print_profile(waves, topology):
    from verif.bench.router_profile import read_profile, table
    from verif.progress import ProgressLine
    size = Path(waves).stat().st_size >> 20
    line = ProgressLine("router profile", total=max(1, size), unit="MB")
    try:
        profile = read_profile(waves, progress=lambda mb: line.update(done=mb))
    finally:
        line.close()
    routers = len({owner for owner, _ in profile.outputs})
    print(f"router outputs and inputs, share of the {profile.cycles:,} measured cycles "
          f"(mean of {routers} routers):")
    print(table(profile, torus_ports=topology.n_ports))


# --- The goals of docs/network.md -----------------------------------------------------


