"""The Page Digest (seed 004, section 3.3): a document tree as arrays.

Nodes are numbered in depth-first (document) order: elements, text nodes (``#text``),
comments (``#comment``) and processing instructions (``#pi``). The containers:

- ``ST``: the number of children of each node (the structure);
- ``TL``/``TM``: the distinct node labels (tag names, ``#text``...) and each node's index in it;
- ``AL``/``AM``: the distinct attribute lists (name/value pairs, in document order) and each
  node's index in it plus one (0: no attributes);
- ``CL``/``CM``: the contents (text of text nodes and comments, ``target data`` of a PI) and
  each node's index in it plus one (0: no content).

:func:`encode` parses with lxml (HTML: repaired the way lxml's HTML parser repairs it; XML:
entities and network off) and walks the tree without recursion, so a page nested tens of
thousands deep cannot overflow the stack. :func:`decode` gives markup that parses to the
same tree. No Scrapy here.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from functools import cached_property
from typing import Any

from lxml import etree, html

TEXT, COMMENT, PI = "#text", "#comment", "#pi"
SPECIAL = (TEXT, COMMENT, PI)


class DigestError(ValueError):
    """Input that cannot be encoded, or a digest that cannot be read."""


class PageDigest:
    """The containers. ``AL`` and ``CL`` may be given as functions that produce them: a
    digest loaded from its binary form reads its content and attributes only when asked
    (structure sentinels never pay for the text)."""

    def __init__(self, ST: array, TM: array, AM: array, CM: array, TL: list[str],  # noqa: N803 - the seed's names
                 AL: list[tuple[tuple[str, str], ...]] | Callable[[], list], CL: list[str] | Callable[[], list[str]],
                 kind: str = "html", doctype: str = "") -> None:
        self.ST, self.TM, self.AM, self.CM, self.TL = ST, TM, AM, CM, TL
        self._al, self._cl = AL, CL
        self.kind, self.doctype = kind, doctype
        self._cache: dict[str, Any] = {}

    @property
    def AL(self) -> list[tuple[tuple[str, str], ...]]:  # noqa: N802
        if callable(self._al):
            self._al = self._al()
        return self._al

    @property
    def CL(self) -> list[str]:  # noqa: N802
        if callable(self._cl):
            self._cl = self._cl()
        return self._cl

    def __repr__(self) -> str:
        return f"<PageDigest {self.kind} nodes={self.size} labels={len(self.TL)}>"

    @property
    def size(self) -> int:
        """The node count (the seed's first component)."""
        return len(self.ST)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PageDigest):
            return NotImplemented
        return (self.kind, self.doctype, self.ST, self.TM, self.AM, self.CM, self.TL, list(self.AL), self.CL) == (
            other.kind, other.doctype, other.ST, other.TM, other.AM, other.CM, other.TL, list(other.AL), other.CL)

    __hash__ = None  # type: ignore[assignment]

    # -- node access ------------------------------------------------------------------

    def label(self, i: int) -> str:
        return self.TL[self.TM[i]]

    def attrs(self, i: int) -> tuple[tuple[str, str], ...]:
        a = self.AM[i]
        return self.AL[a - 1] if a else ()

    def content(self, i: int) -> str | None:
        c = self.CM[i]
        return self.CL[c - 1] if c else None

    @cached_property
    def subtree_sizes(self) -> array:
        """Nodes in each node's subtree, itself included (one backward pass, no recursion)."""
        n = self.size
        sizes = array("l", [1]) * n
        parents = self.parents
        for i in range(n - 1, 0, -1):
            sizes[parents[i]] += sizes[i]
        return sizes

    @cached_property
    def parents(self) -> array:
        """Each node's parent (-1 for the root)."""
        parents = array("l", [-1]) * self.size
        open_nodes: list[list[int]] = []  # [index, children still expected]
        for i, children in enumerate(self.ST):
            if open_nodes:
                top = open_nodes[-1]
                parents[i] = top[0]
                top[1] -= 1
                if top[1] == 0:
                    open_nodes.pop()
            if children:
                open_nodes.append([i, children])
        return parents

    def subtree(self, i: int) -> range:
        return range(i, i + self.subtree_sizes[i])

    def texts(self, nodes: Any = None) -> list[str]:
        """The content of the text nodes (in ``nodes``, default all), in document order."""
        text_label = self._label_index(TEXT)
        if text_label is None:
            return []
        tm, cm, cl = self.TM, self.CM, self.CL
        indexes = range(self.size) if nodes is None else nodes
        return [cl[cm[i] - 1] for i in indexes if tm[i] == text_label and cm[i]]

    def attribute_values(self, tag: str, name: str, nodes: Any = None) -> list[tuple[int, str]]:
        """(node, value) of attribute ``name`` on ``tag`` elements (links: ``a``/``href``)."""
        label = self._label_index(tag)
        if label is None:
            return []
        found = []
        for i in (range(self.size) if nodes is None else nodes):
            if self.TM[i] == label and self.AM[i]:
                for key, value in self.AL[self.AM[i] - 1]:
                    if key == name:
                        found.append((i, value))
        return found

    def _label_index(self, label: str) -> int | None:
        labels = self._cache.get("labels")
        if labels is None:
            labels = self._cache["labels"] = {t: n for n, t in enumerate(self.TL)}
        return labels.get(label)

    # -- back to a tree -----------------------------------------------------------------

    def to_tree(self) -> tuple[Any, list[Any]]:
        """An lxml tree of the digest and, per node, its element (text nodes: None). The
        digest of a page just encoded keeps the tree it was made from; otherwise the decoded
        markup is parsed by lxml (C) and matched node by node, or built node by node."""
        tree = self._cache.get("tree")
        if tree is None:
            tree = self._cache["tree"] = _reparse(self) or _build(self)
        return tree


