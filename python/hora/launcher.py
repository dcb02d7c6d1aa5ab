"""Where the horarun binary is (``hora.run`` and ``hora.run_func`` start it)."""

import os


def launcher_path():
    """The horarun binary: the package's, else the build tree's."""
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, "bin", "horarun"),
                 os.path.join(here, os.pardir, os.pardir, "bin", "horarun")):
        if os.path.isfile(path):
            return os.path.normpath(path)
    return None
