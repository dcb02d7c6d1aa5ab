"""One training step on n workers: backward compute produces gradients, the
engine fuses ready gradients into buffers and allreduces them while backward
goes on (overlap). Returns the predicted step time.

The engine is one serial worker (Hora's background thread): whenever it is
free and a gradient is ready, it starts a cycle that releases every gradient
ready by then, packed in ready order into fusion buffers of up to the fusion
threshold (a gradient larger than the threshold goes alone). A cycle costs
its control-plane part (control.cycle: the bit-vector allreduce, plus
negotiation when uncached) and one allreduce per buffer. Gradients arriving
while a cycle runs go in the next one, which is how fusion and overlap
interact.

    step(n) = forward + max(backward, time the last cycle ends)
    efficiency(n) = (forward + backward) / step(n)     (weak scaling)

so a step is never faster than its compute and efficiency never exceeds 1.
With overlap=False communication starts only after backward ends (every
gradient is ready at once).
"""

from dataclasses import dataclass


@dataclass
class StepResult:
    step_s: float
    compute_s: float
    comm_s: float        # time the engine spent in cycles
    exposed_s: float     # step_s - compute_s
    cycles: int          # negotiations (each releases every gradient ready by then)
    buffers: int         # fused allreduces
    efficiency: float


def cycles_of(ready, sizes, threshold, allreduce_s, control_s, start=0.0):
    """Runs the engine over gradients ready at `ready` (sorted, seconds) with
    `sizes` bytes. allreduce_s(bytes), control_s(k tensors) give the costs.
    Returns (end time, busy time, cycles, fused buffers)."""
    i, t, busy, cycles, buffers, n = 0, start, 0.0, 0, 0, len(sizes)
    while i < n:
        t = max(t, ready[i])
        j = i
        while j < n and ready[j] <= t:
            j += 1
        cost = control_s(j - i)  # one negotiation releases all of them
        fused = 0
        for k in range(i, j):  # packed in order into buffers of <= threshold
            if fused and fused + sizes[k] > threshold:
                cost += allreduce_s(fused)
                buffers += 1
                fused = 0
            fused += sizes[k]
        cost += allreduce_s(fused)
        buffers += 1
        t += cost
        busy += cost
        cycles += 1
        i = j
    return t, busy, cycles, buffers


def simulate_step(sizes, ready_frac, forward_s, backward_s, allreduce_s, control_s,
                  fusion_threshold=64 << 20, overlap=True):
    """sizes: gradient bytes in the order backward produces them; ready_frac:
    the fraction of backward done when each is ready (non-decreasing, 0..1)."""
    if len(sizes) != len(ready_frac):
        raise ValueError("sizes and ready_frac differ in length (%d, %d)"
                         % (len(sizes), len(ready_frac)))
    if any(b < a for a, b in zip(ready_frac, ready_frac[1:])):
        raise ValueError("ready_frac must be non-decreasing")
    threshold = fusion_threshold if fusion_threshold > 0 else 0
    if overlap:
        ready = [f * backward_s for f in ready_frac]
    else:
        ready = [backward_s] * len(sizes)
    end, busy, count, buffers = cycles_of(ready, sizes, threshold, allreduce_s, control_s)
    compute = forward_s + backward_s
    step_s = forward_s + max(backward_s, end)
    return StepResult(step_s=step_s, compute_s=compute, comm_s=busy,
                      exposed_s=step_s - compute, cycles=count, buffers=buffers,
                      efficiency=compute / step_s if step_s > 0 else 1.0)
