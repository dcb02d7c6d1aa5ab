"""``hora.run(func, np=...)``: Horovod's ``horovod.run``, a function run on
every rank of a job that horarun starts from this process; its results
come back as a list in rank order.

The function and its arguments travel pickled (cloudpickle, as Horovod's:
a function of the calling script goes by value) in an environment variable,
which horarun forwards to every host, remote ones too; each rank's result
comes back pickled on its standard output, in lines of their own that are
taken out of what is shown (horarun passes each rank's lines whole). With
``use_mpi`` (horarun --mpi) mpirun forwards the output, in pieces that
split lines: the results travel through files of a temporary directory
instead, which every host must see (this host's, for ranks on it alone).
So the function, its arguments and its result must pickle, and what goes
out must fit in an environment variable (``MAX_FUNCTION_BYTES``).
"""

import base64
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings

from hora.launcher import launcher_path

# The pickled function and arguments at most: base64'd (4/3) with the
# variable's name, within what Linux takes of one environment string
# (MAX_ARG_STRLEN, 128 KiB).
MAX_FUNCTION_BYTES = 90 * 1024
RESULT_MARK = "\x1eHORA_RUN_RESULT"
_RESULT_LINE = re.compile(RESULT_MARK + r" (\d+) (\d+)/(\d+) (\S*)")



def _cloudpickle():
    try:
        import cloudpickle
    except ImportError:
        raise ImportError("hora.run needs cloudpickle to send the function to the ranks "
                          "(pip install cloudpickle), as horovod.run does") from None
    return cloudpickle


def _flags(np, hosts, hostfile, start_timeout, ssh_port, ssh_identity_file, output_filename,
           verbose, use_mpi, network_interface):
    flags = ["-np", str(int(np))]
    if hosts is not None and hostfile is not None:
        raise ValueError("hora.run: give hosts or hostfile, not both")
    if hosts is not None:
        flags += ["-H", hosts]
    if hostfile is not None:
        flags += ["--hostfile", hostfile]
    if start_timeout is not None:
        flags += ["--start-timeout", str(start_timeout)]
    if ssh_port is not None:
        flags += ["-p", str(ssh_port)]
    if ssh_identity_file is not None:
        flags += ["-i", ssh_identity_file]
    if output_filename is not None:
        flags += ["--output-filename", output_filename]
    if verbose:
        flags += ["--verbose"]
    if use_mpi:
        flags += ["--mpi"]
    if network_interface is not None:
        flags += ["--network-interface", network_interface]
    return flags


def run(func, args=(), kwargs=None, num_proc=1, min_num_proc=None, max_num_proc=None,
        slots=None, reset_limit=None, cooldown_range=None, hosts=None, hostfile=None,
        start_timeout=None, ssh_port=None, ssh_identity_file=None, disable_cache=None,
        output_filename=None, verbose=None, use_gloo=None, use_mpi=None, mpi_args=None,
        network_interface=None, executable=None, np=None, min_np=None, max_np=None):
    """Runs ``func(*args, **kwargs)`` on ``num_proc`` ranks started by horarun
    (on ``hosts``, "host:slots,...", or a ``hostfile``; this host by
    default) and returns the ranks' results in rank order, as Horovod's
    (``np``, ``min_np``, ``max_np``: its deprecated names, with its
    DeprecationWarning). The ranks call ``hvd.init()`` themselves, as under
    horarun. A rank that fails fails the job: a ``RuntimeError`` naming
    horarun's exit code, the ranks' output (shown as it comes) saying why;
    interrupted (KeyboardInterrupt), the job is stopped. ``executable``: the
    Python the ranks run (this one's by default). Horovod's elastic
    arguments (``min_num_proc``...) are refused: elastic jobs start with
    ``horarun --min-np`` (docs/guide/elastic.md); ``mpi_args`` too, and
    ``use_mpi`` with ``output_filename`` (horarun --mpi has none) or with
    hosts other than this one (its results need a directory every host
    sees); ``use_gloo`` and ``disable_cache`` change nothing."""
    for old, new, value in (("np", "num_proc", np), ("min_np", "min_num_proc", min_np),
                            ("max_np", "max_num_proc", max_np)):
        if value is not None:
            warnings.warn("%s is deprecated, use %s instead" % (old, new), DeprecationWarning,
                          stacklevel=2)
    if np is not None and num_proc == 1:
        num_proc = np
    min_num_proc = min_np if min_num_proc is None else min_num_proc
    max_num_proc = max_np if max_num_proc is None else max_num_proc
    elastic = {"min_num_proc": min_num_proc, "max_num_proc": max_num_proc, "slots": slots,
               "reset_limit": reset_limit, "cooldown_range": cooldown_range}
    for name, value in elastic.items():
        if value is not None:
            raise NotImplementedError(
                "hora.run(%s=...): elastic jobs start from the command line "
                "(horarun --min-np N --max-np M ...; docs/guide/elastic.md)" % name)
    if mpi_args is not None:
        raise NotImplementedError("hora.run(mpi_args=...): start the job with mpirun and its "
                                  "arguments, or horarun --mpi")
    if use_mpi and use_gloo:
        raise ValueError("hora.run: use_mpi and use_gloo cannot both be set")
    if use_mpi and output_filename is not None:
        raise NotImplementedError("hora.run(use_mpi=True, output_filename=...): horarun --mpi "
                                  "writes no output files; leave one of them out")
    if use_mpi and not _all_local(hosts, hostfile):
        raise NotImplementedError(
            "hora.run(use_mpi=True) with other hosts: its results travel through files of a "
            "directory on this host; leave use_mpi out (horarun starts the ranks itself)")
    del disable_cache
    np = num_proc
    if not callable(func):
        raise TypeError("hora.run: func must be callable, got %s" % type(func).__name__)
    if int(np) < 1:
        raise ValueError("hora.run: num_proc must be at least 1, got %r" % (np,))
    flags = _flags(np, hosts, hostfile, start_timeout, ssh_port, ssh_identity_file,
                   output_filename, verbose, use_mpi, network_interface)
    payload = _cloudpickle().dumps((func, tuple(args), dict(kwargs or {})))
    if len(payload) > MAX_FUNCTION_BYTES:
        raise ValueError(
            "hora.run: the function and its arguments pickle to %d bytes, more than the %d an "
            "environment variable carries to the ranks; pass large data through files"
            % (len(payload), MAX_FUNCTION_BYTES))
    launcher = launcher_path()
    if launcher is None:
        raise RuntimeError("hora.run: no horarun binary beside the package; reinstall hora")
    env = dict(os.environ, HORARUN_FUNCTION=base64.b64encode(payload).decode("ascii"))
    command = [launcher] + flags + [executable or sys.executable, "-m", "hora.run_task"]
    if not use_mpi:
        return _collect(command, env, int(np))
    results = tempfile.mkdtemp(prefix="hora-run-")
    try:
        env["HORARUN_RESULTS"] = results
        _collect(command, env, 0)
        return [_read_result(results, r) for r in range(int(np))]
    finally:
        shutil.rmtree(results, ignore_errors=True)


