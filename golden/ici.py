"""ICI packet layout (SPEC 4.4), defined once: the RTL encodes and decodes exactly this.

A packet is a stream of 32-bit words cut into flits of ``flit_words`` words (1 to 8); its
first flit is the header flit. The words are: the route word, the target word, then (for
``write``) the data. The last flit is filled with ``pad`` zero words. Routers read only the
route word; the receiving DMA reads the target word. With ``flit_words = 1`` the header flit
is the route word alone and the target word is the second flit; with 2 or more the header
flit holds both, and data start right after the target word.

Word 0, the route word:

=======  ==========  =====  ==========================================================
bits     field       width  meaning
=======  ==========  =====  ==========================================================
1:0      ``opcode``  2      1 ``write``, 2 ``flag_add``; 0 and 3 are malformed, so an
                            all-zero word is never a header
3:2      ``vc``      2      virtual channel
11:4     ``dst``     8      destination chip
19:12    ``src``     8      source chip
28:20    ``length``  9      flits in the packet, header flit included, 1 to 511
31:29    ``pad``     3      unused zero words in the last flit, 0 to ``flit_words - 1``
=======  ==========  =====  ==========================================================

Word 1, the target word:

=======  ============  =====  ========================================================
bits     field         width  meaning
=======  ============  =====  ========================================================
23:0     ``address``   24     ``write``: word address of the first data word;
         (``amount``)         ``flag_add``: the amount
30:24    ``flag``      7      flag id at the destination chip
31       ``space``     1      ``write``: 0 hbm, 1 vmem; ``flag_add``: 0
=======  ============  =====  ========================================================

Words 2 and on: ``write`` data, to ``address, address + 1, ...`` (at least one word);
``flag_add`` has none. Every packet adds to ``flag`` at its destination when it has
landed: a ``write`` adds its data word count, a ``flag_add`` its amount. That is why a
``write`` names a flag: flags count words, so the order packets arrive in doesn't matter.

The widths of ``dst``/``src``, ``address`` and ``flag`` are ``golden.memory``'s
``CHIP_BITS``, ``ADDRESS_BITS`` and ``FLAG_BITS``, so any accepted DMA push is encodable.
"""

import dataclasses
from typing import NamedTuple

import numpy as np

from . import memory
from .memory import ADDRESS_BITS, CHIP_BITS, FLAG_BITS, MAX_WORDS, SPACES, Descriptor

__all__ = [
    "Field", "OPCODE", "VC", "DST", "SRC", "LENGTH", "PAD", "ADDRESS", "FLAG", "SPACE",
    "FIELDS", "OPCODES", "HEADER_WORDS", "MAX_LENGTH", "MAX_FLIT_WORDS", "MAX_VCS",
    "Header", "Packet", "max_payload", "encode_write", "encode_flag_add",
    "decode_header", "decode", "push_packets",
]


class Field(NamedTuple):
    """A header field: bits ``lo .. lo + width - 1`` of header word ``word``."""
    name: str
    word: int
    lo: int
    width: int

    def get(self, word):
        return (int(word) >> self.lo) & ((1 << self.width) - 1)

    def put(self, value):
        return value << self.lo


OPCODE = Field("opcode", 0, 0, 2)
VC = Field("vc", 0, 2, 2)
DST = Field("dst", 0, 4, CHIP_BITS)
SRC = Field("src", 0, 12, CHIP_BITS)
LENGTH = Field("length", 0, 20, 9)
PAD = Field("pad", 0, 29, 3)
ADDRESS = Field("address", 1, 0, ADDRESS_BITS)
FLAG = Field("flag", 1, 24, FLAG_BITS)
SPACE = Field("space", 1, 31, 1)
#: Every field, in the order of the tables above.
FIELDS = (OPCODE, VC, DST, SRC, LENGTH, PAD, ADDRESS, FLAG, SPACE)

#: Opcode values.
OPCODES = {"write": 1, "flag_add": 2}
HEADER_WORDS = 2
MAX_LENGTH = (1 << LENGTH.width) - 1
MAX_FLIT_WORDS = 1 << PAD.width
MAX_VCS = 1 << VC.width


class Header(NamedTuple):
    """The route word, decoded."""
    opcode: str
    vc: int
    dst: int
    src: int
    length: int
    pad: int


@dataclasses.dataclass(frozen=True, eq=False)
class Packet:
    """A decoded packet. ``amount`` is what the destination adds to ``flag``: the data
    word count for a ``write``. ``space`` and ``address`` are None for a ``flag_add``,
    whose ``data`` is empty."""
    opcode: str
    dst: int
    src: int
    vc: int
    flag: int
    amount: int
    space: str | None
    address: int | None
    data: np.ndarray


