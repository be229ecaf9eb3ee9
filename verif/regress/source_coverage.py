"""Verilator code coverage carried back to the Amaranth source: ``hdl/**.py`` lines.

A seed's Verilator run writes ``<run>.dat`` (coverage points of the generated
Verilog) and the worker writes ``<run>.src.json`` beside it: the ``hdl/`` line that owns
each Verilog line (:func:`sim.verilog.source_map.source_map`). Here every point goes to
the Python line owning its Verilog line:

- **line**: a Python line is *reached* when anything it owns happened: a statement it
  owns executed (Verilator's ``line`` points, the blocks of processes), a branch it owns
  was taken (``branch``: ``if``/``else`` and ``?:`` arms) or a signal it declares
  toggled (``toggle``). Its count is the sum of all those counts, so 0 means none of
  them ever happened.
- **branch**: each Verilator branch point is a branch of its Python line (lcov ``BRDA``).
- **toggle**: each bit transition (0->1, 1->0) of a signal the line declares, counted
  once for the source: the bit has toggled when it did in any instance of any build (a
  lane's copy, the VPU inside a chip inside a system). This is the source-level question
  (does the Python signal's bit ever move?), as a line is reached when any instance of it
  runs; the per-instance, per-build figures are Verilator's own, which
  :mod:`.code_coverage` keeps (each suite's ``code_coverage.txt``, the closure table).

Points of the same build are summed over seeds; builds differ by their Verilog file.
Points that can never be covered (the ``$``-temporaries' own toggles, the branches of
Yosys' ``dump_module`` marker) are left out, as in :mod:`.code_coverage`. Points that no
``hdl`` line owns (ports and flops named only in Amaranth's files) are counted apart,
as are points of runs without a source map.

:func:`write_lcov` writes the lcov tracefile (genhtml, Codecov and editors read it);
:func:`write_cobertura` converts it with lcov-cobertura.
"""

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from verif.regress import code_coverage

__all__ = ["SourceCoverage", "collect", "signal_name", "write_lcov", "write_cobertura",
           "write_json", "parse_lcov", "CHECKOUT"]

#: The checkout whose ``hdl/`` the paths are relative to.
CHECKOUT = Path(__file__).resolve().parents[2]
KINDS = ("line", "branch", "toggle")


@dataclass
class SourceCoverage:
    """Per ``hdl/`` file: ``lines`` {line: count}, ``branches`` {line: [counts]},
    ``toggles`` {line: (bit transitions seen, bit transitions)} counted once for the
    source (module docstring), ``holes`` {line: {signal: transitions never seen}} (by the
    signal's name in its module: what to read when a line's toggles fall short);
    ``unowned`` {kind: (hit, total)} of points no hdl line owns; ``runs`` the coverage
    files read, ``unmapped_runs`` those without a source map."""
    lines: dict = field(default_factory=lambda: defaultdict(dict))
    branches: dict = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))
    toggles: dict = field(default_factory=lambda: defaultdict(dict))
    holes: dict = field(default_factory=lambda: defaultdict(lambda: defaultdict(Counter)))
    unowned: dict = field(default_factory=dict)
    runs: int = 0
    unmapped_runs: list = field(default_factory=list)

    def files(self):
        return sorted(self.lines)

    def file_summary(self, path):
        """``{kind: (hit, total)}`` of one file."""
        lines = self.lines[path]
        branches = [c for counts in self.branches[path].values() for c in counts]
        toggles = self.toggles[path].values()
        return {"line": (sum(c > 0 for c in lines.values()), len(lines)),
                "branch": (sum(c > 0 for c in branches), len(branches)),
                "toggle": (sum(h for h, _ in toggles), sum(t for _, t in toggles))}

    def blocks(self):
        """``{block: {kind: (hit, total)}}``, a block being a folder of ``hdl/`` (``arith``,
        ``lib``, ...)."""
        result = {}
        for path in self.files():
            block = path.split("/")[1] if path.count("/") > 1 else "hdl"
            sums = result.setdefault(block, {k: (0, 0) for k in KINDS})
            for kind, (hit, total) in self.file_summary(path).items():
                sums[kind] = (sums[kind][0] + hit, sums[kind][1] + total)
        return result


_FILE = re.compile("\x01f\x02([^\x01]*)")     # a point key's Verilog file field


def signal_name(point, *, scope=True):
    """The Verilog signal of a toggle point (its :func:`~.code_coverage.fields`), readable:
    its scope below the block's top (unless not ``scope``) and its name, without the bit
    and the transition, and with Verilator's ``__0XX`` escapes of Amaranth's characters
    (``.``, ``$``, ``_``) undone: ``dma.check.quick.address``."""
    name = re.sub(r"\[\d+\]$", "", point.get("o", "").rsplit(":", 1)[0])
    scope = point.get("h", "").split(".")[4:] if scope else ()  # below TOP.tb.dut.dut
    return _ESCAPE.sub(lambda m: chr(int(m[1], 16)), ".".join((*scope, name)))


_ESCAPE = re.compile("__0([0-9a-fA-F]{2})")


def _source_lines(path):
    try:
        return (CHECKOUT / path).read_text().count("\n") + 1
    except OSError:
        return 0


