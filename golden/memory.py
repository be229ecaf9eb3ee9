"""Golden model of the memory system (SPEC 4.3): DMA descriptors, their address expansion
and validation, the DMA with its sync flags, and the HBM timing rules.

Memories are flat ``uint32`` word images: ``hbm`` and ``vmem`` (VMEM line ``l``, lane ``j``
is word ``l * lanes + j``). Addresses, counts and strides are in words.

Semantics the RTL must follow
-----------------------------
**Order.** A batch behaves as if every element were moved one at a time: descriptor after
descriptor, and within a descriptor element (i0, i1, i2) in element order, i0 fastest
(``(0,0,0), (1,0,0), ..., (0,1,0), ...``), each element reading its source word and then
writing its destination word. Consequences, which cover every overlap, so no shape is
ambiguous:

* an element that reads a word an earlier element of the same descriptor wrote sees the
  new value (``dst = src + 1`` over one range smears ``src[0]``, like a forward word loop);
* an element that reads a word a later element writes sees the old value;
* repeated destination addresses (a stride of 0): the last element in order wins.

A pipelined DMA with many reads in flight honours this if (a) each memory performs its
requests in issue order, with reads issued in element order ahead of the writes, and
(b) a read waits while its address matches the destination of an earlier element whose
write has not been issued (a read-after-write interlock over the in-flight elements). A
simpler legal (b): run a descriptor one element at a time when its source and destination
are the same space and their address extents intersect (an O(1) corner check). Concurrent
descriptors must be indistinguishable from running them in order.

**Validation** happens before a descriptor's first write. A rejected descriptor writes
nothing, adds to no flag, and later descriptors proceed. Checks, first failure wins:

=============  ==================================================  ====================
reason         rejected when                                       ``address`` recorded
=============  ==================================================  ====================
``count``      some count is 0                                     the source base
``chip``       remote chip >= ``n_chips``                          the chip id
``flag``       ``flag >= n_flags``                                 the flag id
``sent_flag``  ``sent_flag >= n_flags``                            the sent flag id
``src_range``  a source address is outside its space               that address
``dst_range``  a destination address is outside its space          that address
=============  ==================================================  ====================

For the two range reasons the recorded address is the *first* offending one in element
order; within one element the source is checked before the destination. (Accepting is an
O(1) corner check, since an affine address over a box takes its extremes at corners; only
a rejected descriptor needs the in-order scan that finds the address to record.)

Values no hardware descriptor can encode raise ``ValueError`` when the ``Descriptor`` is
built instead (non-integers, negative counts, bad space names, a remote source, ...): see
``Descriptor``.

**Remote pushes** (``dst = ("remote", chip, space, base)``; remote is push-only). Chips are
identical, so the destination is range-checked against the local space of that name. At its
turn the push reads its source words (a ``Push`` record carries them to the network) and
adds its word count to the optional local ``sent_flag``; the receiver (``land``) writes
them in element order and adds the word count to ``flag`` there.

**Bus errors** (injected faults, the HBM model's ``error_ranges``). ``run`` and ``land`` take
``error_ranges``: HBM word ranges ``[lo, hi)`` that fault. The HBM model faults whole lines
of ``words_per_cycle`` words, so ``run`` requires both bounds to be multiples of its
``words_per_cycle`` (the caller passes line-aligned ranges; then a word-level rule is
exact). For an accepted descriptor:

* an element whose source is a faulting HBM word writes nothing (its destination keeps
  whatever it holds at the element's turn); a push sends a zero word in its place;
* an element whose destination is a faulting HBM word writes nothing; so does a push's
  word landing there (``land``);
* its flags count every word all the same, so no waiter hangs;
* each faulting *read* is reported as ``DmaError(index, "bus", address)``, ``address``
  being the read's first source word. The DMA reads a descriptor row by row (a row being
  the elements of one ``(i1, i2)``). A row contiguous on both sides (innermost strides both
  1) is read in runs of consecutive elements, each ending at the end of its source line,
  at the end of the row, or after ``cap`` elements, where ``cap`` is the line of the
  source space if the destination space (a push's remote one) has the same name, else
  the narrower of the two (an HBM line is ``words_per_cycle`` words, a VMEM line
  ``lanes``). Every other element is a read of its own, and so is every element of a
  row of a local descriptor whose source and destination extents intersect in one space
  with the destination ``0 < (dst - src) mod 2**ADDRESS_BITS < cap`` words ahead. A read
  faults when its line does. With ``words_per_cycle = 1`` that is one record per element
  reading a faulting word.

``DmaResult.bus_errors`` lists the records in element order, descriptor after descriptor:
the order in which the RTL reports them. The RTL merges them with the rejections on one
stream in an order that depends on timing, so the two lists are kept apart.
"""

