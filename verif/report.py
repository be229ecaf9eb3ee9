"""Tables and plots that several commands and benchmarks share: the network's
latency-load table and plots, the link heat maps, and the nccl-tests-style
collective table."""

import numpy as np

__all__ = ["latency_table", "link_down_report", "plot_curves", "collective_table",
           "plot_links"]


def link_down_report(curves):
    """A line per topology: the link taken down and the packets given up at each point."""
    from golden.topology import PORT_NAMES
    lines = []
    for name, curve in curves.items():
        (a, p), (b, q) = curve[0][1].down
        counts = ", ".join(f"{s.total('undeliverable'):,}" for _, s in curve)
        lines.append(f"{name}: link chip {a} {PORT_NAMES[p]} <-> chip {b} {PORT_NAMES[q]} "
                     f"down; packets undeliverable per point: {counts}")
    return "\n".join(lines)


def latency_table(curves):
    """The latency-load table: one row per point, one group of columns per topology."""
    names = list(curves)
    head = ["rate"] + [f"{name} {col}" for name in names
                       for col in ("offered", "accepted", "latency", "p99", "hops")]
    rows = []
    for i in range(max(len(c) for c in curves.values())):
        rate = next(c[i][0] for c in curves.values() if i < len(c))
        row = [f"{rate:g}"]
        for name in names:
            if i < len(curves[name]):
                r = curves[name][i][1].run
                row += [f"{r.offered:.3f}", f"{r.accepted:.3f}", f"{r.latency_mean:.1f}",
                        f"{r.latency_p99:.0f}", f"{r.hops_mean:.2f}"]
            else:
                row += [""] * 5
        rows.append(row)
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    lines = ["  ".join(x.rjust(w) for x, w in zip(r, widths)) for r in [head] + rows]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths)] + lines[1:])


def plot_curves(curves, out, shape, traffic):
    """Write ``latency_<shape>.png`` (latency against offered load) and
    ``links_<shape>.png`` (link utilization at each curve's last point) under ``out``;
    return their paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    out.mkdir(parents=True, exist_ok=True)
    latency = out / f"latency_{shape}.png"
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for name, curve in curves.items():
        offered = [s.run.offered for _, s in curve]
        line, = ax.plot(offered, [s.run.latency_mean for _, s in curve], "o-", label=name)
        ax.plot(offered, [s.run.latency_p99 for _, s in curve], "--",
                color=line.get_color(), label=f"{name} p99")
    ax.set_xlabel("offered load (flits/node/cycle)")
    ax.set_ylabel("latency (cycles)")
    ax.set_title(f"{shape} {traffic}: latency against load")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(latency, dpi=120)
    plt.close(fig)

    links = out / f"links_{shape}.png"
    fig, axes = plt.subplots(len(curves), 1, figsize=(9, 1.2 + 1.6 * len(curves)),
                             squeeze=False)
    for ax, (name, curve) in zip(axes[:, 0], curves.items()):
        rate, stats = curve[-1]
        util = np.asarray(stats.run.link_utilization).T
        image = ax.imshow(util, aspect="auto", vmin=0, vmax=1, cmap="viridis",
                          interpolation="nearest")
        ax.set_yticks(range(util.shape[0]), ["+x", "-x", "+y", "-y", "+z", "-z"][:len(util)])
        ax.set_xlabel("chip")
        ax.set_title(f"{name}: link utilization at offered {stats.run.offered:.2f}")
        fig.colorbar(image, ax=ax, label="flits/cycle")
    fig.tight_layout()
    fig.savefig(links, dpi=120)
    plt.close(fig)
    return [latency, links]


def collective_table(rows):
    """The nccl-tests-style table of ``rows`` (dicts of size, cycles, algbw, busbw,
    fraction, wrong; algbw, busbw and fraction may be None, shown as "-"), as lines."""
    lines = [f"  {'size (B)':>10}{'cycles':>10}{'algbw B/c':>11}{'busbw B/c':>11}"
             f"{'of bound':>10}{'#wrong':>8}"]

    def cell(value, width, spec):
        return f"{'-':>{width}}" if value is None else f"{value:>{width}{spec}}"

    for r in rows:
        lines.append(f"  {r['size']:>10,}{r['cycles']:>10,}{cell(r['algbw'], 11, '.3f')}"
                     f"{cell(r['busbw'], 11, '.3f')}{cell(r['fraction'], 10, '.1%')}"
                     f"{r['wrong']:>8}")
    return lines


def plot_links(utilization, topology, path, title):
    """A heat map per torus dimension of ``utilization`` [n_chips, 2*D] (flits per cycle
    out of each port): rows +a and -a, columns chips. Returns ``path``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    dims = len(topology.dims)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(dims, 1, figsize=(max(6, 0.4 * topology.n_chips + 2),
                                               1.2 + 1.5 * dims), squeeze=False)
    for a, ax in enumerate(axes[:, 0]):
        util = np.asarray(utilization)[:, 2 * a:2 * a + 2].T
        image = ax.imshow(util, aspect="auto", vmin=0, vmax=1, cmap="viridis",
                          interpolation="nearest")
        ax.set_yticks([0, 1], [f"+{'xyz'[a]}", f"-{'xyz'[a]}"])
        ax.set_xticks(range(topology.n_chips))
        ax.set_xlabel("chip")
        ax.set_title(f"{title}: dimension {'xyz'[a]}")
        fig.colorbar(image, ax=ax, label="flits/cycle")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
