"""DMA batches on the memory-system RTL: HBM and VMEM images in, images, flags and errors out.

::

    >>> run = sim.dma.run(hbm, vmem, [Descriptor(("hbm", 0), ("vmem", 8), (16,), (1,), (1,), 3)])
    >>> run.vmem, run.flags, run.errors, run.cycles

Each call is a whole run (:mod:`sim.backends.whole_run`) of a
:class:`~hdl.memory.DmaSystem` sized to the images: the images are loaded
into the HBM and VMEM storages, the descriptors played in, the error records
recorded, and the run ends when the DMA reports every descriptor completed
or rejected. It equals :func:`golden.memory.run` bit for bit.

Remote pushes loop back: the system is chip 0 of one (``n_chips`` 1), its
``push`` packets are recorded and played back into its own ``receive``
port (the harness' loopback, with the same seeded gaps as the other
streams), so a push to chip 0 lands on the same memories and a push to any
other chip is rejected (reason ``chip``), as ``golden.memory.run`` with
``n_chips=1`` rejects it. The result is then ``golden.memory.run``
followed by ``golden.memory.land`` of its pushes on the images and flags
it returns. Landing and the other descriptors run concurrently, so a batch
whose pushes land on a word that another accepted descriptor reads or
writes is refused with a ValueError (its result would depend on timing).

``error_ranges`` builds the HBM model with injected bus errors: the result
is then ``golden.memory.run`` and ``land`` given the same ``error_ranges``
(and ``words_per_cycle`` and ``lanes``), and :attr:`DmaRun.bus_errors` holds
the bus error records the RTL reported, in the order it reported them.

:func:`run_stamped` also returns the cycle stamps the RTL recorded
(:class:`DmaStamps`), from which :mod:`verif.bench.dma` measures latency and
throughput.
"""

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Const
from amaranth.lib import data

from golden.ici import HEADER_WORDS
from golden.memory import BUS, Descriptor, DmaError, addresses, check_error_ranges, validate
from hdl.memory.dma_push import DEFAULT_MAX_PAYLOAD
from hdl.memory.dma_system import STAMPS
from hdl.memory.layouts import REASONS, SPACES, descriptor_layout, error_layout

from .backends import check_backend, run_whole
from .checks import check_probability
from .backends.whole_run import WholeRun, pack_words, unpack_words

__all__ = ["run", "run_stamped", "DmaRun", "DmaStamps", "descriptor_beat", "push_flits",
           "stream_beats"]


@dataclass(frozen=True)
class DmaRun:
    """Result of :func:`run`: the final ``hbm`` and ``vmem`` images (flat uint32), the
    ``flags`` (uint32), the indices of rejected descriptors in ``errors``, the cycles
    from the first descriptor offered to the batch finished, and the bus error records
    (``golden.memory.DmaError`` with reason ``"bus"``, one per faulting read) in the
    order the RTL reported them."""
    hbm: np.ndarray
    vmem: np.ndarray
    flags: np.ndarray
    errors: list
    cycles: int
    bus_errors: list = ()       # a default, so that five-field constructions still work


def descriptor_beat(descriptor):
    """The packed ``descriptor_layout`` payload of a ``golden.memory.Descriptor``."""
    sent = descriptor.sent_flag
    value = descriptor_layout.const({
        "src_space": SPACES.index(descriptor.src[0]), "src_base": descriptor.src[1],
        "dst_space": SPACES.index(descriptor.dst[-2]), "dst_base": descriptor.dst[-1],
        "counts": list(descriptor.counts), "src_strides": list(descriptor.src_strides),
        "dst_strides": list(descriptor.dst_strides), "flag": descriptor.flag,
        "remote": descriptor.remote, "chip": descriptor.chip or 0, "sent": sent is not None,
        "sent_flag": sent or 0})
    return Const.cast(value).value


def push_flits(hbm_words, vmem_words, descriptors, *, n_flags=16,
               max_payload=DEFAULT_MAX_PAYLOAD):
    """Flits a looped-back batch pushes: its accepted pushes (chip 0 of one) cut into
    packets as ``golden.ici.push_packets``, one word a flit.

    Raises ValueError if a push lands on a word another accepted descriptor of the batch
    reads or writes (see the module docstring).
    """
    return stream_beats(hbm_words, vmem_words, descriptors, n_flags=n_flags,
                        max_payload=max_payload)["push"]


