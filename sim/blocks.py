"""The blocks a user can name: export, FPGA builds and simulator backends all start here.

A block is a component class; its keyword-only constructor parameters are the
block's parameters, with the constructor's defaults, so nothing restates them.
"""

import functools
import gc
import inspect
import warnings
from dataclasses import dataclass

from amaranth.hdl import Shape, UnusedElaboratable
from amaranth.lib.memory import Memory

from hdl.arith import BF16Multiplier, FP32Adder, FP32Divider, FP32Exp, FP32Multiplier, \
    FP32Rcp, FP32Rsqrt, FP32Sqrt, FP32ToBF16
from hdl.ici import Router
from hdl.memory import DmaSystem
from hdl.mxu import MXU, ProcessingElement, preset
from hdl.sparsecore import SparseCoreTile
from hdl.tensorcore import TensorCoreSystem
from hdl.vpu import VPU, TranscendentalUnit, VPUSystem

__all__ = ["BLOCKS", "block_params", "parse_params", "build", "component_class",
           "block_interface", "params_key", "kept_by_params", "memory_images", "MemoryImage"]

#: Block name -> component class.
BLOCKS = {
    "fp32_add": FP32Adder,
    "bf16_mul": BF16Multiplier,
    "fp32_to_bf16": FP32ToBF16,
    "fp32_mul": FP32Multiplier,
    "fp32_div": FP32Divider,
    "fp32_sqrt": FP32Sqrt,
    "fp32_rcp": FP32Rcp,
    "fp32_rsqrt": FP32Rsqrt,
    "fp32_exp": FP32Exp,
    "pe": ProcessingElement,
    "mxu": MXU,
    "dma": DmaSystem,
    "router": Router,
    "sparsecore": SparseCoreTile,
    "vpu": VPUSystem,
    # The VPU alone, its VMEM and MXU ports outside: what an FPGA build measures (in
    # "vpu" every result stays in memories without ports, and synthesis drops the datapath).
    "vpu_core": VPU,
    "vpu_transcendental": TranscendentalUnit,
    # A TensorCore on its memory system: what sim.chip runs (hdl.system.ChipNode adds the
    # router, for sim.system).
    "tensorcore": TensorCoreSystem,
}

#: The types of a parameter value that stands for itself in a key (:func:`params_key`).
_PLAIN = (int, str, bool, float, type(None))

#: How many answers :func:`kept_by_params` keeps for each function.
_KEEP_ANSWERS = 64

# How to read a parameter from the command line when its default does not say: a default
# of None, or a tuple (a comma-separated list of names). Any other parameter is read as
# its default's type, bool, str or int.
_PARAM_TYPES = {"transpose": bool, "mxu": bool, "ops": tuple, "functions": tuple,
                "eject_by": str, "switching": str, "injection_queues": bool}


def _param_type(block, name):
    if name in _PARAM_TYPES:
        return _PARAM_TYPES[name]
    default = block_params(block).get(name)
    return type(default) if isinstance(default, (bool, str)) else int


def block_params(block):
    """Parameter name -> default of ``block`` (plus ``preset`` for the MXU)."""
    params = {name: p.default for name, p in
              inspect.signature(component_class(block).__init__).parameters.items()
              if p.kind is inspect.Parameter.KEYWORD_ONLY}
    if block == "mxu":
        params["preset"] = None
    return params


def component_class(block):
    """The component class of ``block``; a ValueError names the blocks for an unknown one."""
    if block not in BLOCKS:
        raise ValueError(f"unknown block {block!r}; blocks: {', '.join(BLOCKS)}")
    return BLOCKS[block]


def _parse_value(block, name, text):
    kind = _param_type(block, name)
    if name == "preset":
        return text
    if kind is bool:
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{block}: parameter {name} must be true or false, not {text!r}")
    if kind is tuple:                  # a comma-separated list of names
        return tuple(item for item in text.split(",") if item)
    if kind is int:
        try:
            return int(text, 0)
        except ValueError:
            raise ValueError(f"{block}: parameter {name} must be an integer, "
                             f"not {text!r}") from None
    return text


