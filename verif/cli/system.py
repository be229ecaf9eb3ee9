"""``tpu-rtl system``: collectives on a multi-chip torus of TensorCore chips.

::

    tpu-rtl system collective all_reduce --topology 4x4 --size 64KiB
    tpu-rtl system collective all_to_all --topology 2x2x2 --twist --sizes 1KiB:16KiB
    tpu-rtl system collective reduce_scatter --topology 4x4 --fail 5 --dtype int32
    tpu-rtl system step --topology 2x2 --batch 64 --k 40 --n 8
    tpu-rtl system embedding --topology 2x2 --rows 64 --dim 8 --batch 4 --alpha 1.05

``collective`` runs ``sim.system.collective`` over a range of message sizes (doubling up
to ``--size``, or ``--sizes LO:HI``), checks every output word against
``golden.collectives.collective``, and prints an nccl-tests-style table: size, cycles,
algbw and busbw in bytes per cycle, busbw as a fraction of the link-bandwidth bound, and
the number of wrong words. It writes a link-utilization heat map per torus dimension of
the largest run (PNG) under ``build/system/``. The exit status is 1 on any wrong word.

``step`` runs ``sim.system.data_parallel_step``: on every chip a matmul of its shard of a
random bf16 batch by shared weights on its MXU, then the all-reduce of the products, one
program per chip; it checks each chip's product against ``golden.mxu.matmul`` and the
all-reduce against ``golden.collectives.collective``, and writes the heat map.

``embedding`` runs ``sim.system.embedding_step``: one embedding step (forward, and the
update unless ``--forward``) of a table sharded over the chips, each chip's bags of Zipf ids
(``--alpha``) combined on its SparseCore; it checks every output, the whole table and state
against ``golden.embedding.step``, prints the verdict, the cycles, the HBM row reads against
the ids (what dedup saved), the ICI words against a step that sends every occurrence, and
writes the heat map. A mismatch prints the command that reproduces it.

The three take the routers' options (``--routing``, ``--vcs``, ``--buffer-flits``,
``--speedup``): ``collective``'s routing defaults to its topology's, ``step``'s and
``embedding``'s to dimension order, as ``sim.system``'s functions do.
"""

import argparse
from pathlib import Path

import numpy as np

from verif.cli.common import add_fail, check_outputs, exponent, natural, parse_size, positive
from verif.report import collective_table, plot_links

__all__ = ["add_parser", "cmd_collective", "cmd_step", "cmd_embedding"]


