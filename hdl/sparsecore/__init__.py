"""SparseCore tile (SPEC section 4.6): deduplicated gather into Spmem, an 8-wide scVPU that
combines bags and applies optimizer updates in golden.sparsecore's order, and a flush that
writes each unique row back once.

The units, in data order: :class:`BagWalker` (CSR bags) -> :class:`Dedup` (unique ids,
occurrence chains, errors) -> :class:`FetchUnit` (HBM -> Spmem) -> :class:`LookupSequencer`
or :class:`UpdateSequencer` -> :class:`CombineRing` (multiply and fold) ->
:class:`RowwiseMean` (rowwise Adagrad's mean square, for those batches) ->
:class:`FinishPipeline` (divide, optimizer) -> output stream or :class:`FlushUnit`
(Spmem -> HBM). :class:`SparseCoreTile` joins them around an HBM model, or behind a port to
a chip's HBM; :class:`SparseCoreEngine` runs such a tile from work items on a chip's HBM.
"""

from .bag_walker import BagWalker
from .chunk_buffer import ChunkBuffer
from .combine_ring import CombineRing
from .dedup import Dedup
from .engine import CONTROL_FIELDS, WORK_FIELDS, SparseCoreEngine, control_word, work_layout
from .fetch import FetchUnit
from .finish_pipeline import FinishPipeline
from .flush import FlushUnit
from .layouts import COMBINERS, LANES, ONE, OPS, OPTIMIZERS, SIGN, Combiner, Geometry, Op, \
    Optimizer, chunk_layout, id_layout
from .lookup_sequencer import LookupSequencer
from .rowwise_mean import RowwiseMean
from .tile import STAMPS, SparseCoreTile
from .update_sequencer import UpdateSequencer

__all__ = ["SparseCoreTile", "STAMPS", "SparseCoreEngine", "work_layout", "WORK_FIELDS",
           "CONTROL_FIELDS", "control_word", "BagWalker", "Dedup", "FetchUnit", "ChunkBuffer",
           "LookupSequencer", "UpdateSequencer", "CombineRing", "RowwiseMean",
           "FinishPipeline", "FlushUnit", "Geometry", "LANES", "ONE", "SIGN", "Op", "Combiner",
           "Optimizer", "OPS", "COMBINERS", "OPTIMIZERS", "chunk_layout", "id_layout"]
