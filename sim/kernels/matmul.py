"""The matmul kernel: ``out = act(x @ w)`` from HBM to HBM on one TensorCore.

The program streams K-tiles of ``x`` and ``w`` from HBM into double-buffered VMEM with the
DMA engine while the MXU works on the previous tile, keeps the output block's fp32 partial
sums in vregs, and writes each finished block back to HBM.

Decomposition. ``x`` [M, K] and ``w`` [K, N] are padded to whole 8x8 tiles; the output is
cut into blocks of ``rows`` M-tiles by ``cols`` N-tiles, and K into *steps* of
``k_per_step`` K-tiles, one DMA fetch each. For each block, for each K-tile ``t``, for
each of its N-tiles ``c``: load the weight tile ``w[8t:8t+8, n-tile c]``, then for each
M-tile ``b`` push its LHS tile with
``push_lhs_acc`` so that the MXU adds the products to the block's partial sums
``A[b, c]``, in the order ``golden.mxu.matmul`` adds them (one chain over the whole K).
An LHS tile fetched once serves all ``cols`` N-tiles, which divides the DMA traffic per
MAC by about ``cols``. After the last step the sums get the activation (``max(A, +0.0)``
for ReLU) and go to HBM.

Padding. K is padded to whole steps. Padded K positions hold ``x = -0.0`` and ``w =
+0.0``: their product is -0.0, and ``a + (-0.0) == a`` for every ``a`` (signed zeros, NaN,
infinities, subnormals), so the chain's value does not change. Padded M rows and N columns
are computed and dropped.

Pipelining.
- *DMA*: the steps are fetched in one stream over all blocks, into the two buffers in
  turn (flag ``flag_base``, 1 by default, counts their words). Late in step ``s``, once its last tile load is out,
  the program waits for step ``s + 1``'s tiles (``waitc``, consuming them) and fetches
  step ``s + 2`` into the buffer step ``s`` is done with; a block's first step waits and
  fetches at the block's start. So a fetch has about a step to land, each wait covers the
  one fetch outstanding, and a ``dma``, which waits for the loads sent before it, finds
  :data:`FETCH_GAP` bundles of pushes still queued. The next fetch's descriptor records
  are written away from the fetch, where the sequencer is ahead of the VPU.
- *MXU results*: pops trail pushes by ``lag`` LHS pushes, so the MXU's pipeline stays
  full: push ``q``'s bundle pops the result of push ``q - lag``, cyclically over the
  block's ``rows * cols`` sums, except that the last push through a weight tile leaves
  its pop to the next bundle, the next tile's push, which so never waits behind a pop.
  Before a block's first step, ``lag + 1`` pushes of -0.0 LHS rows through an all-zero
  weight tile prime the queue (each gives back its sum, +0.0, unchanged); after the last
  step ``lag + 1`` pops drain it.
- *MXU weights*: a weight tile's push shares its bundle with no load, so it goes as soon
  as the LHS push before it has, and the tile loads while that push streams.
- *VMEM loads*: each tile is loaded into a vreg as soon as no earlier push still reads
  it, one load a push (a ``vld`` takes longer than a push), and the next step's first
  tiles during the end of the step before, once its tiles are waited for.
- *Output*: a block's sums go through an output buffer; the next block waits for that
  buffer's DMA (flag ``flag_base + 1``) only when it stores its own sums.

Layouts (HBM, words; one bf16 in the low half of a word): ``x`` [Mp, Kp] row-major at
``x_base``, ``w`` [Kp, Np] at ``w_base``, ``out`` [Mp, Np] fp32 at ``out_base``. VMEM
line ``vmem_base`` (0 by default) holds the bf16 -0.0 constant; then, with ``S =
k_per_step``, two LHS buffers of ``8 * rows * S`` lines (line ``(8b + r) * S + kk`` is
row ``r`` of M-tile ``b`` in the step's K-tile ``kk``), two weight buffers of ``8 * cols
* S`` lines (line ``(8kk + s) * cols + c`` is row ``s`` of K-tile ``kk`` and N-tile
``c``), and the output buffer of ``8 * rows * cols`` lines (line ``(8b + r) * cols +
c``), each line relative to its buffer: each buffer is a row-major block of its matrix,
so every DMA is two-dimensional. SMEM from word ``smem_base`` (0) holds the three DMA
descriptor records and a table of the blocks' base addresses.
"""

