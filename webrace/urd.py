"""URD (Unified Resource Description): parse, validate, serialise.

A URD is a standing request to crawl a site on behalf of one owner (seed 000 section 2.2,
seed 003 Table 4). Files are validated against ``schemas/urd.xsd`` with xmlschema and then
checked for what a schema cannot say (a URL we can actually fetch, ids unique across the
files of one ``add``). Any error refuses the whole batch: nothing half-stored.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import xmlschema
from lxml import etree

from webrace.urls import BadURL, normalize
from webrace.xmlutil import safe_parser, schema


@dataclass(frozen=True)
class Keyword:
    key: str
    weight: Decimal = Decimal(1)


@dataclass(frozen=True)
class Urd:
    id: str
    owner: str
    url: str  # canonical form (webrace.urls.normalize)
    timing: int  # re-crawl interval, milliseconds
    depth: int  # 0 = only the page at url
    lastcheck: int | None = None  # epoch milliseconds of the last completed crawl
    scope: str = "host"
    keywords: tuple[Keyword, ...] = ()
    threshold: Decimal | None = None  # relevance an ACI needs (None: any relevance above 0)
    urgent: bool = False
    protocol: str = "http"
    method: str = "pull"
    processtype: str = "filter"
    source: str = field(default="", compare=False)  # file it came from, for messages
    due_at: int | None = field(default=None, compare=False)  # set by `scrapy urd due`

    @property
    def next_due(self) -> int:
        """Epoch ms at which the URD is next due (0 when never checked: due now)."""
        if self.due_at is not None:
            return self.due_at
        return 0 if self.lastcheck is None else self.lastcheck + self.timing

    def is_due(self, now_ms: int | None = None) -> bool:
        return self.next_due <= (now_ms if now_ms is not None else now_millis())

    def checked(self, at_ms: int) -> Urd:
        return replace(self, lastcheck=at_ms, due_at=None)

    def to_element(self) -> etree._Element:
        root = etree.Element("urd", id=self.id, owner=self.owner)
        uri = etree.SubElement(root, "uri", timing=str(self.timing))
        if self.lastcheck is not None:
            uri.set("lastcheck", str(self.lastcheck))
        uri.text = self.url
        if (self.protocol, self.method, self.processtype) != ("http", "pull", "filter"):
            etree.SubElement(
                root, "type", protocol=self.protocol, method=self.method, processtype=self.processtype
            )
        if self.keywords or self.threshold is not None:
            kws = etree.SubElement(root, "keywords")
            if self.threshold is not None:
                kws.set("threshold", str(self.threshold))
            for kw in self.keywords:
                etree.SubElement(kws, "keyword", key=kw.key, weight=str(kw.weight))
        etree.SubElement(root, "depth", level=str(self.depth))
        etree.SubElement(root, "scope").text = self.scope
        etree.SubElement(root, "urgency", urgent="1" if self.urgent else "0")
        return root

    def to_xml(self) -> str:
        return etree.tostring(self.to_element(), encoding="unicode", pretty_print=True)

    @classmethod
    def from_xml(cls, text: str | bytes) -> Urd:
        """Parse one stored ``<urd>`` (already validated when it was added)."""
        data = text.encode() if isinstance(text, str) else text
        return _from_element(etree.fromstring(data, safe_parser()), source="")


class UrdError(ValueError):
    """One or more URD files are invalid. ``problems`` holds ``file:line: message`` lines."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def now_millis() -> int:
    return int(time.time() * 1000)


def load_files(paths: Iterable[str | Path]) -> list[Urd]:
    """Parse and validate every file; return all their URDs or raise :class:`UrdError`
    listing every problem found (file, line, what is wrong)."""
    urds: list[Urd] = []
    problems: list[str] = []
    for path in paths:
        try:
            urds.extend(load_file(path))
        except UrdError as exc:
            problems.extend(exc.problems)
    seen: dict[str, Urd] = {}
    for urd in urds:
        if urd.id in seen:
            problems.append(f"{urd.source}: URD id {urd.id!r} is also defined in {seen[urd.id].source}")
        seen[urd.id] = urd
    if problems:
        raise UrdError(problems)
    return urds


