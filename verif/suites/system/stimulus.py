"""Random collectives for the ``system`` regression: one system build per seed, many
collectives on it.

A seed's **build** (one ``sim.system`` Verilator model) is its torus shape, its link
parameter set (:data:`LINKS`) and its numerics mode (a chip parameter); the chips are
always ``sim.system.SYSTEM_CHIP``'s, and every case is sized so that its plan fits them
(:func:`fits`), since a plan that needs more memory or flags grows the chips and makes
another build. The build is dealt by seed (:func:`build`), not drawn, so that every four
seeds from 4k + 1 have every shape, link set and numerics mode (a drawn one would leave
rare combinations, which alone reach some bins, to chance). Seeds 1 to 4:

========  ========  ============  ========
seed      shape     link set      numerics
========  ========  ============  ========
1         2x2       default       tpu
2         1x4       min_credits   ieee
3         2x2x2     long_links    tpu
4         2x2       asymmetric    tpu
========  ========  ============  ========

From the second round of four (seeds 5 to 8) on, the link set moves one on per round and
the numerics mode flips every round, so later seeds make other builds; every eighth seed
is a 4x4 torus instead of a 2x2 one (a 16-chip build, slow to make and to run: "rare", and no
coverage bin depends on it). ``tests/system/test_liveness.py`` runs its asymmetric 2x2 and
minimum-credit 1x4 collectives on the builds of seeds 4 and 2, so both share them.

A seed's **cases** (:func:`cases`) share its build (a topology of the same shape is only
routing tables and the ``alive`` mask streamed in): every kind of
``golden.collectives.KINDS`` in float32 and in int32 on the regular torus, and on a 2x2
build every kind once more with a chip failed (the failed chip dealt so that one round
fails each chip once); :data:`ROUNDS` rounds of that. Each case draws, from
``numpy.random.default_rng([seed, case, ...])``, its size class (:data:`SIZES`, by the
words of a chip's input row: one VMEM line or less, several lines, or at least
:data:`LARGE_WORDS`), a size of that class its kind allows (reduce blocks must be whole
VMEM lines: a size the programs refuse is replaced by one the refusal suggests),
``chunks`` from 1 to 3, its data (float32 with about 15% special values: zeros,
infinities, NaNs, subnormals, the largest finite; int32 uniform bits) and the simulator
seed.

The Amaranth simulator and Icarus are orders of magnitude slower than Verilator on a
system of TensorCores, so their seeds use the 2x2 shape only, the smallest sizes (one
line, or the smallest a reduce allows), and of the seed's cases only one per kind and the
first failed-chip case, if the seed has one (:func:`slow_indices`); the others are
skipped. A case keeps its name (kind, dtype, failed chip) on every simulator.
"""

import re
from dataclasses import dataclass

import numpy as np

from golden import collectives as gc
from golden import topology as topo
from sim.kernels.collective import plan_collective
from sim.system import SYSTEM_CHIP, plan_push_words

__all__ = ["ASYMMETRIC", "LINKS", "SHAPES", "DEAL", "ROUNDS", "SIZES", "LARGE_WORDS",
           "SPECIALS", "Build", "Case", "build", "link_latency", "topology_of", "plan",
           "slow_indices", "case", "cases", "inputs_of", "size_class", "fits", "pick_size"]

#: ``asymmetric``'s link latencies, (slow, fast): the links out of the + port of the first
#: axis longer than one chip take ``slow`` cycles (3x), so one way round its rings is
#: slower than the other; every other link takes ``fast`` (:func:`link_latency`).
ASYMMETRIC = (6, 2)
#: Link parameter sets: (vcs, buffer_flits, link_latency), the latency an int for every
#: link or :data:`ASYMMETRIC`.
LINKS = {"default": (2, 8, 2), "min_credits": (2, 1, 2), "long_links": (2, 4, 6),
         "asymmetric": (2, 1, ASYMMETRIC)}
#: Shapes the seeds deal, and the rare one.
SHAPES = ("2x2", "1x4", "2x2x2", "4x4")
#: (shape, link set, numerics) by ``(seed - 1) % 4`` in the first round (module docstring).
DEAL = (("2x2", "default", "tpu"), ("1x4", "min_credits", "ieee"),
        ("2x2x2", "long_links", "tpu"), ("2x2", "asymmetric", "tpu"))
