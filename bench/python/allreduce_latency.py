"""Small-message allreduce latency from Python: hora.torch against
torch.distributed (gloo) in the same processes, same run, alternating rounds.

    PYTHONPATH=build/python build/bin/horarun -np 2 /usr/bin/python3 \\
        bench/python/allreduce_latency.py --bytes 4 --iters 2000 --rounds 3

Rank 0 prints one line per (call, round): avg and p50 in microseconds of a
blocking allreduce (sum) of a float32 tensor of --bytes bytes, after --warmup
calls: `hvd.allreduce_` (its direct path: one call into the core, which
waits), the same through a handle (`hvd.synchronize(hvd.allreduce_async_(x))`,
as allreduce_ ran before), out of place (`hvd.allreduce(x)`, direct, and
`hvd.synchronize(hvd.allreduce_async(x))`), and torch.distributed's gloo
`all_reduce`, which is initialised over TCP on a port rank 0 picks.
"""

import socket

import torch
import torch.distributed as dist

import hora.torch as hvd
from latency import parser, timed  # (beside this script)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = parser(__doc__, iters=2000, warmup=200, rounds=3)
    p.add_argument("--bytes", type=int, default=4)
    args = p.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    port = hvd.broadcast_object(free_port() if hvd.rank() == 0 else None, root_rank=0)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=hvd.rank(), world_size=hvd.size())
    n = max(1, args.bytes // 4)
    x = torch.ones(n)

    def hora_call():
        hvd.allreduce_(x, op=hvd.Sum, name="lat")

    def hora_handle_call():
        hvd.synchronize(hvd.allreduce_async_(x, op=hvd.Sum, name="lat.handle"))

    def hora_out_call():
        hvd.allreduce(x, op=hvd.Sum, name="lat.out")

    def hora_out_handle_call():
        hvd.synchronize(hvd.allreduce_async(x, op=hvd.Sum, name="lat.out.handle"))

    def torch_call():
        dist.all_reduce(x)

    if hvd.rank() == 0:
        print("np %d, %d B float32 sum, %d iters after %d warm-up, avg / p50 in us"
              % (hvd.size(), 4 * n, args.iters, args.warmup))
    for r in range(args.rounds):
        for label, fn in (("hora.torch allreduce_", hora_call),
                          ("hora.torch allreduce_async_ + sync", hora_handle_call),
                          ("hora.torch allreduce", hora_out_call),
                          ("hora.torch allreduce_async + sync", hora_out_handle_call),
                          ("torch.distributed gloo all_reduce", torch_call)):
            avg, p50 = timed(fn, args.iters, args.warmup)
            if hvd.rank() == 0:
                print("round %d  %-34s avg %8.1f  p50 %8.1f" % (r + 1, label, avg, p50))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
