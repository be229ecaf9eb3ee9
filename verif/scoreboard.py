"""Scoreboard: results from the design against the golden model, bit for bit."""

import numpy as np

__all__ = ["Scoreboard", "Tally"]


def _hex(value, dtype):
    return f"0x{int(value):0{np.dtype(dtype).itemsize * 2}x}"


class Scoreboard:
    """Checks results, in order, against golden expectations.

    Parameters
    ----------
    name : str
        What is being checked, for the report (e.g. ``"fp32_add/tpu"``).
    expected : np.ndarray
        Golden bit patterns, one per result.
    operands : dict of str to np.ndarray
        The operands behind each result, reported in hex with a mismatch.
    where : callable, optional
        Maps a result index to a label for the report (e.g. a matrix position).

    Results can arrive one at a time (:meth:`check`, from a monitor's
    callback) or all at once (:meth:`check_all`). The first mismatch is kept
    in full; later ones are counted.
    """

    def __init__(self, name, expected, operands=None, *, where=None):
        self.name = name
        self.where = where or (lambda index: f"#{index}")
        self.expected = np.asarray(expected).ravel()
        self.operands = {k: np.asarray(v).ravel() for k, v in (operands or {}).items()}
        self.checked = 0
        self.mismatches = 0
        self.first_mismatch = None

    def _describe(self, index, got):
        ops = "".join(f", {k}={_hex(v[index], v.dtype)}" for k, v in self.operands.items())
        dtype = self.expected.dtype
        return (f"{self.name} {self.where(index)}{ops}: expected "
                f"{_hex(self.expected[index], dtype)}, got {_hex(got, dtype)}")

    def check(self, index, got):
        """Check result ``index``; return True when it matches."""
        self.checked += 1
        if int(got) == int(self.expected[index]):
            return True
        self.mismatches += 1
        if self.first_mismatch is None:
            self.first_mismatch = self._describe(index, got)
        return False

    def check_all(self, got):
        got = np.asarray(got).ravel()
        if got.size != self.expected.size:
            raise ValueError(f"{self.name}: {got.size} results for {self.expected.size} "
                             f"expected ones")
        bad = np.flatnonzero(got.astype(self.expected.dtype) != self.expected)
        self.checked += got.size
        self.mismatches += bad.size
        if bad.size and self.first_mismatch is None:
            self.first_mismatch = self._describe(bad[0], got[bad[0]])
        return not bad.size

    @property
    def passed(self):
        return self.checked == self.expected.size and self.mismatches == 0

    def summary(self):
        if self.passed:
            return f"{self.name}: {self.checked} results bit-exact"
        if self.checked != self.expected.size:
            return f"{self.name}: checked {self.checked} of {self.expected.size} results"
        return f"{self.name}: {self.mismatches} of {self.checked} mismatched; first: " \
               f"{self.first_mismatch}"


class Tally:
    """A regression case's running count: checks, mismatches and the first mismatch.

    It gathers whole :class:`Scoreboard` s (:meth:`board`) and single checks
    (:meth:`check`); a suite adds counters of its own (cycles, ...) as attributes.
    """

    def __init__(self):
        self.checked = self.mismatches = 0
        self.first = None

    def board(self, board):
        self.checked += board.checked
        self.mismatches += board.mismatches
        self.first = self.first or board.first_mismatch

    def check(self, ok, message):
        self.checked += 1
        if not ok:
            self.mismatches += 1
            self.first = self.first or message
