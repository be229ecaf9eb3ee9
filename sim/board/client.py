"""The host's side of a board: programs, images and results over the UARTBone bridge."""

from dataclasses import dataclass

import numpy as np

from golden import tensorcore as tc
from golden import uartbone
from hdl.board.proto_chip import (CONFIG, CONTROL_RESET, CONTROL_START, REGIONS, REGISTERS,
                                  STATUS_BITS, Register)
from hdl.tensorcore.sequencer import STALL_CAUSES

__all__ = ["BoardClient", "BoardRun", "BoardError", "memory_address"]

#: Words a line of each memory takes in the address map: IMEM's 10-word bundles 16.
_STRIDE = {"imem": 16}


class BoardError(RuntimeError):
    """The board's chip stopped on a fault, or did not finish: the message says how."""


def memory_address(memory, word, *, line_words=1):
    """The bridge's word address of flat word ``word`` of ``memory`` (a name in
    ``hdl.board.proto_chip.REGIONS``), whose lines hold ``line_words`` words."""
    stride = _STRIDE.get(memory, line_words)
    return REGIONS[memory] + (word // line_words) * stride + word % line_words


@dataclass(frozen=True)
class BoardRun:
    """A program's run on a board: ``status`` the status register's bits by name
    (``hdl.board.proto_chip.STATUS_BITS``), ``cycles`` from start to done, ``counters``
    (``mxu_beats``, ``dma_cycles``, ``overlap_cycles``, ``bundles``, ``pc``), ``stalls``
    by cause, and ``reads``: each memory range asked for, as uint32 words."""
    status: dict
    cycles: int
    counters: dict
    stalls: dict
    reads: dict


class BoardClient:
    """A board's proto chip over a transport (``sim.board.transport``): ``transact(
    [(send, receive), ...]) -> bytes``, each read frame's answer awaited before what
    follows. :meth:`run` is one job: reset the chip, load IMEM, SMEM, VMEM and
    HBM, start, wait for done, and read back; it is sent as a whole, so the simulated
    board runs it once."""

    def __init__(self, transport, config):
        self.transport = transport
        self.config = dict(config)

    def read(self, addr, count):
        """``count`` words from ``addr`` (a word address) on."""
        return self._transact(_read_segments(addr, count))

    def check_board(self):
        """Read the ID and the chip's configuration registers; ValueError unless they are
        the proto chip's and match ``config``."""
        ident = int(self.read(REGISTERS + Register.ID, 1)[0])
        if ident != 0x5450_5531:
            raise ValueError(f"port: the board answered ID {ident:#010x}, not the proto "
                             f"chip's 0x54505531 (\"TPU1\"): another bitstream?")
        values = self.read(REGISTERS + Register.CONFIG, len(CONFIG))
        found = {name: int(v) for name, v in zip(CONFIG, values)}
        want = {name: self.config[name] for name in CONFIG if name in self.config}
        differ = {name: found[name] for name in want if found[name] != want[name]}
        if differ:
            raise ValueError(f"port: the board's chip differs from the preset: {differ}")

    def _load(self, memory, words, line_words):
        words = np.asarray(words, np.uint32).ravel()
        stride = _STRIDE.get(memory, line_words)
        if stride == line_words:
            return uartbone.write(REGIONS[memory], words) if words.size else b""
        return b"".join(uartbone.write(REGIONS[memory] + b * stride,
                                       words[b * line_words:(b + 1) * line_words])
                        for b in range(-(-words.size // line_words)))

    def run(self, program, *, hbm=None, vmem=None, smem=None, reads=(), waits=20):
        """Run ``program`` (assembly text or bundles) with the images given (zeros
        elsewhere in what they cover; the rest of each memory as the last run left it),
        and read back ``reads``: ``(memory, first word, words)`` each. Returns a
        :class:`BoardRun`; raises :class:`BoardError` if the chip faulted, or was not done
        after ``waits`` more reads of the wait register (each up to its limit, about 80 ms
        on a board)."""
        words = np.asarray(tc.program_words(program), np.uint32)
        lanes, per_hbm = self.config["lanes"], self.config["words_per_cycle"]
        job = [uartbone.write(REGISTERS + Register.CONTROL, [CONTROL_RESET]),
               self._load("imem", words, tc.BUNDLE_WORDS)]
        for name, image, line in (("smem", smem, 1), ("vmem", vmem, lanes),
                                  ("hbm", hbm, per_hbm)):
            if image is not None:
                job.append(self._load(name, image, line))
        job.append(uartbone.write(REGISTERS + Register.CONTROL, [CONTROL_START]))
        # Wait for the chip, then read the counters and the memories: all in one go, so a
        # simulated board runs the job once. Should the wait end before the chip (a run
        # longer than the wait register's limit), wait again and read again.
        job.append(uartbone.read(REGISTERS + Register.WAIT, 1))
        reading = self._reads(reads, lanes, per_hbm)
        values = self._transact([(b"".join(job), 4)] + reading)
        status, values = values[0], values[1:]
        for _ in range(waits):
            if status >> STATUS_BITS["done"] & 1:
                break
            status = self.read(REGISTERS + Register.WAIT, 1)[0]
            if status >> STATUS_BITS["done"] & 1:
                values = self._transact(reading)
        else:
            if not status >> STATUS_BITS["done"] & 1:
                pc = int(self.read(REGISTERS + Register.PC, 1)[0])
                raise BoardError(f"the board's chip did not finish: {waits + 1} waits, "
                                 f"pc {pc}, status {int(status):#010x}")
        (status, pc, cycles, bundles, error_pc), at = values[:5], 5
        mxu_beats, dma_cycles, overlap = values[at:at + 3]
        stalls = dict(zip(STALL_CAUSES, (int(v) for v in values[at + 3:at + 3 +
                                                               len(STALL_CAUSES)])))
        at += 3 + len(STALL_CAUSES)
        bits = {name: bool(status >> bit & 1) for name, bit in STATUS_BITS.items()}
        if bits["error"] or status >> 24:
            error = tc.ERRORS[(int(status) >> 16) & 0xFF]
            raise BoardError(f"the board's chip stopped with error {error} at pc "
                             f"{int(error_pc)} (VPU error {int(status) >> 24})")
        got = {}
        for memory, first, count in reads:
            got[(memory, first)] = values[at:at + count]
            at += count
        return BoardRun(status=bits, cycles=int(cycles),
                        counters={"mxu_beats": int(mxu_beats), "dma_cycles": int(dma_cycles),
                                  "overlap_cycles": int(overlap), "bundles": int(bundles),
                                  "pc": int(pc)},
                        stalls=stalls, reads=got)

    @staticmethod
    def _reads(reads, lanes, per_hbm):
        """The segments (a read frame, its answer's bytes) that read the status and
        counters, then each of ``reads``."""
        segments = []
        for first, count in ((REGISTERS + Register.STATUS, 5),
                             (REGISTERS + Register.MXU_BEATS, 3),
                             (REGISTERS + Register.STALLS, len(STALL_CAUSES))):
            segments += _read_segments(first, count)
        for memory, first, count in reads:
            line = {"vmem": lanes, "hbm": per_hbm, "imem": tc.BUNDLE_WORDS}.get(memory, 1)
            step = line * (255 // line)         # whole lines a frame
            for start in range(first, first + count, step):
                piece = min(step, first + count - start)
                segments += _read_segments(memory_address(memory, start, line_words=line),
                                           piece)
        return segments

    def _transact(self, segments):
        return uartbone.words(self.transport.transact(segments))


def _read_segments(addr, count):
    """One segment per read frame: the frame, and the bytes of its answer."""
    return [(uartbone.read_frame((addr + start) % (1 << 32), min(255, count - start)),
             4 * min(255, count - start)) for start in range(0, count, 255)]
