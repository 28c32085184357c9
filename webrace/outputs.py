"""Files a command writes where its user says (``-o PATH``): checked before the work, and
written as ``open(path, "w")`` would, but all or nothing (used by ``scrapy ipmicra delegate``,
``scrapy store export-warc`` and ``python -m webrace.xpack``).

A regular file, or none yet, gets a temporary file beside it, renamed over it: a reader never
sees half a file and a failure leaves none behind; the new file has the mode ``open()`` would
give it (the umask's, or the old file's). Anything else at the path (a symlink, a FIFO, a
device such as ``/dev/stdout``) is written through, as a shell's ``>`` would: a rename would
put a regular file in its place."""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO, TypeVar

T = TypeVar("T")


def output_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` could not be written, found before any work (``None``: nothing seen)."""
    real = Path(os.path.realpath(path))  # a symlink is written through: its target counts
    if real.is_dir():
        return "is a directory"
    if not real.parent.is_dir():
        return f"no directory {real.parent} to write it in"
    if real.exists() and not os.access(real, os.W_OK):
        return "not writable"
    if not real.exists() and not os.access(real.parent, os.W_OK | os.X_OK):
        return f"cannot create a file in {real.parent}"
    return None


def write_output(path: str | os.PathLike[str], write: Callable[[IO[bytes]], T]) -> T:
    """Call ``write`` on a binary handle for ``path`` (see the module) and return what it returns."""
    target = Path(path)
    try:
        old = os.lstat(target)
    except FileNotFoundError:
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode):
        with open(target, "wb") as handle:
            return write(handle)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # 0o666 less the umask, as open() gives
    try:
        with os.fdopen(fd, "wb") as handle:
            if old is not None:
                os.fchmod(handle.fileno(), stat.S_IMODE(old.st_mode))
            result = write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return result
