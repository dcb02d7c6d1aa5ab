"""Collectives of a process set from Python: hora.torch's allreduce,
allgather, broadcast and alltoall on a set of some of the job's ranks.

    PYTHONPATH=build/python build/bin/horarun -np 3 /usr/bin/python3 \\
        bench/python/process_set_latency.py --rounds 2

The set is the job's first --members ranks (default: all but the last);
the other ranks wait in a barrier. Rank 0 prints one line per (call,
round): avg and p50 in microseconds of a blocking call on a float32
tensor, after --warmup calls: allreduce_ in place of 4 B, 16 KiB, 1 MiB
and 16 MiB (--iters calls below 1 MiB, a tenth as many from it), an
allgather of 256 KiB a rank, a broadcast of 1 MiB and an alltoall of
1 MiB. Since 2026-12-06 a set of two ranks or more on one host runs on
shared-memory windows of its own; compare against an older build in
alternating runs.
"""

import torch

import hora.torch as hvd
from latency import parser, run_rounds  # (beside this script)


def main():
    p = parser(__doc__, iters=2000, warmup=20, rounds=2)
    p.add_argument("--members", type=int, default=0, help="the set's ranks (0: all but the last)")
    args = p.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    k = args.members or max(1, hvd.size() - 1)
    ps = hvd.add_process_set(list(range(k)))
    big = max(1, args.iters // 10)
    tensors = {n: torch.ones(n) for n in (1, 4096, 262144, 4 << 20)}
    gathered = torch.ones(65536)
    spread = torch.ones(262144)
    calls = [("allreduce_ %s" % size, (lambda t=tensors[n]: hvd.allreduce_(t, process_set=ps)),
              args.iters if n < 262144 else big)
             for n, size in ((1, "4 B"), (4096, "16 KiB"), (262144, "1 MiB"), (4 << 20, "16 MiB"))]
    calls += [("allgather 256 KiB a rank", lambda: hvd.allgather(gathered, process_set=ps), big),
              ("broadcast_ 1 MiB", lambda: hvd.broadcast_(spread, 0, process_set=ps), big),
              ("alltoall 1 MiB", lambda: hvd.alltoall(spread, process_set=ps), big)]
    if hvd.rank() == 0:
        print("np %d, a process set of ranks 0-%d, avg / p50 in us" % (hvd.size(), k - 1))
    if ps.included():
        run_rounds(calls, args, hvd.rank() == 0)
    hvd.barrier()


if __name__ == "__main__":
    main()
