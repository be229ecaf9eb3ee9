"""Tests marked ``slow`` (builds of several shapes, long runs) stay out of the default suite:
they run when a marker expression is given, e.g. ``pytest -m slow tests/system``."""

import pytest


def pytest_collection_modifyitems(config, items):
    if config.getoption("markexpr"):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if item.get_closest_marker("slow"):
            item.add_marker(skip)
