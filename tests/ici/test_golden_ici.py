"""golden.ici: hand-worked bit positions, exact round trips, malformed headers named, and
the push packetizer against a word-by-word receiver written here."""

import hypothesis
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from golden import ici, memory
from golden.memory import Descriptor


def property_test(seed, strategy, check, examples):
    """Run a hypothesis property seeded by the run's seed, so --seed reproduces it."""
    hypothesis.seed(seed)(settings(max_examples=examples, database=None, deadline=None)(
        given(strategy)(check)))()


def u32(*words):
    return np.array(words, np.uint32)


# ---------------------------------------------------------------- the layout, by hand

def test_field_table():
    """The module docstring's tables, restated: (word, lo, width) of every field."""
    expected = {"opcode": (0, 0, 2), "vc": (0, 2, 2), "dst": (0, 4, 8), "src": (0, 12, 8),
                "length": (0, 20, 9), "pad": (0, 29, 3),
                "address": (1, 0, 24), "flag": (1, 24, 7), "space": (1, 31, 1)}
    assert {f.name: (f.word, f.lo, f.width) for f in ici.FIELDS} == expected
    for word in (0, 1):                   # the fields tile each header word exactly
        masks = [((1 << w) - 1) << lo for wd, lo, w in expected.values() if wd == word]
        assert sum(masks) == 0xFFFFFFFF and np.bitwise_or.reduce(masks) == 0xFFFFFFFF
    assert ici.OPCODES == {"write": 1, "flag_add": 2}
    assert (ici.MAX_LENGTH, ici.MAX_FLIT_WORDS, ici.MAX_VCS) == (511, 8, 4)


def test_write_bits_hand_worked():
    flits = ici.encode_write(dst=5, src=3, vc=1, space="vmem", address=0x1234, flag=9,
                             data=u32(0xDEADBEEF, 0, 7))
    assert flits.dtype == np.uint32 and flits.shape == (5, 1)
    # route: length 5 <<20 | src 3 <<12 | dst 5 <<4 | vc 1 <<2 | opcode 1
    # target: space 1 <<31 | flag 9 <<24 | address 0x1234
    assert flits.ravel().tolist() == [0x00503055, 0x89001234, 0xDEADBEEF, 0, 7]


def test_flag_add_bits_hand_worked():
    flits = ici.encode_flag_add(dst=2, src=7, vc=3, flag=5, amount=1000)
    # route: length 2 <<20 | src 7 <<12 | dst 2 <<4 | vc 3 <<2 | opcode 2
    assert flits.ravel().tolist() == [0x0020702E, 0x050003E8]


def test_wide_flits_pad_the_last_one():
    flits = ici.encode_write(dst=255, src=0, space="hbm", address=0xFFFFFF - 2, flag=127,
                             data=u32(1, 2, 3), flit_words=4)
    assert flits.shape == (2, 4)
    # pad 3 <<29 | length 2 <<20 | dst 255 <<4 | opcode 1
    assert flits.ravel().tolist() == [0x60200FF1, 0x7FFFFFFD, 1, 2, 3, 0, 0, 0]
    one = ici.encode_flag_add(dst=1, src=1, flag=0, amount=0, flit_words=2)
    assert one.shape == (1, 2) and one[0, 0] == 0x00101012


def test_max_payload():
    assert ici.max_payload(1) == 509 and ici.max_payload(8) == 511 * 8 - 2
    longest = ici.encode_write(dst=0, src=0, space="hbm", address=0, flag=0,
                               data=np.zeros(509, np.uint32))
    assert longest.shape == (511, 1)
    with pytest.raises(ValueError, match="needs 512 flits, more than 511"):
        ici.encode_write(dst=0, src=0, space="hbm", address=0, flag=0,
                         data=np.zeros(510, np.uint32))


# ---------------------------------------------------------------- round trips

@st.composite
def packet_strategy(draw):
    fw = draw(st.integers(1, 8))
    common = dict(dst=draw(st.integers(0, 255)), src=draw(st.integers(0, 255)),
                  vc=draw(st.integers(0, 3)), flag=draw(st.integers(0, 127)), flit_words=fw)
    if draw(st.booleans()):
        return "flag_add", dict(common, amount=draw(st.integers(0, 2**24 - 1)))
    n = draw(st.integers(1, min(40, ici.max_payload(fw))))
    words = draw(st.lists(st.integers(0, 2**32 - 1), min_size=n, max_size=n))
    return "write", dict(common, space=draw(st.sampled_from(["hbm", "vmem"])),
                         address=draw(st.integers(0, 2**24 - n)), data=u32(*words))


