"""How the host's bytes reach a board: a serial port, or the board's simulation."""

import time
from contextlib import contextmanager

__all__ = ["SerialTransport", "SimulatedTransport", "TransportError", "SIM_DIVISOR"]

#: The simulated board's block name in the whole runs' catalogue (``sim.blocks.BLOCKS``:
#: ``hdl.board.board_core.BoardSim``, a simulation top rather than a block for users to
#: export, so it is in the catalogue only while a simulated transport runs it).
SIM_BLOCK = "board"


@contextmanager
def _catalogued():
    from hdl.board.board_core import BoardSim

    from ..blocks import BLOCKS
    had = SIM_BLOCK in BLOCKS
    BLOCKS[SIM_BLOCK] = BoardSim
    try:
        yield
    finally:
        if not had:
            del BLOCKS[SIM_BLOCK]


#: Clock cycles per UART bit in the simulated board (the UART's least): a byte each 40
#: cycles, so a run's loads take thousands of cycles, not millions.
SIM_DIVISOR = 4


class TransportError(RuntimeError):
    """The board did not answer as the frames asked (a short answer, a lost byte)."""


class SerialTransport:
    """A board on a serial port (pyserial): ``port`` such as ``/dev/ttyUSB0``, 8N1 at
    ``baud``. Opening it is the constructor's first act; a port that cannot be opened
    raises ValueError naming it. Use as a context manager, or :meth:`close`."""

    def __init__(self, port, *, baud=115_200, timeout=2.0):
        import serial
        if not isinstance(port, str) or not port:
            raise ValueError(f"port must be a serial port's name, not {port!r}")
        self.baud, self.timeout = baud, timeout
        try:
            self.serial = serial.Serial(port, baud, timeout=timeout)
        except (serial.SerialException, OSError) as error:
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise ValueError(f"port {port!r} cannot be opened: {reason}") from None
        self.serial.reset_input_buffer()

    def transact(self, segments):
        """Each of ``segments`` in turn, ``(send, receive)``: send the bytes ``send``, then
        read the ``receive`` bytes they are answered with, before the next (the bridge's
        receive queue holds 16 bytes, so a host waits for each read's answer, as
        ``litex_server`` does). Returns the answers, joined."""
        return b"".join(self.exchange(send, receive) for send, receive in segments)

    def exchange(self, send, receive):
        """Send ``send`` (bytes), then read the ``receive`` bytes its reads answer."""
        self.serial.write(send)
        # The answers come after what is sent, at the line's rate, plus the target's waits.
        self.serial.timeout = self.timeout + 10 * (len(send) + receive) / self.baud
        answer = self.serial.read(receive)
        if len(answer) != receive:
            raise TransportError(f"the board answered {len(answer)} of {receive} bytes "
                                 f"within {self.serial.timeout:.1f} s")
        return answer

    def close(self):
        self.serial.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class SimulatedTransport:
    """The board's simulation (``hdl.board.board_core.BoardSim``: the bridge and the proto
    chip, the board's RTL, at a UART divisor of :data:`SIM_DIVISOR`), fed the host's bytes
    in a whole run: no Python per cycle, one compiled build per ``chip`` (a preset's name,
    or ``TensorCoreSystem`` parameters) and backend.

    A simulation cannot be paused for the host to think, so every :meth:`transact` runs
    the board from reset on everything sent so far, and returns the answers to the bytes
    sent last (the same design and bytes give the same answers, cycle for cycle). A host
    that sends a whole job at once (load, start, wait, read back) runs it once. The
    simulated host waits for each segment's answer before it sends the next (the
    board's await beats), as a host on a serial port does.
    """

    def __init__(self, *, chip="proto", backend="verilator", watchdog=200_000,
                 wait_cycles=1 << 22, progress=None):
        from ..backends import check_backend
        check_backend(backend)
        self.params = {"chip": chip, "divisor": SIM_DIVISOR, "wait_cycles": wait_cycles}
        self.backend, self.watchdog, self.progress = backend, watchdog, progress
        self.sent, self.answered, self.owed = [], 0, 0
        self.cycles = 0             # the last run's length
        self.seconds = 0.0

    def exchange(self, send, receive):
        """Send ``send`` (bytes), then receive the ``receive`` bytes of its answers."""
        return self.transact([(send, receive)])

    def transact(self, segments):
        """Each of ``segments``, ``(send, receive)``: send the bytes, then wait for the
        ``receive`` bytes of their answers; all in one run. Returns the answers, joined."""
        from ..backends import run_whole
        from ..backends.whole_run import WholeRun
        for send, answer in segments:
            self.queue(send, answer)
        total = self.answered + self.owed
        run = WholeRun(SIM_BLOCK, self.params, play={"host_tx": self.sent},
                       record={"host_rx": total}, busy="busy", watchdog=self.watchdog)
        began = time.perf_counter()
        with _catalogued():
            result = run_whole(run, backend=self.backend, progress=self.progress)
        self.seconds += time.perf_counter() - began
        self.cycles = result.cycles
        if result.outputs.get("overruns"):
            raise TransportError(f"the simulated host lost {result.outputs['overruns']} "
                                 f"bytes of the board's answers")
        answer = bytes(result.recorded["host_rx"][self.answered:])
        self.answered, self.owed = total, 0
        return answer

    def queue(self, send, receive):
        """Add ``send`` and a wait for its ``receive`` bytes of answers to what the next
        :meth:`transact` runs, without running."""
        from hdl.board.board_core import BoardSim
        if receive % 4:
            raise ValueError(f"an answer is whole 4-byte words, not {receive} bytes")
        self.sent += list(bytes(send))
        words = receive // 4
        while words > 0:
            self.sent.append(BoardSim.CONTROL | BoardSim.AWAIT | min(words, 127))
            words -= 127
        self.owed += receive

    def pause(self, cycles):
        """Leave the line idle for at least ``cycles`` clock cycles before what is sent
        next (in the board's pause beats: ``hdl.board.board_core.BoardSim``)."""
        from hdl.board.board_core import BoardSim
        units = -(-cycles // BoardSim.PAUSE_CYCLES)
        while units > 0:
            self.sent.append(BoardSim.CONTROL | min(units, 127))
            units -= 127

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