def add_parser(subparsers, help):
    """Add ``system`` to the ``tpu-rtl`` subcommands."""
    from golden.collectives import DTYPES, KINDS
    p = subparsers.add_parser("system", help=help,
                              description="Run collectives on TensorCore chips joined by "
                                          "ICI routers through the OCS (hdl.system.ChipSystem).")
    sub = p.add_subparsers(dest="program", required=True, metavar="PROGRAM")
    c = sub.add_parser("collective", help="a collective over a range of sizes, checked against "
                                          "golden, with busbw and a link heat map",
                       description="Run a collective on random data over a range of message "
                                   "sizes; check it against golden.collectives and print an "
                                   "nccl-tests-style table.")
    c.add_argument("kind", choices=KINDS)
    _add_topology(c)
    c.add_argument("--size", default="4KiB", help="largest message size S, nccl-tests' "
                                                   "definition (default 4KiB)")
    c.add_argument("--sizes", metavar="LO:HI", help="sizes from LO to HI, doubling (default: "
                                                    "four sizes up to --size)")
    c.add_argument("--dtype", choices=DTYPES, default="float32")
    c.add_argument("--numerics", choices=("tpu", "ieee"), default="tpu")
    c.add_argument("--chunks", type=chunks_or_auto, default="auto",
                   help="pieces per transfer, or auto (the default): the chunking the cost "
                        "model predicts fastest, printed with each size")
    c.add_argument("--network-ports", type=positive, metavar="P",
                   help="network ports a chip (default: one per torus link direction, 2*D, "
                        "sim.system_chip.collective_chip)")
    c.add_argument("--lanes", type=positive, help="VMEM lanes a chip (default: 8, 16 or 32, "
                                                  "4 x the ports or more, so that the DMA's "
                                                  "VMEM port stays half free)")
    c.add_argument("--outstanding", type=positive, metavar="N",
                   help="DMA descriptors in flight a chip (default 4)")
    _add_router(c, "default: with the topology's default chip, adaptive on a topology with "
                   "a ring of two chips, else dor; with chip options, dor")
    c.add_argument("--backend", choices=("verilator", "amaranth", "icarus"),
                   default="verilator")
    c.add_argument("--seed", type=natural, default=0, help="seed of the data (default 0)")
    c.add_argument("--waves", metavar="FILE", help="write a waveform (.vcd or .fst) of the "
                                                   "largest size's run (a flat build of its "
                                                   "own: slower)")
    c.add_argument("--out", type=Path, default=Path("build/system"),
                   help="folder of the heat map (default build/system)")
    c.set_defaults(func=cmd_collective)
    s = sub.add_parser("step", help="a data-parallel step: a matmul on every chip's MXU, then "
                                    "the all-reduce of the products",
                       description="Run a data-parallel step as one program per chip "
                                   "(sim.system.data_parallel_step) on random bf16 data: "
                                   "chip r multiplies its M x K shard of the batch by the K x N "
                                   "weights, then the chips all-reduce the fp32 products; "
                                   "check both against golden.")
    _add_topology(s)
    s.add_argument("--batch", type=positive, default=16, metavar="M",
                   help="rows of each chip's shard (default 16)")
    s.add_argument("--k", type=positive, default=24, help="the shared dimension K (default 24)")
    s.add_argument("--n", type=positive, default=8, help="the weights' columns N (default 8); "
                                                     "M*N must cut into whole reduce blocks")
    s.add_argument("--relu", action="store_true", help="ReLU on each product before the "
                                                       "all-reduce")
    s.add_argument("--numerics", choices=("tpu", "ieee"), default="tpu")
    s.add_argument("--chunks", type=positive, default=1, help="the all-reduce's pieces per "
                                                         "transfer (default 1)")
    _add_router(s, "default dor")
    s.add_argument("--backend", choices=("verilator", "amaranth", "icarus"),
                   default="verilator")
    s.add_argument("--seed", type=natural, default=0, help="seed of the data (default 0)")
    s.add_argument("--waves", metavar="FILE", help="write a waveform of the run (a flat "
                                                   "build of its own: slower)")
    s.add_argument("--out", type=Path, default=Path("build/system"),
                   help="folder of the heat map (default build/system)")
    s.set_defaults(func=cmd_step)
    e = sub.add_parser("embedding", help="an embedding step: sharded table, ids and rows "
                                         "all-to-all, SparseCores, sum-then-apply",
                       description="Run one embedding step (sim.system.embedding_step) on "
                                   "chips with a SparseCore, on Zipf ids; check it against "
                                   "golden.embedding and report cycles, HBM row reads and "
                                   "ICI words against a step without dedup.")
    _add_topology(e)
    e.add_argument("--rows", type=positive, default=64, help="table rows V (default 64)")
    e.add_argument("--dim", type=positive, default=8, help="row width D (default 8)")
    e.add_argument("--batch", type=positive, default=4, metavar="B",
                   help="bags a chip (default 4)")
    e.add_argument("--bag", type=positive, default=4, metavar="L",
                   help="ids a bag (default 4)")
    e.add_argument("--alpha", type=exponent, default=1.05, metavar="A",
                   help="Zipf exponent of the ids, truncated to the table (default 1.05; "
                        "0 is uniform)")
    e.add_argument("--combiner", choices=("sum", "mean", "sqrtn"), default="sum")
    e.add_argument("--optimizer", choices=("sgd", "adagrad", "rowwise_adagrad"), default="sgd",
                   help="the update's optimizer (default sgd; the Adagrads start from 0.1)")
    e.add_argument("--mode", choices=("exact", "prereduced"), default="exact",
                   help="the backward (default exact; prereduced sums each chip's "
                        "gradients of an id before they travel)")
    e.add_argument("--lr", type=float, default=0.01, help="learning rate (default 0.01)")
    e.add_argument("--forward", action="store_true", help="the forward only")
    e.add_argument("--numerics", choices=("tpu", "ieee"), default="tpu")
    _add_router(e, "default dor; tpu-rtl bench embedding runs --routing adaptive --speedup 4")
    e.add_argument("--backend", choices=("verilator", "amaranth", "icarus"),
                   default="verilator")
    e.add_argument("--seed", type=natural, default=0, help="seed of the data (default 0)")
    e.add_argument("--out", type=Path, default=Path("build/system"),
                   help="folder of the heat map (default build/system)")
    e.set_defaults(func=cmd_embedding)
    b = sub.add_parser("bench", help="the same as tpu-rtl bench system",
                       description="The same as `tpu-rtl bench system`: the collective "
                                   "benchmarks (1x4 and 4x4; the cost model's constants; the "
                                   "RTL against the model by chunks and by size; simulation "
                                   "speed), each checked against golden, into build/bench/"
                                   "system.md (or --out, or docs/system.md with --update-docs).")
    b.add_argument("--out", metavar="FILE.md", help="where the document goes (default "
                                                    "build/bench/system.md)")
    b.add_argument("--update-docs", action="store_true", help="write docs/system.md")
    b.add_argument("--seed", type=natural, default=1, help="seed of the data (default 1)")
    b.add_argument("--quick", action="store_true", help="leave out the 4x4 torus (its build, "
                                                        "about 6 minutes)")
    b.set_defaults(func=cmd_bench)


