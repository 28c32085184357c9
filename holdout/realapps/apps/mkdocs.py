"""MkDocs' own documentation as Debian ships it (``mkdocs-doc``: the site MkDocs built with its
``mkdocs`` theme), served by lighttpd. Its search is a dialog: a form with no action whose
results a web worker computes (lunr over ``search/search_index.json``) as the user types."""

from __future__ import annotations

from pathlib import Path

from realapps.common import Launch, debian_packages, lighttpd

NAME = "mkdocs"
ROOT = Path("/usr/share/doc/mkdocs/html")


def install(home: Path) -> None:
    debian_packages("mkdocs-doc", "lighttpd")


def launch(home: Path, port: int, run: Path) -> Launch:
    return lighttpd(port, run, ROOT)
