"""The bf16 systolic matrix unit (SPEC section 4.1): processing element, systolic
array with skew buffers, and the MXU with double-buffered weights and a result FIFO."""

from .matrix_unit import MXU, PRESETS, lhs_layout, mxu_latency, preset, weights_layout
from .pe import ADD_STAGES, MUL_STAGES, ProcessingElement, check_pe_params, pe_signature
from .systolic_array import PERow, SystolicArray, array_latency, check_array_params, \
    pe_row_signature

__all__ = ["MXU", "PRESETS", "preset", "mxu_latency", "weights_layout", "lhs_layout",
           "ProcessingElement", "check_pe_params", "pe_signature", "MUL_STAGES", "ADD_STAGES",
           "PERow", "SystolicArray", "array_latency", "check_array_params", "pe_row_signature"]
