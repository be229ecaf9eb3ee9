"""golden.memory against references written here: a plain triple loop for the addresses,
a dict-of-words DMA that moves one word at a time (with a set of faulting words, and the
DMA's reads stepped row by row as its address generator steps them), and a cycle-stepped
HBM."""

import hypothesis
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from golden import memory
from golden.memory import Descriptor, HbmTiming

SPACES = ("hbm", "vmem")


# ---------------------------------------------------------------- references (independent)

def ref_elements(src_base, dst_base, counts, src_strides, dst_strides):
    """(src, dst) address pairs of every element, by a plain triple loop, i0 fastest."""
    pad = 3 - len(counts)
    c = list(counts) + [1] * pad
    s = list(src_strides) + [0] * pad
    d = list(dst_strides) + [0] * pad
    out = []
    for i2 in range(c[2]):
        for i1 in range(c[1]):
            for i0 in range(c[0]):
                out.append((src_base + i0 * s[0] + i1 * s[1] + i2 * s[2],
                            dst_base + i0 * d[0] + i1 * d[1] + i2 * d[2]))
    return out


def make(spec):
    """A spec is the raw tuple (src, dst, counts, src_strides, dst_strides, flag, sent_flag)."""
    return Descriptor(*spec[:6], sent_flag=spec[6])


def ref_reads(src_space, src_base, dst_space, dst_base, counts, ss, ds, *, remote, lines):
    """Source address of each read the DMA makes, stepping rows as its address generator
    does: a row contiguous on both sides moves min(cap, room left in the source line,
    elements left) elements a step, unless the destination is less than a step ahead of the
    source in an overlapping local descriptor; any other element is a step of its own."""
    pad = 3 - len(counts)
    c, s, d = (list(v) + [x] * pad for v, x in ((counts, 1), (ss, 0), (ds, 0)))
    elems = ref_elements(src_base, dst_base, counts, ss, ds)
    srcs, dsts = [a for a, _ in elems], [b for _, b in elems]
    overlap = (not remote and src_space == dst_space
               and min(srcs) <= max(dsts) and min(dsts) <= max(srcs))
    line = lines[src_space]
    cap = line if src_space == dst_space else min(lines.values())
    reads = []
    for i2 in range(c[2]):
        for i1 in range(c[1]):
            a = src_base + i1 * s[1] + i2 * s[2]
            b = dst_base + i1 * d[1] + i2 * d[2]
            ahead = (b - a) % (1 << 24)
            if s[0] == 1 and d[0] == 1 and not (overlap and 0 < ahead < cap):
                at = 0
                while at < c[0]:
                    reads.append(a + at)
                    at += min(cap, line - (a + at) % line, c[0] - at)
            else:
                reads += [a + i0 * s[0] for i0 in range(c[0])]
    return reads


def ref_run(hbm, vmem, specs, *, n_flags, n_chips, flags=None, faulty=frozenset(),
            words_per_cycle=1, lanes=8):
    """One word at a time over a dict {(space, address): word}: membership is range.
    ``faulty`` is the set of faulting HBM word addresses."""
    mem = {(name, a): w for name, image in (("hbm", hbm), ("vmem", vmem))
           for a, w in enumerate(image.tolist())}
    flags = [0] * n_flags if flags is None else flags.tolist()
    errors, pushes, bus = [], [], []
    lines = {"hbm": words_per_cycle, "vmem": lanes}
    for k, (src, dst, counts, ss, ds, flag, sent_flag) in enumerate(specs):
        src_space, src_base = src
        if dst[0] == "remote":
            _, chip, dst_space, dst_base = dst
        else:
            chip, (dst_space, dst_base) = None, dst
        elems = ref_elements(src_base, dst_base, counts, ss, ds)
        err = None
        if 0 in counts:
            err = ("count", src_base)
        elif chip is not None and chip >= n_chips:
            err = ("chip", chip)
        elif flag >= n_flags:
            err = ("flag", flag)
        elif sent_flag is not None and sent_flag >= n_flags:
            err = ("sent_flag", sent_flag)
        else:
            for a, b in elems:
                if (src_space, a) not in mem:
                    err = ("src_range", a)
                    break
                if (dst_space, b) not in mem:
                    err = ("dst_range", b)
                    break
        if err:
            errors.append((k, *err))
            continue
        def fault(space, address):
            return space == "hbm" and address in faulty

        if chip is None:
            for a, b in elems:
                if not fault(src_space, a) and not fault(dst_space, b):
                    mem[dst_space, b] = mem[src_space, a]
            flags[flag] = (flags[flag] + len(elems)) % 2**32
        else:
            pushes.append((k, [b for _, b in elems],
                           [0 if fault(src_space, a) else mem[src_space, a] for a, _ in elems]))
            if sent_flag is not None:
                flags[sent_flag] = (flags[sent_flag] + len(elems)) % 2**32
        bus += [(k, "bus", a) for a in ref_reads(src_space, src_base, dst_space, dst_base,
                                                 counts, ss, ds, remote=chip is not None,
                                                 lines=lines)
                if fault(src_space, a)]
    images = [[mem[name, a] for a in range(len(image))]
              for name, image in (("hbm", hbm), ("vmem", vmem))]
    return images[0], images[1], flags, errors, pushes, bus


