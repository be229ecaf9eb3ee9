"""Waveforms: the format follows the file's suffix (.vcd text, .fst binary) on every backend
that writes it, with the same timescale everywhere; a scope limits what a compiled run
traces; what a backend cannot write is refused before the run."""

import functools
import re

import numpy as np
import pytest

from golden import arith as golden
from sim.arith import UNITS, stream_through
from sim.backends import run_program, run_whole
from sim.backends.whole_run import WholeRun
from sim.toolchain import ToolMissing, check_fst_tracing
from verif.suites.arith import corpus

from ..simulators import ICARUS

COMPILED = ["verilator", ICARUS]


def _fst_on_verilator():
    try:
        check_fst_tracing()
    except ToolMissing:
        return False
    return True


#: Verilator's FST writer needs the system's LZ4 headers (liblz4-dev).
VERILATOR_FST = pytest.param("verilator", marks=pytest.mark.skipif(
    not _fst_on_verilator(), reason="lz4.h (liblz4-dev) not installed"))
#: FST's first block is its header: block type 0 (FST_BL_HDR), then a 64-bit length of 329.
FST_HEADER = bytes([0]) + (329).to_bytes(8, "big")


def _add_run(rng, n=12):
    a, b = (x[-n:] for x in corpus.binary_corpus("fp32_add", rng, n))
    run = WholeRun("fp32_add", {"numerics": "ieee"},
                   play={"operands": UNITS["fp32_add"].pack((a, b))}, record={"result": n},
                   depth=512)
    return run, golden.fp32_add(a, b, numerics="ieee")


def _vcd_times(text):
    """The timescale of a VCD and its distinct time stamps, in order."""
    timescale = re.search(r"\$timescale\s+(.*?)\s*\$end", text, re.S)[1].replace(" ", "")
    return timescale, [int(t) for t in re.findall(r"^#(\d+)", text, re.M)]


def _var_scopes(path):
    """The scopes (dotted paths) that hold a variable in the VCD at ``path``."""
    stack, found = [], set()
    for line in path.read_text().splitlines():
        words = line.split()
        if words[:1] == ["$scope"]:
            stack.append(words[2])
        elif words[:1] == ["$upscope"]:
            stack.pop()
        elif words[:1] == ["$var"]:
            found.add(".".join(stack))
        elif words[:1] == ["$enddefinitions"]:
            break
    return found


def _check_vcd(path):
    text = path.read_text()
    assert text.lstrip().startswith("$"), text[:80]
    assert "$timescale" in text and "$enddefinitions" in text
    timescale, times = _vcd_times(text)
    # The same time axis on every backend: 1 fs units, a 10 ns clock (edges 5 ns apart).
    assert timescale == "1fs"
    assert times and all(t % 5_000_000 == 0 for t in times)
    assert 10_000_000 in times or 15_000_000 in times
    return text


@pytest.mark.parametrize("backend", ["amaranth", "verilator", ICARUS])
def test_vcd_by_suffix(backend, tmp_path, rng):
    run, expected = _add_run(rng)
    waves = tmp_path / "x.vcd"
    result = run_whole(run, backend=backend, waves=waves)
    np.testing.assert_array_equal(np.array(result.recorded["result"], np.uint32), expected)
    text = _check_vcd(waves)
    if backend == "verilator":
        # Amaranth's unnamed wires and yosys' $auto registers are left out of the trace.
        names = re.findall(r"^\s*\$var \S+ \d+ \S+ (\S+)", text, re.M)
        assert names and not [name for name in names if name.startswith("$")]


@pytest.mark.parametrize("backend", [VERILATOR_FST, ICARUS])
def test_fst_by_suffix(backend, tmp_path, rng):
    run, expected = _add_run(rng)
    waves = tmp_path / "x.fst"
    result = run_whole(run, backend=backend, waves=waves)
    np.testing.assert_array_equal(np.array(result.recorded["result"], np.uint32), expected)
    data = waves.read_bytes()
    assert data.startswith(FST_HEADER), data[:16]
    assert b"$timescale" not in data and b"$enddefinitions" not in data


@pytest.mark.parametrize("backend", COMPILED)
def test_a_scope_limits_the_trace(backend, tmp_path, rng):
    run, _ = _add_run(rng)
    whole, scoped = tmp_path / "whole.vcd", tmp_path / "dut.vcd"
    run_whole(run, backend=backend, waves=whole)
    run_whole(run, backend=backend, waves=scoped, waves_scope="dut")
    # The whole trace holds the testbench and the harness' players; the scoped one only
    # the block's signals (Verilator keeps the empty scopes above and beside it).
    assert any("play_operands" in scope for scope in _var_scopes(whole))
    assert all(re.search(r"(^|\.)tb\.dut\.dut(\.|$)", scope) for scope in _var_scopes(scoped))
    assert scoped.stat().st_size < whole.stat().st_size


@pytest.mark.parametrize("backend, suffix", [
    pytest.param("verilator", ".fst", marks=VERILATOR_FST.marks),
    pytest.param("icarus", ".vcd", marks=ICARUS.marks)])
def test_interactive_programs_follow_the_suffix_too(backend, suffix, tmp_path):
    """The cocotb path: Verilator's default is VCD and Icarus' FST, so each is asked for the
    other."""
    program = functools.partial(stream_through, beats=[0x3F800000, 0x7F800001])
    waves = tmp_path / f"run{suffix}"
    assert run_program("fp32_to_bf16", {}, program, backend=backend, waves=waves) == \
        [0x3F80, 0x7FC0]
    if suffix == ".fst":
        assert waves.read_bytes().startswith(FST_HEADER)
    else:
        assert _vcd_times(waves.read_text())[0] == "1fs"


def test_amaranth_refuses_what_it_cannot_write(tmp_path, rng):
    run, _ = _add_run(rng)
    with pytest.raises(ValueError, match="writes VCD only.*verilator"):
        run_whole(run, backend="amaranth", waves=tmp_path / "x.fst")
    with pytest.raises(ValueError, match="traces the whole design"):
        run_whole(run, backend="amaranth", waves=tmp_path / "x.vcd", waves_scope="dut")
    with pytest.raises(ValueError, match="dotted instance path"):
        run_whole(run, backend="verilator", waves=tmp_path / "x.vcd", waves_scope="dut..x")
    assert not list(tmp_path.iterdir())
