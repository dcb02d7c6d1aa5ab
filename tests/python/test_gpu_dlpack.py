"""GPU tensors through DLPack (kDLCUDA), on Hora's host device.

conftest sets HORA_DEVICE=host (unless set: scripts/gpu_run.sh runs this file
with HORA_DEVICE=cuda on a GPU): the session's "GPU" is CPU memory that faults
if host code touches it. ``Session._device_buffer`` makes a CUDA-style DLPack
producer over it; collectives take it, and allocate their outputs on the
device (exported as kDLCUDA). Results are read back with ``_read_device`` and
compared with values computed here for every rank.
"""

import os

import numpy as np
import pytest

import hora.torch as hvd
from hora.common import basics
from hora.common.exceptions import HoraError


def session():
    return basics.session()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8])
@pytest.mark.parametrize("count", [0, 1, 1031])
def test_allreduce_of_a_gpu_tensor(dtype, count):
    s, n, r = session(), hvd.size(), hvd.rank()
    host = ((np.arange(count) % 7) * (r + 1)).astype(dtype)
    dev = s._device_buffer(host)
    assert dev.__dlpack_device__()[0] == 2  # kDLCUDA (on the rank's GPU)
    s.allreduce_async("gpu.ar.%s.%d" % (np.dtype(dtype).name, count), dev, dev,
                      op=basics.Sum).wait()
    got = np.frombuffer(s._read_device(dev), dtype=dtype)
    want = ((np.arange(count) % 7) * (n * (n + 1) // 2)).astype(dtype)
    np.testing.assert_array_equal(got, want)


def test_allgather_output_is_on_the_gpu():
    s, n, r = session(), hvd.size(), hvd.rank()
    host = np.full((r + 1, 3), r, dtype=np.int64)
    h = s.allgather_async("gpu.ag", s._device_buffer(host))
    h.wait()
    got = np.frombuffer(s._read_device(h.output()), dtype=np.int64).reshape(-1, 3)
    want = np.concatenate([np.full((q + 1, 3), q, dtype=np.int64) for q in range(n)])
    np.testing.assert_array_equal(got, want)
    # Host code must not touch device memory: no buffer over it.
    with pytest.raises(Exception, match="is on cuda:[0-9]+, not host memory"):
        h.output_buffer()


def _rows_of(rows, n):
    """Each rank's rows of a reducescatter of `rows` rows: the first ranks one more."""
    return [rows // n + (1 if q < rows % n else 0) for q in range(n)]


def test_reducescatter_of_a_gpu_tensor():
    s, n, r = session(), hvd.size(), hvd.rank()
    rows = 2 * n + 1
    base = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
    h = s.reducescatter_async("gpu.rs", s._device_buffer(base * (r % 2 * 2 - 1) + r),
                              op=basics.Max)
    h.wait()
    full = np.max([base * (q % 2 * 2 - 1) + q for q in range(n)], axis=0)
    counts = _rows_of(rows, n)
    start = sum(counts[:r])
    got = np.frombuffer(s._read_device(h.output()), dtype=np.float32).reshape(-1, 3)
    np.testing.assert_array_equal(got, full[start:start + counts[r]])


def test_alltoall_of_a_gpu_tensor_with_uneven_splits():
    # Rank r sends q + 1 rows to rank q, each row 100 r + q.
    s, n, r = session(), hvd.size(), hvd.rank()
    send = np.concatenate([np.full((q + 1, 2), 100 * r + q, np.int32) for q in range(n)])
    h = s.alltoall_async("gpu.a2a", s._device_buffer(send), [q + 1 for q in range(n)])
    h.wait()
    got = np.frombuffer(s._read_device(h.output()), dtype=np.int32).reshape(-1, 2)
    want = np.concatenate([np.full((r + 1, 2), 100 * q + r, np.int32) for q in range(n)])
    np.testing.assert_array_equal(got, want)
    assert list(h.received_splits()) == [r + 1] * n


def test_grouped_collectives_of_gpu_tensors():
    s, n, r = session(), hvd.size(), hvd.rank()
    # Allreduce, in place: two dtypes in one group.
    a = s._device_buffer(np.full(5, r + 1, np.float64))
    b = s._device_buffer(np.full(3, 2 * (r + 1), np.int32))
    for h in s.grouped_allreduce_async("gpu.g.ar", [a, b], None, op=basics.Sum):
        h.wait()
    total = n * (n + 1) // 2
    np.testing.assert_array_equal(np.frombuffer(s._read_device(a), np.float64),
                                  np.full(5, total, np.float64))
    np.testing.assert_array_equal(np.frombuffer(s._read_device(b), np.int32),
                                  np.full(3, 2 * total, np.int32))
    # Allgather: rank r gives r + 1 rows of int16, and one uint8.
    hs = s.grouped_allgather_async("gpu.g.ag", [
        s._device_buffer(np.full((r + 1, 2), r, np.int16)),
        s._device_buffer(np.array([7 * r], np.uint8))])
    for h in hs:
        h.wait()
    np.testing.assert_array_equal(
        np.frombuffer(s._read_device(hs[0].output()), np.int16).reshape(-1, 2),
        np.concatenate([np.full((q + 1, 2), q, np.int16) for q in range(n)]))
    np.testing.assert_array_equal(np.frombuffer(s._read_device(hs[1].output()), np.uint8),
                                  np.array([7 * q for q in range(n)], np.uint8))
    # Reducescatter, summed: n rows of float32 and 2n + 1 of int64.
    x = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
    y = np.arange(2 * n + 1, dtype=np.int64) * 3
    hs = s.grouped_reducescatter_async("gpu.g.rs", [s._device_buffer(x + r),
                                                    s._device_buffer(y - r)], op=basics.Sum)
    for h in hs:
        h.wait()
    np.testing.assert_array_equal(
        np.frombuffer(s._read_device(hs[0].output()), np.float32).reshape(-1, 2),
        (n * x + total - n)[r:r + 1])
    counts = _rows_of(2 * n + 1, n)
    start = sum(counts[:r])
    np.testing.assert_array_equal(np.frombuffer(s._read_device(hs[1].output()), np.int64),
                                  (n * y - (total - n))[start:start + counts[r]])


def test_broadcast_of_a_gpu_tensor():
    s, n, r = session(), hvd.size(), hvd.rank()
    dev = s._device_buffer(np.full(257, r + 10, dtype=np.float32))
    root = n - 1
    s.broadcast_async("gpu.bc", dev, root).wait()
    np.testing.assert_array_equal(np.frombuffer(s._read_device(dev), dtype=np.float32),
                                  np.full(257, root + 10, dtype=np.float32))


def test_ranks_that_disagree_on_the_device_are_named():
    s, n, r = session(), hvd.size(), hvd.rank()
    if n < 2:
        pytest.skip("a disagreement needs two ranks")  # (every rank skips alike)
    host = np.ones(8, dtype=np.float32)
    t = s._device_buffer(host) if r == 0 else host
    with pytest.raises(Exception) as e:
        s.allreduce_async("gpu.mixed", t, t, op=basics.Sum).wait()
    assert "rank 0 float32[8] sum on cuda" in str(e.value), str(e.value)
    assert "rank 1 float32[8] sum on cpu" in str(e.value), str(e.value)
    s.barrier()  # the job goes on


@pytest.mark.skipif(os.environ.get("HORA_DEVICE") != "host",
                    reason="the late producer is a host-device stream (HORA_DEVICE=host)")
def test_a_gpu_tensor_is_read_after_its_producers_work():
    # The producer still writes the tensor on its own stream (0.2 s late);
    # Hora asks for it on its stream (DLPack's stream argument), which the
    # producer makes wait: the collective sees the late values.
    s, n, r = session(), hvd.size(), hvd.rank()
    dev = s._device_buffer(np.zeros(4099, np.float32),
                           later=np.full(4099, r + 1, np.float32), delay_s=0.2)
    s.allreduce_async("gpu.late", dev, dev, op=basics.Sum).wait()
    np.testing.assert_array_equal(np.frombuffer(s._read_device(dev), dtype=np.float32),
                                  np.full(4099, n * (n + 1) // 2, np.float32))


def test_wait_can_leave_the_last_copies_to_a_stream():
    # Async completion: wait(stream=...) makes that stream wait for the
    # results' copies to the GPU (here Hora's own stream, the one stream a
    # host-device test has); on the host device, a stream it does not know
    # is an error that names it, and the job goes on.
    s, n, r = session(), hvd.size(), hvd.rank()
    dev = s._device_buffer(np.full(1031, r + 1, np.float32))
    stream = s._device_stream()
    assert stream is not None
    s.allreduce_async("gpu.on_stream", dev, dev, op=basics.Sum).wait(None, stream)
    # (Read in that stream's order: the copies back may still be queued.)
    np.testing.assert_array_equal(np.frombuffer(s._read_device(dev, stream), dtype=np.float32),
                                  np.full(1031, n * (n + 1) // 2, np.float32))
    if os.environ.get("HORA_DEVICE") == "host":
        # (A CUDA stream is a pointer, which cannot be checked: a wrong one
        # is undefined there, as in every CUDA library.)
        h = s.allreduce_async("gpu.unknown_stream", dev, dev, op=basics.Sum)
        with pytest.raises(HoraError, match="making stream 999 wait for the results"):
            h.wait(None, 999)
    if os.environ.get("HORA_DEVICE") == "host" and n > 1 and \
            os.environ.get("HORA_GPU_BACKEND") != "nccl":
        # The host does not wait for the copies back: with them held, a
        # receiving rank's wait(stream=...) returns (a host wait would time
        # out), and its handle is not done until they are let go.
        got = s._device_buffer(np.full(1031, r, np.float32))
        s._hold_copies_to_device(True)
        try:
            h = s.broadcast_async("gpu.held", got, 0)
            h.wait(10, stream)
            done_while_held = h.poll()
        finally:
            s._hold_copies_to_device(False)
        assert r == 0 or not done_while_held
        np.testing.assert_array_equal(np.frombuffer(s._read_device(got, stream), np.float32),
                                      np.zeros(1031, np.float32))
    s.barrier()


def test_device_buffers_are_on_the_ranks_gpu():
    # The test helper puts its buffers on the GPU the session opened (the
    # first tensor's), or on the one named; another than the open one is
    # refused, naming both.
    s = session()
    kind, mine = s._device_buffer(np.zeros(4, dtype=np.float32)).__dlpack_device__()
    assert kind == 2
    assert s._device_buffer(np.zeros(4, dtype=np.float32), device=mine).__dlpack_device__() == (
        2, mine)
    other = mine + 1
    with pytest.raises(HoraError,
                       match="on cuda:%d, but this rank works on cuda:%d" % (other, mine)):
        s._device_buffer(np.zeros(4, dtype=np.float32), device=other)


@pytest.mark.skipif(os.environ.get("HORA_GPU_BACKEND") != "nccl",
                    reason="for the NCCL run of this file (python_gpu_nccl_np2)")
def test_nccl_takes_the_gpu_collectives():
    # HORA_GPU_BACKEND=nccl: each rank a process, on the host device's NCCL.
    s, n, r = session(), hvd.size(), hvd.rank()
    dev = s._device_buffer(np.full(64, r + 1, np.float32))
    before = hvd.engine_counters()["nccl_batches"]
    s.allreduce_async("gpu.by_nccl", dev, dev, op=basics.Sum).wait()
    assert hvd.engine_counters()["nccl_batches"] > before
    np.testing.assert_array_equal(np.frombuffer(s._read_device(dev), dtype=np.float32),
                                  np.full(64, n * (n + 1) // 2, np.float32))
