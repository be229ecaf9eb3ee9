"""``verif.bench.router_profile``: each output's cause per cycle, by hand-made allocator
values, and the VCD reader on a hand-written waveform."""

import pytest

from verif.bench.router_profile import classify, read_profile, table

from .router_profile_waves import ROUTER_VCD, write_router_vcd


def _head(i, v, *, port, head=1, adapt=0, minimal=0, eligible, request=None):
    values = {f"heads__{i}__{v}.valid": 1, f"heads__{i}__{v}.head": head,
              f"heads__{i}__{v}.port": port, f"heads__{i}__{v}.adapt": adapt,
              f"heads__{i}__{v}.minimal": minimal, f"eligible{i}_{v}": eligible}
    if request is not None:
        values[f"request{i}_{v}.port"] = request
    return values


def test_each_cause_by_hand():
    """Output 0 sends. Input 1's VC 1 is eligible for output 1 but its input sent VC 0
    (to output 0): output 1 lost at the input. Input 2's adaptive header may go to
    outputs 2 or 3 and has room on neither: both no room. Output 4 has no head for it,
    and input 3's VC 0 is empty (valid 0) although its port names output 4."""
    values = {"send": 0b00001,
              **_head(1, 0, port=0, eligible=1),
              **_head(1, 1, port=3, eligible=1, request=1),
              **_head(2, 0, port=2, adapt=1, minimal=0b01100, eligible=0),
              "heads__3__0.valid": 0, "heads__3__0.port": 4}
    assert classify(values, n_out=5) == ["busy", "lost_at_input", "no_room", "no_room",
                                         "no_demand"]


def test_a_body_flit_and_a_dimension_order_head_want_only_their_port():
    """Without ``adapt`` (dimension order) or for a body flit, only the head's own port
    counts, whatever ``minimal`` says; with no ``request`` the head's port is its
    request. And a sending output is busy even with heads blocked for it."""
    values = {"send": 0b100,
              **_head(0, 0, port=1, adapt=0, minimal=0b0011, eligible=0),
              **_head(0, 1, port=2, head=0, adapt=1, minimal=0b1000, eligible=0)}
    assert classify(values, n_out=4) == ["no_demand", "no_room", "busy", "no_demand"]


def test_an_idle_minimal_port_with_room_is_passed_over():
    """Input 0's adaptive header (minimal ports 1 and 2, needs 4 credits) chose output 1
    and was not granted (output 1 went to input 1). Output 2 has adaptive VC 3 free with
    4 credits: passed over. Output 3 is minimal for it too but its only free adaptive VC
    has 3 credits, and its VC 0 (an escape VC, 9 credits) does not count: no room is not
    claimed for it either, as the header was eligible, so no demand. Had the header been
    granted, output 2 would have been no demand."""
    values = {"send": 0b0010,
              **_head(0, 0, port=1, adapt=1, minimal=0b1110, eligible=1, request=1),
              **_head(1, 0, port=1, eligible=1), "grant__1": 0b1, "grant__0": 0,
              "need0_0": 4, "free2_3": 1, "credits2_3": 4, "free3_2": 1, "credits3_2": 3,
              "free3_0": 1, "credits3_0": 9}
    assert classify(values, n_out=4) == ["no_demand", "busy", "passed_over", "no_demand"]
    assert classify(values | {"grant__0": 0b1}, n_out=4) == ["no_demand", "busy",
                                                              "no_demand", "no_demand"]


def test_the_reader_samples_before_each_rising_edge_in_the_window(tmp_path):
    """Cycles end at the rising edges at 15, 25, 35 and 45. The window opens at 5, so the
    cycle ending at 5 is not counted, and closes at 35 (the cycle ending at 45 is not
    counted). Cycle to 15: nothing (both outputs no demand); to 25: output 0 sends and a
    head waits for output 1 without room; to 35: output 1's head is eligible, output 0
    idle and not wanted; to 45 (all cycles only): output 1 sends, its input granted."""
    vcd = write_router_vcd(tmp_path / "router.vcd")
    profile = read_profile(vcd)
    assert profile.cycles == 3
    assert dict(profile.outputs[("top.node0.router", 0)]) == {"no_demand": 2, "busy": 1}
    assert dict(profile.outputs[("top.node0.router", 1)]) == {
        "no_demand": 1, "no_room": 1, "lost_at_input": 1}
    assert dict(profile.inputs[("top.node0.router", 0)]) == {"head": 2, "eligible": 1}
    every = read_profile(vcd, window=False)
    assert every.cycles == 5
    assert dict(every.outputs[("top.node0.router", 1)]) == {
        "no_demand": 2, "no_room": 1, "lost_at_input": 1, "busy": 1}
    assert dict(every.inputs[("top.node0.router", 0)]) == {"head": 3, "eligible": 2,
                                                           "sent": 1}
    lines = table(profile, torus_ports=1).splitlines()
    assert lines[2] == "| +x | 0.333 | 0.000 | 0.000 | 0.000 | 0.667 |"
    assert lines[3] == "| eject 0 | 0.000 | 0.333 | 0.000 | 0.333 | 0.333 |"
    assert lines[5:] == ["| input | head | eligible | sent |", "|---|---:|---:|---:|",
                         "| +x | 0.667 | 0.333 | 0.000 |"]


def test_the_reader_refuses_a_waveform_without_what_it_needs(tmp_path):
    plain = write_router_vcd(tmp_path / "plain.vcd", ROUTER_VCD.replace("allocator", "other"))
    with pytest.raises(ValueError, match="no router allocator"):
        read_profile(plain)
    windowless = write_router_vcd(tmp_path / "windowless.vcd",
                                  ROUTER_VCD.replace(" window ", " gate "))
    with pytest.raises(ValueError, match="no 'window' signal"):
        read_profile(windowless)
    assert read_profile(windowless, window=False).cycles == 5
    cut = write_router_vcd(tmp_path / "cut.vcd", ROUTER_VCD.split("$enddefinitions")[0])
    with pytest.raises(ValueError, match="not a VCD"):
        read_profile(cut)
