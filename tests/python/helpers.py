"""Shared helpers: every rank can compute every rank's input from a formula."""

import importlib
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

import hora
import hora.run
import hora.torch as hvd


def framework(name, minversion=None):
    """Imports a framework the project environment pins (requirements/
    frameworks.in): where it fails to import, the tests fail. Only where
    HORATEST_OPTIONAL_FRAMEWORKS=1 (CTest's leg on Debian's python, which
    has none) are its tests skipped, on every rank alike."""
    if os.environ.get("HORATEST_OPTIONAL_FRAMEWORKS") == "1":
        return pytest.importorskip(name, minversion=minversion)
    module = importlib.import_module(name)
    if minversion is not None:
        have = tuple(int(x) for x in module.__version__.split(".")[:2] if x.isdigit())
        want = tuple(int(x) for x in minversion.split("."))
        assert have >= want, "%s %s, but these tests need %s" % (name, module.__version__,
                                                                 minversion)
    return module



def horarun_path():
    """The launcher that goes with the hora under test: $HORARUN, else the one
    bundled in the installed package (or the build tree's, for build/python),
    else horarun on PATH."""
    path = os.environ.get("HORARUN") or hora.run.launcher_path() or shutil.which("horarun")
    assert path, "no horarun: not beside %s, not on PATH, and HORARUN is unset" % hora.__file__
    return path


def package_parent():
    """The folder holding the hora under test (for a child's PYTHONPATH)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(hora.__file__)))


FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INT_DTYPES = [torch.int32, torch.int64]
DTYPES = FLOAT_DTYPES + INT_DTYPES
# Scalars, empty, single, odd sizes, multi-dim.
SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 3, 4), (1031,)]

TOL = {
    torch.float16: dict(rtol=2e-3, atol=2e-3),
    torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
    torch.float32: dict(rtol=1e-5, atol=1e-6),
    torch.float64: dict(rtol=1e-12, atol=1e-12),
}


def value(rank, shape, dtype, seed=0, lo=-3, hi=3):
    """Rank `rank`'s input: small integers in [lo, hi] (exact in every dtype)."""
    n = 1
    for d in shape:
        n *= d
    span = hi - lo + 1
    base = (torch.arange(n, dtype=torch.int64) * (rank + 2) + 3 * rank + seed) % span + lo
    return base.reshape(shape).to(dtype)


def all_values(shape, dtype, seed=0, lo=-3, hi=3):
    return [value(r, shape, dtype, seed, lo, hi) for r in range(hvd.size())]


def reduce_reference(values, op, dtype, prescale=1.0, postscale=1.0):
    """What the core's op gives for `values` (one per rank), in `dtype`."""
    n = len(values)
    if dtype.is_floating_point:
        st = torch.stack([v.to(torch.float64) * prescale for v in values])
    else:
        st = torch.stack([v.to(torch.int64) for v in values])
        if prescale != 1.0:
            st = torch.trunc(st.to(torch.float64) * prescale).to(torch.int64)
    if op == hvd.Sum:
        r = st.sum(0)
    elif op == hvd.Average:
        r = st.sum(0) / n if dtype.is_floating_point else torch.div(st.sum(0), n,
                                                                    rounding_mode="trunc")
    elif op == hvd.Min:
        r = st.min(0).values
    elif op == hvd.Max:
        r = st.max(0).values
    else:
        r = st.prod(0)
    if postscale != 1.0:
        r = r * postscale if dtype.is_floating_point else torch.trunc(r.to(torch.float64) *
                                                                      postscale)
    return r.to(dtype)


def assert_equal(got, want, dtype=None):
    dtype = dtype or want.dtype
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if dtype in TOL:
        torch.testing.assert_close(got.to(torch.float64), want.to(torch.float64), **TOL[dtype])
    else:
        assert torch.equal(got, want), (got, want)


def rows_of(rank, base=2):
    """A rank-dependent row count (0 for rank 1 when base is 1)."""
    return (rank * 2 + base) % 5


def run_alone(code, extra_env=None):
    """Runs `code` in a fresh interpreter outside the job (a job of one rank),
    with `extra_env` (a dict) added to the environment."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HORA_") and not k.startswith("HOROVOD_")}
    env["PYTHONPATH"] = package_parent()
    env.update(extra_env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)
