"""Memory system (SPEC section 4.3): HBM model, VMEM, sync flags and the DMA engine.

Every memory sits behind :class:`~hdl.lib.memory_port.MemoryPortSignature`. The DMA is
layered, with streams between the layers: :class:`DescriptorCheck` (queue, and validation
before any write) -> :class:`AddressGenerator` (3-D, element order, in beats of up to a
line) -> :class:`BurstEngine` (line reads, rotated and merged line writes) and, for remote
pushes, :class:`Packetizer` (ICI ``write`` packets out; :class:`PushPorts` deals pushes to
several). A :class:`Receiver` lands the packets that arrive. :class:`DmaSystem` joins them,
with a receiver per network port.
"""

from .dma import DMA
from .dma_addrgen import AddressGenerator, beat_layout, inflight_layout
from .dma_burst import ROUND_TRIP, BurstEngine
from .dma_check import DescriptorCheck, job_layout
from .dma_push import Packetizer, max_payload_words, push_beat_layout, push_done_layout
from .dma_push_ports import PushPorts
from .dma_receive import Receiver
from .dma_system import DmaSystem, core_signature
from .hbm import HBM
from .layouts import (ADDRESS_BITS, CHIP_BITS, DIMS, ERROR_ADDRESS_BITS, FLAG_BITS, ID_BITS,
                      REASONS, SPACES, STRIDE_BITS, Reason, descriptor_layout, error_layout,
                      flag_add_layout, flag_set_layout, flag_wait_layout, target_word_layout)
from .port_merge import WriterMerge
from .port_share import PortShare
from .sync_flags import SyncFlags
from .vmem import VMEM

__all__ = [
    "HBM", "VMEM", "SyncFlags", "DMA", "DmaSystem", "core_signature",
    "DescriptorCheck", "AddressGenerator", "BurstEngine", "ROUND_TRIP", "Packetizer",
    "PushPorts", "Receiver", "WriterMerge", "PortShare", "max_payload_words",
    "descriptor_layout", "error_layout", "flag_add_layout", "flag_set_layout",
    "flag_wait_layout", "job_layout", "beat_layout", "inflight_layout", "push_beat_layout",
    "push_done_layout", "target_word_layout",
    "ADDRESS_BITS", "STRIDE_BITS", "FLAG_BITS", "CHIP_BITS", "ID_BITS", "ERROR_ADDRESS_BITS",
    "DIMS",
    "SPACES", "Reason", "REASONS",
]
