"""One flag vocabulary: the same option means the same thing in every command, the
defaults are the Python API's, and every help text states them."""

import argparse
import inspect

import pytest

from sim import chip, mxu, network, sparsecore, system
from verif import cli

#: Each command that runs a simulation, and the runner whose defaults it shares.
RUNS = {("matmul",): mxu.matmul, ("chip", "matmul"): chip.matmul,
        ("system", "collective"): system.collective, ("network",): network.run,
        ("sparsecore",): sparsecore.lookup}


def _parser_of(words):
    parser = cli._parser(words[0])
    for word in words:
        parser = next(action for action in parser._actions
                      if isinstance(action, argparse._SubParsersAction)).choices[word]
    return parser


def _defaults(words):
    return {action.dest: action.default for action in _parser_of(words)._actions}


@pytest.mark.parametrize("words", list(RUNS), ids=" ".join)
def test_a_command_defaults_to_its_runners_backend_and_seed(words):
    api = inspect.signature(RUNS[words]).parameters
    defaults = _defaults(words)
    assert defaults["backend"] == api["backend"].default
    if "seed" in api:
        assert defaults["seed"] == api["seed"].default == 0


def _every_parser(parser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _every_parser(child)


def test_every_help_text_states_its_default():
    missing = []
    for parser in _every_parser(cli._parser()):
        formatter = parser._get_formatter()
        for action in parser._actions:
            if action.option_strings and action.default not in (None, False,
                                                                 argparse.SUPPRESS) \
                    and action.nargs != 0 and not isinstance(action, argparse._HelpAction):
                text = formatter._expand_help(action) if action.help else ""
                if "default" not in formatter._get_help_string(action) and \
                        "default" not in text:
                    missing.append(f"{parser.prog} {action.option_strings[0]}")
    assert missing == []


def test_debug_goes_before_or_after_the_command():
    assert cli._parser("export").parse_args(["--debug", "export", "pe"]).debug
    assert cli._parser("export").parse_args(["export", "pe", "--debug"]).debug


def test_regress_takes_backend_and_its_old_name_sim():
    for flag in ("--backend", "--sim"):
        args = cli._parser("regress").parse_args(["regress", "arith", flag, "amaranth"])
        assert args.backend == "amaranth"


def test_twist_selects_and_compare_twist_sets_both_side_by_side():
    from verif.cli import network as network_cli
    one = cli._parser("network").parse_args(["network", "--topology", "2x2x4", "--twist"])
    both = cli._parser("network").parse_args(["network", "--topology", "2x2x4",
                                              "--compare-twist"])
    assert list(network_cli._topologies(one)) == ["twisted"]
    assert list(network_cli._topologies(both)) == ["regular", "twisted"]
    assert network_cli._topologies(one)["twisted"].twist


def test_fail_takes_chips_repeated_or_comma_separated():
    args = cli._parser("network").parse_args(["network", "--fail", "1,2", "--failed", "5"])
    assert args.fail == [1, 2, 5]
    assert cli.main(["network", "--fail", "x"]) == 2


@pytest.mark.parametrize("argv, message", [
    (["--waves-scope", "dut"], "--waves-scope limits the waveform of --waves; give --waves too"),
    (["--waves", "{tmp}/x.fst"], "the amaranth backend writes VCD only"),
    (["--waves", "{tmp}/x.vcd", "--waves-scope", "dut"], "the amaranth backend traces the whole"),
])
def test_waves_options_are_checked_before_the_run(argv, message, tmp_path, capsys):
    argv = [word.format(tmp=tmp_path) for word in argv]
    assert cli.main(["matmul", "--m", "2", "--k", "2", "--n", "2", *argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""
    assert list(tmp_path.iterdir()) == []
