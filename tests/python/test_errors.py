"""Errors: mismatches across ranks, bad arguments, use before init."""

import numpy as np
import pytest
import torch

import hora
import hora.torch as hvd
from helpers import run_alone


def _ranks_named(message):
    return all(("rank %d" % q) in message for q in range(hvd.size()))


def test_shape_mismatch_fails_everywhere_then_next_works():
    if hvd.size() == 1:
        pytest.skip("needs two ranks (skipped on every rank alike)")
    r = hvd.rank()
    with pytest.raises(hvd.MismatchError) as info:
        hvd.allreduce(torch.ones(r + 1), name="mismatch.shape")
    msg = str(info.value)
    assert "mismatch.shape" in msg
    assert _ranks_named(msg), msg
    assert isinstance(info.value, hora.HoraError)
    # The job goes on.
    assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after.mismatch"),
                       torch.full((2,), float(hvd.size())))


def test_groups_of_different_sizes_fail_everywhere_then_next_works():
    # Rank 0 groups three tensors, the others one: every rank's group fails
    # at once naming both sizes (the members only rank 0 submits waited
    # forever before, with stall reports naming them alone).
    if hvd.size() == 1:
        pytest.skip("needs two ranks (skipped on every rank alike)")
    n = 3 if hvd.rank() == 0 else 1
    with pytest.raises(hvd.MismatchError, match="in group 'mismatch.group' of 3.*"
                       "in group 'mismatch.group' of 1"):
        hvd.grouped_allreduce([torch.ones(2)] * n, name="mismatch.group")
    got = hvd.grouped_allreduce([torch.ones(2), torch.ones(1)], name="after.group", op=hvd.Sum)
    assert [t.tolist() for t in got] == [[float(hvd.size())] * 2, [float(hvd.size())]]


def test_dtype_and_trailing_dim_mismatch():
    if hvd.size() == 1:
        pytest.skip("needs two ranks (skipped on every rank alike)")
    r = hvd.rank()
    dtype = torch.float32 if r == 0 else torch.float64
    with pytest.raises(hvd.MismatchError, match="mismatch.dtype"):
        hvd.allreduce(torch.ones(3, dtype=dtype), name="mismatch.dtype")
    with pytest.raises(hvd.MismatchError, match="mismatch.allgather"):
        hvd.allgather(torch.ones(2, 2 + r), name="mismatch.allgather")
    with pytest.raises(hvd.MismatchError, match="mismatch.op"):
        hvd.allreduce(torch.ones(3), op=hvd.Sum if r == 0 else hvd.Max, name="mismatch.op")
    # An async handle carries the error too, and other tensors in flight go on.
    bad = hvd.allreduce_async(torch.ones(r + 2), name="mismatch.async")
    good = hvd.allreduce_async(torch.ones(2), op=hvd.Sum, name="fine.async")
    with pytest.raises(hvd.MismatchError):
        hvd.synchronize(bad)
    with pytest.raises(hvd.MismatchError):  # the same error again
        hvd.synchronize(bad)
    assert torch.equal(hvd.synchronize(good), torch.full((2,), float(hvd.size())))


def test_local_argument_errors():
    with pytest.raises(hvd.UnimplementedError, match="GPU|CPU"):
        hvd.allreduce(torch.ones(2, device="meta"))
    with pytest.raises(hvd.InvalidArgumentError, match="dtype"):
        hvd.allreduce(torch.ones(2, dtype=torch.complex64))
    with pytest.raises(hvd.InvalidArgumentError, match="sparse"):
        hvd.allreduce(torch.ones(2, 2).to_sparse())
    # The same from every form that takes a tensor in place, the common call's
    # shortcuts included (they leave such tensors to the general checks).
    for call in (hvd.allreduce_, hvd.allreduce_async_):
        with pytest.raises(hvd.InvalidArgumentError, match="sparse_allreduce_async"):
            call(torch.ones(2, 2).to_sparse(), op=hvd.Sum)
        with pytest.raises(hvd.UnimplementedError, match="GPU|CPU"):
            call(torch.ones(2, device="meta"), op=hvd.Sum)
        with pytest.raises(hvd.InvalidArgumentError, match="dtype"):
            call(torch.ones(2, dtype=torch.complex64), op=hvd.Sum)
    for call in (hvd.allgather, lambda t: hvd.broadcast(t, 0), hvd.alltoall,
                 lambda t: hvd.reducescatter(t, op=hvd.Sum)):
        with pytest.raises(hvd.InvalidArgumentError, match="sparse"):
            call(torch.ones(2, 2).to_sparse())
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(2), op=hvd.Sum, average=True)
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(torch.ones(2), process_set=hvd.ProcessSet([0, hvd.size()]))
    with pytest.raises(TypeError):
        hvd.grouped_allreduce(torch.ones(2))
    # Every rank, given as an unregistered set, is the global set.
    hvd.allreduce(torch.ones(2), process_set=hvd.ProcessSet(range(hvd.size())))