from dataclasses import dataclass

import numpy as np

from golden import memory as golden_memory
from golden import tensorcore as tc
from golden.formats import BF16, as_bits
from golden.vpu import SUBLANES

__all__ = ["MatmulKernel", "plan_matmul", "NEG_ZERO_BF16", "MAX_SUMS", "MAX_LAG"]

NEG_ZERO_BF16 = 0x8000
#: The most sum vregs (``rows * cols``): beside them, the LHS tiles (4 in rotation with one
#: N-tile a block, else one per M-tile), 2 weight and 2 constant vregs.
MAX_SUMS = 24
#: Pops trail pushes by at most this many LHS pushes: a pop that waits blocks the pushes
#: behind it, and an 8x8 MXU's last result row of a push comes 8 + 66 cycles after the
#: push issues, so pops keep pace with back-to-back pushes from a trail of 8 on.
MAX_LAG = 9
#: Tiles loaded alone before a step's first push when the step before loaded none of its
#: tiles (a block of one step).
LOAD_AHEAD = 3
#: Bundles between a step's last load and the DMA that refills its buffer: a ``dma`` waits
#: for the loads sent before it, and the vector queue must not run dry meanwhile.
FETCH_GAP = 5
_TILE = SUBLANES
_LANES = 8

# SMEM, from ``smem_base``: descriptor records, then the block table (x_base, w_base,
# out_base per block).
_DX, _DW, _DO = 0, tc.DESCRIPTOR_WORDS, 2 * tc.DESCRIPTOR_WORDS
_TABLE = 3 * tc.DESCRIPTOR_WORDS
_ENTRY = 3
# Flags, from ``flag_base``: the steps' tiles, the output buffer.
_F_TILES, _F_OUT = 0, 1
_IMM = 1 << 15           # signed 16-bit immediates: an SMEM offset must be below

# vregs
_X_ROTATING = (24, 25, 26, 27)  # LHS tiles with one N-tile a block: each used once
_W = (28, 29)                  # weight tiles, alternating
_ZERO, _NEG = 30, 31           # +0.0 words; bf16 -0.0 words


@dataclass(frozen=True)
class MatmulKernel:
    """A planned matmul: the program and the memory images it runs on.

    ``program`` is assembly text; ``hbm``, ``vmem`` and ``smem`` the initial images;
    ``out_base`` and ``(Mp, Np)`` say where the padded result lands in HBM, of which
    ``[:M, :N]`` is the product; a block is ``rows`` M-tiles by ``cols`` N-tiles,
    a step ``k_per_step`` K-tiles. ``mxu_results`` is the MXU result queue the program
    needs (rows), ``lhs_pushes`` the LHS pushes it makes (the MXU's busy beats are
    ``8 * lhs_pushes``). Flag ``out_flag`` reaches ``out_words`` once the last output
    block is in HBM: a program that goes on after the matmul (``halt=False``) waits for
    it before it reads the product.
    """
    program: str
    hbm: np.ndarray
    vmem: np.ndarray
    smem: np.ndarray
    out_base: int
    shape: tuple
    padded: tuple
    rows: int
    cols: int
    k_per_step: int
    lag: int
    mxu_results: int
    lhs_pushes: int
    out_flag: int
    out_words: int

    def result(self, hbm):
        """The [M, N] fp32 product (uint32 patterns) in a final HBM image."""
        (m, n), (mp, np_) = self.shape, self.padded
        out = np.asarray(hbm, np.uint32)[self.out_base:self.out_base + mp * np_]
        return out.reshape(mp, np_)[:m, :n].copy()


