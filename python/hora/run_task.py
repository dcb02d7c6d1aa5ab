"""What each rank of ``hora.run`` runs (``python -m hora.run_task``): the
function from ``HORARUN_FUNCTION``, then its result, pickled, on standard
output in lines ``hora.run`` takes out, or in a file of
``HORARUN_RESULTS`` (see :mod:`hora.run_func`)."""

import base64
import os
import pickle
import sys

from hora.run_func import RESULT_MARK

# Result lines of this many characters (horarun passes lines whole, up to
# 64 KiB; under mpirun, use_mpi, the result goes to a file instead).
_CHUNK = 3000


class _LastCharacter:
    """sys.stdout, noting the last character the function wrote to it."""

    def __init__(self, stream):
        self._stream = stream
        self.last = None

    def write(self, text):
        if text:
            self.last = text[-1]
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _rank():
    for name in ("HORA_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        if name in os.environ:
            return int(os.environ[name])
    return 0


def main():
    import cloudpickle

    said = _LastCharacter(sys.stdout)
    sys.stdout = said
    func, args, kwargs = pickle.loads(base64.b64decode(os.environ.pop("HORARUN_FUNCTION")))
    result = func(*args, **kwargs)
    data = cloudpickle.dumps(result)
    results = os.environ.get("HORARUN_RESULTS")
    if results:  # (use_mpi: a file, written whole before it has its name)
        path = os.path.join(results, "%d.pkl" % _rank())
        with open(path + ".part", "wb") as f:
            f.write(data)
        os.rename(path + ".part", path)
        return
    text = base64.b64encode(data).decode("ascii")
    parts = [text[i:i + _CHUNK] for i in range(0, len(text), _CHUNK)] or [""]
    rank = _rank()
    sys.stdout.flush()
    if said.last not in (None, "\n"):  # (a line of its own after what was printed)
        os.write(1, b"\n")
    for i, part in enumerate(parts):
        os.write(1, ("%s %d %d/%d %s\n" % (RESULT_MARK, rank, i, len(parts), part)).encode())


if __name__ == "__main__":
    main()
