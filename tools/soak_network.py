"""Soak the ICI network RTL (issue 12): long saturated runs, every packet checked.

``tpu-rtl network`` prints the latency-load table only; a soak also needs the packet
counts and the integrity verdict, which :func:`sim.network.run_stats` returns. Each run is
one compiled whole run (Verilator by default); it fails (exit status 1) if the watchdog
fired (:class:`sim.transactors.SimulationHang`) or :meth:`NetworkStats.problems` reports
any packet lost, duplicated, out of sequence, misrouted or corrupted.

::

    .venv/bin/python tools/soak_network.py --topology 4x4 --traffic uniform --cycles 100000
    .venv/bin/python tools/soak_network.py --topology 4x4x8 --twist --traffic all_to_all
    .venv/bin/python tools/soak_network.py --topology 4x4 --failed 5 --traffic all_to_all
    .venv/bin/python tools/soak_network.py --topology 4x4 --link-down 5:+y@50000
    .venv/bin/python tools/soak_network.py --topology 4x8 --twist --routing adaptive \
        --vcs 8 --buffer-flits 16 --speedup 2 --local-ports 2 --rate 2 \
        --traffic all_to_all --packet-flits 4 --message-packets 16
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from golden import topology as topo  # noqa: E402
from sim import network  # noqa: E402
from sim.transactors import SimulationHang  # noqa: E402
from verif.cli.network import parse_link_down  # noqa: E402


def soak(shape, *, twist, failed, traffic, rate, cycles, warmup, seed, backend,
         link_down=None, routing="dor", vcs=2, speedup=1, **more):
    """One soak run; returns (topology, NetworkStats, wall seconds, problems). ``more``:
    other ``sim.network.run_stats`` parameters (``buffer_flits``, ``local_ports``,
    ``packet_flits``, ``message_packets``, ``injection_queues``)."""
    topology = topo.torus(shape, twist=twist, failed=failed)
    start = time.monotonic()
    stats = network.run_stats(topology, traffic=traffic, rate=rate, cycles=cycles,
                              warmup=warmup, seed=seed, backend=backend, link_down=link_down,
                              routing=routing, vcs=vcs, speedup=speedup, **more)
    return topology, stats, time.monotonic() - start, stats.problems()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topology", default="4x4")
    parser.add_argument("--twist", action="store_true")
    parser.add_argument("--failed", default="", help="comma-separated failed chip ids")
    parser.add_argument("--traffic", default="uniform", choices=network.TRAFFIC)
    parser.add_argument("--rate", type=float, default=1.0)
    parser.add_argument("--cycles", type=int, default=100_000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--backend", default="verilator",
                        choices=("verilator", "amaranth", "icarus"))
    parser.add_argument("--link-down", metavar="CHIP:PORT@CYCLE",
                        help="take a link down mid-run (as tpu-rtl network --link-down)")
    parser.add_argument("--routing", default="dor", choices=("dor", "adaptive"))
    parser.add_argument("--vcs", type=int, default=None,
                        help="VCs per link (default 2, or 3 with --routing adaptive)")
    parser.add_argument("--speedup", type=int, default=1,
                        help="the routers' input speed-up, 1 to --vcs (default 1)")
    parser.add_argument("--buffer-flits", type=int, default=8, help="flits per VC (default 8)")
    parser.add_argument("--local-ports", type=int, default=1,
                        help="injection and ejection ports a node (default 1)")
    parser.add_argument("--packet-flits", type=int, default=1,
                        help="flits per packet (default 1)")
    parser.add_argument("--message-packets", type=int, default=8,
                        help="packets per all-to-all message (default 8)")
    parser.add_argument("--injection-queues", action="store_true",
                        help="with --routing dor: a queue per direction at injection")
    args = parser.parse_args(argv)
    vcs = args.vcs if args.vcs is not None else 3 if args.routing == "adaptive" else 2
    failed = tuple(int(c) for c in args.failed.split(",") if c)
    try:
        link_down = parse_link_down(args.link_down) if args.link_down else None
        topology, stats, wall, problems = soak(
            args.topology, twist=args.twist, failed=failed, traffic=args.traffic,
            rate=args.rate, cycles=args.cycles, warmup=args.warmup, seed=args.seed,
            backend=args.backend, link_down=link_down, routing=args.routing, vcs=vcs,
            speedup=args.speedup, buffer_flits=args.buffer_flits, local_ports=args.local_ports,
            packet_flits=args.packet_flits, message_packets=args.message_packets,
            injection_queues=args.injection_queues or None)
    except SimulationHang as error:
        print(f"HUNG (watchdog): {error}")
        return 1
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    t = stats.total
    print(f"{topology!r}, {args.traffic}, rate {args.rate}, seed {args.seed}, "
          f"routing {args.routing}, {vcs} VCs x {args.buffer_flits} flits, speed-up "
          f"{args.speedup}, {args.local_ports} local port(s), {args.packet_flits}-flit "
          f"packets{', injection queues' if args.injection_queues else ''}")
    print(f"cycles {args.cycles} (warm-up {args.warmup}); harness cycles {stats.cycles}, "
          f"drain {stats.drain_cycles}")
    for name in ("created", "overflow", "injected", "received", "header_errors",
                 "sequence_errors", "payload_errors", "dropped", "undeliverable", "protocol",
                 "held", "queued"):
        print(f"  {name:16s} {t(name):>12,}")
    print(f"offered {stats.run.offered:.3f}  accepted {stats.run.accepted:.3f} "
          f"flits/node/cycle  latency {stats.run.latency_mean:.1f}  p99 {stats.run.latency_p99:g}")
    print(f"simulator {stats.seconds:.1f} s, wall {wall:.1f} s")
    print("problems: " + ("; ".join(problems) if problems else "none"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
