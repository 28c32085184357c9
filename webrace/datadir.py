"""Where WebRACE keeps its files: the data directory and the body store's directory. A module
of its own (it imports nothing of WebRACE), so that stores and the factory both use it.

Both are private to the user who runs WebRACE (mode 0700, whatever the umask: they hold
owners' keywords, ACIs, channel passwords and password hashes); a directory of another user
is left as it is."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def data_dir(settings: Any) -> Path:
    """``WEBRACE_DATA_DIR`` (setting, else environment variable, else ``.webrace``), created."""
    value = settings.get("WEBRACE_DATA_DIR") or os.environ.get("WEBRACE_DATA_DIR") or ".webrace"
    return private_dir(Path(value).expanduser().resolve())


def objects_dir(settings: Any) -> Path:
    """Where page bodies go: ``WEBRACE_OBJECTS_DIR`` (in the distributed mode, a directory every
    worker mounts), else ``WEBRACE_DATA_DIR/objects``."""
    value = settings.get("WEBRACE_OBJECTS_DIR")
    return private_dir(Path(value).expanduser().resolve()) if value else data_dir(settings) / "objects"


def private_dir(path: Path) -> Path:
    """``path`` created (with its parents) and, if this user owns it, readable by this user only."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    private(path, 0o700)
    return path


def private(path: Path, mode: int = 0o600) -> None:
    """Take group and others' access away from ``path`` if this user owns it (a file a store
    just created under a umask of 022 would be readable by every local user)."""
    try:
        info = path.stat()
        if info.st_uid == os.getuid() and info.st_mode & 0o077:
            path.chmod(mode)
    except OSError:  # gone meanwhile, or a file system without modes: nothing to protect here
        pass
