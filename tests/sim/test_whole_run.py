"""Whole runs: the same harness RTL on every backend, identical cycle for cycle, and
clear errors for a bad run."""

from dataclasses import replace

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from golden import arith as golden
from golden import mxu as golden_mxu
from hdl.lib.xorshift import Xorshift32
from sim import mxu
from sim.arith import UNITS
from sim.blocks import BLOCKS
from sim.backends import compiled
from sim.backends.amaranth_sim import simulate
from sim.toolchain.build_cache import build_root
from sim.backends import run_whole
from sim.backends.whole_run import RING_DEPTH, WholeRun
from sim.transactors import SimulationHang
from verif.suites.arith import corpus
from verif.suites.mxu.scenarios import bf16_matrix, fp32_matrix

from ..simulators import ICARUS

COMPILED = ["verilator", ICARUS]


def _add_run(rng, n, **kwargs):
    """An fp32_add run of ``n`` beats. Every length shares one harness depth, so the tests
    share one build a backend (a waves build is one more)."""
    a, b = (x[-n:] for x in corpus.binary_corpus("fp32_add", rng, n))
    run = WholeRun("fp32_add", {"numerics": "ieee"},
                   play={"operands": UNITS["fp32_add"].pack((a, b))}, record={"result": n},
                   **{"depth": 512} | kwargs)
    return run, golden.fp32_add(a, b, numerics="ieee")


@pytest.mark.parametrize("backend", COMPILED)
def test_arith_run_is_identical_to_amaranth_with_gaps(backend, rng):
    run, expected = _add_run(rng, 300, gaps={"operands": 0.3, "result": 0.6}, seed=77)
    reference = run_whole(run, backend="amaranth")
    np.testing.assert_array_equal(np.array(reference.recorded["result"], np.uint32), expected)
    got = run_whole(run, backend=backend)
    assert got.recorded == reference.recorded
    assert got.streams == reference.streams and got.cycles == reference.cycles
    # The gaps really happened: 300 beats at 40% backpressure take far more than 300 cycles.
    assert reference.cycles > 450


# Both in make test-slow (19 s and 10 s, make test's budget): the arith run's cases above keep
# the whole run's identity with Amaranth on both compiled simulators in the default suite.
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["verilator", ICARUS])
def test_matmul_is_identical_to_amaranth_cycle_for_cycle(backend, rng):
    x = bf16_matrix(rng, (9, 7), special_density=0.1)
    w = bf16_matrix(rng, (7, 5), special_density=0.1)
    acc = fp32_matrix(rng, (9, 5), special_density=0.1)
    kwargs = dict(rows=3, cols=3, acc=acc, numerics="ieee", idle=0.2, stall=0.5, seed=5)
    reference = mxu.matmul(x, w, **kwargs)
    np.testing.assert_array_equal(reference.out.view(np.uint32),
                                  golden_mxu.matmul(x, w, acc=acc, numerics="ieee").view(np.uint32))
    got = mxu.matmul(x, w, backend=backend, **kwargs)
    np.testing.assert_array_equal(got.out.view(np.uint32), reference.out.view(np.uint32))
    assert got.cycles == reference.cycles


def test_the_gap_seed_changes_cycles_not_results(rng):
    run, expected = _add_run(rng, 200, gaps={"operands": 0.5, "result": 0.5}, seed=1)
    first = run_whole(run)
    second = run_whole(replace(run, seed=2))
    assert first.recorded == second.recorded
    np.testing.assert_array_equal(np.array(first.recorded["result"], np.uint32), expected)
    assert first.cycles != second.cycles


def test_one_build_serves_every_data_set(rng):
    run, _ = _add_run(rng, 40)
    run_whole(run, backend="verilator")
    before = set((build_root() / "whole-verilator").iterdir())
    other, expected = _add_run(rng, 33, seed=9, gaps={"result": 0.5})
    got = run_whole(other, backend="verilator")
    assert set((build_root() / "whole-verilator").iterdir()) == before
    np.testing.assert_array_equal(np.array(got.recorded["result"], np.uint32), expected)


def _builds():
    return set((build_root() / "whole-verilator").iterdir())


def test_one_build_serves_every_size(rng):
    """The compiled harness streams through rings, so a run several rings long shares the
    build of a short one, and both match the Amaranth backend's memories that hold all."""
    gaps = {"operands": 0.2, "result": 0.4}
    small, small_expected = _add_run(rng, 40, depth=None, gaps=gaps, seed=11)
    got = run_whole(small, backend="verilator")
    before = _builds()
    reference = run_whole(small, backend="amaranth")
    assert got.recorded == reference.recorded
    assert got.streams == reference.streams and got.cycles == reference.cycles
    np.testing.assert_array_equal(np.array(got.recorded["result"], np.uint32), small_expected)

    large, large_expected = _add_run(rng, 3 * RING_DEPTH + 17, depth=None, gaps=gaps, seed=12)
    got = run_whole(large, backend="verilator")
    assert _builds() == before
    np.testing.assert_array_equal(np.array(got.recorded["result"], np.uint32), large_expected)
    reference = run_whole(large, backend="amaranth")
    assert got.streams == reference.streams and got.cycles == reference.cycles


