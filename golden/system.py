"""Golden multi-chip system (SPEC 4.8): one TensorCore instruction-set simulator per chip,
joined by remote pushes, to check chip programs (collectives) without RTL.

Model
-----
Chip ``c`` runs ``programs[c]`` on ``golden.tensorcore`` (a :class:`~golden.tensorcore.Session`);
a ``None`` program is a failed chip, which runs nothing and must receive nothing. A remote
push (a ``dma`` whose destination is another chip's vmem or hbm) reads its source when the
sender issues it and adds its word count to the sender's ``sent_flag`` then (the ISS's
rule); at the receiver it lands as ``golden.memory.land`` does: its words are written and
its word count is added to its ``flag`` there.

Schedule (deterministic): in each *round*, every live chip that has not halted, in chip-id
order, issues bundles until it halts, faults or blocks on a wait, and the pushes it sent
land at once, in issue order, before the next chip runs. A chip blocked on a wait resumes
in the next round. Landing early is the strict choice for checking: a landed push stays
*outstanding* at its receiver (``races="error"``, always on here) until a wait on its flag
covers it, so a program that reads, overwrites or forwards received words before waiting
for them stops with ``race`` even though the data happen to be there; a program that
waits for too few words is caught the same way. The ISS's own rule covers each chip's
pushes through its ``sent_flag``.

Not modelled: timing, so nothing is said about a push landing while its receiver's own
older push still reads the same words (a cross-chip write-after-read hazard). Collective
programs avoid it by data dependence: a word is pushed to a chip only after every value
that chip pushed from it has been consumed downstream.

Errors (``ValueError``, one line): a chip faults (fault name, chip, pc, the ISS's message),
a chip exceeds its watchdog, a push goes to a failed chip, the system deadlocks (every live
chip that has not halted is blocked and no push is in flight: each blocked chip is named
with its pc, the flag and value it waits for and the flag's value), or ``max_rounds``
rounds pass without every chip halting.
"""

from dataclasses import dataclass

import numpy as np

from . import memory, tensorcore

__all__ = ["SystemRun", "run_system"]

_HBM_WORDS = 8


@dataclass(frozen=True)
class SystemRun:
    """What :func:`run_system` returns, per chip id: final flat VMEM images (uint32; a
    failed chip keeps its initial image), final flags (uint32 [n_flags]), ``status``
    ("halted", or "failed" for a chip without a program), bundles issued, and pushes sent
    and landed; ``rounds`` is the scheduling rounds used; ``hbm`` the final HBM images (a
    failed chip's None)."""
    vmem: list
    flags: list
    status: list
    bundles: list
    pushes_sent: list
    pushes_landed: list
    rounds: int
    hbm: list


def _count(name, value, lo, hi=None):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo \
            or (hi is not None and value > hi):
        raise ValueError(f"{name} must be an integer in {lo}..{hi or 'inf'}, not {value!r}")
    return int(value)


def _images(name, images, n_chips, words=None):
    if not isinstance(images, (list, tuple)) or len(images) != n_chips:
        raise ValueError(f"{name} must be a list of {n_chips} images, one per chip id")
    out = []
    for chip, image in enumerate(images):
        if image is None:
            out.append(None)
            continue
        if not isinstance(image, np.ndarray) or image.dtype != np.uint32 or image.ndim != 1:
            raise ValueError(f"{name}[{chip}] must be a 1-D numpy uint32 array")
        if words is not None:
            if len(image) > words:
                raise ValueError(f"{name}[{chip}] has {len(image)} words, more than "
                                 f"vmem_lines * lanes = {words}")
            image = np.concatenate([image, np.zeros(words - len(image), np.uint32)])
        out.append(image)
    return out