def _make_parser(kind: str, encoding: str | None = None) -> Any:
    if kind == "xml":
        return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=True,
                               remove_blank_text=False, encoding=encoding)
    return html.HTMLParser(no_network=True, huge_tree=True, default_doctype=False, encoding="utf-8")


def parse(data: bytes | str, kind: str = "html", content_type: str | None = None) -> Any:
    """The lxml tree ``encode`` works from (the reference for round trips): the root element,
    or None for an empty or unparseable document. HTML bytes are decoded as Scrapy decodes
    them (``content_type``'s charset, BOM, meta, sniffing) and always parsed as that text."""
    if kind == "xml":
        raw, encoding = (data.encode("utf-8"), "utf-8") if isinstance(data, str) else (data, None)
        if not raw.strip():
            return None
        try:
            return etree.fromstring(raw, _make_parser("xml", encoding))
        except etree.XMLSyntaxError as exc:
            raise DigestError(f"not well-formed XML: line {exc.lineno}, column {exc.offset}: {exc.msg}") from None
    if isinstance(data, bytes):
        from w3lib.encoding import html_to_unicode

        try:
            data = html_to_unicode(content_type, data)[1]
        except (LookupError, ValueError):
            data = data.decode("utf-8", "replace")
    if not data.strip():
        return None
    try:
        return etree.fromstring(data.encode("utf-8", "replace"), _make_parser("html"))
    except (ValueError, etree.ParserError, etree.XMLSyntaxError):
        return None


def encode(data: bytes | str, kind: str = "html", content_type: str | None = None) -> PageDigest:
    """The Page Digest of a document (``kind``: ``html`` or ``xml``). An empty or unparseable
    HTML document gives an empty digest (no nodes)."""
    root = parse(data, kind, content_type)
    if root is None:
        return PageDigest(array("L"), array("L"), array("L"), array("L"), [], [], [], kind)
    doctype = root.getroottree().docinfo.doctype or ""
    return from_tree(root, kind, doctype)


def from_tree(root: Any, kind: str = "html", doctype: str = "") -> PageDigest:
    """The Page Digest of an lxml element tree."""
    st, tm, am, cm = array("L"), array("L"), array("L"), array("L")
    labels: dict[str, int] = {}
    attr_lists: dict[tuple, int] = {}
    contents: list[str] = []
    st_append, tm_append, am_append, cm_append = st.append, tm.append, am.append, cm.append
    comment_tag, pi_tag = etree.Comment, etree.ProcessingInstruction
    stack: list[tuple[Any, int]] = [(root, -1)]
    elements: list[Any] = []
    while stack:
        item, parent = stack.pop()
        index = len(st)
        if parent >= 0:
            st[parent] += 1
        if isinstance(item, str):  # a text node
            elements.append(None)
            st_append(0)
            tm_append(labels.setdefault(TEXT, len(labels)))
            am_append(0)
            contents.append(_clean(item))
            cm_append(len(contents))
            continue
        elements.append(item)
        tag = item.tag
        if tag is comment_tag:
            label, content, attrs = COMMENT, item.text or "", None
        elif tag is pi_tag:
            label, content, attrs = PI, f"{item.target} {item.text or ''}".rstrip(), None
        else:
            label, content = (tag if isinstance(tag, str) else str(tag)), None
            attrs = tuple((str(k), _clean(v)) for k, v in item.attrib.items()) if item.attrib else None
        st_append(0)
        tm_append(labels.setdefault(label, len(labels)))
        am_append(attr_lists.setdefault(attrs, len(attr_lists) + 1) if attrs else 0)
        if content is not None:
            contents.append(_clean(content))
            cm_append(len(contents))
        else:
            cm_append(0)
        if label in (COMMENT, PI):
            continue
        for child in reversed(item):
            if child.tail:
                stack.append((child.tail, index))
            stack.append((child, index))
        if item.text:
            stack.append((item.text, index))
    digest = PageDigest(st, tm, am, cm, list(labels), list(attr_lists), contents, kind, doctype)
    digest._cache["tree"] = (root, elements)  # the tree it was made from: location masks need no rebuild
    return digest


