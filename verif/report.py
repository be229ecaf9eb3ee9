"""Tables and plots that several commands and benchmarks share: the network's
latency-load table and plots, the link heat maps, and the nccl-tests-style
collective table, and a bench's section of a hand-written page."""

from pathlib import Path

import numpy as np

__all__ = ["write_marked", "latency_table", "link_down_report", "plot_curves", "common_load_points",
           "collective_table", "plot_links"]


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
                row += ["-"] * 5
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
    dims = tuple(int(x) for x in str(shape).lower().split("x"))
    panels = common_load_points(curves)
    rows = [(axis, sign) for axis, size in enumerate(dims) if size > 1 for sign in "+-"]
    n_chips = np.asarray(panels[0][1].run.link_utilization).shape[0]
    fig, axes = plt.subplots(len(panels), 1, figsize=_heat_size(n_chips, len(rows) * len(panels)),
                             squeeze=False)
    for ax, (name, stats) in zip(axes[:, 0], panels):
        util = np.asarray(stats.run.link_utilization)
        columns = [2 * axis + (sign == "-") for axis, sign in rows]
        _heat_map(fig, ax, util[:, columns].T,
                  [f"{sign}{'xyz'[axis]}" for axis, sign in rows],
                  f"{name}: link utilization at offered {stats.run.offered:.2f}")
    fig.tight_layout()
    fig.savefig(links, dpi=120)
    plt.close(fig)
    return [latency, links]


def common_load_points(curves):
    """``[(name, point)]``: each curve's point at the highest rate every curve reached (a
    sweep stops at its own saturation), so side-by-side panels compare like with like."""
    common = set.intersection(*({rate for rate, _ in curve} for curve in curves.values()))
    load = max(common) if common else None
    return [(name, dict(curve).get(load, curve[-1][1])) for name, curve in curves.items()]


def collective_table(rows):
    """The nccl-tests-style table of ``rows`` (dicts of size, cycles, algbw, busbw,
    fraction, wrong, and optionally the chunks chosen; algbw, busbw and fraction may be
    None, shown as "-"), as lines."""
    chunks = any("chunks" in r for r in rows)
    lines = [f"  {'size (B)':>10}{'cycles':>10}{'algbw B/c':>11}{'busbw B/c':>11}"
             f"{'of bound':>10}{'#wrong':>8}" + (f"{'chunks':>8}" if chunks else "")]

    def cell(value, width, spec):
        return f"{'-':>{width}}" if value is None else f"{value:>{width}{spec}}"

    for r in rows:
        lines.append(f"  {r['size']:>10,}{r['cycles']:>10,}{cell(r['algbw'], 11, '.3f')}"
                     f"{cell(r['busbw'], 11, '.3f')}{cell(r['fraction'], 10, '.1%')}"
                     f"{r['wrong']:>8}" + (f"{r.get('chunks', '-'):>8}" if chunks else ""))
    return lines


def _heat_size(n_chips, rows):
    return max(6.0, 0.45 * n_chips + 2.0), 1.0 + 0.55 * rows + 0.6


def _heat_map(fig, ax, util, row_labels, title):
    """One heat map: a row per link direction, a column per chip (whole-number ticks), the
    value written on each cell where the cells are wide enough to hold it."""
    image = ax.imshow(util, aspect="auto", vmin=0, vmax=1, cmap="viridis",
                      interpolation="nearest")
    n_chips = util.shape[1]
    step = max(1, -(-n_chips // 32))
    ax.set_xticks(range(0, n_chips, step))
    ax.set_yticks(range(len(row_labels)), row_labels)
    ax.set_xlabel("chip")
    ax.set_title(title)
    if n_chips <= 32:
        for (row, chip), value in np.ndenumerate(util):
            ax.text(chip, row, f"{value:.2f}", ha="center", va="center", fontsize=7,
                    color="black" if value > 0.6 else "white")
    fig.colorbar(image, ax=ax, label="flits/cycle")


def plot_links(utilization, topology, path, title):
    """A heat map per torus dimension of more than one chip, of ``utilization``
    [n_chips, 2*D] (flits per cycle out of each port): rows +a and -a, columns chips.
    Returns ``path``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    axes_used = [a for a, size in enumerate(topology.dims) if size > 1]
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(len(axes_used), 1,
                             figsize=_heat_size(topology.n_chips, 2 * len(axes_used)),
                             squeeze=False)
    for a, ax in zip(axes_used, axes[:, 0]):
        util = np.asarray(utilization)[:, 2 * a:2 * a + 2].T
        _heat_map(fig, ax, util, [f"+{'xyz'[a]}", f"-{'xyz'[a]}"],
                  f"{title}: dimension {'xyz'[a]}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_marked(path, text, *, begin, end, title="# Multi-chip systems"):
    """Put ``text`` between the ``begin`` and ``end`` marker lines of the document at
    ``path``, in place of what was there: a bench's own section of a hand-written page.
    A page without the markers gets them at its end; a missing page starts with
    ``title``."""
    path = Path(path)
    old = path.read_text() if path.exists() else f"{title}\n\n{begin}\n{end}\n"
    if begin not in old or end not in old:
        old = old.rstrip("\n") + f"\n\n{begin}\n{end}\n"
    head, rest = old.split(begin, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{begin}\n{text}{end}{tail}")
