"""Shared test set-up: one seed behind every random choice, printed on failure."""

import os
import zlib

import numpy as np
import pytest

DEFAULT_SEED = 20261121

# The suite's compiled models run for thousands of cycles, not millions: g++ -Og
# compiles their hot code in 40% of -O3's time (sim.toolchain.model_opt).
# Set before any build, and inherited by the CLI runs the tests start.
os.environ.setdefault("TPU_RTL_OPT", "-Og")


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


def pytest_collection_modifyitems(config, items):
    """Tests marked ``long`` first, each group in its collected order: under xdist the
    minute-long builds and runs then overlap at the start, and the many short tests that
    follow balance the workers, instead of one long test finishing alone at the end."""
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
