"""Code coverage of compiled whole runs, for regressions: the coverage build option.

A regression seed that asks for code coverage runs its whole-run cases inside
:func:`collecting`; while it is active, every Verilator harness that
:mod:`sim.backends.compiled` builds gets Verilator's line (with branch) and toggle
coverage (:data:`FLAGS`), which are part of the build's cache key, so the coverage
build sits beside the plain one and plain runs never use it. Each run of such a build
writes its ``coverage.dat``; its points are summed per build, and when
:func:`collecting` ends they are written to ``<folder>/<prefix>.<build>.dat`` (one file per
build a seed used, its points' ``f`` field naming the build), beside which
``<prefix>.<build>.src.json`` gives the ``hdl/`` line owning each line of the build's
``design.v`` (:func:`sim.verilog.source_map.source_map`), for
:mod:`verif.regress.source_coverage`.

The test equipment (the harness module, the testbench) is built with coverage off, and
the points Verilator gives the wrappers of hierarchical blocks are dropped: what is
left is the block's own Verilog. Outside :func:`collecting` nothing changes: no flags,
no files, the plain builds' cache key.
"""

import json
import re
import shutil
from contextlib import contextmanager
from pathlib import Path

__all__ = ["FLAGS", "OPT", "collecting", "active", "source_map_of", "add_run", "relocate",
           "SOURCE_MAP",
           "HARNESS_OFF", "without_temporaries"]

#: Verilator's options of a coverage build: statement and branch points, and toggles.
FLAGS = ("--coverage-line", "--coverage-toggle")
#: The g++ optimization of a coverage build's hot code unless ``$TPU_RTL_OPT`` sets one: a
#: regression seed's runs are short, and a coverage build's C++ is several times a plain
#: one's, so -O3 would cost more compiling than it saves running.
OPT = "-Og"
#: The build folder's map of its ``design.v`` lines to ``hdl/`` lines.
SOURCE_MAP = "src.json"
#: Put before the test equipment (the harness module, the testbench): no points there.
HARNESS_OFF = "/*verilator coverage_off*/\n"
#: A declaration of one of Yosys' ``$`` names (its temporaries, Amaranth's unnamed
#: signals, the ``dump_module`` marker): no ``hdl`` line names it, so its toggles count
#: for nothing (:mod:`verif.regress.code_coverage` leaves them out), yet they are most of a
#: build's points (594,268 of the SparseCore tile's 858,535), and every run pays for each
#: point three times: registering it, writing it and reading it back.
_TEMPORARY = re.compile(r"^(\s*)((?:wire|reg)\b[^\\;]*\\\$[^;]*;)[ \t]*$", re.MULTILINE)

_TARGET = []        # the (folder, prefix, {build folder: points}) of each collecting()


def build_key():
    """What a coverage build adds to the cache key of a harness build besides
    :data:`FLAGS`: how the test equipment and the temporaries are left out, and the code
    making the source map (a build product)."""
    from ..verilog import source_map
    return [HARNESS_OFF, _TEMPORARY.pattern, SOURCE_MAP, Path(source_map.__file__).read_bytes()]


def without_temporaries(verilog):
    """``verilog`` with Verilator's coverage off for the declarations of ``$`` names, each
    on its own line, so every line keeps its number (the source map's, and the points')."""
    return _TEMPORARY.sub(r"\1/*verilator coverage_off*/ \2 /*verilator coverage_on*/",
                          verilog)


@contextmanager
def collecting(folder, *, prefix):
    """While active, compiled whole runs on Verilator use coverage builds; their points
    are summed per build and written to ``folder/<prefix>.<build>.dat`` when it ends."""
    if not isinstance(prefix, str) or not re.fullmatch(r"[\w.+-]+", prefix):
        raise ValueError(f"prefix must be a plain file name part, not {prefix!r}")
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    builds = {}
    _TARGET.append((folder, prefix, builds))
    try:
        yield folder
    finally:
        _TARGET.pop()
        for build, points in builds.items():
            _write(folder, prefix, build, points)


