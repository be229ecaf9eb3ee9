"""golden.uartbone: the host's UARTBone frames, against byte strings written by hand."""

import numpy as np
import pytest

from golden import uartbone


def test_a_write_frame():
    frame = uartbone.write_frame(0x0000_0010, np.array([0x11223344, 0xDEADBEEF], np.uint32))
    assert frame == bytes.fromhex("01 02 00000010 11223344 deadbeef")


def test_a_read_frame_and_its_answer():
    assert uartbone.read_frame(0x4000_0001, 3) == bytes.fromhex("02 03 40000001")
    answer = bytes.fromhex("54505531 00000000 ffffffff")
    assert uartbone.words(answer).tolist() == [0x54505531, 0, 0xFFFF_FFFF]
    assert uartbone.answer_bytes([0x54505531, 0, 0xFFFF_FFFF]) == answer


def test_long_transfers_split_into_frames_of_255_words():
    values = np.arange(300, dtype=np.uint32)
    frames = uartbone.write(0xFFFF_FFF0, values)
    first = bytes.fromhex("01 ff fffffff0") + b"".join(
        int(v).to_bytes(4, "big") for v in range(255))
    second = bytes.fromhex("01 2d 000000ef") + b"".join(   # 0xFFFFFFF0 + 255 wraps to 0xEF
        int(v).to_bytes(4, "big") for v in range(255, 300))
    assert frames == first + second
    assert uartbone.read(7, 256) == bytes.fromhex("02 ff 00000007 02 01 00000106")


@pytest.mark.parametrize("call, error, message", [
    (lambda: uartbone.write_frame(0, []), ValueError, "non-empty"),
    (lambda: uartbone.write_frame(0, np.zeros(256, np.uint32)), ValueError, "1 to 255"),
    (lambda: uartbone.write_frame(1 << 32, [1]), ValueError, "addr"),
    (lambda: uartbone.write_frame(0, [1 << 32]), ValueError, "2\\*\\*32"),
    (lambda: uartbone.write_frame(0, [1.5]), TypeError, "integers"),
    (lambda: uartbone.read_frame(0, 0), ValueError, "count"),
    (lambda: uartbone.read_frame(-1, 1), ValueError, "addr"),
    (lambda: uartbone.read(0, True), TypeError, "count"),
    (lambda: uartbone.words(b"\x00\x01\x02"), ValueError, "4-byte"),
])
def test_bad_input_is_a_one_line_error(call, error, message):
    with pytest.raises(error, match=message):
        call()
