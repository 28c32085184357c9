"""The filtering processor's steps 1-4 (seed 003 section 6.2): the text of a page without its
markup and its links, ready for keyword matching.

lxml's HTML parser (no network, no entities from outside) builds the tree; scripts, styles
and the text of links are left out, as the seed removes a page's links before matching.
Bytes in any encoding: lxml sniffs it, and undecodable bytes are replaced, never raised.
"""

from __future__ import annotations

from lxml import etree, html

_DROP = ("script", "style", "noscript", "template", "a")
_PARSER = html.HTMLParser(no_network=True, remove_comments=True, remove_pis=True)


def page_text(body: bytes | str, encoding: str | None = None) -> str:
    """Visible text of an HTML page, links excluded, whitespace collapsed."""
    if isinstance(body, bytes) and encoding:
        body = body.decode(encoding, errors="replace")
    if not body or not (body.strip() if isinstance(body, str) else body.strip()):
        return ""
    try:
        root = html.document_fromstring(body, parser=_PARSER)
    except (etree.ParserError, ValueError):
        return ""
    etree.strip_elements(root, *_DROP, with_tail=False)
    return " ".join(" ".join(root.itertext()).split())
