"""ACIs (seed 003 Table 6): what one owner is told about one new version of one page."""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from lxml import etree

from webrace.xmlutil import safe_parser


@dataclass(frozen=True)
class Aci:
    owner: str
    uri: str
    relevance: float
    updatetime: int  # epoch ms of the fetch
    filesize: int
    version: int
    docbase: str  # SHA-256 of the stored body
    summary: str
    urgent: bool = False
    expired: bool = False
    format: str = "html"
    extension: str = "html"
    title: str = ""  # the page's <title>, for feeds and the PIR page
    # stable per owner, page and version: a field, so feed exports and `aci list` carry it
    id: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        digest = hashlib.sha1(f"{self.owner}\n{self.uri}\n{self.docbase}".encode()).hexdigest()[:16]
        object.__setattr__(self, "id", digest)

    def to_xml(self) -> str:
        root = etree.Element("aci", id=self.id, owner=self.owner, extension=self.extension, format=self.format,
                             relevance=f"{self.relevance:g}", updatetime=str(self.updatetime),
                             filesize=str(self.filesize), version=str(self.version))
        etree.SubElement(root, "uri").text = self.uri
        etree.SubElement(root, "urgency", urgent="1" if self.urgent else "0")
        etree.SubElement(root, "docbase").text = self.docbase
        etree.SubElement(root, "expired", expir="true" if self.expired else "false")
        etree.SubElement(root, "summary").text = _xml_safe(self.summary)
        if self.title:
            etree.SubElement(root, "title").text = _xml_safe(self.title)
        return etree.tostring(root, encoding="unicode")

    @classmethod
    def from_xml(cls, text: str) -> Aci:
        root = etree.fromstring(text.encode(), safe_parser())
        return cls(
            owner=root.get("owner"), uri=root.findtext("uri"), relevance=float(root.get("relevance")),
            updatetime=int(root.get("updatetime")), filesize=int(root.get("filesize")),
            version=int(root.get("version")), docbase=root.findtext("docbase"),
            summary=root.findtext("summary") or "", urgent=root.find("urgency").get("urgent") == "1",
            expired=root.find("expired").get("expir") == "true", format=root.get("format"),
            extension=root.get("extension"), title=root.findtext("title") or "",
        )


def _xml_safe(text: str) -> str:
    """Page text may hold characters XML 1.0 cannot (control characters): drop them (one
    regular expression: this runs for every ACI of every owner of a page)."""
    return _NOT_XML.sub("", text)


_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd]")


def extension_of(url: str, media_type: str) -> tuple[str, str]:
    """(extension, format) of a page, from its URL and media type: ``("html", "html")``."""
    ext = posixpath.splitext(urlsplit(url).path)[1].lstrip(".").lower()
    fmt = {"text/html": "html", "application/xhtml+xml": "xhtml", "text/plain": "text",
           "application/xml": "xml", "text/xml": "xml"}.get(media_type, media_type.split("/")[-1] or "html")
    return ext or fmt, fmt
