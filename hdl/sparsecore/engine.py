# amaranth: UnusedElaboratable=no
# (The tile is made here, so a chip can reach its parameters, and used by this component's
# elaborate: if the engine is never elaborated, the warning about it is the one that counts.)
"""A SparseCore tile on a chip's HBM: work items in, the batch's streams read from the HBM,
lookups written back to it, completion added to a sync flag (SPEC section 4.9)."""

from amaranth.hdl import Cat, MemoryData, Module, Mux, ResetInserter, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..lib.memory_port import WORD_BITS, MemoryPortSignature
from ..lib.params import check_int
from ..memory.layouts import FLAG_BITS, flag_add_layout
from ..memory.port_share import PortShare
from .layouts import LANES, ONE, Combiner, Op, Optimizer
from .tile import SparseCoreTile

__all__ = ["SparseCoreEngine", "work_layout", "Status", "STATUSES", "WORK_FIELDS",
           "CONTROL_FIELDS", "control_word"]

#: The fields of a work item, in the order they sit in SMEM (one word each).
WORK_FIELDS = ("control", "lr", "n_rows", "n_ids", "n_bags", "table", "ids", "weights",
               "ends", "grads", "out", "flag")
#: The fields packed in a work item's ``control`` word: name -> (lowest bit, bits).
CONTROL_FIELDS = {"op": (0, 1), "combiner": (1, 2), "optimizer": (3, 2), "weighted": (5, 1),
                  "gather": (6, 1), "columns": (8, 16), "to_spmem": (24, 1),
                  "from_spmem": (25, 1)}


def control_word(**fields):
    """A ``control`` word of :data:`CONTROL_FIELDS` (those not given are 0), as an int;
    ValueError for a field it does not have or a value that does not fit."""
    word = 0
    for name, value in fields.items():
        if name not in CONTROL_FIELDS:
            raise ValueError(f"a control word has no field {name!r}; it has "
                             f"{', '.join(CONTROL_FIELDS)}")
        low, bits = CONTROL_FIELDS[name]
        if not 0 <= int(value) < 1 << bits:
            raise ValueError(f"control field {name} = {value} does not fit {bits} bits")
        word |= int(value) << low
    return word


def work_layout(addr_width):
    """A work item (``WORK_FIELDS``); every address is a line of the chip's HBM.

    ``control`` packs :data:`CONTROL_FIELDS`: op (bit 0), combiner (bits 2..1), optimizer
    (bits 4..3), weighted (bit 5), gather (bit 6: the engine's row copy,
    :class:`SparseCoreEngine`, instead of the tile's op), columns (bits 23..8: the
    table's columns, which rowwise Adagrad's mean divides by; at most ``row_words``), and
    for a gather to_spmem (bit 24: ``out`` is a line of the engine's Spmem) and from_spmem
    (bit 25: ``table`` is).
    ``table``: the first line of the tile's table region (its state region follows it,
    ``SparseCoreTile``'s layout). ``ids``, ``weights``, ``ends``: ``n_ids``, ``n_ids`` and
    ``n_bags`` words (one per id, two's complement; fp32; ``offsets[1:]``) from those lines
    (``weights`` unused unless weighted). ``grads`` (update) and ``out`` (lookup):
    ``n_bags`` rows of ``row_words`` words. ``flag``: the sync flag that gets 1 when the
    batch is over.
    """
    return data.StructLayout({
        "op": Op, "combiner": Combiner, "optimizer": Optimizer, "weighted": 1, "gather": 1,
        "columns": CONTROL_FIELDS["columns"][1], "to_spmem": 1, "from_spmem": 1,
        "lr": unsigned(WORD_BITS), "n_rows": unsigned(WORD_BITS),
        "n_ids": unsigned(WORD_BITS), "n_bags": unsigned(WORD_BITS),
        **{name: unsigned(addr_width) for name in ("table", "ids", "weights", "ends",
                                                    "grads", "out")},
        "flag": unsigned(FLAG_BITS),
    })


class Status:
    """The engine's ``status`` codes after a batch (``STATUSES`` names them)."""
    OK, BAD_ID, OVERFLOW, UNSUPPORTED, TOO_LARGE = range(5)