def assert_matches_reference(hbm, vmem, specs, *, n_flags, n_chips, lanes, flags=None):
    got = memory.run(hbm, vmem, [make(s) for s in specs], n_flags=n_flags, lanes=lanes,
                     n_chips=n_chips, flags=flags)
    ref_hbm, ref_vmem, ref_flags, ref_errors, ref_pushes, ref_bus = ref_run(
        hbm, vmem, specs, n_flags=n_flags, n_chips=n_chips, flags=flags)
    assert got.hbm.dtype == np.uint32 and got.vmem.dtype == np.uint32
    assert got.flags.dtype == np.uint32
    assert got.hbm.tolist() == ref_hbm
    assert got.vmem.tolist() == ref_vmem
    assert got.flags.tolist() == ref_flags
    assert [tuple(e) for e in got.error_records] == ref_errors
    assert got.errors == [e[0] for e in ref_errors]
    assert [(p.index, memory.addresses(p.descriptor)[1].tolist(), p.data.tolist())
            for p in got.pushes] == ref_pushes
    assert got.bus_errors == ref_bus == []
    return got


def images(salt, hbm_words, vmem_words):
    """Distinct words everywhere, so a word from the wrong place never passes by luck."""
    n = hbm_words + vmem_words
    words = ((np.arange(n, dtype=np.uint64) * 0x9E3779B1 + salt) & 0xFFFFFFFF).astype(np.uint32)
    return words[:hbm_words].copy(), words[hbm_words:].copy()


def property_test(seed, strategy, check, examples):
    """Run a hypothesis property seeded by the run's seed, so --seed reproduces it."""
    hypothesis.seed(seed)(settings(max_examples=examples, database=None, deadline=None)(
        given(strategy)(check)))()


# ---------------------------------------------------------------- random descriptors

@st.composite
def spec_strategy(draw, sizes, n_flags, n_chips):
    def endpoint(remote_ok):
        space = draw(st.sampled_from(SPACES))
        in_range = draw(st.integers(0, 7)) > 0
        size = sizes[space]
        base = draw(st.integers(0, size - 1) if in_range else st.integers(size, size + 6))
        if remote_ok and draw(st.integers(0, 4)) == 0:
            return ("remote", draw(st.integers(0, n_chips)), space, base)
        return (space, base)

    ndim = draw(st.integers(1, 3))
    counts = draw(st.lists(st.integers(1, 5), min_size=ndim, max_size=ndim))
    if draw(st.integers(0, 11)) == 0:
        counts[draw(st.integers(0, ndim - 1))] = 0
    strides = st.lists(st.integers(-6, 6), min_size=ndim, max_size=ndim)
    src, dst = endpoint(False), endpoint(True)
    flag = draw(st.integers(0, n_flags))            # n_flags itself is out of range
    sent = draw(st.none() | st.integers(0, n_flags)) if dst[0] == "remote" else None
    return (src, dst, tuple(counts), tuple(draw(strides)), tuple(draw(strides)), flag, sent)


@st.composite
def batch_strategy(draw):
    lanes = draw(st.sampled_from([1, 2, 4, 8]))
    sizes = {"hbm": draw(st.integers(1, 40)), "vmem": lanes * draw(st.integers(1, 5))}
    n_flags, n_chips = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    specs = draw(st.lists(spec_strategy(sizes, n_flags, n_chips), min_size=1, max_size=8))
    hbm, vmem = images(draw(st.integers(0, 2**32 - 1)), sizes["hbm"], sizes["vmem"])
    flags = None
    if draw(st.booleans()):                           # near the top, to see counters wrap
        flags = np.full(n_flags, 2**32 - 3, np.uint32)
    return dict(hbm=hbm, vmem=vmem, specs=specs, n_flags=n_flags, n_chips=n_chips,
                lanes=lanes, flags=flags)


def random_spec(rng, sizes, *, n_flags=4, n_chips=2):
    ndim = int(rng.integers(1, 4))
    counts = [int(c) for c in rng.integers(1, 7, ndim)]
    if rng.random() < 0.1:
        counts[int(rng.integers(ndim))] = 0

    def endpoint(remote_ok):
        space = SPACES[int(rng.integers(2))]
        base = int(rng.integers(0, sizes[space] + 4))
        if remote_ok and rng.random() < 0.2:
            return ("remote", int(rng.integers(0, n_chips + 1)), space, base)
        return (space, base)

    def strides():
        return tuple(int(s) for s in rng.integers(-8, 9, ndim))

    src, dst = endpoint(False), endpoint(True)
    sent = int(rng.integers(0, n_flags + 1)) if dst[0] == "remote" and rng.random() < 0.5 \
        else None
    return (src, dst, tuple(counts), strides(), strides(), int(rng.integers(0, n_flags + 1)),
            sent)


# ---------------------------------------------------------------- descriptors

def test_descriptor_pads_to_three_dims():
    d = Descriptor(("hbm", 3), ("vmem", 0), (4,), (2,), (-1,), 1)
    assert (d.counts, d.src_strides, d.dst_strides) == ((4, 1, 1), (2, 0, 0), (-1, 0, 0))
    d = Descriptor(("hbm", 3), ("vmem", 0), [4, 5], [2, 0], [1, 4], np.int64(1))
    assert (d.counts, d.src_strides, d.dst_strides) == ((4, 5, 1), (2, 0, 0), (1, 4, 0))
    assert d.words == 20 and not d.remote and d.chip is None
    assert type(d.flag) is int


