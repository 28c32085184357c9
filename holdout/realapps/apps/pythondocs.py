"""Python's own documentation as Debian ships it (``python3.11-doc``: the HTML Sphinx built),
served by lighttpd. Its search runs in the browser: ``search.html?q=`` loads ``searchindex.js``
and writes the results with JavaScript; the page the server sends holds none."""

from __future__ import annotations

from pathlib import Path

from realapps.common import Launch, debian_packages, lighttpd

NAME = "pythondocs"
ROOT = Path("/usr/share/doc/python3.11-doc/html")


def install(home: Path) -> None:
    debian_packages("python3.11-doc", "lighttpd")


def launch(home: Path, port: int, run: Path) -> Launch:
    return lighttpd(port, run, ROOT)
