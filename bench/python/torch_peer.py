#!/usr/bin/env python3
# Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
"""torch.distributed (gloo backend) peer of hora-bench.

hora-bench --peers torch starts one of these per rank (environment: RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and reads the records rank 0 writes to
--out: the same fields as hora-bench's --json records, impl "torch". Each
iteration is timed between a barrier and the slowest rank's end, like
hora-bench does for Hora. Inputs and the reference are hora-bench's (see
bench/hora_bench/data.cc): element i of rank r is (r+1)*((i%7)+1) % 16, or
1 + (r+i) % 2 for product.

Unsupported combinations (gloo has no average; torch 1.13's gloo backend has no
reduce_scatter) are written as one record with an "error" field.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

SMALL_BYTES = 64 << 10  # --iters-small applies up to this size (hora-bench's kSmallBytes)
DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int8": torch.int8, "uint8": torch.uint8,
          "int16": torch.int16, "int32": torch.int32, "int64": torch.int64}
OPS = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX,
       "product": dist.ReduceOp.PRODUCT}
TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 1e-6,
             torch.float64: 1e-12}


def values(op, rank, start, count):
    i = torch.arange(start, start + count, dtype=torch.float64)
    if op == "product":
        return 1 + torch.remainder(rank + i, 2)
    return torch.remainder((rank + 1) * (torch.remainder(i, 7) + 1), 16)


def reduced(op, size, start, count):
    acc = values(op, 0, start, count)
    for r in range(1, size):
        v = values(op, r, start, count)
        if op == "min":
            acc = torch.minimum(acc, v)
        elif op == "max":
            acc = torch.maximum(acc, v)
        elif op == "product":
            acc = acc * v
        else:
            acc = acc + v
    return acc


class Case:
    """One size: input, output and the reference, in hora-bench's layout."""

    def __init__(self, args, size_bytes, rank, size):
        self.a, self.rank, self.size = args, rank, size
        dtype = DTYPES[args.dtype]
        esize = torch.tensor([], dtype=dtype).element_size()
        elements = max(1, size_bytes // esize)
        c = args.collective
        chunk = max(1, elements // size)
        self.chunk = chunk
        if c in ("allreduce", "broadcast"):
            n_in = n_out = elements
            self.size_bytes, self.factor = elements * esize, (
                1.0 if c == "broadcast" else 2.0 * (size - 1) / size)
        else:
            n_in = chunk if c == "allgather" else chunk * size
            n_out = chunk * size if c != "reducescatter" else chunk
            self.size_bytes, self.factor = chunk * size * esize, (size - 1) / size
        self.count = n_in
        self.init = values(args.op, rank, 0, n_in).to(dtype)
        self.inp = self.init.clone()
        self.out = torch.empty(n_out, dtype=dtype)
        self.outs = [torch.empty(chunk, dtype=dtype) for _ in range(size)]

    def run(self):
        c = self.a.collective
        if c == "allreduce":
            t = self.inp if self.a.inplace else self.out
            if not self.a.inplace:
                # torch reduces in place: an out-of-place reduction is a copy first.
                t.copy_(self.inp)
            dist.all_reduce(t, op=OPS[self.a.op])
        elif c == "broadcast":
            dist.broadcast(self.inp, src=self.a.root)
        elif c == "allgather":
            dist.all_gather(self.outs, self.inp)
        elif c == "alltoall":
            dist.all_to_all_single(self.out, self.inp)
        else:
            raise RuntimeError("torch.distributed's gloo backend has no reduce_scatter")

    def result(self):
        c = self.a.collective
        if c == "allreduce":
            return self.inp if self.a.inplace else self.out
        if c == "broadcast":
            return self.inp
        if c == "allgather":
            return torch.cat(self.outs)
        return self.out

    def wrong(self):
        a, r, n, chunk = self.a, self.rank, self.size, self.chunk
        got = self.result().to(torch.float64)
        m = got.numel()
        if a.collective == "allreduce":
            want = reduced(a.op, n, 0, m)
        elif a.collective == "broadcast":
            want = values(a.op, a.root, 0, m)
        elif a.collective == "allgather":
            want = torch.cat([values(a.op, q, 0, chunk) for q in range(n)])
        else:  # alltoall: block q is rank q's block r
            want = torch.cat([values(a.op, q, r * chunk, chunk) for q in range(n)])
        dtype = DTYPES[a.dtype]
        want = want.to(dtype).to(torch.float64)
        tol = TOLERANCE.get(dtype, 0.0)
        bad = (got - want).abs() > tol * torch.clamp(want.abs(), min=1.0)
        return int(bad.sum())


def measure(args, size_bytes, rank, size):
    case = Case(args, size_bytes, rank, size)
    times = []
    iters = args.iters_small if args.iters_small > 0 and size_bytes <= SMALL_BYTES else args.iters
    for it in range(args.warmup + iters):
        case.inp.copy_(case.init)
        dist.barrier()
        t0 = time.perf_counter()
        case.run()
        us = torch.tensor([(time.perf_counter() - t0) * 1e6], dtype=torch.float64)
        dist.all_reduce(us, op=dist.ReduceOp.MAX)
        if it >= args.warmup:
            times.append(float(us))
    wrong = torch.tensor([case.wrong() if args.check else 0], dtype=torch.int64)
    dist.all_reduce(wrong)
    times.sort()
    avg = sum(times) / len(times)
    algbw = case.size_bytes / (avg * 1e-6) / 1e9
    return {"size_bytes": case.size_bytes, "count": case.count, "iters": iters, "avg_us": avg,
            "p50_us": times[len(times) // 2],
            "p99_us": times[min(len(times) - 1, int(-(-len(times) * 0.99 // 1)) - 1)],
            "algbw_gbps": algbw, "busbw_gbps": algbw * case.factor,
            "wrong": int(wrong) if args.check else None}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--collective", required=True)
    p.add_argument("--sizes", required=True, help="comma-separated byte counts")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--op", default="sum")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--iters-small", type=int, default=0,
                   help="iterations at sizes of at most 64 KiB (0: --iters), as hora-bench's")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--root", type=int, default=0)
    p.add_argument("--inplace", action="store_true")
    p.add_argument("--check", action="store_true")
    p.add_argument("--timeout", type=float, default=30)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    base = {"impl": "torch", "collective": args.collective, "dtype": args.dtype, "op": args.op,
            "ranks": size, "algo": "gloo", "inplace": args.inplace}
    records = []
    unsupported = None
    if args.dtype not in DTYPES:
        unsupported = "torch peer: unknown dtype " + args.dtype
    elif args.collective in ("allreduce", "reducescatter") and args.op not in OPS:
        unsupported = "torch.distributed's gloo backend has no " + args.op
    elif args.collective == "reducescatter":
        unsupported = "torch.distributed's gloo backend has no reduce_scatter"
    if unsupported:
        records.append(dict(base, error=unsupported))
    else:
        import datetime
        dist.init_process_group("gloo", rank=rank, world_size=size,
                                timeout=datetime.timedelta(seconds=args.timeout))
        for s in (int(x) for x in args.sizes.split(",")):
            try:
                records.append(dict(base, **measure(args, s, rank, size)))
            except RuntimeError as e:  # e.g. a dtype gloo cannot reduce
                records.append(dict(base, size_bytes=s, error=str(e).splitlines()[0]))
                break
        dist.destroy_process_group()
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(records, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
