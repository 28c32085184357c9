"""Isso (PyPI ``isso``), a comment server, served by gunicorn, with its demo page (``/demo/``):
a page whose comment form a script builds (``js/embed.dev.js``); posting it (``POST /new?uri=``)
publishes a comment (moderation off, as many blogs run it)."""

from __future__ import annotations

from pathlib import Path

from realapps.common import Launch, python_venv, venv_bin

NAME = "isso"


def install(home: Path) -> None:
    python_venv(home, "isso==0.14.0", "gunicorn")


def launch(home: Path, port: int, run_dir: Path) -> Launch:
    conf = run_dir / "isso.cfg"
    conf.write_text(f"[general]\ndbpath = {run_dir / 'comments.db'}\nhost = http://127.0.0.1:{port}/\n"
                    f"[moderation]\nenabled = false\n[server]\nlisten = http://127.0.0.1:{port}/\n"
                    "[guard]\nenabled = true\n", encoding="utf-8")
    return Launch([str(venv_bin(home) / "gunicorn"), "-b", f"127.0.0.1:{port}", "-w", "1", "--access-logfile", "-",
                   "isso.run:application"], log=run_dir / "access.log", env={"ISSO_SETTINGS": str(conf)},
                  ready="/demo/")
