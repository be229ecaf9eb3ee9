"""The merged functional coverage of a regression of several suites: one database, its JSON,
and its UCIS XML export.

Each seed's run writes cocotb-coverage XML (``seeds/<seed>/<run>.cov.xml``). The
database (:func:`collect`) holds, per suite and coverpoint (or cross), every bin with
its hits summed over all seeds and the seed whose hits closed it (reached
``at_least``, seeds taken in order), so closure against seeds is known without merging
again. :func:`write_json` writes it as ``coverage.json``; :func:`write_ucis` as UCIS XML
(the Accellera Unified Coverage Interoperability Standard schema, through pyucis), one
covergroup per suite, one coverpoint or cross per coverpoint of the suite, one bin per
bin with its hit count.
"""

import ast
import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Coverpoint", "Bin", "read_xml", "collect", "closure", "suite_totals",
           "write_json", "read_json", "write_ucis", "read_ucis"]


@dataclass
class Bin:
    """One bin: its label (a tuple of labels for a cross), hits over every seed, and the
    seed after which its hits first reached the coverpoint's ``at_least`` (None: never)."""
    label: object
    hits: int = 0
    closed_by: int | str | None = None


@dataclass
class Coverpoint:
    """A coverpoint or cross (``axes``: the crossed coverpoints' names, else empty)."""
    name: str
    at_least: int = 1
    weight: int = 1
    bins: list = field(default_factory=list)
    axes: tuple = ()

    @property
    def covered(self):
        return sum(b.hits >= self.at_least for b in self.bins)

    @property
    def is_cross(self):
        return bool(self.axes)


def _label(text):
    """A cross bin's label is a tuple, written by cocotb-coverage as its repr."""
    if text.startswith("(") and text.endswith(")"):
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text
        if isinstance(value, tuple):
            return tuple(str(v) for v in value)
    return text


def read_xml(path):
    """``{name: Coverpoint}`` of one cocotb-coverage XML file, names without ``top.``."""
    points = {}
    for item in ET.parse(path).getroot().iter():
        if item.get("at_least") is None:
            continue
        name = item.get("abs_name").removeprefix("top.")
        point = Coverpoint(name, int(item.get("at_least")), int(item.get("weight", 1)))
        point.bins = [Bin(_label(b.get("bin")), int(b.get("hits", 0))) for b in item]
        points[name] = point
    return points


def _find_axes(point, siblings):
    """The names of the coverpoints ``point``'s tuple bins cross: for each position, the
    sibling (same group) whose bins hold every label seen there."""
    width = len(point.bins[0].label)
    group = point.name.rpartition(".")[0]
    axes = []
    for i in range(width):
        labels = {b.label[i] for b in point.bins}
        match = [s.name for s in siblings if s.name.rpartition(".")[0] == group and
                 not s.is_cross and s is not point and s.bins and
                 not isinstance(s.bins[0].label, tuple) and
                 labels <= {str(b.label) for b in s.bins}]
        unused = [name for name in match if name not in axes]   # a x b, not a x a
        if not unused:
            return ()
        axes.append(unused[0])
    return tuple(axes)


def _merge_into(points, seed_points, seed):
    for name, new in seed_points.items():
        point = points.setdefault(name, Coverpoint(name, new.at_least, new.weight))
        index = {b.label: b for b in point.bins}
        for b in new.bins:
            mine = index.get(b.label)
            if mine is None:
                mine = Bin(b.label)
                point.bins.append(mine)
                index[b.label] = mine
            mine.hits += b.hits
            if mine.closed_by is None and mine.hits >= point.at_least:
                mine.closed_by = seed


def collect(suites):
    """The database: ``{suite: {"seeds": [...], "points": {name: Coverpoint}}}`` from
    ``{suite: run folder}`` (each with ``seeds/<seed>/*.cov.xml``), seeds in numeric order."""
    database = {}
    for suite, folder in suites.items():
        seeds_dir = Path(folder) / "seeds"
        seeds = sorted((p for p in seeds_dir.iterdir() if p.is_dir()),
                       key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit()
                                      else 0, p.name)) if seeds_dir.is_dir() else []
        points, order = {}, []
        for folder_of_seed in seeds:
            files = sorted(folder_of_seed.glob("*.cov.xml"))
            if not files:
                continue
            seed = int(folder_of_seed.name) if folder_of_seed.name.isdigit() else \
                folder_of_seed.name
            order.append(seed)
            for path in files:
                _merge_into(points, read_xml(path), seed)
        for point in points.values():
            if point.bins and all(isinstance(b.label, tuple) for b in point.bins):
                point.axes = _find_axes(point, list(points.values()))
        database[suite] = {"seeds": order, "points": points}
    return database


def suite_totals(entry):
    """(bins hit, bins in all) of one suite's entry of the database."""
    points = entry["points"].values()
    return sum(p.covered for p in points), sum(len(p.bins) for p in points)


def closure(entry):
    """``[(seeds run, percent of the suite's bins covered)]`` after each seed, in order."""
    total = sum(len(p.bins) for p in entry["points"].values())
    closed = [b.closed_by for p in entry["points"].values() for b in p.bins]
    curve = []
    for k, seed in enumerate(entry["seeds"], 1):
        done = set(entry["seeds"][:k])
        curve.append((k, 100.0 * sum(c in done for c in closed if c is not None) / total
                      if total else 0.0))
    return curve


