"""Verification written once for every backend: agents, scoreboard, coverage, regressions, suites and the CLI."""