_int = memory._int   # the same integer check and message as the descriptors


def _flit_words(flit_words):
    return _int(flit_words, "flit_words", 1, MAX_FLIT_WORDS + 1)


def max_payload(flit_words=1):
    """The most data words one ``write`` packet can carry with this flit width."""
    return MAX_LENGTH * _flit_words(flit_words) - HEADER_WORDS


def _pack(words, *, opcode, dst, src, vc, flit_words):
    fw = _flit_words(flit_words)
    length = -(-len(words) // fw)
    if length > MAX_LENGTH:
        raise ValueError(f"packet needs {length} flits, more than {MAX_LENGTH}")
    pad = length * fw - len(words)
    route = (OPCODE.put(OPCODES[opcode]) | VC.put(_int(vc, "vc", 0, MAX_VCS))
             | DST.put(_int(dst, "dst", 0, 1 << DST.width))
             | SRC.put(_int(src, "src", 0, 1 << SRC.width))
             | LENGTH.put(length) | PAD.put(pad))
    flat = np.zeros(length * fw, np.uint32)
    flat[0] = route
    flat[1:len(words)] = words[1:]
    return flat.reshape(length, fw)


def encode_write(*, dst, src, space, address, flag, data, vc=0, flit_words=1):
    """A ``write`` packet: ``data`` to ``address, address + 1, ...`` of ``space`` on chip
    ``dst``, then add ``len(data)`` to flag ``flag`` there.

    Parameters
    ----------
    dst, src : int
        Chip ids, ``0 <= id < 2**CHIP_BITS``.
    space : "hbm" or "vmem"
    address : int
        ``address + len(data) <= MAX_WORDS``.
    flag : int
    data : 1-D uint32 array, 1 to ``max_payload(flit_words)`` words
    vc : int
    flit_words : int

    Returns
    -------
    uint32 array [n_flits, flit_words]
    """
    if space not in SPACES:
        raise ValueError(f"space must be one of {SPACES}, not {space!r}")
    if not isinstance(data, np.ndarray) or data.dtype != np.uint32 or data.ndim != 1:
        raise ValueError("data must be a 1-D numpy uint32 array")
    if len(data) == 0:
        raise ValueError("a write carries at least one data word")
    address = _int(address, "address", 0, MAX_WORDS)
    if address + len(data) > MAX_WORDS:
        raise ValueError(f"write of {len(data)} words at {address} passes address {MAX_WORDS}")
    target = (ADDRESS.put(address) | FLAG.put(_int(flag, "flag", 0, 1 << FLAG.width))
              | SPACE.put(SPACES.index(space)))
    words = np.concatenate([np.array([0, target], np.uint32), data])
    return _pack(words, opcode="write", dst=dst, src=src, vc=vc, flit_words=flit_words)


def encode_flag_add(*, dst, src, flag, amount, vc=0, flit_words=1):
    """A ``flag_add`` packet: add ``amount`` (``0 <= amount < MAX_WORDS``) to flag ``flag``
    on chip ``dst``. Other parameters as ``encode_write``.

    Returns
    -------
    uint32 array [n_flits, flit_words]
    """
    target = (ADDRESS.put(_int(amount, "amount", 0, MAX_WORDS))
              | FLAG.put(_int(flag, "flag", 0, 1 << FLAG.width)))
    words = np.array([0, target], np.uint32)
    return _pack(words, opcode="flag_add", dst=dst, src=src, vc=vc, flit_words=flit_words)


def _malformed(field, value, why):
    return ValueError(f"malformed ICI header: field '{field.name}' = {value}: {why}")


def decode_header(word, *, flit_words=1, n_chips=None, vcs=None):
    """Decode and check a route word.

    Parameters
    ----------
    word : int
    flit_words : int
    n_chips, vcs : int, optional
        When given, ``dst``/``src`` and ``vc`` must be below them.

    Returns
    -------
    Header

    Raises
    ------
    ValueError
        Naming the first bad field: opcode, length (zero, or not the size its opcode
        needs), pad, dst, src, vc.
    """
    fw = _flit_words(flit_words)
    word = _int(word, "header word", 0, 1 << 32)
    code = OPCODE.get(word)
    names = {v: k for k, v in OPCODES.items()}
    if code not in names:
        raise _malformed(OPCODE, code, "not 1 (write) or 2 (flag_add)")
    length, pad = LENGTH.get(word), PAD.get(word)
    if length == 0:
        raise _malformed(LENGTH, 0, "a packet has at least one flit")
    if pad >= fw:
        raise _malformed(PAD, pad, f"must be below flit_words = {fw}")
    words = length * fw - pad
    if names[code] == "flag_add" and words != HEADER_WORDS:
        raise _malformed(LENGTH, length, f"a flag_add is {HEADER_WORDS} words, not {words}")
    if names[code] == "write" and words <= HEADER_WORDS:
        raise _malformed(LENGTH, length, "a write carries at least one data word")
    for field, limit in ((DST, n_chips), (SRC, n_chips), (VC, vcs)):
        if limit is not None and field.get(word) >= limit:
            raise _malformed(field, field.get(word), f"must be below {limit}")
    return Header(names[code], VC.get(word), DST.get(word), SRC.get(word), length, pad)


def decode(flits, *, n_chips=None, vcs=None):
    """Decode a whole packet.

    Parameters
    ----------
    flits : uint32 array [n_flits, flit_words]
    n_chips, vcs : int, optional
        As ``decode_header``.

    Returns
    -------
    Packet

    Raises
    ------
    ValueError
        On a malformed header (naming the field), a ``length`` that is not ``n_flits``,
        non-zero pad words, or a ``space`` bit set in a ``flag_add``.
    """
    if not isinstance(flits, np.ndarray) or flits.dtype != np.uint32 or flits.ndim != 2:
        raise ValueError("flits must be a 2-D numpy uint32 array [n_flits, flit_words]")
    if flits.shape[0] == 0:
        raise ValueError("a packet has at least one flit")
    fw = flits.shape[1]
    words = flits.ravel()
    h = decode_header(words[0], flit_words=fw, n_chips=n_chips, vcs=vcs)
    if h.length != flits.shape[0]:
        raise _malformed(LENGTH, h.length, f"the packet has {flits.shape[0]} flits")
    end = len(words) - h.pad
    if words[end:].any():
        raise _malformed(PAD, h.pad, "the pad words must be zero")
    target = int(words[1])
    flag = FLAG.get(target)
    if h.opcode == "flag_add":
        if SPACE.get(target):
            raise _malformed(SPACE, 1, "must be 0 in a flag_add")
        return Packet("flag_add", h.dst, h.src, h.vc, flag, ADDRESS.get(target), None, None,
                      np.zeros(0, np.uint32))
    data = words[HEADER_WORDS:end].copy()
    address = ADDRESS.get(target)
    if address + len(data) > MAX_WORDS:
        raise _malformed(ADDRESS, address, f"a {len(data)}-word write passes {MAX_WORDS}")
    data.flags.writeable = False
    return Packet("write", h.dst, h.src, h.vc, flag, len(data), SPACES[SPACE.get(target)],
                  address, data)


def push_packets(descriptor, data, *, src_chip, max_payload_words, vc=0, flit_words=1):
    """Split a remote push into ``write`` packets, as the DMA packetizer does.

    Elements are taken in element order; a packet ends where the next destination address
    is not the previous one plus 1, or when it holds ``max_payload_words`` words. Every
    packet names the descriptor's ``flag``, so the packets add up to its word count there.
    If destinations repeat (a zero stride), the last write wins only if the network
    delivers one descriptor's packets in order (same route and VC).

    Parameters
    ----------
    descriptor : golden.memory.Descriptor with a remote destination
    data : 1-D uint32 array
        The words read from the source, in element order (``golden.memory.Push.data``).
    src_chip : int
    max_payload_words : int, 1 to ``max_payload(flit_words)``
    vc, flit_words : int

    Returns
    -------
    list of uint32 arrays [n_flits, flit_words], in send order
    """
    if not isinstance(descriptor, Descriptor) or not descriptor.remote:
        raise ValueError("descriptor must be a golden.memory.Descriptor with a remote dst")
    if not isinstance(data, np.ndarray) or data.dtype != np.uint32 \
            or data.shape != (descriptor.words,):
        raise ValueError(f"data must be a uint32 array of the descriptor's "
                         f"{descriptor.words} words")
    limit = _int(max_payload_words, "max_payload_words", 1, max_payload(flit_words) + 1)
    _, dst = memory.addresses(descriptor)
    if len(dst) and (dst.min() < 0 or dst.max() >= MAX_WORDS):
        raise ValueError(f"destination addresses run outside [0, {MAX_WORDS})")
    _, chip, space, _ = descriptor.dst
    breaks = np.flatnonzero(np.diff(dst) != 1) + 1
    packets = []
    for lo, hi in zip([0, *breaks.tolist()], [*breaks.tolist(), len(dst)]):
        for start in range(lo, hi, limit):
            stop = min(start + limit, hi)
            packets.append(encode_write(dst=chip, src=src_chip, space=space,
                                        address=int(dst[start]), flag=descriptor.flag,
                                        data=data[start:stop], vc=vc, flit_words=flit_words))
    return packets