def _tiles(n):
    return -(-n // _TILE)


def _spread(tiles, most):
    """Tiles per block: at most ``most``, spread evenly over the blocks so padding is least."""
    blocks = -(-tiles // most)
    return -(-tiles // blocks)


def _most_rows(cols):
    """The most M-tiles a block of ``cols`` N-tiles can have in 32 vregs."""
    if cols == 1:
        return MAX_SUMS
    return min(MAX_SUMS // cols, (32 - len(_W) - 2) // (cols + 1))


def plan_matmul(x, w, *, activation=None, max_rows=None, cols=None, k_per_step=None,
                lag=MAX_LAG, vmem_lines=None, vmem_base=0, smem_base=0, flag_base=1,
                halt=True):
    """Plan ``act(x @ w)`` (``x`` bf16 [M, K], ``w`` bf16 [K, N]); returns a
    :class:`MatmulKernel`.

    ``cols`` is the N-tiles per block (default 2 when N spans two tiles, else 1); ``max_rows``
    bounds the M-tiles per block (default, and at most, what the vregs hold: 24 with one
    N-tile, 8 with two); ``k_per_step`` the K-tiles each DMA fetch brings (default 2 when K
    spans two tiles, else 1: fewer, larger steps); ``lag`` the pops' trail
    (0..:data:`MAX_LAG`, less than the block's sums). ``vmem_lines`` is the VMEM to fit:
    the defaults shrink (``k_per_step``, then the M-tiles of a block) until they fit.
    ``activation`` is None or ``"relu"``.

    Placement, for a program that shares the chip with another (``sim.kernels.
    data_parallel``): the kernel's VMEM starts at line ``vmem_base``, its SMEM at word
    ``smem_base``, its two flags are ``flag_base`` and ``flag_base + 1``, and VMEM, SMEM
    and flags below those are neither read nor written (the images there are zeros).
    With ``halt=False`` the program ends after issuing the last output DMA, for another
    program to follow (see :attr:`MatmulKernel.out_flag`).

    Raises ValueError on bad shapes or parameters.
    """
    if activation not in (None, "relu"):
        raise ValueError(f"activation must be None or 'relu', not {activation!r}")
    for name, value, most in (("vmem_base", vmem_base, None),
                              ("smem_base", smem_base, _IMM - _TABLE - 1),
                              ("flag_base", flag_base, golden_memory.MAX_FLAGS - 2)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 or \
                (most is not None and value > most):
            raise ValueError(f"{name} must be an integer in 0..{most if most else 'inf'}, "
                             f"not {value!r}")
    x = as_bits(x, BF16, name="x")
    w = as_bits(w, BF16, name="w")
    if x.ndim != 2 or w.ndim != 2:
        raise ValueError(f"x and w must be 2-D, not {x.ndim}-D and {w.ndim}-D")
    (m, k), (k2, n) = x.shape, w.shape
    if k != k2:
        raise ValueError(f"x is {m}x{k} but w is {k2}x{n}: their K differ")
    if 0 in (m, k, n):
        raise ValueError(f"x and w must not be empty, not {m}x{k} and {k2}x{n}")
    if cols is None:
        cols = 2 if _tiles(n) >= 2 else 1
    if not isinstance(cols, int) or not 1 <= cols <= MAX_SUMS // 2 + 1 or \
            _most_rows(cols) < 1:
        raise ValueError(f"cols must be a positive integer that leaves vregs for a block, "
                         f"not {cols!r}")
    most = _most_rows(cols)
    chosen_rows, chosen_ks = max_rows is None, k_per_step is None
    if chosen_rows:
        max_rows = most
    if not isinstance(max_rows, int) or not 1 <= max_rows <= most:
        raise ValueError(f"max_rows must be an integer in 1..{most} with cols={cols}, "
                         f"not {max_rows!r}")
    if chosen_ks:
        k_per_step = 2 if _tiles(k) >= 2 else 1
    if not isinstance(k_per_step, int) or k_per_step < 1:
        raise ValueError(f"k_per_step must be a positive integer, not {k_per_step!r}")
    rows = _spread(_tiles(m), max_rows)
    if vmem_lines is not None:
        while _VmemLayout(rows, cols, k_per_step, vmem_base).lines > vmem_lines:
            if chosen_ks and k_per_step > 1:
                k_per_step -= 1
            elif chosen_rows and max_rows > 1:
                max_rows -= 1
                rows = _spread(_tiles(m), max_rows)
            else:
                break
    if not isinstance(lag, int) or lag < 0:
        raise ValueError(f"lag must be a non-negative integer, not {lag!r}")
    lag = min(lag, MAX_LAG, rows * cols - 1)
    m_blocks, k_steps = -(-_tiles(m) // rows), -(-_tiles(k) // k_per_step)
    n_blocks = -(-_tiles(n) // cols)
    mp, kp, np_ = 8 * rows * m_blocks, 8 * k_per_step * k_steps, 8 * cols * n_blocks

    xp = np.full((mp, kp), NEG_ZERO_BF16, np.uint32)
    xp[:m, :k] = x
    wp = np.zeros((kp, np_), np.uint32)
    wp[:k, :n] = w
    x_base, w_base = 0, mp * kp
    out_base = w_base + kp * np_
    hbm = np.concatenate([xp.ravel(), wp.ravel(), np.zeros(mp * np_, np.uint32)])

    layout = _VmemLayout(rows, cols, k_per_step, vmem_base)
    if vmem_lines is not None and layout.lines > vmem_lines:
        raise ValueError(f"a block of {rows}x{cols} tiles, {k_per_step} K-tiles a step, needs "
                         f"{layout.lines} VMEM lines, more than {vmem_lines}")
    vmem = np.zeros(layout.lines * _LANES, np.uint32)
    vmem[layout.const * _LANES:(layout.const + 1) * _LANES] = NEG_ZERO_BF16

    blocks = [(x_base + ib * 8 * rows * kp, w_base + 8 * cols * jb,
               out_base + ib * 8 * rows * np_ + 8 * cols * jb)
              for jb in range(n_blocks) for ib in range(m_blocks)]
    tiles, out_flag = flag_base + _F_TILES, flag_base + _F_OUT
    smem = np.zeros(smem_base + _TABLE + _ENTRY * (len(blocks) + 1), np.uint32)
    step_x = golden_memory.Descriptor(("hbm", 0), ("vmem", 0), (8 * k_per_step, 8 * rows),
                                      (1, kp), (1, _LANES * k_per_step), tiles)
    step_w = golden_memory.Descriptor(("hbm", 0), ("vmem", 0), (8 * cols, 8 * k_per_step),
                                      (1, np_), (1, _LANES * cols), tiles)
    out = golden_memory.Descriptor(("vmem", layout.out * _LANES), ("hbm", 0),
                                   (8 * cols, 8 * rows), (1, _LANES * cols), (1, np_), out_flag)
    for at, descriptor in ((_DX, step_x), (_DW, step_w), (_DO, out)):
        at += smem_base
        smem[at:at + tc.DESCRIPTOR_WORDS] = tc.descriptor_words(descriptor)
    for i, entry in enumerate(blocks):
        at = smem_base + _TABLE + _ENTRY * i
        smem[at:at + _ENTRY] = entry

    program = _Writer(rows=rows, cols=cols, k_per_step=k_per_step, lag=lag, k_steps=k_steps,
                      n_cols=np_, blocks=len(blocks), layout=layout,
                      relu=activation == "relu", smem_base=smem_base,
                      flags=(tiles, out_flag)).program(halt=halt)
    return MatmulKernel(program=program, hbm=hbm, vmem=vmem, smem=smem, out_base=out_base,
                        shape=(m, n), padded=(mp, np_), rows=rows, cols=cols,
                        k_per_step=k_per_step, lag=lag, mxu_results=8 * (lag + 1),
                        lhs_pushes=len(blocks) * kp // 8 * rows * cols, out_flag=out_flag,
                        out_words=64 * rows * cols)


class _VmemLayout:
    """VMEM lines from ``base``: the constant, two LHS buffers, two weight buffers, the
    output buffer; ``lines`` is where they end."""

    def __init__(self, rows, cols, k_per_step, base=0):
        x, w = 8 * rows * k_per_step, 8 * cols * k_per_step
        self.const = base
        self.x = (base + 1, base + 1 + x)
        self.w = (base + 1 + 2 * x, base + 1 + 2 * x + w)
        self.out = base + 1 + 2 * x + 2 * w
        self.lines = self.out + 8 * rows * cols


class _Writer:
    """Writes the program text; see the module docstring for its shape.

    Scalar registers: s1/s2 the next fetch's x and w HBM addresses, s3/s4 the current
    step's LHS and weight buffers (VMEM lines), s16/s17 the next step's, s5/s6 the next
    fetch's buffers (VMEM words), s7 the step counter, s8 the block counter, s9 the current
    block's table entry, s10..s14 constants (the buffer toggles, the weight stride of a
    step), s18 the fetches left in the fetched block, s19 its table entry, s20 the fetches
    left in the program.
    """

    def __init__(self, *, rows, cols, k_per_step, lag, k_steps, n_cols, blocks, layout, relu,
                 smem_base, flags):
        self.dx, self.dw, self.do = (smem_base + at for at in (_DX, _DW, _DO))
        self.table = smem_base + _TABLE
        self.f_tiles, self.f_out = flags
        self.rows, self.cols, self.lag, self.k_steps = rows, cols, lag, k_steps
        self.k_per_step = k_per_step
        self.n_cols, self.blocks, self.layout, self.relu = n_cols, blocks, layout, relu
        self.sums = rows * cols
        self.step_words = 64 * k_per_step * (rows + cols)
        self.out_words = 64 * self.sums
        # LHS tiles: used once each with one N-tile (a rotation suffices), else kept for
        # every N-tile of the step.
        self.x_regs = _X_ROTATING if cols == 1 else tuple(range(self.sums, self.sums + rows))
        self.pushes, self.loads = self._plan()
        self.lines = []

    def sum_reg(self, q):
        """The sum vreg of a step's ``q``-th LHS push (N-tile ``q // rows``, M-tile
        ``q % rows``)."""
        c, b = divmod(q % self.sums, self.rows)
        return b * self.cols + c

    def emit(self, *ops, label=None):
        text = " | ".join(op for op in ops if op)
        self.lines.append((f"{label}: " if label else "") + (text or "nop"))

    def li(self, reg, value):
        """``reg = value`` for any 32-bit value (one or two bundles)."""
        if -0x8000 <= value < 0x8000:
            self.emit(f"li {reg}, {value}")
        else:
            self.emit(f"lui {reg}, {value >> 16}")
            self.emit(f"ori {reg}, {reg}, {value & 0xFFFF}")

    def program(self, *, halt):
        lay = self.layout
        x_words = [line * _LANES for line in lay.x]
        w_words = [line * _LANES for line in lay.w]
        self.li("s10", lay.x[0] ^ lay.x[1])
        self.li("s11", lay.w[0] ^ lay.w[1])
        self.li("s12", x_words[0] ^ x_words[1])
        self.li("s13", w_words[0] ^ w_words[1])
        self.li("s14", 8 * self.k_per_step * self.n_cols)
        self.li("s3", lay.x[0])
        self.li("s4", lay.w[0])
        self.li("s16", lay.x[1])
        self.li("s17", lay.w[1])
        self.li("s5", x_words[0])
        self.li("s6", w_words[0])
        self.li("s9", self.table)
        self.li("s19", self.table)
        self.li("s8", self.blocks)
        self.li("s18", self.k_steps)
        self.li("s20", self.blocks * self.k_steps)
        self.emit(f"vld v{_NEG}, {lay.const}, 0", f"xor v{_ZERO}, v{_ZERO}, v{_ZERO}")
        self.emit(f"fadd f{self.f_out}, {self.out_words}")   # the output buffer starts free
        self.emit("lw s1, 0(s19)")
        self.emit("lw s2, 1(s19)")
        self._records()
        self._fetch()
        self._next_fetch()
        self._block()
        if halt:
            self.emit("halt")
        return "\n".join(self.lines) + "\n"

    def _records(self, label=None):
        """Write the descriptor records of the step at s1/s2 into the buffers at s5/s6."""
        self.emit(f"sw s1, {self.dx + 1}(s0)", label=label)
        self.emit(f"sw s5, {self.dx + 2}(s0)")
        self.emit(f"sw s2, {self.dw + 1}(s0)")
        self.emit(f"sw s6, {self.dw + 2}(s0)")

    def _wait_and_fetch(self):
        """Wait for the step fetched last, then fetch the next one if any is left (its
        records are ready). The wait comes first, so at most one fetch is outstanding on the
        flag when a step waits for its tiles (golden.tensorcore's ordering contract)."""
        skip = f"fetched{len(self.lines)}"
        self.emit(f"waitc f{self.f_tiles}, {self.step_words}", f"beq s20, s0, {skip}")
        self._fetch()
        self.emit("nop", label=skip)

    def _fetch(self):
        """The DMAs of the step whose records are written, counted off."""
        self.emit(f"dma {self.dx}")
        self.emit(f"dma {self.dw}", "addi s20, s20, -1 | addi s18, s18, -1")

    def _next_fetch(self):
        """Advance s1/s2 and s5/s6 to the step after the one fetched last and write its
        records (nothing once every step is fetched). Away from the fetch itself, where the
        vector queue is short, so the sequencer spends those bundles while it is ahead."""
        skip, same_block = f"advanced{len(self.lines)}", f"same{len(self.lines)}"
        self.emit(f"beq s20, s0, {skip}")
        self.emit("xor s5, s5, s12 | xor s6, s6, s13")
        self.emit(f"addi s1, s1, {8 * self.k_per_step} | add s2, s2, s14")
        self.emit(f"bne s18, s0, {same_block}")
        # The fetched block's steps are done: the next block's first step.
        self.emit(f"lw s1, {_ENTRY}(s19)")
        self.emit(f"lw s2, {_ENTRY + 1}(s19)")
        self.emit(f"addi s19, s19, {_ENTRY} | li s18, {self.k_steps}")
        self._records(label=same_block)
        self.emit("nop", label=skip)

    def _pairs(self, op, regs):
        """``op vR, vR, <operand>`` on every vreg of ``regs``, two ALU slots a bundle."""
        for i in range(0, len(regs), 2):
            self.emit(*(op.format(r=r) for r in regs[i:i + 2]))

    def _block(self):
        sums, lag = self.sums, self.lag
        tail = [self.sum_reg(q) for q in range(sums - lag - 1, sums)]
        head = self._head_loads()
        self.emit("nop", label="block")
        self._pairs("xor v{r}, v{r}, v{r}", range(sums))
        # The step's first tiles arrive while the zeros prime the MXU's result queue.
        self._wait_and_fetch()
        primes = [f"push_weights v{_ZERO}"] + [f"push_lhs_acc v{_NEG}, v{reg}" for reg in tail]
        loads = [text.format(x="s3", w="s4") for text, _, _ in self.loads[:head]]
        for i in range(max(len(primes), len(loads))):
            self.emit(loads[i] if i < len(loads) else None,
                      primes[i] if i < len(primes) else None)
        self._next_fetch()
        if self.k_steps > 1:
            self.li("s7", self.k_steps - 1)
            self._step(label="step", head=head, last=False)
            self.emit("loop s7, step")
        self._step(label=None, head=head, last=True)
        for reg in tail:
            self.emit(f"pop v{reg}")
        if self.relu:
            self._pairs(f"max v{{r}}, v{{r}}, v{_ZERO}", range(sums))
        self.emit(f"waitc f{self.f_out}, {self.out_words}")
        for b in range(self.rows):
            for c in range(self.cols):
                self.emit(f"vst v{b * self.cols + c}, {self.layout.out + 8 * b * self.cols + c}, "
                          f"{self.cols}")
        self.emit("lw s15, 2(s9)")
        self.emit(f"sw s15, {self.do + 2}(s0)")
        self.emit(f"dma {self.do}")
        self.emit(f"addi s9, s9, {_ENTRY} | loop s8, block")

    def _plan(self):
        """A step's pushes, ``(text, pop, vreg read)``, and its tile loads in order of use,
        ``(text, vreg written, index of the push that needs it)``; a load's text has
        ``{x}``/``{w}`` for the registers of its step's buffers."""
        rows, cols, lag, ks = self.rows, self.cols, self.lag, self.k_per_step
        loads, pushes = [], []
        for kk in range(ks):
            for c in range(cols):
                weights = _W[(kk * cols + c) % len(_W)]
                loads.append((f"vld v{weights}, {{w}}+{8 * kk * cols + c}, {cols}", weights,
                              len(pushes)))
                pushes.append((f"push_weights v{weights}", None, weights))
                for b in range(rows):
                    q = (kk * cols + c) * rows + b
                    x = self.x_regs[b % len(self.x_regs)]
                    if c == 0 or cols == 1:
                        loads.append((f"vld v{x}, {{x}}+{8 * b * ks + kk}, {ks}", x,
                                      len(pushes)))
                    pushes.append((f"push_lhs_acc v{x}, v{self.sum_reg(q)}", q, x))
        # Each LHS push pops in its own bundle, except the last through a weight tile: its
        # pop goes in the next bundle, the next tile's push (so the step's first bundle pops
        # for the step before's last push), and that push never waits behind a pop.
        pops = []
        for i, (_, q, _) in enumerate(pushes):
            if q is None:                       # a weight tile: the push before's pop
                q = pushes[i - 1][1] if i else -1
            elif i + 1 == len(pushes) or pushes[i + 1][1] is None:
                q = None                        # popped in the next bundle
            pops.append(None if q is None else f"pop v{self.sum_reg((q - lag) % self.sums)}")
        return [(text, pop, reg) for (text, _, reg), pop in zip(pushes, pops)], loads

    def _after_last_reader(self, reg, before=None):
        """The first push a load into ``reg`` may share a bundle with (a vld issues before
        its bundle's push): after the last push before ``before`` that reads ``reg``."""
        end = len(self.pushes) if before is None else before
        return 1 + max((i for i in range(end) if self.pushes[i][2] == reg), default=-1)

    def _head_loads(self):
        """How many of a step's loads the step before it issues (0 with one step a block)."""
        if self.k_steps == 1:
            return 0
        saved, self.lines = self.lines, []
        head = self._step(label=None, head=0, last=False)
        self.lines = saved
        return head

    def _step(self, *, label, head, last):
        """One step, whose first ``head`` loads were issued before it: per K-tile and N-tile,
        push the weight tile and every LHS tile, popping ``lag`` pushes behind, each tile
        loaded from VMEM ahead of its push. Unless ``last``: once its own loads are out,
        :data:`FETCH_GAP` bundles have passed and the next step's tiles are about to find
        vregs free, wait for those tiles, fetch the step after, and load the next step's
        first tiles into vregs this step has done with. Returns how many of the next step's
        loads it issued."""
        own = [(text.format(x="s3", w="s4"), user) for text, _, user in self.loads]
        upcoming = [(text.format(x="s16", w="s17"), self._after_last_reader(reg))
                    for text, reg, _ in self.loads]
        earliest = [self._after_last_reader(reg, user) for _, reg, user in self.loads]
        # No sooner than two bundles before the next step's second load finds its vreg free
        # (its first, a weight tile, may find one sooner): later, the DMA waits for fewer
        # queued loads.
        soonest = min(when for _, when in upcoming[1:2] or upcoming) - 2
        k, done, fetched = head, 0, last
        last_own = -1                   # the bundle of the last own load, once all are out
        first = len(self.lines)
        # A cold start: the first loads alone, LOAD_AHEAD pushes ahead.
        while k < min(LOAD_AHEAD, len(own)) and earliest[k] <= 0:
            self.emit(own[k][0])
            k += 1
        for i, (push, pop, _) in enumerate(self.pushes):
            while k + 1 < len(own) and own[k + 1][1] <= i:       # overdue: alone first
                self.emit(own[k][0])
                k += 1
            if not fetched and k == len(own) and i > last_own + FETCH_GAP and i >= soonest:
                self._wait_and_fetch()
                fetched = True
            load = None
            if push.startswith("push_weights"):
                pass        # nothing to wait for: the tile loads while the last LHS push goes
            elif k < len(own) and earliest[k] <= i:
                load, k = own[k][0], k + 1
                if k == len(own):
                    last_own = i
            elif fetched and not last and done < len(upcoming) and upcoming[done][1] <= i:
                load, done = upcoming[done][0], done + 1
            self.emit(load, push, pop)
        if not fetched:
            self._wait_and_fetch()
        if not last:
            self._next_fetch()
        self.emit("xor s3, s3, s10 | xor s4, s4, s11")
        self.emit("xor s16, s16, s10 | xor s17, s17, s11")
        if label:
            self.lines[first] = f"{label}: {self.lines[first]}"
        return done
