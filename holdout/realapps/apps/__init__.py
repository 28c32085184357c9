"""The real applications, one module each: ``install(home)`` puts it and its data under
``home`` (idempotent), ``launch(home, port, run_dir)`` says how to start it."""

from __future__ import annotations

import importlib
from types import ModuleType

NAMES = ("datasette", "pydoc", "pythondocs", "mkdocs", "trac", "roundup", "omega", "gitweb", "django", "isso")
APPS: dict[str, ModuleType] = {name: importlib.import_module(f"realapps.apps.{name}") for name in NAMES}
