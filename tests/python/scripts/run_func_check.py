"""hora.run(func, num_proc=...), Horovod's horovod.run, from a plain Python
process (no launcher): each rank's result in rank order, the ranks' output
shown, a failing rank's job an error, the arguments Hora does not take
refused. Prints "run_func checks passed" and exits 0, or fails."""

import contextlib
import io
import sys

import numpy as np

import hora as horovod


def train(scale, offset=0, rows=1):
    import hora.numpy as hvd

    hvd.init()
    r = hvd.rank()
    print("rank %d trains" % r, flush=True)
    total = hvd.allreduce(np.array([r + 1.0]), op=hvd.Sum)
    return {"rank": r, "size": hvd.size(), "sum": float(total[0]) * scale + offset,
            "rows": np.full((rows, 3), r, np.int64)}


def _progress():
    import os
    print("progress 50%", end="")
    return int(os.environ["HORA_RANK"])


def fail_on_one():
    import hora.numpy as hvd

    hvd.init()
    if hvd.rank() == 1:
        raise ValueError("rank 1 gives up")
    return hvd.rank()


def main():
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        # (rows=2000: a result of ~64 KB, sent in many lines)
        out = horovod.run(train, args=(10,), kwargs={"offset": 1, "rows": 2000}, num_proc=3)
    assert [o["rank"] for o in out] == [0, 1, 2], out
    assert all(o["size"] == 3 and o["sum"] == 61.0 for o in out), out
    for r, o in enumerate(out):
        np.testing.assert_array_equal(o["rows"], np.full((2000, 3), r, np.int64))
    for r in range(3):
        assert "[%d]: rank %d trains" % (r, r) in shown.getvalue(), shown.getvalue()
    assert "HORA_RUN_RESULT" not in shown.getvalue()
    # Under mpirun (horarun --mpi), whose forwarding splits long lines: the
    # results through files.
    import shutil
    if shutil.which("mpirun"):
        with contextlib.redirect_stdout(io.StringIO()):
            out = horovod.run(train, args=(1,), kwargs={"rows": 2000}, num_proc=2,
                              use_mpi=True)
        assert [o["sum"] for o in out] == [3.0, 3.0], out
        for r, o in enumerate(out):
            np.testing.assert_array_equal(o["rows"], np.full((2000, 3), r, np.int64))
    # A closure over local data goes by value (cloudpickle); np, Horovod's
    # old name, with its DeprecationWarning.
    base = 7
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert horovod.run(lambda: base * 2, np=2) == [14, 14]
    assert any("np is deprecated, use num_proc" in str(w.message) for w in caught), caught
    # What a rank prints without a newline before it returns is shown.
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        assert horovod.run(_progress, num_proc=2) == [0, 1]
    assert "[1]: progress 50%" in shown.getvalue(), shown.getvalue()
    assert "HORA_RUN_RESULT" not in shown.getvalue()

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            horovod.run(fail_on_one, num_proc=2)
        raise AssertionError("a failing rank's job returned")
    except RuntimeError as e:
        assert "the job failed (horarun's exit code 1)" in str(e), e
    for kwargs, error, text in [
            ({"min_num_proc": 1}, NotImplementedError, "elastic jobs start from the command"),
            ({"use_mpi": True, "output_filename": "o"}, NotImplementedError,
             "horarun --mpi writes no output files"),
            ({"use_mpi": True, "hosts": "localhost:1,node7:1"}, NotImplementedError,
             "with other hosts"),
            ({"mpi_args": "-x A"}, NotImplementedError, "mpi_args"),
            ({"hosts": "localhost:2", "hostfile": "h"}, ValueError, "hosts or hostfile"),
            ({"num_proc": 0}, ValueError, "num_proc must be at least 1")]:
        try:
            horovod.run(train, args=(1,), **kwargs)
            raise AssertionError("%s was taken" % kwargs)
        except error as e:
            assert text in str(e), (kwargs, e)
    try:
        horovod.run(42)
        raise AssertionError("a non-callable was taken")
    except TypeError as e:
        assert "func must be callable" in str(e), e
    print("run_func checks passed")


if __name__ == "__main__":
    main()
    sys.exit(0)
