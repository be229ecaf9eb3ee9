"""Random DMA descriptors for the ``dma`` regression, each with the bins it exercises.

A descriptor is drawn from a *card*: its direction (local, or a remote push
looped back to this chip), dimension count, size class, stride kind,
legality and injected fault, dealt from shuffled decks so that every batch
covers every value of each (see :func:`deal`). The rest (bases, counts,
strides, flags) is drawn at random within what the card asks for. Every
choice comes from the ``numpy`` generator the caller seeds.

The spaces are laid out (:class:`Geometry`) so that every batch has one
defined result (``sim.dma``'s landing rule):

* pushes land in a *landing zone* at the top of each space, which no other
  descriptor reads or writes (out-of-range ones aside, which are rejected);
* below the HBM landing zone, a *fault zone* holds the first error range:
  descriptors dealt a ``read`` fault read from it, ``write`` ones write into
  it, nothing else touches it. The second error range lies inside the HBM
  landing zone, for pushes dealt a ``write`` fault to land in;
* every other descriptor stays in the *work area* below them.
"""

import math
from dataclasses import dataclass, replace

from golden.memory import Descriptor, addresses, validate

__all__ = ["Geometry", "Card", "DIRECTIONS", "REMOTE", "SIZES", "PUSH_SIZES", "STRIDES",
           "LEGALITY", "PUSH_LEGALITY", "VERDICTS", "FAULTS", "SENT", "deal", "descriptor_for",
           "fault_of", "local_of"]

#: Local directions, then remote pushes (``hbm->remote vmem``: from this chip's HBM to a
#: chip's VMEM; the regression loops them back to this chip).
DIRECTIONS = ("hbm->vmem", "vmem->hbm", "hbm->hbm", "vmem->vmem",
              "hbm->remote vmem", "vmem->remote hbm", "hbm->remote hbm", "vmem->remote vmem")
REMOTE = DIRECTIONS[4:]
#: Deck weight of each local direction (each remote one has 1): one descriptor in twelve
#: is a push. Every pushed word crosses the run harness' loopback memory as a flit, and
#: that memory is kept small (``suite.DEPTH``), so pushes are few and short.
LOCAL_WEIGHT = 11
#: Size classes by words moved: one word, a few lines, a few KiB, tens of KiB.
SIZES = {"word": (1, 1), "small": (2, 64), "medium": (65, 1024), "large": (1025, 12288)}
#: Pushes are at most medium, drawn from these words (the low end of each class): a
#: medium push already spans several packets.
PUSH_SIZES = {"word": (1, 1), "small": (2, 64), "medium": (65, 128)}
#: How the strides walk: unit (contiguous), strided, zero (a repeated word) or negative.
STRIDES = ("unit", "strided", "zero", "negative")
#: What the DMA must say: accepted, or rejected for this reason (golden.memory.REASONS).
LEGALITY = ("ok", "ok", "ok", "ok", "count", "flag", "src_range", "dst_range")
#: The same for pushes, which can also name a bad sent flag or a chip that does not exist.
PUSH_LEGALITY = ("ok", "ok", "ok", "ok", "count", "flag", "sent_flag", "chip", "src_range",
                 "dst_range")
#: The legality a descriptor can end with (``chip`` and ``sent_flag``: pushes only).
VERDICTS = ("ok", "count", "flag", "sent_flag", "chip", "src_range", "dst_range")
#: Injected faults: none, reads from an error range, writes (or a push's landing) into one.
FAULTS = ("none", "read", "write")
#: Which accepted descriptors are dealt a fault (a read or a write, as their spaces allow):
#: one local in eight, one push in two. A faulting transfer is at most small, as each
#: faulting read gives an error record.
FAULT_DECK = {"local": ("none",) * 7 + ("fault",), "push": ("none", "fault")}
#: Sent flags: a local descriptor has none to name; a push names one or not.
SENT = ("local", "none", "named")


