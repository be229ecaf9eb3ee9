"""Which Python line of ``hdl/`` each line of an exported Verilog text comes from.

Amaranth writes ``(* src = "file:line" *)`` attributes naming the Python statement
that made each wire, register, cell and process; the export leaves them out
(:func:`sim.verilog.export.export`), so the same export with them
(:func:`export_with_source`) is the plain text plus attribute lines and inline
attributes. :func:`source_map` removes them again, checks that what is left is the
plain text line for line, and gives each plain line the ``hdl/`` line that owns it:

1. an attribute on the line itself, or on the attribute lines just above it;
2. else, for ``assign x = ...``, the line that declared ``x``;
3. else, for a line of an ``always`` process (the ``if`` and ``case`` lines of its
   branches included), the line that declared the first signal the process assigns.

Attributes that name Amaranth's own files, or files outside ``hdl/``, own nothing: such
lines (a reset synchronizer Amaranth adds, a port's buffer) have no source line.
"""

import re
from contextlib import contextmanager
from pathlib import Path

__all__ = ["export_with_source", "source_map", "generated_lines", "split_attributes",
           "HDL_ROOT"]

#: The folder whose Python files own lines: the ``hdl`` package of this checkout.
HDL_ROOT = Path(__file__).resolve().parents[2] / "hdl"

_ATTR_LINE = re.compile(r"^\s*(\(\*\s*(\w+)\s*=\s*(.*?)\s*\*\)\s*)+$")
_ONE_ATTR = re.compile(r"\(\*\s*(\w+)\s*=\s*(.*?)\s*\*\)")
_INLINE_SRC = re.compile(r'\(\* src = "([^"]*)" \*\) ')
_DROPPED = {"src", "top", "generator"}
_NAME = r"(\\\S+ |[A-Za-z_$][\w$]*)"
_DECL = re.compile(rf"^\s*(?:wire|reg|input|output|inout)\b(?:\s+signed)?(?:\s*\[[^\]]*\])?\s*"
                   rf"{_NAME}")
_ASSIGN = re.compile(rf"^\s*assign\s+{_NAME}")
_LHS = re.compile(rf"^\s*{_NAME}\s*(?:\[[^\]]*\]\s*)?<?=")
_MODULE = re.compile(r"^module\s+(\S+?)\s*\(")


@contextmanager
def _keeping_attributes():
    """Make :func:`sim.verilog.repeated.convert` keep Amaranth's attributes for a while.

    Done from here rather than by an argument of the export: the export's code is part of
    the key of every cached simulator build (:mod:`sim.backends.compiled`), so editing it
    would make every user rebuild every harness."""
    from amaranth.back import verilog
    from . import repeated

    class Keeping:
        @staticmethod
        def convert(*args, **kwargs):
            return verilog.convert(*args, **{**kwargs, "emit_src": True,
                                             "strip_internal_attrs": False})

    repeated.verilog = Keeping
    try:
        yield
    finally:
        repeated.verilog = verilog


def export_with_source(block, params=None):
    """``(plain, with attributes)``: the Verilog text of ``block`` as
    :func:`sim.verilog.export.export` writes it, and the same export keeping Amaranth's
    source attributes."""
    from .export import export
    plain = export(block, params).verilog
    with _keeping_attributes():
        attributed = export(block, params).verilog
    return plain, attributed


def split_attributes(text):
    """(plain lines, [srcs of each plain line]) of a Verilog text with source attributes:
    the ``src``, ``top`` and ``generator`` attribute lines and the inline ``src``
    attributes removed, each plain line keeping the srcs that were on it or just above."""
    plain, owners, pending = [], [], []
    for line in text.splitlines():
        match = _ATTR_LINE.match(line)
        if match:
            attrs = _ONE_ATTR.findall(line)
            if all(name in _DROPPED for name, _ in attrs):
                pending += [value.strip('"') for name, value in attrs if name == "src"]
                continue
        inline = _INLINE_SRC.findall(line)
        plain.append(_INLINE_SRC.sub("", line))
        owners.append(pending + inline)
        pending = []
    return plain, owners