def parse_params(block, pairs):
    """Turn ``["rows=16", "numerics=ieee"]`` into typed parameters of ``block``.

    Unknown names are a ``ValueError`` that lists the valid ones. ``preset``
    (MXU only) stands for the preset's ``rows`` and ``cols``.
    """
    valid = block_params(block)
    params = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"{block}: parameters are name=value, not {pair!r}")
        if name not in valid:
            raise ValueError(f"{block}: unknown parameter {name!r}; parameters: "
                             f"{', '.join(valid)}")
        params[name] = _parse_value(block, name, text)
    if "preset" in params:
        name = params.pop("preset")
        clash = {"rows", "cols"} & params.keys()
        if clash:
            raise ValueError(f"{block}: preset={name} sets rows and cols; do not also give "
                             f"{', '.join(sorted(clash))}")
        params.update(preset(name))
    return params


def build(block, params=None):
    """A new component for ``block`` with ``params``."""
    return component_class(block)(**(params or {}))


@dataclass(frozen=True)
class MemoryImage:
    """A memory inside a block that a run may load and read back.

    ``path`` is the memory's hierarchical name below the block's top module
    (``"hbm.words"``), which a Verilog testbench reaches with
    ``$readmemh``; ``depth`` and ``width`` are its shape in entries and bits.
    """
    path: str
    depth: int
    width: int


def memory_images(component):
    """``{name: (MemoryData, path)}`` of the memories ``component`` offers to runs.

    A component offers them through an attribute ``memory_images`` of that
    form (a ``Memory`` in place of its ``MemoryData`` is taken too); most blocks
    have none.
    """
    return {name: (memory.data if isinstance(memory, Memory) else memory, path)
            for name, (memory, path) in getattr(component, "memory_images", {}).items()}


def params_key(params):
    """A hashable key for a block's ``params``, or None if a parameter is not a plain value
    (an array's text can elide its middle, so it cannot stand for the design)."""
    def plain(value):
        if isinstance(value, (tuple, list, frozenset)):
            return all(plain(v) for v in value)
        return isinstance(value, _PLAIN)
    params = params or {}
    if not all(plain(v) for v in params.values()):
        return None
    return repr(sorted(params.items()))


def kept_by_params(function):
    """``function(*args, params)``, its answer kept for each ``args`` and plain ``params``
    (:func:`params_key`); the :data:`_KEEP_ANSWERS` newest are kept. Its callers must not
    change an answer."""
    answers = {}

    @functools.wraps(function)
    def kept(*args):
        key = params_key(args[-1])
        if key is None:
            return function(*args)
        key = (*args[:-1], key)
        if key not in answers:
            answers[key] = function(*args)
            while len(answers) > _KEEP_ANSWERS:
                answers.pop(next(iter(answers)))
        return answers[key]
    return kept


def block_interface(block, params=None):
    """(signature, ``{name: MemoryImage}``) of ``block`` built with ``params``.

    The component is built only to read its ports and memories; it is never
    elaborated, so Amaranth's warning about an unused elaboratable is expected
    and dropped. The answer is kept for each block and plain ``params``
    (:func:`kept_by_params`): every run asks again.
    """
    signature, images = _probe_interface(block, params)
    return signature, dict(images)


@kept_by_params
def _probe_interface(block, params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        component = build(block, params)
        images = {name: MemoryImage(path, memory.depth, Shape.cast(memory.shape).width)
                  for name, (memory, path) in memory_images(component).items()}
        signature = component.signature
        del component
        # The component and its parts go while the filter is on. A full collection takes
        # up to a second in a process holding compiled simulations: hence kept_by_params.
        gc.collect()
    return signature, images
