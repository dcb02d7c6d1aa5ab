"""``horarun`` from an installed Hora: ``python -m hora.run -np 2 python3 train.py``;
and ``hora.run(func, np=2)``, Horovod's ``horovod.run`` (this module is
callable: see :mod:`hora.run_func`).

The console script ``horarun`` (installed by pip) calls :func:`main`, which
replaces this process with the launcher binary bundled in the package
(``hora/bin/horarun``), or, in a build tree, ``build/bin/horarun``. Every
argument is the launcher's (``horarun --help``).
"""

import os
import sys
import types

from hora.launcher import launcher_path


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    path = launcher_path()
    if path is None:
        sys.stderr.write("hora.run: no horarun binary beside the package (%s/bin/horarun); "
                         "reinstall hora\n" % os.path.dirname(os.path.abspath(__file__)))
        return 2
    if not os.access(path, os.X_OK):
        try:
            os.chmod(path, 0o755)
        except OSError as e:  # a read-only install, or another user's
            sys.stderr.write("hora.run: %s is not executable and cannot be made so (%s); "
                             "run `chmod +x %s` as the owner of the install, or reinstall "
                             "hora\n" % (path, e.strerror or e, path))
            return 2
    os.execv(path, [path] + argv)
    return 0  # not reached


class _Callable(types.ModuleType):
    """``hora.run`` is this module (``python -m hora.run``, the console
    script) and Horovod's ``run`` function at once."""

    def __call__(self, func, *args, **kwargs):
        from hora.run_func import run
        return run(func, *args, **kwargs)


sys.modules[__name__].__class__ = _Callable

if __name__ == "__main__":
    sys.exit(main())
