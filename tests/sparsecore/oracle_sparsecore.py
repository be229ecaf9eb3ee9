"""Independent oracle for golden.sparsecore: SoftFloat, one element and one step at a time.

No numpy and nothing from ``golden``: tables are lists of lists of int bit
patterns, and the documented orders are restated as plain loops (bag by
bag, column by column; a dict in insertion order for the unique ids). The
"tpu" rules are restated on integers, as in ``tests/oracle.py``, whose fp32
add is reused.
"""

import softfloatpy as sf

from .. import oracle as base

QNAN, SIGN = 0x7FC00000, 0x80000000
LANES = 8


def _f32(bits):
    return sf.Float32.from_bytes(int(bits).to_bytes(4, "big"))


def _bits(value):
    return int.from_bytes(value.to_bytes(), "big")


def _flush(bits):
    return bits & SIGN if bits & 0x7F800000 == 0 else bits


def _in(bits, numerics):
    return _flush(bits) if numerics == "tpu" else bits


def _out(bits, numerics):
    if bits & 0x7F800000 == 0x7F800000 and bits & 0x7FFFFF:
        return QNAN
    return _flush(bits) if numerics == "tpu" else bits


def add(a, b, numerics):
    return base.fp32_add(a, b, numerics)


def sub(a, b, numerics):
    return _out(_bits(sf.f32_sub(_f32(_in(a, numerics)), _f32(_in(b, numerics)))), numerics)


def mul(a, b, numerics):
    return _out(_bits(sf.f32_mul(_f32(_in(a, numerics)), _f32(_in(b, numerics)))), numerics)


def div(a, b, numerics):
    return _out(_bits(sf.f32_div(_f32(_in(a, numerics)), _f32(_in(b, numerics)))), numerics)


def sqrt(a, numerics):
    return _out(_bits(sf.f32_sqrt(_f32(_in(a, numerics)))), numerics)


def count(n):
    return _bits(sf.ui32_to_f32(sf.UInt32.from_int(n)))


def lookup(table, indices, offsets, combiner, weights, numerics):
    """``out[b][d]`` by the documented fold; ``weights`` is None or a list of patterns."""
    width = len(table[0])
    out = []
    for b in range(len(offsets) - 1):
        bag = range(offsets[b], offsets[b + 1])
        if not bag:
            out.append([0] * width)
            continue
        den = 0
        if weights is None:
            den = count(len(bag))
        else:
            for k in bag:
                w = weights[k]
                den = add(den, w if combiner == "mean" else mul(w, w, numerics), numerics)
        if combiner == "sqrtn":
            den = sqrt(den, numerics)
        row = []
        for d in range(width):
            acc = 0
            for k in bag:
                term = table[indices[k]][d]
                if weights is not None:
                    term = mul(weights[k], term, numerics)
                acc = add(acc, term, numerics)
            row.append(acc if combiner == "sum" else div(acc, den, numerics))
        out.append(row)
    return out


def update(table, indices, offsets, grads, optimizer, lr, state, numerics):
    """``(table, state, order)``: new lists, and the unique ids in first-occurrence order.

    ``state`` is a list of rows (adagrad), a list of words (rowwise_adagrad) or None.
    """
    width = len(table[0])
    sums = {}                                  # id -> G, dicts keep first-insertion order
    for b in range(len(offsets) - 1):
        for k in range(offsets[b], offsets[b + 1]):
            row = sums.setdefault(indices[k], [0] * width)
            for d in range(width):
                row[d] = add(row[d], grads[b][d], numerics)
    table = [list(r) for r in table]
    state = None if state is None else [list(s) if isinstance(s, list) else s for s in state]
    for i, g in sums.items():
        if optimizer == "sgd":
            steps = [mul(lr, g[d], numerics) for d in range(width)]
        elif optimizer == "adagrad":
            steps = []
            for d in range(width):
                state[i][d] = add(state[i][d], mul(g[d], g[d], numerics), numerics)
                steps.append(div(mul(lr, g[d], numerics), sqrt(state[i][d], numerics), numerics))
        else:
            partial = [0] * LANES
            for d in range(width):
                partial[d % LANES] = add(partial[d % LANES], mul(g[d], g[d], numerics), numerics)
            total = partial[0]
            for j in range(1, LANES):
                total = add(total, partial[j], numerics)
            state[i] = add(state[i], div(total, count(width), numerics), numerics)
            r = sqrt(state[i], numerics)
            steps = [div(mul(lr, g[d], numerics), r, numerics) for d in range(width)]
        table[i] = [sub(table[i][d], steps[d], numerics) for d in range(width)]
    return table, state, list(sums)