def test_use_before_init_and_after_shutdown():
    res = run_alone("""
        import torch, numpy as np
        import hora, hora.torch as hvd, hora.numpy as hnp
        for call in (lambda: hvd.allreduce(torch.ones(1)), hvd.rank, hvd.size,
                     lambda: hvd.broadcast_parameters({"a": torch.ones(1)}, 0),
                     lambda: hnp.allreduce(np.ones(1))):
            try:
                call()
                raise SystemExit("no error before init")
            except hora.NotInitializedError as e:
                assert isinstance(e, ValueError) and isinstance(e, hora.HoraError)
                assert "has not been initialized" in str(e), e
        assert not hvd.is_initialized()
        hvd.init(); hvd.init()  # twice is fine
        assert hvd.is_initialized() and hvd.size() == 1 and hvd.rank() == 0
        assert hvd.allreduce(torch.ones(2)).tolist() == [1.0, 1.0]
        hvd.shutdown()
        try:
            hvd.allreduce(torch.ones(1)); raise SystemExit("no error after shutdown")
        except hora.NotInitializedError:
            pass
        hvd.init()
        assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [1.0, 1.0]
        print("OK")
    """)
    assert res.returncode == 0 and "OK" in res.stdout, res.stdout + res.stderr


def test_a_name_in_flight_is_refused_by_the_submitting_call():
    # Horovod raises ValueError from the call that submits a second tensor of
    # a name still in flight (allreduce, allgather, broadcast, reducescatter);
    # the first one goes on. The other ranks submit theirs only after a
    # barrier that rank 0 reaches once it has tried the duplicates, so rank
    # 0's first tensors are surely still in flight then.
    n = hvd.size()
    if n == 1:
        pytest.skip("needs two ranks (skipped on every rank alike)")

    def submit():
        return [hvd.allreduce_async(torch.ones(2), name="dup.ar", op=hvd.Sum),
                hvd.allgather_async(torch.ones(1, 2), name="dup.ag"),
                hvd.broadcast_async(torch.ones(3), 0, name="dup.bc"),
                hvd.reducescatter_async(torch.ones(2 * n), name="dup.rs", op=hvd.Sum)]

    if hvd.rank() == 0:
        first = submit()
        calls = [lambda: hvd.allreduce_async(torch.ones(2), name="dup.ar"),
                 lambda: hvd.allgather_async(torch.ones(1, 2), name="dup.ag"),
                 lambda: hvd.broadcast_async(torch.ones(3), 0, name="dup.bc"),
                 lambda: hvd.reducescatter_async(torch.ones(2 * n), name="dup.rs")]
        for call, name in zip(calls, ["dup.ar", "dup.ag", "dup.bc", "dup.rs"]):
            with pytest.raises(ValueError, match="already in flight") as info:
                call()
            assert name in str(info.value)
        hvd.barrier()
    else:
        hvd.barrier()
        first = submit()
    assert hvd.synchronize(first[0]).tolist() == [float(n)] * 2
    assert hvd.synchronize(first[1]).shape == (n, 2)
    assert hvd.synchronize(first[2]).tolist() == [1.0] * 3
    assert hvd.synchronize(first[3]).tolist() == [float(n)] * 2


