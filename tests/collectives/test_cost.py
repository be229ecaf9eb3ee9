"""``golden.collective_cost``: the pipelined model against cycles derived by hand for small
schedules (one push, a chain cut into chunks, a reduce, the DMA's slots), against the lockstep
alpha-beta model where the two must agree, and its refusal of bad input. How close it comes to
the RTL is measured by ``tpu-rtl system bench`` (docs/system.md), not here."""

import pytest

from golden import collectives, topology
from golden.collective_cost import (CostParams, deals_by_direction, dealing_order,
                                    piece_range, pipelined_cycles, waits_once)


def _copy(step, src, dst, port, words, *, op="copy", start=0, links=None):
    """A transfer out of ``src``'s torus port ``port`` (one hop), or over ``links``."""
    return collectives.Transfer(step=step, src=src, dst=dst,
                                links=links or ((src, port),), axis=1,
                                direction=1, shard=0, op=op,
                                src_ranges=((start, start + words),),
                                dst_ranges=((start, start + words),))


#: B = 4: a flit a cycle.
PLAIN = dict(link_bytes_per_cycle=4, header_flits=0)


def test_a_one_word_push_lands_alpha_after_its_issue():
    params = CostParams(alpha=39, **PLAIN | dict(header_flits=2), fill_cycles=1)
    assert pipelined_cycles([_copy(0, 0, 1, 2, 1)], params=params) == 39


def test_a_long_push_fills_its_first_packet_then_streams():
    # 256 words: the first packet's 64 words are read (64 cycles), then 4 packets of
    # 2 + 64 flits leave (264 cycles); the last word lands alpha - 4 after the last flit
    # (a one-word push: 1 cycle of fill and 3 flits before its latency).
    params = CostParams(alpha=39, link_bytes_per_cycle=4, header_flits=2, fill_cycles=1)
    assert pipelined_cycles([_copy(0, 0, 1, 2, 256)], params=params) == 64 + 264 + 35


def test_chunks_pipeline_a_forwarding_chain():
    # Chip 0 sends 128 words to chip 1, which forwards them to chip 2. Latency after the
    # last flit is alpha - 1 = 9. Whole: 2 * (128 + 9) = 274. In 2 chunks of 64: chip 1
    # forwards the first half while the second arrives: 3 * 64 + 2 * 9 = 210.
    chain = [_copy(0, 0, 1, 2, 128), _copy(1, 1, 2, 2, 128)]
    params = CostParams(alpha=10, **PLAIN)
    assert pipelined_cycles(chain, params=params) == 274
    assert pipelined_cycles(chain, chunks=2, params=params) == 210


def test_a_reduce_costs_its_groups_and_lines_after_the_wait():
    # 20 lines of 8 words: 2 groups of 8 and 4 lines left over, after the 160 words land
    # (160 flits, then alpha - 1) and the event's own cycles.
    params = CostParams(alpha=39, **PLAIN, group_cycles=31, line_cycles=7, event_cycles=5)
    cycles = pipelined_cycles([_copy(0, 0, 1, 2, 160, op="reduce")], params=params)
    assert cycles == 160 + 38 + 5 + 2 * 31 + 4 * 7


def test_reduce_align_pads_the_last_group_and_cuts_pieces_in_groups():
    # 20 lines again, aligned to groups of 8: 3 whole groups, no line left over.
    params = CostParams(alpha=39, **PLAIN, group_cycles=31, line_cycles=7, event_cycles=5,
                        reduce_align=8)
    cycles = pipelined_cycles([_copy(0, 0, 1, 2, 160, op="reduce")], params=params)
    assert cycles == 160 + 38 + 5 + 3 * 31


def test_piece_range_cuts_whole_units_and_counts_a_short_last_one():
    assert [piece_range(0, 160, k, 3, 64) for k in range(3)] == [(0, 64), (64, 128),
                                                                  (128, 160)]
    assert [piece_range(0, 64, k, 2, 64) for k in range(2)] == [(0, 0), (0, 64)]
    assert [piece_range(8, 24, k, 2, 8) for k in range(2)] == [(8, 16), (16, 24)]


def test_a_full_dma_holds_the_next_issue_until_a_push_has_left():
    # Two 64-word pushes to two neighbours on two ports go side by side (64 cycles); with
    # one DMA slot the second is issued when the first has left (128).
    both = [_copy(0, 0, 1, 2, 64), _copy(0, 0, 3, 3, 64)]
    free = CostParams(alpha=1, **PLAIN, ports=2)
    one = CostParams(alpha=1, **PLAIN, ports=2, dma_slots=1)
    assert pipelined_cycles(both, params=free) == 64
    assert pipelined_cycles(both, params=one) == 128


