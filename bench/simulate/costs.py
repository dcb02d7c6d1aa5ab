"""Alpha-beta-gamma cost model of Hora's allreduce algorithms.

A Link is (alpha: seconds per message, beta: seconds per byte sent, gamma:
seconds per byte reduced). The formulas are the standard ones (Thakur,
Rabenseifner & Gropp 2005, "Optimization of collective communication
operations in MPICH"), with m the message size in bytes and n ranks:

  ring (reduce-scatter + allgather)  2(n-1)a + 2(n-1)/n m b + (n-1)/n m g
  recursive doubling                 log2(p) (a + m b + m g)        + fold
  halving-doubling (Rabenseifner)    2 log2(p) a + 2(p-1)/p m b + (p-1)/p m g + fold

where p is the largest power of two <= n and a non-power of two first folds
the extra ranks into their neighbours and unfolds at the end (Hora's
PowerOfTwoFold): fold = 2(a + m b) + m g, the same as Hora's selector
(src/collectives/selector.cc).

Several ranks per host (Topology.per_host > 1) use two links, intra (shared
memory) and inter (the network). Ranks are placed host by host, as horarun
does:
  - ring: every step waits for its slowest hop, an inter-host one: the ring
    formula with the inter link (each host has one outgoing inter-host edge,
    so the NIC is not shared);
  - recursive doubling / halving-doubling: a round (and the fold) whose
    partners all share a host uses the intra link; otherwise it waits for
    the inter link, whose bandwidth is split among the flows that leave one
    host at once in that round (up to per_host of them: beta times that
    count). Partners follow Hora's folding of non-powers of two;
  - hierarchical, as Hora runs it (collectives/allreduce_hierarchical.cc):
    a ring reduce-scatter within each host (intra) leaves each of its L
    ranks one block, m/L; the ranks at each place allreduce their block
    across the hosts (inter, the cheapest of ring / rd / hd over one rank a
    host), all L places at once, so L flows share each host's link; a ring
    allgather within the host (intra). Each host's link carries 2(H-1)/H m
    with a ring across, where a flat ring carries 2(n-1)/n m;
  - hierarchical with one rank a host crossing (HORA_HIERARCHICAL_ALLREDUCE=
    one; `hierarchical_one`): the same reduce-scatter, a gather of the
    blocks to the host's first rank (intra), its allreduce of the whole
    message across the hosts alone on the link (inter, unshared), and a
    broadcast within the host (intra: the cheaper of a binomial tree and a
    scatter with a ring allgather, as Hora's selector chooses). The same
    bytes over each link, as one flow. `choose` leaves it out: these links
    lose nothing when shared, and there it never beats `hierarchical`.

`choose` is the cost-model choice: the cheapest algorithm for each message.
Nothing here runs anything; simulate.py and validate.py call it.

Hora's selector also counts the ring's overlap of a segment's reduction
with the next one's transfer (src/collectives/registry.h, cost::Ring),
which only blocks larger than a segment (256 KiB: messages above n x 256
KiB) have; these formulas stay linear in alpha, beta and gamma, as fit.py
needs, so for such messages the ring here is slower than the selector
assumes and `choose` may pick halving-doubling where Hora runs the ring.
"""

import functools
import math
from dataclasses import dataclass

import numpy as np

ALGORITHMS = ("ring", "recursive_doubling", "halving_doubling", "hierarchical")
SHORT = {"ring": "ring", "recursive_doubling": "rd", "halving_doubling": "hd",
         "hierarchical": "hier"}


@dataclass(frozen=True)
class Link:
    alpha: float  # seconds per message
    beta: float   # seconds per byte sent
    gamma: float  # seconds per byte reduced

    def shared(self, ways):
        """This link with `ways` flows sharing its bandwidth."""
        return Link(self.alpha, self.beta * ways, self.gamma)