def test_horovod_exception_types():
    # A collective that failed across the job is Horovod's HorovodInternalError;
    # a bad argument is a ValueError, as in Horovod.
    assert issubclass(hvd.HorovodInternalError, RuntimeError)
    for cls in (hvd.MismatchError, hvd.HoraTimeoutError, hvd.AbortedError,
                hvd.UnavailableError, hvd.InternalError):
        assert issubclass(cls, hvd.HorovodInternalError), cls
    assert not issubclass(hvd.InvalidArgumentError, hvd.HorovodInternalError)
    assert issubclass(hvd.NotInitializedError, ValueError)
    assert issubclass(hvd.NotInitializedError, hvd.HorovodInternalError)
    if hvd.size() > 1:
        with pytest.raises(hvd.HorovodInternalError, match="types.mismatch"):
            hvd.allreduce(torch.ones(hvd.rank() + 1), name="types.mismatch")
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(2), op=hvd.Sum, average=True)
    # Printed as users import them, not by the extension module.
    assert hvd.InvalidArgumentError.__module__ == "hora"
    assert hvd.MismatchError.__qualname__ == "MismatchError"
    e = hora.HostsUpdatedInterrupt(True)
    assert isinstance(e, RuntimeError) and e.skip_sync is True and str(e) == "True"


def test_horovod_module_paths():
    from hora.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
    from hora.torch import mpi_ops
    from hora.torch.elastic import HostsUpdatedInterrupt as elastic_interrupt

    assert HorovodInternalError is hvd.HorovodInternalError
    assert elastic_interrupt is HostsUpdatedInterrupt
    for name in ("allreduce_async_", "grouped_allreduce_async_", "sparse_allreduce_async",
                 "synchronize", "poll", "size", "rank", "Average", "Adasum", "join",
                 "global_process_set", "reducescatter_async"):
        assert getattr(mpi_ops, name) is getattr(hvd, name), name
    # Horovod's elastic names (test_elastic.py tests what they do).
    for name in ("run", "TorchState", "ElasticSampler", "State", "ObjectState"):
        assert callable(getattr(hvd.elastic, name)), name
    assert hvd.elastic.HoraInternalError is HorovodInternalError


def test_exceptions_print_with_their_import_path():
    res = run_alone("""
        import hora.torch as hvd, torch
        hvd.init()
        hvd.allreduce(torch.ones(2, dtype=torch.complex64))
    """)
    assert res.returncode != 0
    assert "hora._core" not in res.stderr, res.stderr
    assert "hora.InvalidArgumentError: allreduce" in res.stderr, res.stderr


def test_a_long_name_of_multibyte_characters_is_said_not_emptied():
    # 80,000 bytes of two-byte characters, over the 64 KiB limit: the message
    # quotes its start whole, never half a character (which once left the
    # message empty).
    with pytest.raises(ValueError) as info:
        hvd.allreduce(torch.ones(2), name="é" * 40000)
    msg = str(info.value)
    assert "é" * 16 in msg and "bytes long; names are at most 65536 bytes" in msg, msg


def test_a_nul_in_a_name_does_not_cut_the_message():
    with pytest.raises(ValueError) as info:
        hvd.allreduce(torch.ones(2), name="a\0b" + "x" * 70000)
    msg = str(info.value)
    assert "a\\x00bxxx" in msg and "bytes long" in msg, msg


def test_a_name_that_is_not_utf8_is_said_so():
    # A lone surrogate (what a bad decode with surrogateescape leaves) has no
    # UTF-8 form.
    for call in (lambda: hvd.allreduce(torch.ones(2), name="w\udc80"),
                 lambda: hvd.grouped_allreduce([torch.ones(2)], name="g\udc80"),
                 lambda: hvd.allgather(torch.ones(2), name="\udc80")):
        with pytest.raises(hvd.InvalidArgumentError, match="not valid UTF-8"):
            call()


def test_adasum_refusals_name_the_tensor():
    import hora.numpy as hnp
    with pytest.raises(ValueError, match="allreduce 'ints': Adasum is defined for floating"):
        hnp.allreduce(np.ones(2, np.int32), op=hnp.Adasum, name="ints")
    with pytest.raises(ValueError, match="reducescatter 'rs': Adasum is an allreduce op only"):
        hnp.reducescatter(np.ones(4, np.float32), op=hnp.Adasum, name="rs")


@pytest.mark.parametrize("scale", [{"prescale_factor": float("nan")},
                                   {"postscale_factor": float("nan")},
                                   {"prescale_factor": float("inf")}])
def test_scale_factors_must_be_finite(scale):
    # (NaN on every rank once gave a false "ranks disagree": NaN != NaN.)
    key, value = next(iter(scale.items()))
    with pytest.raises(ValueError, match="allreduce 'scale.bad': %s is %s; scale factors must "
                       "be finite" % (key, value)):
        hvd.allreduce(torch.ones(2), name="scale.bad", **scale)
    n = float(hvd.size())
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum, name="scale.after").tolist() == [n, n]