def _point_json(point):
    return {"name": point.name, "at_least": point.at_least, "weight": point.weight,
            "axes": list(point.axes),
            "bins": [{"bin": list(b.label) if isinstance(b.label, tuple) else b.label,
                      "hits": b.hits, "closed_by": b.closed_by} for b in point.bins]}


def write_json(database, path):
    """Write the database as JSON: per suite its seeds and coverpoints with every bin."""
    data = {"format": "tpu-rtl functional coverage 1", "suites": {
        suite: {"seeds": entry["seeds"], "bins_hit": suite_totals(entry)[0],
                "bins": suite_totals(entry)[1],
                "coverpoints": [_point_json(p) for p in entry["points"].values()]}
        for suite, entry in database.items()}}
    Path(path).write_text(json.dumps(data, indent=1))
    return path


def read_json(path):
    """The database :func:`write_json` wrote."""
    data = json.loads(Path(path).read_text())
    database = {}
    for suite, entry in data["suites"].items():
        points = {}
        for p in entry["coverpoints"]:
            point = Coverpoint(p["name"], p["at_least"], p["weight"], axes=tuple(p["axes"]))
            point.bins = [Bin(tuple(b["bin"]) if isinstance(b["bin"], list) else b["bin"],
                              b["hits"], b["closed_by"]) for b in p["bins"]]
            points[point.name] = point
        database[suite] = {"seeds": entry["seeds"], "points": points}
    return database


def _bin_name(label):
    return ",".join(label) if isinstance(label, tuple) else str(label)


def write_ucis(database, path, *, test="regress all"):
    """Write the database as UCIS XML (through pyucis): a design unit ``tpu_rtl`` and its
    instance, a covergroup (with one cover instance) per suite holding a coverpoint per
    coverpoint of the suite, named by its dotted path (``arith.fp32_add.tpu.a_class``),
    and a cross over its coverpoints per cross, each bin with its hits and ``at_least``."""
    from ucis import UCIS_HISTORYNODE_TEST, UCIS_TESTSTATUS_OK
    from ucis.flags_t import FlagsT
    from ucis.mem.mem_factory import MemFactory
    from ucis.scope_type_t import ScopeTypeT
    from ucis.source_t import SourceT
    from ucis.test_data import TestData
    from ucis.xml.xml_writer import XmlWriter

    db = MemFactory.create()
    node = db.createHistoryNode(None, "regress", "tpu-rtl regress", UCIS_HISTORYNODE_TEST)
    node.setTestData(TestData(teststatus=UCIS_TESTSTATUS_OK, toolcategory="tpu-rtl:regress",
                              date="20260101000000"))
    du = db.createScope("tpu_rtl", None, 1, SourceT.OTHER, ScopeTypeT.DU_MODULE,
                        FlagsT.ENABLED_STMT | FlagsT.ENABLED_BRANCH | FlagsT.ENABLED_COND |
                        FlagsT.ENABLED_EXPR | FlagsT.ENABLED_FSM | FlagsT.ENABLED_TOGGLE |
                        FlagsT.INST_ONCE | FlagsT.SCOPE_UNDER_DU)
    instance = db.createInstance("tpu_rtl", None, 1, SourceT.OTHER, ScopeTypeT.INSTANCE, du,
                                 FlagsT.INST_ONCE)
    for suite, entry in database.items():
        group = instance.createCovergroup(suite, None, 1, SourceT.OTHER)
        cover = group.createCoverInstance(suite, None, 1, SourceT.OTHER)
        made = {}
        points = entry["points"].values()
        for point in [p for p in points if not p.is_cross] + [p for p in points if p.is_cross]:
            if point.is_cross:
                scope = cover.createCross(point.name, None, point.weight, SourceT.OTHER,
                                          [made[a] for a in point.axes])
            else:
                scope = cover.createCoverpoint(point.name, None, point.weight, SourceT.OTHER)
            scope.setAtLeast(point.at_least)
            for b in point.bins:
                scope.createBin(_bin_name(b.label), None, point.at_least, b.hits,
                                _bin_name(b.label))
            made[point.name] = scope
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        XmlWriter().write(f, db)
    return path


def read_ucis(path):
    """``{suite: {coverpoint: {bin name: hits}}}`` read back from UCIS XML with pyucis."""
    from ucis.xml.xml_reader import XmlReader
    from ucis.scope_type_t import ScopeTypeT
    from ucis.cover_type_t import CoverTypeT
    db = XmlReader().read(str(path))
    found = {}
    for instance in db.scopes(ScopeTypeT.INSTANCE):
        for group in instance.scopes(ScopeTypeT.COVERGROUP):
            suite = found.setdefault(group.getScopeName(), {})
            for cover in group.scopes(ScopeTypeT.COVERINSTANCE):
                for point in cover.scopes(ScopeTypeT.COVERPOINT | ScopeTypeT.CROSS):
                    bins = suite.setdefault(point.getScopeName(), {})
                    for item in point.coverItems(CoverTypeT.CVGBIN):
                        bins[item.getName()] = item.getCoverData().data
    return found