def stream_beats(hbm_words, vmem_words, descriptors, *, n_flags=16, error_ranges=(),
                 max_payload=DEFAULT_MAX_PAYLOAD):
    """The beats each stream of a batch's whole run carries, which a fixed ``depth`` of
    :func:`run` must hold: ``{"descriptors": ..., "errors": ..., "push": ...}``. ``push``
    is :func:`push_flits` (the looped-back ``receive`` carries as many); ``errors`` is the
    most error records the batch can give: a rejection per descriptor, or a bus error per
    read of a faulting word (a faulting read reads a word at least). Each is a sum over
    the descriptors, so a batch can be budgeted descriptor by descriptor.

    ``error_ranges`` are validated ones (``golden.memory.check_error_ranges``). Raises
    ValueError as :func:`push_flits`.
    """
    # Words read or written by the accepted descriptors (in range, so they index these).
    touched = {"hbm": np.zeros(hbm_words, bool), "vmem": np.zeros(vmem_words, bool)}
    landing = []
    flits = 0
    errors = len(descriptors)
    for index, d in enumerate(descriptors):
        if validate(d, hbm_words=hbm_words, vmem_words=vmem_words, n_flags=n_flags,
                    n_chips=1, index=index) is not None:
            continue
        src, dst = addresses(d)
        if d.src[0] == "hbm":
            errors += sum(int(np.count_nonzero((src >= lo) & (src < hi)))
                          for lo, hi in error_ranges)
        touched[d.src[0]][src] = True
        if not d.remote:
            touched[d.dst[0]][dst] = True
            continue
        landing.append((index, d.dst[-2], dst))
        flits += _push_flits(dst, max_payload)
    for index, space, dst in landing:
        hit = dst[touched[space][dst]]
        if hit.size:
            raise ValueError(f"descriptor {index} pushes to {space}[{hit.min()}], which "
                             f"another descriptor of the batch reads or writes: landing "
                             f"and that descriptor run in no defined order")
    return {"descriptors": len(descriptors), "errors": errors, "push": flits}


