"""The TensorCore (SPEC section 4.7): a VLIW sequencer that runs ``golden.tensorcore``'s
bundles from IMEM, with its scalar unit and SMEM, feeding the VPU and MXU through a queue.

* :mod:`~hdl.tensorcore.encoding` restates ``golden.tensorcore``'s encoding tables;
* :mod:`~hdl.tensorcore.isa` decodes a bundle;
* :mod:`~hdl.tensorcore.scalar_alu` is the scalar slots' datapath;
* :class:`~hdl.tensorcore.sequencer.Sequencer` fetches, checks and issues bundles;
* :class:`~hdl.tensorcore.dma_issue.DmaIssue` judges a ``dma``'s descriptor, its record
  read by a :class:`~hdl.tensorcore.record_reader.RecordReader` (two ports, the next
  record ahead);
* :class:`~hdl.tensorcore.vector_queue.VectorQueue` decouples the VPU;
* :class:`~hdl.tensorcore.core.TensorCore` holds them with IMEM, SMEM, the VPU and the MXU;
* :class:`~hdl.tensorcore.system.TensorCoreSystem` joins it to the memory system (DMA
  engine, HBM, VMEM, flags): a chip without a router.
"""

from .core import TensorCore
from .encoding import Error
from .isa import ERROR_CODES
from .sequencer import Sequencer, State
from .system import TensorCoreSystem

__all__ = ["TensorCore", "TensorCoreSystem", "Sequencer", "State", "Error",
           "ERROR_CODES"]
