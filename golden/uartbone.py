"""The LiteX UARTBone framing of a board's host bridge (SPEC section 4.10), for the host.

A frame is a command byte (:data:`WRITE`, ``0x01``: a write burst; :data:`READ`,
``0x02``: a read burst), a length byte (32-bit words, 1 to :data:`MAX_WORDS`), a 4-byte
big-endian word address, then, for a write, the words, each 4 bytes big-endian. The
target answers a read burst with its words, 4 bytes big-endian each, and nothing else;
a write has no answer. A burst covers consecutive word addresses.

:func:`write` and :func:`read` split longer transfers into frames of at most
:data:`MAX_WORDS` words; :func:`words` decodes a read's answer. Addresses wrap at
``2**32`` words as the target's address counter does.
"""

import numpy as np

__all__ = ["WRITE", "READ", "MAX_WORDS", "write_frame", "read_frame", "write", "read",
           "words", "answer_bytes"]

WRITE = 0x01
READ = 0x02
#: The most words one frame moves (its length is one byte).
MAX_WORDS = 255


def _address(addr):
    if isinstance(addr, bool) or not isinstance(addr, (int, np.integer)):
        raise TypeError(f"addr must be an int, not {type(addr).__name__}")
    if not 0 <= addr < 1 << 32:
        raise ValueError(f"addr must be a word address in [0, 2**32), not {addr}")
    return int(addr)


def _count(count, *, most):
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)):
        raise TypeError(f"count must be an int, not {type(count).__name__}")
    if not 1 <= count <= most:
        raise ValueError(f"count must be 1 to {most} words, not {count}")
    return int(count)


def _words(values):
    array = np.asarray(values)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"words must be a non-empty 1-D array, not shape {array.shape}")
    if array.dtype.kind not in "ui":
        raise TypeError(f"words must be integers (uint32 bit patterns), not {array.dtype}")
    if array.size and (array.min() < 0 or array.max() > 0xFFFF_FFFF):
        raise ValueError("words must be in [0, 2**32)")
    return array.astype(np.uint32)


def _header(command, count, addr):
    return bytes([command, count]) + addr.to_bytes(4, "big")


def write_frame(addr, values):
    """One write-burst frame: ``values`` (1 to 255 uint32 words) to ``addr``, ``addr + 1``..."""
    addr, values = _address(addr), _words(values)
    _count(values.size, most=MAX_WORDS)
    return _header(WRITE, values.size, addr) + values.astype(">u4").tobytes()


def read_frame(addr, count):
    """One read-burst frame: ``count`` (1 to 255) words from ``addr``, ``addr + 1``..."""
    return _header(READ, _count(count, most=MAX_WORDS), _address(addr))


def write(addr, values):
    """The frames that write ``values`` (any number of uint32 words) from ``addr`` on."""
    addr, values = _address(addr), _words(values)
    return b"".join(write_frame((addr + start) % (1 << 32), values[start:start + MAX_WORDS])
                    for start in range(0, values.size, MAX_WORDS))


def read(addr, count):
    """The frames that read ``count`` words (any number from 1) from ``addr`` on."""
    addr, count = _address(addr), _count(count, most=1 << 32)
    return b"".join(read_frame((addr + start) % (1 << 32), min(MAX_WORDS, count - start))
                    for start in range(0, count, MAX_WORDS))


def answer_bytes(values):
    """The bytes a target answers for a read of ``values``: each word big-endian."""
    return _words(values).astype(">u4").tobytes()


def words(answer):
    """The uint32 words of a read's ``answer`` (bytes, a multiple of 4, big-endian)."""
    if not isinstance(answer, (bytes, bytearray, memoryview)):
        raise TypeError(f"answer must be bytes, not {type(answer).__name__}")
    if len(answer) % 4:
        raise ValueError(f"answer must be whole 4-byte words, not {len(answer)} bytes")
    return np.frombuffer(bytes(answer), dtype=">u4").astype(np.uint32)