import dataclasses
import functools
import math
import operator
from typing import NamedTuple

import numpy as np

__all__ = [
    "ADDRESS_BITS", "FLAG_BITS", "CHIP_BITS", "MAX_WORDS", "MAX_FLAGS", "MAX_CHIPS",
    "SPACES", "REASONS", "BUS",
    "Descriptor", "DmaError", "Push", "DmaResult", "HbmTiming",
    "addresses", "validate", "check_error_ranges", "bus_error_reads", "run", "land",
]

# Field widths shared with the ICI packet layout (golden.ici), so a push is always encodable.
#: Word addresses, counts and word totals fit in 24 bits (64 MiB per space).
ADDRESS_BITS = 24
#: Flag ids fit in 7 bits.
FLAG_BITS = 7
#: Chip ids fit in 8 bits.
CHIP_BITS = 8
MAX_WORDS = 1 << ADDRESS_BITS
MAX_FLAGS = 1 << FLAG_BITS
MAX_CHIPS = 1 << CHIP_BITS

#: Local memory spaces.
SPACES = ("hbm", "vmem")
#: Rejection reasons, in the order they are checked (the index can serve as an error code).
REASONS = ("count", "chip", "flag", "sent_flag", "src_range", "dst_range")
#: The reason of a bus error record (a faulting read; not a rejection).
BUS = "bus"


def _int(value, name, lo, hi):
    """``value`` as a Python int in ``[lo, hi)``; numpy integers pass, bools and floats don't."""
    if type(value) is int and lo <= value < hi:     # the common case, first: it is hot
        return value
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer, not a bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, not {type(value).__name__}") from None
    if not lo <= value < hi:
        raise ValueError(f"{name} is {value}, outside [{lo}, {hi})")
    return value


def _endpoint(value, name, *, remote_ok):
    if not isinstance(value, tuple):
        raise ValueError(f"{name} must be a tuple (space, base), not {type(value).__name__}")
    if len(value) == 4 and value[0] == "remote":
        if not remote_ok:
            raise ValueError(f"{name} cannot be remote: remote spaces are push-only")
        _, chip, space, base = value
        head = ("remote", _int(chip, f"{name} chip", 0, MAX_CHIPS))
    elif len(value) == 2:
        space, base = value
        head = ()
    else:
        raise ValueError(f"{name} must be (space, base) or ('remote', chip, space, base), "
                         f"not {value!r}")
    if space not in SPACES:
        raise ValueError(f"{name} space must be one of {SPACES}, not {space!r}")
    return (*head, space, _int(base, f"{name} base", 0, MAX_WORDS))


def _dims(value, name, *, lo, pad):
    if not isinstance(value, (tuple, list)) or not 1 <= len(value) <= 3:
        raise ValueError(f"{name} must be a tuple of 1 to 3 integers, not {value!r}")
    ints = tuple(_int(v, f"{name}[{i}]", lo, MAX_WORDS) for i, v in enumerate(value))
    return ints + (pad,) * (3 - len(ints))


