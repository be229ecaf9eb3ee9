"""TensorCore programs generated from Python with ``golden.tensorcore``'s assembler.

Each kernel plans a computation: the assembly text and the HBM, VMEM and SMEM images it
runs on, so that the same plan runs on the instruction-set simulator and on the RTL.
"""

from .collective import CollectivePlan, plan_collective
from .data_parallel import DataParallelPlan, plan_data_parallel
from .matmul import MatmulKernel, plan_matmul

__all__ = ["MatmulKernel", "plan_matmul", "CollectivePlan", "plan_collective",
           "DataParallelPlan", "plan_data_parallel"]
