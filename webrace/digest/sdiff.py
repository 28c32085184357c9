"""Sdiff (seed 004, Algorithm 5, "Smart Difference Compare") and location masks.

Two digests are walked together in depth-first order. Where both nodes have the same label
and the same number of children the walk goes on node by node, comparing the contents of
leaves and the attributes of elements; where they differ the whole subtrees are marked as
changed in structure and skipped on both sides (the pair is kept, for an edit script by a
general tree diff on just those subtrees). The result is the *annotation array*: one code
per node of the new digest, with a ``BELOW`` flag on every ancestor of a change, so a
sentinel reads "did anything change in this region" from one position.

``facet`` restricts what counts: ``all``, ``structure``, ``content``, ``attributes``,
``links`` (``a@href``) or ``images`` (``img@src``). In the last four a structurally changed
subtree is marked only when that facet differs inside it. A location ``mask`` (one byte per
node of the new digest, from :func:`mask`) keeps only the nodes of interest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from webrace.digest.core import TEXT, DigestError, PageDigest

UNCHANGED, CONTENT, ATTRIBUTES, STRUCTURE, BELOW = 0, 1, 2, 4, 8
FACETS = ("all", "structure", "content", "attributes", "links", "images")
_LINKS = {"links": ("a", "href"), "images": ("img", "src")}


@dataclass
class Annotation:
    old: PageDigest
    new: PageDigest
    codes: bytearray  # per node of the new digest: CONTENT | ATTRIBUTES | STRUCTURE, and BELOW
    pairs: list[tuple[int, int]] = field(default_factory=list)  # (old, new) roots of structural changes
    facet: str = "all"

    @property
    def changed(self) -> bool:
        return any(self.codes)

    def nodes(self, flags: int = CONTENT | ATTRIBUTES | STRUCTURE) -> list[int]:
        """Nodes of the new digest marked with any of ``flags``."""
        return [i for i, code in enumerate(self.codes) if code & flags]

    def changed_in(self, node: int) -> bool:
        """Whether ``node`` or anything below it changed."""
        return bool(self.codes[node])


def sdiff(old: PageDigest, new: PageDigest, facet: str = "all", mask: Sequence[int] | None = None) -> Annotation:
    if facet not in FACETS:
        raise ValueError(f"unknown facet {facet!r}: expected one of {', '.join(FACETS)}")
    codes = bytearray(new.size)
    ann = Annotation(old, new, codes, facet=facet)
    if not old.size or not new.size:
        if new.size and old.size != new.size:
            ann.pairs.append((0, 0))
            _mark_subtree(codes, new, 0, STRUCTURE, mask)
        _propagate(new, codes)
        return ann
    want_structure = facet in ("all", "structure")
    want_content = facet in ("all", "content")
    want_attrs = facet in ("all", "attributes")
    link = _LINKS.get(facet)
    ost, nst, otm, ntm, otl, ntl = old.ST, new.ST, old.TM, new.TM, old.TL, new.TL
    s = d = 0
    osize, nsize = old.size, new.size
    while s < osize and d < nsize:
        same_label = otl[otm[s]] == ntl[ntm[d]]
        if ost[s] != nst[d] or not same_label:
            ann.pairs.append((s, d))
            flag = _subtree_change(old, new, s, d, facet)
            if flag and (want_structure or facet != "all"):
                if mask is None or mask[d]:
                    codes[d] |= flag
            s += old.subtree_sizes[s]
            d += new.subtree_sizes[d]
            continue
        if mask is None or mask[d]:
            if want_content and nst[d] == 0 and old.CM[s] != 0 and old.content(s) != new.content(d):
                codes[d] |= CONTENT
            if (want_attrs or link) and old.attrs(s) != new.attrs(d):
                if want_attrs or (ntl[ntm[d]] == link[0]
                                  and _attr(old.attrs(s), link[1]) != _attr(new.attrs(d), link[1])):
                    codes[d] |= ATTRIBUTES
        s += 1
        d += 1
    _propagate(new, codes)
    return ann


def _attr(attrs: tuple[tuple[str, str], ...], name: str) -> str | None:
    for key, value in attrs:
        if key == name:
            return value
    return None


def _subtree_change(old: PageDigest, new: PageDigest, s: int, d: int, facet: str) -> int:
    """What a structurally changed pair of subtrees means for ``facet``: STRUCTURE for
    ``all``/``structure``; otherwise the facet's flag only if that facet differs inside."""
    if facet in ("all", "structure"):
        return STRUCTURE
    orange, nrange = old.subtree(s), new.subtree(d)
    if facet == "content":
        return CONTENT if old.texts(orange) != new.texts(nrange) else 0
    if facet == "attributes":
        return ATTRIBUTES if [old.attrs(i) for i in orange if old.AM[i]] != \
            [new.attrs(i) for i in nrange if new.AM[i]] else 0
    tag, name = _LINKS[facet]
    before = [v for _, v in old.attribute_values(tag, name, orange)]
    after = [v for _, v in new.attribute_values(tag, name, nrange)]
    return ATTRIBUTES if before != after else 0


def _mark_subtree(codes: bytearray, digest: PageDigest, root: int, flag: int, mask: Sequence[int] | None) -> None:
    for i in digest.subtree(root):
        if mask is None or mask[i]:
            codes[i] |= flag