def test_a_push_in_its_ports_queue_frees_its_dma_slot():
    # As above with one DMA slot, but each port queues 64 words: the first push is in its
    # queue 8 cycles after it is taken (8 lines of 8 words), which frees the slot, and
    # the second goes at 8.
    both = [_copy(0, 0, 1, 2, 64), _copy(0, 0, 3, 3, 64)]
    queued = CostParams(alpha=1, **PLAIN, ports=2, dma_slots=1, queue_words=64)
    assert pipelined_cycles(both, params=queued) == 72


def test_a_full_push_queue_stalls_the_dma_for_every_port():
    # Four 64-word pushes, dealt to ports 0, 1, 0, 1, each port queueing 64 words. The
    # third waits until the first has left port 0's queue (64), and the DMA with it: the
    # fourth is queued at 72, when the second has left port 1, and sends over 72..136.
    # Without queues the DMA is never held, and both ports finish at 128.
    pushes = [_copy(0, 0, 1, 2, 64), _copy(0, 0, 3, 3, 64),
              _copy(0, 0, 1, 2, 64, start=64), _copy(0, 0, 3, 3, 64, start=64)]
    assert pipelined_cycles(pushes, params=CostParams(alpha=1, **PLAIN, ports=2)) == 128
    queued = CostParams(alpha=1, **PLAIN, ports=2, queue_words=64)
    assert pipelined_cycles(pushes, params=queued) == 136


def test_one_port_takes_both_directions_in_turn():
    both = [_copy(0, 0, 1, 2, 64), _copy(0, 0, 3, 3, 64)]
    assert pipelined_cycles(both, params=CostParams(alpha=1, **PLAIN, ports=1)) == 128


def test_arrivals_share_a_receive_port_unless_each_input_has_its_own():
    # Into chip 0 from chip 1 over its +x (arriving on input -x, 1) and from chip 2 over
    # its -y (arriving on input +y, 2). With 2 receive ports both inputs eject on port 1,
    # one push after the other (128); with 4, each on its own (64).
    both = [_copy(0, 1, 0, 0, 64), _copy(0, 2, 0, 3, 64)]
    assert pipelined_cycles(both, params=CostParams(alpha=1, **PLAIN, ports=2)) == 128
    assert pipelined_cycles(both, params=CostParams(alpha=1, **PLAIN, ports=4)) == 64


def test_a_push_fills_the_idle_cycles_of_a_shared_link():
    # Chip 0 pushes 64 words to chip 1 at 0 and, its second descriptor 96 cycles later on
    # its other port, 64 more: link (0, 2) carries them over 0..64 and 96..160. Chip 1's
    # 64 words to chip 2 over link (1, 3) and then (0, 2), ready at 0, take that link's
    # idle 64..96 and 160..192, and land at 192 (latency 0 here).
    transfers = [_copy(0, 0, 1, 2, 64), _copy(0, 0, 1, 2, 64, start=64),
                 _copy(0, 1, 2, 3, 64, links=((1, 3), (0, 2)))]
    params = CostParams(alpha=1, **PLAIN, ports=2, descriptor_cycles=96)
    assert pipelined_cycles(transfers, params=params) == 192


def test_a_port_is_held_until_its_route_has_carried_the_push():
    # Chip 0's 64 words hold link (0, 2) over 0..64. Chip 1, with one port, pushes 64
    # words over (1, 3) and then (0, 2): that link carries them over 64..128, and the
    # port takes its next push, 64 words out of (1, 2), only then: it lands at 192.
    transfers = [_copy(0, 0, 1, 2, 64), _copy(0, 1, 2, 3, 64, links=((1, 3), (0, 2))),
                 _copy(0, 1, 3, 2, 64, start=64)]
    assert pipelined_cycles(transfers, params=CostParams(alpha=1, **PLAIN)) == 192


def test_an_all_to_all_waits_once():
    # Every chip receives three blocks in one receive event, as its program waits once.
    transfers = collectives.schedule("all_to_all", "1x4", (4, 4, 64))
    quick = pipelined_cycles(transfers, params=CostParams(alpha=1, **PLAIN, ports=2))
    slow = pipelined_cycles(transfers, params=CostParams(alpha=1, **PLAIN, ports=2,
                                                         event_cycles=1000))
    assert slow - quick == 1000


def test_pushes_are_dealt_chunk_by_chunk_and_in_turn_within_a_chunk():
    pushes = [["a0", "a1"], ["b0", "b1"], ["c0"]]
    assert dealing_order(pushes, [1, 0, 1]) == ["b0", "b1", "a0", "c0", "a1"]
    assert dealing_order(pushes, [0, 0, 0]) == ["a0", "b0", "c0", "a1", "b1"]