def test_round_trip_property(seed):
    def check(case):
        opcode, kw = case
        encode = ici.encode_write if opcode == "write" else ici.encode_flag_add
        flits = encode(**kw)
        fw = kw["flit_words"]
        header_and_data = 2 + (len(kw["data"]) if opcode == "write" else 0)
        assert flits.shape == (-(-header_and_data // fw), fw) and flits.dtype == np.uint32
        p = ici.decode(flits, n_chips=256, vcs=4)
        assert (p.opcode, p.dst, p.src, p.vc, p.flag) == \
            (opcode, kw["dst"], kw["src"], kw["vc"], kw["flag"])
        if opcode == "write":
            assert (p.space, p.address, p.amount) == (kw["space"], kw["address"], len(kw["data"]))
            assert p.data.dtype == np.uint32 and p.data.tolist() == kw["data"].tolist()
        else:
            assert (p.space, p.address, p.amount, len(p.data)) == (None, None, kw["amount"], 0)
        h = ici.decode_header(flits[0, 0], flit_words=fw)
        assert (h.opcode, h.dst, h.vc, h.length) == (opcode, kw["dst"], kw["vc"], len(flits))
        # and back again: the same flits
        again = (ici.encode_write(dst=p.dst, src=p.src, vc=p.vc, space=p.space,
                                  address=p.address, flag=p.flag, data=p.data, flit_words=fw)
                 if opcode == "write" else
                 ici.encode_flag_add(dst=p.dst, src=p.src, vc=p.vc, flag=p.flag,
                                     amount=p.amount, flit_words=fw))
        assert np.array_equal(again, flits)
    property_test(seed, packet_strategy(), check, examples=300)


def test_decoded_data_is_a_read_only_copy():
    flits = ici.encode_write(dst=0, src=0, space="hbm", address=0, flag=0, data=u32(4))
    p = ici.decode(flits)
    flits[2, 0] = 9
    assert p.data.tolist() == [4] and not p.data.flags.writeable


# ---------------------------------------------------------------- malformed headers

def _with_word0(word0, rest=(0x00000010, 1)):
    return u32(word0, *rest).reshape(-1, 1)


@pytest.mark.parametrize("flits, kwargs, match", [
    (_with_word0(0x00300050), {}, "field 'opcode' = 0: not 1 \\(write\\) or 2"),
    (_with_word0(0x00300053), {}, "field 'opcode' = 3"),
    (_with_word0(0x00000051), {}, "field 'length' = 0: a packet has at least one flit"),
    (_with_word0(0x00400051), {}, "field 'length' = 4: the packet has 3 flits"),
    (_with_word0(0x00200051, rest=(0x10,)), {}, "field 'length' = 2: a write carries at least"),
    (_with_word0(0x00300052), {}, "field 'length' = 3: a flag_add is 2 words, not 3"),
    (_with_word0(0x20300051), {}, "field 'pad' = 1: must be below flit_words = 1"),
    (_with_word0(0x00300051), dict(n_chips=5), "field 'dst' = 5: must be below 5"),
    (_with_word0(0x00305041), dict(n_chips=5), "field 'src' = 5: must be below 5"),
    (_with_word0(0x0030005D), dict(vcs=2), "field 'vc' = 3: must be below 2"),
    (_with_word0(0x00200052, rest=(0x80000000,)), {}, "field 'space' = 1: must be 0 in a flag"),
    (u32(0x20200051, 0, 5, 9).reshape(2, 2), {}, "field 'pad' = 1: the pad words must be zero"),
    (_with_word0(0x00400051, rest=(0x00FFFFFF, 1, 2)), {},
     "field 'address' = 16777215: a 2-word write passes"),
])
def test_malformed_packets_name_the_field(flits, kwargs, match):
    with pytest.raises(ValueError, match="malformed ICI header: " + match):
        ici.decode(flits, **kwargs)


def test_wellformed_variants_of_the_malformed_cases_decode():
    """Each malformed case above is one field away from a packet that decodes."""
    assert ici.decode(_with_word0(0x00300051)).data.tolist() == [1]
    assert ici.decode(_with_word0(0x00300051), n_chips=6, vcs=1).dst == 5
    assert ici.decode(_with_word0(0x00200052, rest=(0x7FFFFFFF,))).amount == 0xFFFFFF
    assert ici.decode(u32(0x20200051, 0, 5, 0).reshape(2, 2)).data.tolist() == [5]


@pytest.mark.parametrize("flits, match", [
    (np.zeros((2, 1), np.int32), "2-D numpy uint32"),
    (np.zeros(3, np.uint32), "2-D numpy uint32"),
    ([[0x00300051], [0], [1]], "2-D numpy uint32"),
    (np.zeros((0, 1), np.uint32), "at least one flit"),
    (np.zeros((1, 9), np.uint32), r"flit_words is 9, outside \[1, 9\)"),
])
def test_decode_rejects_bad_arrays(flits, match):
    with pytest.raises(ValueError, match=match):
        ici.decode(flits)


@pytest.mark.parametrize("kwargs, match", [
    (dict(dst=256), r"dst is 256, outside \[0, 256\)"),
    (dict(src=-1), "src is -1"),
    (dict(vc=4), "vc is 4"),
    (dict(flag=128), "flag is 128"),
    (dict(space="smem"), "space must be one of"),
    (dict(address=2**24 - 1, data=u32(1, 2)), "passes address 16777216"),
    (dict(address=1.0), "address must be an integer"),
    (dict(data=np.zeros(0, np.uint32)), "at least one data word"),
    (dict(data=np.zeros(2, np.int64)), "1-D numpy uint32"),
    (dict(flit_words=0), "flit_words is 0"),
])
def test_encode_write_rejects_bad_input(kwargs, match):
    args = dict(dst=0, src=0, space="hbm", address=0, flag=0, data=u32(1))
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        ici.encode_write(**args)


def test_encode_flag_add_rejects_bad_input():
    with pytest.raises(ValueError, match=r"amount is 16777216, outside"):
        ici.encode_flag_add(dst=0, src=0, flag=0, amount=2**24)
    with pytest.raises(ValueError, match="flag must be an integer, not a bool"):
        ici.encode_flag_add(dst=0, src=0, flag=True, amount=1)


# ---------------------------------------------------------------- the push packetizer

def ref_dst_addresses(base, counts, strides):
    pad = 3 - len(counts)
    c, d = list(counts) + [1] * pad, list(strides) + [0] * pad
    return [base + i0 * d[0] + i1 * d[1] + i2 * d[2]
            for i2 in range(c[2]) for i1 in range(c[1]) for i0 in range(c[0])]


def receive(packets, *, words, n_flags, n_chips):
    """A word-by-word receiver over dicts: packets land in order."""
    mem = {(s, a): 0 for s in ("hbm", "vmem") for a in range(words)}
    flags = [0] * n_flags
    for flits in packets:
        p = ici.decode(flits, n_chips=n_chips)
        assert p.opcode == "write"
        for j, w in enumerate(p.data.tolist()):
            assert (p.space, p.address + j) in mem
            mem[p.space, p.address + j] = w
        flags[p.flag] += p.amount
    return mem, flags


def test_push_packets_hand_worked():
    d = Descriptor(("hbm", 2), ("remote", 1, "vmem", 3), (3, 2), (1, 4), (1, 8), 1)
    data = u32(2, 3, 4, 6, 7, 8)
    got = [ici.decode(f) for f in ici.push_packets(d, data, src_chip=4, max_payload_words=2)]
    assert [(p.dst, p.src, p.space, p.address, p.flag, p.data.tolist()) for p in got] == [
        (1, 4, "vmem", 3, 1, [2, 3]), (1, 4, "vmem", 5, 1, [4]),
        (1, 4, "vmem", 11, 1, [6, 7]), (1, 4, "vmem", 13, 1, [8])]


def test_push_packets_zero_stride_one_word_each():
    d = Descriptor(("hbm", 0), ("remote", 0, "hbm", 9), (3,), (1,), (0,), 0)
    got = [ici.decode(f) for f in ici.push_packets(d, u32(5, 6, 7), src_chip=1,
                                                   max_payload_words=8, vc=2, flit_words=2)]
    assert [(p.address, p.vc, p.data.tolist()) for p in got] == [(9, 2, [5]), (9, 2, [6]),
                                                                 (9, 2, [7])]


def test_push_packets_match_element_order_random(rng):
    words, n_flags, n_chips = 64, 8, 4
    for _ in range(150):
        ndim = int(rng.integers(1, 4))
        counts = tuple(int(c) for c in rng.integers(1, 6, ndim))
        strides = tuple(int(s) for s in rng.choice([-3, -1, 0, 1, 1, 1, 2, 5], ndim))
        dst_addr = ref_dst_addresses(0, counts, strides)
        base = -min(dst_addr) + int(rng.integers(0, 4))       # keep it in range
        space, chip, flag = ("hbm", "vmem")[int(rng.integers(2))], int(rng.integers(n_chips)), \
            int(rng.integers(n_flags))
        d = Descriptor(("hbm", 0), ("remote", chip, space, base), counts, (0,) * ndim, strides,
                       flag)
        n = len(dst_addr)
        data = rng.integers(0, 2**32, n, dtype=np.uint32)
        limit, fw = int(rng.integers(1, 7)), int(rng.integers(1, 5))
        packets = ici.push_packets(d, data, src_chip=3, max_payload_words=limit, flit_words=fw)
        decoded = [ici.decode(f) for f in packets]
        # in element order, each packet a run of consecutive addresses, each run maximal
        flat = [(p.address + j, w) for p in decoded for j, w in enumerate(p.data.tolist())]
        assert flat == list(zip([base + a for a in dst_addr], data.tolist()))
        assert all(p.dst == chip and p.src == 3 and 1 <= p.amount <= limit for p in decoded)
        for p, q in zip(decoded, decoded[1:]):
            assert p.amount == limit or q.address != p.address + p.amount
        # landing the packets equals writing the elements one by one
        mem, flags = receive(packets, words=words + 40, n_flags=n_flags, n_chips=n_chips)
        ref = {(s, a): 0 for s in ("hbm", "vmem") for a in range(words + 40)}
        for a, w in zip(dst_addr, data.tolist()):
            ref[space, base + a] = w
        assert mem == ref
        assert flags == [n if f == flag else 0 for f in range(n_flags)]


def test_push_packets_land_like_golden_memory(rng):
    """The packets of a golden.memory push, landed in order, equal golden.memory.land."""
    hbm = rng.integers(0, 2**32, 48, dtype=np.uint32)
    vmem = rng.integers(0, 2**32, 32, dtype=np.uint32)
    descs = [Descriptor(("hbm", 40), ("remote", 1, "vmem", 30), (4, 2), (-2, 1), (-1, -8), 2),
             Descriptor(("vmem", 0), ("remote", 1, "hbm", 5), (3, 3), (1, 3), (1, 0), 1)]
    sent = memory.run(hbm, vmem, descs, n_flags=4, n_chips=2)
    assert sent.errors == [] and len(sent.pushes) == 2
    packets = [f for p in sent.pushes
               for f in ici.push_packets(p.descriptor, p.data, src_chip=0, max_payload_words=3)]
    mem, flags = receive(packets, words=48, n_flags=4, n_chips=2)
    zeros = (np.zeros(48, np.uint32), np.zeros(32, np.uint32), np.zeros(4, np.uint32))
    l_hbm, l_vmem, l_flags = memory.land(*zeros, sent.pushes)
    assert [mem["hbm", a] for a in range(48)] == l_hbm.tolist()
    assert [mem["vmem", a] for a in range(32)] == l_vmem.tolist()
    assert flags == l_flags.tolist() == [0, 9, 8, 0]


@pytest.mark.parametrize("desc, data, kwargs, match", [
    (Descriptor(("hbm", 0), ("vmem", 0), (2,), (1,), (1,), 0), u32(1, 2), {},
     "remote dst"),
    (Descriptor(("hbm", 0), ("remote", 1, "vmem", 0), (2,), (1,), (1,), 0), u32(1), {},
     "the descriptor's 2 words"),
    (Descriptor(("hbm", 0), ("remote", 1, "vmem", 0), (2,), (1,), (1,), 0), u32(1, 2),
     dict(max_payload_words=0), r"max_payload_words is 0, outside \[1, 510\)"),
    (Descriptor(("hbm", 0), ("remote", 1, "vmem", 0), (2,), (1,), (-1,), 0), u32(1, 2), {},
     r"run outside \[0, 16777216\)"),
    (Descriptor(("hbm", 0), ("remote", 1, "vmem", 0), (2,), (1,), (1,), 0), u32(1, 2),
     dict(src_chip=256), "src is 256"),
])
def test_push_packets_rejects_bad_input(desc, data, kwargs, match):
    args = dict(src_chip=0, max_payload_words=4)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        ici.push_packets(desc, data, **args)
