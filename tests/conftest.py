"""Shared test set-up: one seed behind every random choice, printed on failure."""

import functools
import inspect
import os
import re
import zlib
from pathlib import Path

import numpy as np
import pytest

from sim.collector import collect_less

DEFAULT_SEED = 20261121

# The suite's compiled models run for thousands of cycles, not millions: g++ -Og
# compiles their hot code in 40% of -O3's time (sim.toolchain.model_opt).
# Set before any build, and inherited by the CLI runs the tests start.
os.environ.setdefault("TPU_RTL_OPT", "-Og")

# The tests elaborate and simulate designs in long-lived workers, as the entry points do.
collect_less()


def pytest_addoption(parser):
    parser.addoption("--seed", type=int, default=int(os.environ.get("TPU_RTL_SEED", DEFAULT_SEED)),
                     help="seed of every random choice in the tests (default %(default)s, "
                          "or $TPU_RTL_SEED)")


@pytest.fixture
def seed(request):
    """This test's seed: the run's seed mixed with the test's id, so tests stay independent."""
    return (request.config.getoption("--seed") ^ zlib.crc32(request.node.nodeid.encode())) \
        & 0xFFFFFFFF


@pytest.fixture
def rng(seed):
    return np.random.default_rng(seed)


_TESTS = Path(__file__).resolve().parent
_IMPORT = re.compile(r"^\s*(?:from\s+(\.*)([\w.]*)\s+import\s+([\w, ()]+)|import\s+([\w.]+))", re.M)
_COMPILED = re.compile(r"verilator|icarus")


@functools.cache
def _floors(path):
    """The floors (``golden``, ``hdl``, ``sim``, ``verif``, ``verif.cli``) a test module
    reaches through its imports, the test helpers and tools it imports included."""
    path = Path(path)
    source = path.read_text()
    floors = set()
    if "verif.cli" in source or "tpu-rtl" in source:
        floors.add("verif.cli")
    for dots, module, names, plain in _IMPORT.findall(source):
        if plain:
            module, dots = plain, ""
        top = module.split(".")[0]
        if not dots and top in ("golden", "hdl", "sim", "verif"):
            floors.add(top)
        elif dots or top in ("tests", "tools"):
            base = path.parent if dots else _TESTS.parent
            for _ in range(len(dots) - 1):
                base = base.parent
            parts = [p for p in module.split(".") if p]
            candidates = [base.joinpath(*parts).with_suffix(".py")]
            candidates += [base.joinpath(*parts, name.strip("() ") + ".py")
                           for name in names.split(",") if name.strip("() ")]
            for helper in candidates:
                if helper.is_file() and helper.name != "support.py" and helper != path:
                    floors |= _floors(helper)
    return frozenset(floors)


def _layer(item):
    """``cli``, ``rtl`` or ``golden``: the highest floor ``item``'s module reaches."""
    floors = _floors(item.path)
    if "verif.cli" in floors:
        return "cli"
    return "rtl" if floors - {"golden"} else "golden"


@functools.cache
def _runs_compiled(function):
    """Whether ``function``'s source names Verilator or Icarus: read once for all of a
    parametrized test's items (reading it per item was half of the suite's collection)."""
    return bool(_COMPILED.search(inspect.getsource(function)))


def pytest_collection_modifyitems(config, items):
    """Mark every test with its layer (``golden``, ``rtl`` or ``cli``, and ``compiled`` where
    it runs Verilator or Icarus), so ``pytest -m golden`` runs the reference models alone.

    Then tests marked ``long`` first, each group in its collected order: under xdist the
    minute-long builds and runs then overlap at the start, and the many short tests that
    follow balance the workers, instead of one long test finishing alone at the end."""
    for item in items:
        item.add_marker(_layer(item))
        function = getattr(item, "function", None)
        if _COMPILED.search(item.nodeid) or (function is not None and _runs_compiled(function)):
            item.add_marker("compiled")
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed and call.when == "call":
        run_seed = item.config.getoption("--seed")
        report.sections.append((
            "reproduce",
            f"run seed {run_seed}; reproduce with:\n"
            f"  .venv/bin/python -m pytest '{item.nodeid}' --seed {run_seed}"))
    return report
