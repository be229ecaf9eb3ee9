"""Payload layouts of the memory system's streams, and the constants they share with
``golden.memory`` (the tests check that the two agree)."""

from amaranth.hdl import signed, unsigned
from amaranth.lib import data, enum

__all__ = [
    "ADDRESS_BITS", "STRIDE_BITS", "FLAG_BITS", "CHIP_BITS", "ID_BITS", "ERROR_ADDRESS_BITS",
    "DIMS", "SPACES", "Reason", "REASONS",
    "descriptor_layout", "error_layout", "flag_add_layout", "flag_set_layout",
    "flag_wait_layout", "target_word_layout",
]

#: Word addresses, counts and word totals (``golden.memory.ADDRESS_BITS``).
ADDRESS_BITS = 24
#: Strides: ``-2**24 < stride < 2**24``.
STRIDE_BITS = ADDRESS_BITS + 1
#: Flag ids (``golden.memory.FLAG_BITS``).
FLAG_BITS = 7
#: Chip ids (``golden.memory.CHIP_BITS``).
CHIP_BITS = 8
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


class Reason(enum.IntEnum, shape=3):
    """Why a descriptor was rejected: the shape of an error record's ``reason``.

    The first six are ``golden.memory.REASONS`` in order; ``BUS`` is a bus error answered
    by the HBM (an injected fault). An ``IntEnum``, so a reason read back from a record
    indexes :data:`REASONS` as its code always has.
    """
    COUNT = 0
    CHIP = 1
    FLAG = 2
    SENT_FLAG = 3
    SRC_RANGE = 4
    DST_RANGE = 5
    BUS = 6


#: The names of :class:`Reason` in code order, as ``golden.memory`` and sim spell them.
REASONS = tuple(member.name.lower() for member in Reason)


#: A DMA descriptor (SPEC section 6, ``golden.memory.Descriptor``). Counts and strides are
#: padded to three dimensions (counts with 1, strides with 0). With ``remote`` set the
#: destination ``dst_space``/``dst_base`` is on chip ``chip``: a push; it adds its word
#: count to local flag ``sent_flag`` once its last word has left when ``sent`` is set
#: (``golden``'s ``sent_flag`` not None). ``chip``, ``sent`` and ``sent_flag`` are ignored
#: for a local descriptor. The remote fields come last, so a local descriptor packs to
#: the same low bits as before they existed, with zeros above.
descriptor_layout = data.StructLayout({
    "src_space": 1,
    "src_base": unsigned(ADDRESS_BITS),
    "dst_space": 1,
    "dst_base": unsigned(ADDRESS_BITS),
    "counts": data.ArrayLayout(unsigned(ADDRESS_BITS), DIMS),
    "src_strides": data.ArrayLayout(signed(STRIDE_BITS), DIMS),
    "dst_strides": data.ArrayLayout(signed(STRIDE_BITS), DIMS),
    "flag": unsigned(FLAG_BITS),
    "remote": 1,
    "chip": unsigned(CHIP_BITS),
    "sent": 1,
    "sent_flag": unsigned(FLAG_BITS),
})

#: An error record: descriptor ``id``, ``reason`` code and the recorded ``address`` (an
#: address, or the chip or flag id for ``chip``, ``flag`` and ``sent_flag``), as
#: ``golden.memory.DmaError``.
error_layout = data.StructLayout({
    "id": unsigned(ID_BITS),
    "reason": Reason,
    "address": signed(ERROR_ADDRESS_BITS),
})

#: Add ``amount`` to flag ``flag`` (32-bit counters wrap).
flag_add_layout = data.StructLayout({"flag": unsigned(FLAG_BITS), "amount": unsigned(32)})
#: Set flag ``flag`` to ``value`` (a clear is a set of 0).
flag_set_layout = data.StructLayout({"flag": unsigned(FLAG_BITS), "value": unsigned(32)})
#: Wait until flag ``flag`` is at least ``value`` (unsigned).
flag_wait_layout = data.StructLayout({"flag": unsigned(FLAG_BITS), "value": unsigned(32)})

#: Word 1 of an ICI packet, the target word (``golden.ici`` ADDRESS, FLAG, SPACE): a
#: ``write``'s first word address (a ``flag_add``'s amount), the flag at the destination,
#: and a ``write``'s space. Word 0, the route word, is ``hdl.ici.layouts.route_word_layout``.
target_word_layout = data.StructLayout({
    "address": unsigned(ADDRESS_BITS),
    "flag": unsigned(FLAG_BITS),
    "space": 1,
})
assert target_word_layout.size == 32