@dataclasses.dataclass(frozen=True)
class Descriptor:
    """One DMA transfer (SPEC section 6).

    Element (i0, i1, i2) moves the word at ``src_base + i0*s0 + i1*s1 + i2*s2`` to
    ``dst_base + i0*d0 + i1*d1 + i2*d2``.

    Parameters
    ----------
    src : (space, base)
        ``space`` is "hbm" or "vmem"; ``0 <= base < MAX_WORDS``.
    dst : (space, base) or ("remote", chip, space, base)
        A remote destination is a push to chip ``0 <= chip < MAX_CHIPS``.
    counts : tuple of 1 to 3 ints, innermost first
        Each ``0 <= count < MAX_WORDS`` and their product ``< MAX_WORDS``. A zero count is
        encodable but rejected by the DMA. Padded with 1 to three dims.
    src_strides, dst_strides : tuples of as many ints as ``counts``
        Words, ``-MAX_WORDS < stride < MAX_WORDS``; 0 and negative allowed. Padded with 0.
    flag : int
        Sync flag, ``0 <= flag < MAX_FLAGS``, that receives the word count (at the
        destination chip for a push).
    sent_flag : int or None, keyword-only
        Remote pushes only: local flag that receives the word count once all words are read.

    Raises
    ------
    ValueError
        On anything no hardware descriptor can encode.
    """
    src: tuple
    dst: tuple
    counts: tuple
    src_strides: tuple
    dst_strides: tuple
    flag: int
    sent_flag: int | None = dataclasses.field(default=None, kw_only=True)

    def __post_init__(self):
        put = object.__setattr__     # frozen: normalise once, here
        put(self, "src", _endpoint(self.src, "src", remote_ok=False))
        put(self, "dst", _endpoint(self.dst, "dst", remote_ok=True))
        lengths = {len(v) if isinstance(v, (tuple, list)) else None
                   for v in (self.counts, self.src_strides, self.dst_strides)}
        if len(lengths) != 1:
            raise ValueError("counts, src_strides and dst_strides must have the same length")
        put(self, "counts", _dims(self.counts, "counts", lo=0, pad=1))
        put(self, "src_strides", _dims(self.src_strides, "src_strides", lo=1 - MAX_WORDS, pad=0))
        put(self, "dst_strides", _dims(self.dst_strides, "dst_strides", lo=1 - MAX_WORDS, pad=0))
        if math.prod(self.counts) >= MAX_WORDS:
            raise ValueError(f"counts {self.counts} move {math.prod(self.counts)} words, "
                             f"more than {MAX_WORDS - 1}")
        put(self, "flag", _int(self.flag, "flag", 0, MAX_FLAGS))
        if self.sent_flag is not None:
            if not self.remote:
                raise ValueError("sent_flag applies only to remote pushes")
            put(self, "sent_flag", _int(self.sent_flag, "sent_flag", 0, MAX_FLAGS))

    @property
    def remote(self):
        """True for a push to another chip."""
        return len(self.dst) == 4

    @property
    def chip(self):
        """The destination chip of a push, None for a local transfer."""
        return self.dst[1] if self.remote else None

    @property
    def words(self):
        """Words moved: the product of the counts."""
        return math.prod(self.counts)


class DmaError(NamedTuple):
    """A rejected descriptor: its index in the batch, a reason from ``REASONS``, and the
    recorded address (or id, for the count/chip/flag reasons; see the module docstring).
    A bus error record has the reason ``BUS`` and its read's first source address."""
    index: int
    reason: str
    address: int


class Push(NamedTuple):
    """A remote push leaving this chip: descriptor ``index`` of the batch, the descriptor,
    and the ``data`` words it read (uint32, element order)."""
    index: int
    descriptor: Descriptor
    data: np.ndarray


class DmaResult(NamedTuple):
    """What ``run`` returns: final images, flags, rejected indices (as ``sim.dma.run``),
    their ``DmaError`` records, the pushes sent to other chips, and the bus error records
    (``DmaError`` with reason ``BUS``) in element order."""
    hbm: np.ndarray
    vmem: np.ndarray
    flags: np.ndarray
    errors: list
    error_records: list
    pushes: list
    bus_errors: list = ()       # a default, so that six-field constructions still work