def test_pushes_dealt_by_direction_keep_each_port_to_a_class_of_first_hops():
    # Pieces a and d leave by torus port 0, c by 2 (the same class of 2 push ports), b by 1;
    # one push went before, so the first of these goes on push port 1.
    pushes = [["a0", "a1", "a2"], ["b0"], ["c0", "c1"], ["d0"]]
    kw = dict(ports=[0, 1, 2, 0], dealt=1)
    # Port 1 takes b0, port 0 a0; then class 1 has none left and class 0 gives its next,
    # in turn among its pieces: c0, d0, a1, c1, a2.
    assert dealing_order(pushes, [0] * 4, push_ports=2, **kw) == \
        ["b0", "a0", "c0", "d0", "a1", "c1", "a2"]
    # One push port: in turn, as without ports.
    assert dealing_order(pushes, [0] * 4, push_ports=1, **kw) == \
        dealing_order(pushes, [0] * 4) == ["a0", "b0", "c0", "d0", "a1", "c1", "a2"]


def test_only_a_direct_all_to_all_waits_once_and_only_transfers_along_axes_deal_by_direction():
    assert waits_once(collectives.schedule("all_to_all", "1x4", (4, 4, 8)))
    assert not waits_once(collectives.schedule("all_to_all", "4x4", (16, 16, 8)))
    assert not waits_once(collectives.schedule("all_gather", "1x4", (4, 8)))
    assert deals_by_direction(collectives.schedule("all_to_all", "4x4", (16, 16, 8)))
    assert deals_by_direction(collectives.schedule("all_reduce", "4x4", (16, 256)))
    assert deals_by_direction(collectives.schedule("all_gather", "2x2x2", (8, 64)))
    assert not deals_by_direction(collectives.schedule("all_to_all", "1x4", (4, 4, 8)))
    failed = topology.torus((4, 4), failed=(5,))
    assert not deals_by_direction(collectives.schedule("all_reduce", failed, (15, 256)))


def test_lockstep_ring_copies_agree_with_the_alpha_beta_model():
    # With no reduce, fill, headers or DMA cost, one chunk, and a port per direction, each
    # all-gather step on the ring is alpha + its bytes / B, less the one flit alpha
    # already counts.
    transfers = collectives.schedule("all_gather", "1x4", (4, 512))
    steps = len({tr.step for tr in transfers})
    assert steps == 3
    lockstep = collectives.alpha_beta_cycles(transfers, "1x4", alpha=39,
                                             link_bytes_per_cycle=4)
    params = CostParams(alpha=39, **PLAIN, ports=2)
    assert pipelined_cycles(transfers, params=params) == lockstep - steps


@pytest.mark.parametrize("change, error, message", [
    (dict(alpha=-1), ValueError, "alpha must be >= 0"),
    (dict(alpha="1"), TypeError, "alpha must be a number"),
    (dict(link_bytes_per_cycle=0), ValueError, "link_bytes_per_cycle must be > 0"),
    (dict(ports=0), ValueError, "ports must be >= 1"),
    (dict(ports=1.5), TypeError, "ports must be an integer"),
    (dict(push_words=0), ValueError, "push_words must be >= 1"),
    (dict(dma_slots=True), TypeError, "dma_slots must be an integer"),
    (dict(header_flits=-1), ValueError, "header_flits must be >= 0"),
    (dict(queue_words=-1), ValueError, "queue_words must be >= 0"),
    (dict(queue_words=8.0), TypeError, "queue_words must be an integer"),
])
def test_bad_constants_are_refused(change, error, message):
    with pytest.raises(error, match=message):
        CostParams(**dict(alpha=1, link_bytes_per_cycle=4) | change)


def test_bad_chunks_and_params_are_refused():
    transfers = [_copy(0, 0, 1, 2, 8)]
    params = CostParams(alpha=1, link_bytes_per_cycle=4)
    with pytest.raises(ValueError, match="chunks must be a positive integer"):
        pipelined_cycles(transfers, chunks=0, params=params)
    with pytest.raises(TypeError, match="params must be a CostParams"):
        pipelined_cycles(transfers, params=dict(alpha=1))


def test_a_push_port_queues_64_lines_with_several_ports():
    from sim.system_chip import queue_words
    assert queue_words(dict(network_ports=4, lanes=16)) == 64 * 16
    assert queue_words(dict(network_ports=2, lanes=8)) == 64 * 8
    assert queue_words(dict(network_ports=1, lanes=8)) == 0
