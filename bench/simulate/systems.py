"""Named systems for the simulator, built from published figures rather than
calibrated on this machine. Each constant says where it comes from; where no
source gives it, it says so and why the value was chosen.

    systems.get("summit") -> System
    system.params()       -> {"intra", "inter", "control", "source", "names"}
                             (the form params.load returns, for simulate.series)
    system.compute_ms(batch) -> (forward_ms, backward_ms) of one step on one GPU

Summit (OLCF, 2018-2024), the machine of seed 001 (Romero et al., NSDI 2022):

- 4,608 nodes, 6 NVIDIA V100 each (27,648 GPUs), two POWER9 sockets with 3
  GPUs each; EE Times, "Inside the Summit supercomputer",
  https://www.eetimes.com/inside-the-summit-supercomputer/
- within a socket every GPU pair has two NVLink 2.0 bricks, 100 GB/s both
  ways together (50 GB/s each way); the sockets are joined by the X Bus,
  64 GB/s both ways (32 GB/s each way); V100 HBM2 900 GB/s. WikiChip,
  https://en.wikichip.org/w/index.php?diff=79293&oldid=79290&title=supercomputers%2Fsummit
  and its Summit page (X Bus).
- nodes on a non-blocking fat tree of dual-rail Mellanox EDR InfiniBand,
  200 Gb/s per node; Mellanox, "What does it mean to Summit?",
  https://blog.mellanox.com/2017/11/what-does-it-mean-to-summit/
- EDR: 4 lanes of 25.78125 Gb/s with 64b/66b encoding, 100 Gb/s of data per
  port (ConnectX-5 Ex user manual, "Features and Benefits",
  https://manualshive.com/ru/manual/mellanox-technologies/connectx-5-ex/connectx-5-ex_user-manual_1768344-12.html);
  ConnectX-5 latency "sub-600ns" (ConnectX-5 EN product brief,
  https://manualmachine.com/mellanox/connectx5/8053735-user-manual).
- ResNet-50 v1.5 training on one V100 16 GB (DGX-1): 1200 images/s with
  mixed precision, 367 with FP32 (NVIDIA DeepLearningExamples,
  PyTorch/Classification/ConvNets/resnet50v1.5/README.md, pytorch-21.03
  container, https://github.com/NVIDIA/DeepLearningExamples), at a batch of
  256 (AMP) and 112 (FP32) per GPU (configs.yml of the same directory).
"""

from dataclasses import dataclass, field

import control
from costs import Link

GB = 1e9


@dataclass(frozen=True)
class System:
    name: str
    intra: Link
    inter: Link
    per_host: int                 # ranks (GPUs) per node
    nodes: int                    # nodes in the machine
    control: control.ControlParams
    images_per_s: float           # one GPU, published training throughput
    batch: int                    # per-GPU batch of that throughput
    backward_frac: float          # share of a step's compute in backward
    notes: dict = field(default_factory=dict)

    def compute_ms(self, batch=None):
        """(forward, backward) ms of one step at `batch` images per GPU. Other
        batches than the published one scale linearly: an approximation (small
        batches run fewer images per second, so it understates their compute)."""
        step_ms = 1e3 * (batch or self.batch) / self.images_per_s
        return step_ms * (1 - self.backward_frac), step_ms * self.backward_frac

    def params(self, **control_overrides):
        cp = self.control.with_(**control_overrides) if control_overrides else self.control
        return {"intra": self.intra, "inter": self.inter, "control": cp,
                "source": "systems.py %s (published figures, not measured here)" % self.name,
                "names": {"intra": self.name + " intra-node", "inter": self.name + " inter-node"}}


# --- Summit -----------------------------------------------------------------

# Within a node. The GPUs of one socket talk over NVLink 2.0 at 50 GB/s each
# way (two 25 GB/s bricks per pair); a collective over all 6 GPUs of a node
# also crosses the X Bus between the sockets, 32 GB/s each way. The model has
# one intra-node link, so it takes the slower hop, the one every ring or
# reduction over the whole node waits for. (test_seed001 checks that 50 GB/s
# instead moves no efficiency by more than 0.01: the network dominates.)
SUMMIT_NVLINK_BW = 50 * GB
SUMMIT_XBUS_BW = 32 * GB
# alpha within a node: no published figure. 2 us is Hora's own default for a
# shared-memory hop (HORA_COST_ALPHA_US); a GPU collective step also pays a
# kernel launch and a stream synchronisation, of the same order.
SUMMIT_INTRA_ALPHA = 2e-6
# gamma: summing two fp32 buffers into a third reads 2 m and writes m bytes
# of HBM2 at 900 GB/s: m bytes reduced per 3 m bytes moved, 300 GB/s.
SUMMIT_GAMMA = 1 / (900 * GB / 3)

