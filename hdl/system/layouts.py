"""What the network testbench's parts share: its packet format (``golden.ici``'s layout,
filled in a fixed way), the configuration layouts, the statistics each node keeps, and the
latency histogram's buckets.

Probe packets
    Flits are ``FLIT_WORDS = 2`` words (64 bits), so the shortest ``golden.ici`` packet, a
    ``flag_add`` (route word + target word), is one flit: that is a "1-flit packet".
    Longer packets are ``write`` packets of ``2 * packet_flits - 2`` data words. A
    generator fills in:

    - route word: opcode ``flag_add`` (1 flit) or ``write``, ``vc`` 0, ``dst``, ``src``,
      ``length = packet_flits``, ``pad`` 0;
    - target word: ``address``/``amount`` = creation cycle mod ``2**TIME_BITS`` (the
      time stamp), ``flag`` = the packet's tag (``tag_fields``: its generator's lane
      and its sequence number per destination), ``space`` 1 for a ``write``, 0 for a
      ``flag_add`` (as ``golden.ici.decode`` wants);
    - data word j (from 0): ``payload_word(src, dst, tag, j)``.

    So every probe packet decodes with ``golden.ici.decode`` (a ``write``'s address is its
    time stamp, within ``2 * packet_flits`` words of the wrap at ``2**24`` it would not).

Statistics (``STATS``)
    Every node offers its ``N_STATS`` 32-bit statistics at ``stat_addr`` 0, 1, ... and its
    ``BUCKETS`` histogram bins from ``HIST_BASE``; a network reads them out at the end
    (``hdl.system.NetworkSystem``).
"""

from amaranth.hdl import Cat, Signal, unsigned
from amaranth.lib import data

from ..ici.layouts import CHIP_BITS, ROUTINGS, adaptive_entry_layout, route_entry_layout
from ..lib.xorshift import xorshift32

__all__ = [
    "FLIT_WORDS", "TIME_BITS", "TAG_BITS", "HOP_BITS", "MODES", "STATS", "N_STATS",
    "HIST_BASE",
    "LINK_STATS", "LINEAR_BUCKETS", "SUB_BUCKETS", "BUCKETS", "STAT_ADDR_BITS",
    "MAX_PACKET_FLITS", "MAX_LOCAL_PORTS", "node_layout", "node_row_layout", "row_layout",
    "entry_layout",
    "tag_fields", "payload_word", "latency_bucket", "bucket_range", "latency_bucket_hw",
    "vc_bit", "STAT_VCS",
]

#: Words per flit of every network testbench (module docstring).
FLIT_WORDS = 2
#: Bits of the time stamp in a packet: latencies are measured modulo ``2**TIME_BITS``.
TIME_BITS = 24
#: Bits of the tag in the target word's ``flag`` field.
TAG_BITS = 7
#: Bits of a hop count.
HOP_BITS = 8
#: Most flits per probe packet (data word indices fit 9 bits in ``payload_word``).
MAX_PACKET_FLITS = 256
#: Most local (injection and ejection) ports per node.
MAX_LOCAL_PORTS = 2

#: Destination modes of a generator: a fixed destination per node (permutation
#: patterns), uniform random over the live nodes, or all-to-all in messages.
MODES = {"fixed": 0, "uniform": 1, "all_to_all": 2}

