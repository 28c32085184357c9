"""XPack's binary format: the operators' containers, compressed in a few blocks.

    b"XPK2"  node count (u32)  flags (u8: table width 2 or 4, | 0x80 for the interleaved
    layout, | 0x40 when the tag list follows the table)  container count (u8)  block count (u8)
    per container: block number (u8), raw length (u16 or u32, the width)
    per block: codec (u8), stored length (u16 or u32), CRC-32 of the stored bytes (u32)
    the tag list (flag 0x40): its length (varint), then the number of tags (varint) and one
    code per tag, in order of first use: a byte below 0xFD is a name of
    :data:`webrace.xpack.dictionary.TAG_NAMES` in the current namespace (none at first);
    0xFD makes XHTML's the current namespace, 0xFE followed by a length-prefixed URI another
    (empty: none); 0xFF is followed by a length-prefixed name in Clark notation
    CRC-32 of everything above (u32)
    the stored blocks, in order; a block is its containers' raw bytes, concatenated in
    container order, compressed as one

The tag list repeats the element names of the label dictionary, uncompressed, so that a
file's node count and tags are read from its header alone (a gtk-doc page: about 24 tags in
26 bytes, 1.1% of the packed page; opening a page for them takes a few microseconds
instead of a decompression). Files written without it (flag clear) are read as before.

Containers (the seed's operators, node by node in document order; node 0 is the document):

- ``labels``: the label dictionary (NamePack over labels): a label is an element name
  (Clark notation) with the names of its attributes in order, or ``#document``, ``#text``,
  ``#ws`` (whitespace-only text, apart so that it gets its own column), ``#comment``,
  ``#pi``. Elements of one kind tend to carry the same attributes, so one label per node
  is smaller than the seed's per-attribute identifiers (measured: 2-10x on iso-codes,
  shared-mime-info and gtk-doc XHTML);
- ``structure``: the structure S as a token stream: a node's label + 1, in document order,
  and 0 where an element closes (the node count, depths, parents and subtree ends follow
  with array operations; smaller than child counts plus a label array: gtk-doc XHTML
  5,478 -> 3,573 bytes, shared-mime-info 4,364 -> 2,525);
- ``namespaces``: namespace declarations (node, prefix, URI);
- ``attrvalues`` and ``content``: the values, in one of two layouts. Columnar (large
  documents): attribute values one column per attribute name, texts one column per
  (parent name, kind), document order within a column (XMill-style: homogeneous stretches;
  iso-codes 53 KB against 68 KB in document order). Interleaved (when the values are under
  :data:`SOLID_LIMIT`): every value in ``content``, in document order each element's
  attribute values then each text, whitespace-only texts last (a page's hrefs sit next to
  their link text: gtk-doc XHTML 43.5 KB against 44.5 KB in columns). Column sizes are never
  stored: they follow from the structure.

Blocks: ``labels``, ``structure`` and ``namespaces`` together (what any query reads: one
decompression; the tag list is in the header); the values in one block when interleaved, else
``attrvalues`` and ``content`` each alone, so that an attribute query does not decompress
the text. Each block is stored raw or with raw deflate, bzip2, xz (raw LZMA2), brotli, or
deflate primed with :mod:`webrace.xpack.dictionary`'s common labels, whichever is smallest
for it. The header and every block are checked against their CRC-32, every length and
identifier against the structure: corrupt or truncated input is an :class:`XPackError`,
never a wrong answer.
"""

from __future__ import annotations

import bz2
import functools
import lzma
import re
import struct
import zlib
from typing import Any

import brotli
import numpy as np

from webrace.xpack.dictionary import DICTIONARY, MAX_TAG_CODES, TAG_NAMES, XHTML
from webrace.xpack.operators import (
    COMMENT,
    DOCUMENT,
    PI,
    TEXT,
    WS,
    Packed,
    XPackError,
    page_pack,
    page_unpack,
    parse,
)
from webrace.xpack.query import Evaluator

MAGIC = b"XPK2"
CONTENT_KINDS = (TEXT, WS, COMMENT, PI)
CONTAINERS = ("labels", "structure", "namespaces", "attrvalues", "content")
GROUPS = (("labels", "structure", "namespaces"), ("attrvalues", "content"))
SOLID_LIMIT = 64 * 1024  # values and content share a block below this raw size
CODECS = {0: "raw", 1: "deflate", 2: "bzip2", 3: "xz", 4: "brotli", 5: "deflate+labels"}
MAX_RAW = 1 << 31
_HEAD = struct.Struct("<4sIBBB")  # magic, nodes, flags (table width | INTERLEAVED), containers, blocks
INTERLEAVED = 0x80
TAG_LIST = 0x40
_CRC = struct.Struct("<I")
_TAG_CODES = {name: code for code, name in enumerate(TAG_NAMES)}
_XHTML_TAGS = tuple(f"{{{XHTML}}}{name}" for name in TAG_NAMES)
# a label that is empty, has an empty attribute name, or gives attributes to a non-element
_BAD_LABEL = re.compile("(?:^|\x00)(?:#[^\x00\x01]*\x01|\x01|\x00|$)|\x01(?:\x01|\x00|$)")
_TABLES: dict[tuple[int, int, int], struct.Struct] = {}


