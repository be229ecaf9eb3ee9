"""Payload layouts of the memory system's streams, and the constants they share with
``golden.memory`` (the tests check that the two agree)."""

from amaranth.hdl import signed, unsigned
from amaranth.lib import data

__all__ = [
    "ADDRESS_BITS", "STRIDE_BITS", "FLAG_BITS", "ID_BITS", "ERROR_ADDRESS_BITS", "DIMS",
    "SPACES", "REASONS", "reason_code",
    "descriptor_layout", "error_layout", "flag_add_layout", "flag_set_layout",
    "flag_wait_layout",
]

#: Word addresses, counts and word totals (``golden.memory.ADDRESS_BITS``).
ADDRESS_BITS = 24
#: Strides: ``-2**24 < stride < 2**24``.
STRIDE_BITS = ADDRESS_BITS + 1
#: Flag ids (``golden.memory.FLAG_BITS``).
FLAG_BITS = 7
#: Descriptor ids: the DMA numbers descriptors 0, 1, 2, ... as they arrive, as
#: ``golden.memory.run`` numbers a batch (modulo 2**32).
ID_BITS = 32
#: A recorded offending address can lie far outside any space: ``base + sum(i_k * s_k)``
#: with ``|i_k * s_k| < 2**48`` needs 51 bits signed; one more keeps sums of them exact.
ERROR_ADDRESS_BITS = 52
#: Dimensions of a descriptor, innermost first.
DIMS = 3

#: Space codes: the index in this tuple (``golden.memory.SPACES``).
SPACES = ("hbm", "vmem")
#: Error reason codes: the index in this tuple. The first six are ``golden.memory.REASONS``
#: in order; ``bus`` is a bus error answered by the HBM (an injected fault).
REASONS = ("count", "chip", "flag", "sent_flag", "src_range", "dst_range", "bus")


def reason_code(name):
    """The code of a reason name from :data:`REASONS`."""
    if name not in REASONS:
        raise ValueError(f"unknown reason {name!r}; reasons: {', '.join(REASONS)}")
    return REASONS.index(name)


#: A DMA descriptor (SPEC section 6, ``golden.memory.Descriptor`` for local spaces).
#: Counts and strides are padded to three dimensions (counts with 1, strides with 0).
descriptor_layout = data.StructLayout({
    "src_space": 1,
    "src_base": unsigned(ADDRESS_BITS),
    "dst_space": 1,
    "dst_base": unsigned(ADDRESS_BITS),
    "counts": data.ArrayLayout(unsigned(ADDRESS_BITS), DIMS),
    "src_strides": data.ArrayLayout(signed(STRIDE_BITS), DIMS),
    "dst_strides": data.ArrayLayout(signed(STRIDE_BITS), DIMS),
    "flag": unsigned(FLAG_BITS),
})

#: An error record: descriptor ``id``, ``reason`` code and the recorded ``address`` (an
#: address, or the flag id for ``flag``), as ``golden.memory.DmaError``.
error_layout = data.StructLayout({
    "id": unsigned(ID_BITS),
    "reason": unsigned(3),
    "address": signed(ERROR_ADDRESS_BITS),
})

#: Add ``amount`` to flag ``flag`` (32-bit counters wrap).
flag_add_layout = data.StructLayout({"flag": unsigned(FLAG_BITS), "amount": unsigned(32)})
#: Set flag ``flag`` to ``value`` (a clear is a set of 0).
flag_set_layout = data.StructLayout({"flag": unsigned(FLAG_BITS), "value": unsigned(32)})
#: Wait until flag ``flag`` is at least ``value`` (unsigned).
flag_wait_layout = data.StructLayout({"flag": unsigned(FLAG_BITS), "value": unsigned(32)})
