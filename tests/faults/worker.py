"""One rank of a fault-injection trial (tests/faults/run.py).

Trains nothing: each step allreduces a few named arrays (so the response
cache's fast path runs) and checks every result against the value every
rank can compute. Prints its pid first, progress now and then, and at the
end DONE, or FAILED with the error, or WRONG with what differed. A fault
the worker makes itself (--fault) happens on --fault-rank at --fault-step.
"""

import argparse
import os
import sys
import time

import numpy as np

import hora.numpy as hvd


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--fault", default="none", choices=["none", "early_exit", "shutdown"])
    p.add_argument("--fault-rank", type=int, default=1)
    p.add_argument("--fault-step", type=int, default=50)
    p.add_argument("--tag", default="")  # marks the trial's processes (pgrep)
    a = p.parse_args()
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    print("PID %d STORE %s JOB %s" % (os.getpid(), os.environ.get("HORA_STORE_ADDR", ""),
                                      os.environ.get("HORA_JOB_ID", "")), flush=True)
    try:
        for step in range(a.steps):
            if a.fault != "none" and r == a.fault_rank and step == a.fault_step:
                print("FAULT %s at step %d" % (a.fault, step), flush=True)
                if a.fault == "early_exit":
                    os._exit(0)  # no shutdown(), no atexit
                hvd.shutdown()
                time.sleep(30)
                return 0
            for k in range(4):
                x = np.full(1000 + 17 * k, r + step + k, dtype=np.float32)
                y = hvd.allreduce(x, name="t%d" % k, op=hvd.Sum)
                want = sum(q + step + k for q in range(n))
                if y.shape != x.shape or not np.all(y == want):
                    print("WRONG step %d tensor t%d: got %s, want %s" % (step, k, y[:3], want),
                          flush=True)
                    return 5
            if step % 10 == 0:
                print("STEP %d" % step, flush=True)
            time.sleep(0.01)
        hvd.barrier()
    except hvd.HoraError as e:
        print("FAILED %s: %s" % (type(e).__name__, e), flush=True)
        return 1
    print("DONE", flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
