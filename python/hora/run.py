"""``horarun`` from an installed Hora: ``python -m hora.run -np 2 python3 train.py``.

The console script ``horarun`` (installed by pip) calls :func:`main`, which
replaces this process with the launcher binary bundled in the package
(``hora/bin/horarun``), or, in a build tree, ``build/bin/horarun``. Every
argument is the launcher's (``horarun --help``).
"""

import os
import sys


def launcher_path():
    """The horarun binary: the package's, else the build tree's."""
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, "bin", "horarun"),
                 os.path.join(here, os.pardir, os.pardir, "bin", "horarun")):
        if os.path.isfile(path):
            return os.path.normpath(path)
    return None


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


if __name__ == "__main__":
    sys.exit(main())
