"""A long run of golden.sparsecore against the SoftFloat oracle, outside the default suite.

``.venv/bin/python -m tools.soak_sparsecore [SEED] [TRIALS]`` draws TRIALS
random batches per (operation, numerics) and prints the first mismatch with
the seed and trial that reproduce it; the exit status is 1 on any mismatch.
"""

import sys

import numpy as np
import softfloatpy as sf

from golden import sparsecore as sc
from golden.formats import NUMERICS

from tests.sparsecore import oracle_sparsecore as oracle
from tests.sparsecore import stimulus


def _lists(bits):
    return np.asarray(bits).view(np.uint32).tolist()


def _trial(rng, numerics):
    """One lookup per combiner (weighted or not) and one update per optimizer; the mismatch or None."""
    b = stimulus.batch(rng, longest=int(rng.choice([4, 12, 60])))
    rows, width = b.table.shape
    weighted = bool(rng.integers(2))
    for combiner in sc.COMBINERS:
        weights = b.weights if weighted else None
        got = sc.lookup(b.table, b.indices, b.offsets, combiner=combiner, weights=weights,
                        numerics=numerics).view(np.uint32)
        want = oracle.lookup(_lists(b.table), b.indices.tolist(), b.offsets.tolist(), combiner,
                             None if weights is None else _lists(weights), numerics)
        if not np.array_equal(got, np.array(want, np.uint32).reshape(got.shape)):
            return f"lookup {combiner} weighted={weighted}"
    lr = float(rng.choice([0.01, 0.5, -2.0, 1e-40, 1e30]))
    for optimizer in sc.OPTIMIZERS:
        shape = (rows,) if optimizer == "rowwise_adagrad" else (rows, width)
        state = None if optimizer == "sgd" else \
            stimulus.fp32_values(rng, shape) & np.uint32(0x7FFFFFFF)
        table, new_state = sc.update(b.table, b.indices, b.offsets, b.grads, optimizer=optimizer,
                                     lr=lr, state=state, numerics=numerics)
        want_table, want_state, _ = oracle.update(
            _lists(b.table), b.indices.tolist(), b.offsets.tolist(), _lists(b.grads), optimizer,
            int(sc.fp32_scalar(lr)), None if state is None else _lists(state), numerics)
        if not np.array_equal(table.view(np.uint32), np.array(want_table, np.uint32)):
            return f"update {optimizer} table"
        if state is not None and not np.array_equal(new_state.view(np.uint32),
                                                    np.array(want_state, np.uint32)):
            return f"update {optimizer} state"
    return None


def soak(seed, trials):
    """Run ``trials`` trials per numerics; returns a list of mismatch descriptions."""
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    failures = []
    for numerics in NUMERICS:
        for trial in range(trials):
            rng = np.random.default_rng([seed, trial])
            what = _trial(rng, numerics)
            if what:
                failures.append(f"{what} ({numerics}): seed {seed}, trial {trial}")
    return failures


def main(argv):
    seed = int(argv[0]) if argv else 1
    trials = int(argv[1]) if len(argv) > 1 else 200
    failures = soak(seed, trials)
    for line in failures[:10]:
        print(line, file=sys.stderr)
    print(f"golden.sparsecore vs softfloat: {2 * trials - len(failures)}/{2 * trials} trials "
          f"bit-exact (seed {seed})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
