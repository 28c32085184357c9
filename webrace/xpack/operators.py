"""XPack's document operators (seed 004, section 4.3), each a reversible function usable on
its own:

- :func:`page_pack` (phi): a document -> a node structure container ``S`` (children per node,
  depth first) and node containers (kind/name, attributes, namespace declarations, content);
  :func:`page_unpack` is its inverse;
- :func:`path_pack` (psi): ``S`` -> subpaths ``(start, end, parent)``, the non-branching
  fragments of root-leaf paths; :func:`path_unpack`;
- :func:`name_pack` (rho): names -> (dictionary, identifiers); :func:`name_unpack`;
- :func:`url_pack` (gamma) and :func:`attribute_pack` (alpha): values -> sorted distinct values,
  prefix-delta coded, and identifiers; :func:`url_unpack`, :func:`attribute_unpack`;
- :func:`content_pack` (chi): texts -> deduplicated texts and identifiers;
  :func:`content_unpack`.

No Scrapy here.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lxml import etree

TEXT, COMMENT, PI, DOCUMENT = "#text", "#comment", "#pi", "#document"
WS = "#ws"  # whitespace-only text in the packed format (a text node with its own name, so its own column)


class XPackError(ValueError):
    """Input that cannot be packed, or packed data that cannot be read."""


def xml_parser() -> etree.XMLParser:
    """Well-formed XML only; internal entities expanded (the amplification limit refuses
    "billion laughs"), external entities and DTDs never loaded, no network."""
    return etree.XMLParser(resolve_entities="internal", no_network=True, load_dtd=False, huge_tree=False,
                           remove_blank_text=False, strip_cdata=True)


@dataclass
class Packed:
    """What :func:`page_pack` makes: one entry per node, in depth-first order; node 0 is
    the document (its children: the root element and any comments or PIs around it)."""

    structure: list[int] = field(default_factory=list)  # S: children per node
    names: list[str] = field(default_factory=list)  # per node: #document, #text, #comment, #pi or a tag
    attributes: dict[int, list[tuple[str, str]]] = field(default_factory=dict)  # element -> (name, value)...
    namespaces: dict[int, list[tuple[str, str]]] = field(default_factory=dict)  # element -> declared (prefix, uri)
    contents: dict[int, str] = field(default_factory=dict)  # text / comment / pi ("target data") -> content


def parse(data: bytes) -> Any:
    try:
        return etree.fromstring(data, xml_parser()).getroottree()
    except etree.XMLSyntaxError as exc:
        line, column = (exc.position if exc.position else (exc.lineno, exc.offset))
        raise XPackError(f"not well-formed XML: line {line}, column {column}: {exc.msg}") from None


def page_pack(tree: Any, elements: list[Any] | None = None) -> Packed:
    """phi: the document tree -> structure and node containers (no recursion). With
    ``elements``, the lxml node of each packed node is appended to it (None for text)."""
    packed = Packed()
    keep = elements.append if elements is not None else (lambda _: None)
    keep(None)
    root = tree.getroot()
    top: list[Any] = []
    node = root
    while node.getprevious() is not None:
        node = node.getprevious()
    while node is not None:
        top.append(node)
        node = node.getnext()
    packed.structure.append(len(top))
    packed.names.append(DOCUMENT)
    stack: list[tuple[Any, Any]] = [(item, None) for item in reversed(top)]
    while stack:
        item, parent_ns = stack.pop()
        index = len(packed.names)
        keep(None if isinstance(item, str) else item)
        if isinstance(item, str):
            packed.structure.append(0)
            packed.names.append(TEXT)
            packed.contents[index] = item
            continue
        tag = item.tag
        if tag is etree.Comment:
            packed.structure.append(0)
            packed.names.append(COMMENT)
            packed.contents[index] = item.text or ""
            continue
        if tag is etree.PI:
            packed.structure.append(0)
            packed.names.append(PI)
            packed.contents[index] = item.target if item.text is None else f"{item.target} {item.text}"
            continue
        if not isinstance(tag, str):
            raise XPackError(f"unsupported node {tag!r} (entity references are expanded before packing)")
        children: list[Any] = []
        if item.text:
            children.append(item.text)
        for child in item:
            children.append(child)
            if child.tail:
                children.append(child.tail)
        packed.structure.append(len(children))
        packed.names.append(tag)
        if item.attrib:
            packed.attributes[index] = list(item.attrib.items())
        nsmap = dict(item.nsmap)
        declared = [(p or "", u) for p, u in nsmap.items() if parent_ns is None or parent_ns.get(p) != u]
        if declared:
            packed.namespaces[index] = sorted(declared)
        for child in reversed(children):
            stack.append((child, nsmap))
    return packed


def page_unpack(packed: Packed) -> Any:
    """phi^-1: the containers -> the document tree."""
    if not packed.names or packed.names[0] != DOCUMENT:
        raise XPackError("packed structure does not start with the document node")
    n = len(packed.names)
    top: list[Any] = []
    # per open node: [element (None: the document), children left, its last child element]
    # (lxml's len() walks the children: keeping the last one makes this linear)
    open_nodes: list[list] = [[None, packed.structure[0], None]]
    for i in range(1, n):
        if not open_nodes:
            raise XPackError("packed structure has more nodes than the tree holds")
        parent, _, last = open_nodes[-1]
        name = packed.names[i]
        if name == TEXT:
            text = packed.contents.get(i, "")
            if parent is None:
                raise XPackError("text outside the root element")
            if last is not None:
                last.tail = (last.tail or "") + text
            else:
                parent.text = (parent.text or "") + text
            node = None
        elif name in (COMMENT, PI):
            content = packed.contents.get(i, "")
            if name == COMMENT:
                node = etree.Comment(content)
            else:
                target, space, data = content.partition(" ")
                node = etree.ProcessingInstruction(target, data if space else None)
        else:
            nsmap = {p or None: u for p, u in packed.namespaces.get(i, [])}
            node = etree.Element(name, nsmap=nsmap) if parent is None else etree.SubElement(parent, name, nsmap=nsmap)
            for key, value in packed.attributes.get(i, []):
                node.set(key, value)
        if node is not None and parent is None:
            top.append(node)
        elif node is not None and name in (COMMENT, PI):
            parent.append(node)
        open_nodes[-1][1] -= 1
        if node is not None:
            open_nodes[-1][2] = node
        if packed.structure[i]:
            if node is None or name in (COMMENT, PI):
                raise XPackError(f"node {i} ({name}) cannot have children")
            open_nodes.append([node, packed.structure[i], None])
        while open_nodes and open_nodes[-1][1] == 0:
            open_nodes.pop()
    roots = [t for t in top if isinstance(t.tag, str)]
    if len(roots) != 1:
        raise XPackError("a document has exactly one root element")
    root = roots[0]
    position = top.index(root)
    for before in top[:position]:
        root.addprevious(before)
    for after in reversed(top[position + 1:]):
        root.addnext(after)
    return root.getroottree()


# -- PathPack -----------------------------------------------------------------------------


def path_pack(structure: Sequence[int]) -> list[tuple[int, int, int]]:
    """psi: S -> subpaths (start, end, parent): maximal chains of single-child nodes, in
    depth-first order (the start's parent is -1 for the root)."""
    paths: list[tuple[int, int, int]] = []
    n = len(structure)
    if not n:
        return paths
    parents = _parents(structure)
    start = 0
    for i in range(n):
        if structure[i] != 1 or i == n - 1:  # a branch or a leaf ends the path
            paths.append((start, i, parents[start]))
            start = i + 1
    return paths


def path_unpack(paths: Sequence[tuple[int, int, int]]) -> list[int]:
    """psi^-1: subpaths -> S. Nodes inside a path have one child (the next node); the last
    node of a path has as many children as there are paths hanging from it."""
    if not paths:
        return []
    structure = [0] * (paths[-1][1] + 1)
    for start, end, parent in paths:
        if not 0 <= start <= end < len(structure) or parent >= start:
            raise XPackError("corrupt path structure")
        for i in range(start, end):
            structure[i] = 1
        if parent >= 0:
            structure[parent] += 1
    return structure


def _parents(structure: Sequence[int]) -> list[int]:
    parents = [-1] * len(structure)
    open_nodes: list[list[int]] = []
    for i, children in enumerate(structure):
        if open_nodes:
            parents[i] = open_nodes[-1][0]
            open_nodes[-1][1] -= 1
            if open_nodes[-1][1] == 0:
                open_nodes.pop()
        if children:
            open_nodes.append([i, children])
    return parents


# -- NamePack, ContentPack ------------------------------------------------------------------


def name_pack(names: Sequence[str]) -> tuple[list[str], list[int]]:
    """rho: names -> (distinct names in order of first use, an identifier per name)."""
    ids: dict[str, int] = {}
    return list(_intern(names, ids)), [ids[n] for n in names]


def name_unpack(dictionary: Sequence[str], ids: Sequence[int]) -> list[str]:
    try:
        return [dictionary[i] for i in ids]
    except IndexError:
        raise XPackError("a name identifier points outside the dictionary") from None


def _intern(values: Sequence[str], ids: dict[str, int]) -> dict[str, int]:
    for value in values:
        if value not in ids:
            ids[value] = len(ids)
    return ids


content_pack = name_pack  # chi: the same substitution, over texts (deduplicated content)
content_unpack = name_unpack


# -- URLPack / AttributePack: sorted distinct values, prefix-delta coded ---------------------


def prefix_delta(values: Sequence[str]) -> bytes:
    """Sorted strings as (shared prefix length with the previous one, rest) pairs."""
    out = bytearray()
    previous = ""
    for value in values:
        shared = 0
        limit = min(len(previous), len(value))
        while shared < limit and previous[shared] == value[shared]:
            shared += 1
        rest = value[shared:].encode("utf-8", "surrogatepass")
        out += struct.pack("<II", shared, len(rest)) + rest
        previous = value
    return bytes(out)


def prefix_undelta(data: bytes, count: int) -> list[str]:
    values, previous, at = [], "", 0
    for _ in range(count):
        if at + 8 > len(data):
            raise XPackError("truncated value list")
        shared, length = struct.unpack_from("<II", data, at)
        at += 8
        if shared > len(previous) or at + length > len(data):
            raise XPackError("corrupt value list")
        value = previous[:shared] + data[at:at + length].decode("utf-8", "surrogatepass")
        at += length
        values.append(value)
        previous = value
    if at != len(data):
        raise XPackError("corrupt value list (trailing bytes)")
    return values


def url_pack(values: Sequence[str]) -> tuple[bytes, int, list[int]]:
    """gamma: values (URLs) -> (sorted distinct values prefix-delta coded, their count, an
    identifier per value: its rank in the sorted list)."""
    distinct = sorted(set(values))
    rank = {v: i for i, v in enumerate(distinct)}
    return prefix_delta(distinct), len(distinct), [rank[v] for v in values]


def url_unpack(data: bytes, count: int, ids: Sequence[int]) -> list[str]:
    distinct = prefix_undelta(data, count)
    try:
        return [distinct[i] for i in ids]
    except IndexError:
        raise XPackError("a value identifier points outside the value list") from None


def attribute_pack(pairs: Sequence[tuple[str, str]]) -> tuple[list[str], list[int], bytes, int, list[int]]:
    """alpha: (name, value) pairs -> NamePack over the names, URLPack over the values."""
    names, name_ids = name_pack([n for n, _ in pairs])
    data, count, value_ids = url_pack([v for _, v in pairs])
    return names, name_ids, data, count, value_ids


def attribute_unpack(names: Sequence[str], name_ids: Sequence[int], data: bytes, count: int,
                     value_ids: Sequence[int]) -> list[tuple[str, str]]:
    return list(zip(name_unpack(names, name_ids), url_unpack(data, count, value_ids), strict=True))