def _propagate(digest: PageDigest, codes: bytearray) -> None:
    """Flag every ancestor of a change with BELOW (each ancestor once)."""
    parents = digest.parents if any(codes) else None
    if parents is None:
        return
    for i in range(len(codes)):
        if codes[i] & (CONTENT | ATTRIBUTES | STRUCTURE):
            p = parents[i]
            while p >= 0 and not codes[p] & BELOW:
                codes[p] |= BELOW
                p = parents[p]


# -- location masks ----------------------------------------------------------------------


def mask(digest: PageDigest, where: str | None, tree: Any = None) -> bytearray | None:
    """One byte per node: 1 inside the region ``where`` selects (``css:SELECTOR`` or
    ``xpath:EXPR``, the matched elements and everything below them), else 0. None for the
    whole page. ``tree`` is ``digest.to_tree()`` when the caller already has it."""
    if not where:
        return None
    root, elements = tree if tree is not None else digest.to_tree()
    marks = bytearray(digest.size)
    if root is None:
        return marks
    found = select(root, where)
    if not found:
        return marks
    index = digest._cache.get("element_index")
    if index is None or index[0] is not elements:
        positions = {id(el): i for i, el in enumerate(elements) if el is not None}
        index = digest._cache["element_index"] = (elements, positions)
    positions = index[1]
    sizes = digest.subtree_sizes
    for el in found:
        i = positions.get(id(el))
        if i is not None and not marks[i]:
            marks[i:i + sizes[i]] = b"\x01" * sizes[i]  # the element and everything below it
    return marks


def select(root: Any, where: str) -> list[Any]:
    """The elements ``css:...`` or ``xpath:...`` selects under ``root``."""
    kind, _, expression = where.partition(":")
    if kind == "css":
        from cssselect import HTMLTranslator

        xpath = HTMLTranslator().css_to_xpath(expression)
    elif kind == "xpath":
        xpath = expression
    else:
        raise ValueError(f"a location is css:SELECTOR or xpath:EXPRESSION, not {where!r}")
    found = root.getroottree().xpath(xpath) if hasattr(root, "getroottree") else root.xpath(xpath)
    if not isinstance(found, list):
        raise ValueError(f"{where!r} selects a value, not elements")
    return [el for el in found if hasattr(el, "tag")]


MAX_CSS_DEPTH = 64  # nested brackets plus combinators: cssselect recurses per each


def _css_depth(expression: str) -> int:
    """How deep cssselect would recurse on ``expression``, bounded from above: the deepest
    bracket nesting plus the number of combinators (whitespace, ``>``, ``+``, ``~``). Checked
    before parsing, so the answer does not depend on the interpreter's recursion limit."""
    depth = deepest = combinators = 0
    previous = ""
    for char in expression.strip():
        if char in "([":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]":
            depth -= 1
        elif char in ">+~" or (char.isspace() and not previous.isspace()):
            combinators += 1
        previous = char
    return deepest + combinators


def check_location(where: str) -> None:
    """Raise ValueError with a clear message when ``where`` is not a usable selector."""
    from lxml import etree

    kind, _, expression = where.partition(":")
    if kind not in ("css", "xpath") or not expression.strip():
        raise ValueError(f"a location is css:SELECTOR or xpath:EXPRESSION, not {where!r}")
    if kind == "css":
        from cssselect import HTMLTranslator
        from cssselect.parser import SelectorError

        if _css_depth(expression) > MAX_CSS_DEPTH:
            raise ValueError(f"not a CSS selector: {expression[:80]!r}: nested too deeply") from None
        try:
            HTMLTranslator().css_to_xpath(expression)
        except SelectorError as exc:
            raise ValueError(f"not a CSS selector: {expression[:80]!r}: {exc}") from None
        except RecursionError:  # cssselect recurses per nested :is() and per combinator
            raise ValueError(f"not a CSS selector: {expression[:80]!r}: nested too deeply") from None
    else:
        try:
            etree.XPath(expression)
        except etree.XPathSyntaxError as exc:
            raise ValueError(f"not an XPath expression: {expression[:80]!r}: {exc}") from None


# -- edit scripts ------------------------------------------------------------------------


def edit_script(annotation: Annotation) -> list[tuple[int, int, list[Any]]]:
    """For each structurally changed pair of subtrees: (old node, new node, the actions of
    xmldiff's tree diff turning the old subtree into the new one)."""
    from xmldiff import main as xmldiff

    if not annotation.pairs:
        return []
    old_root, old_elements = annotation.old.to_tree()
    new_root, new_elements = annotation.new.to_tree()
    script = []
    for s, d in annotation.pairs:
        before = _as_element(annotation.old, old_elements, s)
        after = _as_element(annotation.new, new_elements, d)
        script.append((s, d, xmldiff.diff_trees(before, after)))
    return script


def _as_element(digest: PageDigest, elements: list[Any], i: int) -> Any:
    from copy import deepcopy

    from lxml import etree

    el = elements[i] if i < len(elements) else None
    if el is None:  # a text node: wrapped, so a tree diff can compare it
        wrapper = etree.Element("text")
        wrapper.text = digest.content(i) if digest.label(i) == TEXT else ""
        return wrapper
    copy = deepcopy(el)
    copy.tail = None
    return copy


__all__ = ["ATTRIBUTES", "BELOW", "CONTENT", "STRUCTURE", "UNCHANGED", "Annotation", "DigestError", "check_location",
           "edit_script", "mask", "sdiff", "select"]