def _check_descriptor(descriptor):
    if not isinstance(descriptor, Descriptor):
        raise ValueError(f"expected a Descriptor, not {type(descriptor).__name__}")


def _expand(base, strides, counts):
    if 0 in counts:
        return np.zeros(0, np.int64)
    i0, i1, i2 = (np.arange(c, dtype=np.int64) * s for c, s in zip(counts, strides))
    # Axes (i2, i1, i0) in C order put i0 fastest: element order.
    return (base + i2[:, None, None] + i1[None, :, None] + i0[None, None, :]).ravel()


def addresses(descriptor):
    """Source and destination word addresses of every element, in element order.

    Parameters
    ----------
    descriptor : Descriptor

    Returns
    -------
    (src, dst) : two int64 arrays of ``descriptor.words`` addresses (empty for a zero
        count). They may fall outside the spaces: ``validate`` judges that.
    """
    _check_descriptor(descriptor)
    src, dst = _addresses(descriptor)
    return src.copy(), dst.copy()


@functools.lru_cache(maxsize=4096)
def _addresses(d):
    """``addresses`` of a checked Descriptor, read-only: shared by every caller, since
    programs move the same few shapes over and over."""
    src = _expand(d.src[-1], d.src_strides, d.counts)
    dst = _expand(d.dst[-1], d.dst_strides, d.counts)
    src.flags.writeable = dst.flags.writeable = False
    return src, dst


def _inside(base, strides, counts, size):
    """Whether every address of a side (counts > 0) is in ``[0, size)``: an affine address
    over a box takes its extremes at corners."""
    reach = [(c - 1) * s for c, s in zip(counts, strides)]
    lowest = base + sum(r for r in reach if r < 0)
    highest = base + sum(r for r in reach if r > 0)
    return lowest >= 0 and highest < size


def validate(descriptor, *, hbm_words, vmem_words, n_flags, n_chips=1, index=0):
    """The DMA's verdict on one descriptor, before it writes anything.

    Parameters
    ----------
    descriptor : Descriptor
    hbm_words, vmem_words : int
        Sizes of the spaces, in words (remote spaces have the same sizes).
    n_flags, n_chips : int
    index : int
        The descriptor's position in its batch, copied into the record.

    Returns
    -------
    DmaError or None
        None when the descriptor is accepted; otherwise the first failed check of the
        module docstring's table.
    """
    _check_descriptor(descriptor)
    sizes = {"hbm": _int(hbm_words, "hbm_words", 0, MAX_WORDS + 1),
             "vmem": _int(vmem_words, "vmem_words", 0, MAX_WORDS + 1)}
    n_flags = _int(n_flags, "n_flags", 1, MAX_FLAGS + 1)
    n_chips = _int(n_chips, "n_chips", 1, MAX_CHIPS + 1)
    d = descriptor
    if 0 in d.counts:
        return DmaError(index, "count", d.src[-1])
    if d.remote and d.chip >= n_chips:
        return DmaError(index, "chip", d.chip)
    if d.flag >= n_flags:
        return DmaError(index, "flag", d.flag)
    if d.sent_flag is not None and d.sent_flag >= n_flags:
        return DmaError(index, "sent_flag", d.sent_flag)
    if _inside(d.src[-1], d.src_strides, d.counts, sizes[d.src[-2]]) \
            and _inside(d.dst[-1], d.dst_strides, d.counts, sizes[d.dst[-2]]):
        return None                      # the common case, without expanding the addresses
    src, dst = _addresses(d)
    src_bad = (src < 0) | (src >= sizes[d.src[-2]])
    dst_bad = (dst < 0) | (dst >= sizes[d.dst[-2]])
    bad = src_bad | dst_bad
    if bad.any():
        e = int(np.argmax(bad))          # first offending element; its source checked first
        if src_bad[e]:
            return DmaError(index, "src_range", int(src[e]))
        return DmaError(index, "dst_range", int(dst[e]))
    return None


