"""Random embedding steps for the ``system_embedding`` regression: one system build per
seed, many steps on it.

A seed's **build** (one ``sim.system`` Verilator model of chips with a SparseCore) is its
topology shape and its numerics mode; every other chip parameter is :func:`build_chip`'s,
fixed (the SparseCore's sizes and combiners and optimizers included), and every case is
sized so that its plan fits them (:func:`fits`), since a plan that needs more grows the
chips and makes another build (SPEC section 5: one build per configuration). The build
is dealt by seed, so that seeds 1 to 4 have every shape:

========  ==================  ========  =================================
seed      shape               numerics  routers (:data:`ROUTERS`)
========  ==================  ========  =================================
1         2x2                 tpu       dimension order
2         1x4                 ieee      dimension order
3         2x2x2               tpu       adaptive, speed-up 4
4         2x2x4, twisted      ieee      adaptive
========  ==================  ========  =================================

and from seed 5 on the round repeats with the numerics flipped every round. The 2x2x2
has the routers of ``tpu-rtl bench embedding`` (adaptive, each of the 4 VCs its own
switch input), so that the regression checks the configuration the benchmark measures.

A seed's **cases** (:func:`plan`, :func:`case`) share its build: :data:`CASES` steps, and on
a 2x2 build :data:`FAILED_CASES` more with one chip failed (each chip in turn; a failed chip
is only routing tables and the ``alive`` mask streamed in). A case's choices are dealt from
its index and seed so that a handful of seeds reach every bin: combiner and weights, the
backward (forward only, or ``sgd``/``adagrad``/``rowwise_adagrad`` in mode
``exact``/``prereduced``), the Zipf exponent of the ids (:data:`ALPHAS`), the table's rows
and width classes (:data:`ROW_CLASSES`, :data:`WIDTHS`), the capacity (none, the tightest
that passes, or one below it, which must raise ``CapacityOverflow`` naming the pair on both
sides before anything runs), and an edge (an empty bag, a bag of one ``-0.0`` row, an id hot
on every chip, or none). The values (table, state, weights, gradients, about 5% special:
NaN, infinities, subnormals, signed zeros) and the bag lengths are drawn from
``numpy.random.default_rng([seed, index, ...])``.

The timing differs between builds: the link latencies (:data:`LINKS`), and the HBM's read
latency, fixed or with up to :data:`JITTER` cycles of jitter (``hdl.tensorcore.
TensorCoreSystem``'s ``jitter``, the DMA engine's and the SparseCore's reads alike),
seeded per case by its data seed. The results must not depend on either.
"""

from dataclasses import dataclass

import numpy as np

from golden import embedding as ge
from golden import topology as topo
from golden.sparsecore import COMBINERS
from sim.backends.whole_run import memory_depth
from sim.kernels.embedding import plan_embedding
from sim.system import EMBEDDING_CHIP
from verif.suites.sparsecore.stimulus import fp32_values, zipf_ids

__all__ = ["SHAPES", "DEAL", "LINKS", "JITTER", "ROUTERS", "CASES", "FAILED_CASES", "ALPHAS",
           "ROW_CLASSES", "WIDTHS", "BACKWARDS", "CAPACITIES", "EDGES", "TILE", "Build", "Case",
           "build", "build_chip", "topology_of", "plan", "case", "cases", "inputs_of", "fits"]

#: Topology shapes of the builds: (name, shape, twisted).
SHAPES = (("2x2", "2x2", False), ("1x4", "1x4", False), ("2x2x2", "2x2x2", False),
          ("2x2x4 twisted", "2x2x4", True))
