"""An owner's ACIs as an Atom 1.0 feed (RFC 4287), newest first."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from lxml import etree

from webrace import __version__
from webrace.records.aci import Aci, _xml_safe

ATOM = "http://www.w3.org/2005/Atom"
WEBRACE = "urn:webrace:aci"


def rfc3339(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def atom_feed(owner: str, acis: Sequence[Aci], link_base: str | None = None, now_ms: int | None = None) -> bytes:
    """The feed for ``owner``. With ``link_base`` (the PIR server's address) each entry also
    links to the stored version (``rel="related"``) and the feed to itself."""
    feed = etree.Element(f"{{{ATOM}}}feed", nsmap={None: ATOM, "webrace": WEBRACE})

    def sub(parent: etree._Element, name: str, text: str | None = None, **attrs: str) -> etree._Element:
        el = etree.SubElement(parent, f"{{{ATOM}}}{name}", **attrs)
        if text is not None:
            el.text = _xml_safe(text)
        return el

    sub(feed, "id", f"urn:webrace:owner:{owner}")
    sub(feed, "title", f"WebRACE: what is new for {owner}")
    updated = max((a.updatetime for a in acis), default=now_ms or 0)
    sub(feed, "updated", rfc3339(updated))
    author = sub(feed, "author")
    sub(author, "name", "WebRACE")
    sub(feed, "generator", "WebRACE", version=__version__)
    if link_base:
        sub(feed, "link", rel="self", href=f"{link_base}/owner/{owner}/feed.atom")
        sub(feed, "link", rel="alternate", href=f"{link_base}/owner/{owner}")
    for aci in acis:
        entry = sub(feed, "entry")
        sub(entry, "id", f"urn:webrace:aci:{aci.id}")
        sub(entry, "title", aci.title or aci.uri)
        sub(entry, "updated", rfc3339(aci.updatetime))
        sub(entry, "link", rel="alternate", href=aci.uri)
        if link_base:
            sub(entry, "link", rel="related", href=f"{link_base}/aci/{aci.id}", title="stored version")
        sub(entry, "summary", aci.summary)
        for name, value in (("relevance", f"{aci.relevance:g}"), ("urgent", "1" if aci.urgent else "0"),
                            ("version", str(aci.version)), ("docbase", aci.docbase)):
            etree.SubElement(entry, f"{{{WEBRACE}}}{name}").text = value
    return etree.tostring(feed, xml_declaration=True, encoding="utf-8", pretty_print=True)