def _lzma_filters(size: int) -> list[dict[str, Any]]:
    dict_size = max(1 << 12, 1 << max(size - 1, 1).bit_length())  # fits the block: fast for small ones
    return [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME, "dict_size": min(dict_size, 1 << 26)}]


def _brotli(data: bytes) -> bytes:
    return brotli.compress(data, quality=11, lgwin=min(24, max(10, (len(data) - 1).bit_length() + 1)))


def _deflate(data: bytes, dictionary: bytes | None = None) -> bytes:
    """Raw deflate (the block's CRC-32 is in the table), optionally primed with the label
    dictionary of :mod:`webrace.xpack.dictionary`."""
    squeezer = zlib.compressobj(9, zlib.DEFLATED, -15, 9, **({"zdict": dictionary} if dictionary else {}))
    return squeezer.compress(data) + squeezer.flush()


def _inflate(data: bytes, dictionary: bytes | None = None) -> bytes:
    reader = zlib.decompressobj(-15, **({"zdict": dictionary} if dictionary else {}))
    out = reader.decompress(data) + reader.flush()
    if not reader.eof or reader.unused_data:
        raise ValueError("truncated or trailing deflate data")
    return out


_COMPRESS = {
    1: _deflate,
    2: lambda b: bz2.compress(b, 9),
    3: lambda b: lzma.compress(b, format=lzma.FORMAT_RAW, filters=_lzma_filters(len(b))),
    4: _brotli,
    5: lambda b: _deflate(b, DICTIONARY),
}


def _decompress(codec: int, data: bytes, raw: int) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        return _inflate(data)
    if codec == 5:
        return _inflate(data, DICTIONARY)
    if codec == 2:
        return bz2.decompress(data)
    if codec == 3:
        return lzma.decompress(data, format=lzma.FORMAT_RAW, filters=_lzma_filters(raw))
    return brotli.decompress(data)


def _table(width: int, containers: int, blocks: int) -> struct.Struct:
    key = (width, containers, blocks)
    found = _TABLES.get(key)
    if found is None:
        w = "H" if width == 2 else "I"
        found = _TABLES[key] = struct.Struct("<" + ("B" + w) * containers + ("B" + w + "I") * blocks)
    return found


def _tag_list(tags: list[str]) -> bytes:
    """The header's tag list (see the module's docstring)."""
    out = bytearray(_varint(len(tags)))
    current = ""
    for tag in tags:
        uri, local = tag[1:].split("}", 1) if tag.startswith("{") else ("", tag)
        code = _TAG_CODES.get(local)
        if code is None:
            raw = tag.encode("utf-8", "surrogatepass")
            out += b"\xff" + _varint(len(raw)) + raw
            continue
        if uri != current:
            if uri == XHTML:
                out.append(0xFD)
            else:
                raw = uri.encode("utf-8", "surrogatepass")
                out += b"\xfe" + _varint(len(raw)) + raw
            current = uri
        out.append(code)
    return bytes(out)


def _read_tag_list(data: bytes) -> list[str]:
    # the usual cases first: common names only, in no namespace or in XHTML's (an escape
    # or an unknown code is past the end of the table: the general reading below)
    try:
        if data[0] == len(data) - 1:
            return [TAG_NAMES[code] for code in data[1:]]
        if data[1] == 0xFD and data[0] == len(data) - 2:
            return [_XHTML_TAGS[code] for code in data[2:]]
    except IndexError:
        pass
    count, at = _read_varint(data, 0)
    tags, current = [], ""
    try:
        while at < len(data):
            code = data[at]
            at += 1
            if code < MAX_TAG_CODES:
                local = TAG_NAMES[code]
                tags.append(f"{{{current}}}{local}" if current else local)
            elif code == 0xFD:
                current = XHTML
            else:
                size, at = _read_varint(data, at)
                text = data[at:at + size].decode("utf-8", "surrogatepass")
                if len(text.encode("utf-8", "surrogatepass")) != size:
                    raise ValueError
                at += size
                if code == 0xFE:
                    current = text
                else:
                    tags.append(text)
    except (IndexError, ValueError):
        raise XPackError("corrupt XPack file (tag list)") from None
    if len(tags) != count:
        raise XPackError("corrupt XPack file (tag list)")
    return tags


# -- varints, arrays and string lists -------------------------------------------------------

_DTYPES = {"B": np.uint8, "H": np.uint16, "I": np.uint32}
_DTYPE_CODES = {ord(code): np.dtype(dtype) for code, dtype in _DTYPES.items()}


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 35:
            raise XPackError("corrupt XPack file (truncated number)")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if byte < 0x80:
            return value, at
        shift += 7


def _array_bytes(values: Any) -> bytes:
    """Non-negative integers in the narrowest of 1, 2 or 4 bytes: type, count, values."""
    values = np.asarray(values, dtype=np.int64)
    top = int(values.max()) if len(values) else 0
    code = "B" if top < 1 << 8 else "H" if top < 1 << 16 else "I"
    return code.encode() + _varint(len(values)) + values.astype(_DTYPES[code]).tobytes()


