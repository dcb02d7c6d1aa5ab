"""docs/guide/tuning.md's list of the settings every rank must give alike
names exactly the rows of src/common/config_rows.cc marked `.agree = true`.

    python3 tests/docs/check_agreed_settings.py <source dir>
"""

import re
import sys
from pathlib import Path


def agreed_rows(source):
    text = (source / "src/common/config_rows.cc").read_text()
    names = set()
    for row in re.split(r"\n\s*\{\s*\.spec", text)[1:]:
        name = re.search(r'"(HORA_[A-Z0-9_]+)"', row)
        if name and ".agree = true" in row:
            names.add(name.group(1))
    return names


def documented(source):
    text = (source / "docs/guide/tuning.md").read_text()
    start = text.index("Some settings decide what every rank must do alike")
    end = text.index("compare them when the Session starts", start)
    return set(re.findall(r"`(HORA_[A-Z0-9_]+)`", text[start:end]))


def main():
    source = Path(sys.argv[1])
    rows, doc = agreed_rows(source), documented(source)
    if len(rows) < 20:
        sys.exit("found only %d agreed rows: has config_rows.cc's layout changed?" % len(rows))
    missing, extra = sorted(rows - doc), sorted(doc - rows)
    if missing or extra:
        sys.exit("tuning.md's list of agreed settings: missing %s; not agreed %s" % (missing, extra))
    print("tuning.md names the %d agreed settings" % len(rows))


if __name__ == "__main__":
    main()
