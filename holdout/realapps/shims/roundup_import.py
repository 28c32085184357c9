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


def bullets(lines: list[str]) -> list[tuple[str, str, str]]:
    """(package, version, text) of every bullet of a changelog, continuation lines joined."""
    found: list[tuple[str, str, str]] = []
    package = version = ""
    current: list[str] = []
    for line in [*lines, ""]:
        entry, bullet = ENTRY.match(line), BULLET.match(line)
        if current and not (line.startswith("    ") and not bullet):
            found.append((package, version, " ".join(s.strip() for s in current)))
            current = []
        if entry:
            package, version = entry.group(1), entry.group(2)
        elif bullet:
            current = [bullet.group(1)]
        elif line.startswith("    ") and current:
            current.append(line)
    return found


def fixes(limit: int) -> list[tuple[str, str]]:
    """(title, message) of bullets that close a Debian bug, at most three per package."""
    found = []
    for changelog in sorted(Path("/usr/share/doc").glob("*/changelog.Debian.gz")):
        try:
            lines = gzip.decompress(changelog.read_bytes()).decode("utf-8", "replace").splitlines()
        except (OSError, EOFError):
            continue
        closing = [(p, v, text) for p, v, text in bullets(lines) if "closes:" in text.lower()][:3]
        for package, version, text in closing:
            title = re.sub(r"\s*\(?Closes:[^)]*\)?\.?", "", text, flags=re.I).strip(" .") or text
            found.append((title[:200], f"{package} ({version}): {text}"))
        if len(found) >= limit:
            break
    return found[:limit]


def main() -> None:
    tracker = instance.open(sys.argv[1])
    db = tracker.open("admin")
    try:
        resolved = db.status.lookup("resolved")
        for title, text in fixes(int(sys.argv[2])):
            message = db.msg.create(content=text, author=db.getuid())
            db.issue.create(title=title, messages=[message], status=resolved)
        db.commit()
    finally:
        db.close()


if __name__ == "__main__":
    main()
