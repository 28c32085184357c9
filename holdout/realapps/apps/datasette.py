"""Datasette (PyPI ``datasette``), a SQL table browser, over the Debian packages installed on
this machine (``/var/lib/dpkg/status``: name, version, section, maintainer, summary and long
description of each), in two databases: ``packages`` with a full-text index (datasette shows a
search box, ``?_search=``) and ``packages_plain``, the same table without one (only the
column filter form: the negative control)."""

from __future__ import annotations

import email.parser
import sqlite3
from pathlib import Path

from realapps.common import Launch, python_venv, venv_bin

NAME = "datasette"
STATUS = Path("/var/lib/dpkg/status")


def packages() -> list[tuple]:
    rows = []
    for block in STATUS.read_text(encoding="utf-8", errors="replace").split("\n\n"):
        if not block.strip():
            continue
        fields = email.parser.Parser().parsestr(block)
        summary, _, long = (fields.get("Description") or "").partition("\n")
        long = "\n".join(line[1:] if line.startswith(" ") else line for line in long.splitlines())
        rows.append((fields["Package"], fields.get("Version"), fields.get("Section"), fields.get("Maintainer"),
                     fields.get("Homepage"), summary.strip(), long.replace("\n.\n", "\n\n").strip()))
    return rows


def build(path: Path, fts: bool) -> None:
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE packages (name TEXT PRIMARY KEY, version TEXT, section TEXT, maintainer TEXT, "
                   "homepage TEXT, summary TEXT, description TEXT)")
        db.executemany("INSERT OR REPLACE INTO packages VALUES (?, ?, ?, ?, ?, ?, ?)", packages())
        if fts:  # the layout sqlite-utils writes, which datasette detects: <table>_fts with content=<table>
            db.execute("CREATE VIRTUAL TABLE packages_fts USING fts5(name, summary, description, "
                       "content=[packages], content_rowid=[rowid])")
            db.execute("INSERT INTO packages_fts (rowid, name, summary, description) "
                       "SELECT rowid, name, summary, description FROM packages")
    sqlite3.connect(path).close()


def install(home: Path) -> None:
    python_venv(home, "datasette==0.65.*")
    build(home / "packages.db", fts=True)
    build(home / "packages_plain.db", fts=False)


def launch(home: Path, port: int, run: Path) -> Launch:
    # immutable (-i): datasette never writes to them; uvicorn's access log is on standard output
    return Launch([str(venv_bin(home) / "datasette"), "serve", "-i", str(home / "packages.db"),
                   "-i", str(home / "packages_plain.db"), "-h", "127.0.0.1", "-p", str(port)],
                  log=run / "access.log", ready="/-/versions.json")