#: (shape name, numerics) by ``(seed - 1) % 4``.
DEAL = (("2x2", "tpu"), ("1x4", "ieee"), ("2x2x2", "tpu"), ("2x2x4 twisted", "ieee"))
#: Link latency of each shape's build (cycles): the 1x4 and the 3-D ones take longer links.
LINKS = {"2x2": 2, "1x4": 5, "2x2x2": 3, "2x2x4 twisted": 2}
#: HBM read latency jitter of each shape's build (cycles, on top of the chip's
#: ``read_latency``): seed 1's 2x2 and seed 4's twisted 2x2x4 have it, so that seeds 1 to
#: 4 reach both bins; the 1x4 and the 2x2x2 keep the fixed latency.
JITTER = {"2x2": 8, "1x4": 0, "2x2x2": 0, "2x2x4 twisted": 8}
#: Routers of each shape's build: (routing, input speed-up), with ``sim.system``'s
#: default VCs and buffers for the routing.
ROUTERS = {"2x2": ("dor", 1), "1x4": ("dor", 1), "2x2x2": ("adaptive", 4),
           "2x2x4 twisted": ("adaptive", 1)}
#: Steps a seed runs on its topology, and more with a chip failed on a 2x2 build.
CASES = 10
FAILED_CASES = 4
#: Zipf exponents of the ids.
ALPHAS = (1.05, 1.5, 3.0)
#: Table rows per live chip, by class: [lo, hi].
ROW_CLASSES = {"few": (1, 2), "some": (3, 8), "many": (9, 16)}
#: Table widths D by class: [lo, hi] (the tile's rows are 16 words).
WIDTHS = {"narrow": (1, 7), "line": (8, 8), "wide": (9, 16)}
#: The backward of a step: forward only, or optimizer.mode.
BACKWARDS = ("forward", "sgd.exact", "sgd.prereduced", "adagrad.exact",
             "adagrad.prereduced", "rowwise_adagrad.exact", "rowwise_adagrad.prereduced")
#: Capacity: none, the tightest that passes, one below it (an overflow).
CAPACITIES = ("none", "tight", "overflow")
#: Edge cases a step carries.
EDGES = ("none", "empty_bag", "negative_zero_bag", "hot_everywhere")
#: The SparseCore every build has (so that every step of a build shares it).
TILE = dict(rows=64, row_words=16, max_ids=128, max_bags=64, combiners="sum,mean,sqrtn",
            optimizers="sgd,adagrad,rowwise_adagrad", spmem_rows=64)


def build_chip(numerics, jitter=0):
    """The chips of a build: ``sim.system.EMBEDDING_CHIP`` with fixed memories and
    SparseCore, and ``jitter`` cycles of HBM jitter (none: a chip without the jitter's
    generator, as ``EMBEDDING_CHIP``)."""
    return dict(EMBEDDING_CHIP, numerics=numerics, hbm_words=8192, smem_words=8192,
                imem_depth=2048, sparsecore=dict(TILE), **({"jitter": jitter} if jitter else {}))


@dataclass(frozen=True)
class Build:
    """One seed's system build: the ``shape`` name (:data:`SHAPES`) and ``numerics``."""
    shape: str
    numerics: str

    @property
    def chip(self):
        return build_chip(self.numerics, self.jitter)

    @property
    def link_latency(self):
        return LINKS[self.shape]

    @property
    def jitter(self):
        return JITTER[self.shape]

    @property
    def routing(self):
        return ROUTERS[self.shape][0]

    @property
    def speedup(self):
        return ROUTERS[self.shape][1]

    @property
    def router(self):
        """The ``router`` coverage bin (``coverage.ROUTER_BINS``)."""
        return self.routing + (f", speed-up {self.speedup}" if self.speedup > 1 else "")

    @property
    def system(self):
        """``sim.system.embedding_step``'s keyword arguments of the build's system."""
        return dict(chip=self.chip, link_latency=self.link_latency, routing=self.routing,
                    speedup=self.speedup)

    def describe(self):
        hbm = f"HBM jitter of up to {self.jitter} cycles" if self.jitter else "fixed HBM latency"
        router = {"dor": "dimension-order", "adaptive": "adaptive"}[self.routing]
        speedup = f" with speed-up {self.speedup}" if self.speedup > 1 else ""
        return (f"{self.shape}, {self.numerics}, {self.link_latency}-cycle links, {hbm}, "
                f"{router} routers{speedup}")