#: Torus ports counted in ``STATS`` (6, whatever the dimensions).
LINK_STATS = 6
#: The 32-bit statistics of a node, at ``stat_addr`` 0, 1, ... "window" counts cover the
#: measurement window; the others the whole run.
STATS = (
    *(f"link{p}" for p in range(LINK_STATS)),  # flits sent out of torus port p, window
    "created_window",   # packets created (Bernoulli successes), window
    "created",          # packets created
    "injected",         # packets whose tail the router took (malformed ones included)
    "overflow",         # packets created while the source queue was full (not sent)
    "corrupted",        # packets sent with a payload bit flipped (test knob)
    "malformed",        # packets sent with a malformed header (test knob)
    "received",         # packets whose tail was ejected here
    "packets_window",   # of them, ejected in the window
    "flits_window",     # flits ejected in the window
    "latency_lo",       # sum of latencies of packets ejected in the window, bits 0-31
    "latency_hi",       # bits 32-47
    "latency_max",      # largest latency of a packet ejected in the window
    "hops_window",      # sum of hop counts of packets ejected in the window
    "header_errors",    # packets whose route word was not one this node expects
    "sequence_errors",  # packets out of sequence for their source and lane
    "payload_errors",   # packets with a wrong target or data word
    "dropped",          # malformed packets the router dropped
    "protocol",         # 1: the router saw the credit protocol broken
    "held",             # flits in the router at the end: entered, neither left nor discarded
    "queued",           # packets waiting in the source queues or being injected
    # Observed coverage (``verif.suites.network``), over the whole run; bitmaps are sticky.
    "turns_lo",         # bitmap, bit 8*i + o: a flit crossed the switch from input i to
                        # output o (torus ports 0 .. 2D-1; local port j is 2D + j)
    "turns_hi",         # its bits 32-63
    "link_vcs",         # bitmap, bit vc_bit(p, v): a flit left torus port p on VC v
    "datelines",        # bitmap, bit vc_bit(p, v): a header's hop took the dateline link
                        # out of port p, on VC v
    "dateline_hops",    # headers whose hop out of this router took a dateline link
    "starved",          # bitmap, bit vc_bit(p, v): a flit waited for output VC (p, v) with no
                        # credit left
    "starved_cycles",   # cycles in which some flit waited for an output VC with no credit
    "stalled",          # port-cycles the stall knob held a torus output
    "undeliverable",    # packets the router gave up: their output link was down
)
N_STATS = len(STATS)
#: The histogram's first statistics address.
HIST_BASE = 1 << (N_STATS - 1).bit_length()

#: Latencies below this have a bucket each; above, ``SUB_BUCKETS`` buckets per octave.
LINEAR_BUCKETS = 128
SUB_BUCKETS = 8
_LINEAR_BITS = LINEAR_BUCKETS.bit_length() - 1
_SUB_BITS = SUB_BUCKETS.bit_length() - 1
#: Histogram bins, up to latency ``2**TIME_BITS - 1``.
BUCKETS = LINEAR_BUCKETS + (TIME_BITS - _LINEAR_BITS) * SUB_BUCKETS
STAT_ADDR_BITS = (HIST_BASE + BUCKETS - 1).bit_length()


#: VCs per torus port in the per-VC bitmaps of ``STATS`` (4 bits a port, 6 ports).
STAT_VCS = 4


def vc_bit(port, vc):
    """The bit of torus port ``port``'s VC ``vc`` in a per-VC bitmap of ``STATS``: VCs
    ``STAT_VCS - 1`` and above share the port's last bit (with 8 VCs, an adaptive one)."""
    return STAT_VCS * port + min(vc, STAT_VCS - 1)


def node_layout(dims):
    """A node's own settings, in its row of the configuration: ``dst`` (the fixed
    destination, or the first of an all-to-all), ``sends`` (whether it generates
    traffic), ``lit`` (per torus port, a link inside the torus is lit; face links go
    through the OCS), the ``seed`` of its generators, and ``down`` (per torus port, the
    link goes down when the run's fault comes, ``NetworkSystem.fault_at``)."""
    return data.StructLayout({"dst": unsigned(CHIP_BITS), "sends": 1, "lit": 2 * dims,
                              "seed": 32, "down": 2 * dims})


def entry_layout(routing="dor"):
    """A routing-table entry: ``hdl.ici.layouts.route_entry_layout``, or with
    ``routing="adaptive"`` its ``adaptive_entry_layout``."""
    if routing not in ROUTINGS:
        raise ValueError(f"routing must be one of {', '.join(map(repr, ROUTINGS))}, "
                         f"not {routing!r}")
    return adaptive_entry_layout if routing == "adaptive" else route_entry_layout