def _add_topology(parser):
    parser.add_argument("--topology", default="2x2", help="torus shape such as 1x4, 4x4 or "
                                                          "2x2x2 (default 2x2)")
    parser.add_argument("--twist", action="store_true", help="twisted torus (k x k x 2k or "
                                                             "k x 2k x 2k shapes)")
    add_fail(parser)


def _add_router(parser, routing_default):
    """The routers' options: ``--routing`` (its default described by ``routing_default``),
    ``--vcs``, ``--buffer-flits`` and ``--speedup``."""
    parser.add_argument("--routing", choices=("dor", "adaptive"),
                        help=f"the routers' routing ({routing_default})")
    parser.add_argument("--vcs", type=positive, metavar="N",
                        help="virtual channels a link (default 2 with dor, 4 with adaptive)")
    parser.add_argument("--buffer-flits", type=positive, metavar="N",
                        help="flits of each VC buffer (default 8 with dor; 99, one and a "
                             "half packets, with adaptive)")
    parser.add_argument("--speedup", type=positive, default=1, metavar="K",
                        help="routers' input speed-up: each input sends up to K flits a "
                             "cycle, of K VC groups, 1 to --vcs (default 1)")


def _network(args, routing):
    """The routers' keyword arguments of ``sim.system`` for ``routing`` and the options,
    the defaults filled in, checked before any work."""
    from sim import system
    vcs, flits = system.router_defaults(routing, args.vcs, args.buffer_flits)
    _check_router_flags(routing, vcs, flits, args.speedup)
    return dict(vcs=vcs, buffer_flits=flits, routing=routing, speedup=args.speedup)


def _router_phrase(network):
    """The header's words for the routers of ``network`` (:func:`_network`)."""
    speedup = f", speed-up {network['speedup']}" if network["speedup"] > 1 else ""
    return f"{network['vcs']} VCs of {network['buffer_flits']} flits a link{speedup}"


def _router_flags(args, network):
    """The router options of a reproduce command: those given, with their values."""
    given = {"routing": args.routing, "vcs": args.vcs, "buffer_flits": args.buffer_flits,
             "speedup": args.speedup if args.speedup > 1 else None}
    return "".join(f" --{name.replace('_', '-')} {network[name]}"
                   for name, value in given.items() if value is not None)


def cmd_bench(args):
    from verif.cli import bench
    args.section = "system"
    for option in ("large_array", "twisted", "suite", "workers", "seeds"):
        setattr(args, option, None)
    bench.run(args)


def chunks_or_auto(text):
    """``--chunks``: a positive integer, or "auto"."""
    if text == "auto":
        return text
    try:
        return positive(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be a positive integer or auto, not "
                                         f"{text!r}") from None


def _topology_flags(args):
    """The topology options of a reproduce command: ``--topology``, ``--twist``, ``--fail``."""
    return (f" --topology {args.topology}{' --twist' if args.twist else ''}"
            + "".join(f" --fail {c}" for c in args.fail))


def _topology(args):
    from golden import topology as topo
    try:
        dims = tuple(int(x) for x in args.topology.lower().split("x"))
    except ValueError:
        raise ValueError(f"--topology looks like 4x4 or 2x2x2, not {args.topology!r}") from None
    return topo.torus(dims, twist=args.twist, failed=tuple(args.fail))


def _sizes(args):
    if args.sizes:
        lo, _, hi = args.sizes.partition(":")
        lo, hi = parse_size(lo), parse_size(hi or lo)
    else:
        hi = parse_size(args.size)
        lo = max(4, hi >> 3)
    if lo > hi:
        raise ValueError(f"--sizes runs from low to high, not {args.sizes!r}")
    sizes = [lo]
    while sizes[-1] * 2 <= hi:
        sizes.append(sizes[-1] * 2)
    return sizes


