"""torch's GradScaler with DistributedOptimizer: its ``unscale_`` (which
``scaler.step(optimizer)`` calls) first finishes the optimizer's allreduces.

torch's own AMP loop, ``scaler.scale(loss).backward(); scaler.step(opt);
scaler.update()``, unscales and checks the gradients for infs before
``opt.step()`` runs: with Horovod's optimizer, while the gradients' in-place
allreduces may still be in flight, so a rank unscaled some of them before
the sum wrote over them, or checked its own gradients for infs and skipped
a step others took (Horovod asks for ``opt.synchronize()``,
``scaler.unscale_(opt)`` and ``with opt.skip_synchronize(): scaler.step(opt)``).

When the first DistributedOptimizer is made, GradScaler's ``unscale_`` (and
``_check_inf_per_device``, which torch calls instead for an optimizer that
scales in its own step) are wrapped: for a Hora DistributedOptimizer with
gradients not yet reduced they call its ``synchronize()`` first, and its
``step()`` then reduces nothing again (no warning). Horovod's loop is
unchanged: its ``synchronize()`` left nothing to reduce. Other optimizers
are not touched.
"""

import torch


def _wrapped(original):
    def method(self, optimizer, *args, **kwargs):
        settle = getattr(optimizer, "_hora_before_unscale", None)
        if settle is not None:
            settle()
        return original(self, optimizer, *args, **kwargs)

    method._hora_wrapped = True
    method.__name__ = original.__name__
    method.__doc__ = original.__doc__
    return method


def install():
    """Wraps the GradScaler classes of this torch (once)."""
    classes = []
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        classes.append(amp.GradScaler)
    cuda_amp = getattr(getattr(torch, "cuda", None), "amp", None)
    if cuda_amp is not None and hasattr(cuda_amp, "GradScaler"):
        classes.append(cuda_amp.GradScaler)  # (torch 1.13's own; torch 2's a subclass)
    for cls in classes:
        for name in ("unscale_", "_check_inf_per_device"):
            original = cls.__dict__.get(name)
            if original is None or getattr(original, "_hora_wrapped", False):
                continue
            setattr(cls, name, _wrapped(original))