# Between nodes. Two EDR rails of 100 Gb/s of data each: 25 GB/s per node,
# which costs.py splits among the flows that leave one node at once (up to
# its 6 GPUs). Nominal rates: the model gets no packet or protocol overhead.
SUMMIT_EDR_RAIL_BW = 100e9 / 8
SUMMIT_RAILS = 2
# alpha between nodes: ConnectX-5 gives "sub-600ns" per message; add the
# switch hops of a three-level fat tree and the MPI/NCCL software at both
# ends. 1.5 us is an estimate in the 1-2 us that MPI latencies over EDR
# usually take, not a measured or published Summit figure.
SUMMIT_INTER_ALPHA = 1.5e-6

# The control plane of Horovod's original design: every cycle each rank sends
# its requests (one per tensor) to the coordinator, rank 0, which receives
# n - 1 messages one after another, matches n x k requests and broadcasts the
# responses (control.slow_cycle). The response cache replaces all of it with
# one allreduce of a bit vector (control.fast_cycle) once every tensor is
# cached (Horovod PR 902, https://github.com/horovod/horovod/pull/902, which
# added the response cache; its author describes the bit-vector reduction
# that replaces the coordinator in https://github.com/horovod/horovod/issues/1305).
# No source publishes Horovod's per-request costs on POWER9. These are Hora's
# own coordinator's, measured on this repository's 2-core VM: a stand-in for
# Horovod's, with the same structure (requests decoded and matched at rank
# 0). Measured on 2026-12-05 by four runs of
#   /usr/bin/python3 bench/simulate/calibrate.py --links '' --control-repeats 9
# (36 fits of fit.fit_control to hora-engine-bench at np 1, 2 and 4, 1000
# tensors of 4 B, cache on and off); each value is the fits' median.
# Session 12's calibration, of that day's code, had c = 1.34 us, r = 0 and
# e = 1.06 us. seed001.py prints how the result moves with c (over the
# fits' range, and session 12's) and which c gives 2x.
SUMMIT_CONTROL = control.ControlParams(
    cache_capacity=1024,          # HORA_CACHE_CAPACITY (and HOROVOD_CACHE_CAPACITY) default
    request_bytes=64.9,           # q: measured, coordinator bytes per request (Hora)
    response_bytes=68.9,          # s: measured, per response (Hora)
    message_overhead_s=1e-6,      # o: root's cost per received message; not measured:
                                  #    one MPI receive (match, complete) on one core
    per_request_s=0.325e-6,       # c: measured, 0.24-0.43 us over the 36 fits
    per_tensor_s=0.17e-6,         # r: measured, 0-0.37 us
    engine_per_tensor_s=0.33e-6,  # e: measured, 0.19-0.42 us; paid cached or not
)

# ResNet-50 v1.5 on one V100 16 GB (NVIDIA DeepLearningExamples, above):
# (per-GPU batch, images per second).
V100_RN50_AMP = (256, 1200.0)
V100_RN50_FP32 = (112, 367.0)

SUMMIT = System(
    name="summit",
    intra=Link(SUMMIT_INTRA_ALPHA, 1 / SUMMIT_XBUS_BW, SUMMIT_GAMMA),
    inter=Link(SUMMIT_INTER_ALPHA, 1 / (SUMMIT_RAILS * SUMMIT_EDR_RAIL_BW), SUMMIT_GAMMA),
    per_host=6,
    nodes=4608,
    control=SUMMIT_CONTROL,
    # ResNet-50 v1.5, one V100, mixed precision, batch 256: 213 ms per step.
    images_per_s=V100_RN50_AMP[1],
    batch=V100_RN50_AMP[0],
    # No published split of a step into forward and backward. Backward does
    # about twice forward's arithmetic (gradients of both activations and
    # weights), so two thirds; gradients.json gives the order and the relative
    # ready times of ResNet-50's 161 gradients within backward.
    backward_frac=2 / 3,
    notes={"gradients": "fp32 (AMP keeps fp32 master weights and gradients)",
           "fusion_threshold": "64 MiB (Horovod's and Hora's default)"},
)

SYSTEMS = {"summit": SUMMIT}


def get(name):
    if name not in SYSTEMS:
        raise KeyError("unknown system %r (known: %s)" % (name, ", ".join(sorted(SYSTEMS))))
    return SYSTEMS[name]