def _hdl_line(srcs, root):
    """The first of ``srcs`` (each ``file:line``, maybe several joined by ``|``) inside
    ``root``, as ``<root's name>/<path>:<line>`` (``hdl/...``); None if none is."""
    for src in srcs:
        for part in src.split("|"):
            path, _, line = part.rpartition(":")
            line = line.split(".")[0]
            try:
                relative = Path(path).resolve().relative_to(root)
            except ValueError:
                continue
            if line.isdigit():
                return f"{root.name}/{relative.as_posix()}:{line}"
    return None


def source_map(text, plain=None, *, root=HDL_ROOT):
    """``{line number of the plain text: "hdl/<file>.py:<line>"}`` for the Verilog ``text``
    exported with the source attributes (:func:`export_with_source`). ``plain`` (the
    export without them), when given, must be what is left of ``text`` once the
    attributes are removed; ValueError otherwise. ``root`` is the folder whose files own
    lines (named from its own name: ``hdl/...``)."""
    lines, srcs = split_attributes(text)
    if plain is not None and lines != plain.splitlines():
        first = next((i for i, (a, b) in enumerate(zip(lines, plain.splitlines())) if a != b),
                     min(len(lines), len(plain.splitlines())))
        raise ValueError(f"the Verilog with source attributes does not align with the plain "
                         f"export (line {first + 1} differs)")
    root = Path(root).resolve()
    direct = [_hdl_line(s, root) for s in srcs]
    declared, module = {}, None
    for i, line in enumerate(lines):
        m = _MODULE.match(line)
        if m:
            module = m.group(1)
        m = _DECL.match(line)
        if m and direct[i] is not None:
            declared.setdefault((module, m.group(1).strip()), direct[i])
    owner, module, i, late = {}, None, 0, []
    while i < len(lines):
        line = lines[i]
        m = _MODULE.match(line)
        if m:
            module = m.group(1)
        if direct[i] is not None:
            owner[i + 1] = direct[i]
        m = _DECL.match(line)
        if m and i + 1 not in owner:
            found = declared.get((module, m.group(1).strip()))
            if found:
                owner[i + 1] = found
        m = _ASSIGN.match(line)
        if m and i + 1 not in owner:
            found = declared.get((module, m.group(1).strip()))
            if found:
                owner[i + 1] = found
        if line.lstrip().startswith("always"):
            body = _process(lines, i)
            assigned = [m.group(1).strip() for m in map(_LHS.match, (lines[j] for j in body))
                        if m]
            target = next((declared[(module, name)] for name in assigned
                           if (module, name) in declared), None)
            if target is None and assigned:     # a temporary: owned by what it feeds
                late.append((i, body, module, assigned[0]))
            for j in [i, *body]:
                if direct[j] is not None:
                    owner[j + 1] = direct[j]
                elif target is not None:
                    owner[j + 1] = target
            i = max([i, *body]) + 1
            continue
        i += 1
    for start, body, module, name in late:
        fed = _reader(lines, owner, module, name)
        for j in [start, *body]:
            if j + 1 not in owner and fed is not None:
                owner[j + 1] = fed
    # Yosys' `dump_module` marker (an empty `if` on a constant) is no one's.
    return {n: o for n, o in owner.items() if "dump_module" not in lines[n - 1]}


def generated_lines(text):
    """Line numbers of ``text`` (either export) holding Yosys' ``dump_module`` marker: the
    points there can never be covered."""
    return [n for n, line in enumerate(text.splitlines(), 1) if "dump_module" in line]


def _reader(lines, owner, module, name):
    """The owner of the line of ``module`` that takes temporary ``name`` whole (``x <= name;``
    or ``assign x = name;``), or None."""
    pattern = re.compile(rf"=\s*{re.escape(name)}\s*;\s*$")
    current = None
    for i, line in enumerate(lines):
        m = _MODULE.match(line)
        if m:
            current = m.group(1)
        if current == module and i + 1 in owner and pattern.search(line):
            return owner[i + 1]
    return None


def _process(lines, start):
    """Indices of the lines of the ``always`` process starting at ``start`` (after it)."""
    head = lines[start]
    if not head.rstrip().endswith("begin"):
        return [start + 1] if start + 1 < len(lines) else []
    indent = len(head) - len(head.lstrip())
    body = []
    for j in range(start + 1, len(lines)):
        stripped = lines[j].lstrip()
        if stripped.startswith("end") and not stripped.startswith("endcase") and \
                len(lines[j]) - len(stripped) == indent:
            body.append(j)
            break
        body.append(j)
    return body