def row_layout(n_nodes, dims, routing="dor"):
    """A configuration row ``r``: for every node c, its routing-table entry for
    destination r (:func:`entry_layout`) and its hop count from source r; and node r's
    settings."""
    return data.StructLayout({
        "entries": data.ArrayLayout(entry_layout(routing), n_nodes),
        "hops": data.ArrayLayout(unsigned(HOP_BITS), n_nodes),
        "node": node_layout(dims),
    })


def tag_fields(local_ports):
    """``(lane_bits, seq_bits)``: the tag is the lane in its low ``lane_bits`` and the
    sequence number (per source, lane and destination, modulo ``2**seq_bits``) above."""
    lane_bits = (local_ports - 1).bit_length()
    return lane_bits, TAG_BITS - lane_bits


def payload_word(src, dst, tag, j):
    """Data word ``j`` of a probe packet: xorshift32 of ``src, dst, tag, j`` packed into
    a word, a bijection, so no two words of different packets or places are alike. The
    same function over Python ints and Amaranth values."""
    if isinstance(src, int):
        return xorshift32(src << 24 | dst << 16 | tag << 9 | j)
    return xorshift32(Cat(j[:9], tag[:TAG_BITS], dst[:CHIP_BITS], src[:CHIP_BITS]))


def latency_bucket(latency):
    """The histogram bin of a latency (an int): the latency itself below
    ``LINEAR_BUCKETS``; above, its octave and its next ``log2(SUB_BUCKETS)`` bits."""
    if not 0 <= latency < 1 << TIME_BITS:
        raise ValueError(f"latency {latency} is outside 0..{(1 << TIME_BITS) - 1}")
    if latency < LINEAR_BUCKETS:
        return latency
    top = latency.bit_length() - 1
    sub = (latency >> (top - _SUB_BITS)) & (SUB_BUCKETS - 1)
    return LINEAR_BUCKETS + (top - _LINEAR_BITS) * SUB_BUCKETS + sub


def bucket_range(bucket):
    """``(lo, hi)``: the latencies of histogram bin ``bucket``, both included."""
    if not 0 <= bucket < BUCKETS:
        raise ValueError(f"bucket {bucket} is outside 0..{BUCKETS - 1}")
    if bucket < LINEAR_BUCKETS:
        return bucket, bucket
    top, sub = divmod(bucket - LINEAR_BUCKETS, SUB_BUCKETS)
    top += _LINEAR_BITS
    width = 1 << (top - _SUB_BITS)
    lo = (1 << top) + sub * width
    return lo, lo + width - 1


def latency_bucket_hw(m, latency):
    """``latency_bucket`` in hardware: a value of ``range(BUCKETS)`` from a
    ``TIME_BITS``-bit latency (comb logic added to ``m``)."""
    bucket = Signal(range(BUCKETS))
    m.d.comb += bucket.eq(latency[:_LINEAR_BITS])
    # Octaves from low to high: the highest set bit's assignment comes last and wins.
    for top in range(_LINEAR_BITS, TIME_BITS):
        with m.If(latency[top]):
            sub = latency[top - _SUB_BITS:top]
            m.d.comb += bucket.eq(LINEAR_BUCKETS + (top - _LINEAR_BITS) * SUB_BUCKETS + sub)
    return bucket


def node_row_layout(dims, routing="dor"):
    """A node's slice of a configuration row ``r`` (``layouts.row_layout``): ``row`` (r),
    its routing-table ``entry`` for destination r, its ``hops`` from source r, and node r's
    settings ``node``."""
    return data.StructLayout({"row": unsigned(CHIP_BITS), "entry": entry_layout(routing),
                              "hops": unsigned(HOP_BITS), "node": node_layout(dims)})
