"""The Page Digest's binary form: ``dumps`` / ``loads``.

Layout (little-endian)::

    b"PDG1"  kind (u8: 0 html, 1 xml)  node count (u32)  CRC-32 of the section table (u32)
    section table: 9 x (byte length u32, CRC-32 u32)
    sections: ST TM AM CM (arrays: a typecode byte B/H/L, then the items),
              TL, doctype, attribute names and values (flattened), CL
              (strings: a u32 count, then UTF-8 items joined by NUL),
              attribute list lengths (an array)

Arrays take the narrowest unsigned type that holds their largest value. Loading reads the
structure sections with ``array.frombytes`` (no parsing, no per-node Python work, which is
why it is many times cheaper than parsing the HTML again) and leaves attributes and content
until they are used. Every section has its own CRC-32 and every length is checked: a
truncated or corrupt digest raises :class:`DigestError`, never gives a wrong digest.
"""

from __future__ import annotations

import struct
import sys
import zlib
from array import array
from collections.abc import Sequence
from itertools import accumulate

from webrace.digest.core import DigestError, PageDigest

MAGIC = b"PDG1"
_HEAD = struct.Struct("<4sBII")  # magic, kind, node count, CRC-32 of the section table
_SECTION = struct.Struct("<II")  # byte length, CRC-32
_SECTIONS = 9  # ST TM AM CM | TL doctype attributes(flat) CL | attribute list lengths
_KINDS = {"html": 0, "xml": 1}


def _narrow(values: array) -> array:
    top = max(values, default=0)
    code = "B" if top < 1 << 8 else "H" if top < 1 << 16 else "L"
    return values if values.typecode == code else array(code, values)


def _swapped(values: array) -> bytes:  # pragma: no cover - big-endian machines
    copy = array(values.typecode, values)
    copy.byteswap()
    return copy.tobytes()


def dumps(digest: PageDigest) -> bytes:
    sections: list[bytes] = []
    for values in (digest.ST, digest.TM, digest.AM, digest.CM):
        sections.append(_array_bytes(values))
    flat = [part for attrs in digest.AL for pair in attrs for part in pair]
    for items in (digest.TL, [digest.doctype], flat, digest.CL):
        sections.append(_string_bytes(items))
    sections.append(_array_bytes(array("L", [len(attrs) for attrs in digest.AL])))
    table = b"".join(_SECTION.pack(len(b), zlib.crc32(b)) for b in sections)
    head = _HEAD.pack(MAGIC, _KINDS.get(digest.kind, 0), digest.size, zlib.crc32(table))
    return head + table + b"".join(sections)


def _array_bytes(values: array) -> bytes:
    values = _narrow(values)
    data = values.tobytes() if sys.byteorder == "little" else _swapped(values)
    return values.typecode.encode() + data


def _string_bytes(items: list[str]) -> bytes:
    return struct.pack("<I", len(items)) + "\x00".join(items).encode("utf-8", "surrogatepass")


def loads(data: bytes) -> PageDigest:
    """A digest from :func:`dumps`. The structure containers are read and checked now; the
    attributes and content when first used (each section has its own CRC-32)."""
    view = memoryview(data)
    if len(view) < _HEAD.size:
        raise DigestError("truncated Page Digest")
    magic, kind, size, table_crc = _HEAD.unpack_from(view)
    if magic != MAGIC:
        raise DigestError("not a Page Digest (bad magic)")
    if kind not in (0, 1):
        raise DigestError("corrupt Page Digest: unknown kind")
    table_end = _HEAD.size + _SECTION.size * _SECTIONS
    if len(view) < table_end:
        raise DigestError("truncated Page Digest")
    if zlib.crc32(view[_HEAD.size:table_end]) != table_crc:
        raise DigestError("corrupt Page Digest (section table checksum)")
    spans, at = [], table_end
    for n in range(_SECTIONS):
        length, crc = _SECTION.unpack_from(view, _HEAD.size + n * _SECTION.size)
        spans.append((at, at + length, crc))
        at += length
    if at != len(view):
        raise DigestError("truncated or corrupt Page Digest (length)")

    def section(n: int) -> memoryview:
        start, end, crc = spans[n]
        chunk = view[start:end]
        if zlib.crc32(chunk) != crc:
            raise DigestError(f"corrupt Page Digest (checksum of section {n})")
        return chunk

    st, tm, am, cm = (_read_array(section(n), size) for n in range(4))
    tl, doctype = _read_strings(section(4)), _read_strings(section(5))
    if size and (sum(st) != size - 1 or max(tm) >= len(tl)):
        raise DigestError("corrupt Page Digest: the structure does not make a tree")

    def attributes() -> AttributeLists:
        flat, lengths = _read_strings(section(6)), _read_array(section(8), None)
        if sum(lengths) * 2 != len(flat) or (size and max(am) > len(lengths)):
            raise DigestError("corrupt Page Digest: attributes")
        return AttributeLists(flat, lengths)

    def contents() -> list[str]:
        cl = _read_strings(section(7))
        if size and max(cm) > len(cl):
            raise DigestError("corrupt Page Digest: content map")
        return cl

    return PageDigest(st, tm, am, cm, tl, attributes, contents, "xml" if kind == 1 else "html",
                      doctype[0] if doctype else "")


def _read_array(chunk: memoryview, count: int | None) -> array:
    if len(chunk) < 1:
        raise DigestError("corrupt Page Digest: empty array")
    code = chr(chunk[0])
    if code not in "BHL":
        raise DigestError("corrupt Page Digest: bad array type")
    values = array(code)
    if (len(chunk) - 1) % values.itemsize:
        raise DigestError("corrupt Page Digest: bad array length")
    values.frombytes(chunk[1:])
    if sys.byteorder != "little":  # pragma: no cover
        values.byteswap()
    if count is not None and len(values) != count:
        raise DigestError("corrupt Page Digest: array length does not match the node count")
    return values


def _read_strings(chunk: memoryview) -> list[str]:
    if len(chunk) < 4:
        raise DigestError("corrupt Page Digest: string block")
    (count,) = struct.unpack_from("<I", chunk)
    if count == 0:
        return []
    try:
        items = bytes(chunk[4:]).decode("utf-8", "surrogatepass").split("\x00")
    except UnicodeDecodeError:
        raise DigestError("corrupt Page Digest: text is not UTF-8") from None
    if len(items) != count:
        raise DigestError("corrupt Page Digest: string count")
    return items


class AttributeLists(Sequence):
    """AL read from a binary digest: each attribute list is built when first asked for."""

    def __init__(self, flat: list[str], lengths: array) -> None:
        self.flat = flat
        self.starts = array("L", [0]) + array("L", accumulate(n * 2 for n in lengths))
        self.built: dict[int, tuple] = {}

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, n: int) -> tuple[tuple[str, str], ...]:  # type: ignore[override]
        if n < 0:
            n += len(self)
        found = self.built.get(n)
        if found is None:
            if not 0 <= n < len(self):
                raise IndexError(n)
            start, end = self.starts[n], self.starts[n + 1]
            found = self.built[n] = tuple(zip(self.flat[start:end:2], self.flat[start + 1:end:2], strict=True))
        return found

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]
