"""Random DMA descriptors for the ``dma`` regression, each with the bins it exercises.

A descriptor is drawn from a *card*: its direction, dimension count, size
class, stride kind and legality, dealt from shuffled decks so that every
batch covers every value of each (see :func:`deal`). The rest (bases,
counts, strides, flags) is drawn at random within what the card asks for.
Every choice comes from the ``numpy`` generator the caller seeds.
"""

import math
from dataclasses import dataclass

from golden.memory import Descriptor

__all__ = ["Geometry", "Card", "DIRECTIONS", "SIZES", "STRIDES", "LEGALITY", "deal",
           "descriptor_for"]

DIRECTIONS = ("hbm->vmem", "vmem->hbm", "hbm->hbm", "vmem->vmem")
#: Size classes by words moved: one word, a few lines, a few KiB, tens of KiB.
SIZES = {"word": (1, 1), "small": (2, 64), "medium": (65, 1024), "large": (1025, 12288)}
#: How the strides walk: unit (contiguous), strided, zero (a repeated word) or negative.
STRIDES = ("unit", "strided", "zero", "negative")
#: What the DMA must say: accepted, or rejected for this reason (golden.memory.REASONS).
LEGALITY = ("ok", "ok", "ok", "ok", "count", "flag", "src_range", "dst_range")


@dataclass(frozen=True)
class Geometry:
    """The memory system a batch runs on: words of HBM and VMEM, VMEM lanes, flags."""
    hbm_words: int
    vmem_words: int
    lanes: int
    n_flags: int

    def size(self, space):
        return self.hbm_words if space == "hbm" else self.vmem_words


@dataclass(frozen=True)
class Card:
    direction: str
    dims: int
    size: str
    stride: str
    legality: str
    overlap: bool


def deal(rng, count):
    """``count`` cards, every value of every field dealt evenly (shuffled decks)."""
    def deck(values):
        cards = [values[i % len(values)] for i in range(count)]
        return [cards[i] for i in rng.permutation(count)]
    fields = [deck(DIRECTIONS), deck((1, 2, 3)), deck(tuple(SIZES)), deck(STRIDES),
              deck(LEGALITY), deck((False, False, False, True))]
    return [Card(*values) for values in zip(*fields)]


def _counts(rng, dims, words):
    """``dims`` counts whose product is close to ``words`` (innermost first)."""
    counts = []
    left = words
    for d in range(dims - 1, 0, -1):
        # Spread the words over the dims: each outer count about the dims-th root.
        outer = max(1, int(round(left ** (1 / (d + 1)) * rng.uniform(0.5, 1.5))))
        counts.append(min(outer, left))
        left = max(1, left // counts[-1])
    counts.append(left)
    return tuple(reversed(counts))


def _strides(rng, counts, kind, lanes):
    """Strides of one side: dimension 0 per ``kind``, the outer ones laid out beyond it."""
    inner = {"unit": 1, "strided": int(rng.integers(2, lanes + 3)), "zero": 0,
             "negative": -int(rng.integers(1, 3))}[kind]
    strides, span = [inner], max(1, abs(inner)) * counts[0]
    for count in counts[1:]:
        gap = int(rng.integers(0, lanes + 1))
        stride = 0 if kind == "zero" and rng.random() < 0.5 else span + gap
        strides.append(-stride if kind == "negative" else stride)
        span = max(span, abs(stride) * count + span)
    return tuple(strides)


def _extent(counts, strides):
    """(lowest, highest) offset from the base over every element."""
    low = sum(min(0, (c - 1) * s) for c, s in zip(counts, strides))
    high = sum(max(0, (c - 1) * s) for c, s in zip(counts, strides))
    return low, high


def _base(rng, size, low, high, lanes):
    """A base that keeps [base + low, base + high] in ``[0, size)``, misaligned half the time,
    or None when the extent does not fit."""
    lo, hi = -low, size - 1 - high
    if hi < lo:
        return None
    base = int(rng.integers(lo, hi + 1))
    if rng.random() < 0.5:
        base = min(hi, max(lo, base - base % lanes))
    return base


def descriptor_for(rng, card, geometry):
    """A descriptor that fits ``card`` on ``geometry``; returns (Descriptor, Card).

    The card may come back changed where the geometry rules it out (a large
    transfer that does not fit VMEM shrinks to medium, an overlap between
    different spaces is not one), so coverage samples what was made.
    """
    src_space, dst_space = card.direction.split("->")
    size = card.size
    for _ in range(20):
        low, high = SIZES[size]
        words = int(rng.integers(low, high + 1))
        counts = _counts(rng, card.dims, words)
        src_strides = _strides(rng, counts, card.stride, geometry.lanes)
        # A zero stride reads one word many times, or (half the time) writes one word
        # many times, where the last element must win.
        dst_stride_kind = card.stride if card.stride != "zero" or rng.random() < 0.5 \
            else "unit"
        dst_strides = _strides(rng, counts, dst_stride_kind, geometry.lanes)
        src_low, src_high = _extent(counts, src_strides)
        dst_low, dst_high = _extent(counts, dst_strides)
        src_base = _base(rng, geometry.size(src_space), src_low, src_high, geometry.lanes)
        dst_base = _base(rng, geometry.size(dst_space), dst_low, dst_high, geometry.lanes)
        if src_base is not None and dst_base is not None:
            break
        size = {"large": "medium", "medium": "small", "small": "word"}.get(size, size)
    else:
        raise RuntimeError(f"no descriptor fits {card} on {geometry}")
    overlap = card.overlap and src_space == dst_space
    if overlap:
        # Destination within the source's extent, a few words off: reads and writes interleave.
        shift = int(rng.integers(-4, 5))
        candidate = src_base + src_low - dst_low + shift
        if 0 <= candidate + dst_low and candidate + dst_high < geometry.size(dst_space):
            dst_base = candidate
        else:
            overlap = False
    flag = int(rng.integers(0, geometry.n_flags))
    if card.legality == "count":
        counts = tuple(0 if d == int(rng.integers(0, card.dims)) else c
                       for d, c in enumerate(counts))
        if 0 not in counts:
            counts = (0,) + counts[1:]
    elif card.legality == "flag":
        flag = int(rng.integers(geometry.n_flags, 128))
    elif card.legality in ("src_range", "dst_range"):
        side_size = geometry.size(src_space if card.legality == "src_range" else dst_space)
        past = int(rng.integers(1, 64))
        if card.legality == "src_range":
            src_base = side_size - src_high - 1 + past if rng.random() < 0.7 else \
                -src_low - past
            src_base = max(src_base, 0)
            if src_base + src_low >= 0 and src_base + src_high < side_size:
                src_base = side_size          # every element out of range
        else:
            dst_base = side_size - dst_high - 1 + past if rng.random() < 0.7 else \
                -dst_low - past
            dst_base = max(dst_base, 0)
            if dst_base + dst_low >= 0 and dst_base + dst_high < side_size:
                dst_base = side_size
    descriptor = Descriptor((src_space, src_base), (dst_space, dst_base), counts, src_strides,
                            dst_strides, flag)
    made = Card(card.direction, card.dims, _size_class(math.prod(counts) or words),
                card.stride, card.legality, overlap)
    return descriptor, made


def _size_class(words):
    return next(name for name, (low, high) in SIZES.items() if low <= words <= high)
