"""Every named ``wiring.Signature`` of ``hdl`` compares by its parameters, as amaranth's own
``stream.Signature`` does: built alike, two are equal, hash alike and print as the call
that builds them; one parameter changed, they differ."""

import pytest
from amaranth.lib.wiring import In, Out

from hdl.ici import LinkSignature
from hdl.lib.memory_port import MemoryPortSignature
from hdl.ocs import OcsPortSignature

# (class, parameters, the repr, one parameter changed)
CASES = [
    (LinkSignature, dict(vcs=2, flit_words=1), "LinkSignature(vcs=2, flit_words=1)",
     dict(vcs=2, flit_words=2)),
    (LinkSignature, dict(vcs=3, flit_words=2), "LinkSignature(vcs=3, flit_words=2)",
     dict(vcs=4, flit_words=2)),
    (OcsPortSignature, dict(payload_width=8, credit_width=2),
     "OcsPortSignature(payload_width=8, credit_width=2)", dict(payload_width=8, credit_width=3)),
    (OcsPortSignature, dict(payload_width=8, credit_width=2),
     "OcsPortSignature(payload_width=8, credit_width=2)", dict(payload_width=9, credit_width=2)),
    (MemoryPortSignature, dict(addr_width=10, words=2, mask_granularity=8),
     "MemoryPortSignature(addr_width=10, words=2, mask_granularity=8)",
     dict(addr_width=11, words=2, mask_granularity=8)),
    (MemoryPortSignature, dict(addr_width=10, words=2, mask_granularity=8),
     "MemoryPortSignature(addr_width=10, words=2, mask_granularity=8)",
     dict(addr_width=10, words=1, mask_granularity=8)),
    (MemoryPortSignature, dict(addr_width=10, words=2, mask_granularity=8),
     "MemoryPortSignature(addr_width=10, words=2, mask_granularity=8)",
     dict(addr_width=10, words=2, mask_granularity=32)),
]
IDS = [f"{cls.__name__}-{'-'.join(f'{k}{v}' for k, v in other.items())}"
       for cls, _, _, other in CASES]


@pytest.mark.parametrize("cls, params, text, other", CASES, ids=IDS)
def test_equal_parameters_give_equal_hashable_signatures(cls, params, text, other):
    a, b = cls(**params), cls(**params)
    assert a is not b
    assert a == b and not a != b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1 and {a: "x"}[b] == "x"
    assert repr(a) == text
    assert eval(repr(a), {cls.__name__: cls}) == a      # the repr is the call that builds it
    # As port members, which is how components compare their signatures.
    assert In(a) == In(b) and Out(a).flip() == Out(b).flip()
    assert a.flip() == b.flip()


@pytest.mark.parametrize("cls, params, text, other", CASES, ids=IDS)
def test_a_different_parameter_gives_a_different_signature(cls, params, text, other):
    a, c = cls(**params), cls(**other)
    assert a != c and not a == c
    assert repr(c) != text
    assert In(a) != In(c)


def test_signatures_of_different_classes_differ():
    # The two link signatures were once both called LinkSignature: equal names, no longer.
    link = LinkSignature(vcs=1, flit_words=1)
    port = OcsPortSignature(payload_width=8, credit_width=1)
    assert link != port and port != link
    assert repr(link).split("(")[0] != repr(port).split("(")[0]
