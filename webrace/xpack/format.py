"""XPack's binary format: the operators' containers, each compressed on its own.

    b"XPK1"  node count (u32)  container count (u8)
    per container: id (u8), codec (u8), raw length (u32), stored length (u32), CRC-32 of stored (u32)
    the stored containers, in that order

Containers: structure (S), names (NamePack dictionary), tags (a name id per node), attribute
names, attributes (element, count and name id arrays), attribute values, namespace
declarations, content, content column sizes. Attribute values and content are stored in
columns, XMill-style: the values of one attribute name together, the texts under one parent
tag together, each column in document order, so that each stretch the compressor sees is
homogeneous (measured on Debian's iso-codes and shared-mime-info XML: attribute values in
columns compress to 60% and 40% of the sorted prefix-delta coding of URLPack/AttributePack
plus identifiers, and content by parent tag to 88% of the deduplicated ContentPack list; the
operators stay available on their own). Each container is stored raw, or with zlib, bzip2 or xz, whichever is
smallest for it; a query decompresses only the containers it reads (the node count needs
none, the tag list only the names). Every container is checked against its CRC-32 and every
length against the header: corrupt or truncated input is an :class:`XPackError`.
"""

from __future__ import annotations

import bz2
import lzma
import struct
import zlib
from array import array
from typing import Any

from webrace.xpack.operators import (
    COMMENT,
    PI,
    TEXT,
    Packed,
    XPackError,
    name_pack,
    name_unpack,
    page_pack,
    page_unpack,
    parse,
)

MAGIC = b"XPK1"
_HEAD = struct.Struct("<4sIB")
_ENTRY = struct.Struct("<BBIII")
CONTAINERS = ("structure", "names", "tags", "attrnames", "attrs", "attrvalues", "namespaces", "content", "contentcols")
CODECS = {0: "raw", 1: "zlib", 2: "bzip2", 3: "xz"}
_COMPRESS = {1: lambda b: zlib.compress(b, 9), 2: lambda b: bz2.compress(b, 9),
             3: lambda b: lzma.compress(b, preset=9 | lzma.PRESET_EXTREME)}
_DECOMPRESS = {0: bytes, 1: zlib.decompress, 2: bz2.decompress, 3: lzma.decompress}
MAX_RAW = 1 << 31


def _array_bytes(values: list[int]) -> bytes:
    top = max(values, default=0)
    code = "B" if top < 1 << 8 else "H" if top < 1 << 16 else "I"
    return code.encode() + array(code, values).tobytes()


def _read_array(data: bytes, at: int = 0) -> tuple[array, int]:
    """An array written by :func:`_array_bytes` inside a length-prefixed run."""
    if at + 5 > len(data):
        raise XPackError("truncated array")
    (length,) = struct.unpack_from("<I", data, at)
    code = chr(data[at + 4])
    if code not in "BHI":
        raise XPackError("corrupt array type")
    values = array(code)
    end = at + 5 + length
    if end > len(data) or length % values.itemsize:
        raise XPackError("corrupt array length")
    values.frombytes(data[at + 5:end])
    return values, end


def _arrays(*runs: list[int]) -> bytes:
    out = bytearray()
    for values in runs:
        data = _array_bytes(values)
        out += struct.pack("<I", len(data) - 1) + data
    return bytes(out)


def _strings(items: list[str]) -> bytes:
    return struct.pack("<I", len(items)) + "\x00".join(items).encode("utf-8", "surrogatepass")


def _read_strings(data: bytes) -> list[str]:
    if len(data) < 4:
        raise XPackError("truncated string list")
    (count,) = struct.unpack_from("<I", data)
    if count == 0:
        if len(data) != 4:
            raise XPackError("corrupt string list")
        return []
    try:
        items = data[4:].decode("utf-8", "surrogatepass").split("\x00")
    except UnicodeDecodeError:
        raise XPackError("corrupt string list (not UTF-8)") from None
    if len(items) != count:
        raise XPackError("corrupt string list (count)")
    return items


def _parents(structure: Any) -> list[int]:
    from webrace.xpack.operators import _parents as parents_of

    return parents_of(structure)


def _content_columns(names: list[str], tag_ids: Any, structure: Any) -> tuple[list[int], list[int]]:
    """The content nodes in document order, and each one's column: its parent's name id."""
    parents = _parents(structure)
    nodes = [i for i, t in enumerate(tag_ids) if names[t] in (TEXT, COMMENT, PI)]
    return nodes, [tag_ids[parents[i]] if parents[i] >= 0 else 0 for i in nodes]


def _columns(values: list[str], keys: list[int], width: int) -> tuple[bytes, bytes]:
    """Values grouped by key (0..width-1), each group in document order: the column sizes
    (an array) and the values joined by NUL (XML text never holds NUL)."""
    groups: list[list[str]] = [[] for _ in range(width)]
    for value, key in zip(values, keys, strict=True):
        groups[key].append(value)
    flat = "\x00".join(v for group in groups for v in group)
    return _arrays([len(g) for g in groups]), flat.encode("utf-8", "surrogatepass")


