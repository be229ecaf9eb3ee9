"""A repeated module emitted once: a design's leaves (a PE, a word ALU, a network node, a
chip) are converted to Verilog one time each, and the blocks around them instantiate them
by name (``hdl.lib.blackbox.BlackBox``) instead of holding a flattened copy per instance.

A block's "of instances" subclass (``_MXUOfInstances``, ``_NetworkOfInstances``, ...)
overrides the one method that makes the repeated part, to return a black box of the
module's name and signature; :func:`emit` then writes every leaf once and the top last.
Verilator compiles each emitted module once, where it would compile a flattened copy per
instance: an 8x8 MXU emitted flat is 64 PEs in one module.
"""

from amaranth.back import verilog
from amaranth.hdl import Const, Value

__all__ = ["convert", "emit"]


def convert(component, name):
    """The Verilog of ``component`` as module ``name``, as every export writes it: no
    source attributes, no internal attributes."""
    values = [Value.cast(value) for _, _, value in component.signature.flatten(component)]
    # A constant member (the ready of an always-ready stream) is no port: name the others,
    # or Amaranth refuses the component.
    ports = [v for v in values if not isinstance(v, Const)] \
        if any(isinstance(v, Const) for v in values) else None
    return verilog.convert(component, name=name, ports=ports, emit_src=False,
                           strip_internal_attrs=True)


def emit(parts, *, header=""):
    """``header`` then the Verilog of ``parts``, ``[(module name, component)]`` with the
    top last, each module once. A part may carry functions after its component that edit
    its text in turn (as :func:`sim.backends.self_loading.add_to_module` adds a loader)."""
    texts = []
    for part in parts:
        name, component, *transform = part
        text = convert(component, name)
        for edit in transform:
            text = edit(text)
        texts.append(text)
    return header + "\n".join(texts)
