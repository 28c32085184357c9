"""The filtering processor's steps 1-4 (seed 003 section 6.2): the text of a page without its
markup, ready for keyword matching, and as it reads, for the summaries that quote it.

lxml's HTML parser (no network, no entities from outside) builds the tree; scripts, styles
and templates are left out. The text of links is not matched, as the seed removes a page's
links before matching, but a summary quotes the page as it reads, link text included. So the
text comes twice (:class:`PageText`), of the same length: in the one matched, each character
of link text but spaces is :data:`MASK`, so a position in one is the same position in the
other. Inline elements (``<b>``, ``<a>``, ``<span>``...) join their text to their
neighbours' as the page shows it ("Java<b>Script</b>" is one word; "<a>here</a>," leaves
no " ," gap); any other element separates words. Bytes in any encoding: lxml sniffs it, and
undecodable bytes are replaced, never raised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lxml import etree

_DROP = ("script", "style", "noscript", "template")
_INLINE = (
    "a", "abbr", "acronym", "b", "bdi", "bdo", "big", "cite", "code", "data", "del", "dfn", "em", "font",
    "i", "ins", "kbd", "mark", "nobr", "q", "s", "samp", "small", "span", "strike", "strong", "sub", "sup",
    "time", "tt", "u", "var", "wbr",
)
# Stands for each character of link text in the matched text: neither a word character nor
# whitespace (so words and spaces stay where they are), and in no keyword.
MASK = "\ufffc"
# Where a link's text begins and ends while the text is gathered: noncharacters, which Unicode
# keeps for a program's own use (a page that has them anyway only confuses its own masking).
_OPEN, _CLOSE = "\ufdd0", "\ufdd1"
_MARKS = re.compile(f"([{_OPEN}{_CLOSE}])")
# lxml's own parser: lxml.html's would look up a Python class for every element touched
_PARSER = etree.HTMLParser(no_network=True, remove_comments=True, remove_pis=True)


@dataclass(frozen=True)
class PageText:
    """A page's visible text as it reads (``reading``), and the same text with its links'
    text masked (``matched``, what keywords are matched in); whitespace collapsed in both,
    but for a space doubled where a link's text begins or ends."""

    reading: str
    matched: str

    def __bool__(self) -> bool:
        return bool(self.reading)


def page_texts(body: bytes | str, encoding: str | None = None) -> PageText:
    """The visible text of an HTML page, as it reads and as it is matched."""
    if isinstance(body, bytes) and encoding:
        body = body.decode(encoding, errors="replace")
    if not body or not body.strip():
        return PageText("", "")
    try:
        root = etree.fromstring(body, parser=_PARSER)
    except (etree.ParserError, etree.XMLSyntaxError, ValueError):
        return PageText("", "")
    if root is None:
        return PageText("", "")
    etree.strip_elements(root, *_DROP, with_tail=False)
    for link in root.iter("a"):
        link.text = _OPEN + (link.text or "")
        link.tail = _CLOSE + (link.tail or "")
    etree.strip_tags(root, *_INLINE)  # their text joins their neighbours'; other elements' is apart
    marked = " ".join(" ".join(root.itertext()).split())
    if _OPEN not in marked:
        return PageText(marked, marked)
    reading, matched, links = [], [], 0
    for part in _MARKS.split(marked):
        if part == _OPEN:
            links += 1
        elif part == _CLOSE:
            links = max(links - 1, 0)
        else:
            reading.append(part)
            matched.append(_mask(part) if links else part)
    return PageText("".join(reading), "".join(matched))


def page_text(body: bytes | str, encoding: str | None = None) -> str:
    """Visible text of an HTML page, links excluded, whitespace collapsed."""
    return " ".join(page_texts(body, encoding).matched.replace(MASK, " ").split())


def _mask(text: str) -> str:
    return "".join(c if c.isspace() else MASK for c in text)