def _read_array(data: bytes, what: str) -> np.ndarray:
    """The array :func:`_array_bytes` wrote (the whole of ``data``), as int64."""
    dtype = _DTYPES.get(chr(data[0])) if data else None
    if dtype is None:
        raise XPackError(f"corrupt XPack file ({what}: array type)")
    count, at = _read_varint(data, 1)
    if len(data) - at != count * np.dtype(dtype).itemsize:
        raise XPackError(f"corrupt XPack file ({what}: array length)")
    return np.frombuffer(data, dtype=dtype, count=count, offset=at).astype(np.int64)


def _strings(items: list[str]) -> bytes:
    return _varint(len(items)) + "\x00".join(items).encode("utf-8", "surrogatepass")


def _read_strings(data: bytes, what: str) -> list[str]:
    count, at = _read_varint(data, 0)
    return _split(data[at:], count, what)


def _split(data: bytes, count: int, what: str) -> list[str]:
    """``count`` strings joined by NUL (XML text, names and values never hold NUL)."""
    if count == 0:
        if data:
            raise XPackError(f"corrupt XPack file ({what})")
        return []
    try:
        items = data.decode("utf-8", "surrogatepass").split("\x00")
    except UnicodeDecodeError:
        raise XPackError(f"corrupt XPack file ({what} is not UTF-8)") from None
    if len(items) != count:
        raise XPackError(f"corrupt XPack file ({what} count)")
    return items


# -- the tree as arrays --------------------------------------------------------------------

KINDS = (DOCUMENT, TEXT, WS, COMMENT, PI)
_KIND_BYTES = {kind.encode() for kind in KINDS}
SEP = "\x01"  # between a label's name and its attribute names (never in XML names or text)


def label_of(name: str, attributes: list[tuple[str, str]] | tuple = ()) -> str:
    return SEP.join([name, *(key for key, _ in attributes)])


def tokens_of(structure: list[int], labels: list[int], opens: list[bool]) -> list[int]:
    """S and the nodes' labels -> the structure stream: label + 1 per node in document
    order, 0 where an element (or the document) closes."""
    tokens, open_nodes = [], []  # children left per open node
    for children, label, opening in zip(structure, labels, opens, strict=True):
        if open_nodes:
            open_nodes[-1] -= 1
        tokens.append(label + 1)
        if opening:
            open_nodes.append(children)
        while open_nodes and open_nodes[-1] == 0:
            open_nodes.pop()
            tokens.append(0)
    return tokens


def levels_of(depth: np.ndarray) -> list[np.ndarray]:
    """The nodes at each depth, each level in document order."""
    order = np.argsort(depth, kind="stable")
    return np.split(order, np.flatnonzero(np.diff(depth[order])) + 1)


def parents_of(depth: np.ndarray, levels: list[np.ndarray]) -> np.ndarray:
    """Each node's parent (-1 for the document): the last node one level up before it."""
    parent = np.full(len(depth), -1, dtype=np.int64)
    for d in range(1, len(levels)):
        above, here = levels[d - 1], levels[d]
        parent[here] = above[np.searchsorted(above, here) - 1]
    return parent


def ends_of(depth: np.ndarray, levels: list[np.ndarray], parent: np.ndarray) -> np.ndarray:
    """Where each node's subtree ends (exclusive): its next sibling, else its parent's end."""
    end = np.empty(len(depth), dtype=np.int64)
    end[0] = len(depth)
    for d in range(1, len(levels)):
        here = levels[d]
        following = np.append(here[1:], len(depth))
        end[here] = np.minimum(following, end[parent[here]])
    return end


