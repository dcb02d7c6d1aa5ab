"""A torchrun worker group restarted once (tests/mp/torchrun_restart_test.sh):
in the first attempt rank 1 exits with 3 after an allreduce, so torchrun
(--max-restarts 1) restarts every worker; in the second each initializes
Hora afresh and finishes. Each attempt's sum checks the world it formed."""

import os
import sys

import torch

import hora.torch as hvd

hvd.init()
attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum).item()
want = hvd.size() * (hvd.size() + 1) / 2
assert total == want, (total, want)
print("attempt %d rank %d of %d: sum ok" % (attempt, hvd.rank(), hvd.size()), flush=True)
if attempt == 0 and hvd.rank() == 1:
    sys.exit(3)
if attempt == 0:
    try:
        hvd.allreduce(torch.ones(1), name="after")
    except hvd.HorovodInternalError:
        sys.exit(1)  # (rank 1 is gone: torchrun restarts the group)
print("attempt %d rank %d done" % (attempt, hvd.rank()), flush=True)
