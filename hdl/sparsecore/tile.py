"""The SparseCore tile: dedup, gather, combine or update, and flush, around an HBM model."""

from amaranth.hdl import Const, MemoryData, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.logic import any_of
from ..lib.params import check_int, check_numerics
from ..lib.memory_port import WORD_BITS, MemoryPortSignature
from ..memory.hbm import HBM, check_hbm_params
from .bag_walker import BagWalker
from .chunk_buffer import ChunkBuffer
from .combine_ring import CombineRing
from .dedup import Dedup
from .fetch import FetchUnit
from .finish_pipeline import FinishPipeline, check_finish_stages
from .flush import FlushUnit
from .layouts import (COMBINERS, OPTIMIZERS, Combiner, Geometry, Op, Optimizer, chunk_layout,
                      feature_list, id_layout)
from .lookup_sequencer import LookupSequencer
from .rowwise_mean import RowwiseMean
from .update_sequencer import UpdateSequencer

__all__ = ["SparseCoreTile", "STAMPS", "HBM_CHOICES"]

#: Where the tile's table lives: in its own HBM model, or behind its ``hbm`` port (a chip's
#: HBM, shared with the DMA engine).
HBM_CHOICES = ("model", "port")

#: Cycle stamps and counts a run reads back to measure the gather and the combine.
STAMPS = ("gather_first", "gather_last", "gather_lines", "combine_first", "combine_last",
          "combine_slots")
STAMP_BITS = 32