def cmd_collective(args):
    check_outputs(args, files=("waves",), folders=("out",))
    from golden import collectives
    from sim import system
    from sim.system_chip import collective_chip, collective_routing

    from verif.cli.common import CommandError
    from verif.progress import ProgressLine
    from verif.suites.system.inputs import random_inputs

    topology = _topology(args)
    sizes = _sizes(args)
    chips = int(topology.alive.sum())
    chip = {name: value for name, value in (("network_ports", args.network_ports),
                                             ("lanes", args.lanes),
                                             ("outstanding", args.outstanding))
            if value is not None}
    # As sim.system.collective: the topology's routing goes with the topology's chip.
    routing = args.routing or collective_routing(topology, chip or None)
    network = _network(args, routing)
    whole = collective_chip(topology, **chip)
    rng = np.random.default_rng(args.seed)
    whose = "given chips" if chip else "the topology"
    print(f"system {args.kind} on {topology.shape}{' twisted' if args.twist else ''}"
          f"{' failed ' + ','.join(map(str, args.fail)) if args.fail else ''} ({chips} chips, "
          f"{args.dtype}, numerics {args.numerics}, chunks {args.chunks}, seed {args.seed}, "
          f"backend {args.backend}); chips of {whole['network_ports']} network ports, "
          f"{whole['lanes']} lanes and {whole['vmem_lines'] * whole['lanes']:,} VMEM words"
          f"{'' if chip else ' (the default for the topology)'}, {routing} routing"
          f"{'' if args.routing else f' (the default for {whose})'} with "
          f"{_router_phrase(network)}; B = {system.LINK_BYTES_PER_CYCLE} bytes/cycle per "
          f"link direction", flush=True)
    rows, last = [], None
    progress = ProgressLine(f"system {args.kind}", total=len(sizes), unit="sizes")
    try:
        for size in sizes:
            inputs = random_inputs(args.kind, chips, size, args.dtype, rng)
            try:
                run = system.collective(args.kind, inputs, topology=topology, dtype=args.dtype,
                                        numerics=args.numerics, chunks=args.chunks,
                                        chip=whole if chip else None,
                                        backend=args.backend, seed=args.seed,
                                        waves=args.waves if size == sizes[-1] else None,
                                        **network)
            except system.SystemRunError as error:
                raise CommandError(str(error)) from None
            want = collectives.collective(args.kind, inputs, topology=topology,
                                          dtype=args.dtype, numerics=args.numerics)
            wrong = int(np.count_nonzero(run.out.view(np.uint32) != want.view(np.uint32)))
            rows.append(dict(size=collectives.message_bytes(args.kind, inputs.shape),
                             cycles=run.cycles, algbw=run.algbw, busbw=run.busbw,
                             fraction=run.busbw / run.bus_bound, wrong=wrong,
                             chunks=run.chunks))
            last = run
            progress.update(advance=1, text=f"{size:,} B: {run.cycles:,} cycles in "
                                            f"{run.chunks} chunks")
    finally:
        progress.close()
    print("\n".join(collective_table(rows)))
    print(f"  bus bound: {last.bus_bound:.3f} bytes/cycle")
    if last.stalls:
        print(f"  {stall_line(last.stalls, last.cycles)} ({rows[-1]['size']:,} B)")
    name = f"links_{args.kind}_{topology.shape}{'_twist' if args.twist else ''}.png"
    path = plot_links(last.link_utilization, topology, args.out / name,
                      f"{args.kind} {rows[-1]['size']:,} B")
    print(f"  link heat map: {path}")
    if args.waves:
        print(f"  waves ({sizes[-1]:,} B): {args.waves}")
    bad = sum(r["wrong"] for r in rows)
    if bad:
        again = (f"tpu-rtl system collective {args.kind}"
                 + _topology_flags(args)
                 + f" --sizes {sizes[0]}:{sizes[-1]} --dtype {args.dtype} --numerics "
                   f"{args.numerics} --chunks {args.chunks} --seed {args.seed} --backend "
                   f"{args.backend}"
                   + "".join(f" --{name.replace('_', '-')} {value}"
                             for name, value in (chip | network).items()))
        raise CommandError(f"mismatch: {bad} wrong words (reproduce: {again})")


