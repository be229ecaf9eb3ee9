"""``tpu-rtl system``'s line of the sequencers' stalls."""

import numpy as np

from verif.cli.system import stall_line


def test_shares_are_means_over_the_live_chips_largest_first():
    stalls = {"fetch": np.array([2, 2, 0, 2]), "wait": np.array([100, 300, 0, 200]),
              "dma": np.array([50, 0, 0, 10]), "vector": np.zeros(4, int)}
    # Chip 2 counted nothing: a failed chip. Of 1,000 cycles: wait 200, dma 20, fetch 2.
    assert stall_line(stalls, 1000) == ("sequencers stalled (mean over the chips, of the "
                                        "cycles): wait 20.0%, dma 2.0%, fetch 0.2%")


def test_no_stall_says_none():
    assert stall_line({"wait": np.zeros(2, int)}, 10).endswith("cycles): none")
