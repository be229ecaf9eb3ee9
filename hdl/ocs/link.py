"""One direction of an ICI link as the OCS switches it: a flit forward, credits back.

The OCS does not look inside a flit, so a link here is generic: ``valid`` and ``payload``
travel from the sender to the receiver, and ``credit`` travels back (one bit per VC in a
credit-based router: the receiver frees one buffer slot of that VC). There is no
``ready``: credit-based flow control never stalls a flit on the wire, so a flit that is
``valid`` in a cycle is transferred in that cycle.
"""

from amaranth.hdl import unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..lib.params import check_int

__all__ = ["OcsPortSignature"]


class OcsPortSignature(wiring.Signature):
    """A link direction at an OCS port, seen from its sender.

    Not :class:`hdl.ici.LinkSignature`, the router's link: the OCS passes any flit
    through, so its ports know only the widths of the flit and of the credit return.

    Parameters
    ----------
    payload_width : int
        Bits of a flit (at least 1).
    credit_width : int
        Bits of the credit return (at least 1), typically one per VC.

    Members
    -------
    valid : Out(1)
        A flit is on the link in this cycle.
    payload : Out(payload_width)
        The flit; meaningful only while ``valid``.
    credit : In(credit_width)
        Credits returned by the receiver in this cycle; zero when none.
    """

    def __init__(self, *, payload_width, credit_width):
        self.payload_width = check_int("payload_width", payload_width, least=1)
        self.credit_width = check_int("credit_width", credit_width, least=1)
        super().__init__({
            "valid": Out(1),
            "payload": Out(unsigned(payload_width)),
            "credit": In(unsigned(credit_width)),
        })

    # Compared by parameters, as amaranth's own stream.Signature is: two links built
    # alike connect, and a signature can key a dict.
    def __eq__(self, other):
        return (type(other) is type(self) and other.payload_width == self.payload_width
                and other.credit_width == self.credit_width)

    def __hash__(self):
        return hash((type(self), self.payload_width, self.credit_width))

    def __repr__(self):
        return (f"OcsPortSignature(payload_width={self.payload_width}, "
                f"credit_width={self.credit_width})")