@pytest.mark.slow         # make test's budget: a build of its own for a 1,400-beat queue
def test_a_loop_back_longer_than_the_ring(rng):
    """The MXU's partial sums wait a whole K-tile to loop back into ``acc_in``: with 2 N-tiles
    of 700 rows that is 1,400 beats, more than a ring holds; the testbench queues them."""
    x = bf16_matrix(rng, (700, 7), special_density=0.1)
    w = bf16_matrix(rng, (7, 5), special_density=0.1)
    kwargs = dict(rows=3, cols=3, numerics="ieee", idle=0.1, stall=0.2, seed=6)
    assert 2 * x.shape[0] > RING_DEPTH
    got = mxu.matmul(x, w, backend="verilator", **kwargs)
    np.testing.assert_array_equal(got.out.view(np.uint32),
                                  golden_mxu.matmul(x, w, numerics="ieee").view(np.uint32))
    assert got.cycles == mxu.matmul(x, w, **kwargs).cycles


@pytest.mark.parametrize("backend", ["amaranth", "verilator"])
def test_a_stream_that_never_completes_is_a_hang_naming_it(backend, rng):
    run, _ = _add_run(rng, 20, watchdog=50)
    starved = replace(run, record={"result": 25})
    with pytest.raises(SimulationHang, match=r"fp32_add hung at cycle \d+: nothing moved on any "
                                             r"stream for 50 cycles; operands: sent 20/20; "
                                             r"result: received 20/25"):
        run_whole(starved, backend=backend)


@pytest.mark.parametrize("change, message", [
    ({"play": {"operands": [1 << 64]}}, "operands beat 0 is 18446744073709551616, which does "
                                        "not fit the port's 64-bit payload"),
    ({"play": {}}, "a whole run must give every stream port .*missing operands"),
    ({"record": {"result": 1, "sum": 2}}, "unknown sum"),
    ({"gaps": {"result": 1.5}}, "a gap probability must be a number from 0 to 1, not 1.5"),
    ({"seed": -1}, "seed must be an integer from 0 to 2\\*\\*32 - 1"),
    ({"depth": 16, "play": {"operands": [0] * 17}, "record": {"result": 17}},
     "operands carries 17 beats, more than the harness memory's 16"),
])
def test_bad_runs_are_clear_value_errors(change, message):
    run = WholeRun("fp32_add", {}, play={"operands": [0]}, record={"result": 1})
    with pytest.raises(ValueError, match=message):
        run_whole(replace(run, **change))


@pytest.mark.slow         # make test's budget: a traced build of its own (tests/sim/test_waves.py)
def test_waves_and_progress_on_request(tmp_path, rng, monkeypatch):
    run, _ = _add_run(rng, 100, gaps={"result": 0.5})
    seen = []
    monkeypatch.setattr(compiled, "PROGRESS_EVERY", 32)
    result = run_whole(run, backend="verilator", waves=tmp_path / "add.vcd",
                       progress=lambda cycle, status: seen.append((cycle, status)))
    vcd = (tmp_path / "add.vcd").read_bytes()
    assert b"$enddefinitions" in vcd
    # A time stamp an edge: the clock's two edges a cycle apart in time, not all at 0.
    stamps = [line for line in vcd.splitlines() if line.startswith(b"#")]
    assert len(stamps) >= 2 * result.cycles
    assert [cycle for cycle, _ in seen][:3] == [32, 64, 96]
    assert seen[0][1].startswith("operands: ")


def test_xorshift_follows_marsaglias_sequence():
    def reference(x):            # Marsaglia 2003, "Xorshift RNGs", the (13, 17, 5) generator
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        return x ^ ((x << 5) & 0xFFFFFFFF)

    dut = Xorshift32()

    async def program(bench):
        await bench.cycle({"seed": 2463534242, "run": 0})
        return [(await bench.cycle({"run": 1}, ("value",)))[0] for _ in range(50)]

    got = simulate(dut, program)
    expected, state = [], 2463534242
    for _ in range(50):
        expected.append(state)
        state = reference(state)
    assert got == expected


class _Accumulator(wiring.Component):
    """A test block: beat i of ``add`` adds its value plus ``offset`` to ``words[i]``.

    ``words`` is a memory a run loads and dumps; ``total`` sums every beat.
    """

    add: In(stream.Signature(32))
    offset: In(32)
    total: Out(32)

    def __init__(self):
        super().__init__()
        self.words = Memory(shape=32, depth=16, init=[])
        self.memory_images = {"words": (self.words, "words")}

    def elaborate(self, platform):
        m = Module()
        m.submodules.words = self.words
        read, write = self.words.read_port(domain="comb"), self.words.write_port()
        index = Signal(4)
        take = self.add.valid & self.add.ready
        m.d.comb += [self.add.ready.eq(1), read.addr.eq(index), write.addr.eq(index),
                     write.data.eq(read.data + self.add.payload + self.offset),
                     write.en.eq(take)]
        with m.If(take):
            m.d.sync += [index.eq(index + 1), self.total.eq(self.total + self.add.payload)]
        return m