class Tree:
    """The structural containers of a packed document, checked, as arrays: per node its
    depth and label; per label its name and attribute names."""

    def __init__(self, nodes: int, labels: list[str], structure: bytes) -> None:
        self.labels_text = labels
        label_names = [label.partition(SEP)[0] for label in labels]
        self.names = list(dict.fromkeys(label_names))
        index = {name: i for i, name in enumerate(self.names)}
        kinds = [name[:1] == "#" for name in self.names]
        if not labels or label_names.count(DOCUMENT) != 1 or "" in index \
                or any(kind and name not in KINDS for kind, name in zip(kinds, self.names, strict=True)):
            raise XPackError("corrupt XPack file (label dictionary)")
        self.label_name = np.array([index[name] for name in label_names], dtype=np.int64)
        self.label_is_element = ~np.array(kinds, dtype=bool)[self.label_name]
        self.document = label_names.index(DOCUMENT)
        self.tokens = tokens = _read_array(structure, "structure")
        if len(tokens) < 2 or tokens.max() > len(labels) or tokens[0] != self.document + 1:
            raise XPackError("corrupt XPack file (structure)")
        self.positions = np.flatnonzero(tokens)
        if len(self.positions) != nodes:
            raise XPackError("corrupt XPack file (structure)")
        self.labels = tokens[self.positions] - 1
        self._attributes: tuple[list[str], np.ndarray, np.ndarray, np.ndarray] | None = None
        self._level: dict[int, np.ndarray] = {}

    @functools.cached_property
    def depth(self) -> np.ndarray:
        """Each node's depth (the document's is 0), from the token stream, which is checked
        here: opens and closes balance, and nothing follows the document's close."""
        opens = self.label_is_element | (np.arange(len(self.label_name)) == self.document)
        delta = np.concatenate(([-1], opens.astype(np.int64)))[self.tokens]
        level = np.cumsum(delta)
        if level[-1] != 0 or level[:-1].min() < 1 or np.count_nonzero(self.labels == self.document) != 1:
            raise XPackError("corrupt XPack file (structure)")
        return (level - delta)[self.positions]

    @functools.cached_property
    def name_of(self) -> np.ndarray:
        """Each node's name id."""
        return self.label_name[self.labels]

    def _label_attributes(self) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """Attribute names, and per label the count, start and ids of its attribute names."""
        if self._attributes is None:
            if _BAD_LABEL.search("\x00".join(self.labels_text)):
                raise XPackError("corrupt XPack file (label dictionary)")
            lists = [label.split(SEP)[1:] for label in self.labels_text]
            if any(len(set(names)) != len(names) or "" in names for names in lists if names):
                raise XPackError("corrupt XPack file (label dictionary)")
            flat = [name for names in lists for name in names]
            attrnames = list(dict.fromkeys(flat))
            index = {name: i for i, name in enumerate(attrnames)}
            sizes = np.array([len(names) for names in lists], dtype=np.int64)
            self._attributes = (attrnames, sizes, np.cumsum(sizes) - sizes,
                                np.array([index[name] for name in flat], dtype=np.int64))
        return self._attributes

    @property
    def attrnames(self) -> list[str]:
        return self._label_attributes()[0]

    @property
    def nodes(self) -> int:
        return len(self.labels)

    def tags(self) -> list[str]:
        """The element names, in order of first use."""
        return [name for name in self.names if name[:1] != "#"]

    @functools.cached_property
    def levels(self) -> list[np.ndarray]:
        return levels_of(self.depth)

    @functools.cached_property
    def parent(self) -> np.ndarray:
        return parents_of(self.depth, self.levels)

    def parent_of(self, nodes: np.ndarray) -> np.ndarray:
        """The parents of some nodes (sorted), without computing every node's."""
        if "parent" in self.__dict__ or not len(nodes):
            return self.parent[nodes]
        depths = self.depth[nodes]
        low, high = int(depths.min()), int(depths.max())
        if low < 1:
            raise ValueError("the document has no parent")
        out = np.empty(len(nodes), dtype=np.int64)
        for d in range(low, high + 1):
            here = nodes if low == high else nodes[depths == d]
            above = self._level.get(d - 1)
            if above is None:
                above = self._level[d - 1] = np.flatnonzero(self.depth == d - 1)
            found = above[np.searchsorted(above, here) - 1]
            if low == high:
                return found
            out[depths == d] = found
        return out

    @functools.cached_property
    def end(self) -> np.ndarray:
        return ends_of(self.depth, self.levels, self.parent)

    def name_mask(self, *names: str) -> np.ndarray:
        """Per name id: is it one of ``names``."""
        return np.array([name in names for name in self.names], dtype=bool)

    def content_nodes(self) -> np.ndarray:
        return np.flatnonzero(self.name_mask(*KINDS[1:])[self.name_of])

    def content_keys(self, nodes: np.ndarray) -> np.ndarray:
        """The column of each content node in the columnar layout: (parent name, kind)."""
        return self.name_of[self.parent[nodes]] * len(self.names) + self.name_of[nodes]

    def attribute_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Every (element, attribute name id) pair, in document order."""
        _, label_sizes, label_starts, label_attrs = self._label_attributes()
        sizes = label_sizes[self.labels]
        owners = np.flatnonzero(sizes)
        counts = sizes[owners]
        firsts = np.repeat(np.cumsum(counts) - counts, counts)
        within = np.arange(int(counts.sum())) - firsts
        attrs = label_attrs[np.repeat(label_starts[self.labels[owners]], counts) + within]
        return np.repeat(owners, counts), attrs

    def places(self, interleaved: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The content nodes (document order), and where each attribute value (pairs in
        document order) and each content node's text sit in the value lists.

        Columnar layout: attribute values in one list, a column per attribute name; texts in
        another, a column per (parent name, kind); document order within a column.
        Interleaved layout: one list, in document order each element's attribute values then
        each text, comment or PI; whitespace-only texts after all of them."""
        nodes = self.content_nodes()
        owners, attrs = self.attribute_pairs()
        if not interleaved:
            return nodes, _places(attrs), _places(self.content_keys(nodes))
        spaces = self.name_mask(WS)[self.name_of[nodes]]
        keys = np.concatenate((owners, nodes[~spaces], nodes[spaces] + self.nodes))
        merged = _places(keys)
        content = np.empty(len(nodes), dtype=np.int64)
        content[~spaces] = merged[len(owners):len(owners) + int((~spaces).sum())]
        content[spaces] = merged[len(owners) + int((~spaces).sum()):]
        return nodes, merged[:len(owners)], content


