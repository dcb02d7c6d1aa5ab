"""Parameter-server baseline for the training study (imported by worker.py).

Rank 0 is the server and holds the authoritative parameters and the optimizer
(SGD, with its momentum buffers). Rank 0 ALSO TRAINS: it computes the
gradient of its own batch like every other rank, so np ranks are np trainers
and the throughput compares directly with Hora and DDP at the same np (at np 1
this is plain local SGD). Each step, after backward:

  1. every worker (rank > 0) pushes its whole gradient to rank 0 as ONE flat
     float32 message (dist.send);
  2. rank 0 receives the np-1 messages (dist.irecv, all posted at once), adds
     its own gradient, divides by np, and takes the optimizer step;
  3. rank 0 sends the new weights, again one flat message, to every worker
     (dist.isend, all posted at once); workers copy them into their model.

Why point-to-point send/recv and not gather + broadcast/scatter: the defining
cost of a central server is that its link carries 2*(np-1) full copies of the
model per step while the workers' links idle; explicit sends keep exactly that
traffic pattern, whereas gloo's broadcast may use a tree that forwards weights
through workers and would no longer be a parameter server. One flat message
per direction (rather than one per tensor) spares per-message latency, as a
real server's batching would; it favours this baseline, if anything. There is
no overlap of communication with backward (push starts after backward ends).
BatchNorm running statistics are not exchanged (each rank keeps its own, as
with Hora's DistributedOptimizer).
"""

import torch
import torch.distributed as dist


def _flatten_into(tensors, buf):
    offset = 0
    for t in tensors:
        n = t.numel()
        buf[offset:offset + n].copy_(t.reshape(-1))
        offset += n


def _unflatten_from(buf, tensors):
    offset = 0
    for t in tensors:
        n = t.numel()
        t.copy_(buf[offset:offset + n].view_as(t))
        offset += n


class ParameterServer:
    """Push-gradient / pull-weight exchange over an initialised gloo group.

    params: the trainable parameters of this rank's model (same order on every
    rank). make_optimizer(params) builds the server's optimizer; it is called
    on rank 0 only: workers hold copies of the weights, no optimizer.
    """

    def __init__(self, params, make_optimizer, rank, size):
        self.params = list(params)
        self.rank, self.size = rank, size
        numel = sum(p.numel() for p in self.params)
        self.grad_buf = torch.zeros(numel)
        self.weight_buf = torch.zeros(numel)
        self.optimizer = make_optimizer(self.params) if rank == 0 else None
        self.recv_bufs = [torch.zeros(numel) for _ in range(size - 1)] if rank == 0 else []

    def initial_pull(self):
        """Every worker starts from the server's weights."""
        if self.rank == 0:
            self._send_weights()
        else:
            self._recv_weights()

    def step(self):
        """After backward: push the gradient, (server) update, pull the weights."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        _flatten_into(grads, self.grad_buf)
        if self.rank == 0:
            reqs = [dist.irecv(buf, src=src) for src, buf in enumerate(self.recv_bufs, start=1)]
            for req in reqs:
                req.wait()
            for buf in self.recv_bufs:
                self.grad_buf.add_(buf)
            self.grad_buf.div_(self.size)
            for p in self.params:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            _unflatten_from(self.grad_buf, [p.grad for p in self.params])
            self.optimizer.step()
            self._send_weights()
        else:
            dist.send(self.grad_buf, dst=0)
            self._recv_weights()

    def _send_weights(self):
        with torch.no_grad():
            _flatten_into(self.params, self.weight_buf)
        reqs = [dist.isend(self.weight_buf, dst=dst) for dst in range(1, self.size)]
        for req in reqs:
            req.wait()

    def _recv_weights(self):
        dist.recv(self.weight_buf, src=0)
        with torch.no_grad():
            _unflatten_from(self.weight_buf, self.params)
