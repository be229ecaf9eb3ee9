"""Seeded, coverage-driven regressions: the runner (:mod:`.runner`), one seed's worker
process (:mod:`.worker`), where seeds run (:mod:`.executor`) and Verilator code
coverage (:mod:`.code_coverage`)."""

from .runner import (EXHAUSTIVE, EXHAUSTIVE_SUITES, SUITE_NAMES, TRANSCENDENTAL, Outcome,
                     Regression, functional_summary, merge_reports, run_exhaustive,
                     run_regression)

__all__ = ["Outcome", "Regression", "run_regression", "run_exhaustive", "functional_summary",
           "merge_reports", "EXHAUSTIVE", "TRANSCENDENTAL", "EXHAUSTIVE_SUITES", "SUITE_NAMES"]
