"""Helpers several test packages share: an Amaranth simulation of testbenches, a bit-exact
array compare, line packing, and a command's error lines. Expected values never come from
here."""

import re

import numpy as np

from sim.backends.kept_simulations import KeptSimulation, kept_simulation, run_kept

__all__ = ["simulate", "words", "assert_bits", "pack_lines", "unpack_lines", "error_lines"]


def simulate(dut, *testbenches):
    """Run ``dut`` with the given ``async def tb(ctx)`` testbenches until they return.

    Compiling ``dut`` is most of a short run's time, so a later run of the same object
    resets and reuses its simulation (:mod:`sim.backends.kept_simulations`: every signal
    and memory back to its initial value; a run that raises is not kept). Tests that run
    one design several times therefore build it once and pass the same object.
    """
    # The kept simulation holds ``dut``, so its id names no other object while kept.
    key = ("tests.support.simulate", id(dut))
    run_kept(key, kept_simulation(key, lambda: KeptSimulation(dut)), *testbenches)


def words(values):
    """``values`` as uint32 words: 4-byte arrays (fp32, int32) by their bits, others (lists
    of Python integers) by value."""
    values = np.asarray(values)
    return values.view(np.uint32) if values.dtype.itemsize == 4 else values.astype(np.uint32)


def assert_bits(got, expected, what, *, reshape=False):
    """Fail naming ``what``, the count and the first differing word unless ``got`` and
    ``expected`` hold the same bits (``reshape``: ``expected`` takes ``got``'s shape)."""
    got, expected = words(got), words(expected)
    if reshape:
        expected = expected.reshape(got.shape)
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}"
    bad = np.argwhere(got != expected)
    assert not bad.size, (f"{what}: {len(bad)} of {got.size} words differ; first at "
                          f"{tuple(map(int, bad[0]))}: got 0x{got[tuple(bad[0])]:08x}, "
                          f"expected 0x{expected[tuple(bad[0])]:08x}")


def pack_lines(values, per_line):
    """Flat uint32 words -> one int per line, word j in bits 32j.."""
    values = np.asarray(values, np.uint32).reshape(-1, per_line)
    return [sum(int(w) << (32 * j) for j, w in enumerate(line)) for line in values]


def unpack_lines(lines, per_line):
    """The inverse of :func:`pack_lines`."""
    return np.array([(line >> (32 * j)) & 0xFFFFFFFF for line in lines for j in range(per_line)],
                    np.uint32)


def error_lines(err):
    """The lines of a command's standard error besides its progress line, which a run
    slower than the heartbeat (``verif.progress.HEARTBEAT``, on a loaded machine) writes
    there too, ending in its elapsed time: ``sparsecore update (10 s)``."""
    return [line for line in err.strip().splitlines() if not re.search(r" \(\d+ s\)$", line)]