def load_file(path: str | Path) -> list[Urd]:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UrdError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    return parse(data, source=str(path))


def parse(data: bytes, source: str = "<string>") -> list[Urd]:
    """Validate ``data`` (one ``<urd>`` or a ``<urds>`` list) and return its URDs."""
    try:
        tree = etree.fromstring(data, safe_parser()).getroottree()
    except etree.XMLSyntaxError as exc:
        line = exc.lineno or (exc.position[0] if exc.position else 0)
        raise UrdError([f"{source}:{line}: not well-formed XML: {exc.msg}"]) from None
    if tree.docinfo.doctype:
        raise UrdError([f"{source}:1: DOCTYPE declarations (and so entities) are not allowed in URD files"])
    problems = []
    for err in schema("urd").iter_errors(tree):
        line, path = _located(err)
        reason = err.reason or err.message
        if path and path.endswith("/uri") and "pattern" in reason:
            reason = f"not an absolute http:// or https:// URL: {err.obj!r}"
        where = f" (at {path})" if path else ""
        problems.append(f"{source}:{line}: {reason}{where}")
    if problems:
        raise UrdError(problems)
    root = tree.getroot()
    elements = [root] if root.tag == "urd" else list(root.iterchildren("urd"))
    urds = []
    for element in elements:
        try:
            urds.append(_from_element(element, source))
        except BadURL as exc:
            line = element.find("uri").sourceline
            raise UrdError([f"{source}:{line}: URD {element.get('id')!r}: cannot crawl this URL: {exc}"]) from None
    return urds


def _located(err: xmlschema.XMLSchemaValidationError) -> tuple[int | str, str | None]:
    """The line and path of what is wrong. xmlschema reports a child the content model
    refuses (misspelt, repeated, not allowed there) at its parent, the ``<urd>``: point at
    the child itself."""
    elem = err.elem
    if isinstance(err, xmlschema.XMLSchemaChildrenValidationError) and elem is not None and err.index < len(elem):
        child = elem[err.index]
        if isinstance(child.tag, str) and child.sourceline is not None:
            return child.sourceline, f"{err.path}/{etree.QName(child).localname}" if err.path else None
    return (err.sourceline if err.sourceline is not None else "?"), err.path


def _from_element(element: etree._Element, source: str) -> Urd:
    uri = element.find("uri")
    url = _apply_port(uri.text.strip(), uri.get("port"))
    type_ = element.find("type")
    scope = element.find("scope")
    urgency = element.find("urgency")
    keywords = tuple(
        Keyword(kw.get("key"), Decimal(kw.get("weight", "1")))
        for kw in element.iterfind("keywords/keyword")
    )
    threshold = element.find("keywords")
    threshold = threshold.get("threshold") if threshold is not None else None
    line = element.sourceline
    return Urd(
        id=element.get("id"),
        owner=element.get("owner"),
        url=normalize(url),
        timing=int(uri.get("timing")),
        lastcheck=int(uri.get("lastcheck")) if uri.get("lastcheck") is not None else None,
        depth=int(element.find("depth").get("level")),
        scope=scope.text.strip() if scope is not None else "host",
        keywords=keywords,
        threshold=Decimal(threshold) if threshold is not None else None,
        urgent=urgency is not None and urgency.get("urgent") == "1",
        protocol=type_.get("protocol", "http") if type_ is not None else "http",
        method=type_.get("method", "pull") if type_ is not None else "pull",
        processtype=type_.get("processtype", "filter") if type_ is not None else "filter",
        source=f"{source}:{line}" if source else "",
    )


def _apply_port(url: str, port: str | None) -> str:
    """The seed's ``port`` attribute applies only when the URL itself names no port."""
    if not port:
        return url
    parts = urlsplit(url)
    if parts.port is not None or not parts.hostname:
        return url
    return urlunsplit((parts.scheme, f"{parts.netloc}:{int(port)}", parts.path, parts.query, parts.fragment))


def to_document(urds: Iterable[Urd]) -> str:
    """A ``<urds>`` document holding ``urds`` (what ``scrapy urd export`` would print)."""
    root = etree.Element("urds")
    for urd in urds:
        root.append(urd.to_element())
    return etree.tostring(root, encoding="unicode", pretty_print=True)