#: Rounds of cases per seed: each round every kind in each dtype (and on a 2x2 build every
#: kind with a chip failed), each case drawing its own size, chunks and data.
ROUNDS = 2
#: Size classes, by the words of one chip's input row (all_to_all: C*m).
SIZES = ("line", "lines", "large")
#: A row of at least this many words is ``large`` (64 VMEM lines of 4 words).
LARGE_WORDS = 256
#: Special float32 bit patterns dealt into about 15% of the float32 words.
SPECIALS = np.array([0x0000_0000, 0x8000_0000, 0x7F80_0000, 0xFF80_0000, 0x7FC0_0000,
                     0xFFC0_0001, 0x0000_0001, 0x807F_FFFF, 0x7F7F_FFFF, 0x0040_0000],
                    np.uint32)
_LANES = SYSTEM_CHIP["lanes"]
#: What a plan may use of each chip without growing it (a new build): plan field -> limit.
_LIMITS = {"n_flags": SYSTEM_CHIP["n_flags"], "vmem_lines": SYSTEM_CHIP["vmem_lines"],
           "smem_words": SYSTEM_CHIP["smem_words"], "imem_bundles": SYSTEM_CHIP["imem_depth"]}
#: Row words drawn for each size class: [lo, hi].
_ROW_WORDS = {"line": (1, _LANES), "lines": (_LANES + 1, LARGE_WORDS - 1),
              "large": (LARGE_WORDS, 4 * LARGE_WORDS)}


@dataclass(frozen=True)
class Build:
    """One seed's system build: ``shape``, ``link`` (a :data:`LINKS` name), ``numerics``."""
    shape: str
    link: str
    numerics: str

    @property
    def link_params(self):
        """``sim.system.collective``'s ``vcs``, ``buffer_flits`` and ``link_latency``."""
        vcs, buffer_flits, latency = LINKS[self.link]
        return dict(vcs=vcs, buffer_flits=buffer_flits,
                    link_latency=link_latency(self.shape, latency))

    def describe(self):
        params = self.link_params
        latency = params["link_latency"]
        links = (f"{latency}-cycle links" if isinstance(latency, int)
                 else f"links of {', '.join(map(str, latency))} cycles by torus port")
        return (f"{self.shape}, {self.link} ({params['vcs']} VCs, {params['buffer_flits']} "
                f"buffer flits, {links}), {self.numerics}")


def link_latency(shape, latency):
    """``sim.system``'s ``link_latency`` on torus ``shape`` for a :data:`LINKS` latency: an
    int as it is, :data:`ASYMMETRIC` as one latency per torus port."""
    if isinstance(latency, int):
        return latency
    slow, fast = latency
    dims = topo.torus(shape).dims
    axis = next(a for a, n in enumerate(dims) if n > 1)
    return tuple(slow if port == 2 * axis else fast for port in range(2 * len(dims)))


@dataclass(frozen=True)
class Case:
    """One collective of a seed: ``index``, ``kind``, ``dtype``, the ``failed`` chip (or
    None), the input ``shape``, ``chunks``, the ``size`` class and the ``data_seed`` of its
    inputs and simulator."""
    index: int
    kind: str
    dtype: str
    failed: int | None
    shape: tuple
    chunks: int
    size: str
    data_seed: int

    @property
    def name(self):
        """The case's name: ``--only`` takes it (``case03.`` alone picks one case)."""
        where = f".failed{self.failed}" if self.failed is not None else ""
        return f"case{self.index:02d}.{self.kind}.{self.dtype}{where}"

    def describe(self):
        failed = f", chip {self.failed} failed" if self.failed is not None else ""
        return (f"{self.kind} {self.dtype} inputs {list(self.shape)} ({self.size}), "
                f"chunks {self.chunks}{failed}, data seed {self.data_seed}")


def build(seed, backend="verilator"):
    """The :class:`Build` of ``seed`` (module docstring)."""
    shape, link, numerics = DEAL[(seed - 1) % 4]
    round_ = (seed - 1) // 4
    names = list(LINKS)
    link = names[(names.index(link) + round_) % len(names)]
    if round_ % 2:
        numerics = "ieee" if numerics == "tpu" else "tpu"
    if backend != "verilator":
        shape = "2x2"
    elif seed % 8 == 0:
        shape = "4x4"
    return Build(shape, link, numerics)


def topology_of(b, failed=None):
    """The ``golden.topology.Topology`` of a case on build ``b``."""
    return topo.torus(b.shape, failed=() if failed is None else (failed,))


def size_class(kind, shape):
    """The :data:`SIZES` class of a case's input ``shape``."""
    row = shape[1] * shape[2] if kind == "all_to_all" else shape[1]
    return "line" if row <= _LANES else "lines" if row < LARGE_WORDS else "large"