def _read_result(results, rank):
    try:
        with open(os.path.join(results, "%d.pkl" % rank), "rb") as f:
            return pickle.load(f)
    except FileNotFoundError:
        raise RuntimeError("hora.run: no result came from rank %d in %s (with use_mpi the "
                           "results travel through files of this directory, which every "
                           "host must see; a rank that exits the process before func "
                           "returns gives none)" % (rank, results)) from None


def _all_local(hosts, hostfile):
    """Whether every host named is this one (none named: this one)."""
    import socket

    if hostfile is not None:
        with open(hostfile) as f:
            names = [line.split("#")[0].split()[0].split(":")[0] for line in f
                     if line.split("#")[0].strip()]
    elif hosts is not None:
        names = [h.rsplit(":", 1)[0].strip("[]") for h in hosts.split(",") if h.strip()]
    else:
        return True
    here = {"localhost", "::1", socket.gethostname()}
    return all(n in here or n.startswith("127.") for n in names)


def _collect(command, env, np):
    """Runs horarun, shows its output (as it comes) but the result lines, and
    unpickles each rank's result (of ``np`` ranks) from its lines."""
    chunks = {}
    job = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True,
                           errors="replace")
    try:
        for line in job.stdout:
            found = _RESULT_LINE.search(line)
            if found is None:
                sys.stdout.write(line)
                sys.stdout.flush()
                continue
            # (What a rank printed without a newline before returning is
            # shown, without the mark.)
            before = line[:found.start()]
            if before.strip() and not re.fullmatch(r"\[\d+\]: ", before):
                sys.stdout.write(before + "\n")
                sys.stdout.flush()
            rank, part, parts = (int(found.group(i)) for i in (1, 2, 3))
            chunks.setdefault(rank, [None] * parts)[part] = found.group(4)
        code = job.wait()
    except BaseException:
        # (Interrupted, or failed here: the job is stopped, as horarun stops
        # its ranks on SIGINT, not left running.)
        job.send_signal(signal.SIGINT)
        try:
            job.wait(timeout=30)
        except subprocess.TimeoutExpired:
            job.kill()
            job.wait()
        raise
    finally:
        job.stdout.close()
    if code != 0:
        raise RuntimeError("hora.run: the job failed (horarun's exit code %d); the ranks' "
                           "output above says why" % code)
    missing = [r for r in range(np) if r not in chunks or None in chunks[r]]
    if missing:
        raise RuntimeError("hora.run: no result came from rank(s) %s (a rank that exits the "
                           "process before func returns gives none)"
                           % ", ".join(map(str, missing)))
    return [pickle.loads(base64.b64decode("".join(chunks[r]), validate=True))
            for r in range(np)]