class SparseCoreTile(wiring.Component):
    """One SparseCore tile (SPEC section 4.6) running one batch after reset.

    A batch is a ``lookup`` or an ``update`` (``op``) of CSR input:

    1. **Load.** ``ids`` (id and weight, flat order) and ``ends`` (``offsets[1:]``)
       stream through the :class:`~.bag_walker.BagWalker` into the
       :class:`~.dedup.Dedup` unit, one id a cycle; ``grads`` (update: bag ``b``'s
       gradient as ``chunks`` beats) fill a :class:`~.chunk_buffer.ChunkBuffer`.
       Meanwhile the :class:`~.fetch.FetchUnit` gathers every new unique row (and,
       for Adagrad, its accumulators) from the HBM into Spmem, one read per row line,
       many in flight.
    2. If an id was out of range or the unique ids overflowed, the tile stops here:
       no output, no write (``bad``/``overflow`` and their positions say why).
    3. **Combine.** The :class:`~.lookup_sequencer.LookupSequencer` (bags in order)
       or the :class:`~.update_sequencer.UpdateSequencer` (unique rows in
       first-occurrence order, each row's occurrences in order) feeds the
       :class:`~.combine_ring.CombineRing`, whose sums the
       :class:`~.finish_pipeline.FinishPipeline` divides (lookup; to ``out``) or
       turns into new rows and accumulators (update; through the
       :class:`~.flush.FlushUnit` to the HBM). Rowwise Adagrad's rows pass the
       :class:`~.rowwise_mean.RowwiseMean` on the way, which gives each its mean
       square gradient.

    Every value follows golden.sparsecore's documented order, so results do not
    depend on HBM latency, jitter or stream gaps; only the cycles do.

    Parameters
    ----------
    rows, row_words, words_per_cycle, max_ids, max_bags : int
        The :class:`~.layouts.Geometry` (defaults 64 rows of 8 words, 8-word HBM lines,
        256 ids, 64 bags).
    max_unique : int, optional
        Unique ids a batch may hold (Spmem rows); default ``min(max_ids, rows)``.
    read_latency, jitter, max_outstanding : int
        The HBM model's (:class:`~hdl.memory.hbm.HBM`); ``max_outstanding`` defaults to
        ``words_per_cycle * (read_latency + jitter)``, enough to stream at full bandwidth.
        Not used with ``hbm="port"``.
    hbm : "model" or "port"
        ``"model"`` (the default): the tile owns an HBM model, loaded through
        :attr:`hbm_words`. ``"port"``: no model; the tile's table and state regions (the
        same line addresses) are reached through the ``hbm`` port, whose memory holds them
        (a chip's HBM, shared with its DMA engine: the chip adds a base address). The
        values do not change, only the cycles; ``seed`` is then unused.
    numerics : "tpu" or "ieee"
    combiners, optimizers : str
        The features built, comma-separated (default ``"sum,mean,sqrtn"`` and
        ``"sgd,adagrad"``; ``"rowwise_adagrad"`` adds a
        :class:`~.rowwise_mean.RowwiseMean`); a smaller tile leaves out the scVPU's
        dividers, square roots or update arithmetic (:class:`~.finish_pipeline.FinishPipeline`). A batch asking
        for a feature left out sets ``unsupported`` and stops after loading.
    add_stages, sqrt_stages, div_stages : int
        Latencies of the scVPU's adders (the combine ring uses at most ``chunks``),
        square roots and dividers.

    Ports
    -----
    ids : In(stream.Signature(id_layout))
        ``n_ids`` beats: id (two's complement) and weight (fp32; 1.0 for an
        unweighted lookup; ignored by an update).
    ends : In(stream.Signature(range(max_ids + 1)))
        ``n_bags`` beats, non-decreasing, the last equal to ``n_ids``.
    grads : In(stream.Signature(chunk_layout))
        Update: ``n_bags * chunks`` beats, bag by bag. Lookup: none.
    out : Out(stream.Signature(chunk_layout))
        Lookup: ``n_bags * chunks`` beats, bag by bag.
    op, combiner, optimizer : In(Op), In(Combiner), In(Optimizer)
        The batch's operation, combiner and optimizer (:mod:`.layouts`); held for the
        batch, like every input.
    lr : In(32)
        Learning rate (fp32 pattern).
    columns : In(range(row_words + 1))
        The table's columns ``D`` (1 to ``row_words``): rowwise Adagrad divides a row's
        sum of squares by it; other batches ignore it.
    n_rows, n_ids, n_bags : In
        Table rows in use (ids must be below it), ids and bags in the batch.
    seed : In(32)
        HBM jitter seed, loaded until the first input beat is taken.
    hbm : Out(MemoryPortSignature(addr_width=hbm_addr_width, words=words_per_cycle))
        With ``hbm="port"``: the table and state regions' memory, read (the gather) while
        loading and written (the flush) while combining, never both at once.
    wipe, wiped : In(1), Out(1), with ``hbm="port"``
        For a batch after the first (the tile reset between batches): while ``wipe`` is
        high the dedup map's first ``n_rows`` entries are cleared, one a cycle, and then
        ``wiped`` rises; offer no input before it.
    finished : Out(1)
        The batch is over: every output beat sent and every write accepted.
    busy : Out(1)
        Progress this cycle that no stream shows (an HBM request or response, a term
        or a sum moving), for a whole run's watchdog.
    bad, bad_position, bad_count, overflow, overflow_position, unique : Out
        The dedup unit's (:class:`~.dedup.Dedup`).
    unsupported : Out(1)
        The batch's op, combiner or optimizer is not built (or not a valid code).
    hbm_reads : Out
        Table rows read from HBM: one per unique id.
    gather_first, gather_last, gather_lines, combine_first, combine_last, \
combine_slots : Out(32)
        Cycle stamps from reset: the first and latest HBM read accepted and their
        number; the first and latest slot the combine ring took, and their number.

    Attributes
    ----------
    hbm_words : MemoryData or None
        The HBM model's storage: the table (line ``id * lines_per_row + j`` is words
        ``j * words_per_cycle ...`` of row ``id``) then the state region. None with
        ``hbm="port"``.
    memory_images : dict
        ``{"hbm": (hbm_words, "hbm.words")}`` (empty with ``hbm="port"``).
    """

    def __init__(self, *, rows=64, row_words=8, words_per_cycle=8, max_ids=256, max_bags=64,
                 max_unique=None, read_latency=4, jitter=0, max_outstanding=None,
                 numerics="tpu", combiners="sum,mean,sqrtn", optimizers="sgd,adagrad",
                 add_stages=2, sqrt_stages=14, div_stages=16, hbm="model"):
        check_numerics(numerics)
        if hbm not in HBM_CHOICES:
            raise ValueError(f"hbm must be one of {', '.join(map(repr, HBM_CHOICES))}, "
                             f"not {hbm!r}")
        self.shared_hbm = hbm == "port"
        self.combiners = feature_list("combiners", combiners, COMBINERS)
        self.optimizers = feature_list("optimizers", optimizers, OPTIMIZERS)
        check_int("max_ids", max_ids, least=1)
        check_int("rows", rows, least=1)
        if max_unique is None:
            max_unique = min(max_ids, rows)
        self.geometry = g = Geometry(rows=rows, row_words=row_words,
                                     words_per_cycle=words_per_cycle, max_ids=max_ids,
                                     max_bags=max_bags, max_unique=max_unique)
        check_int("read_latency", read_latency, least=1)
        check_int("jitter", jitter, least=0)
        if max_outstanding is None:
            max_outstanding = words_per_cycle * (read_latency + jitter)
        # The parts are built in elaborate; what they would refuse is refused here, at once.
        # (The ring's stages are checked with the finish pipeline's, the same or wider.)
        self.hbm_params = dict(size=g.hbm_size, words_per_cycle=words_per_cycle,
                               read_latency=read_latency, max_outstanding=max_outstanding,
                               jitter=jitter)
        check_hbm_params(**self.hbm_params)
        self.numerics = numerics
        self.stages = dict(add_stages=add_stages, sqrt_stages=sqrt_stages,
                           div_stages=div_stages)
        check_finish_stages(**self.stages)
        # The table's storage, kept from here so runs load and read it before elaboration.
        self.hbm_words = None if self.shared_hbm else MemoryData(
            shape=WORD_BITS * words_per_cycle, depth=g.hbm_size // words_per_cycle, init=[])
        # What a whole run may load and read back (sim.blocks.memory_images).
        self.memory_images = {} if self.shared_hbm else {"hbm": (self.hbm_words, "hbm.words")}
        port = {"hbm": Out(MemoryPortSignature(addr_width=g.hbm_addr_width,
                                               words=words_per_cycle)),
                "wipe": In(1), "wiped": Out(1)} if self.shared_hbm else {}
        super().__init__({
            **port,
            "ids": In(stream.Signature(id_layout)),
            "ends": In(stream.Signature(range(max_ids + 1))),
            "grads": In(stream.Signature(chunk_layout)),
            "out": Out(stream.Signature(chunk_layout)),
            "op": In(Op), "combiner": In(Combiner), "optimizer": In(Optimizer), "lr": In(32),
            "columns": In(range(g.row_words + 1)),
            "n_rows": In(range(rows + 1)), "n_ids": In(range(max_ids + 1)),
            "n_bags": In(range(max_bags + 1)), "seed": In(32),
            "finished": Out(1), "busy": Out(1), "unsupported": Out(1),
            "bad": Out(1), "bad_position": Out(g.pos_shape),
            "bad_count": Out(range(max_ids + 1)),
            "overflow": Out(1), "overflow_position": Out(g.pos_shape),
            "unique": Out(range(max_unique + 1)),
            "hbm_reads": Out(range(max_unique + 1)),
            **{name: Out(STAMP_BITS) for name in STAMPS},
        })

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        if self.shared_hbm:
            hbm = None
        else:
            m.submodules.hbm = hbm = HBM(**self.hbm_params, words=self.hbm_words)
        m.submodules.walker = walker = BagWalker(geometry=g)
        m.submodules.dedup = dedup = Dedup(geometry=g, wipe=self.shared_hbm)
        if self.shared_hbm:
            row = Signal(range(g.rows + 1))
            m.d.comb += [self.wiped.eq(row >= self.n_rows),
                         dedup.wipe.eq(self.wipe & ~self.wiped), dedup.wipe_row.eq(row)]
            with m.If(dedup.wipe):
                m.d.sync += row.eq(row + 1)
        m.submodules.fetch = fetch = FetchUnit(geometry=g)
        m.submodules.grads_buffer = grads_buffer = ChunkBuffer(depth=g.max_bags * g.chunks)
        m.submodules.lookup_seq = lseq = LookupSequencer(geometry=g)
        m.submodules.update_seq = useq = UpdateSequencer(geometry=g)
        m.submodules.ring = ring = CombineRing(
            geometry=g, numerics=self.numerics, add_stages=self.stages["add_stages"],
            den_lane=bool({"mean", "sqrtn"} & set(self.combiners)))
        m.submodules.finish = finish = FinishPipeline(
            geometry=g, numerics=self.numerics, combiners=self.combiners,
            optimizers=self.optimizers, **self.stages)
        m.submodules.flush = flush = FlushUnit(geometry=g)
        update = self.op == Op.UPDATE
        stateful = update & self.optimizer.as_value().any()       # either Adagrad
        built_combiner = any_of([_equals(self.combiner, Combiner[c.upper()])
                                 for c in self.combiners])
        built_optimizer = any_of([_equals(self.optimizer, Optimizer[o.upper()])
                                  for o in self.optimizers])
        m.d.comb += self.unsupported.eq(~Mux(update, built_optimizer, built_combiner))

        # Load: ids and ends through the walker into dedup; gradients into their buffer.
        wiring.connect(m, wiring.flipped(self.ids), walker.ids)
        wiring.connect(m, wiring.flipped(self.ends), walker.ends)
        wiring.connect(m, walker.tagged, dedup.tagged)
        wiring.connect(m, wiring.flipped(self.grads), grads_buffer.fill)
        ids_done = Signal()
        m.d.comb += [
            dedup.n_rows.eq(self.n_rows),
            ids_done.eq((walker.ids_taken == self.n_ids) & ~dedup.pending),
            fetch.unique.eq(dedup.unique), fetch.ids_done.eq(ids_done),
            fetch.with_state.eq(stateful), flush.with_state.eq(stateful),
        ]
        wiring.connect(m, dedup.uniq_fetch, fetch.uniq_read)

        # Combine: one sequencer or the other feeds the ring.
        wiring.connect(m, walker.ends_read, lseq.ends_read)
        wiring.connect(m, dedup.uniq_seq, useq.uniq_read)
        wiring.connect(m, dedup.tail_read, useq.tail_read)
        wiring.connect(m, dedup.next_read, useq.next_read)
        wiring.connect(m, dedup.occ_read, ring.occ_read)
        wiring.connect(m, fetch.rows_ring, ring.rows_read)
        wiring.connect(m, grads_buffer.read, ring.grads_read)
        wiring.connect(m, fetch.rows_post, finish.rows_read)
        wiring.connect(m, fetch.state_post, finish.state_read)
        m.d.comb += [
            lseq.n_bags.eq(self.n_bags), useq.unique.eq(dedup.unique),
            ring.update.eq(update), ring.sqrtn.eq(self.combiner == Combiner.SQRTN),
            finish.update.eq(update), finish.optimizer.eq(self.optimizer),
            finish.combiner.eq(self.combiner), finish.lr.eq(self.lr),
        ]
        self._records(m, ring, finish, rowwise=update & (self.optimizer ==
                                                         Optimizer.ROWWISE_ADAGRAD))
        seq_slots = Mux(update, useq.slots.payload.as_value(), lseq.slots.payload.as_value())
        m.d.comb += [
            ring.slots.valid.eq(Mux(update, useq.slots.valid, lseq.slots.valid)),
            ring.slots.payload.eq(seq_slots),
            useq.slots.ready.eq(ring.slots.ready & update),
            lseq.slots.ready.eq(ring.slots.ready & ~update),
            ring.drain.eq(Mux(update, useq.done, lseq.done)),
            # Results: the output stream (lookup) or the flush (update).
            self.out.valid.eq(finish.results.valid & ~update),
            self.out.payload.eq(finish.results.payload.row),
            flush.results.valid.eq(finish.results.valid & update),
            flush.results.payload.eq(finish.results.payload),
            finish.results.ready.eq(Mux(update, flush.results.ready, self.out.ready)),
        ]

        # The HBM port: the fetch unit's while loading, the flush unit's after. (Muxes, not a
        # conditional connect: an event simulator would leave a process whose inputs never
        # change, such as a constant ready, undriven from time 0.)
        combining = Signal()
        port = self.hbm if hbm is None else hbm.port
        m.d.comb += [
            port.req.valid.eq(Mux(combining, flush.hbm.req.valid, fetch.hbm.req.valid)),
            port.req.payload.eq(Mux(combining, flush.hbm.req.payload.as_value(),
                                    fetch.hbm.req.payload.as_value())),
            port.resp.ready.eq(Mux(combining, flush.hbm.resp.ready, fetch.hbm.resp.ready)),
        ]
        for unit, selected in ((fetch, ~combining), (flush, combining)):
            m.d.comb += [unit.hbm.req.ready.eq(port.req.ready & selected),
                         unit.hbm.resp.valid.eq(port.resp.valid & selected),
                         unit.hbm.resp.payload.eq(port.resp.payload)]

        loaded = Signal()
        m.d.comb += loaded.eq(ids_done & (walker.bags_taken == self.n_bags) & fetch.done
                              & (~update | (grads_buffer.filled == self.n_bags * g.chunks)))
        # Control: loading, then combining (unless an error stopped the batch), then finished.
        with m.If(~combining & ~self.finished & loaded):
            with m.If(dedup.bad | dedup.overflow | self.unsupported):
                m.d.sync += self.finished.eq(1)
            with m.Else():
                m.d.sync += combining.eq(1)
        between = m.submodules.rowwise.active if "rowwise_adagrad" in self.optimizers \
            else Const(0, 1)
        with m.If(combining & ring.drain & ~ring.active & ~between & ~finish.active):
            m.d.sync += [combining.eq(0), self.finished.eq(1)]
        m.d.comb += [lseq.go.eq(combining & ~update), useq.go.eq(combining & update)]

        # The jitter sequence starts with the first input beat, so a run's jitter depends
        # only on the seed and the cycles since then.
        running = Signal()
        inputs_moved = Signal()
        m.d.comb += inputs_moved.eq((self.ids.valid & self.ids.ready)
                                    | (self.ends.valid & self.ends.ready)
                                    | (self.grads.valid & self.grads.ready))
        with m.If(inputs_moved):
            m.d.sync += running.eq(1)
        if hbm is not None:
            m.d.comb += [hbm.seed.eq(self.seed), hbm.start.eq(running)]

        fired = [port.req.valid & port.req.ready,
                 port.resp.valid & port.resp.ready,
                 ring.taking, ring.records.valid & ring.records.ready,
                 finish.results.valid & finish.results.ready, dedup.pending]
        m.d.comb += self.busy.eq(any_of(fired))
        m.d.comb += [
            self.bad.eq(dedup.bad), self.bad_position.eq(dedup.bad_position),
            self.bad_count.eq(dedup.bad_count), self.overflow.eq(dedup.overflow),
            self.overflow_position.eq(dedup.overflow_position),
            self.unique.eq(dedup.unique), self.hbm_reads.eq(fetch.hbm_reads),
        ]
        self._stamp(m, fetch.hbm.req.valid & fetch.hbm.req.ready & ~combining,
                    ring.slots.valid & ring.slots.ready)
        return m

    def _records(self, m, ring, finish, *, rowwise):
        """The ring's records to the finish pipeline, through a
        :class:`~.rowwise_mean.RowwiseMean` when the batch is rowwise Adagrad's."""
        if "rowwise_adagrad" not in self.optimizers:
            wiring.connect(m, ring.records, finish.records)
            return
        m.submodules.rowwise = mean = RowwiseMean(
            geometry=self.geometry, numerics=self.numerics,
            add_stages=self.stages["add_stages"], div_stages=self.stages["div_stages"])
        m.d.comb += [
            mean.columns.eq(self.columns),
            mean.records.valid.eq(ring.records.valid & rowwise),
            mean.records.payload.eq(ring.records.payload),
            mean.out.ready.eq(finish.records.ready & rowwise),
            finish.records.valid.eq(Mux(rowwise, mean.out.valid, ring.records.valid)),
            finish.records.payload.eq(Mux(rowwise, mean.out.payload.as_value(),
                                          ring.records.payload.as_value())),
            ring.records.ready.eq(Mux(rowwise, mean.records.ready, finish.records.ready)),
        ]

    def _stamp(self, m, gather, combine):
        now = Signal(STAMP_BITS)
        m.d.sync += now.eq(now + 1)
        for event, first, last, count in (
                (gather, self.gather_first, self.gather_last, self.gather_lines),
                (combine, self.combine_first, self.combine_last, self.combine_slots)):
            with m.If(event):
                m.d.sync += [last.eq(now), count.eq(count + 1)]
                with m.If(~count.any()):
                    m.d.sync += first.eq(now)


def _equals(view, member):
    # `value == 0` would export as a logical not of a vector, which lint flags.
    return view == member if member.value else ~view.as_value().any()
