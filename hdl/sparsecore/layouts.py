"""The SparseCore tile's geometry, operation codes and stream payloads (SPEC section 4.6).

Every unit of the tile takes one :class:`Geometry`, validated once, and builds its
ports from the layouts it offers, so the units agree on every field width.
"""

import dataclasses

from amaranth.hdl import signed, unsigned
from amaranth.lib import data, enum

from ..lib.memory_port import WORD_BITS
from ..lib.params import check_int

__all__ = ["LANES", "ONE", "SIGN", "Op", "Combiner", "Optimizer", "OPS", "COMBINERS",
           "OPTIMIZERS", "index_bits",
           "feature_list", "chunk_layout", "id_layout", "Geometry"]

#: Width of the scVPU, in words: a row chunk, a Spmem line and an output beat.
LANES = 8
#: fp32 1.0: the weight of an unweighted term, and the multiplicand that makes the
#: den lane count terms (golden.sparsecore: unweighted equals weighted with weights 1.0).
ONE = 0x3F800000
#: fp32 sign bit: ``a - b`` is ``a + (b ^ SIGN)``.
SIGN = 0x80000000



class Op(enum.Enum, shape=1):
    """A batch's operation: the shape of the tile's ``op`` input."""
    LOOKUP = 0
    UPDATE = 1


class Combiner(enum.Enum, shape=2):
    """How a lookup combines a bag's rows: the shape of the ``combiner`` inputs.

    The code 3 has no member: a tile given it flags ``unsupported``.
    """
    SUM = 0
    MEAN = 1
    SQRTN = 2


class Optimizer(enum.Enum, shape=2):
    """How an update applies a row's summed gradient: the shape of the ``optimizer`` input.

    The code 3 has no member: a tile given it flags ``unsupported``.
    """
    SGD = 0
    ADAGRAD = 1
    ROWWISE_ADAGRAD = 2


# The names the command line, the build parameters (``combiners="sum,mean"``) and sim use,
# in code order: strings stay at those edges, and the RTL sees only the members.
#: Names of :class:`Op`, in code order.
OPS = tuple(member.name.lower() for member in Op)
#: Names of :class:`Combiner`, in code order.
COMBINERS = tuple(member.name.lower() for member in Combiner)
#: Names of :class:`Optimizer`, in code order.
OPTIMIZERS = tuple(member.name.lower() for member in Optimizer)

#: One row chunk: a Spmem line, a gradient beat, an output beat.
chunk_layout = data.ArrayLayout(WORD_BITS, LANES)
#: One CSR entry as it streams in: the id (two's complement, so a negative id is
#: seen, not wrapped) and its weight (fp32 pattern; 1.0 when the lookup is unweighted).
id_layout = data.StructLayout({"id": signed(WORD_BITS), "weight": unsigned(WORD_BITS)})


def index_bits(entries):
    """Bits of an index into ``entries`` entries (at least 1)."""
    return max(1, (entries - 1).bit_length())


