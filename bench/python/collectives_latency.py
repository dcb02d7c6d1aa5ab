"""Small allgather, broadcast, alltoall and reducescatter from Python:
hora.torch's one-call forms against its general path, same run, alternating.

    PYTHONPATH=build/python build/bin/horarun -np 2 /usr/bin/python3 \\
        bench/python/collectives_latency.py --rows 4 --iters 2000 --rounds 3

Rank 0 prints one line per (collective, round): avg and p50 in
microseconds of a blocking call on a float32 tensor of --rows rows a rank
(alltoall: --rows to each rank; reducescatter: --rows for each rank to
keep), after --warmup calls: the call as a user writes it (a plain host
tensor: one call into the core, which waits); the same call named in
other than ASCII, which takes the general path (autograd's Function and
a handle, as every such call ran before 2026-12-05); and the async form
waited for (`hvd.synchronize(hvd.allgather_async(x))` and the like, a
handle without autograd). The allreduce's are there for comparison
(bench/python/allreduce_latency.py has more of it).
"""

import torch

import hora.torch as hvd
from latency import parser, timed  # (beside this script)


def main():
    p = parser(__doc__, iters=2000, warmup=200, rounds=3, rows=4)
    args = p.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    n = hvd.size()
    x = torch.ones(args.rows)
    spread = torch.ones(args.rows * n)  # alltoall, reducescatter: rows for every rank
    s = hvd.synchronize
    general = "\u00e9"  # (a name not in ASCII: the general path)
    calls = (
        ("allreduce", lambda nm: hvd.allreduce(x, name="ar" + nm),
         lambda: s(hvd.allreduce_async(x, name="ar.h"))),
        ("allgather", lambda nm: hvd.allgather(x, name="ag" + nm),
         lambda: s(hvd.allgather_async(x, name="ag.h"))),
        ("broadcast", lambda nm: hvd.broadcast(x, 0, name="bc" + nm),
         lambda: s(hvd.broadcast_async(x, 0, name="bc.h"))),
        ("alltoall", lambda nm: hvd.alltoall(spread, name="a2a" + nm),
         lambda: s(hvd.alltoall_async(spread, name="a2a.h"))),
        ("reducescatter", lambda nm: hvd.reducescatter(spread, op=hvd.Sum, name="rs" + nm),
         lambda: s(hvd.reducescatter_async(spread, op=hvd.Sum, name="rs.h"))),
    )
    if hvd.rank() == 0:
        print("np %d, %d float32 rows a rank, %d iters after %d warm-up, avg / p50 in us"
              % (n, args.rows, args.iters, args.warmup))
    for r in range(args.rounds):
        for label, call, handle in calls:
            for form, fn in (("", lambda: call("")), (", general path", lambda: call(general)),
                             (", async + synchronize", handle)):
                avg, p50 = timed(fn, args.iters, args.warmup)
                if hvd.rank() == 0:
                    print("round %d  %-36s avg %8.1f  p50 %8.1f" % (r + 1, label + form, avg, p50))


if __name__ == "__main__":
    main()