def _push_flits(dst, max_payload):
    """Flits (one word each) of the packets of a push to the addresses ``dst``: as
    ``golden.ici.push_packets`` cuts them (a packet ends where the next address does not
    follow, or at ``max_payload`` words), each carrying ``HEADER_WORDS`` besides its
    words. (Counted, not built: building a long push's packets is slow.)"""
    ends = np.flatnonzero(np.diff(dst) != 1) + 1
    runs = np.diff(np.concatenate([[0], ends, [len(dst)]]))
    packets = int(np.sum(-(-runs // max_payload)))
    return len(dst) + HEADER_WORDS * packets


def _image(value, name):
    if not isinstance(value, np.ndarray) or value.dtype != np.uint32 or value.ndim != 1:
        raise ValueError(f"{name} must be a 1-D numpy array of uint32 words")
    return value


def run(hbm, vmem, descriptors, *, outstanding=4, read_latency=4, words_per_cycle=1, lanes=8,
        n_flags=16, jitter=0, backend="verilator", seed=0, idle=0.0, stall=0.0, waves=None,
        error_ranges=(), depth=None):
    """Apply ``descriptors`` (``golden.memory.Descriptor``) to ``hbm`` and ``vmem`` on the RTL.

    ``hbm`` is a flat uint32 word image whose length is a multiple of
    ``words_per_cycle`` (an HBM line); ``vmem`` holds lines of ``lanes``
    words. ``jitter`` adds up to that many cycles of seeded HBM latency;
    ``idle`` and ``stall`` gap the descriptor and error streams, and the
    looped-back packets of pushes (``idle`` on their way in, ``stall`` on
    their way out). None of them changes a result, only the cycles. Remote
    pushes loop back to this chip (module docstring). ``error_ranges`` are
    the HBM word ranges ``[lo, hi)`` that fault, at HBM line boundaries
    (``golden.memory.check_error_ranges``); they are part of the build.
    ``depth`` fixes the harness memory depth of every stream (see
    :class:`~sim.backends.whole_run.WholeRun`), so that batches of any size
    up to it share one Verilator build; by default each stream gets the
    least that holds it. Returns a :class:`DmaRun`.
    """
    return run_stamped(hbm, vmem, descriptors, outstanding=outstanding,
                       read_latency=read_latency, words_per_cycle=words_per_cycle, lanes=lanes,
                       n_flags=n_flags, jitter=jitter, backend=backend, seed=seed, idle=idle,
                       stall=stall, waves=waves, error_ranges=error_ranges, depth=depth)[0]


@dataclass(frozen=True)
class DmaStamps:
    """Cycle stamps of a run (:class:`~hdl.memory.DmaSystem`'s outputs of those names): the
    first descriptor taken, the first memory request, the first and the latest read
    accepted, the same for writes, and the first cycle the latest flag add is visible."""
    first_taken: int
    first_request: int
    first_read: int
    last_read: int
    first_write: int
    last_write: int
    last_flag: int

    @property
    def request_latency(self):
        """Cycles from the first descriptor accepted to the DMA's first memory request."""
        return self.first_request - self.first_taken

    @property
    def flag_latency(self):
        """Cycles from the last write accepted to its flag add visible."""
        return self.last_flag - self.last_write

    @property
    def write_cycles(self):
        """Cycles from the first write accepted to the last, both included."""
        return self.last_write - self.first_write + 1

    @property
    def stream_cycles(self):
        """The longer of the read span and the write span (first to last accepted, both
        included): the cycles a batch takes to stream, its start-up latency left out.
        (Writes merged from narrower reads start late, reads end early: the longer span
        is the one that limits.)"""
        return max(self.last_read - self.first_read, self.last_write - self.first_write) + 1


def run_stamped(hbm, vmem, descriptors, *, outstanding=4, read_latency=4, words_per_cycle=1,
                lanes=8, n_flags=16, jitter=0, backend="verilator", seed=0, idle=0.0,
                stall=0.0, waves=None, error_ranges=(), depth=None):
    """:func:`run`, returning ``(DmaRun, DmaStamps)``: the result and the cycle stamps the
    RTL recorded, for measuring latency and throughput (:mod:`verif.bench.dma`)."""
    hbm, vmem = _image(hbm, "hbm"), _image(vmem, "vmem")
    if hbm.size == 0 or hbm.size % words_per_cycle:
        raise ValueError(f"hbm must hold a positive multiple of words_per_cycle "
                         f"({words_per_cycle}) words, not {hbm.size}")
    if vmem.size == 0 or vmem.size % lanes:
        raise ValueError(f"vmem must hold a positive multiple of lanes ({lanes}) words, "
                         f"not {vmem.size}")
    if isinstance(descriptors, Descriptor) or not hasattr(descriptors, "__iter__"):
        raise TypeError(f"descriptors must be a list of golden.memory.Descriptor, not "
                        f"{type(descriptors).__name__} (a single descriptor goes in a list: "
                        f"[descriptor])")
    check_probability("idle", idle)
    check_probability("stall", stall)
    descriptors = list(descriptors)
    for index, descriptor in enumerate(descriptors):
        if not isinstance(descriptor, Descriptor):
            raise ValueError(f"descriptor {index} must be a golden.memory.Descriptor, "
                             f"not {type(descriptor).__name__}")
    check_backend(backend)
    ranges = check_error_ranges(error_ranges, hbm_words=hbm.size,
                                words_per_cycle=words_per_cycle)
    if depth is not None and (not isinstance(depth, int) or isinstance(depth, bool)
                              or depth < 1):
        raise ValueError(f"depth must be a positive integer or None, not {depth!r}")
    beats = stream_beats(hbm.size, vmem.size, descriptors, n_flags=n_flags,
                         error_ranges=ranges)
    flits = beats["push"]
    params = dict(hbm_size=hbm.size, vmem_lines=vmem.size // lanes, lanes=lanes,
                  words_per_cycle=words_per_cycle, read_latency=read_latency, jitter=jitter,
                  n_flags=n_flags, outstanding=outstanding)
    if ranges:
        # Only when given: a build without faults keeps the cache key it always had.
        params["error_ranges"] = ranges
    # The watchdog sees every memory request and response (``busy``): a DMA that makes
    # progress is never quiet for longer than a read's latency.
    watchdog = 1000 + 4 * (read_latency + jitter)
    whole = WholeRun(
        "dma", params, play={"descriptors": [descriptor_beat(d) for d in descriptors],
                             "receive": []},
        record={"errors": beats["errors"], "push": flits},
        loopbacks={"receive": ("push", flits)}, until="finished",
        gaps={"descriptors": idle, "errors": stall, "receive": idle, "push": stall},
        seed=seed, inputs={"seed": seed, "chip": 0},
        load={"hbm": pack_words(hbm, words_per_cycle), "vmem": pack_words(vmem, lanes)},
        dump=("hbm", "vmem"), watchdog=watchdog, busy="busy", depth=depth)
    result = run_whole(whole, backend=backend, waves=waves)
    records = [data.Const(error_layout, beat) for beat in result.recorded["errors"]]
    rejected = sorted(record.id for record in records if REASONS[record.reason] != BUS)
    bus_errors = [DmaError(record.id, BUS, record.address) for record in records
                  if REASONS[record.reason] == BUS]
    flags = unpack_words([result.outputs["flags"]], n_flags)
    first = result.streams["descriptors"].first
    dma_run = DmaRun(unpack_words(result.memories["hbm"], words_per_cycle),
                     unpack_words(result.memories["vmem"], lanes), flags, rejected,
                     result.cycles - (first or 0), bus_errors)
    return dma_run, DmaStamps(*(result.outputs[name] for name in STAMPS))
