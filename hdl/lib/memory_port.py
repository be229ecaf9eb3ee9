"""The one memory port of every memory (SPEC section 4): a request stream and a response stream.

A memory is an array of *lines* of ``words`` 32-bit words. A request names a line by its
address and either reads it or writes the words its mask enables; only reads are
answered, and answers come back in request order. The initiator (a DMA, a core) holds the
port as it is; the memory holds it ``wiring.flipped``::

    class Dma(wiring.Component):
        hbm: Out(MemoryPortSignature(addr_width=16, words=4))
    class Hbm(wiring.Component):
        port: In(MemoryPortSignature(addr_width=16, words=4))

Line ``l``, word ``j`` of a memory is flat word ``l * words + j`` (VMEM line ``l``, lane
``j``, as SPEC section 6 numbers them); in ``data`` word ``j`` is bits
``32*j .. 32*j + 31``.
"""

from amaranth.hdl import MemoryData, Shape, ShapeCastable, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .params import check_int

__all__ = ["MemoryPortSignature", "request_layout", "response_layout", "line_addr_width",
           "window_members", "memory_data", "WORD_BITS"]

#: Bits in a word (SPEC section 4).
WORD_BITS = 32


def memory_data(name, data, *, shape, depth):
    """The storage a component keeps as ``name``: ``data`` if given, else a new one, zeroed.

    A component keeps a ``MemoryData`` from its ``__init__`` (what runs load and read
    back) and builds the ``Memory`` on it in ``elaborate``. A system that builds the
    component in its own ``elaborate`` makes the storage first and passes it in, so it can
    offer the storage before anything is built. ``TypeError`` if ``data`` is not a
    ``MemoryData``, ``ValueError`` if its shape or depth differ.
    """
    if data is None:
        # src_loc_at=1: named after the caller's variable (`self.words = ...` is "words").
        return MemoryData(shape=shape, depth=depth, init=[], src_loc_at=1)
    if not isinstance(data, MemoryData):
        raise TypeError(f"{name} must be a MemoryData, not {data!r}")
    if isinstance(shape, ShapeCastable):
        same_shape = data.shape == shape
    else:
        same_shape = (not isinstance(data.shape, ShapeCastable)
                      and Shape.cast(data.shape) == Shape.cast(shape))
    if not same_shape or data.depth != depth:
        raise ValueError(f"{name} must be {depth} entries of {shape!r}, not "
                         f"{data.depth} of {data.shape!r}")
    return data


def line_addr_width(lines):
    """Bits of a line address for a memory of ``lines`` lines (at least 1)."""
    check_int("lines", lines, least=1)
    return max(1, (lines - 1).bit_length())


def _check_port_params(addr_width, words, mask_granularity):
    check_int("addr_width", addr_width, least=1, most=32)
    check_int("words", words, least=1)
    check_int("mask_granularity", mask_granularity, least=1)
    if (WORD_BITS * words) % mask_granularity:
        raise ValueError(f"mask_granularity ({mask_granularity} bits) must divide the "
                         f"{WORD_BITS * words}-bit line")


def request_layout(*, addr_width, words=1, mask_granularity=WORD_BITS):
    """The request payload: ``addr`` (line), ``write``, ``data`` (the line), ``mask``.

    ``mask`` has one bit per ``mask_granularity`` bits of ``data``, bit 0 for the lowest;
    a write changes only the enabled parts of the line. Reads ignore ``data`` and ``mask``.
    """
    _check_port_params(addr_width, words, mask_granularity)
    return data.StructLayout({
        "addr": unsigned(addr_width),
        "write": 1,
        "data": data.ArrayLayout(WORD_BITS, words),
        "mask": unsigned(WORD_BITS * words // mask_granularity),
    })


def response_layout(*, words=1):
    """The response payload: ``data`` (the line read) and ``error``.

    ``error`` is a bus error: the memory could not read the line (an injected fault of the
    HBM model); ``data`` is then zero. Memories without faults tie it to 0.
    """
    check_int("words", words, least=1)
    return data.StructLayout({"data": data.ArrayLayout(WORD_BITS, words), "error": 1})


class MemoryPortSignature(wiring.Signature):
    """A memory port, as the initiator sees it.

    Parameters
    ----------
    addr_width : int
        Bits of a line address, 1 to 32.
    words : int
        Words per line: the data width of the port, in 32-bit words.
    mask_granularity : int
        Bits of ``data`` each write-mask bit enables; it divides ``32 * words``. The default
        32 gives one bit per word; 8 gives byte enables, ``32 * words`` one bit per line.

    Members
    -------
    req : Out(stream.Signature(request_layout(...)))
        Requests, one per cycle at most, performed in the order they are accepted.
    resp : In(stream.Signature(response_layout(...)))
        One response per read, in request order; writes have none.

    Raises
    ------
    TypeError
        A parameter is not an integer.
    ValueError
        A parameter is out of range, or the granularity does not divide the line.
    """

    def __init__(self, *, addr_width, words=1, mask_granularity=WORD_BITS):
        _check_port_params(addr_width, words, mask_granularity)
        self.addr_width = addr_width
        self.words = words
        self.mask_granularity = mask_granularity
        self.request_layout = request_layout(addr_width=addr_width, words=words,
                                             mask_granularity=mask_granularity)
        self.response_layout = response_layout(words=words)
        super().__init__({
            "req": Out(stream.Signature(self.request_layout)),
            "resp": In(stream.Signature(self.response_layout)),
        })

    @property
    def mask_width(self):
        """Bits of the write mask."""
        return WORD_BITS * self.words // self.mask_granularity

    def __eq__(self, other):
        return (type(other) is type(self) and other.addr_width == self.addr_width
                and other.words == self.words
                and other.mask_granularity == self.mask_granularity)

    def __hash__(self):
        return hash((type(self), self.addr_width, self.words, self.mask_granularity))

    def __repr__(self):
        return (f"MemoryPortSignature(addr_width={self.addr_width}, words={self.words}, "
                f"mask_granularity={self.mask_granularity})")


def window_members(name, *, lines, lanes, window):
    """``{name: Out(port)}``, the initiator's window port of a memory of ``lines`` lines of
    ``lanes`` words that moves ``window`` lines a request (:class:`hdl.memory.VMEM`'s
    ``window``), or ``{}`` for ``window`` 0: members for a signature that has the port only
    with a window."""
    if not window:
        return {}
    return {name: Out(MemoryPortSignature(addr_width=line_addr_width(lines),
                                          words=window * lanes))}
