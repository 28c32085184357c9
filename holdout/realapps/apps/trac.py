"""Trac (PyPI ``Trac``), the wiki and issue tracker, with the wiki it installs: Trac's own
guide (TracGuide, TracSearch, TracQuery... 60-odd pages). Search: ``/search?q=`` (GET).
Anonymous users may create tickets and comment on them (``TICKET_CREATE``, ``TICKET_APPEND``,
as on public Tracs that take reports): ``/newticket`` is a form with side effects."""

from __future__ import annotations

import shutil
from pathlib import Path

from realapps.common import Launch, python_venv, run, venv_bin

NAME = "trac"


def install(home: Path) -> None:
    python_venv(home, "Trac==1.6", "Jinja2<3.2", "Babel")
    admin = str(venv_bin(home) / "trac-admin")
    run([admin, str(home / "env"), "initenv", "Trac", "sqlite:db/trac.db"])
    run([admin, str(home / "env"), "permission", "add", "anonymous", "TICKET_CREATE", "TICKET_APPEND"])


def launch(home: Path, port: int, run_dir: Path) -> Launch:
    env = run_dir / "env"
    shutil.copytree(home / "env", env)  # tickets a crawler files stay in this run
    return Launch([str(venv_bin(home) / "tracd"), "-s", "-b", "127.0.0.1", "-p", str(port), str(env)],
                  log=run_dir / "access.log")
