"""The Page Digest's binary form: ``dumps`` / ``loads``.

Layout (little-endian)::

    b"PDG1"  kind (1 byte: 0 html, 1 xml)  node count (u32)  CRC-32 of what follows (u32)
    4 x array: typecode (1 byte, B/H/L), byte length (u32), items    ST, TM, AM, CM
    4 x string block: item count (u32), byte length (u32), UTF-8 items joined by NUL
        TL, CL, the attribute lists' names and values (flattened), the doctype
    attribute list lengths: an array as above

Arrays take the narrowest unsigned type that holds their largest value. Loading is a few
``array.frombytes`` and one ``split`` per string block: no parsing, no per-node Python
work, which is why it is many times cheaper than parsing the HTML again. Every length is
checked and the body carries a CRC-32: a truncated or corrupt digest raises
:class:`DigestError`, never a wrong digest.
"""

from __future__ import annotations

import struct
import sys
import zlib
from array import array

from webrace.digest.core import DigestError, PageDigest

MAGIC = b"PDG1"
_HEAD = struct.Struct("<4sBII")
_BLOCK = struct.Struct("<II")
_ARRAY = struct.Struct("<cI")
_KINDS = {"html": 0, "xml": 1}


def _narrow(values: array) -> array:
    top = max(values, default=0)
    code = "B" if top < 1 << 8 else "H" if top < 1 << 16 else "L"
    return values if values.typecode == code else array(code, values)


def _put_array(out: list[bytes], values: array) -> None:
    values = _narrow(values)
    data = values.tobytes() if sys.byteorder == "little" else _swapped(values)
    out.append(_ARRAY.pack(values.typecode.encode(), len(data)))
    out.append(data)


def _swapped(values: array) -> bytes:  # pragma: no cover - big-endian machines
    copy = array(values.typecode, values)
    copy.byteswap()
    return copy.tobytes()


def _put_strings(out: list[bytes], items: list[str]) -> None:
    data = "\x00".join(items).encode("utf-8", "surrogatepass")
    out.append(_BLOCK.pack(len(items), len(data)))
    out.append(data)


def dumps(digest: PageDigest) -> bytes:
    out: list[bytes] = []
    for values in (digest.ST, digest.TM, digest.AM, digest.CM):
        _put_array(out, values)
    flat = [part for attrs in digest.AL for pair in attrs for part in pair]
    for items in (digest.TL, digest.CL, flat, [digest.doctype]):
        _put_strings(out, items)
    _put_array(out, array("L", [len(attrs) for attrs in digest.AL]))
    body = b"".join(out)
    return _HEAD.pack(MAGIC, _KINDS.get(digest.kind, 0), digest.size, zlib.crc32(body)) + body


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.view = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.view):
            raise DigestError("truncated Page Digest")
        chunk = self.view[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def array(self, count: int | None) -> array:
        code, length = _ARRAY.unpack(self.take(_ARRAY.size))
        try:
            values = array(code.decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            raise DigestError("corrupt Page Digest: bad array type") from None
        if values.typecode not in "BHL" or length % values.itemsize:
            raise DigestError("corrupt Page Digest: bad array")
        values.frombytes(self.take(length))
        if sys.byteorder != "little":  # pragma: no cover
            values.byteswap()
        if count is not None and len(values) != count:
            raise DigestError("corrupt Page Digest: array length does not match the node count")
        return values

    def strings(self) -> list[str]:
        count, length = _BLOCK.unpack(self.take(_BLOCK.size))
        raw = self.take(length)
        if count == 0:
            if length:
                raise DigestError("corrupt Page Digest: string block")
            return []
        try:
            items = bytes(raw).decode("utf-8", "surrogatepass").split("\x00")
        except UnicodeDecodeError:
            raise DigestError("corrupt Page Digest: text is not UTF-8") from None
        if len(items) != count:
            raise DigestError("corrupt Page Digest: string count")
        return items


def loads(data: bytes) -> PageDigest:
    if len(data) < _HEAD.size:
        raise DigestError("truncated Page Digest")
    magic, kind, size, crc = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise DigestError("not a Page Digest (bad magic)")
    if kind not in (0, 1):
        raise DigestError("corrupt Page Digest: unknown kind")
    if zlib.crc32(memoryview(data)[_HEAD.size:]) != crc:
        raise DigestError("corrupt or truncated Page Digest (checksum mismatch)")
    reader = _Reader(data)
    reader.pos = _HEAD.size
    st, tm, am, cm = (reader.array(size) for _ in range(4))
    tl, cl, flat, doctype = (reader.strings() for _ in range(4))
    lengths = reader.array(None)
    if reader.pos != len(data):
        raise DigestError("corrupt Page Digest: trailing bytes")
    if sum(lengths) * 2 != len(flat):
        raise DigestError("corrupt Page Digest: attributes")
    al, at = [], 0
    for n in lengths:
        al.append(tuple(zip(flat[at:at + 2 * n:2], flat[at + 1:at + 2 * n:2], strict=True)))
        at += 2 * n
    digest = PageDigest(st, tm, am, cm, tl, al, cl, "xml" if kind == 1 else "html", doctype[0] if doctype else "")
    _check(digest)
    return digest


def _check(d: PageDigest) -> None:
    """Every map points inside its list, and the child counts make one tree."""
    n = d.size
    if n and (max(d.TM) >= len(d.TL) or max(d.AM) > len(d.AL) or max(d.CM) > len(d.CL)):
        raise DigestError("corrupt Page Digest: a map points outside its list")
    if n and sum(d.ST) != n - 1:
        raise DigestError("corrupt Page Digest: child counts do not make a tree")
