"""The garbage collector's thresholds for a process that builds and simulates designs.

Elaborating a design and compiling it for Amaranth's simulator allocate millions of
small objects, most of which live as long as the simulation. With CPython's default
thresholds, (700, 10, 10), the collector looks at the young objects every 700
allocations and walks the whole heap about every 70,000: in a test worker that holds
compiled simulations, a fifth of a second or more each time. Measured with
``gc.callbacks`` on ``tests/vpu/test_vpu_rtl.py`` in one process (docs/simulation.md),
collection took 5.9 s to 6.5 s of its CPU time with the defaults and 1.7 s to 1.9 s
with :data:`THRESHOLDS`, for 53 MB more at the peak (260 MB against 207 MB).

The entry points call :func:`collect_less`: ``tpu-rtl``, a regression's seed worker and
the test suite. A library leaves the interpreter's settings to its caller, so importing
``sim`` changes nothing; a script of your own can call it too.
"""

import gc

__all__ = ["THRESHOLDS", "collect_less"]

#: ``gc.set_threshold``'s three arguments: young collections every 20,000 allocations, and
#: the older generations after 20 collections of the one below.
THRESHOLDS = (20_000, 20, 20)


def collect_less():
    """Set the collector's thresholds to :data:`THRESHOLDS` for the rest of the process."""
    gc.set_threshold(*THRESHOLDS)