def active():
    """``(folder, prefix)`` of the active :func:`collecting`, or None."""
    return _TARGET[-1][:2] if _TARGET else None


def source_map_of(folder, plain, design):
    """Write the build ``folder``'s :data:`SOURCE_MAP`: the ``hdl/`` line owning each line
    of ``plain``, the text ``design()`` exported, which begins its ``design.v``
    (``design()`` exports it again, keeping the source attributes). A design whose
    attributed export does not align with the plain one gets an empty map (its points are
    then counted as no line's), with the reason in the file."""
    from ..verilog.source_map import _keeping_attributes, generated_lines, source_map
    with _keeping_attributes():
        attributed = design()[0]
    try:
        owners, error = source_map(attributed, plain), None
    except ValueError as failed:
        owners, error = {}, str(failed)
    (folder / SOURCE_MAP).write_text(json.dumps(
        {"lines": plain.count("\n"), "owners": owners, "generated": generated_lines(plain),
         "error": error}))


def add_run(build, dat):
    """Add the points of one run's ``dat`` (a coverage.dat of the coverage build in folder
    ``build``) to the active :func:`collecting`'s sums for that build (held in memory: a
    build's points can be tens of MB of text, and a seed runs a build many times).
    Every run of a build has the same points, so they are summed by their own keys here
    and renamed once, when written."""
    _read(dat, into=_TARGET[-1][2].setdefault(Path(build), {}))


def _write(folder, prefix, build, points):
    """Write ``folder/<prefix>.<build>.dat`` with the build's source map beside it: the
    points of its ``design.v`` only (not those Verilator gives the wrappers of hierarchical
    blocks), each naming the build in its file field."""
    target = folder / f"{prefix}.{build.name}.dat"
    where = _file_of(build, "design.v")
    lines = []
    for key, count in points.items():
        found = _FILE.search(key)
        if found is not None and found[2] == "design.v":
            lines.append(f"C '{key[:found.start(2)]}{where}{key[found.end(2):]}' {count}\n")
    with open(target, "w", encoding="latin-1") as f:
        f.write("# SystemC::Coverage-3\n")
        f.writelines(sorted(lines))
    srcmap = target.with_suffix(".src.json")
    if not srcmap.exists() and (build / SOURCE_MAP).exists():
        shutil.copy(build / SOURCE_MAP, srcmap)
    return target


_FILE = re.compile("(\x01f\x02)([^\x01]*)")


def _file_of(build, name):
    """A point's file field for the file ``name`` of the build in folder ``build``: the
    build's kind and folder, the same in every cache."""
    return f"{build.parent.name}/{build.name}/{name}"


def relocate(dat, target, build):
    """Move the coverage file ``dat`` of a run of the build in folder ``build`` to
    ``target``, each point's file field naming the build as :func:`_write` does
    (``<kind>/<build>/<file>``, not where the cache is): the seeds of one design then
    merge point by point wherever they were built, on any machine of a cluster."""
    def renamed(found):
        return f"{found[1]}{_file_of(Path(build), Path(found[2]).name)}"
    with open(dat, encoding="latin-1") as f, open(target, "w", encoding="latin-1") as out:
        for line in f:
            if line.startswith("C '"):
                end = line.rindex("'")
                line = f"C '{_FILE.sub(renamed, line[3:end])}{line[end:]}"
            out.write(line)
    Path(dat).unlink()


def _read(path, *, into):
    """Add the ``{key: count}`` of a coverage.dat (``C '<key>' <count>`` lines) to ``into``."""
    with open(path, encoding="latin-1") as f:
        for line in f:
            if line.startswith("C '"):
                end = line.rindex("'")
                key = line[3:end]
                into[key] = into.get(key, 0) + int(line[end + 1:])