class Skeleton:
    """What plain paths (name tests and ``*`` down child axes, or one ``//name``) need, read
    with a handful of array operations: the structure as its token stream and the label
    dictionary as bytes, searched by name. No per-label or per-node Python work, so that a
    small page is queried in tens of microseconds (the :class:`Tree` is built for the rest).
    Checked as far as it is used: label count, one document label opening the stream, token
    range, node count, and (for depths) that opens and closes balance."""

    def __init__(self, nodes: int, labels: bytes, structure: bytes) -> None:
        count, at = (labels[0], 1) if labels and labels[0] < 0x80 else _read_varint(labels, 0)
        self.haystack = haystack = b"\x00" + labels[at:]  # label k follows the (k + 1)th NUL
        found, at = [], haystack.find(b"\x00#")
        while at >= 0:
            end = haystack.find(b"\x00", at + 1)
            found.append((haystack[at + 1:end if end >= 0 else None], at))
            at = haystack.find(b"\x00#", at + 1)
        kinds = dict(found)
        if not count or haystack.count(b"\x00") != count or len(kinds) != len(found) \
                or b"#document" not in kinds or not kinds.keys() <= _KIND_BYTES:
            raise XPackError("corrupt XPack file (label dictionary)")
        self.labels = count
        self.leaves = [haystack.count(b"\x00", 0, at) for kind, at in kinds.items() if kind != b"#document"]
        self.document = haystack.count(b"\x00", 0, kinds[b"#document"])
        dtype = _DTYPE_CODES.get(structure[0]) if structure else None
        if dtype is None:
            raise XPackError("corrupt XPack file (structure: array type)")
        size, at = _read_varint(structure, 1)
        if len(structure) - at != size * dtype.itemsize:
            raise XPackError("corrupt XPack file (structure: array length)")
        self.tokens = tokens = np.frombuffer(structure, dtype=dtype, count=size, offset=at)
        if size < 2 or tokens[0] != self.document + 1 or tokens.max() > count or np.count_nonzero(tokens) != nodes:
            raise XPackError("corrupt XPack file (structure)")

    def labels_named(self, name: str) -> list[int]:
        """The element labels with this name (Clark notation)."""
        haystack, needle = self.haystack, b"\x00" + name.encode("utf-8", "surrogatepass")
        found, at = [], haystack.find(needle)
        while at >= 0:
            after = at + len(needle)
            if after == len(haystack) or haystack[after] <= 1:  # the name ends there: NUL or SEP
                found.append(haystack.count(b"\x00", 0, at))
            at = haystack.find(needle, at + 1)
        return found

    def openings(self, name: str | None) -> np.ndarray:
        """The token positions where an element with this name (None: any element) opens."""
        if name is None:
            return self.elements.nonzero()[0]
        labels = self.labels_named(name)
        if not labels:
            return np.zeros(0, dtype=np.intp)
        if len(labels) <= 4:  # a few comparisons beat a table lookup
            mask = self.tokens == labels[0] + 1
            for label in labels[1:]:
                mask |= self.tokens == label + 1
            return mask.nonzero()[0]
        lookup = np.zeros(self.labels + 1, dtype=bool)
        lookup[np.array(labels, dtype=np.int64) + 1] = True
        return lookup.take(self.tokens).nonzero()[0]

    @functools.cached_property
    def elements(self) -> np.ndarray:
        """Per token: does an element open there."""
        lookup = np.ones(self.labels + 1, dtype=bool)
        lookup[0] = lookup[self.document + 1] = False
        lookup[np.array(self.leaves, dtype=np.int64) + 1] = False
        return lookup.take(self.tokens)

    @functools.cached_property
    def level(self) -> np.ndarray:
        """Per token, the depth after it (an element at depth d opens to d + 1)."""
        delta = np.ones(self.labels + 1, dtype=np.int32)
        delta[0] = -1
        delta[np.array(self.leaves, dtype=np.int64) + 1] = 0
        level = np.cumsum(delta.take(self.tokens))
        if level[-1] != 0 or level[:-1].min() < 1 or np.count_nonzero(self.tokens == self.document + 1) != 1:
            raise XPackError("corrupt XPack file (structure)")
        return level

    def node_ids(self, positions: np.ndarray) -> list[int]:
        """Token positions -> node numbers (document order)."""
        if not len(positions):
            return []
        closes = (self.tokens[:positions[-1]] == 0).nonzero()[0]
        return (positions - closes.searchsorted(positions)).tolist()


def _places(keys: np.ndarray) -> np.ndarray:
    """For items in document order, each one's index once stably sorted by key."""
    order = np.argsort(keys, kind="stable")
    places = np.empty(len(keys), dtype=np.int64)
    places[order] = np.arange(len(keys))
    return places


def _in_order(values: list[str], places: np.ndarray) -> list[str]:
    """Values in document order -> the same values in the order ``places`` gives them."""
    out = [""] * len(values)
    for value, place in zip(values, places.tolist(), strict=True):
        out[place] = value
    return out