def check_error_ranges(error_ranges, *, hbm_words, words_per_cycle=1):
    """Validated injected-fault ranges of the HBM, as a tuple of ``(lo, hi)`` int pairs.

    Parameters
    ----------
    error_ranges : sequence of (lo, hi)
        HBM word ranges ``lo <= address < hi`` that fault, ``0 <= lo < hi <= hbm_words``,
        both multiples of ``words_per_cycle`` (the HBM model faults whole lines).
    hbm_words : int
    words_per_cycle : int
        Words per HBM line, >= 1.

    Raises
    ------
    ValueError
        On anything else, naming the range.
    """
    hbm_words = _int(hbm_words, "hbm_words", 0, MAX_WORDS + 1)
    line = _int(words_per_cycle, "words_per_cycle", 1, MAX_WORDS + 1)
    if not isinstance(error_ranges, (list, tuple)):
        raise ValueError(f"error_ranges must be a list or tuple of (lo, hi) pairs, not "
                         f"{type(error_ranges).__name__}")
    ranges = []
    for item in error_ranges:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise ValueError(f"an error range must be a pair (lo, hi), not {item!r}")
        lo = _int(item[0], f"error range {item!r} lo", 0, hbm_words + 1)
        hi = _int(item[1], f"error range {item!r} hi", 0, hbm_words + 1)
        if lo >= hi:
            raise ValueError(f"error range {item!r} is empty: lo must be below hi")
        if lo % line or hi % line:
            raise ValueError(f"error range {item!r} does not start and end on an HBM line "
                             f"boundary (a multiple of words_per_cycle, {line})")
        ranges.append((lo, hi))
    return tuple(ranges)


def _faulting(addr, ranges):
    """Which of the word addresses ``addr`` lie in one of the (validated) ranges."""
    hit = np.zeros(len(addr), bool)
    for lo, hi in ranges:
        hit |= (addr >= lo) & (addr < hi)
    return hit


def _read_starts(descriptor, src, dst, line_words):
    """Which elements begin a read of the DMA (module docstring, "Bus errors")."""
    d = descriptor
    src_line = line_words[d.src[0]]
    cap = src_line if d.src[0] == d.dst[-2] else min(line_words.values())
    overlap = (not d.remote and d.src[0] == d.dst[0] and len(src) > 0
               and src.min() <= dst.max() and dst.min() <= src.max())
    ahead = (dst - src) % MAX_WORDS
    near = overlap & (ahead != 0) & (ahead < cap)
    runs = (d.src_strides[0] == 1) & (d.dst_strides[0] == 1) & ~near
    i0 = np.arange(len(src), dtype=np.int64) % d.counts[0]
    # Within a row, a run starts at the row's first element or its source line's,
    # whichever is later, and every `cap` elements after that.
    segment = np.maximum(src - i0, src - src % src_line)
    return ~runs | ((src - segment) % cap == 0)


def bus_error_reads(descriptor, *, error_ranges, words_per_cycle=1, lanes=8, index=0):
    """The bus error records of one accepted descriptor: a ``DmaError(index, BUS, address)``
    per faulting read, in element order (module docstring, "Bus errors").

    Parameters
    ----------
    descriptor : Descriptor
        In range (``validate`` accepts it); not checked here.
    error_ranges : sequence of (lo, hi)
        As ``check_error_ranges`` returns them.
    words_per_cycle, lanes : int
        Words per HBM and VMEM line.
    index : int
        The descriptor's position in its batch, copied into the records.

    Returns
    -------
    list of DmaError
    """
    _check_descriptor(descriptor)
    if descriptor.src[0] != "hbm" or not error_ranges:
        return []
    src, dst = _addresses(descriptor)
    bad = _faulting(src, error_ranges)
    if not bad.any():
        return []
    lines = {"hbm": _int(words_per_cycle, "words_per_cycle", 1, MAX_WORDS + 1),
             "vmem": _int(lanes, "lanes", 1, MAX_WORDS + 1)}
    starts = bad & _read_starts(descriptor, src, dst, lines)
    return [DmaError(index, BUS, int(a)) for a in src[starts].tolist()]