def _clean(text: str) -> str:
    """Text as the digest keeps it: NUL (the binary format's separator) becomes U+FFFD."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def _reparse(digest: PageDigest) -> tuple[Any, list[Any]] | None:
    """The tree by parsing the decoded markup, if it matches the digest node for node."""
    if digest.kind != "html" or not digest.size:
        return None
    root = parse(decode(digest))
    if root is None:
        return None
    elements: list[Any] = [None] * digest.size
    text = digest._label_index(TEXT)
    nodes = root.iter()
    for i, label_index in enumerate(digest.TM):
        if label_index == text:
            continue
        el = next(nodes, None)
        if el is None:
            return None
        label = digest.TL[label_index]
        tag = el.tag
        if not (tag == label or (label == COMMENT and tag is etree.Comment)
                or (label == PI and tag is etree.ProcessingInstruction)):
            return None
        elements[i] = el
    return (root, elements) if next(nodes, None) is None else None


def _build(digest: PageDigest) -> tuple[Any, list[Any]]:
    elements: list[Any] = [None] * digest.size
    if not digest.size:
        return None, elements
    root = None
    open_nodes: list[list] = []  # [element, children still expected]
    for i in range(digest.size):
        label = digest.label(i)
        parent = open_nodes[-1][0] if open_nodes else None
        if label == TEXT:
            text = digest.content(i) or ""
            if parent is None:
                raise DigestError("a text node cannot be the root")
            if len(parent):
                last = parent[-1]
                last.tail = (last.tail or "") + text
            else:
                parent.text = (parent.text or "") + text
        else:
            if label == COMMENT:
                node = etree.Comment(digest.content(i) or "")
            elif label == PI:
                target, _, data = (digest.content(i) or "").partition(" ")
                node = etree.ProcessingInstruction(target, data or None)
            else:
                node = etree.Element(label, dict(digest.attrs(i))) if digest.kind == "xml" else \
                    html.Element(label, dict(digest.attrs(i)))
            if parent is None:
                root = node
            else:
                parent.append(node)
            elements[i] = node
        if open_nodes:
            open_nodes[-1][1] -= 1
        if digest.ST[i]:
            if elements[i] is None:
                raise DigestError(f"node {i} ({label}) cannot have children")
            open_nodes.append([elements[i], digest.ST[i]])
        while open_nodes and open_nodes[-1][1] == 0:
            open_nodes.pop()
    return root, elements


_VOID = frozenset("area base br col embed hr img input link meta param source track wbr basefont bgsound frame "
                  "keygen isindex".split())
_RAW = frozenset(["script", "style", "xmp", "iframe", "noembed", "noframes", "plaintext"])


def _escape_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escape_attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;")


def decode(digest: PageDigest) -> str:
    """Markup that parses (with :func:`parse`) to the tree the digest was made from."""
    if not digest.size:
        return ""
    if digest.kind == "xml":
        root, _ = _build(digest)
        return etree.tostring(root, encoding="unicode")
    # HTML, written straight from the arrays (lxml's serializer rewrites URL attributes)
    out: list[str] = [digest.doctype + "\n"] if digest.doctype else []
    open_tags: list[list] = []  # [tag, children still expected]
    for i in range(digest.size):
        label = digest.label(i)
        raw = bool(open_tags) and open_tags[-1][0] in _RAW
        if label == TEXT:
            text = digest.content(i) or ""
            out.append(text if raw else _escape_text(text))
        elif label == COMMENT:
            out.append(f"<!--{digest.content(i) or ''}-->")
        elif label == PI:
            out.append(f"<?{digest.content(i) or ''}>")
        else:
            attrs = "".join(f' {k}="{_escape_attr(v)}"' for k, v in digest.attrs(i))
            out.append(f"<{label}{attrs}>")
        if open_tags:
            open_tags[-1][1] -= 1
        if digest.ST[i]:
            open_tags.append([label, digest.ST[i]])
        elif label not in SPECIAL and label not in _VOID:
            out.append(f"</{label}>")
        while open_tags and open_tags[-1][1] == 0:
            tag = open_tags.pop()[0]
            if tag not in _VOID:
                out.append(f"</{tag}>")
    return "".join(out)


def signature(root: Any) -> list[tuple]:
    """A tree as a flat list (label, attributes, text, number of children), in document
    order, without recursion: two trees are the same when their signatures are equal."""
    if root is None:
        return []
    digest = from_tree(root)
    return [(digest.label(i), digest.attrs(i), digest.content(i), digest.ST[i]) for i in range(digest.size)]