# -- packing ---------------------------------------------------------------------------------


def containers_of(packed: Packed, interleaved: bool | None = None) -> tuple[dict[str, bytes], bool, list[str]]:
    """The raw containers of a page-packed document (the other operators applied), the
    layout of the values (interleaved unless told, when they are small), and the tags."""
    labels: dict[str, int] = {}
    node_labels, opens = [], []
    for i, name in enumerate(packed.names):
        if name == TEXT and not packed.contents.get(i, "").strip(" \t\r\n"):
            name = WS
        node_labels.append(labels.setdefault(label_of(name, packed.attributes.get(i, ())), len(labels)))
        opens.append(i == 0 or not name.startswith("#"))
    label_list = list(labels)
    structure = _array_bytes(tokens_of(packed.structure, node_labels, opens))
    tree = Tree(len(node_labels), label_list, structure)
    values = [value for i in sorted(packed.attributes) for _, value in packed.attributes[i]]
    nodes = tree.content_nodes().tolist()
    texts = [packed.contents.get(i, "") for i in nodes]
    if interleaved is None:
        interleaved = sum(map(len, values)) + sum(map(len, texts)) < SOLID_LIMIT
    _, value_places, content_places = tree.places(interleaved)
    if interleaved:
        attrvalues, content = [], _in_order(values + texts, np.concatenate((value_places, content_places)))
    else:
        attrvalues, content = _in_order(values, value_places), _in_order(texts, content_places)
    namespaces = "\n".join(f"{node}\t{prefix}\t{uri}" for node in sorted(packed.namespaces)
                           for prefix, uri in packed.namespaces[node])
    return {
        "labels": _strings(label_list),
        "structure": structure,
        "namespaces": namespaces.encode("utf-8", "surrogatepass"),
        "attrvalues": "\x00".join(attrvalues).encode("utf-8", "surrogatepass"),
        "content": "\x00".join(content).encode("utf-8", "surrogatepass"),
    }, interleaved, tree.tags()


def _smallest(data: bytes, codecs: tuple[int, ...]) -> tuple[int, bytes]:
    codec, stored = 0, data
    if len(data) > 16:
        for candidate in codecs:
            squeezed = _COMPRESS[candidate](data)
            if len(squeezed) < len(stored):
                codec, stored = candidate, squeezed
    return codec, stored


def pack(data: bytes, codecs: tuple[int, ...] = (1, 2, 3, 4, 5), interleaved: bool | None = None) -> bytes:
    """An XML document packed (raises XPackError for malformed XML, with line and column).
    ``codecs``: the codec numbers tried for each block (see :data:`CODECS`); ``interleaved``:
    the value layout (default: interleaved when the values are under :data:`SOLID_LIMIT`)."""
    packed = page_pack(parse(data))
    raw, interleaved, tag_names = containers_of(packed, interleaved)
    return assemble(raw, len(packed.names), interleaved, tag_names, codecs)


def assemble(raw: dict[str, bytes], nodes: int, interleaved: bool, tag_names: list[str],
             codecs: tuple[int, ...] = (1, 2, 3, 4, 5)) -> bytes:
    """The file for raw containers: blocks compressed, header, tag list and checksums (what
    :func:`pack` writes; the tests forge files through it)."""
    groups = [list(group) for group in GROUPS]
    values = groups.pop()
    if interleaved:
        groups.append(values)
    else:
        groups.extend([name] for name in values)
    block_of = {name: number for number, group in enumerate(groups) for name in group}
    blocks = [_smallest(b"".join(raw[name] for name in group), codecs) for group in groups]
    width = 2 if max(max(map(len, raw.values())), max(len(s) for _, s in blocks)) < 1 << 16 else 4
    fields: list[int] = []
    for name in CONTAINERS:
        fields += [block_of[name], len(raw[name])]
    for codec, stored in blocks:
        fields += [codec, len(stored), zlib.crc32(stored)]
    head = _HEAD.pack(MAGIC, nodes, width | TAG_LIST | (INTERLEAVED if interleaved else 0),
                      len(CONTAINERS), len(blocks))
    tags = _tag_list(tag_names)
    body = head + _table(width, len(CONTAINERS), len(blocks)).pack(*fields) + _varint(len(tags)) + tags
    return body + _CRC.pack(zlib.crc32(body)) + b"".join(stored for _, stored in blocks)


# -- reading ---------------------------------------------------------------------------------