def stall_line(stalls, cycles):
    """``stalls`` (``sim.system.SystemRun``'s, per cause an array over the chips) as one
    line: each cause's mean share of the run's ``cycles``, the largest first."""
    counts = {cause: np.asarray(c, float) for cause, c in stalls.items()}
    # A live chip stalls at least for its first fetch; a failed chip counts nothing.
    live = sum(counts.values()) > 0
    shares = sorted(((c[live].mean() / max(cycles, 1), cause)
                     for cause, c in counts.items() if c.any()), reverse=True)
    parts = ", ".join(f"{cause} {share:.1%}" for share, cause in shares) or "none"
    return f"sequencers stalled (mean over the chips, of the cycles): {parts}"


def _check_router_flags(routing, vcs, flits, speedup):
    """The routers' flags against ``routing``, as ``sim.system`` checks them, before any
    work, each error naming its flag."""
    from sim import system

    from verif.cli.common import CommandError
    escape, longest = system.ADAPTIVE_ESCAPE_VCS, system.LONGEST_PACKET_FLITS
    if not 2 <= vcs <= system.MAX_VCS:
        raise CommandError(f"--vcs {vcs}: vcs must be at least 2, at most {system.MAX_VCS}",
                           status=2)
    if routing == "adaptive" and vcs <= escape:
        raise CommandError(f"--vcs {vcs}: adaptive routing needs more than {escape} VCs (its "
                           f"escape VCs)", status=2)
    if routing == "adaptive" and flits < longest:
        raise CommandError(f"--buffer-flits {flits}: adaptive routing cuts whole packets "
                           f"through, so a buffer must hold the longest, {longest} flits",
                           status=2)
    if speedup > vcs:
        raise CommandError(f"--speedup {speedup} needs as many VCs to deal to its groups: at "
                           f"most --vcs ({vcs})", status=2)


def cmd_step(args):
    check_outputs(args, files=("waves",), folders=("out",))
    from golden import collectives, mxu, vpu
    from sim import system

    from verif.cli.common import CommandError, progress_printer
    from verif.suites.mxu.scenarios import bf16_matrix

    topology = _topology(args)
    network = _network(args, args.routing or "dor")
    chips = int(topology.alive.sum())
    m, k, n = args.batch, args.k, args.n
    rng = np.random.default_rng(args.seed)
    w = bf16_matrix(rng, (k, n), special_density=0.05)
    shards = np.stack([bf16_matrix(rng, (m, k), special_density=0.05) for _ in range(chips)])
    activation = "relu" if args.relu else None
    print(f"system data-parallel step on {topology.shape}{' twisted' if args.twist else ''}"
          f"{' failed ' + ','.join(map(str, args.fail)) if args.fail else ''} ({chips} chips, "
          f"{m}x{k} @ {k}x{n} a chip{', ReLU' if args.relu else ''}, numerics "
          f"{args.numerics}, chunks {args.chunks}, seed {args.seed}, backend {args.backend}; "
          f"{network['routing']} routing with {_router_phrase(network)}; the first run of a "
          f"shape builds the system, a few minutes)", flush=True)
    progress = progress_printer("system step")
    try:
        run = system.data_parallel_step(shards, w, topology=topology, activation=activation,
                                        numerics=args.numerics, chunks=args.chunks,
                                        backend=args.backend, seed=args.seed,
                                        waves=args.waves, progress=progress, **network)
    except system.SystemRunError as error:
        raise CommandError(str(error)) from None
    finally:
        progress.close()
    products = np.stack([mxu.matmul(x, w, numerics=args.numerics).view(np.uint32)
                         for x in shards])
    if args.relu:
        products = vpu.elementwise("max", products, np.zeros_like(products),
                                   numerics=args.numerics)
    want = collectives.collective("all_reduce", products.reshape(chips, -1),
                                  topology=topology, numerics=args.numerics)
    wrong_products = int(np.count_nonzero(run.products.view(np.uint32) != products))
    wrong = int(np.count_nonzero(run.out.view(np.uint32).reshape(want.shape)
                                 != want.view(np.uint32)))
    print(f"  {'cycles':>10}{'products wrong':>16}{'all-reduce wrong':>18}")
    print(f"  {run.cycles:>10,}{wrong_products:>16}{wrong:>18}")
    name = f"links_step_{topology.shape}{'_twist' if args.twist else ''}.png"
    path = plot_links(run.link_utilization, topology, args.out / name,
                      f"data-parallel step {m}x{k} @ {k}x{n}")
    print(f"  link heat map: {path}")
    if args.waves:
        print(f"  waves: {args.waves}")
    if wrong or wrong_products:
        again = ("tpu-rtl system step"
                 + _topology_flags(args)
                 + f" --batch {m} --k {k} --n {n}{' --relu' if args.relu else ''} --numerics "
                   f"{args.numerics} --chunks {args.chunks}{_router_flags(args, network)} "
                   f"--seed {args.seed} --backend {args.backend}")
        raise CommandError(f"mismatch: {wrong_products} wrong product words, {wrong} wrong "
                           f"all-reduce words (reproduce: {again})")