def _shape(kind, chips, row):
    if kind == "all_to_all":
        return (chips, chips, max(1, row // chips))
    return (chips, row)


def fits(kind, shape, topology, dtype, chunks):
    """The plan of a case if it fits ``SYSTEM_CHIP`` (no new build), else None; raises
    the planner's ValueError for a size it refuses."""
    plan = plan_collective(kind, np.zeros(shape, np.uint32), topology=topology, dtype=dtype,
                           lanes=_LANES, chunks=chunks,
                           push_words=plan_push_words(SYSTEM_CHIP))
    return plan if all(getattr(plan, f) <= limit for f, limit in _LIMITS.items()) else None


_SUGGESTED = re.compile(r"nearest n that work are (\d+) and (\d+)|smallest n that works is "
                        r"(\d+)")


def pick_size(kind, topology, dtype, chunks, row, *, smallest=False):
    """An input shape near ``row`` words a chip that the programs take and that fits the
    chips: a refused size is replaced by one the refusal suggests (the larger if its class
    is the same, else the smaller), one too large for the chips is halved.

    ``smallest``: the smallest size of the kind (one word, or the smallest reduce size).
    """
    chips = int(topology.alive.sum())
    if smallest:
        row = chips if kind in ("reduce_scatter", "all_to_all") else 1
    while True:
        shape = _shape(kind, chips, row)
        if kind == "reduce_scatter" and shape[1] % chips:
            row = shape[1] + chips - shape[1] % chips
            continue
        try:
            plan = fits(kind, shape, topology, dtype, chunks)
        except ValueError as error:
            found = _SUGGESTED.search(str(error))
            if not found:
                raise
            below, above, smallest_n = (int(g) if g else None for g in found.groups())
            if smallest_n is not None or smallest:
                row = smallest_n or above
            else:
                want = size_class(kind, (chips, row))
                row = above if size_class(kind, (chips, above)) == want else below
            continue
        if plan is not None:
            return shape
        if row <= 1:
            raise ValueError(f"{kind} on {topology.shape} with chunks {chunks} fits the chips "
                             f"at no size")
        row //= 2


def _case(seed, b, index, kind, dtype, failed, backend):
    rng = np.random.default_rng([seed, index, 0x5C5])
    topology = topology_of(b, failed)
    chunks = int(rng.integers(1, 4))
    slow = backend != "verilator"
    size = "line" if slow else SIZES[int(rng.integers(len(SIZES)))]
    lo, hi = _ROW_WORDS[size]
    shape = pick_size(kind, topology, dtype, chunks, int(rng.integers(lo, hi + 1)),
                      smallest=slow)
    return Case(index=index, kind=kind, dtype=dtype, failed=failed, shape=shape,
                chunks=chunks, size=size_class(kind, shape),
                data_seed=int(rng.integers(1, 1 << 31)))


def plan(seed):
    """``(kind, dtype, failed)`` of every case of ``seed``, whatever the simulator (module
    docstring): the names of its cases."""
    out = [(kind, dtype, None) for _ in range(ROUNDS) for kind in gc.KINDS
           for dtype in gc.DTYPES]
    if build(seed).shape == "2x2":
        out += [(kind, gc.DTYPES[(k + seed + r) % 2], (k + seed + 2 * r) % 4)
                for r in range(ROUNDS) for k, kind in enumerate(gc.KINDS)]
    return out


def slow_indices(seed):
    """The cases of :func:`plan` a slow simulator runs: one per kind (float32 or int32 by
    turns) and the first failed-chip case, if the seed has any."""
    out = [2 * k + (k + seed) % 2 for k in range(len(gc.KINDS))]
    regular = ROUNDS * len(gc.KINDS) * len(gc.DTYPES)
    return out + [regular] if len(plan(seed)) > regular else out


def case(seed, index, backend="verilator"):
    """Case ``index`` of ``seed``'s :func:`plan` on ``backend``: a :class:`Case`, or None
    when a slow simulator skips it."""
    if backend != "verilator" and index not in slow_indices(seed):
        return None
    kind, dtype, failed = plan(seed)[index]
    return _case(seed, build(seed, backend), index, kind, dtype, failed, backend)


def cases(seed, backend="verilator"):
    """Every :class:`Case` ``seed`` runs on ``backend``."""
    found = (case(seed, index, backend) for index in range(len(plan(seed))))
    return [c for c in found if c is not None]


def inputs_of(case):
    """A case's inputs, uint32 bit patterns (float32 with ~15% :data:`SPECIALS`)."""
    rng = np.random.default_rng([case.data_seed, 0xDA7A])
    if case.dtype == "int32":
        return rng.integers(0, 1 << 32, size=case.shape, dtype=np.uint64).astype(np.uint32)
    values = (rng.standard_normal(case.shape) * 2.0 ** rng.integers(-20, 20, case.shape)) \
        .astype(np.float32).view(np.uint32)
    pick = rng.random(case.shape) < 0.15
    values[pick] = rng.choice(SPECIALS, size=int(pick.sum()))
    return values