def build(seed, backend="verilator"):
    """The :class:`Build` of ``seed`` (module docstring); other simulators than Verilator
    take the 2x2 only."""
    shape, numerics = DEAL[(seed - 1) % 4]
    if ((seed - 1) // 4) % 2:
        numerics = "ieee" if numerics == "tpu" else "tpu"
    if backend != "verilator":
        shape = "2x2"
    return Build(shape, numerics)


def topology_of(b, failed=None):
    """The ``golden.topology.Topology`` of a case on build ``b``."""
    _, dims, twisted = next(s for s in SHAPES if s[0] == b.shape)
    return topo.torus(dims, twist=twisted, failed=() if failed is None else (failed,))


@dataclass(frozen=True)
class Case:
    """One step of a seed: its dealt choices, its sizes and the seed of its values."""
    index: int
    failed: object
    combiner: str
    weighted: bool
    backward: str
    alpha: float
    rows: str
    width: str
    capacity: str
    edge: str
    num_rows: int
    dim: int
    bags: int
    longest: int
    data_seed: int

    @property
    def name(self):
        where = f".failed{self.failed}" if self.failed is not None else ""
        return f"case{self.index:02d}.{self.combiner}.{self.backward}{where}"

    @property
    def optimizer(self):
        return "sgd" if self.backward == "forward" else self.backward.split(".")[0]

    @property
    def mode(self):
        return "exact" if self.backward == "forward" else self.backward.split(".")[1]

    def describe(self):
        failed = f", chip {self.failed} failed" if self.failed is not None else ""
        return (f"{self.combiner}{' weighted' if self.weighted else ''}, {self.backward}, "
                f"V={self.num_rows} D={self.dim}, {self.bags} bags of up to {self.longest}, "
                f"Zipf({self.alpha}), capacity {self.capacity}, edge {self.edge}{failed}, "
                f"data seed {self.data_seed}")


def plan(seed):
    """The failed chip (or None) of every case of ``seed``: their number and names' order."""
    out = [None] * CASES
    if build(seed).shape == "2x2":
        out += [(k + seed) % 4 for k in range(FAILED_CASES)]
    return out


def _dealt(seed, index, choices):
    return choices[(index + seed) % len(choices)]


def _draw(seed, index, b, failed):
    """The case before its sizes are fitted to the build."""
    rng = np.random.default_rng([seed, index, 0xE3B])
    topology = topology_of(b, failed)
    chips = int(topology.alive.sum())
    rows = _dealt(seed, index, tuple(ROW_CLASSES))
    width = _dealt(seed // 2, index // 3, tuple(WIDTHS))
    lo, hi = ROW_CLASSES[rows]
    wlo, whi = WIDTHS[width]
    return dict(
        index=index, failed=failed,
        combiner=_dealt(seed, index, COMBINERS),
        weighted=bool((index // 3 + seed) % 2),
        backward=_dealt(seed * 3, index, BACKWARDS),
        alpha=_dealt(seed + 1, index // 2, ALPHAS),
        rows=rows, width=width,
        capacity=_dealt(seed, index // 5 + index, CAPACITIES),
        edge=_dealt(seed * 7, index, EDGES),
        num_rows=int(rng.integers(lo * chips, hi * chips + 1)),
        dim=int(rng.integers(wlo, whi + 1)),
        bags=int(rng.integers(2, 9)), longest=int(rng.integers(1, 6)),
        data_seed=int(rng.integers(1, 1 << 31)))


def case(seed, index, backend="verilator"):
    """Case ``index`` of ``seed`` on ``backend``: a :class:`Case` that fits the build
    (its bags halved, then its bag length, until it does)."""
    b = build(seed, backend)
    fields = _draw(seed, index, b, plan(seed)[index] if index < len(plan(seed)) else None)
    while True:
        c = Case(**fields)
        if fits(c, b):
            return c
        if fields["bags"] > 1:
            fields["bags"] //= 2
        elif fields["longest"] > 1:
            fields["longest"] //= 2
        else:
            raise ValueError(f"case {index} of seed {seed} fits the build at no size")


def cases(seed, backend="verilator"):
    """Every :class:`Case` of ``seed``."""
    return [case(seed, index, backend) for index in range(len(plan(seed)))]


def inputs_of(c, b):
    """``(table, indices, offsets, kwargs)`` of case ``c`` on build ``b``: the step's data
    and ``golden.embedding.step``'s keyword arguments (topology, numerics and capacity
    included)."""
    rng = np.random.default_rng([c.data_seed, 0xDA7A])
    topology = topology_of(b, c.failed)
    chips = int(topology.alive.sum())
    V, D = c.num_rows, c.dim
    table = fp32_values(rng, (V, D), special_density=0.05)
    indices, offsets, weights, grads = [], [], [], []
    hot = rng.permutation(V)     # every chip's ids share their hot rows
    for r in range(chips):
        lengths = rng.integers(0, c.longest + 1, c.bags)
        if c.edge == "empty_bag":
            lengths[rng.integers(c.bags)] = 0
        offs = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        ids = zipf_ids(rng, int(offs[-1]), V, c.alpha,
                       rows_by_rank=hot).astype(np.int64)
        if c.edge == "hot_everywhere" and len(ids):
            ids[rng.integers(len(ids))] = V - 1
        indices.append(ids)
        offsets.append(offs)
        weights.append(fp32_values(rng, len(ids), special_density=0.05))
        grads.append(fp32_values(rng, (c.bags, D), special_density=0.05))
    if c.edge == "negative_zero_bag":
        # A bag of one id whose row is all -0.0, on rank 0.
        table[0] = 0x8000_0000
        indices[0] = np.concatenate([[0], indices[0]]).astype(np.int64)
        offsets[0] = np.concatenate([[0], offsets[0] + 1]).astype(np.int64)
        weights[0] = np.concatenate([[0x3F80_0000], weights[0]]).astype(np.uint32)
        grads[0] = np.concatenate([fp32_values(rng, (1, D)), grads[0]])
    kwargs = dict(topology=topology, combiner=c.combiner, numerics=b.numerics,
                  weights=[w.view(np.float32) for w in weights] if c.weighted else None)
    if c.backward != "forward":
        kwargs |= dict(grads=[g.view(np.float32) for g in grads], optimizer=c.optimizer,
                       mode=c.mode, lr=float(rng.choice([0.01, 0.125, -0.5, 2.0])))
        if c.optimizer != "sgd" and rng.random() < 0.5:
            shape = (V,) if c.optimizer == "rowwise_adagrad" else (V, D)
            kwargs["state"] = (fp32_values(rng, shape, special_density=0.05)
                               & np.uint32(0x7FFF_FFFF)).view(np.float32)
    if c.capacity != "none":
        unique = ge.plan(indices, offsets, num_rows=V, n_chips=chips).unique
        tight = max(1, int(unique.max()))
        kwargs["capacity"] = tight if c.capacity == "tight" else max(1, tight - 1)
    return table.view(np.float32), indices, offsets, kwargs


def fits(c, b):
    """Whether case ``c``'s plan fits build ``b``'s chips (no new build)."""
    table, indices, offsets, kwargs = inputs_of(c, b)
    kwargs = dict(kwargs, capacity=None)
    kwargs.pop("numerics")
    chip = b.chip
    try:
        p = plan_embedding(table, indices, offsets, chip=chip, **kwargs)
    except ValueError:
        return False
    # Each line of the step's programs is one bundle (tests/system/test_embedding_step.py
    # checks it), so the lines size the IMEM without assembling.
    longest = max(len(text.splitlines()) for text in p.programs if text is not None)
    return (p.chip["sparsecore"] == chip["sparsecore"]
            and p.chip["hbm_words"] == chip["hbm_words"]
            and p.chip["smem_words"] == chip["smem_words"]
            and memory_depth(longest) <= chip["imem_depth"])
