"""Where WebRACE keeps its files: the data directory and the body store's directory. A module
of its own (it imports nothing of WebRACE), so that stores and the factory both use it.

Both are private to the user who runs WebRACE (mode 0700, whatever the umask: they hold
owners' keywords, ACIs, channel passwords and password hashes); a directory of another user
is left as it is. One that cannot be made or used (``/dev/null/x``, a file, a read-only
place) is :class:`DataDirUnusable`: one line naming the setting, which every command says as
its error instead of a traceback."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


class DataDirUnusable(OSError):
    """The data directory (or the body store's, or a store file in it) cannot be made or
    opened: one line naming the path, the reason and the setting."""


def data_dir(settings: Any) -> Path:
    """``WEBRACE_DATA_DIR`` (setting, else environment variable, else ``.webrace``), created."""
    value = settings.get("WEBRACE_DATA_DIR") or os.environ.get("WEBRACE_DATA_DIR") or ".webrace"
    return private_dir(_path(value, "WEBRACE_DATA_DIR"), "WEBRACE_DATA_DIR")


def objects_dir(settings: Any) -> Path:
    """Where page bodies go: ``WEBRACE_OBJECTS_DIR`` (in the distributed mode, a directory every
    worker mounts), else ``WEBRACE_DATA_DIR/objects``."""
    value = settings.get("WEBRACE_OBJECTS_DIR")
    if value:
        return private_dir(_path(value, "WEBRACE_OBJECTS_DIR"), "WEBRACE_OBJECTS_DIR")
    return data_dir(settings) / "objects"


def private_dir(path: Path, setting: str = "WEBRACE_DATA_DIR") -> Path:
    """``path`` created (with its parents) and, if this user owns it, readable by this user only.
    Raises :class:`DataDirUnusable` when it cannot be made (``setting`` names where it comes from)."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise unusable(path, exc, setting) from None
    private(path, 0o700)
    return path


def unusable(path: Path, exc: BaseException, setting: str = "WEBRACE_DATA_DIR") -> DataDirUnusable:
    """The one-line error for ``path`` (a directory, or a store file in it) that ``exc`` says
    cannot be used."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
    if isinstance(exc, FileExistsError):  # mkdir over a file
        reason = "a file is in the way"
    shown = str(path) if str(path).isprintable() else repr(str(path))
    return DataDirUnusable(f"cannot use {shown}: {reason.rstrip('.')} (set {setting} to a directory this user "
                           "can create and write)")


def _path(value: Any, setting: str) -> Path:
    try:
        return Path(str(value)).expanduser().resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop; a NUL in the path
        raise unusable(Path(str(value)), exc, setting) from None


def private(path: Path, mode: int = 0o600) -> None:
    """Take group and others' access away from ``path`` if this user owns it (a file a store
    just created under a umask of 022 would be readable by every local user)."""
    try:
        info = path.stat()
        if info.st_uid == os.getuid() and info.st_mode & 0o077:
            path.chmod(mode)
    except OSError:  # gone meanwhile, or a file system without modes: nothing to protect here
        pass