def _last_writer_before(reads, writes):
    """For each element e, the last element i < e with ``writes[i] == reads[e]``, else -1."""
    n = len(writes)
    elem = np.arange(n, dtype=np.int64)
    # Keys address*n + element are unique and sort by address, then element order.
    # Addresses are validated, -1 <= address < MAX_WORDS, so the keys fit in int64.
    wkey = writes * n + elem
    order = np.argsort(wkey, kind="stable")
    pos = np.searchsorted(wkey[order], reads * n + elem) - 1   # last write key < read key
    cand = order[np.maximum(pos, 0)]
    return np.where((pos >= 0) & (writes[cand] == reads), cand, -1)


def _store_in_order(mem, addr, values):
    if (addr[1:] > addr[:-1]).all():        # no repeats, as most DMAs: cheaper than np.unique
        mem[addr] = values
        return
    # numpy leaves the winner of a repeated fancy-index assignment unspecified: keep the last.
    _, first_from_end = np.unique(addr[::-1], return_index=True)
    last = len(addr) - 1 - first_from_end
    mem[addr[last]] = values[last]


def _move(src_mem, src, dst_mem, dst, writes):
    """Element-order semantics for one accepted descriptor, vectorised. Only the elements
    ``writes`` selects write (the others met a bus error)."""
    if src_mem is dst_mem:
        # Follow each read back through earlier writes to the same word, down to a read of
        # an untouched word (pointer jumping: the chains only point to earlier elements).
        # An element that writes nothing is no one's writer: address -1 matches no read.
        root = _last_writer_before(src, np.where(writes, dst, -1))
        root = np.where(root >= 0, root, np.arange(len(src)))
        while not np.array_equal(nxt := root[root], root):
            root = nxt
        values = src_mem[src[root]]
    else:
        values = src_mem[src]
    _store_in_order(dst_mem, dst[writes], values[writes])


def _image(name, value):
    if not isinstance(value, np.ndarray) or value.dtype != np.uint32:
        raise ValueError(f"{name} must be a numpy uint32 array")
    if value.ndim != 1:
        raise ValueError(f"{name} must be 1-D, not {value.ndim}-D")
    if len(value) > MAX_WORDS:
        raise ValueError(f"{name} has {len(value)} words, more than {MAX_WORDS}")
    return value.copy()


def _flags(flags, n_flags):
    if flags is None:
        return np.zeros(n_flags, np.uint32)
    if not isinstance(flags, np.ndarray) or flags.dtype != np.uint32 or flags.shape != (n_flags,):
        raise ValueError(f"flags must be a uint32 array of shape ({n_flags},)")
    return flags.copy()


def _add_flag(flags, flag, words):
    flags[flag] = (int(flags[flag]) + words) & 0xFFFFFFFF    # 32-bit counters wrap