def run_system(programs, *, vmem, smem, n_chips, n_flags, lanes=8, vmem_lines, hbm=None,
               numerics="tpu", max_rounds=10_000, max_bundles=1_000_000):
    """Run one TensorCore program per chip, delivering remote pushes, until every live
    chip halts (module docstring).

    Parameters
    ----------
    programs : list of n_chips assembly texts (or IMEM images), None for a failed chip
    vmem : list of n_chips flat uint32 images (zero-padded to ``vmem_lines * lanes``
        words); None for a zero image
    smem : list of n_chips flat uint32 SMEM images (None: the ISS default)
    n_chips : int, chip ids 0 .. n_chips-1 (1..256)
    n_flags : int, sync flags per chip (1..128)
    lanes : int, words per VMEM line
    vmem_lines : int, VMEM lines per chip
    hbm : list of n_chips flat uint32 HBM images, optional (default, and for a None
        entry: 8 zero words)
    numerics : "tpu" or "ieee"
    max_rounds : int, scheduling rounds before giving up
    max_bundles : int, watchdog: bundles one chip may issue in all

    Returns
    -------
    SystemRun

    Raises
    ------
    ValueError
        On bad arguments, and when the system deadlocks, a chip faults (``race``
        included), a chip's watchdog fires, a push targets a failed chip, or
        ``max_rounds`` is exceeded; the message names the chip(s), pc(s) and flag(s).
    """
    n_chips = _count("n_chips", n_chips, 1, memory.MAX_CHIPS)
    n_flags = _count("n_flags", n_flags, 1, memory.MAX_FLAGS)
    lanes = _count("lanes", lanes, 1)
    vmem_lines = _count("vmem_lines", vmem_lines, 1)
    max_rounds = _count("max_rounds", max_rounds, 1)
    max_bundles = _count("max_bundles", max_bundles, 1)
    if not isinstance(programs, (list, tuple)) or len(programs) != n_chips:
        raise ValueError(f"programs must be a list of {n_chips} programs (None for a "
                         f"failed chip), one per chip id")
    if all(p is None for p in programs):
        raise ValueError("every chip has failed (all programs are None): nothing to run")
    vmem = _images("vmem", vmem, n_chips, vmem_lines * lanes)
    smem = _images("smem", smem, n_chips)
    hbm = _images("hbm", hbm if hbm is not None else [None] * n_chips, n_chips)
    live = [c for c in range(n_chips) if programs[c] is not None]
    sessions = {}
    for c in live:
        image = vmem[c] if vmem[c] is not None else np.zeros(vmem_lines * lanes, np.uint32)
        far = hbm[c] if hbm[c] is not None else np.zeros(_HBM_WORDS, np.uint32)
        try:
            sessions[c] = tensorcore.Session(
                programs[c], vmem=image, smem=smem[c], hbm=far,
                n_flags=n_flags, n_chips=n_chips, lanes=lanes, numerics=numerics,
                races="error")
        except ValueError as error:
            raise ValueError(f"chip {c}: {error}") from None
    state = {c: None for c in live}
    sent = [0] * n_chips
    landed = [0] * n_chips
    issued = [0] * n_chips
    for rounds in range(1, max_rounds + 1):
        progress = 0
        for c in live:
            if state[c] is not None and state[c].halted:
                continue
            s = sessions[c].resume(max(1, max_bundles - issued[c]))
            progress += s.bundles - issued[c]
            issued[c] = s.bundles
            state[c] = s
            if s.status == "error":
                raise ValueError(f"chip {c} faults with {s.error} at pc {s.error_pc}: "
                                 f"{s.message}")
            if s.status == "watchdog":
                raise ValueError(f"chip {c}: {s.message}")
            for p in s.pushes:
                dst = p.descriptor.chip
                sent[c] += 1
                if programs[dst] is None:
                    raise ValueError(f"chip {c} pushes {p.descriptor.words} words to failed "
                                     f"chip {dst} (flag f{p.descriptor.flag})")
                try:
                    sessions[dst].land([p], source=c)
                except ValueError as error:
                    raise ValueError(f"a push from chip {c} cannot land on chip {dst}: "
                                     f"{error}") from None
                landed[dst] += 1
        if all(state[c].halted for c in live):
            break
        if not progress:
            blocked = [c for c in live if not state[c].halted]
            raise ValueError("deadlock: " + "; ".join(
                f"chip {c} at pc {state[c].pc} waits for f{state[c].waiting[0]} >= "
                f"{state[c].waiting[1]} (it is {int(state[c].flags[state[c].waiting[0]])})"
                for c in blocked) + "; no push in flight")
    else:
        raise ValueError(f"{max_rounds} rounds without every chip halting: chips "
                         f"{[c for c in live if not state[c].halted]} still run")
    final_vmem, flags, status = [], [], []
    final_hbm = [state[c].hbm.copy() if c in sessions else None for c in range(n_chips)]
    for c in range(n_chips):
        if c in sessions:
            final_vmem.append(state[c].vmem.copy())
            flags.append(state[c].flags.copy())
            status.append("halted")
        else:
            final_vmem.append(vmem[c] if vmem[c] is not None
                              else np.zeros(vmem_lines * lanes, np.uint32))
            flags.append(np.zeros(n_flags, np.uint32))
            status.append("failed")
    return SystemRun(final_vmem, flags, status, issued, sent, landed, rounds, final_hbm)
