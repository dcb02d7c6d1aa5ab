"""Cost model of Hora's control plane: what one engine cycle costs before the
data moves (docs/dev/design.md §4; src/engine/negotiator.cc, collectives/bitwise_and.cc).

Every cycle, every rank takes part in one bitwise-AND allreduce of the cache
bit vector (recursive doubling, as collectives/bitwise_and.cc does). Hora's vector has
2 * ceil(C / 64) + 1 words of 8 bytes for a cache of C entries (ready bits,
valid bits, one status word):

    fast(n)      = rd(n, 8 W)             W = 2 ceil(C/64) + 1

A cycle with uncached tensors (k of them) also takes the slow path: each
rank sends its requests to the coordinator (rank 0), which decodes and
matches them and broadcasts the responses (binomial tree, a size then the
data). The root receives 2 (n-1) messages one after another, so the gather
is linear in n:

    gather(n, k) = alpha + (n-1) (2 o + (8 + k q) beta)
    slow(n, k)   = fast(n) + gather(n, k) + n k c + k r
                   + 2 log2(n) alpha + log2(n) (8 + k s) beta

with q / s the bytes of one request / response, o the root's per-message
receive overhead, c the coordinator's work per request (decode, match: n k
of them), r each rank's own work per negotiated tensor (encode its request,
decode the response, fill the cache). calibrate.py fits q and s to
hora-engine-bench's coordinator bytes and c and r to the time the cache
saves (fit.fit_control); o is not measured (2 us by default).

Every tensor also costs its engine bookkeeping e, cached or not (enqueue,
packing into and out of the fusion buffer, completing its handle), paid on
each rank in parallel: cycle(n, k) adds k e. calibrate.py measures e as the
step time per tensor of tiny tensors on one rank with the cache on.

When a step has more tensors than the cache has entries, an LRU cache
evicts each entry before it is used again: every tensor is a miss
(`cached=True` then still costs the slow path).
"""

import math
from dataclasses import dataclass, replace

from costs import Link, recursive_doubling


@dataclass(frozen=True)
class ControlParams:
    cache_capacity: int = 1024        # HORA_CACHE_CAPACITY
    request_bytes: float = 64.0       # q: one tensor's request, encoded
    response_bytes: float = 64.0      # s: one tensor's response, encoded
    message_overhead_s: float = 2e-6  # o: root's cost per received message
    per_request_s: float = 0.5e-6     # c: coordinator's work per request
    per_tensor_s: float = 1e-6        # r: each rank's work per negotiated tensor
    engine_per_tensor_s: float = 0.0  # e: engine bookkeeping per tensor, every cycle

    def with_(self, **kw):
        return replace(self, **kw)


def bitvector_words(capacity):
    return 2 * math.ceil(capacity / 64) + 1


def fast_cycle(n, link, cp):
    """The bit-vector AND allreduce every cycle pays."""
    if n <= 1:
        return 0.0
    nbytes = 8 * bitvector_words(cp.cache_capacity)
    return recursive_doubling(n, nbytes, Link(link.alpha, link.beta, 0.0))


def gather(n, k, link, cp):
    if n <= 1:
        return 0.0
    return link.alpha + (n - 1) * (2 * cp.message_overhead_s +
                                   (8 + k * cp.request_bytes) * link.beta)


def broadcast_responses(n, k, link, cp):
    if n <= 1:
        return 0.0
    rounds = math.ceil(math.log2(n))
    return 2 * rounds * link.alpha + rounds * (16 + k * cp.response_bytes) * link.beta


def slow_cycle(n, k, link, cp):
    """A cycle that negotiates k uncached tensors with the coordinator."""
    if n <= 1:
        return 0.0
    return (fast_cycle(n, link, cp) + gather(n, k, link, cp) + n * k * cp.per_request_s +
            k * cp.per_tensor_s + broadcast_responses(n, k, link, cp))


def cycle(n, k, link, cp, cached, tensors_per_step=0):
    """Control cost of one cycle releasing k tensors. cached: the response
    cache holds them (steady state), unless the step has more tensors than
    the cache has entries."""
    thrash = tensors_per_step > cp.cache_capacity
    if cached and cp.cache_capacity > 0 and not thrash:
        return fast_cycle(n, link, cp) + k * cp.engine_per_tensor_s
    return slow_cycle(n, k, link, cp) + k * cp.engine_per_tensor_s


def coordinator_bytes(n, k, cp):
    """Bytes rank 0 exchanges in one slow cycle (hora-engine-bench's
    coord_B/step counts requests from n-1 ranks and the responses, each with
    an 8-byte length)."""
    return (n - 1) * (8 + k * cp.request_bytes) + 8 + k * cp.response_bytes
