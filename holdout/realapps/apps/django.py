"""A Django site (PyPI ``Django``, ``django-contact-form``, ``django-registration``) of forms
with side effects, served by gunicorn: ``/contact/`` (mails the managers: Django's file mail
backend writes the message under the run directory), ``/accounts/register/`` (creates an
account), ``/accounts/login/`` and ``/admin/login/`` (log in). The project's glue (settings,
URLs, the page templates these packages ask the site for) is ``shims/djangosite/``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from realapps.common import Launch, python_venv, run, venv_bin

NAME = "django"
SITE = Path(__file__).resolve().parent.parent / "shims" / "djangosite"


def _env(run_dir: Path) -> dict[str, str]:
    return {"DJANGO_SETTINGS_MODULE": "settings", "PYTHONPATH": str(SITE), "REALAPPS_RUN": str(run_dir)}


def install(home: Path) -> None:
    bin_dir = python_venv(home, "Django>=5.2,<5.3", "django-contact-form==5.2.*", "django-registration==5.2.*",
                          "gunicorn")
    run([str(bin_dir / "django-admin"), "migrate", "--noinput"], env={**os.environ, **_env(home)})


def launch(home: Path, port: int, run_dir: Path) -> Launch:
    shutil.copy(home / "site.sqlite3", run_dir / "site.sqlite3")  # accounts a crawler creates stay in this run
    return Launch([str(venv_bin(home) / "gunicorn"), "-b", f"127.0.0.1:{port}", "-w", "1", "--access-logfile", "-",
                   "wsgi_app:application"], log=run_dir / "access.log", env=_env(run_dir))