def test_descriptor_remote_form():
    d = Descriptor(("vmem", 0), ("remote", 3, "hbm", 16), (8,), (1,), (1,), 2, sent_flag=5)
    assert d.remote and d.chip == 3 and d.dst == ("remote", 3, "hbm", 16) and d.sent_flag == 5
    assert d == Descriptor(("vmem", 0), ("remote", 3, "hbm", 16), (8,), (1,), (1,), 2,
                           sent_flag=5)
    assert hash(d) == hash(Descriptor(("vmem", 0), ("remote", 3, "hbm", 16), [8], [1], [1], 2,
                                      sent_flag=5))


@pytest.mark.parametrize("kwargs, match", [
    (dict(src=("dram", 0)), "src space must be one of"),
    (dict(src=("remote", 1, "hbm", 0)), "src cannot be remote"),
    (dict(dst=("remote", 1, "sram", 0)), "dst space must be one of"),
    (dict(dst=("remote", 256, "hbm", 0)), r"dst chip is 256, outside \[0, 256\)"),
    (dict(dst=["hbm", 0]), "dst must be a tuple"),
    (dict(dst=("hbm",)), r"dst must be \(space, base\)"),
    (dict(src=("hbm", -1)), r"src base is -1, outside"),
    (dict(src=("hbm", 1.0)), "src base must be an integer, not float"),
    (dict(counts=(2.5,)), "counts\\[0\\] must be an integer, not float"),
    (dict(counts=(-1,)), r"counts\[0\] is -1, outside"),
    (dict(src_strides=(True,)), "must be an integer, not a bool"),
    (dict(dst_strides=(1 << 24,)), r"dst_strides\[0\] is 16777216, outside"),
    (dict(counts=(2, 2), src_strides=(1,), dst_strides=(1, 2)), "the same length"),
    (dict(counts=(1, 1, 1, 1), src_strides=(0,) * 4, dst_strides=(0,) * 4), "1 to 3 integers"),
    (dict(counts=(4096, 4096), src_strides=(0, 0), dst_strides=(0, 0)), "more than 16777215"),
    (dict(flag=128), r"flag is 128, outside \[0, 128\)"),
    (dict(flag="0"), "flag must be an integer, not str"),
    (dict(sent_flag=1), "sent_flag applies only to remote pushes"),
])
def test_descriptor_rejects_unencodable(kwargs, match):
    args = dict(src=("hbm", 0), dst=("vmem", 0), counts=(4,), src_strides=(1,),
                dst_strides=(1,), flag=0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        Descriptor(**args)


def test_descriptor_is_frozen():
    d = Descriptor(("hbm", 0), ("vmem", 0), (1,), (1,), (1,), 0)
    with pytest.raises(AttributeError):
        d.flag = 1


# ---------------------------------------------------------------- address expansion

def test_addresses_hand_worked():
    d = Descriptor(("hbm", 10), ("vmem", 1), (3, 2), (-1, 5), (2, 0), 0)
    src, dst = memory.addresses(d)
    assert src.dtype == np.int64 and dst.dtype == np.int64
    assert src.tolist() == [10, 9, 8, 15, 14, 13]
    assert dst.tolist() == [1, 3, 5, 1, 3, 5]


def test_addresses_match_triple_loop(rng):
    sizes = {"hbm": 64, "vmem": 32}
    for _ in range(300):
        spec = random_spec(rng, sizes)
        src, dst = memory.addresses(make(spec))
        ref = ref_elements(spec[0][-1], spec[1][-1], *spec[2:5])
        assert list(zip(src.tolist(), dst.tolist())) == ref, spec


def test_addresses_zero_count_is_empty():
    src, dst = memory.addresses(Descriptor(("hbm", 5), ("hbm", 0), (3, 0), (1, 1), (1, 1), 0))
    assert src.shape == (0,) and dst.shape == (0,) and src.dtype == np.int64


def test_addresses_rejects_non_descriptor():
    with pytest.raises(ValueError, match="expected a Descriptor, not tuple"):
        memory.addresses((("hbm", 0), ("vmem", 0), (1,), (1,), (1,), 0))


# ---------------------------------------------------------------- validation

def _validate(spec, *, hbm_words=16, vmem_words=16, n_flags=4, n_chips=2, index=7):
    return memory.validate(make(spec), hbm_words=hbm_words, vmem_words=vmem_words,
                           n_flags=n_flags, n_chips=n_chips, index=index)


@pytest.mark.parametrize("spec, expected", [
    # a zero count records the source base, whatever else is wrong
    ((("hbm", 9), ("vmem", 99), (3, 0), (1, 1), (1, 1), 50, None), ("count", 9)),
    ((("hbm", 0), ("remote", 2, "vmem", 0), (1,), (1,), (1,), 9, None), ("chip", 2)),
    ((("hbm", 0), ("vmem", 0), (1,), (1,), (1,), 4, None), ("flag", 4)),
    ((("hbm", 0), ("remote", 1, "vmem", 0), (1,), (1,), (1,), 0, 4), ("sent_flag", 4)),
    # element order (0,0) 5, (1,0) 6, (2,0) 7, then (0,1) -5: the first bad one is -5,
    # although 30 (element (2,2)) is further out
    ((("hbm", 5), ("vmem", 0), (3, 3), (1, -10), (1, 3), 0, None), ("src_range", -5)),
    # element 0's destination (16) fails before element 1's source (16)
    ((("hbm", 15), ("vmem", 16), (2,), (1,), (-1,), 0, None), ("dst_range", 16)),
    # one element, both out: the source is reported
    ((("hbm", 16), ("vmem", 16), (1,), (1,), (1,), 0, None), ("src_range", 16)),
    # the remote destination is checked against the same-named local space
    ((("vmem", 0), ("remote", 1, "hbm", 14), (3,), (1,), (1,), 0, None), ("dst_range", 16)),
    # zero and negative strides staying in range are fine
    ((("hbm", 15), ("vmem", 0), (4, 4), (-1, 0), (0, 1), 3, None), None),
])
def test_validate_hand_worked(spec, expected):
    err = _validate(spec)
    assert err == (None if expected is None else (7, *expected))


def test_validate_bad_parameters():
    d = Descriptor(("hbm", 0), ("vmem", 0), (1,), (1,), (1,), 0)
    with pytest.raises(ValueError, match="n_flags is 0"):
        memory.validate(d, hbm_words=4, vmem_words=4, n_flags=0)
    with pytest.raises(ValueError, match="hbm_words must be an integer"):
        memory.validate(d, hbm_words=4.0, vmem_words=4, n_flags=1)
    with pytest.raises(ValueError, match="n_chips is 257"):
        memory.validate(d, hbm_words=4, vmem_words=4, n_flags=1, n_chips=257)


# ---------------------------------------------------------------- the DMA: hand-worked

def _run1(hbm, vmem, spec, **kw):
    return memory.run(np.array(hbm, np.uint32), np.array(vmem, np.uint32), [make(spec)], **kw)


def test_overlap_forward_smears():
    r = _run1([10, 11, 12, 13, 14], [0], (("hbm", 0), ("hbm", 1), (4,), (1,), (1,), 0, None),
              lanes=1)
    assert r.hbm.tolist() == [10, 10, 10, 10, 10] and r.flags[0] == 4


def test_overlap_backward_shifts():
    r = _run1([10, 11, 12, 13, 14], [0], (("hbm", 1), ("hbm", 0), (4,), (1,), (1,), 0, None),
              lanes=1)
    assert r.hbm.tolist() == [11, 12, 13, 14, 14]


def test_overlap_in_place_reverse_reads_new_values():
    # e0: h0=h4=4; e1: h1=h3=3; e2: h2=h2; e3: h3=h1 (now 3); e4: h4=h0 (now 4)
    r = _run1([0, 1, 2, 3, 4], [0], (("hbm", 4), ("hbm", 0), (5,), (-1,), (1,), 0, None),
              lanes=1)
    assert r.hbm.tolist() == [4, 3, 2, 3, 4]


def test_zero_dst_stride_last_wins():
    r = _run1([0] * 8, [1, 2, 3, 4], (("vmem", 0), ("hbm", 7), (3,), (1,), (0,), 0, None),
              lanes=4)
    assert r.hbm.tolist() == [0] * 7 + [3]


def test_zero_src_stride_broadcasts_and_reverse_copy():
    r = _run1([5, 6, 7, 8], [0] * 8,
              (("hbm", 3), ("vmem", 0), (4, 2), (-1, 0), (1, 4), 1, None), lanes=4)
    assert r.vmem.tolist() == [8, 7, 6, 5, 8, 7, 6, 5] and r.flags[1] == 8


def test_flags_wrap_and_accumulate():
    flags = np.array([2**32 - 2, 7], np.uint32)
    spec = (("hbm", 0), ("vmem", 0), (3,), (1,), (1,), 0, None)
    r = memory.run(np.zeros(4, np.uint32), np.zeros(4, np.uint32), [make(spec)] * 2,
                   n_flags=2, lanes=4, flags=flags)
    assert r.flags.tolist() == [4, 7]
    assert flags.tolist() == [2**32 - 2, 7]          # the caller's array is untouched


def test_rejected_then_later_proceeds():
    hbm, vmem = np.arange(8, dtype=np.uint32), np.zeros(8, np.uint32)
    bad = make((("hbm", 6), ("vmem", 0), (4,), (1,), (1,), 0, None))     # reads 6..9
    good = make((("hbm", 0), ("vmem", 4), (4,), (1,), (1,), 1, None))
    r = memory.run(hbm, vmem, [bad, good], n_flags=2)
    assert r.errors == [0] and r.error_records == [(0, "src_range", 8)]
    assert r.vmem.tolist() == [0, 0, 0, 0, 0, 1, 2, 3] and r.flags.tolist() == [0, 4]
    assert hbm.tolist() == list(range(8)) and not vmem.any()      # inputs untouched


def test_push_reads_at_its_turn_and_signals_sent():
    hbm = np.array([1, 2, 3, 4], np.uint32)
    push = make((("hbm", 0), ("remote", 1, "vmem", 2), (2,), (1,), (1,), 3, 0))
    overwrite = make((("hbm", 2), ("hbm", 0), (2,), (1,), (1,), 1, None))
    r = memory.run(hbm, np.zeros(4, np.uint32), [push, overwrite], n_flags=4, lanes=4,
                   n_chips=2)
    assert [(p.index, p.data.tolist()) for p in r.pushes] == [(0, [1, 2])]
    assert r.hbm.tolist() == [3, 4, 3, 4] and not r.vmem.any()    # nothing lands locally
    assert r.flags.tolist() == [2, 2, 0, 0]                        # sent flag 0, flag 1


def test_land_applies_pushes_at_the_receiver():
    sender = memory.run(np.array([9, 8, 7], np.uint32), np.zeros(4, np.uint32), [
        make((("hbm", 0), ("remote", 1, "vmem", 3), (3,), (1,), (-1,), 2, None)),
        make((("hbm", 2), ("remote", 1, "hbm", 0), (2,), (0,), (0,), 1, None))],
        n_flags=4, lanes=4, n_chips=2)
    hbm, vmem, flags = memory.land(np.zeros(2, np.uint32), np.zeros(4, np.uint32),
                                   np.zeros(4, np.uint32), sender.pushes)
    assert vmem.tolist() == [0, 7, 8, 9] and hbm.tolist() == [7, 0]
    assert flags.tolist() == [0, 2, 3, 0]


def test_land_rejects_bad_input():
    p = memory.Push(0, make((("hbm", 0), ("remote", 1, "vmem", 3), (3,), (1,), (1,), 2, None)),
                    np.zeros(3, np.uint32))
    z = np.zeros(4, np.uint32)
    with pytest.raises(ValueError, match="push 0 writes outside vmem"):
        memory.land(z, z, z, [p])
    with pytest.raises(ValueError, match="adds to flag 2, but there are 2"):
        memory.land(z, np.zeros(8, np.uint32), np.zeros(2, np.uint32), [p])
    with pytest.raises(ValueError, match="must be 3 uint32 words"):
        memory.land(z, np.zeros(8, np.uint32), z, [p._replace(data=np.zeros(3, np.int32))])


@pytest.mark.parametrize("args, kwargs, match", [
    ((np.zeros(4, np.int32), np.zeros(4, np.uint32), []), {}, "hbm must be a numpy uint32"),
    ((np.zeros(4, np.uint32), [0, 0], []), {}, "vmem must be a numpy uint32"),
    ((np.zeros((2, 2), np.uint32), np.zeros(4, np.uint32), []), {}, "hbm must be 1-D"),
    ((np.zeros(4, np.uint32), np.zeros(12, np.uint32), []), {}, "not a whole number of 8-word"),
    ((np.zeros(4, np.uint32), np.zeros(8, np.uint32), iter([])), {}, "list or tuple"),
    ((np.zeros(4, np.uint32), np.zeros(8, np.uint32), [("hbm", 0)]), {}, "expected a Descriptor"),
    ((np.zeros(4, np.uint32), np.zeros(8, np.uint32), []), dict(n_flags=129), "n_flags is 129"),
    ((np.zeros(4, np.uint32), np.zeros(8, np.uint32), []), dict(lanes=0), "lanes is 0"),
    ((np.zeros(4, np.uint32), np.zeros(8, np.uint32),
      [make((("hbm", 0), ("vmem", 0), (1,), (1,), (1,), 0, None))]), dict(n_chips=0),
     "n_chips is 0"),
    ((np.zeros(4, np.uint32), np.zeros(8, np.uint32), []),
     dict(flags=np.zeros(3, np.uint32)), r"flags must be a uint32 array of shape \(16,\)"),
])
def test_run_rejects_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        memory.run(*args, **kwargs)


# ---------------------------------------------------------------- the DMA: random

def test_run_matches_reference_random(rng):
    for _ in range(60):
        sizes = {"hbm": int(rng.integers(1, 200)), "vmem": 8 * int(rng.integers(1, 12))}
        hbm, vmem = images(int(rng.integers(2**32)), sizes["hbm"], sizes["vmem"])
        specs = [random_spec(rng, sizes) for _ in range(int(rng.integers(1, 12)))]
        assert_matches_reference(hbm, vmem, specs, n_flags=4, n_chips=2, lanes=8)


def test_run_matches_reference_property(seed):
    def check(batch):
        assert_matches_reference(batch["hbm"], batch["vmem"], batch["specs"],
                                 n_flags=batch["n_flags"], n_chips=batch["n_chips"],
                                 lanes=batch["lanes"], flags=batch["flags"])
    property_test(seed, batch_strategy(), check, examples=400)


def test_rejected_descriptor_changes_nothing_property(seed):
    def check(batch):
        kw = dict(n_flags=batch["n_flags"], n_chips=batch["n_chips"], lanes=batch["lanes"],
                  flags=batch["flags"])
        descs = [make(s) for s in batch["specs"]]
        full = memory.run(batch["hbm"], batch["vmem"], descs, **kw)
        for k in full.errors:
            alone = memory.run(batch["hbm"], batch["vmem"], [descs[k]], **kw)
            assert alone.errors == [0] and not alone.pushes
            assert np.array_equal(alone.hbm, batch["hbm"])
            assert np.array_equal(alone.vmem, batch["vmem"])
            initial = batch["flags"] if batch["flags"] is not None else 0
            assert np.array_equal(alone.flags, np.zeros_like(alone.flags) + initial)
            without = memory.run(batch["hbm"], batch["vmem"], descs[:k] + descs[k + 1:], **kw)
            assert np.array_equal(without.hbm, full.hbm)
            assert np.array_equal(without.vmem, full.vmem)
            assert np.array_equal(without.flags, full.flags)
            assert [p.data.tolist() for p in without.pushes] == \
                [p.data.tolist() for p in full.pushes]
    property_test(seed, batch_strategy(), check, examples=150)


def test_property_batches_mix_accepted_and_rejected(seed):
    """The generator really produces every case the properties claim to cover."""
    seen = set()

    def check(batch):
        r = memory.run(batch["hbm"], batch["vmem"], [make(s) for s in batch["specs"]],
                       n_flags=batch["n_flags"], n_chips=batch["n_chips"],
                       lanes=batch["lanes"], flags=batch["flags"])
        seen.update(e.reason for e in r.error_records)
        for k, s in enumerate(batch["specs"]):
            if k in r.errors:
                continue
            seen.add("accepted")
            seen.add("push" if s[1][0] == "remote" else "local")
            if any(x < 0 for x in s[3] + s[4]):
                seen.add("negative stride")
            if s[1][0] == s[0][0]:
                src, dst = memory.addresses(make(s))
                if set(src.tolist()) & set(dst.tolist()):
                    seen.add("overlap")
    property_test(seed, batch_strategy(), check, examples=400)
    assert seen >= set(memory.REASONS) | {"accepted", "push", "local", "negative stride",
                                          "overlap"}


# ---------------------------------------------------------------- bus errors: hand-worked

H = np.arange(100, 164, dtype=np.uint32)          # hbm[a] == 100 + a: a word names its source
V = np.arange(500, 532, dtype=np.uint32)


def _faults(descriptors, error_ranges, *, words_per_cycle, lanes, hbm=H, vmem=V):
    return memory.run(hbm, vmem, [make(s) for s in descriptors], n_flags=8, lanes=lanes,
                      error_ranges=error_ranges, words_per_cycle=words_per_cycle)


def test_faulting_reads_write_nothing_and_are_reported_per_line_read():
    # 2-word HBM lines, 4-word VMEM lines; words 16..19 fault. Descriptor 0 reads 12..21 a
    # line at a time (cap 2): the reads at 16 and 18 fault, so vmem 4..7 keep their words.
    # Descriptor 1 writes hbm 18, 19: dropped. Descriptor 2 still runs; every flag counts.
    r = _faults([(("hbm", 12), ("vmem", 0), (10,), (1,), (1,), 1, None),
                 (("vmem", 0), ("hbm", 18), (2,), (1,), (1,), 2, None),
                 (("hbm", 0), ("vmem", 20), (4,), (1,), (1,), 3, None)],
                [(16, 20)], words_per_cycle=2, lanes=4)
    assert r.bus_errors == [(0, "bus", 16), (0, "bus", 18)]
    assert r.errors == [] and r.error_records == []
    assert r.vmem.tolist() == ([112, 113, 114, 115, 504, 505, 506, 507, 120, 121]
                               + list(range(510, 520)) + [100, 101, 102, 103]
                               + list(range(524, 532)))
    assert r.hbm.tolist() == H.tolist()
    assert r.flags[1:4].tolist() == [10, 2, 4]


def test_reads_narrower_than_a_line_report_each_read():
    # 4-word HBM lines into 2-word VMEM lines: reads of at most 2 words, each within one
    # HBM line. From 13: 13-14, 15 (end of line), 16-17, 18-19, 20. Lines 12..19 fault.
    r = _faults([(("hbm", 13), ("vmem", 1), (8,), (1,), (1,), 0, None)], [(12, 20)],
                words_per_cycle=4, lanes=2)
    assert [e.address for e in r.bus_errors] == [13, 15, 16, 18]
    assert r.vmem.tolist() == V[:8].tolist() + [120] + V[9:].tolist()


def test_rows_restart_reads_and_strided_elements_read_alone():
    # Two rows of 3 (row starts 13 and 21) with 4-word lines, into HBM (cap 4): 13-15,
    # then 21-23; a strided row reads each element alone.
    r = _faults([(("hbm", 13), ("hbm", 40), (3, 2), (1, 8), (1, 3), 0, None),
                 (("hbm", 12), ("vmem", 0), (3,), (2,), (1,), 0, None)],
                [(12, 24)], words_per_cycle=4, lanes=4)
    assert r.bus_errors == [(0, "bus", 13), (0, "bus", 21), (1, "bus", 12), (1, "bus", 14),
                            (1, "bus", 16)]
    assert r.hbm.tolist() == H.tolist() and r.vmem.tolist() == V.tolist()


def test_overlap_a_step_ahead_reads_one_word_at_a_time():
    # hbm 8..11 -> 9..12, destination 1 word ahead (< the 4-word line): one word a read.
    r = _faults([(("hbm", 8), ("hbm", 9), (4,), (1,), (1,), 0, None)], [(8, 12)],
                words_per_cycle=4, lanes=8)
    assert [e.address for e in r.bus_errors] == [8, 9, 10, 11]
    # Every read faults, and 9..11 are faulting destinations anyway: nothing changes.
    assert r.hbm.tolist() == H.tolist()
    # A whole line ahead is no hazard within a read: lines move whole again.
    r = _faults([(("hbm", 8), ("hbm", 12), (8,), (1,), (1,), 0, None)], [(8, 16)],
                words_per_cycle=4, lanes=8)
    assert [e.address for e in r.bus_errors] == [8, 12]
    # A destination behind the source is no hazard either.
    r = _faults([(("hbm", 9), ("hbm", 8), (4,), (1,), (1,), 0, None)], [(8, 12)],
                words_per_cycle=4, lanes=8)
    assert [e.address for e in r.bus_errors] == [9]


def test_a_dropped_write_is_read_back_as_the_old_word():
    # One-word lines. e0 copies h0 to h1; e1 would copy it on to h2, a faulting word (the
    # write is dropped); e2 reads h2: a fault, h3 untouched; e3 copies h3 to h4.
    hbm = np.array([7, 8, 9, 10, 11, 12, 13, 14], np.uint32)
    r = _faults([(("hbm", 0), ("hbm", 1), (4,), (1,), (1,), 0, None)], [(2, 3)],
                words_per_cycle=1, lanes=8, hbm=hbm)
    assert r.hbm.tolist() == [7, 7, 9, 10, 10, 12, 13, 14]
    assert r.bus_errors == [(0, "bus", 2)] and r.flags[0] == 4


def test_a_push_sends_zeros_for_faulting_words_and_landing_there_is_dropped():
    r = _faults([(("hbm", 14), ("remote", 0, "hbm", 6), (4,), (1,), (1,), 1, 2)], [(4, 8),
                                                                                 (16, 18)],
                words_per_cycle=2, lanes=8)
    assert r.bus_errors == [(0, "bus", 16)] and r.pushes[0].data.tolist() == [114, 115, 0, 0]
    assert r.hbm.tolist() == H.tolist() and r.flags[2] == 4      # sent, nothing landed yet
    hbm, _, flags = memory.land(r.hbm, r.vmem, r.flags, r.pushes, error_ranges=[(4, 8)])
    # 6, 7 fault: dropped; 8, 9 take the two zeros.
    assert hbm.tolist() == H[:8].tolist() + [0, 0] + H[10:].tolist()
    assert flags[1] == 4


def test_no_error_ranges_no_bus_errors():
    r = _faults([(("hbm", 0), ("vmem", 0), (16,), (1,), (1,), 0, None)], (),
                words_per_cycle=4, lanes=8)
    assert r.bus_errors == [] and r.vmem[:16].tolist() == H[:16].tolist()
    # A VMEM source never faults, whatever the HBM ranges.
    r = _faults([(("vmem", 0), ("vmem", 16), (16,), (1,), (1,), 0, None)], [(0, 64)],
                words_per_cycle=4, lanes=8)
    assert r.bus_errors == [] and r.vmem[16:].tolist() == V[:16].tolist()


@pytest.mark.parametrize("ranges, match", [
    ([(2, 6)], r"error range \(2, 6\) does not start and end on an HBM line boundary"),
    ([(8, 8)], r"error range \(8, 8\) is empty"),
    ([(4, 68)], r"error range \(4, 68\) hi is 68, outside \[0, 65\)"),
    ([(-4, 4)], r"lo is -4"),
    ([(1.0, 4)], "lo must be an integer, not float"),
    ([4, 8], r"an error range must be a pair \(lo, hi\), not 4"),
    ({(4, 8)}, "error_ranges must be a list or tuple"),
])
def test_bad_error_ranges_are_value_errors(ranges, match):
    with pytest.raises(ValueError, match=match):
        memory.run(H, V, [], error_ranges=ranges, words_per_cycle=4)
    with pytest.raises(ValueError, match="words_per_cycle is 0"):
        memory.check_error_ranges([], hbm_words=64, words_per_cycle=0)


# ---------------------------------------------------------------- bus errors: random

def fault_spec(rng, sizes):
    """``random_spec``, mostly from HBM, with contiguous rows and overlaps now and then."""
    src, dst, counts, ss, ds, flag, sent = random_spec(rng, sizes)
    if rng.random() < 0.7:
        src = ("hbm", int(rng.integers(0, sizes["hbm"] + 2)))
    if rng.random() < 0.6:
        counts = (int(rng.integers(1, 13)),) + counts[1:]
        ss, ds = (1,) + ss[1:], (1,) + ds[1:]
    if dst[0] == src[0] and rng.random() < 0.5:
        dst = (dst[0], max(0, src[1] + int(rng.integers(-5, 6))))
    return src, dst, counts, ss, ds, flag, sent


def test_bus_errors_match_reference_random(rng):
    seen = set()
    for _ in range(150):
        line, lanes = int(rng.choice([1, 2, 4, 8])), int(rng.choice([1, 2, 4, 8]))
        sizes = {"hbm": line * int(rng.integers(1, 40 // line + 2)),
                 "vmem": lanes * int(rng.integers(1, 10))}
        hbm, vmem = images(int(rng.integers(2**32)), sizes["hbm"], sizes["vmem"])
        bounds = np.unique(rng.integers(0, sizes["hbm"] // line + 1, 4)) * line
        ranges = [(int(lo), int(hi)) for lo, hi in zip(bounds[::2], bounds[1::2])]
        faulty = frozenset(a for lo, hi in ranges for a in range(lo, hi))
        specs = [fault_spec(rng, sizes) for _ in range(int(rng.integers(1, 10)))]
        got = memory.run(hbm, vmem, [make(s) for s in specs], n_flags=4, lanes=lanes,
                         n_chips=2, error_ranges=ranges, words_per_cycle=line)
        ref = ref_run(hbm, vmem, specs, n_flags=4, n_chips=2, faulty=faulty,
                      words_per_cycle=line, lanes=lanes)
        assert got.hbm.tolist() == ref[0] and got.vmem.tolist() == ref[1]
        assert got.flags.tolist() == ref[2]
        assert [tuple(e) for e in got.error_records] == ref[3]
        assert [(p.index, memory.addresses(p.descriptor)[1].tolist(), p.data.tolist())
                for p in got.pushes] == ref[4]
        assert [tuple(e) for e in got.bus_errors] == ref[5]
        landed = memory.land(got.hbm, got.vmem, np.zeros(4, np.uint32), got.pushes,
                             error_ranges=ranges)
        ref_hbm = list(ref[0])
        for k, dst, data in ref[4]:
            if make(specs[k]).dst[2] == "hbm":
                for b, w in zip(dst, data):
                    if b not in faulty:
                        ref_hbm[b] = w
        assert landed[0].tolist() == ref_hbm
        for k in {e.index for e in got.bus_errors}:
            d = make(specs[k])
            seen.add("push" if d.remote else "local")
            runs = len([e for e in got.bus_errors if e.index == k])
            bad = sum(a in faulty for a in memory.addresses(d)[0].tolist())
            seen.add("whole lines" if runs < bad else "word reads")
        if any(make(s).dst[0] == "hbm" and set(memory.addresses(make(s))[1].tolist()) & faulty
               for k, s in enumerate(specs) if k not in got.errors):
            seen.add("dropped write")
    assert seen == {"push", "local", "whole lines", "word reads", "dropped write"}


# ---------------------------------------------------------------- HBM timing

def stepped_returns(offered, w, lat, m):
    """Cycle by cycle: retire reads due now, then accept in order while allowed."""
    n, returns, in_flight, k, cycle = len(offered), [None] * len(offered), [], 0, 0
    while k < n:
        in_flight = [r for r in in_flight if r > cycle]
        accepted = 0
        while k < n and offered[k] <= cycle and accepted < w and len(in_flight) < m:
            returns[k] = cycle + lat
            in_flight.append(cycle + lat)
            k += 1
            accepted += 1
        cycle += 1
    return returns


def test_lone_read_returns_after_read_latency():
    for lat in (1, 2, 7, 40):
        t = HbmTiming(words_per_cycle=4, read_latency=lat, max_outstanding=1)
        assert t.read_returns(np.array([13])).tolist() == [13 + lat]
        assert t.stream_cycles(1) == lat


def test_read_returns_match_stepped_model(rng):
    for _ in range(200):
        w, lat, m = (int(x) for x in rng.integers(1, [5, 9, 20]))
        offered = np.sort(rng.integers(0, 30, int(rng.integers(0, 40))))
        got = HbmTiming(words_per_cycle=w, read_latency=lat, max_outstanding=m).read_returns(
            offered)
        assert got.dtype == np.int64
        assert got.tolist() == stepped_returns(offered.tolist(), w, lat, m), (w, lat, m)


@pytest.mark.parametrize("w", [1, 2, 3])
@pytest.mark.parametrize("lat", [1, 4, 9])
@pytest.mark.parametrize("m", [1, 2, 5, 12, 40])
def test_stream_cycles_match_stepped_model(w, lat, m):
    t = HbmTiming(words_per_cycle=w, read_latency=lat, max_outstanding=m)
    assert t.stream_cycles(0) == 0
    for n in range(1, 60):
        assert t.stream_cycles(n) == stepped_returns([0] * n, w, lat, m)[-1], n


def test_stream_reaches_bandwidth_when_enough_outstanding():
    # 4 words/cycle, latency 10, 40 outstanding: 4000 words take 1000 cycles plus latency - 1
    t = HbmTiming(words_per_cycle=4, read_latency=10, max_outstanding=40)
    assert t.stream_cycles(4000) == 999 + 10
    # 20 outstanding halves it: 20 words per 10 cycles
    assert HbmTiming(words_per_cycle=4, read_latency=10,
                     max_outstanding=20).stream_cycles(4000) == 1990 + 4 + 10


@pytest.mark.parametrize("kwargs, match", [
    (dict(words_per_cycle=0, read_latency=1, max_outstanding=1), "words_per_cycle is 0"),
    (dict(words_per_cycle=1, read_latency=1.5, max_outstanding=1), "read_latency must be an"),
    (dict(words_per_cycle=1, read_latency=1, max_outstanding=-1), "max_outstanding is -1"),
])
def test_hbm_timing_rejects_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        HbmTiming(**kwargs)


def test_hbm_timing_rejects_bad_traces():
    t = HbmTiming(words_per_cycle=1, read_latency=1, max_outstanding=1)
    with pytest.raises(ValueError, match="non-decreasing"):
        t.read_returns(np.array([3, 2]))
    with pytest.raises(ValueError, match="non-negative"):
        t.read_returns(np.array([-1]))
    with pytest.raises(ValueError, match="1-D integer numpy array"):
        t.read_returns(np.array([0.0]))
    with pytest.raises(ValueError, match="1-D integer numpy array"):
        t.read_returns([0, 1])
    with pytest.raises(ValueError, match="n_words is -1"):
        t.stream_cycles(-1)
