"""Choosing the simulator a run uses."""

from . import amaranth_backend

__all__ = ["BACKENDS", "check_backend", "run_program"]

#: Every backend name the public API accepts (SPEC section 5).
BACKENDS = ("amaranth", "verilator", "icarus")
_AVAILABLE = ("amaranth",)


def check_backend(backend):
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, "
                         f"not {backend!r}")
    if backend not in _AVAILABLE:
        raise ValueError(f"backend {backend!r} is not built yet; "
                         f"available: {', '.join(map(repr, _AVAILABLE))}")
    return backend


def run_program(component, program, *, backend="amaranth", waves=None):
    """Run the test program ``program`` (an async callable taking a Bench) on ``component``."""
    check_backend(backend)
    return amaranth_backend.simulate(component, program, waves=waves)
