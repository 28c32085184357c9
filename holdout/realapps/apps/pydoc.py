"""pydoc's documentation server (Python's ``python -m pydoc -p``): every module of a venv's
Python (the standard library, pip, setuptools) with a module search (``search?key=``: module
names and the first line of their docstrings). Logged by ``shims/pydoc_server.py``."""

from __future__ import annotations

from pathlib import Path

from realapps.common import Launch, python_venv, venv_bin

NAME = "pydoc"
SHIM = Path(__file__).resolve().parent.parent / "shims" / "pydoc_server.py"


def install(home: Path) -> None:
    python_venv(home)


def launch(home: Path, port: int, run: Path) -> Launch:
    return Launch([str(venv_bin(home) / "python"), str(SHIM), str(port)], log=run / "access.log", stdin_pipe=True)
