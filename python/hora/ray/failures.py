"""Which worker's failure ended a RayExecutor's function, and naming it."""

import re


def root_cause(refs):
    """The first failure (in rank order) of a worker that died or failed on
    its own, not because another did (a Hora error naming a lost or
    shut-down peer), with its rank; (None, None) when none has finished so."""
    import ray

    ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0)
    ready = set(ready)
    for rank, ref in enumerate(refs):
        if ref not in ready:
            continue
        try:
            ray.get(ref)
        except ray.exceptions.RayActorError as e:
            return e, rank
        except ray.exceptions.RayTaskError as e:
            if not peer_caused(e):
                return e, rank
        except Exception:
            continue
    return None, None


# Hora's errors for a peer that went, as Python prints them (their
# messages begin with the rank that raised them); a framework that re-raises
# them as its own (JAX inside jit: JaxRuntimeError; TensorFlow graphs:
# UnknownError) keeps this text.
_PEER_ERROR = re.compile(r"\b(UnavailableError|AbortedError): rank \d+")


def peer_caused(err):
    """Whether the worker's error `err` (Ray's wrapper) is a Hora error a
    peer's loss or end caused."""
    cause = getattr(err, "cause", None)
    if type(cause).__name__ in ("UnavailableError", "AbortedError") and \
            type(cause).__module__.startswith("hora"):
        return True
    text = str(cause) if cause is not None else str(err)
    return _PEER_ERROR.search(text) is not None


def add_note(err, text):
    """Adds `text` to `err`'s notes (printed under its traceback)."""
    add = getattr(err, "add_note", None)
    if add is not None:
        try:
            add(text)
        except Exception:
            pass