def collect(dats):
    """The :class:`SourceCoverage` of the Verilator coverage files ``dats`` (each with its
    ``.src.json`` beside it)."""
    owners_of, generated_of, points = {}, {}, Counter()
    result = SourceCoverage()
    for dat in map(Path, dats):
        seen = code_coverage.read(dat)
        points.update(seen)
        result.runs += 1
        srcmap = dat.with_suffix(".src.json")
        mapped = json.loads(srcmap.read_text()) if srcmap.exists() else None
        if mapped is None:
            result.unmapped_runs.append(str(dat))
        if mapped is not None:
            for verilog in {found[1] for found in map(_FILE.search, seen) if found}:
                owners_of.setdefault(verilog, mapped["owners"])
                generated_of.setdefault(verilog, set(map(str, mapped.get("generated", ()))))
    unowned = {k: [0, 0] for k in KINDS}
    # path -> line -> the signal's bit and transition ("o": "data[3]:0->1") -> toggled in
    # any instance of any build
    toggled = defaultdict(lambda: defaultdict(dict))
    lengths = {}
    for key, count in points.items():
        f = code_coverage.fields(key)
        if code_coverage.generated(f) or f.get("l") in generated_of.get(f.get("f"), ()):
            continue
        kind = f.get("t", "?")
        if kind not in KINDS:
            continue
        owner = owners_of.get(f.get("f"), {}).get(f.get("l", ""))
        path, _, line = owner.rpartition(":") if owner else ("", "", "")
        if owner and path not in lengths:
            lengths[path] = _source_lines(path)
        if not owner or not line.isdigit() or not 1 <= int(line) <= lengths[path]:
            unowned[kind][0] += count > 0
            unowned[kind][1] += 1
            continue
        line = int(line)
        result.lines[path][line] = result.lines[path].get(line, 0) + count
        if kind == "branch":
            result.branches[path][line].append(count)
        elif kind == "toggle":
            bits = toggled[path][line]
            bits[f.get("o", "")] = bits.get(f.get("o", ""), False) or count > 0
    for path, per_line in toggled.items():
        result.toggles[path] = {line: (sum(bits.values()), len(bits))
                                for line, bits in per_line.items()}
        for line, bits in per_line.items():
            for o in (o for o, seen in bits.items() if not seen):
                result.holes[path][line][signal_name({"o": o}, scope=False)] += 1
    result.unowned = {k: tuple(v) for k, v in unowned.items()}
    return result


def write_lcov(coverage, path, *, test="regress"):
    """Write the lcov tracefile: per ``hdl/`` file its lines (``DA``) and branches
    (``BRDA``), paths relative to the checkout."""
    out = [f"TN:{test}"]
    for source in coverage.files():
        lines = coverage.lines[source]
        out.append(f"SF:{source}")
        branches = coverage.branches[source]
        taken = 0
        for block, line in enumerate(sorted(branches)):
            for number, count in enumerate(branches[line]):
                out.append(f"BRDA:{line},{block},{number},{count}")
                taken += count > 0
        for line in sorted(lines):
            out.append(f"DA:{line},{lines[line]}")
        total = sum(len(v) for v in branches.values())
        out += [f"BRF:{total}", f"BRH:{taken}", f"LF:{len(lines)}",
                f"LH:{sum(c > 0 for c in lines.values())}", "end_of_record"]
    Path(path).write_text("\n".join(out) + "\n")
    return Path(path)


def parse_lcov(path):
    """``{file: {"lines": {line: count}, "branches": [(line, block, branch, taken)]}}`` of
    an lcov tracefile, checking its record structure (a ValueError names the bad line)."""
    records, current = {}, None
    for number, raw in enumerate(Path(path).read_text().splitlines(), 1):
        tag, _, value = raw.partition(":")
        if tag == "TN":
            continue
        if tag == "SF":
            if current is not None:
                raise ValueError(f"line {number}: SF inside the record of {current}")
            current = value
            records[current] = {"lines": {}, "branches": []}
        elif tag == "end_of_record":
            if current is None:
                raise ValueError(f"line {number}: end_of_record outside a record")
            current = None
        elif current is None:
            raise ValueError(f"line {number}: {tag} outside a record")
        elif tag == "DA":
            line, count = value.split(",")[:2]
            records[current]["lines"][int(line)] = int(count)
        elif tag == "BRDA":
            line, block, branch, taken = value.split(",")
            records[current]["branches"].append(
                (int(line), int(block), int(branch), 0 if taken == "-" else int(taken)))
        elif tag in ("LF", "LH", "BRF", "BRH", "FN", "FNDA", "FNF", "FNH"):
            int(value.split(",")[0])
        else:
            raise ValueError(f"line {number}: unknown record {tag!r}")
    if current is not None:
        raise ValueError(f"the record of {current} has no end_of_record")
    return records


def write_cobertura(lcov, path):
    """Convert the lcov tracefile ``lcov`` to Cobertura XML (lcov-cobertura)."""
    from lcov_cobertura import LcovCobertura
    # lcov-cobertura names a file relative to base_dir from its absolute path.
    text = "\n".join(f"SF:{CHECKOUT / line[3:]}" if line.startswith("SF:") else line
                     for line in Path(lcov).read_text().splitlines()) + "\n"
    xml = LcovCobertura(text, base_dir=str(CHECKOUT)).convert()
    Path(path).write_text(xml)
    return Path(path)


def write_json(coverage, path):
    """Write the per-block and per-file figures, the unowned points and the lines never
    reached."""
    data = {"blocks": {b: {k: list(v) for k, v in s.items()}
                       for b, s in coverage.blocks().items()},
            "files": {p: {k: list(v) for k, v in coverage.file_summary(p).items()}
                      for p in coverage.files()},
            "never_reached": {p: sorted(line for line, c in coverage.lines[p].items() if c == 0)
                              for p in coverage.files()},
            "toggle_holes": {p: {str(line): dict(signals.most_common())
                                 for line, signals in sorted(coverage.holes[p].items())}
                             for p in coverage.files() if coverage.holes[p]},
            "unowned": {k: list(v) for k, v in coverage.unowned.items()},
            "runs": coverage.runs, "unmapped_runs": coverage.unmapped_runs}
    Path(path).write_text(json.dumps(data, indent=1))
    return Path(path)