class PackedDocument:
    """A packed document, read lazily: a block is decompressed (and checked) only when a
    question needs one of its containers."""

    def __init__(self, data: bytes) -> None:
        if len(data) < _HEAD.size:
            raise XPackError("not an XPack file (too short)")
        magic, nodes, flags, count, blocks = _HEAD.unpack_from(data)
        if magic != MAGIC:
            raise XPackError("not an XPack file (bad magic)")
        width, self.interleaved = flags & 0x3F, bool(flags & INTERLEAVED)
        if width not in (2, 4) or count != len(CONTAINERS) or not 1 <= blocks <= count:
            raise XPackError("corrupt XPack file (header)")
        table = _table(width, count, blocks)
        at = _HEAD.size + table.size
        self._tag_list: bytes | None = None
        if flags & TAG_LIST:
            size, start = (data[at], at + 1) if len(data) > at and data[at] < 0x80 else _read_varint(data, at)
            at = start + size
            self._tag_list = data[start:at]
        if at + 4 > len(data):
            raise XPackError("truncated XPack file (header)")
        if zlib.crc32(data[:at]) != _CRC.unpack_from(data, at)[0]:
            raise XPackError("corrupt XPack file (header checksum)")
        self._fields = fields = table.unpack_from(data, _HEAD.size)
        self._start = at + 4
        if self._start + sum(fields[2 * count + 1::3]) != len(data):
            raise XPackError("truncated or corrupt XPack file (length)")
        self.data = data
        self.nodes = nodes
        self._blocks: list[tuple[int, int, int, int]] | None = None
        self._entries: dict[str, tuple[int, int]] | None = None
        self._raw: dict[str, bytes] = {}  # decompressed containers
        self._cache: dict[str, Any] = {}  # what was read from them

    @property
    def blocks(self) -> list[tuple[int, int, int, int]]:
        """Per block: codec, stored length, CRC-32, offset."""
        if self._blocks is None:
            fields, at, blocks = self._fields, self._start, []
            for b in range(2 * len(CONTAINERS), len(fields), 3):
                codec, stored, crc = fields[b:b + 3]
                if codec not in CODECS:
                    raise XPackError("corrupt XPack file (codec)")
                blocks.append((codec, stored, crc, at))
                at += stored
            self._blocks = blocks
        return self._blocks

    @property
    def entries(self) -> dict[str, tuple[int, int]]:
        """Container -> (its block, its raw length)."""
        if self._entries is None:
            fields = self._fields
            blocks = (len(fields) - 2 * len(CONTAINERS)) // 3
            entries = {}
            for n, name in enumerate(CONTAINERS):
                if fields[2 * n] >= blocks:
                    raise XPackError("corrupt XPack file (container table)")
                entries[name] = (fields[2 * n], fields[2 * n + 1])
            self._entries = entries
        return self._entries

    @property
    def decompressed(self) -> set[str]:
        """The containers decompressed so far."""
        return set(self._raw)

    def container(self, name: str) -> bytes:
        found = self._raw.get(name)
        if found is None:
            entries = self.entries
            block = entries[name][0]
            members = [(c, entries[c][1]) for c in CONTAINERS if entries[c][0] == block]
            raw = sum(size for _, size in members)
            codec, stored, crc, at = self.blocks[block]
            chunk = self.data[at:at + stored]
            if zlib.crc32(chunk) != crc:
                raise XPackError(f"corrupt XPack file (checksum of the block holding {name})")
            try:
                plain = _decompress(codec, chunk, raw)
            except (zlib.error, OSError, lzma.LZMAError, ValueError, brotli.error) as exc:
                raise XPackError(f"corrupt XPack file ({name}: {exc})") from None
            if len(plain) != raw:
                raise XPackError(f"corrupt XPack file ({name}: length)")
            start = 0
            for member, size in members:
                self._raw[member] = plain[start:start + size]  # a whole-bytes slice is not copied
                start += size
            found = self._raw[name]
        return found

    # -- questions answered from few containers ---------------------------------------------

    def labels(self) -> list[str]:
        found = self._cache.get("labels")
        if found is None:
            found = self._cache["labels"] = _read_strings(self.container("labels"), "label dictionary")
        return found

    def tags(self) -> list[str]:
        """The distinct element names, in order of first use: from the header's tag list, or
        in files written without one, from the label dictionary."""
        if self._tag_list is not None:
            return _read_tag_list(self._tag_list)
        raw = self.container("labels")
        start = _read_varint(raw, 0)[1]
        try:
            labels = raw[start:].decode("utf-8", "surrogatepass").split("\x00")
        except UnicodeDecodeError:
            raise XPackError("corrupt XPack file (label dictionary is not UTF-8)") from None
        return [name for name in dict.fromkeys([label.partition(SEP)[0] for label in labels]) if name[:1] != "#"]

    def name(self, node: int) -> str:
        """A node's name (an element's in Clark notation; ``#text``, ``#comment``... otherwise)."""
        tree = self.tree()
        if not 0 <= node < tree.nodes:
            raise XPackError(f"no node {node}")
        name = tree.names[tree.name_of[node]]
        return TEXT if name == WS else name

    def verify(self) -> None:
        """Check every block against its CRC-32 without decompressing anything."""
        for number, (_, stored, crc, at) in enumerate(self.blocks):
            if zlib.crc32(self.data[at:at + stored]) != crc:
                raise XPackError(f"corrupt XPack file (checksum of block {number})")

    def sizes(self) -> dict[str, dict[str, Any]]:
        """Per container: raw length, its block, the block's codec and stored length, and the
        containers it shares the block with."""
        out = {}
        for name, (block, raw) in self.entries.items():
            codec, stored, _, _ = self.blocks[block]
            out[name] = {"raw": raw, "block": block, "codec": CODECS[codec], "stored": stored,
                         "shares_block_with": [c for c in CONTAINERS if c != name and self.entries[c][0] == block]}
        return out

    def tree(self) -> Tree:
        found = self._cache.get("tree")
        if found is None:
            found = Tree(self.nodes, self.labels(), self.container("structure"))
            if self._tag_list is not None and _read_tag_list(self._tag_list) != found.tags():
                raise XPackError("corrupt XPack file (tag list and label dictionary disagree)")
            self._cache["tree"] = found
        return found

    def skeleton(self) -> Skeleton:
        found = self._cache.get("skeleton")
        if found is None:
            found = Skeleton(self.nodes, self.container("labels"), self.container("structure"))
            self._cache["skeleton"] = found
        return found

    def _places(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        found = self._cache.get("places")
        if found is None:
            found = self._cache["places"] = self.tree().places(self.interleaved)
        return found

    def _interleaved_values(self) -> list[str]:
        found = self._cache.get("interleaved")
        if found is None:
            nodes, value_places, _ = self._places()
            if self.entries["attrvalues"][1]:
                raise XPackError("corrupt XPack file (attribute values)")
            found = self._cache["interleaved"] = _split(self.container("content"), len(value_places) + len(nodes),
                                                        "values")
        return found

    def attribute_values(self) -> tuple[list[str], np.ndarray]:
        """The attribute value list, and where each attribute (pairs in document order, as
        :meth:`Tree.attribute_pairs` gives them) has its value in it."""
        _, places, _ = self._places()
        if self.interleaved:
            return self._interleaved_values(), places
        found = self._cache.get("attribute values")
        if found is None:
            found = self._cache["attribute values"] = _split(self.container("attrvalues"), len(places),
                                                             "attribute values")
        return found, places

    def content_values(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The text list, the content nodes in document order, and where each one's text is."""
        nodes, _, places = self._places()
        if self.interleaved:
            return self._interleaved_values(), nodes, places
        found = self._cache.get("content values")
        if found is None:
            found = self._cache["content values"] = _split(self.container("content"), len(nodes), "content")
        return found, nodes, places

    def declared_namespaces(self) -> list[tuple[int, str, str]]:
        found = []
        try:
            text = self.container("namespaces").decode("utf-8", "surrogatepass")
            for line in text.split("\n") if text else []:
                node, prefix, uri = line.split("\t", 2)
                found.append((int(node), prefix, uri))
        except (UnicodeDecodeError, ValueError):
            raise XPackError("corrupt XPack file (namespaces)") from None
        if any(not 0 < node < self.nodes for node, _, _ in found):
            raise XPackError("corrupt XPack file (namespace owner)")
        return found

    def query(self, expression: str, namespaces: dict[str, str] | None = None) -> list[tuple[str, Any]]:
        """XPath (the subset of :mod:`webrace.xpack.query`) without unpacking. Prefixes are
        the document's, plus ``namespaces`` (prefix -> URI, as lxml's ``xpath`` takes them:
        the way to name elements in a default namespace, e.g. XHTML's)."""
        evaluator = self._cache.get("evaluator")
        if evaluator is None:
            evaluator = self._cache["evaluator"] = Evaluator(self)
        return evaluator.run(expression, namespaces)

    # -- the whole document ---------------------------------------------------------------

    def to_packed(self) -> Packed:
        tree = self.tree()
        names = tree.names
        structure = np.bincount(tree.parent[1:], minlength=tree.nodes).tolist()
        node_names = [TEXT if name == WS else name for name in (names[i] for i in tree.name_of.tolist())]
        packed = Packed(structure, node_names)
        owners, attrs = tree.attribute_pairs()
        values, places = self.attribute_values()
        attrnames = tree.attrnames
        for owner, attr, place in zip(owners.tolist(), attrs.tolist(), places.tolist(), strict=True):
            packed.attributes.setdefault(owner, []).append((attrnames[attr], values[place]))
        for node, prefix, uri in self.declared_namespaces():
            packed.namespaces.setdefault(node, []).append((prefix, uri))
        texts, nodes, places = self.content_values()
        packed.contents = {node: texts[place] for node, place in zip(nodes.tolist(), places.tolist(), strict=True)}
        return packed


def unpack(data: bytes) -> bytes:
    """The document again (UTF-8, with an XML declaration); equal to the original under C14N."""
    from lxml import etree

    packed = PackedDocument(data).to_packed()
    try:
        tree = page_unpack(packed)
    except XPackError:
        raise
    except (ValueError, TypeError, IndexError, KeyError) as exc:  # names or values lxml will not take
        raise XPackError(f"corrupt XPack file ({exc})") from None
    return etree.tostring(tree, xml_declaration=True, encoding="utf-8")


def stat(data: bytes) -> dict[str, Any]:
    doc = PackedDocument(data)
    return {"nodes": doc.nodes, "tags": doc.tags(), "containers": doc.sizes()}


def canonical(data: bytes) -> bytes:
    """C14N of a document (comments kept), what round trips are compared by."""
    from lxml import etree

    return etree.tostring(parse(data), method="c14n")
