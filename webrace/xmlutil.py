"""Safe XML parsing: lxml with entity resolution, DTD loading and network access off, and
files read only up to a size limit (the user's files are refused before parsing when larger)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from lxml import etree

if TYPE_CHECKING:
    import xmlschema

# The default of WEBRACE_MAX_XML_BYTES (webrace/settings.py): the largest XML file a user gives.
MAX_XML_BYTES = 50 * 1024 * 1024

_SAFE = {"resolve_entities": False, "no_network": True, "load_dtd": False, "dtd_validation": False,
         "huge_tree": False}


class XmlTooLarge(ValueError):
    """A file over the size limit; the message says how large, and which setting to raise."""

    def __init__(self, size: int | None, limit: int) -> None:
        size_text = f"{size} bytes" if size is not None else f"more than {limit} bytes"
        super().__init__(f"{size_text}, over the limit of {limit} (raise WEBRACE_MAX_XML_BYTES to accept it)")


def safe_parser() -> etree.XMLParser:
    return etree.XMLParser(remove_comments=False, **_SAFE)


def safe_iterparse(source: BinaryIO, events: tuple[str, ...], tag: Any = None) -> Iterator[tuple[str, Any]]:
    """lxml's ``iterparse`` with the options of :func:`safe_parser`: elements one at a time,
    for files too large to hold as one tree."""
    return etree.iterparse(source, events=events, tag=tag, **_SAFE)


def check_size(size: int, limit: int) -> None:
    if size > limit:
        raise XmlTooLarge(size, limit)


def open_limited(path: str | Path, limit: int = MAX_XML_BYTES) -> BinaryIO:
    """``path`` opened for reading once its size is known to be within ``limit`` bytes
    (:class:`XmlTooLarge` if not; ``OSError`` if it cannot be read). A file that is not a
    regular file (a pipe) or grows while it is read fails when it passes the limit."""
    stream = open(path, "rb")  # noqa: SIM115 - returned, closed by the caller
    try:
        check_size(Path(path).stat().st_size, limit)
    except XmlTooLarge:
        stream.close()
        raise
    return _Limited(stream, limit)


def read_limited(path: str | Path, limit: int = MAX_XML_BYTES) -> bytes:
    with open_limited(path, limit) as stream:
        return stream.read()


class _Limited:
    """A binary file that raises :class:`XmlTooLarge` when more than ``limit`` bytes are read."""

    def __init__(self, stream: BinaryIO, limit: int) -> None:
        self.stream, self.limit, self.seen = stream, limit, 0

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(self.limit + 1 - self.seen if size < 0 else size)
        self.seen += len(data)
        if self.seen > self.limit:
            raise XmlTooLarge(None, self.limit)
        return data

    def close(self) -> None:
        self.stream.close()

    def __enter__(self) -> _Limited:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@cache
def schema(name: str) -> xmlschema.XMLSchema:
    """The XSD shipped in ``webrace/schemas/`` (``urd``, ``aci``, ``metainfo``...), read as
    a package resource so that it is found inside a zipped egg too (scrapyd)."""
    import xmlschema  # imported here: most commands never validate, and it is slow to import

    return xmlschema.XMLSchema(files("webrace.schemas").joinpath(f"{name}.xsd").read_text(encoding="utf-8"))