STATUSES = ("ok", "bad_id", "overflow", "unsupported", "too_large")


class _Reader(wiring.Component):
    """Reads ``count`` words from line ``base`` on, and streams them out in order, keeping
    up to ``depth`` lines requested or buffered."""

    def __init__(self, *, signature, depth):
        self.wpc, self.depth = signature.words, depth
        super().__init__({
            "start": In(1), "base": In(signature.addr_width), "count": In(WORD_BITS),
            "port": Out(signature), "words": Out(stream.Signature(WORD_BITS)),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        wpc = self.wpc
        m.submodules.lines = lines = SyncFIFOBuffered(width=WORD_BITS * wpc, depth=self.depth)
        lines_total = Signal(WORD_BITS)
        issued = Signal(WORD_BITS)
        left = Signal(WORD_BITS)                      # words still to stream out
        held = Signal(range(self.depth + 2))          # lines requested and not yet popped
        word = Signal(range(wpc))
        req, resp = self.port.req, self.port.resp
        fire_req = req.valid & req.ready
        pop = Signal()
        m.d.comb += [
            req.valid.eq((issued < lines_total) & (held < self.depth)),
            req.payload.addr.eq(self.base + issued),
            req.payload.write.eq(0),
            lines.w_data.eq(resp.payload.data),
            lines.w_en.eq(resp.valid),
            resp.ready.eq(lines.w_rdy),
            self.words.valid.eq(lines.r_rdy & left.any()),
            self.words.payload.eq(lines.r_data.word_select(word, WORD_BITS)),
            pop.eq(self.words.valid & self.words.ready & ((word == wpc - 1) | (left == 1))),
            lines.r_en.eq(pop),
            self.idle.eq(~left.any() & (issued == lines_total) & ~held.any()),
        ]
        m.d.sync += held.eq(held + fire_req - pop)
        with m.If(fire_req):
            m.d.sync += issued.eq(issued + 1)
        with m.If(self.words.valid & self.words.ready):
            m.d.sync += [left.eq(left - 1), word.eq(Mux(pop, 0, word + 1))]
        with m.If(self.start):
            m.d.sync += [issued.eq(0), left.eq(self.count), word.eq(0),
                         lines_total.eq((self.count + wpc - 1) // wpc if wpc > 1
                                        else self.count)]
        return m


class SparseCoreEngine(wiring.Component):
    """A :class:`~.tile.SparseCoreTile` (``hbm="port"``) fed from a chip's HBM.

    A work item (:func:`work_layout`) runs one batch: the tile is reset and wipes its dedup
    map's first ``n_rows`` entries (``n_rows`` cycles, since the map keeps the last batch's
    ids); the ids (and
    weights), bag ends and, for an update, the gradients stream from the HBM into the
    tile while its fetch unit gathers the rows from the table region (``table`` on); a
    lookup's rows are written to ``out`` (row b at ``out + b * row_words / wpc``), an
    update's rows and state are flushed to the table region; then ``flag_add`` adds 1 to
    ``flag``. Every HBM access goes through one port (a :class:`~hdl.memory.PortShare` of
    the readers, the tile and the writer), which the chip shares with its DMA engine. The
    values are the tile's, so they equal ``golden.sparsecore`` bit for bit.

    A *gather* item (``gather`` set) leaves the tile alone: for each of the ``n_ids`` ids
    (local rows, as the owner of a sharded table serves them) it reads the row's
    ``row_words`` words from the table region once and writes them, bits unchanged, to
    ``out`` (row k at ``out + k * row_words / wpc``), then adds the number of rows it read
    to ``flag``, so that the flag counts the rows; ``hbm_reads`` says it too. An id at or
    past ``n_rows`` (or negative) stops the copy there: the rows before it are copied and
    counted, nothing from it on, and the status is ``BAD_ID``.

    **Spmem.** With ``spmem_rows``, the engine has a Spmem of that many rows (``row_words``
    words each), which a gather may write (``to_spmem``: ``out`` is its line) or read
    (``from_spmem``: ``table`` is), as TPU v4's SparseCore gathers rows into its Spmem.
    Staging the rows there leaves the HBM port to the gather's reads, a line a cycle,
    instead of one read and one write a line; a second gather ``from_spmem`` then copies
    the staged rows into messages in HBM without reading the table again. An item that
    names a Spmem side and is no gather, or that the engine has no Spmem for, is
    ``UNSUPPORTED``; a gather whose Spmem side runs past the Spmem (``out`` + ``n_ids``
    rows, or ``table`` + ``n_rows`` rows) is ``TOO_LARGE``. Either writes nothing and adds
    1 to the flag.

    A batch the tile refuses (an id out of range, too many unique ids, an operation not
    built) or that does not fit the tile (``n_rows``, ``n_ids``, ``n_bags`` or ``columns``
    too large) writes nothing, sets ``status`` (:class:`Status`) and still adds 1 to the flag, so
    the core waiting on it goes on and reads ``status``.

    Parameters
    ----------
    tile : dict
        The tile's parameters (``words_per_cycle`` must be the chip HBM's line width;
        ``hbm`` is set here).
    addr_width : int
        Bits of a line address of the chip's HBM.
    depth : int
        Lines each reader keeps in flight or buffered, and reads in flight on the port
        (default 8).
    spmem_rows : int
        Rows of the Spmem that gathers may stage rows in (default 0: none).

    Ports
    -----
    work : In(stream.Signature(work_layout(addr_width)))
        Taken while idle. A gather moves a line a cycle once its first reads return: its
        next row's request follows the last line of the one before, and a Spmem read
        returns the next cycle.
    hbm : Out(MemoryPortSignature(addr_width=addr_width, words=words_per_cycle))
    flag_add : Out(stream.Signature(flag_add_layout))
    idle : Out(1)
        No batch running and no flag add pending.
    busy : Out(1)
        A request, response, stream beat or flag add moved, or the tile made progress.
    status : Out(range(5))
        The last batch's :class:`Status`.
    batches, hbm_reads : Out(32)
        Batches run, and table rows the tile (or the gather) read in the last batch.
    """

    def __init__(self, *, tile=None, addr_width, depth=8, spmem_rows=0):
        tile = dict(tile or {})
        if "hbm" in tile:
            raise TypeError("the engine's tile reads through the engine: hbm= is set here")
        self.tile = SparseCoreTile(**tile, hbm="port")
        self.geometry = g = self.tile.geometry
        check_int("addr_width", addr_width, least=g.hbm_addr_width, most=32)
        self.depth = check_int("depth", depth, least=1)
        self.spmem_rows = check_int("spmem_rows", spmem_rows, least=0)
        self.spmem_lines = spmem_rows * (g.row_words // g.words_per_cycle)
        self.spmem = None
        if spmem_rows:
            self.spmem = MemoryData(shape=WORD_BITS * g.words_per_cycle,
                                    depth=self.spmem_lines, init=[])
        self.signature_ = MemoryPortSignature(addr_width=addr_width, words=g.words_per_cycle)
        super().__init__({
            "work": In(stream.Signature(work_layout(addr_width))),
            "hbm": Out(self.signature_),
            "flag_add": Out(stream.Signature(flag_add_layout)),
            "idle": Out(1), "busy": Out(1), "status": Out(range(len(STATUSES))),
            "batches": Out(32), "hbm_reads": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        g, sig, wpc = self.geometry, self.signature_, self.geometry.words_per_cycle
        clear = Signal()
        m.submodules.tile = tile = ResetInserter(clear)(self.tile)
        tile = self.tile
        readers = {name: _Reader(signature=sig, depth=self.depth)
                   for name in ("ids", "weights", "ends", "grads")}
        for name, reader in readers.items():
            m.submodules[f"{name}_reader"] = reader
        m.submodules.share = share = PortShare(signature=sig, initiators=len(readers) + 4,
                                               depth=self.depth)
        for i, reader in enumerate(readers.values()):
            wiring.connect(m, reader.port, share.initiators[i])
        wiring.connect(m, share.memory, wiring.flipped(self.hbm))
        tile_port, out_port = share.initiators[len(readers)], share.initiators[len(readers) + 1]
        copy_in, copy_out = share.initiators[len(readers) + 2], share.initiators[len(readers) + 3]

        work = Signal.like(self.work.payload)
        running = Signal()
        flagging = Signal()
        start = Signal()
        gathering = Signal()                            # a gather item runs
        gather_start = Signal()
        m.d.comb += [self.idle.eq(~running & ~flagging & ~gathering),
                     self.work.ready.eq(self.idle)]
        fits = Signal()
        p = self.work.payload
        m.d.comb += fits.eq((p.n_rows <= g.rows) & (p.n_ids <= g.max_ids)
                            & (p.columns <= g.row_words)
                            & (p.n_bags <= g.max_bags))
        # A Spmem side needs a gather and a Spmem (or the item is unsupported), and must
        # fit it (or the item is too large).
        lines_per_row = g.row_words // wpc
        spmem_named, spmem_built, spmem_fits = Signal(), Signal(), Signal()
        m.d.comb += [
            spmem_named.eq(p.to_spmem | p.from_spmem),
            spmem_built.eq(p.gather & (self.spmem is not None)),
            spmem_fits.eq(
                (~p.to_spmem | (p.out + p.n_ids * lines_per_row <= self.spmem_lines))
                & (~p.from_spmem | (p.table + p.n_rows * lines_per_row <= self.spmem_lines))),
        ]
        refused = Signal()                              # the item ran no batch
        with m.If(self.work.valid & self.work.ready):
            m.d.sync += [work.eq(p), self.status.eq(Status.OK), refused.eq(0)]
            with m.If(spmem_named & ~spmem_built):
                m.d.sync += [flagging.eq(1), refused.eq(1),
                             self.status.eq(Status.UNSUPPORTED)]
            with m.Elif(~spmem_fits):
                m.d.sync += [flagging.eq(1), refused.eq(1), self.status.eq(Status.TOO_LARGE)]
            with m.Elif(p.gather):
                m.d.sync += gathering.eq(1)
                m.d.comb += gather_start.eq(1)
            with m.Elif(fits):
                m.d.sync += running.eq(1)
                m.d.comb += [clear.eq(1), start.eq(1)]
            with m.Else():
                m.d.sync += [flagging.eq(1), refused.eq(1), self.status.eq(Status.TOO_LARGE)]

        # The tile's batch: held inputs from the work item.
        m.d.comb += [tile.op.eq(work.op), tile.combiner.eq(work.combiner),
                     tile.optimizer.eq(work.optimizer), tile.lr.eq(work.lr),
                     tile.n_rows.eq(work.n_rows), tile.n_ids.eq(work.n_ids),
                     tile.n_bags.eq(work.n_bags), tile.columns.eq(work.columns),
                     tile.seed.eq(0)]
        counts = {"ids": p.n_ids, "weights": Mux(p.weighted, p.n_ids, 0), "ends": p.n_bags,
                  "grads": Mux(p.op == Op.UPDATE, p.n_bags * g.row_words, 0)}
        for name, reader in readers.items():
            m.d.comb += [reader.start.eq(start | (gather_start & (name == "ids"))),
                         reader.base.eq(getattr(p, name)),
                         reader.count.eq(counts[name])]

        # ids and weights zip into the tile's id beats; an unweighted weight is 1.0.
        ids, weights = readers["ids"].words, readers["weights"].words
        take_id = Signal()                              # the gather takes an id
        # After the reset, the tile wipes its dedup map before it takes an input.
        m.d.comb += tile.wipe.eq(running)
        feeding = running & tile.wiped
        both = ids.valid & (weights.valid | ~work.weighted)
        m.d.comb += [
            tile.ids.valid.eq(feeding & both),
            tile.ids.payload.id.eq(ids.payload),
            tile.ids.payload.weight.eq(Mux(work.weighted, weights.payload, ONE)),
            ids.ready.eq((feeding & tile.ids.ready & both) | take_id),
            weights.ready.eq(feeding & tile.ids.ready & both & work.weighted),
            tile.ends.valid.eq(feeding & readers["ends"].words.valid),
            tile.ends.payload.eq(readers["ends"].words.payload),
            readers["ends"].words.ready.eq(feeding & tile.ends.ready),
        ]
        # Gradient words gather into chunks of LANES.
        chunk = Signal(data.ArrayLayout(WORD_BITS, LANES))
        filled = Signal(range(LANES + 1))
        grads = readers["grads"].words
        m.d.comb += [tile.grads.valid.eq(feeding & (filled == LANES)),
                     tile.grads.payload.eq(chunk),
                     grads.ready.eq(feeding & (filled < LANES))]
        with m.If(grads.valid & grads.ready):
            m.d.sync += [chunk[LANES - 1].eq(grads.payload),
                         *(chunk[j].eq(chunk[j + 1]) for j in range(LANES - 1)),
                         filled.eq(filled + 1)]
        with m.If(tile.grads.valid & tile.grads.ready):
            m.d.sync += filled.eq(0)

        # The tile's table accesses, moved to the table region.
        m.d.comb += [
            tile_port.req.valid.eq(tile.hbm.req.valid),
            tile_port.req.payload.addr.eq(work.table + tile.hbm.req.payload.addr),
            tile_port.req.payload.write.eq(tile.hbm.req.payload.write),
            tile_port.req.payload.data.eq(tile.hbm.req.payload.data),
            tile_port.req.payload.mask.eq(tile.hbm.req.payload.mask),
            tile.hbm.req.ready.eq(tile_port.req.ready),
            tile.hbm.resp.valid.eq(tile_port.resp.valid),
            tile.hbm.resp.payload.eq(tile_port.resp.payload),
            tile_port.resp.ready.eq(tile.hbm.resp.ready),
        ]

        # Lookup rows: each chunk of LANES words as LANES / wpc line writes.
        lines_per_chunk = LANES // wpc
        part = Signal(range(lines_per_chunk))
        written = Signal(WORD_BITS)                     # lines written so far
        out = tile.out
        m.d.comb += [
            out_port.req.valid.eq(out.valid),
            out_port.req.payload.addr.eq(work.out + written),
            out_port.req.payload.write.eq(1),
            out_port.req.payload.data.eq(
                out.payload.as_value().word_select(part, WORD_BITS * wpc)),
            out_port.req.payload.mask.eq(-1),
            out.ready.eq(out_port.req.ready & (part == lines_per_chunk - 1)),
            out_port.resp.ready.eq(1),
        ]
        with m.If(out_port.req.valid & out_port.req.ready):
            m.d.sync += [written.eq(written + 1),
                         part.eq(Mux(part == lines_per_chunk - 1, 0, part + 1))]
        with m.If(start):
            m.d.sync += [written.eq(0), part.eq(0), filled.eq(0)]

        # The gather: each id's row read once from the table region (HBM, or the Spmem with
        # from_spmem) into a FIFO of lines, and written from there to ``out`` (HBM, or the
        # Spmem with to_spmem), bits unchanged.
        m.submodules.copy_lines = lines = SyncFIFOBuffered(width=WORD_BITS * wpc,
                                                           depth=self.depth)
        have_row = Signal()
        row_base = Signal(sig.addr_width)
        line = Signal(range(lines_per_row))
        pending = Signal(range(self.depth + 2))         # lines requested, not yet written
        copied = Signal(WORD_BITS)                      # lines written so far
        rows_read = Signal(WORD_BITS)
        bad = Signal()
        request = Signal()                              # a line of the row is read
        last_line = line == lines_per_row - 1
        asking = have_row & (pending < self.depth)
        m.d.comb += [
            request.eq(asking & (work.from_spmem | copy_in.req.ready)),
            # The next row's id is taken with this row's last line, so rows follow
            # back to back.
            take_id.eq(gathering & (~have_row | (request & last_line)) & ids.valid),
        ]
        with m.If(request):
            m.d.sync += line.eq(Mux(last_line, 0, line + 1))
            with m.If(last_line):
                m.d.sync += have_row.eq(0)
        with m.If(take_id):
            with m.If(bad | (ids.payload >= work.n_rows)):
                m.d.sync += bad.eq(1)
            with m.Else():
                m.d.sync += [have_row.eq(1), line.eq(0), rows_read.eq(rows_read + 1),
                             row_base.eq(work.table + ids.payload * lines_per_row)]
        pop_copy = Signal()
        m.d.comb += [
            copy_in.req.valid.eq(asking & ~work.from_spmem),
            copy_in.req.payload.addr.eq(row_base + line),
            copy_in.req.payload.write.eq(0),
            lines.w_data.eq(copy_in.resp.payload.data),
            lines.w_en.eq(copy_in.resp.valid),
            copy_in.resp.ready.eq(lines.w_rdy),
            pop_copy.eq(lines.r_rdy & (work.to_spmem | copy_out.req.ready)),
            copy_out.req.valid.eq(lines.r_rdy & ~work.to_spmem),
            copy_out.req.payload.addr.eq(work.out + copied),
            copy_out.req.payload.write.eq(1),
            copy_out.req.payload.data.eq(lines.r_data),
            copy_out.req.payload.mask.eq(-1),
            lines.r_en.eq(pop_copy),
            copy_out.resp.ready.eq(1),
        ]
        if self.spmem is not None:
            m.submodules.spmem = spmem = Memory(data=self.spmem)
            spmem_read, spmem_write = spmem.read_port(), spmem.write_port()
            # A Spmem read returns the next cycle, into the FIFO room ``pending`` keeps.
            returned = Signal()
            m.d.sync += returned.eq(request & work.from_spmem)
            m.d.comb += spmem_read.addr.eq(row_base + line)
            with m.If(returned):
                m.d.comb += [lines.w_data.eq(spmem_read.data), lines.w_en.eq(1)]
            m.d.comb += [spmem_write.addr.eq(work.out + copied),
                         spmem_write.data.eq(lines.r_data),
                         spmem_write.en.eq(pop_copy & work.to_spmem)]
        m.d.sync += pending.eq(pending + request - pop_copy)
        with m.If(pop_copy):
            m.d.sync += copied.eq(copied + 1)
        with m.If(gather_start):
            m.d.sync += [have_row.eq(0), pending.eq(0), copied.eq(0), rows_read.eq(0),
                         bad.eq(0)]
        with m.If(gathering & ~gather_start & readers["ids"].idle & ~have_row
                  & ~pending.any()):
            m.d.sync += [gathering.eq(0), flagging.eq(1), self.hbm_reads.eq(rows_read)]
            with m.If(bad):
                m.d.sync += self.status.eq(Status.BAD_ID)

        # The end of a batch: the tile finished and every reader drained.
        readers_idle = Cat(*(r.idle for r in readers.values())).all()
        with m.If(running & tile.finished & readers_idle & ~start):
            m.d.sync += [running.eq(0), flagging.eq(1), self.hbm_reads.eq(tile.hbm_reads)]
            with m.If(tile.bad):
                m.d.sync += self.status.eq(Status.BAD_ID)
            with m.Elif(tile.overflow):
                m.d.sync += self.status.eq(Status.OVERFLOW)
            with m.Elif(tile.unsupported):
                m.d.sync += self.status.eq(Status.UNSUPPORTED)
        m.d.comb += [self.flag_add.valid.eq(flagging),
                     self.flag_add.payload.flag.eq(work.flag),
                     self.flag_add.payload.amount.eq(Mux(work.gather & ~refused,
                                                         self.hbm_reads, 1))]
        with m.If(self.flag_add.valid & self.flag_add.ready):
            m.d.sync += [flagging.eq(0), self.batches.eq(self.batches + 1)]

        moved = [self.hbm.req.valid & self.hbm.req.ready, self.hbm.resp.valid & self.hbm.resp.ready,
                 self.flag_add.valid & self.flag_add.ready, tile.busy,
                 tile.ids.valid & tile.ids.ready, tile.ends.valid & tile.ends.ready,
                 tile.grads.valid & tile.grads.ready, out.valid & out.ready]
        m.d.comb += self.busy.eq(Cat(*moved).any())
        return m
