"""Interactive test programs (the Bench interface) on Verilator and Icarus through cocotb
give bit-identical results to Amaranth's simulator, cycle for cycle."""

import functools

import numpy as np
import pytest

from golden import arith as golden
from golden import mxu as golden_mxu
from sim import mxu
from sim.arith import UNITS, stream_through
from sim.backends import check_backend, run_program
from sim.backends.cocotb_sim import SimulationError
from sim.toolchain import ToolMissing, iverilog
from sim.transactors import SimulationHang, StreamSink, StreamSource, run_transactors
from verif.suites.arith import corpus
from verif.suites.mxu.scenarios import bf16_matrix, fp32_matrix

from ..simulators import ICARUS

COCOTB_BACKENDS = ["verilator", ICARUS]


def _small_corpus(op, rng):
    if op == "fp32_to_bf16":
        return (corpus.unary_corpus(op, rng, 200)[:600],)
    a, b = corpus.binary_corpus(op, rng, 200)
    return a[:600], b[:600]


@pytest.mark.parametrize("backend", COCOTB_BACKENDS)
# One unit in the default suite: the cocotb path is the same for every unit.
@pytest.mark.parametrize("op, numerics", [
    pytest.param("fp32_add", "ieee", marks=pytest.mark.slow),
    pytest.param("bf16_mul", "tpu", marks=pytest.mark.slow),
    ("fp32_to_bf16", "ieee")])
def test_arith_backends_agree(op, numerics, backend, rng):
    operands = _small_corpus(op, rng)
    program = functools.partial(stream_through, beats=UNITS[op].pack(operands))
    reference = run_program(op, {"numerics": numerics}, program)
    np.testing.assert_array_equal(np.array(reference, UNITS[op].result),
                                  getattr(golden, op)(*operands, numerics=numerics))
    assert run_program(op, {"numerics": numerics}, program, backend=backend) == reference


@pytest.mark.slow
@pytest.mark.parametrize("backend", COCOTB_BACKENDS)
def test_matmul_backends_agree_cycle_for_cycle(backend, rng):
    x = bf16_matrix(rng, (6, 5), special_density=0.1)
    w = bf16_matrix(rng, (5, 3), special_density=0.1)
    acc = fp32_matrix(rng, (6, 3), special_density=0.1)
    plan = mxu.plan_matmul(x.view(np.uint16), w.view(np.uint16), acc.view(np.uint32),
                           rows=2, cols=2)
    params = {"rows": 2, "cols": 2, "numerics": "ieee"}
    program = functools.partial(mxu.stream_matmul, **plan.stream_args)
    final, spans = run_program("mxu", params, program)
    np.testing.assert_array_equal(plan.assemble(final).view(np.uint32),
                                  golden_mxu.matmul(x, w, acc=acc, numerics="ieee").view(np.uint32))
    assert run_program("mxu", params, program, backend=backend) == (final, spans)


#: The parameters of test_arith_backends_agree's default case: the error tests reuse its build.
SHARED_BUILD = {"numerics": "ieee"}


async def _never_ready(bench):
    # Module level, so the cocotb backends can unpickle it in the simulator's process.
    sink = StreamSink("result", 2, stall=lambda: True)
    await run_transactors(bench, [StreamSource("operands", [1, 2]), sink], watchdog=20)


def test_a_hang_in_the_simulator_comes_back_as_a_hang():
    with pytest.raises(SimulationHang, match="result: received 0/2"):
        run_program("fp32_to_bf16", SHARED_BUILD, _never_ready, backend="verilator")


def test_a_failing_program_names_its_error():
    program = functools.partial(stream_through, beats=["not a number"])
    with pytest.raises(SimulationError, match="test program failed in verilator"):
        run_program("fp32_to_bf16", SHARED_BUILD, program, backend="verilator")


@pytest.mark.slow         # make test's budget: a traced coverage build of its own
def test_waves_and_code_coverage_on_request(tmp_path):
    program = functools.partial(stream_through, beats=[0x3F800000, 0x7F800001])
    waves, cover = tmp_path / "run.vcd", tmp_path / "run.dat"
    results = run_program("fp32_to_bf16", {}, program, backend="verilator", waves=waves,
                          coverage=cover)
    assert results == [0x3F80, 0x7FC0]
    assert b"$enddefinitions" in waves.read_bytes()
    assert cover.read_text(encoding="latin-1").startswith("# SystemC::Coverage-3")


@pytest.mark.skipif(iverilog() is not None, reason="Icarus is installed here")
def test_missing_icarus_is_a_clear_error():
    with pytest.raises(ToolMissing, match="needs Icarus Verilog"):
        check_backend("icarus")