@pytest.mark.parametrize("backend", ["amaranth", *COMPILED])
def test_memories_and_plain_ports_of_a_block(backend, rng, monkeypatch):
    monkeypatch.setitem(BLOCKS, "accumulator", _Accumulator)
    initial = rng.integers(0, 1 << 31, 10).tolist()
    beats = rng.integers(0, 1 << 20, 12).tolist()
    run = WholeRun("accumulator", {}, play={"add": beats}, record={}, inputs={"offset": 5},
                   load={"words": initial}, dump=("words",), gaps={"add": 0.3}, seed=3)
    result = run_whole(run, backend=backend)
    expected = (initial + [0] * 6)
    for i, beat in enumerate(beats):
        expected[i] = (expected[i] + beat + 5) % (1 << 32)
    assert result.memories == {"words": expected}
    assert result.outputs == {"total": sum(beats)}


def test_memory_and_input_errors_name_them(monkeypatch):
    monkeypatch.setitem(BLOCKS, "accumulator", _Accumulator)
    run = WholeRun("accumulator", {}, play={"add": [1]}, record={})
    with pytest.raises(ValueError, match="no memory 'ram' to load or dump; memories: words"):
        run_whole(replace(run, dump=("ram",)))
    with pytest.raises(ValueError, match="17 entries for memory words, which holds 16"):
        run_whole(replace(run, load={"words": [0] * 17}))
    with pytest.raises(ValueError, match="'total' is not a plain input port; inputs: offset"):
        run_whole(replace(run, inputs={"total": 1}))
    with pytest.raises(ValueError, match="input offset is 4294967296, which does not fit its 32"):
        run_whole(replace(run, inputs={"offset": 1 << 32}))


class _Countdown(wiring.Component):
    """A test block: each beat of ``load`` counts down that many cycles, with ``busy``
    high, before it sends the beat back on ``done``."""

    load: In(stream.Signature(16))
    done: Out(stream.Signature(16))
    busy: Out(1)

    def elaborate(self, platform):
        m = Module()
        left, value, holding = Signal(16), Signal(16), Signal()
        m.d.comb += [self.load.ready.eq(~holding), self.busy.eq(holding & (left != 0)),
                     self.done.valid.eq(holding & (left == 0)), self.done.payload.eq(value)]
        with m.If(self.load.valid & self.load.ready):
            m.d.sync += [left.eq(self.load.payload), value.eq(self.load.payload),
                         holding.eq(1)]
        with m.Elif(left != 0):
            m.d.sync += left.eq(left - 1)
        with m.Elif(self.done.ready):
            m.d.sync += holding.eq(0)
        return m


def test_busy_holds_the_watchdog_off_while_nothing_streams(monkeypatch):
    monkeypatch.setitem(BLOCKS, "countdown", _Countdown)
    run = WholeRun("countdown", {}, play={"load": [120, 5, 130]}, record={"done": 3},
                   watchdog=50)
    with pytest.raises(SimulationHang, match="nothing moved on any stream for 50 cycles"):
        run_whole(run)
    result = run_whole(replace(run, busy="busy"))
    assert result.recorded["done"] == [120, 5, 130]
    starved = replace(run, busy="busy", record={"done": 4})
    with pytest.raises(SimulationHang, match="nothing moved on any stream and busy stayed low "
                                             "for 50 cycles; load: sent 3/3; done: received 3/4"):
        run_whole(starved)
    with pytest.raises(ValueError, match="busy must name a 1-bit output port, not 'load'"):
        run_whole(replace(run, busy="load"))


@pytest.mark.slow      # a Verilator build and run-time library of its own: make test's budget
def test_a_threaded_verilator_model_gives_the_same_run(rng, monkeypatch):
    """threads=2 (``verilator --threads 2``) is a build of its own, bit- and cycle-identical
    to the single-threaded one; ``$TPU_RTL_THREADS`` sets the default, a bad value is refused."""
    run, expected = _add_run(rng, 200, gaps={"operands": 0.2, "result": 0.4}, seed=9)
    one = run_whole(run, backend="verilator", threads=1)
    two = run_whole(run, backend="verilator", threads=2)
    np.testing.assert_array_equal(np.array(two.recorded["result"], np.uint32), expected)
    assert two.recorded == one.recorded
    assert two.streams == one.streams and two.cycles == one.cycles
    folders = lambda threads: compiled.build(run, simulator="verilator", threads=threads)
    assert folders(2) != folders(1)
    monkeypatch.setenv("TPU_RTL_THREADS", "2")
    assert compiled.build(run, simulator="verilator") == folders(2)
    monkeypatch.setenv("TPU_RTL_THREADS", "two")
    with pytest.raises(ValueError, match="TPU_RTL_THREADS must be a positive whole number"):
        run_whole(run, backend="verilator")
