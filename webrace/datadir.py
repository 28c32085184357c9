"""Where WebRACE keeps its files: the data directory and the body store's directory. A module
of its own (it imports nothing of WebRACE), so that stores and the factory both use it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def data_dir(settings: Any) -> Path:
    """``WEBRACE_DATA_DIR`` (setting, else environment variable, else ``.webrace``), created."""
    value = settings.get("WEBRACE_DATA_DIR") or os.environ.get("WEBRACE_DATA_DIR") or ".webrace"
    path = Path(value).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def objects_dir(settings: Any) -> Path:
    """Where page bodies go: ``WEBRACE_OBJECTS_DIR`` (in the distributed mode, a directory every
    worker mounts), else ``WEBRACE_DATA_DIR/objects``."""
    value = settings.get("WEBRACE_OBJECTS_DIR")
    return Path(value).expanduser().resolve() if value else data_dir(settings) / "objects"
