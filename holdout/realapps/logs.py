"""Reading the servers' own access logs: every request's method and path, and the POSTs per path.

The formats the apps write: the common/combined log format (lighttpd, nginx, tracd, roundup,
gunicorn: ``"POST /contact/ HTTP/1.1" 200``), uvicorn's (``"GET /db/table?_search=x HTTP/1.1" 200
OK``) and PHP's built-in server (``[200]: POST /doku.php``). One pattern reads them all: the
request line, quoted or after the PHP status.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urlsplit

_REQUEST = re.compile(r'"(?P<method>[A-Z]{3,10}) (?P<target>\S+) HTTP/\d(?:\.\d)?"'
                      r"|\[\d{3}\]: (?P<php_method>[A-Z]{3,10}) (?P<php_target>\S+)")


def requests(log: Path, since: int = 0) -> list[tuple[str, str]]:
    """(method, path) of every request in ``log`` from byte ``since`` on, in order; the path
    without its query, percent-decoded."""
    if not log.exists():
        return []
    with log.open("rb") as f:
        f.seek(since)
        text = f.read().decode("utf-8", "replace")
    found = []
    for match in _REQUEST.finditer(text):
        method = match["method"] or match["php_method"]
        target = match["target"] or match["php_target"]
        found.append((method, unquote(urlsplit(target).path)))
    return found


def posts(log: Path, since: int = 0) -> Counter:
    """Path -> how many POSTs (and other writing methods: PUT, PATCH, DELETE) ``log`` records."""
    return Counter(path for method, path in requests(log, since) if method in {"POST", "PUT", "PATCH", "DELETE"})


def size(log: Path) -> int:
    """The log's length now: pass it as ``since`` to count only later requests."""
    return log.stat().st_size if log.exists() else 0