@dataclass(frozen=True)
class Geometry:
    """The memory system a batch runs on: words of HBM and VMEM, VMEM lanes, flags, and
    the zones of the module docstring: ``landing`` words at the top of each space, and a
    ``fault_zone`` of HBM words below the HBM landing zone."""
    hbm_words: int
    vmem_words: int
    lanes: int
    n_flags: int
    landing: int = 0
    fault_zone: int = 0

    def size(self, space):
        return self.hbm_words if space == "hbm" else self.vmem_words

    def work(self, space):
        """Words of ``space`` below its zones, where fault-free local descriptors stay."""
        return self.size(space) - self.landing - (self.fault_zone if space == "hbm" else 0)

    def landing_zone(self, space):
        return self.size(space) - self.landing, self.size(space)

    @property
    def fault_range(self):
        """The HBM words that fault in the fault zone: its middle half (None if empty)."""
        start, quarter = self.work("hbm"), self.fault_zone // 4
        return (start + quarter, start + 3 * quarter) if quarter else None

    @property
    def landing_fault_range(self):
        """The HBM words that fault in the landing zone: its third quarter (None if empty)."""
        start, quarter = self.hbm_words - self.landing, self.landing // 4
        return (start + 2 * quarter, start + 3 * quarter) if quarter else None

    @property
    def error_ranges(self):
        """Every faulting HBM word range, for the HBM model and the golden model."""
        return tuple(r for r in (self.fault_range, self.landing_fault_range) if r is not None)


@dataclass(frozen=True)
class Card:
    direction: str
    dims: int
    size: str
    stride: str
    legality: str
    overlap: bool
    fault: str = "none"
    sent: str = "local"


def local_of(direction):
    """The local direction between the same spaces as ``direction``."""
    return direction.replace("remote ", "")


def deal(rng, count, *, faults=True):
    """``count`` cards, every value of every field dealt evenly (shuffled decks).

    Local directions weigh :data:`LOCAL_WEIGHT`. Pushes and local descriptors have decks
    of their own for size, legality and faults; faults go to accepted cards only, a
    ``read`` to one with an HBM source, a ``write`` to one with an HBM destination.
    Without ``faults`` no card asks for one.
    """
    def deck(values, n):
        cards = [values[i % len(values)] for i in range(n)]
        return [cards[i] for i in rng.permutation(n)]

    def dealt(groups, values):
        """Deal each group (a list of card indices) its own deck of ``values[group]``."""
        out = [None] * count
        for name, members in groups.items():
            for k, value in zip(members, deck(values[name], len(members))):
                out[k] = value
        return out

    # Every direction once first, so that a batch of 8 or more has each of them.
    directions = deck(DIRECTIONS + tuple(d for d in DIRECTIONS if d not in REMOTE)
                      * (LOCAL_WEIGHT - 1), count)
    groups = {"local": [k for k, d in enumerate(directions) if d not in REMOTE],
              "push": [k for k, d in enumerate(directions) if d in REMOTE]}
    sizes = dealt(groups, {"local": tuple(SIZES), "push": tuple(PUSH_SIZES)})
    legality = dealt(groups, {"local": LEGALITY, "push": PUSH_LEGALITY})
    overlap = dealt(groups, {"local": (False, False, False, True), "push": (False,)})
    accepted = {name: [k for k in members if legality[k] == "ok"]
                for name, members in groups.items()}
    fault = dealt(accepted, FAULT_DECK if faults else {"local": ("none",), "push": ("none",)})
    for k, d in enumerate(directions):
        src, dst = local_of(d).split("->")
        options = ["read"] * (src == "hbm") + ["write"] * (dst == "hbm")
        fault[k] = options[int(rng.integers(len(options)))] \
            if fault[k] == "fault" and options else "none"
    return [Card(*values) for values in zip(directions, deck((1, 2, 3), count), sizes,
                                             deck(STRIDES, count), legality, overlap, fault)]


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


def _base(rng, zone, low, high, lanes, hit=None):
    """A base that keeps [base + low, base + high] in the word range ``zone`` and, if
    ``hit`` is a range, makes it meet ``hit``; misaligned half the time. None when no
    base does."""
    lo, hi = zone[0] - low, zone[1] - 1 - high
    if hit is not None:
        lo, hi = max(lo, hit[0] - high), min(hi, hit[1] - 1 - low)
    if hi < lo:
        return None
    base = int(rng.integers(lo, hi + 1))
    if rng.random() < 0.5:
        base = min(hi, max(lo, base - base % lanes))
    return base


def _zones(card, geometry, src_space, dst_space, remote):
    """(source zone, its fault range or None, destination zone, its fault range or None)."""
    below_landing = (0, geometry.size("hbm") - geometry.landing)
    src_zone, src_hit = (0, geometry.work(src_space)), None
    if card.fault == "read":
        src_zone, src_hit = below_landing, geometry.fault_range
    if remote:
        dst_zone, dst_hit = geometry.landing_zone(dst_space), None
        if card.fault == "write":
            dst_hit = geometry.landing_fault_range
        elif dst_space == "hbm" and geometry.landing_fault_range:
            # Below the faulting quarter: only pushes dealt a write fault land on it.
            dst_zone = (dst_zone[0], geometry.landing_fault_range[0])
    else:
        dst_zone, dst_hit = (0, geometry.work(dst_space)), None
        if card.fault == "write":
            dst_zone, dst_hit = below_landing, geometry.fault_range
    return src_zone, src_hit, dst_zone, dst_hit


