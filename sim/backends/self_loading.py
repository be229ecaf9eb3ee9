"""Verilog that lets every instance of a repeated module load and dump its own memories.

The whole-run testbench (:mod:`sim.backends.testbench`) loads a block's memories by
hierarchical path from the top. That path cannot enter a module that Verilator builds as
a hierarchical block (its own library, called by every instance), so a runner whose
repeated module holds memories (``sim.system``'s chip) puts the loading inside that module
instead. Each instance knows its number from an input port, and takes the same plusargs
the testbench would have taken for it (``+mem_<prefix><n>.<name>_in=FILE`` and
``_out=FILE``), so :func:`sim.backends.compiled.run_built` drives both alike.

An instance loads its memories on the first rising clock edge (after every ``initial``
block, as the testbench does) and dumps them in a ``final`` block, which runs when the
testbench's ``$finish`` ends the run.
"""

import re

__all__ = ["loader_verilog", "add_to_module"]

#: Names of the loader's own registers, chosen to stay clear of Amaranth's.
_LOADED, _PATH = "tpu_rtl_images_loaded", "tpu_rtl_image_path"


def loader_verilog(images, *, number, prefix, clock="clk"):
    """Module-body Verilog that loads and dumps ``images`` (``{name: MemoryImage}``, paths
    below the module) from the plusargs of instance ``<prefix><number>``; ``number`` is the
    input port that holds the instance's number, ``clock`` its clock port."""
    for name in (number, clock):
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise ValueError(f"{name!r} is not a plain Verilog port name")

    def plusarg(name, way):
        return f'$value$plusargs($sformatf("mem_{prefix}%0d.{name}_{way}=%%s", {number}), {_PATH})'

    lines = ["  // Added by tpu-rtl (sim/backends/self_loading.py): this instance's memories.",
             f"  reg {_LOADED} = 0;", f"  reg [8*4096-1:0] {_PATH};",
             f"  always @(posedge {clock})", f"    if (!{_LOADED}) begin",
             f"      {_LOADED} <= 1;"]
    for name, image in images.items():
        lines += [f"      if ({plusarg(name, 'in')})",
                  f"        $readmemh({_PATH}, {image.path});"]
    lines += ["    end", "  final begin"]
    for name, image in images.items():
        lines += [f"    if ({plusarg(name, 'out')})",
                  f"      $writememh({_PATH}, {image.path});"]
    lines += ["  end"]
    return "\n".join(lines) + "\n"


def add_to_module(text, module, body):
    """``text`` (Verilog) with ``body`` added at the end of module ``module``."""
    start = re.search(rf"^module {re.escape(module)}\(", text, re.MULTILINE)
    if start is None:
        raise ValueError(f"no module {module!r} in the Verilog")
    end = text.index("\nendmodule", start.end())
    return text[:end + 1] + body + text[end + 1:]
