"""Fill a Roundup tracker with issues: the bug fixes Debian's changelogs of the packages
installed on this machine record (``/usr/share/doc/*/changelog.Debian.gz``, the entries that
close a Debian bug). Run with the tracker's venv Python: ``python roundup_import.py TRACKER N``."""

import gzip
import re
import sys
from pathlib import Path

from roundup import instance

ENTRY = re.compile(r"^(\S+) \(([^)]+)\) [^;]*;.*$")
BULLET = re.compile(r"^  [*+-] (.*)$")


def fixes(limit: int) -> list[tuple[str, str, str]]:
    """(title, message, package) of bullets that close a Debian bug, a few per package."""
    found = []
    for changelog in sorted(Path("/usr/share/doc").glob("*/changelog.Debian.gz")):
        try:
            lines = gzip.decompress(changelog.read_bytes()).decode("utf-8", "replace").splitlines()
        except (OSError, EOFError):
            continue
        package = version = ""
        bullet: list[str] = []
        per_package = 0

        def flush() -> None:
            nonlocal per_package
            text = " ".join(s.strip() for s in bullet)
            if bullet and "closes:" in text.lower() and per_package < 3:
                title = re.sub(r"\s*\(?Closes:[^)]*\)?\.?", "", text, flags=re.I).strip(" .") or text
                found.append((title[:200], f"{package} ({version}): {text}", package))
                per_package += 1
            bullet.clear()

        for line in lines:
            if m := ENTRY.match(line):
                flush()
                package, version = m.group(1), m.group(2)
            elif m := BULLET.match(line):
                flush()
                bullet.append(m.group(1))
            elif line.startswith("    ") and bullet:
                bullet.append(line)
            else:
                flush()
        flush()
        if len(found) >= limit:
            break
    return found[:limit]


def main() -> None:
    tracker = instance.open(sys.argv[1])
    db = tracker.open("admin")
    try:
        resolved = db.status.lookup("resolved")
        for title, text, package in fixes(int(sys.argv[2])):
            message = db.msg.create(content=text, author=db.getuid())
            db.issue.create(title=title, messages=[message], status=resolved)
        db.commit()
    finally:
        db.close()


if __name__ == "__main__":
    main()