def cmd_embedding(args):
    check_outputs(args, folders=("out",))
    from golden import embedding as ge
    from sim import system

    from verif.cli.common import CommandError, progress_printer
    from verif.suites.system.inputs import embedding_inputs

    topology = _topology(args)
    network = _network(args, args.routing or "dor")
    chips = int(topology.alive.sum())
    rng = np.random.default_rng(args.seed)
    table, indices, offsets, weights, grads = embedding_inputs(
        rng, chips, rows=args.rows, dim=args.dim, batch=args.batch, bag=args.bag,
        alpha=args.alpha)
    kwargs = dict(grads=None if args.forward else grads,
                  weights=weights if args.combiner != "sum" else None, topology=topology,
                  combiner=args.combiner, optimizer=args.optimizer, lr=args.lr,
                  mode=args.mode, numerics=args.numerics)
    backward = "forward only" if args.forward else f"{args.optimizer} {args.mode}"
    print(f"system embedding step on {topology.shape}{' twisted' if args.twist else ''}"
          f"{' failed ' + ','.join(map(str, args.fail)) if args.fail else ''} ({chips} chips, "
          f"table {args.rows}x{args.dim}, {args.batch} bags of {args.bag} Zipf({args.alpha}) "
          f"ids a chip, {args.combiner}, {backward}, numerics {args.numerics}, seed {args.seed}, "
          f"backend {args.backend}; {network['routing']} routing with "
          f"{_router_phrase(network)}; the first run of a shape builds the system, minutes)",
          flush=True)
    want = ge.step(table, indices, offsets, **kwargs)
    progress = progress_printer("system embedding")
    try:
        run = system.embedding_step(table, indices, offsets, backend=args.backend,
                                    seed=args.seed, progress=progress, **network, **kwargs)
    except system.SystemRunError as error:
        raise CommandError(str(error)) from None
    finally:
        progress.close()
    wrong = sum(int(np.count_nonzero(a.view(np.uint32) != b.view(np.uint32)))
                for a, b in zip(run.out, want.out))
    wrong += int(np.count_nonzero(run.table.view(np.uint32) != want.table.view(np.uint32)))
    if want.state is not None:
        wrong += int(np.count_nonzero(run.state.view(np.uint32) != want.state.view(np.uint32)))
    plan = ge.plan(indices, offsets, num_rows=args.rows, n_chips=chips)
    no_dedup = ge.traffic(plan, args.dim, backward=not args.forward, dedup=False).total
    ids = sum(len(i) for i in indices)
    print(f"  {'verdict':>10}{'cycles':>10}{'HBM row reads':>15}{'ids':>7}"
          f"{'ICI words':>11}{'without dedup':>15}")
    print(f"  {'bit-exact' if not wrong else 'MISMATCH':>10}{run.cycles:>10,}"
          f"{int(run.hbm_reads.sum()):>15}{ids:>7}{run.ici_words:>11,}{no_dedup:>15,}")
    print(f"  row reads per owner: {run.hbm_reads.tolist()}")
    name = f"links_embedding_{topology.shape}{'_twist' if args.twist else ''}.png"
    path = plot_links(run.link_utilization, topology, args.out / name,
                      f"embedding step {args.rows}x{args.dim}, Zipf({args.alpha})")
    print(f"  link heat map: {path}")
    if wrong:
        again = ("tpu-rtl system embedding"
                 + _topology_flags(args)
                 + f" --rows {args.rows} --dim {args.dim} --batch {args.batch} --bag "
                   f"{args.bag} --alpha {args.alpha} --combiner {args.combiner} --optimizer "
                   f"{args.optimizer} --mode {args.mode} --lr {args.lr}"
                   f"{' --forward' if args.forward else ''} --numerics {args.numerics}"
                   f"{_router_flags(args, network)} --seed {args.seed} --backend "
                   f"{args.backend}")
        raise CommandError(f"mismatch: {wrong} wrong words against golden.embedding "
                           f"(reproduce: {again})")
