"""Word-lane networks of the DMA's burst engine and receiver: a barrel rotation and lane
masks, and the check of the two memory spaces' ports they serve.

They are built from ``Mux``, ``Cat`` and comparisons only, so the exported Verilog is
continuous assignments: no variable part-select (which Verilator flags when its result is
narrowed), and nothing an event simulator leaves unevaluated at time zero (Icarus runs an
``always @*`` block only once one of its inputs changes).
"""

from amaranth.hdl import Cat, Mux, Value

from ..lib.memory_port import WORD_BITS, MemoryPortSignature
from ..lib.params import check_power_of_two

__all__ = ["rotate_words_left", "lane_mask", "equals", "pick", "check_space_ports"]


def check_space_ports(ports):
    """Raise unless ``ports`` maps space codes 0 (hbm) and 1 (vmem) to memory port
    signatures with a power-of-two line of words and a write mask per word: the lane
    networks here assume both."""
    if set(ports) != {0, 1}:
        raise ValueError("ports must map space codes 0 (hbm) and 1 (vmem) to signatures")
    for space, sig in ports.items():
        if not isinstance(sig, MemoryPortSignature):
            raise TypeError(f"port {space} must be a MemoryPortSignature, not {sig!r}")
        if sig.words & (sig.words - 1) or sig.mask_granularity != WORD_BITS:
            raise ValueError(f"port {space} needs a power-of-two line and a mask per word")


def rotate_words_left(value, amount, words):
    """``value``, ``words`` 32-bit words, rotated towards higher lanes by ``amount`` words:
    word ``j`` moves to lane ``(j + amount) mod words``. ``words`` is a power of two and
    ``amount`` is taken modulo ``words`` (its low ``log2(words)`` bits); a log-depth network
    of 2:1 multiplexers."""
    check_power_of_two("words", words)
    value = Value.cast(value)
    if len(value) != WORD_BITS * words:
        raise ValueError(f"value has {len(value)} bits, not {words} words")
    for bit in range((words - 1).bit_length()):
        value = Mux(amount[bit], value.rotate_left(WORD_BITS << bit), value)
    return value


def lane_mask(first, end, lanes):
    """A ``lanes``-bit mask with bit ``j`` set for ``first <= j < end``."""
    first, end = Value.cast(first), Value.cast(end)
    # Comparisons that the operand widths already decide are left out (Verilator flags a
    # constant comparison).
    first_max, end_max = (1 << len(first)) - 1, (1 << len(end)) - 1
    return Cat(*[((first <= j) if j < first_max else 1) & (end > j) if j < end_max else 0
                 for j in range(lanes)])


def equals(value, constant):
    """``value == constant``, lint-clean for 0 too (Amaranth writes ``value == 0`` as
    ``!value``, which Verilator flags when ``value`` is wider than a bit)."""
    value = Value.cast(value)
    return ~value.any() if constant == 0 else value == constant


def pick(values, index):
    """``values[index]`` as a chain of multiplexers: no variable part-select."""
    result = values[0]
    for j in range(1, len(values)):
        result = Mux(equals(index, j), values[j], result)
    return result
