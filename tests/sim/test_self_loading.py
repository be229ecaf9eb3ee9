"""``sim.backends.self_loading``: two instances of one module, each loading and dumping its
own memory by its number, on Verilator (the module a hierarchical block, as ``sim.system``
builds its chips) and on Icarus."""

import subprocess

import pytest

from sim.backends.self_loading import add_to_module, loader_verilog
from sim.toolchain import iverilog, tool_env, verilator
from sim.blocks import MemoryImage

from ..simulators import ICARUS

# A register file whose entry 1 is shown on ``q``: after the load, ``q`` shows what the
# instance's own image put there. Its initial contents (as Amaranth gives every memory)
# stay where no image is loaded.
CELL = """\
module tile(input clk, input [3:0] number, input [7:0] add, output [7:0] q);
  reg [7:0] store [0:3];
  initial begin
    store[0] = 0; store[1] = 8'h07; store[2] = 0; store[3] = 0;
  end
  assign q = store[1];
  reg [1:0] step = 0;
  always @(posedge clk) begin
    step <= step + 1;
    if (step == 2) store[2] <= store[1] + add;
  end
endmodule
"""

TOP = """\
module top(input clk);
  wire [7:0] q0, q1;
  tile a(.clk(clk), .number(4'd0), .add(8'd1), .q(q0));
  tile b(.clk(clk), .number(4'd5), .add(8'd2), .q(q1));
  reg [3:0] n = 0;
  always @(posedge clk) begin
    n <= n + 1;
    if (n == 5) begin
      $display("q0=%h q1=%h", q0, q1);
      $finish;
    end
  end
endmodule
"""

MAIN = """\
#include "Vtop.h"
#include "verilated.h"
int main(int argc, char** argv) {
  auto context = new VerilatedContext;
  context->commandArgs(argc, argv);
  auto top = new Vtop(context);
  while (!context->gotFinish()) { top->clk = 0; top->eval(); top->clk = 1; top->eval(); }
  top->final();
  return 0;
}
"""

ICARUS_CLOCK = "module clock; reg clk = 0; always #5 clk = ~clk; top t(.clk(clk)); endmodule\n"


def _design():
    loader = loader_verilog({"store": MemoryImage("store", 4, 8)}, number="number",
                            prefix="tile")
    return add_to_module(CELL, "tile", loader) + TOP


def _compile(folder, simulator):
    (folder / "design.v").write_text(_design())
    if simulator == "verilator":
        (folder / "main.cpp").write_text(MAIN)
        (folder / "config.vlt").write_text('`verilator_config\nhier_block -module "tile"\n')
        commands = [[verilator(), "--cc", "--exe", "--hierarchical", "--top-module", "top",
                     "-Mdir", "obj", "-Wno-fatal", "config.vlt", "main.cpp", "design.v"],
                    ["make", "-s", "-C", "obj", "-fVtop_hier.mk", "hier_build"]]
        run = [str(folder / "obj" / "Vtop")]
    else:
        (folder / "clock.v").write_text(ICARUS_CLOCK)
        commands = [[iverilog(), "-g2012", "-s", "clock", "-o", "top.vvp", "design.v",
                     "clock.v"]]
        run = ["vvp", "-n", "top.vvp"]
    for command in commands:
        subprocess.run(command, cwd=folder, env=tool_env(), check=True, capture_output=True)
    return run


@pytest.fixture(scope="module", params=["verilator", ICARUS])
def built(request, tmp_path_factory):
    """(the command that runs the design, its folder) on each simulator, built once."""
    folder = tmp_path_factory.mktemp(request.param)
    return _compile(folder, request.param), folder


def test_each_instance_loads_and_dumps_its_own_memory(built):
    run, tmp_path = built
    (tmp_path / "a.hex").write_text("00\n11\n00\n00\n")
    (tmp_path / "b.hex").write_text("00\n40\n00\n00\n")
    proc = subprocess.run(run + ["+mem_tile0.store_in=a.hex", "+mem_tile5.store_in=b.hex",
                                 "+mem_tile0.store_out=a.out", "+mem_tile5.store_out=b.out"],
                          cwd=tmp_path, env=tool_env(), capture_output=True, text=True,
                          check=True)
    assert "q0=11 q1=40" in proc.stdout

    def dumped(name):
        lines = (tmp_path / name).read_text().splitlines()
        return [int(line, 16) for line in lines if line and not line.startswith("//")]

    # Each dump holds its own instance's memory at the end of the run, after its write.
    assert dumped("a.out") == [0x00, 0x11, 0x12, 0x00]
    assert dumped("b.out") == [0x00, 0x40, 0x42, 0x00]


def test_an_instance_without_plusargs_keeps_its_memory(built):
    run, tmp_path = built
    for old in tmp_path.glob("*.out"):
        old.unlink()
    (tmp_path / "b.hex").write_text("00\n40\n00\n00\n")
    proc = subprocess.run(run + ["+mem_tile5.store_in=b.hex"], cwd=tmp_path, env=tool_env(),
                          capture_output=True, text=True, check=True)
    assert "q0=07 q1=40" in proc.stdout
    assert not list(tmp_path.glob("*.out"))


def test_bad_names_are_refused():
    image = {"store": MemoryImage("store", 4, 8)}
    with pytest.raises(ValueError, match="plain Verilog port name"):
        loader_verilog(image, number="a.b", prefix="tile")
    with pytest.raises(ValueError, match="no module 'other'"):
        add_to_module(CELL, "other", "")