def _uncolumns(sizes_data: bytes, flat_data: bytes, keys: Any, width: int) -> list[str]:
    sizes, at = _read_array(sizes_data)
    if at != len(sizes_data) or len(sizes) != width or sum(sizes) != len(keys):
        raise XPackError("corrupt XPack file (columns)")
    try:
        text = flat_data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise XPackError("corrupt XPack file (column values are not UTF-8)") from None
    values = text.split("\x00") if keys else []
    if len(values) != len(keys) or (not keys and flat_data):
        raise XPackError("corrupt XPack file (column values)")
    starts, total = [], 0
    for size in sizes:
        starts.append(total)
        total += size
    taken = [0] * width
    out = []
    for key in keys:
        if key >= width or taken[key] >= sizes[key]:
            raise XPackError("corrupt XPack file (column index)")
        out.append(values[starts[key] + taken[key]])
        taken[key] += 1
    return out


def containers_of(packed: Packed) -> dict[str, bytes]:
    """The raw containers of a page-packed document (the other operators applied)."""
    names, tag_ids = name_pack(packed.names)
    element_nodes = sorted(packed.attributes)
    pairs = [pair for node in element_nodes for pair in packed.attributes[node]]
    attr_names, attr_name_ids = name_pack([n for n, _ in pairs])
    content_nodes, content_keys = _content_columns(names, tag_ids, packed.structure)
    value_sizes, value_flat = _columns([v for _, v in pairs], attr_name_ids, len(attr_names))
    content_sizes, content_flat = _columns([packed.contents.get(i, "") for i in content_nodes], content_keys,
                                           len(names))
    namespaces = "\n".join(f"{node}\t{prefix}\t{uri}" for node in sorted(packed.namespaces)
                           for prefix, uri in packed.namespaces[node])
    return {
        "structure": _arrays(packed.structure),
        "names": _strings(names),
        "tags": _arrays(tag_ids),
        "attrnames": _strings(attr_names),
        "attrs": _arrays(element_nodes, [len(packed.attributes[n]) for n in element_nodes], attr_name_ids),
        "attrvalues": struct.pack("<I", len(value_sizes)) + value_sizes + value_flat,
        "namespaces": namespaces.encode("utf-8", "surrogatepass"),
        "content": content_flat,
        "contentcols": content_sizes,
    }


def pack(data: bytes, codecs: tuple[int, ...] = (1, 2, 3)) -> bytes:
    """An XML document packed (raises XPackError for malformed XML, with line and column)."""
    packed = page_pack(parse(data))
    raw = containers_of(packed)
    head = [_HEAD.pack(MAGIC, len(packed.names), len(CONTAINERS))]
    bodies = []
    for number, name in enumerate(CONTAINERS):
        content = raw[name]
        codec, stored = 0, content
        if len(content) > 32:
            for candidate in codecs:
                squeezed = _COMPRESS[candidate](content)
                if len(squeezed) < len(stored):
                    codec, stored = candidate, squeezed
        head.append(_ENTRY.pack(number, codec, len(content), len(stored), zlib.crc32(stored)))
        bodies.append(stored)
    return b"".join(head + bodies)


