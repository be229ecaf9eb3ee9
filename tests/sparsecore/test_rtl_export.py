# amaranth: UnusedElaboratable=no
# (The bad-parameter tests construct tiles whose __init__ raises.)
"""The SparseCore tile's exported Verilog is lint-clean, and its parameters are checked."""

import pytest

from hdl.sparsecore import SparseCoreTile
from sim import sparsecore
from sim.verilog.export import export
from sim.verilog.lint import lint


def test_export_is_lint_clean():
    # Two-word HBM lines and two-chunk rows: the line and chunk counters are all in use.
    # (The scVPU's arithmetic cores are linted with their own blocks.)
    result = export(sparsecore.BLOCK, dict(rows=16, max_ids=16, max_bags=16, row_words=16,
                                           words_per_cycle=2, combiners="sum", optimizers=""))
    assert lint(result.verilog, sparsecore.BLOCK) == []


@pytest.mark.parametrize("params, error, message", [
    (dict(row_words=12), ValueError, "row_words must be a multiple of 8, not 12"),
    (dict(words_per_cycle=16), ValueError, "words_per_cycle must be 1, 2, 4 or 8"),
    (dict(max_ids=0), ValueError, "max_ids must be at least 1, not 0"),
    (dict(rows=2.5), TypeError, "rows must be an integer, not 2.5"),
    (dict(combiners="sum,max"), ValueError, "combiners: 'max' is not one of"),
    (dict(optimizers=("sgd",)), TypeError, "optimizers must be a comma-separated string"),
    (dict(numerics="fast"), ValueError, "numerics"),
])
def test_bad_parameters_are_clear_errors(params, error, message):
    with pytest.raises(error, match=message):
        SparseCoreTile(**params)