def run(hbm, vmem, descriptors, *, n_flags=16, lanes=8, n_chips=1, flags=None,
        error_ranges=(), words_per_cycle=1):
    """Golden DMA: apply a batch of descriptors in order to copies of the images.

    Parameters
    ----------
    hbm, vmem : 1-D uint32 arrays
        Word images; ``len(vmem)`` is a multiple of ``lanes``. Not modified.
    descriptors : sequence of Descriptor
    n_flags : int
        Sync flags per chip, 1 to ``MAX_FLAGS``.
    lanes : int
        VMEM line width in words.
    n_chips : int
        Chips in the system, for range-checking remote pushes.
    flags : uint32 array [n_flags], optional
        Initial flag values (default zeros).
    error_ranges : sequence of (lo, hi)
        HBM word ranges that fault (module docstring, "Bus errors"), at HBM line
        boundaries (``check_error_ranges``). Default none.
    words_per_cycle : int
        Words per HBM line (the HBM model's ``words_per_cycle``, default 1): where error
        ranges may start and end, and how the DMA splits its reads.

    Returns
    -------
    DmaResult
        ``flags`` gains each accepted local descriptor's word count at ``flag`` and each
        accepted push's at ``sent_flag``; ``errors`` lists rejected indices;
        ``bus_errors`` the faulting reads.
    """
    hbm, vmem = _image("hbm", hbm), _image("vmem", vmem)
    lanes = _int(lanes, "lanes", 1, MAX_WORDS + 1)
    if len(vmem) % lanes:
        raise ValueError(f"vmem has {len(vmem)} words, not a whole number of {lanes}-word lines")
    n_flags = _int(n_flags, "n_flags", 1, MAX_FLAGS + 1)
    n_chips = _int(n_chips, "n_chips", 1, MAX_CHIPS + 1)
    flags = _flags(flags, n_flags)
    ranges = check_error_ranges(error_ranges, hbm_words=len(hbm),
                                words_per_cycle=words_per_cycle)
    if not isinstance(descriptors, (list, tuple)):
        raise ValueError("descriptors must be a list or tuple of Descriptor")
    mem = {"hbm": hbm, "vmem": vmem}
    records, pushes, bus = [], [], []
    for index, d in enumerate(descriptors):
        error = validate(d, hbm_words=len(hbm), vmem_words=len(vmem), n_flags=n_flags,
                         n_chips=n_chips, index=index)
        if error is not None:
            records.append(error)
            continue
        src, dst = _addresses(d)
        bad_read = _faulting(src, ranges) if d.src[0] == "hbm" else np.zeros(len(src), bool)
        if d.remote:
            # The HBM answers a faulting read with zeros, and the push sends them.
            pushes.append(Push(index, d, np.where(bad_read, 0, mem[d.src[0]][src])
                               .astype(np.uint32)))
            if d.sent_flag is not None:
                _add_flag(flags, d.sent_flag, d.words)
        else:
            bad_write = _faulting(dst, ranges) if d.dst[0] == "hbm" else False
            _move(mem[d.src[0]], src, mem[d.dst[0]], dst, ~(bad_read | bad_write))
            _add_flag(flags, d.flag, d.words)
        if bad_read.any():
            bus += bus_error_reads(d, error_ranges=ranges, words_per_cycle=words_per_cycle,
                                   lanes=lanes, index=index)
    return DmaResult(hbm, vmem, flags, [e.index for e in records], records, pushes, bus)


def land(hbm, vmem, flags, pushes, *, error_ranges=()):
    """Golden receiver: apply pushes arriving at a chip, in list order.

    Each push writes its data to its destination addresses in element order (the last
    write to a repeated address wins) and adds its word count to its ``flag``.

    Parameters
    ----------
    hbm, vmem : 1-D uint32 arrays
        The receiving chip's images. Not modified.
    flags : 1-D uint32 array
        The receiving chip's flags. Not modified.
    pushes : sequence of Push
    error_ranges : sequence of (lo, hi)
        The receiving chip's faulting HBM word ranges (as ``run``'s): words landing there
        are dropped. Default none.

    Returns
    -------
    (hbm, vmem, flags) : updated copies
    """
    mem = {"hbm": _image("hbm", hbm), "vmem": _image("vmem", vmem)}
    if not isinstance(flags, np.ndarray) or flags.dtype != np.uint32 or flags.ndim != 1:
        raise ValueError("flags must be a 1-D uint32 array")
    flags = flags.copy()
    ranges = check_error_ranges(error_ranges, hbm_words=len(mem["hbm"]))
    for p in pushes:
        if not isinstance(p, Push) or not p.descriptor.remote:
            raise ValueError("pushes must be Push records of remote descriptors")
        d = p.descriptor
        _check_descriptor(d)
        _, dst = _addresses(d)
        space = mem[d.dst[2]]
        if len(dst) and (dst.min() < 0 or dst.max() >= len(space)):
            raise ValueError(f"push {p.index} writes outside {d.dst[2]}")
        if d.flag >= len(flags):
            raise ValueError(f"push {p.index} adds to flag {d.flag}, but there are {len(flags)}")
        data = np.asarray(p.data)
        if data.dtype != np.uint32 or data.shape != dst.shape:
            raise ValueError(f"push {p.index} data must be {len(dst)} uint32 words")
        kept = ~_faulting(dst, ranges) if d.dst[2] == "hbm" else np.ones(len(dst), bool)
        _store_in_order(space, dst[kept], data[kept])
        _add_flag(flags, d.flag, d.words)
    return mem["hbm"], mem["vmem"], flags


