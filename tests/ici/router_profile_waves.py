"""A hand-written waveform of one router's allocator, for the router profile's tests
(``tests/ici/test_router_profile.py``, ``tests/system/test_network_cli.py``): two outputs,
one input VC, a clock rising at 5, 15, ..., 45, and the measurement window. Kept as text
and written where a test wants it, so that no waveform is tracked in the repository."""

__all__ = ["ROUTER_VCD", "write_router_vcd"]

ROUTER_VCD = """$timescale 1ps $end
$scope module top $end
$var wire 1 w window $end
$scope module node0 $end
$scope module router $end
$scope module allocator $end
$var wire 1 c clk $end
$var wire 2 s send $end
$var wire 1 v heads__0__0.valid $end
$var wire 1 h heads__0__0.head $end
$var wire 4 p heads__0__0.port $end
$var wire 1 e eligible0_0 $end
$var wire 1 g grant__0 $end
$upscope $end
$upscope $end
$upscope $end
$upscope $end
$enddefinitions $end
#0
0c
0w
b00 s
0v
0h
b0000 p
0e
0g
#5
1c
1w
#10
0c
#15
1c
b01 s
1v
1h
b0001 p
#20
0c
#25
1c
b00 s
1e
#30
0c
#35
1c
0w
b10 s
1g
#40
0c
#45
1c
"""


def write_router_vcd(path, text=ROUTER_VCD):
    """Write ``text`` (the waveform, or a test's variant of it) to ``path``; return ``path``."""
    path.write_text(text)
    return path