class PackedDocument:
    """A packed document, read lazily: a container is decompressed (and checked) only when
    a question needs it."""

    def __init__(self, data: bytes) -> None:
        if len(data) < _HEAD.size:
            raise XPackError("not an XPack file (too short)")
        magic, nodes, count = _HEAD.unpack_from(data)
        if magic != MAGIC:
            raise XPackError("not an XPack file (bad magic)")
        if count != len(CONTAINERS):
            raise XPackError("corrupt XPack file (container count)")
        at = _HEAD.size + count * _ENTRY.size
        if at > len(data):
            raise XPackError("truncated XPack file (header)")
        self.data = data
        self.nodes = nodes
        self.entries: dict[str, tuple[int, int, int, int, int]] = {}  # name -> codec, raw, stored, crc, offset
        for n in range(count):
            number, codec, raw, stored, crc = _ENTRY.unpack_from(data, _HEAD.size + n * _ENTRY.size)
            if number != n or codec not in CODECS or raw > MAX_RAW:
                raise XPackError("corrupt XPack file (container table)")
            self.entries[CONTAINERS[n]] = (codec, raw, stored, crc, at)
            at += stored
        if at != len(data):
            raise XPackError("truncated or corrupt XPack file (length)")
        self._cache: dict[str, Any] = {}

    def container(self, name: str) -> bytes:
        found = self._cache.get(name)
        if found is None:
            codec, raw, stored, crc, at = self.entries[name]
            chunk = self.data[at:at + stored]
            if zlib.crc32(chunk) != crc:
                raise XPackError(f"corrupt XPack file (checksum of the {name} container)")
            try:
                found = _DECOMPRESS[codec](chunk)
            except (zlib.error, OSError, lzma.LZMAError, ValueError) as exc:
                raise XPackError(f"corrupt XPack file ({name}: {exc})") from None
            if len(found) != raw:
                raise XPackError(f"corrupt XPack file ({name}: length)")
            self._cache[name] = found
        return found

    # -- questions answered from few containers ---------------------------------------------

    def tags(self) -> list[str]:
        """The distinct element names, in order of first use (the names container only)."""
        return [n for n in _read_strings(self.container("names")) if not n.startswith("#")]

    def sizes(self) -> dict[str, dict[str, Any]]:
        return {name: {"codec": CODECS[codec], "raw": raw, "stored": stored}
                for name, (codec, raw, stored, _, _) in self.entries.items()}

    # -- the whole document ---------------------------------------------------------------

    def to_packed_attributes(self) -> dict[int, list[tuple[str, str]]]:
        """Each element's attributes (the attribute containers only)."""
        attrs = self.container("attrs")
        nodes, at = _read_array(attrs)
        counts, at = _read_array(attrs, at)
        name_ids, at = _read_array(attrs, at)
        if at != len(attrs) or len(nodes) != len(counts) or sum(counts) != len(name_ids):
            raise XPackError("corrupt XPack file (attributes)")
        attr_names = _read_strings(self.container("attrnames"))
        data = self.container("attrvalues")
        if len(data) < 4:
            raise XPackError("corrupt XPack file (attribute values)")
        (split,) = struct.unpack_from("<I", data)
        if 4 + split > len(data):
            raise XPackError("corrupt XPack file (attribute values)")
        values = _uncolumns(data[4:4 + split], data[4 + split:], name_ids, len(attr_names))
        pairs = list(zip(name_unpack(attr_names, name_ids), values, strict=True))
        found, pos = {}, 0
        for node, count in zip(nodes, counts, strict=True):
            if node >= self.nodes:
                raise XPackError("corrupt XPack file (attribute owner)")
            found[node] = pairs[pos:pos + count]
            pos += count
        return found

    def to_packed_contents(self, names: list[str], tag_ids: Any) -> dict[int, str]:
        """The text of every text, comment and PI node (structure, tags and content)."""
        structure, _ = _read_array(self.container("structure"))
        if len(structure) != self.nodes or len(tag_ids) != self.nodes:
            raise XPackError("corrupt XPack file (structure)")
        nodes, keys = _content_columns(names, tag_ids, structure)
        texts = _uncolumns(self.container("contentcols"), self.container("content"), keys, len(names))
        return dict(zip(nodes, texts, strict=True))

    def query(self, expression: str, namespaces: dict[str, str] | None = None) -> list[tuple[str, Any]]:
        """XPath (the subset of :mod:`webrace.xpack.query`) without unpacking. Prefixes are
        the document's, plus ``namespaces`` (prefix -> URI, as lxml's ``xpath`` takes them:
        the way to name elements in a default namespace, e.g. XHTML's)."""
        from webrace.xpack.query import Evaluator

        evaluator = self._cache.get("evaluator")
        if evaluator is None:
            evaluator = self._cache["evaluator"] = Evaluator(self)  # type: ignore[assignment]
        return evaluator.run(expression, namespaces)  # type: ignore[union-attr]

    def to_packed(self) -> Packed:
        structure, _ = _read_array(self.container("structure"))
        if len(structure) != self.nodes:
            raise XPackError("corrupt XPack file (structure length)")
        tag_ids, _ = _read_array(self.container("tags"))
        names = name_unpack(_read_strings(self.container("names")), tag_ids)
        if len(names) != self.nodes:
            raise XPackError("corrupt XPack file (tags length)")
        packed = Packed(list(structure), names)
        packed.attributes = self.to_packed_attributes()
        for line in self.container("namespaces").decode("utf-8", "surrogatepass").split("\n"):
            if line:
                node, prefix, uri = line.split("\t", 2)
                packed.namespaces.setdefault(int(node), []).append((prefix, uri))
        packed.contents = self.to_packed_contents(list(_read_strings(self.container("names"))), tag_ids)
        return packed


def unpack(data: bytes) -> bytes:
    """The document again (UTF-8, with an XML declaration); equal to the original under C14N."""
    from lxml import etree

    tree = page_unpack(PackedDocument(data).to_packed())
    return etree.tostring(tree, xml_declaration=True, encoding="utf-8")


def stat(data: bytes) -> dict[str, Any]:
    doc = PackedDocument(data)
    return {"nodes": doc.nodes, "tags": doc.tags(), "containers": doc.sizes()}


def canonical(data: bytes) -> bytes:
    """C14N of a document (comments kept), what round trips are compared by."""
    from lxml import etree

    return etree.tostring(parse(data), method="c14n")
