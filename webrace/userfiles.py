"""Files a user names on the command line (URL and seed lists, crawler and latency tables,
RIR files, documents to pack) read to at most :data:`MAX_USER_FILE_BYTES`, so any input ends
in bounded time and memory: ``/dev/zero`` never ends, a pipe need not, a file may be huge.
Past the bound, :class:`UserFileTooLarge` (a ``ValueError``) says so in one line. XML files
have their own, configurable bound (``WEBRACE_MAX_XML_BYTES``: :mod:`webrace.xmlutil`).
Pure: no Scrapy, no other WebRACE import."""

from __future__ import annotations

import io
from pathlib import Path
from typing import IO, BinaryIO

MAX_USER_FILE_BYTES = 256 * 1024 * 1024  # a list of millions of URLs; no device's endless bytes


class UserFileTooLarge(ValueError):
    """More than the bound was read from a user's file."""

    def __init__(self, name: str, limit: int) -> None:
        super().__init__(f"{name}: more than {limit:,} bytes: not read (a device such as /dev/zero never ends)")


class _Bounded(io.RawIOBase):
    """A raw reader that raises :class:`UserFileTooLarge` once more than ``limit`` bytes
    came through."""

    def __init__(self, raw: BinaryIO, name: str, limit: int) -> None:
        self.raw, self.name, self.limit, self.seen = raw, name, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:
        view = memoryview(buffer)[: self.limit + 1 - self.seen]
        count = self.raw.readinto(view) or 0
        self.seen += count
        if self.seen > self.limit:
            raise UserFileTooLarge(self.name, self.limit)
        return count

    def close(self) -> None:
        self.raw.close()
        super().close()


def open_bounded(path: str | Path, limit: int = MAX_USER_FILE_BYTES) -> BinaryIO:
    """``path`` opened to read in binary, raising :class:`UserFileTooLarge` past ``limit``
    bytes (``OSError`` when it cannot be opened)."""
    return io.BufferedReader(_Bounded(open(path, "rb", buffering=0), str(path), limit))  # noqa: SIM115


def open_bounded_text(path: str | Path, limit: int = MAX_USER_FILE_BYTES, **text: str | None) -> IO[str]:
    """``path`` opened to read as text (``encoding``, ``errors``, ``newline`` as ``open``'s),
    bounded as :func:`open_bounded`."""
    return io.TextIOWrapper(open_bounded(path, limit), **text)


def read_bounded(path: str | Path, limit: int = MAX_USER_FILE_BYTES) -> bytes:
    """Every byte of ``path``, if there are at most ``limit``."""
    with open_bounded(path, limit) as stream:
        return stream.read()


def read_stream_bounded(stream: BinaryIO, name: str, limit: int = MAX_USER_FILE_BYTES) -> bytes:
    """Every byte of an open ``stream`` (standard input), if there are at most ``limit``."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise UserFileTooLarge(name, limit)
    return data


__all__ = ["MAX_USER_FILE_BYTES", "UserFileTooLarge", "open_bounded", "open_bounded_text", "read_bounded",
           "read_stream_bounded"]
