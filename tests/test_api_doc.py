"""docs/api.md is the public API as outside code calls it: every function it names exists
with every parameter it names (those it lists as not written yet aside)."""

import importlib
import inspect
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"
CALL = re.compile(r"`((?:golden|sim)\.[a-z_.]+)\.([a-z_]+)\(([^`]*?)\)`", re.S)


def _not_written_yet():
    """The names the third paragraph lists as not written yet, if it lists any."""
    intro = DOC.read_text().split("\n\n")[2]
    if not intro.startswith("Not written yet"):
        assert intro.startswith("Every function below is written."), intro
        return set()
    return set(re.findall(r"`((?:golden|sim)\.[a-z_.]+)`", intro))


def _parameters(arglist):
    names, depth, current = [], 0, ""
    for char in arglist + ",":
        depth += (char in "([{") - (char in ")]}")
        if char == "," and depth == 0:
            name = current.strip().split("=")[0].strip()
            if re.fullmatch(r"[a-z_][a-z0-9_]*", name):
                names.append(name)
            current = ""
        else:
            current += char
    return names


def _calls():
    later = _not_written_yet()
    return [(module, name, _parameters(args))
            for module, name, args in CALL.findall(DOC.read_text())
            if f"{module}.{name}" not in later]


def test_the_doc_names_the_public_runners():
    named = {f"{module}.{name}" for module, name, _ in _calls()}
    assert {"sim.mxu.matmul", "sim.vpu.elementwise", "sim.dma.run", "sim.network.run",
            "sim.system.collective", "golden.topology.torus", "sim.chip.matmul"} <= named


@pytest.mark.parametrize("module, name, parameters", _calls(),
                         ids=lambda value: value if isinstance(value, str) else None)
def test_every_named_parameter_exists(module, name, parameters):
    have = list(inspect.signature(getattr(importlib.import_module(module), name)).parameters)
    assert [p for p in parameters if p not in have] == [], f"{module}.{name} has {have}"