def feature_list(name, text, choices):
    """The names in ``text`` (comma-separated, a build parameter such as ``"sum,mean"``) as
    a tuple in ``choices`` order; ValueError for a name not in ``choices``."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a comma-separated string, not {text!r}")
    names = [part.strip() for part in text.split(",") if part.strip()]
    for part in names:
        if part not in choices:
            raise ValueError(f"{name}: {part!r} is not one of {', '.join(map(repr, choices))}")
    return tuple(choice for choice in choices if choice in names)


@dataclasses.dataclass(frozen=True)
class Geometry:
    """Sizes of one tile; every capacity is a parameter of the hardware.

    Parameters
    ----------
    rows : int
        Table rows the HBM model holds (the most ``n_rows`` can be), at least 1.
    row_words : int
        Words per table row, a positive multiple of :data:`LANES`.
    words_per_cycle : int
        HBM line width and bandwidth: 1, 2, 4 or 8 words, so a Spmem line is whole lines.
    max_ids, max_bags, max_unique : int
        Capacity of one batch: ids (N), bags (B) and distinct ids.

    The HBM holds the table in lines ``[0, rows * lines_per_row)`` and the optimizer
    state in the same number of lines after it: Adagrad's one accumulator per table
    word; rowwise Adagrad's one accumulator per row, in every word of the row's state
    row (so its lanes need no broadcast, and every word it writes is the same).
    """
    rows: int
    row_words: int
    words_per_cycle: int
    max_ids: int
    max_bags: int
    max_unique: int

    def __post_init__(self):
        for name in ("rows", "row_words", "words_per_cycle", "max_ids", "max_bags",
                     "max_unique"):
            check_int(name, getattr(self, name), least=1, most=1 << 24)
        if self.row_words % LANES:
            raise ValueError(f"row_words must be a multiple of {LANES}, not {self.row_words}")
        if self.words_per_cycle not in (1, 2, 4, 8):
            raise ValueError(f"words_per_cycle must be 1, 2, 4 or 8 (a Spmem line holds whole "
                             f"HBM lines), not {self.words_per_cycle}")

    # ------------------------------------------------------------ derived sizes

    @property
    def chunks(self):
        """Row chunks (Spmem lines) per row: the length of the combine ring."""
        return self.row_words // LANES

    @property
    def lines_per_row(self):
        """HBM lines per row."""
        return self.row_words // self.words_per_cycle

    @property
    def lines_per_chunk(self):
        """HBM lines per row chunk."""
        return LANES // self.words_per_cycle

    @property
    def state_base(self):
        """First HBM line of the optimizer state region."""
        return self.rows * self.lines_per_row

    @property
    def hbm_lines(self):
        return 2 * self.state_base

    @property
    def hbm_size(self):
        """HBM words: the table and the state region."""
        return self.hbm_lines * self.words_per_cycle

    # ------------------------------------------------------------ field shapes

    @property
    def id_shape(self):
        return unsigned(index_bits(self.rows))

    @property
    def pos_shape(self):
        """A position ``k`` in ``indices``."""
        return unsigned(index_bits(self.max_ids))

    @property
    def bag_shape(self):
        return unsigned(index_bits(self.max_bags))

    @property
    def slot_shape(self):
        """A unique-id slot ``u`` (also the Spmem row)."""
        return unsigned(index_bits(self.max_unique))

    @property
    def chunk_shape(self):
        return unsigned(index_bits(self.chunks))

    @property
    def hbm_addr_width(self):
        return index_bits(self.hbm_lines)

    # ------------------------------------------------------------ payloads

    @property
    def tagged_layout(self):
        """An id with its bag (BagWalker -> Dedup)."""
        return data.StructLayout({"id": signed(WORD_BITS), "weight": unsigned(WORD_BITS),
                                  "bag": self.bag_shape})

    @property
    def occ_layout(self):
        """Per position ``k``: the id's slot, its bag and its weight."""
        return data.StructLayout({"slot": self.slot_shape, "bag": self.bag_shape,
                                  "weight": unsigned(WORD_BITS)})

    @property
    def uniq_layout(self):
        """Per slot ``u``: the id and its first position."""
        return data.StructLayout({"id": self.id_shape, "head": self.pos_shape})

    @property
    def slot_layout(self):
        """One term chunk for the combine ring (a sequencer's output).

        ``k``: the position whose row (lookup) or bag's gradient (update) is the term;
        ``c``: the chunk; ``u``, ``id``: the unique row being updated (update only);
        ``first``/``last``: the first/last term of its sum; ``empty``: a placeholder
        for an empty bag, whose output is +0.0.
        """
        return data.StructLayout({"k": self.pos_shape, "c": self.chunk_shape,
                                  "u": self.slot_shape, "id": self.id_shape,
                                  "first": 1, "last": 1, "empty": 1})

    @property
    def record_layout(self):
        """One finished sum chunk leaving the ring: ``x`` (the 8 sums), ``den`` (the
        den lane's fold), and the slot's ``empty``, ``u``, ``id``, ``c``; ``row_mean``,
        set after the ring by :class:`~.rowwise_mean.RowwiseMean` (rowwise Adagrad), is
        the row's mean square gradient, the same in each of its chunks."""
        return data.StructLayout({"x": chunk_layout, "den": unsigned(WORD_BITS),
                                  "empty": 1, "u": self.slot_shape, "id": self.id_shape,
                                  "c": self.chunk_shape, "row_mean": unsigned(WORD_BITS)})

    @property
    def result_layout(self):
        """One finished chunk: the output row chunk (lookup) or the new table and state
        chunks of row ``id`` (update)."""
        return data.StructLayout({"row": chunk_layout, "state": chunk_layout,
                                  "id": self.id_shape, "c": self.chunk_shape})
