#!/usr/bin/env python3
"""Runs the Python examples of the user docs, so that what they show works.

Every ```python block of README.md and docs/guide/*.md that calls init() is a
whole program: it is written to a file and run at 2 ranks under horarun,
and must exit 0. Blocks without init() are fragments and are only compiled.

    run_snippets.py SOURCE_DIR HORARUN PYTHON
"""

import glob
import os
import re
import subprocess
import sys
import tempfile

BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks(path):
    with open(path) as f:
        text = f.read()
    for m in BLOCK.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        yield line, m.group(1)


def main():
    src, horarun, python = sys.argv[1:4]
    files = [os.path.join(src, "README.md")] + sorted(
        glob.glob(os.path.join(src, "docs", "guide", "*.md")))
    failures, ran, compiled = [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in files:
            for line, code in blocks(path):
                where = "%s:%d" % (os.path.relpath(path, src), line)
                try:
                    compile(code, where, "exec")
                except SyntaxError as e:
                    failures.append("%s: does not compile: %s" % (where, e))
                    continue
                if not re.search(r"\binit\(", code):
                    compiled += 1
                    continue
                script = os.path.join(tmp, "snippet_%d.py" % (ran + compiled))
                with open(script, "w") as f:
                    f.write(code)
                res = subprocess.run([horarun, "-np", "2", python, script], cwd=tmp,
                                     capture_output=True, text=True, timeout=300)
                ran += 1
                if res.returncode != 0:
                    failures.append("%s: exited %d\n%s%s" % (where, res.returncode,
                                                           res.stdout[-3000:], res.stderr[-3000:]))
    print("ran %d programs, compiled %d fragments" % (ran, compiled))
    for f in failures:
        print("FAIL " + f)
    return 1 if failures or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
