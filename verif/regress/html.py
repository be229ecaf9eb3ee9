"""The static HTML report of ``regress all``: plain files, no server, no scripts.

``index.html``: the closure table (a row per suite), a closure-against-seeds plot per
suite (PNG), the failing seeds with links to their logs, waves and the command that
reproduces each, and the code coverage on the Amaranth source per block and file.
``suite-<suite>.html``: every coverpoint of the suite, those with empty bins first and
their empty bins first, crosses of two coverpoints as grids. ``src/<hdl path>.html``:
a ``hdl`` file's source with, per line, the hits of what it owns (see
:mod:`.source_coverage`), its branches and its toggled bits.
"""

import html
import time
from pathlib import Path

from verif.regress import functional

__all__ = ["write_report", "write_redirect", "plot_closure"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 80em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th { background: #eee; } td.l, th.l { text-align: left; }
.ok { background: #dff3dc; } .bad { background: #f9d6d5; } .none { color: #999; }
.warn { background: #fcefc7; }
pre.src { font-size: 0.85em; line-height: 1.35; }
pre.src span.n { color: #999; display: inline-block; width: 4em; text-align: right; }
pre.src span.c { display: inline-block; width: 7em; text-align: right; margin-right: 1em; }
code { background: #f4f4f4; padding: 0 0.2em; }
img { border: 1px solid #ddd; margin: 0.3em; }
table.grid td { padding: 0.1em 0.35em; font-size: 0.85em; }
"""


def _page(title, body):
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>\n"
            f"<body>\n<h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n")


def _e(value):
    return html.escape(str(value))


def _pct(hit, total):
    return f"{100 * hit / total:.1f}%" if total else "-"


def _cls(hit, total, goal=100.0):
    """The cell's class: ``none`` without points, else ``ok`` or ``bad`` against ``goal``
    (no colour when ``goal`` is None)."""
    if not total:
        return "none"
    if goal is None:
        return "plain"
    return "ok" if 100 * hit / total >= goal else "bad"


#: The goals of the code coverage on the source (docs/regress.md): lines and toggles.
SOURCE_GOALS = {"line": 95.0, "branch": None, "toggle": 90.0}


def plot_closure(database, folder):
    """A PNG per suite of its bins covered (percent) against the seeds run; their paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    paths = {}
    for suite, entry in database.items():
        curve = functional.closure(entry)
        if not curve:
            continue
        fig, ax = plt.subplots(figsize=(4.2, 2.8))
        ax.plot([k for k, _ in curve], [p for _, p in curve], "o-")
        ax.set_xlabel("seeds")
        ax.set_ylabel("bins covered (%)")
        ax.set_ylim(0, 102)
        ax.set_xlim(0.5, max(1.5, len(curve) + 0.5))
        if len(curve) <= 16:
            ax.set_xticks(range(1, len(curve) + 1))
        else:
            ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_title(f"{suite}: closure against seeds")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = Path(folder) / f"closure-{suite}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths[suite] = path
    return paths


def _passed_class(regression):
    """``none`` for a suite none of whose seeds ran (a run stopped early), else ``ok``
    when every seed passed, ``bad`` otherwise."""
    if not regression.outcomes:
        return "none"
    return "bad" if regression.failed else "ok"


def _closure_table(campaign):
    goal = campaign.goal if campaign.goal is not None else 100.0
    rows = ["<tr><th class=l>suite</th><th>seeds</th><th>passed</th><th>bins hit / total</th>"
            "<th>functional</th><th class=l>Verilator code coverage (generated Verilog)</th></tr>"]
    for suite, regression in campaign.regressions.items():
        hit, total = functional.suite_totals(campaign.database[suite]) \
            if suite in campaign.database else (0, 0)
        passed = len(regression.outcomes) - len(regression.failed)
        code = ", ".join(f"{kind} {_pct(h, t)}" for kind, (h, t)
                         in (regression.code_coverage or {}).items() if t) or "-"
        rows.append(f"<tr><td class=l><a href=\"suite-{_e(suite)}.html\">{_e(suite)}</a></td>"
                    f"<td>{len(regression.outcomes)}</td>"
                    f"<td class={_passed_class(regression)}>{passed}</td>"
                    f"<td>{hit:,} / {total:,}</td><td class={_cls(hit, total, goal)}>"
                    f"{_pct(hit, total)}</td><td class=l>{_e(code)}</td></tr>")
    return "<table>" + "\n".join(rows) + "</table>"


def _failures(campaign, report):
    rows = []
    for suite, regression in campaign.regressions.items():
        for outcome in regression.failed:
            folder = regression.out / "seeds" / str(outcome.seed)
            links = [f"<a href=\"{_e(_rel(folder / 'worker.log', report))}\">log</a>"]
            for wave in sorted(folder.glob("*.vcd")) + sorted(folder.glob("*.fst")):
                links.append(f"<a href=\"{_e(_rel(wave, report))}\">{_e(wave.name)}</a>")
            message = (outcome.message or "").splitlines()[0][:300] if outcome.message else ""
            rows.append(f"<tr><td class=l>{_e(suite)}</td><td>{_e(outcome.seed)}</td>"
                        f"<td class='l bad'>{_e(outcome.status)}</td><td class=l>{_e(message)}"
                        f"</td><td class=l>{' '.join(links)}</td><td class=l><code>"
                        f"{_e(regression.repro.get(outcome.seed, ''))}</code></td></tr>")
    if not rows:
        return "<p>Every seed passed.</p>"
    return ("<table><tr><th class=l>suite</th><th>seed</th><th class=l>status</th>"
            "<th class=l>first failure</th><th class=l>files</th><th class=l>reproduce</th>"
            "</tr>" + "\n".join(rows) + "</table>"
            "<p>Waves are kept when the regression ran with <code>--waves</code>; the "
            "reproduce command reruns the seed (add <code>--waves</code> for them).</p>")


def _rel(path, report):
    """``path`` relative to the report folder (both absolute or both relative to one cwd)."""
    import os
    return os.path.relpath(Path(path).resolve(), Path(report).resolve())


def _source_section(campaign):
    source = campaign.source
    if source is None:
        return ("<p>No Verilator code coverage in this run (it comes from the suites whose "
                "seeds run cocotb programs on Verilator: arith and mxu).</p>")
    rows = ["<tr><th class=l>block</th><th>lines reached</th><th>line</th><th>branches</th>"
            "<th>branch</th><th>bits toggled</th><th>toggle</th></tr>"]
    for block, sums in sorted(source.blocks().items()):
        cells = []
        for kind, goal in SOURCE_GOALS.items():
            hit, total = sums[kind]
            cells.append(f"<td>{hit:,} / {total:,}</td><td class={_cls(hit, total, goal)}>"
                         f"{_pct(hit, total)}</td>")
        rows.append(f"<tr><td class=l>hdl/{_e(block)}</td>{''.join(cells)}</tr>")
    files = ["<tr><th class=l>file</th><th>line</th><th>branch</th><th>toggle</th>"
             "<th class=l>never reached</th></tr>"]
    for path in source.files():
        s = source.file_summary(path)
        never = [line for line, c in sorted(source.lines[path].items()) if c == 0]
        files.append(f"<tr><td class=l><a href=\"src/{_e(path)}.html\">{_e(path)}</a></td>"
                     + "".join(f"<td class={_cls(*s[k], goal)}>{_pct(*s[k])}</td>"
                               for k, goal in SOURCE_GOALS.items())
                     + f"<td class=l>{_e(', '.join(map(str, never)) or '-')}</td></tr>")
    unowned = ", ".join(f"{kind} {hit:,} of {total:,} hit" for kind, (hit, total)
                        in source.unowned.items() if total) or "none"
    return ("<p>Verilator's points carried back to the Python lines of <code>hdl/</code> "
            "that own them (a line is reached when a statement it owns ran, a branch it owns "
            "was taken or a signal it declares toggled). Also written as "
            "<a href=\"../lcov.info\">lcov.info</a> and <a href=\"../cobertura.xml\">"
            "cobertura.xml</a>.</p><table>" + "\n".join(rows) + "</table>"
            f"<p>Points that no <code>hdl</code> line owns (Amaranth's own ports, flops "
            f"and temporaries): {_e(unowned)}. Runs read: {source.runs}"
            + (f", {len(source.unmapped_runs)} without a source map" if source.unmapped_runs
               else "") + ".</p><table>" + "\n".join(files) + "</table>")


def _bin_label(b):
    return " x ".join(b.label) if isinstance(b.label, tuple) else b.label


def _bin_rows(point, *, only_empty=False):
    rows = []
    for b in sorted(point.bins, key=lambda b: (b.hits >= point.at_least,)):
        if only_empty and b.hits >= point.at_least:
            continue
        rows.append(f"<tr><td class=l>{_e(_bin_label(b))}</td><td class="
                    f"{'ok' if b.hits >= point.at_least else 'bad'}>{b.hits:,}</td>"
                    f"<td>{_e(b.closed_by if b.closed_by is not None else '-')}</td></tr>")
    return ("<table><tr><th class=l>bin</th><th>hits</th><th>closed by seed</th></tr>"
            + "\n".join(rows) + "</table>")


def _grid(point):
    """A cross of two coverpoints as a grid: rows the first's bins, columns the second's."""
    rows_l = list(dict.fromkeys(b.label[0] for b in point.bins))
    cols_l = list(dict.fromkeys(b.label[1] for b in point.bins))
    hits = {b.label: b.hits for b in point.bins}
    head = "<tr><th></th>" + "".join(f"<th>{_e(c)}</th>" for c in cols_l) + "</tr>"
    body = []
    for r in rows_l:
        cells = []
        for c in cols_l:
            if (r, c) not in hits:
                cells.append("<td class=none>&middot;</td>")
            else:
                n = hits[(r, c)]
                cells.append(f"<td class={'ok' if n >= point.at_least else 'bad'}>{n:,}</td>")
        body.append(f"<tr><th class=l>{_e(r)}</th>{''.join(cells)}</tr>")
    return (f"<p>rows: {_e(point.axes[0])}, columns: {_e(point.axes[1])}</p>"
            f"<table class=grid>{head}{''.join(body)}</table>")


def _suite_page(suite, entry, regression):
    points = sorted(entry["points"].values(),
                    key=lambda p: (p.covered == len(p.bins), p.name))
    hit, total = functional.suite_totals(entry)
    parts = [f"<p><a href=\"index.html\">back to the closure table</a>. {hit:,} of "
             f"{total:,} bins covered ({_pct(hit, total)}) over seeds "
             f"{_e(', '.join(map(str, entry['seeds'])) or '-')}. Coverpoints with empty bins "
             f"come first, and their empty bins first.</p>"]
    holes = [(p, b) for p in points for b in p.bins if b.hits < p.at_least]
    if holes:
        parts.append("<h2>Uncovered bins</h2><ul>" + "".join(
            f"<li><code>{_e(p.name)}</code>: {_e(_bin_label(b))}</li>" for p, b in holes)
            + "</ul>")
    for point in points:
        kind = "cross" if point.is_cross else "coverpoint"
        parts.append(f"<h2 id=\"{_e(point.name)}\">{kind} <code>{_e(point.name)}</code>: "
                     f"{point.covered} / {len(point.bins)}"
                     f"{'' if point.at_least == 1 else f' (at least {point.at_least} hits)'}"
                     f"</h2>")
        if point.is_cross and len(point.axes) == 2:
            parts.append(_grid(point))
            if point.covered < len(point.bins):
                parts.append(_bin_rows(point, only_empty=True))
        else:
            parts.append(_bin_rows(point))
    return _page(f"regress all: {suite} functional coverage", "\n".join(parts))


def _source_page(source, path):
    from verif.regress.source_coverage import CHECKOUT
    lines = source.lines[path]
    branches = source.branches[path]
    toggles = source.toggles[path]
    text = (CHECKOUT / path).read_text().splitlines()
    out = []
    for number, line in enumerate(text, 1):
        if number in lines:
            count = lines[number]
            extra = []
            if number in branches:
                extra.append("branches " + "/".join(f"{c:,}" for c in branches[number]))
            if number in toggles:
                extra.append(f"toggled {toggles[number][0]}/{toggles[number][1]} bits")
            holes = source.holes[path].get(number)
            if holes:
                extra.append("never toggled: " + ", ".join(
                    f"{signal} ({n})" for signal, n in holes.most_common(8))
                    + (", ..." if len(holes) > 8 else ""))
            cls = "ok" if count else "bad"
            title = f" title=\"{_e('; '.join(extra))}\"" if extra else ""
            out.append(f"<span class={cls}{title}><span class=n>{number}</span>"
                       f"<span class=c>{count:,}</span>{_e(line)}</span>")
        else:
            out.append(f"<span><span class=n>{number}</span><span class=c></span>{_e(line)}"
                       f"</span>")
    summary = source.file_summary(path)
    head = ", ".join(f"{k} {h:,} / {t:,} ({_pct(h, t)})" for k, (h, t) in summary.items())
    depth = "../" * (path.count("/") + 1)
    return _page(path, f"<p><a href=\"{depth}index.html\">back</a>. {_e(head)}. A count is "
                       f"the sum of what the line owns (statements run, branches taken, bit "
                       f"toggles); hover for its branches and toggles. Lines without a count "
                       f"own no coverage point.</p>\n<pre class=src>" + "\n".join(out)
                 + "</pre>")


def write_report(campaign, folder):
    """Write the report into ``folder``; returns the path of its ``index.html``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    plots = plot_closure(campaign.database, folder)
    for suite, entry in campaign.database.items():
        (folder / f"suite-{suite}.html").write_text(
            _suite_page(suite, entry, campaign.regressions.get(suite)))
    if campaign.source is not None:
        for path in campaign.source.files():
            target = folder / "src" / f"{path}.html"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(_source_page(campaign.source, path))
    goal = "no goal" if campaign.goal is None else f"goal {campaign.goal:g}%"
    status = []
    if campaign.failed:
        status.append(f"failing seeds in {', '.join(campaign.failed)}")
    if campaign.short:
        status.append(f"below the goal: {', '.join(campaign.short)}")
    if campaign.interrupted:
        status.append("interrupted: the reports cover the seeds that finished")
    verdict = ("<p class=bad>" + _e("; ".join(status)) + "</p>") if status else \
        "<p class=ok>Every seed passed and every suite reached the goal.</p>"
    images = "".join(f"<img src=\"{p.name}\" alt=\"closure of {_e(s)}\">"
                     for s, p in plots.items())
    body = (f"<p>Run folder <code>{_e(campaign.out)}</code>, simulator {_e(campaign.sim)}, "
            f"{_e(goal)}, written {time.strftime('%Y-%m-%d %H:%M:%S')}. Merged functional "
            f"coverage: <a href=\"../coverage.json\">coverage.json</a>, UCIS "
            f"<a href=\"../coverage.ucis.xml\">coverage.ucis.xml</a>; the closure table as "
            f"text: <a href=\"../summary.txt\">summary.txt</a>.</p>{verdict}"
            f"<h2>Closure</h2>{_closure_table(campaign)}"
            f"<h2>Closure against seeds</h2><p>{images or 'no seeds ran.'}</p>"
            f"<h2>Failing seeds</h2>{_failures(campaign, folder)}"
            f"<h2>Code coverage on the Amaranth source</h2>{_source_section(campaign)}")
    index = folder / "index.html"
    index.write_text(_page("tpu-rtl regress all", body))
    return index


def write_redirect(index, link):
    """A page at ``link`` that sends the browser to ``index`` (relative), so that
    ``build/regress/report/index.html`` always opens the newest report."""
    link = Path(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    target = _rel(index, link.parent)
    link.write_text(f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
                    f"<meta http-equiv=\"refresh\" content=\"0; url={_e(target)}\">"
                    f"<title>tpu-rtl regress all</title></head><body><p>The newest report: "
                    f"<a href=\"{_e(target)}\">{_e(target)}</a></p></body></html>\n")
    return link