def fault_of(descriptor, geometry):
    """The fault an accepted ``descriptor`` meets: ``read`` if it reads a faulting word,
    ``write`` if it writes (or lands) on one, else ``none``. (Never ``both`` here: a
    descriptor dealt no write fault keeps its destination off every error range.)"""
    src, dst = addresses(descriptor)
    read = write = False
    for lo, hi in geometry.error_ranges:
        read |= descriptor.src[0] == "hbm" and bool(((src >= lo) & (src < hi)).any())
        write |= descriptor.dst[-2] == "hbm" and bool(((dst >= lo) & (dst < hi)).any())
    return "both" if read and write else "read" if read else "write" if write else "none"


def descriptor_for(rng, card, geometry):
    """A descriptor that fits ``card`` on ``geometry``; returns (Descriptor, Card).

    The card may come back changed where the geometry rules it out (a large
    transfer that does not fit shrinks to medium, an overlap between different
    spaces is not one, a fault on a side that is not HBM is none, a faulting
    transfer is at most small), so coverage samples what was made: its
    legality is the DMA's verdict and its fault the one the descriptor meets.
    """
    src_space, dst_space = local_of(card.direction).split("->")
    remote = card.direction in REMOTE
    fault = card.fault
    if (fault == "read" and src_space != "hbm") or (fault == "write" and dst_space != "hbm") \
            or not geometry.error_ranges:
        fault = "none"
    size = card.size
    if fault != "none" and size in ("medium", "large"):
        size = "small"         # faulting reads report one error each: keep them few
    sizes = PUSH_SIZES if remote else SIZES
    card = replace(card, fault=fault, overlap=card.overlap and fault == "none")
    src_zone, src_hit, dst_zone, dst_hit = _zones(card, geometry, src_space, dst_space, remote)
    for _ in range(20):
        low, high = sizes[size]
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
        src_base = _base(rng, src_zone, src_low, src_high, geometry.lanes, src_hit)
        dst_base = _base(rng, dst_zone, dst_low, dst_high, geometry.lanes, dst_hit)
        if src_base is not None and dst_base is not None:
            break
        size = {"large": "medium", "medium": "small", "small": "word"}.get(size, size)
    else:
        raise RuntimeError(f"no descriptor fits {card} on {geometry}")
    overlap = card.overlap and src_space == dst_space and not remote
    if overlap:
        # Destination within the source's extent, a few words off: reads and writes interleave.
        shift = int(rng.integers(-4, 5))
        candidate = src_base + src_low - dst_low + shift
        if dst_zone[0] <= candidate + dst_low and candidate + dst_high < dst_zone[1]:
            dst_base = candidate
        else:
            overlap = False
    flag = int(rng.integers(0, geometry.n_flags))
    sent_flag = int(rng.integers(0, geometry.n_flags)) if remote and rng.random() < 0.5 \
        else None
    chip = 0
    if card.legality == "count":
        counts = tuple(0 if d == int(rng.integers(0, card.dims)) else c
                       for d, c in enumerate(counts))
        if 0 not in counts:
            counts = (0,) + counts[1:]
    elif card.legality == "flag":
        flag = int(rng.integers(geometry.n_flags, 128))
    elif card.legality == "sent_flag":
        sent_flag = int(rng.integers(geometry.n_flags, 128))
    elif card.legality == "chip":
        chip = int(rng.integers(1, 256))
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
    dst = ("remote", chip, dst_space, dst_base) if remote else (dst_space, dst_base)
    descriptor = Descriptor((src_space, src_base), dst, counts, src_strides, dst_strides, flag,
                            sent_flag=sent_flag)
    verdict = validate(descriptor, hbm_words=geometry.hbm_words,
                       vmem_words=geometry.vmem_words, n_flags=geometry.n_flags)
    made = replace(card, size=_size_class(math.prod(counts) or words), overlap=overlap,
                   legality="ok" if verdict is None else verdict.reason,
                   fault=fault_of(descriptor, geometry) if verdict is None else "none",
                   sent="local" if not remote else "none" if sent_flag is None else "named")
    return descriptor, made


def _size_class(words):
    return next(name for name, (low, high) in SIZES.items() if low <= words <= high)