@dataclass(frozen=True)
class Topology:
    intra: Link          # between ranks of one host
    inter: Link          # between hosts
    per_host: int = 1    # ranks per host (1: every rank its own host)

    def hosts(self, n):
        return -(-n // self.per_host)


def pow2_floor(n):
    return 1 << (n.bit_length() - 1)


def log2_ceil(n):
    return 0 if n <= 1 else math.ceil(math.log2(n))


def fold(n, m, link):
    """Extra cost of folding a non-power of two (0 for powers of two)."""
    if n == pow2_floor(n):
        return 0.0
    return 2 * (link.alpha + m * link.beta) + m * link.gamma


# --- single-link formulas (one kind of link between all ranks) -------------

def ring(n, m, link):
    if n <= 1:
        return 0.0
    f = (n - 1) / n
    return 2 * (n - 1) * link.alpha + 2 * f * m * link.beta + f * m * link.gamma


def recursive_doubling(n, m, link):
    if n <= 1:
        return 0.0
    p = pow2_floor(n)
    return fold(n, m, link) + log2_ceil(p) * (link.alpha + m * link.beta + m * link.gamma)


def halving_doubling(n, m, link):
    if n <= 1:
        return 0.0
    p = pow2_floor(n)
    f = (p - 1) / p
    return (fold(n, m, link) + 2 * log2_ceil(p) * link.alpha + 2 * f * m * link.beta +
            f * m * link.gamma)


def reduce_to_root(n, m, link):
    """Reduce to one rank: binomial tree or reduce-scatter + gather."""
    if n <= 1:
        return 0.0
    f = (n - 1) / n
    tree = log2_ceil(n) * (link.alpha + m * link.beta + m * link.gamma)
    rabenseifner = 2 * log2_ceil(n) * link.alpha + 2 * f * m * link.beta + f * m * link.gamma
    return min(tree, rabenseifner)


def broadcast(n, m, link):
    """Binomial tree or scatter + allgather (Hora's point-to-point broadcasts)."""
    if n <= 1:
        return 0.0
    f = (n - 1) / n
    tree = log2_ceil(n) * (link.alpha + m * link.beta)
    scatter_allgather = 2 * (n - 1) * link.alpha + 2 * f * m * link.beta
    return min(tree, scatter_allgather)


FLAT = {"ring": ring, "recursive_doubling": recursive_doubling,
        "halving_doubling": halving_doubling}


# --- topology-aware forms ---------------------------------------------------

@functools.lru_cache(maxsize=4096)
def _sharing(n, per_host, order):
    """Per round of recursive doubling ("rd": partner distance 1, 2, 4, ...)
    or halving ("hd": p/2, ..., 1), after the fold: the most flows one host
    sends to other hosts at once (0: the round stays within hosts). Uses
    Hora's folding (PowerOfTwoFold: virtual rank v < extra is real rank
    2v + 1, the others v + extra). Returns (fold sharing, [round sharing])."""
    p = pow2_floor(n)
    extra = n - p
    v = np.arange(p)
    real = np.where(v < extra, 2 * v + 1, v + extra)

    def crossing(a, b):
        ha, hb = a // per_host, b // per_host
        cross = ha != hb
        return int(np.bincount(ha[cross]).max()) if cross.any() else 0

    evens = np.arange(extra) * 2
    fold_share = crossing(evens, evens + 1) if extra else 0
    masks = [1 << k for k in range(log2_ceil(p))]
    if order == "hd":
        masks.reverse()
    return fold_share, [crossing(real, real[v ^ mk]) for mk in masks]


def _link_for(share, topo):
    if share == 0:
        return topo.intra
    return topo.inter.shared(share)


def _rd_topo(n, m, topo):
    fold_share, rounds = _sharing(n, topo.per_host, "rd")
    t = fold(n, m, _link_for(fold_share, topo))
    for share in rounds:
        link = _link_for(share, topo)
        t += link.alpha + m * link.beta + m * link.gamma
    return t


def _hd_topo(n, m, topo):
    fold_share, rounds = _sharing(n, topo.per_host, "hd")
    t = fold(n, m, _link_for(fold_share, topo))
    size = m / 2
    for share in rounds:  # reduce-scatter (halving) and the mirrored allgather
        link = _link_for(share, topo)
        t += 2 * link.alpha + 2 * size * link.beta + size * link.gamma
        size /= 2
    return t


def allreduce(algo, n, m, topo):
    """Predicted seconds for one allreduce of m bytes over n ranks."""
    if algo not in ALGORITHMS:
        raise ValueError("unknown algorithm %r (known: %s)" % (algo, ", ".join(ALGORITHMS)))
    if n <= 1:
        return 0.0
    single_host = topo.hosts(n) == 1
    if algo == "ring":
        return ring(n, m, topo.intra if single_host else topo.inter)
    if single_host or topo.per_host == 1:
        link = topo.intra if single_host else topo.inter
        if algo == "hierarchical":
            return min(f(n, m, link) for f in FLAT.values())
        return FLAT[algo](n, m, link)
    if algo == "recursive_doubling":
        return _rd_topo(n, m, topo)
    if algo == "halving_doubling":
        return _hd_topo(n, m, topo)
    return hierarchical(n, m, topo)


def hierarchical(n, m, topo, across=None):
    """Hora's hierarchical allreduce on hosts of topo.per_host ranks (see the
    top): `across` names the algorithm between hosts (None: the cheapest)."""
    local = min(topo.per_host, n)
    f = (local - 1) / local
    intra = topo.intra
    # reduce-scatter and allgather: local - 1 ring steps each of m / local
    within = 2 * (local - 1) * intra.alpha + 2 * f * m * intra.beta + f * m * intra.gamma
    link = topo.inter.shared(local)
    algos = FLAT.values() if across is None else [FLAT[across]]
    return within + min(a(topo.hosts(n), m / local, link) for a in algos)


def hierarchical_one(n, m, topo, across=None):
    """Hierarchical allreduce with one rank a host crossing (see the top):
    `across` as for `hierarchical`."""
    local = min(topo.per_host, n)
    f = (local - 1) / local
    intra = topo.intra
    # the reduce-scatter: local - 1 ring steps of m / local; the gather:
    # local - 1 messages, f * m in all
    reduce_scatter = (local - 1) * intra.alpha + f * m * intra.beta + f * m * intra.gamma
    gather = (local - 1) * intra.alpha + f * m * intra.beta
    binomial = math.ceil(math.log2(local)) * (intra.alpha + m * intra.beta) if local > 1 else 0.0
    scatter_allgather = 2 * ((local - 1) * intra.alpha + f * m * intra.beta)
    algos = FLAT.values() if across is None else [FLAT[across]]
    return (reduce_scatter + gather + min(binomial, scatter_allgather)
            + min(a(topo.hosts(n), m, topo.inter) for a in algos))


def choose(n, m, topo, algorithms=ALGORITHMS):
    """(algorithm, seconds): the cost model's cheapest choice for m bytes."""
    return min(((a, allreduce(a, n, m, topo)) for a in algorithms), key=lambda x: x[1])
