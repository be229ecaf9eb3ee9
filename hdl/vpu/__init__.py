"""The VPU (SPEC section 4.2): lanes of 8 sublanes, dual-issue ALUs, transcendentals, VMEM
loads and stores, and the MXU link.

:class:`~hdl.vpu.vpu.VPU` issues ``golden.vpu``'s instruction words (decoded by
:mod:`hdl.vpu.isa`) to two :class:`~hdl.vpu.vector_alu.VectorALU` slots, the
:class:`~hdl.vpu.transcendental_unit.TranscendentalUnit`, the
:class:`~hdl.vpu.reduce_unit.ReduceUnit`, the
:class:`~hdl.vpu.load_store_unit.LoadStoreUnit` and the MXU link
(:mod:`hdl.vpu.mxu_link`). :class:`~hdl.vpu.vpu_system.VPUSystem` adds its
VMEM and MXU for whole runs.
"""

from .layouts import PROGRAM_LAYOUT
from .transcendental_unit import TranscendentalUnit
from .vpu import ERRORS, OPTIONAL_OPS, VPU, Error
from .vpu_system import VPUSystem

__all__ = ["VPU", "VPUSystem", "TranscendentalUnit", "Error", "ERRORS", "OPTIONAL_OPS",
           "PROGRAM_LAYOUT"]
