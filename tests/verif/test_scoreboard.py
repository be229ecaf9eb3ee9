"""verif.scoreboard.Tally: a case's count over whole scoreboards and single checks."""

import numpy as np

from verif.scoreboard import Scoreboard, Tally


def test_tally_counts_boards_and_checks_and_keeps_the_first_mismatch():
    tally = Tally()
    good = Scoreboard("good", np.array([1, 2, 3], np.uint32))
    good.check_all(np.array([1, 2, 3], np.uint32))
    bad = Scoreboard("bad", np.array([5, 6], np.uint32))
    bad.check_all(np.array([5, 7], np.uint32))
    tally.board(good)
    tally.check(True, "never shown")
    tally.board(bad)
    tally.check(False, "a later mismatch")
    assert (tally.checked, tally.mismatches) == (3 + 1 + 2 + 1, 2)
    assert tally.first == bad.first_mismatch and "bad" in tally.first
