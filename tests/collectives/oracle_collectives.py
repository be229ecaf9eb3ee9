"""An independent restatement of golden.collectives' documented summation order: plain
Python integers and Berkeley SoftFloat (tests/oracle.py), one word at a time, with the
rings, positions and block cuts derived here from the docstring, not from the module."""

import itertools

from .. import oracle


def coord(chip, dims):
    """Row-major: the last axis varies fastest."""
    out = []
    for n in reversed(dims):
        out.append(chip % n)
        chip //= n
    return tuple(reversed(out))


def chip_id(c, dims):
    i = 0
    for x, n in zip(c, dims):
        i = i * n + x
    return i


def snake(dims):
    """Boustrophedon: later axes run backwards whenever the earlier coordinates sum odd."""
    out = []
    for c in itertools.product(*map(range, dims)):
        r, parity = [], 0
        for x, n in zip(c, dims):
            r.append(n - 1 - x if parity % 2 else x)
            parity += r[-1]
        out.append(tuple(r))
    return out


def rings(dims, failed=()):
    """(live chips by rank, ring lengths, {rank: key tuple}) per the module docstring."""
    live = [c for c in range(_prod(dims)) if c not in set(failed)]
    if failed:
        order = [chip_id(c, dims) for c in snake(dims)]
        order = [c for c in order if c in live]
        return live, (len(live),), {live.index(c): (i,) for i, c in enumerate(order)}
    axes = [a for a, n in enumerate(dims) if n >= 2]
    return live, tuple(dims[a] for a in axes), \
        {r: tuple(coord(c, dims)[a] for a in axes) for r, c in enumerate(live)}


def _prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def cut(lo, hi, parts):
    return [lo + i * (hi - lo) // parts for i in range(parts + 1)]


def label(e, n, chips, shards):
    """(slice owner, shard, half) of word e of an n-word vector."""
    bounds = cut(0, n, chips)
    c = max(i for i in range(chips) if bounds[i] <= e and (e < bounds[i + 1]))
    sb = cut(bounds[c], bounds[c + 1], shards)
    s = max(i for i in range(shards) if sb[i] <= e < sb[i + 1])
    hb = cut(sb[s], sb[s + 1], 2)
    return c, s, 0 if e < hb[1] else 1


def reduce_words(rows, dims, failed, numerics, dtype="float32"):
    """The reduce-scatter value of every word: rows are lists of uint32 ints, by rank."""
    live, lengths, key = rings(dims, failed)
    at = {k: r for r, k in key.items()}
    chips, n, shards = len(live), len(rows[0]), len(lengths)
    if dtype == "float32":
        def add(a, b):
            return oracle.fp32_add(a, b, numerics)
    else:
        def add(a, b):
            return (a + b) & 0xFFFFFFFF
    out = []
    for e in range(n):
        c, s, h = label(e, n, chips, shards)
        d = 1 if h == 0 else -1
        vals = {key[r]: rows[r][e] for r in range(chips)}
        for p in range(shards):
            k = (s + p) % shards
            ring, j = lengths[k], key[c][k]
            new = {}
            for kk in vals:
                seq = [(j + d * i) % ring for i in range(1, ring + 1)]
                members = [kk[:k] + (pos,) + kk[k + 1:] for pos in seq]
                acc = vals[members[0]]
                for m in members[1:]:
                    acc = add(acc, vals[m])
                new[kk] = acc
            vals = new
        out.append(vals[key[c]])
        assert at[key[c]] == c
    return out