@dataclasses.dataclass(frozen=True, kw_only=True)
class HbmTiming:
    """Timing rules of the HBM model without jitter, for its self-test.

    Reads are one word each, offered in trace order on the request stream, and answered in
    that order; the response stream is always ready. Read ``k`` is accepted at cycle
    ``a[k]``, the earliest cycle that is

    * no earlier than it is offered (with offers non-decreasing, the two rules below
      already keep accepts in order);
    * a cycle with fewer than ``words_per_cycle`` reads accepted (bandwidth:
      ``a[k] >= a[k - words_per_cycle] + 1``);
    * a cycle with fewer than ``max_outstanding`` reads in flight, a read being in flight
      from its accept cycle until the cycle before it returns, so a returning read frees
      its slot for that same cycle (``a[k] >= a[k - max_outstanding] + read_latency``);

    and returns at ``a[k] + read_latency``. So a lone read returns in exactly
    ``read_latency`` cycles, and a stream reaches ``words_per_cycle`` words per cycle when
    ``max_outstanding >= words_per_cycle * read_latency``.

    Parameters
    ----------
    words_per_cycle, read_latency, max_outstanding : int, each >= 1
    """
    words_per_cycle: int
    read_latency: int
    max_outstanding: int

    def __post_init__(self):
        for name in ("words_per_cycle", "read_latency", "max_outstanding"):
            object.__setattr__(self, name, _int(getattr(self, name), name, 1, 1 << 31))

    def read_returns(self, offered):
        """Return cycle of each read of a trace.

        Parameters
        ----------
        offered : 1-D integer array
            Cycle at which each read is first offered, non-decreasing, >= 0.

        Returns
        -------
        int64 array of the same length
        """
        if not isinstance(offered, np.ndarray) or offered.dtype.kind not in "iu" \
                or offered.ndim != 1:
            raise ValueError("offered must be a 1-D integer numpy array")
        if len(offered) and (offered[0] < 0 or (np.diff(offered) < 0).any()):
            raise ValueError("offered cycles must be non-negative and non-decreasing")
        w, lat, m = self.words_per_cycle, self.read_latency, self.max_outstanding
        accept = []
        for k, t in enumerate(offered.tolist()):
            a = t
            if k >= w:
                a = max(a, accept[k - w] + 1)
            if k >= m:
                a = max(a, accept[k - m] + lat)
            accept.append(a)
        return np.array(accept, np.int64) + lat

    def stream_cycles(self, n_words):
        """Cycle at which the last of ``n_words`` reads, all offered at cycle 0, returns
        (0 for no words): the ideal streaming time.

        Parameters
        ----------
        n_words : int, >= 0

        Returns
        -------
        int
        """
        n = _int(n_words, "n_words", 0, 1 << 62)
        if n == 0:
            return 0
        w, lat, m = self.words_per_cycle, self.read_latency, self.max_outstanding
        k = n - 1
        if m >= w * lat:                  # bandwidth-bound: w reads accepted every cycle
            return k // w + lat
        # Outstanding-bound: the same burst of m reads repeats every read_latency cycles.
        return lat * (k // m) + (k % m) // w + lat
