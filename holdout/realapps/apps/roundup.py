"""Roundup (PyPI ``roundup``), the issue tracker, with its ``classic`` template and SQLite,
holding 300 issues: the bug fixes recorded in the Debian changelogs of this machine's
packages, served by gunicorn. Search: the sidebar's box (GET ``issue?@search_text=``) and ``issue?@template=search``.
Forms with side effects: log in (POST), register (``user?@template=register``), new issue.
Mail it would send is written to a file (``[mail] debug``), never sent."""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

from realapps.common import Launch, python_venv, run, venv_bin

NAME = "roundup"
SHIMS = Path(__file__).resolve().parent.parent / "shims"
CONFIGURE = ("import sys; from roundup.configuration import CoreConfig; c = CoreConfig(sys.argv[1]); "
             "c['TRACKER_WEB'] = sys.argv[2]; c['MAIL_DOMAIN'] = 'localhost.invalid'; "
             "c['MAIL_DEBUG'] = sys.argv[1] + '/mail.log'; c.save()")


def install(home: Path) -> None:
    bin_dir = python_venv(home, "roundup==2.6.0", "gunicorn")
    tracker = home / "tracker"
    run([str(bin_dir / "roundup-admin"), "-i", str(tracker), "install", "classic", "sqlite"])
    run([str(bin_dir / "python"), "-c", CONFIGURE, str(tracker), "http://127.0.0.1:8080/"])
    run([str(bin_dir / "roundup-admin"), "-i", str(tracker), "initialise", secrets.token_urlsafe(16)],
        stdin=None, input="")
    run([str(bin_dir / "python"), str(SHIMS / "roundup_import.py"), str(tracker), "300"])


def launch(home: Path, port: int, run_dir: Path) -> Launch:
    tracker = run_dir / "tracker"
    shutil.copytree(home / "tracker", tracker)  # what a crawler registers or files stays in this run
    run([str(venv_bin(home) / "python"), "-c", CONFIGURE, str(tracker), f"http://127.0.0.1:{port}/"])
    # gunicorn, one worker, its access log on standard output (roundup-server refuses to run as root)
    return Launch([str(venv_bin(home) / "gunicorn"), "-b", f"127.0.0.1:{port}", "-w", "1", "--access-logfile", "-",
                   "--chdir", str(SHIMS), "roundup_wsgi:application"],
                  log=run_dir / "access.log", env={"ROUNDUP_TRACKER": str(tracker)})
