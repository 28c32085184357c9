"""URD (Unified Resource Description): parse, validate, serialise.

A URD is a standing request to crawl a site on behalf of one owner (seed 000 section 2.2,
seed 003 Table 4). Files are validated against ``schemas/urd.xsd`` with xmlschema and then
checked for what a schema cannot say (a URL we can actually fetch, with no credentials in
it, ids unique across the files of one ``add``). Any error refuses the whole batch: nothing
half-stored. Files are read one ``<urd>`` at a time, so a large one never sits in memory
whole, and refused unread when over a size limit.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import urlsplit, urlunsplit

from lxml import etree

from webrace.names import canonical_owner
from webrace.urls import BadURL, normalize
from webrace.xmlutil import MAX_XML_BYTES, XmlTooLarge, check_size, open_limited, safe_iterparse, safe_parser, schema

if TYPE_CHECKING:
    import xmlschema

# The largest values a URD may give, as webrace/schemas/urd.xsd says: a re-crawl at least
# once a century, a last check before the year 10000 (the last instant `urd list` can print).
# Their sum is far below what a SQLite INTEGER holds (2^63 - 1).
MAX_TIMING_MS = 3_155_760_000_000
MAX_TIME_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
# Problems one `add` reports at most; the others are counted.
MAX_PROBLEMS = 100
_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s]*@")
_USERINFO_ANYWHERE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s'\"]*@")


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
        """Epoch ms at which the URD is next due (0 when never checked: due now), at the
        latest ``MAX_TIME_MS`` (a URD stored before the bounds existed may be far beyond)."""
        if self.due_at is not None:
            return self.due_at
        return 0 if self.lastcheck is None else min(self.lastcheck + self.timing, MAX_TIME_MS)

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

    def to_record(self) -> dict[str, Any]:
        """The URD as plain values (JSON-able), read back by :meth:`from_record` without
        parsing XML or normalising its URL again: what stores and rounds keep once a URD has
        been validated at add."""
        return {"id": self.id, "owner": self.owner, "url": self.url, "timing": self.timing, "depth": self.depth,
                "lastcheck": self.lastcheck, "scope": self.scope, "urgent": self.urgent,
                "keywords": keywords_text(self.keywords),
                "threshold": None if self.threshold is None else str(self.threshold),
                "type": [self.protocol, self.method, self.processtype],
                **({"due_at": self.due_at} if self.due_at is not None else {})}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Urd:
        """A URD from :meth:`to_record`'s values (already validated when it was added)."""
        protocol, method, processtype = record.get("type") or ("http", "pull", "filter")
        threshold, lastcheck = record.get("threshold"), record.get("lastcheck")
        # the owner in canonical form: a URD stored before names were case folded (``Alice``) is alice's
        return cls(id=record["id"], owner=canonical_owner(record["owner"]) or record["owner"], url=record["url"],
                   timing=int(record["timing"]),
                   depth=int(record["depth"]), lastcheck=None if lastcheck is None else int(lastcheck),
                   scope=record.get("scope") or "host",
                   keywords=keywords_from_text(record.get("keywords") or ""),
                   threshold=None if threshold is None else Decimal(threshold), urgent=bool(record.get("urgent")),
                   due_at=None if record.get("due_at") is None else int(record["due_at"]),
                   protocol=protocol, method=method, processtype=processtype)

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


def keywords_text(keywords: Sequence[Keyword]) -> str:
    """Keywords as one text, ``key US weight RS key US weight...`` (ASCII unit and record
    separators: no XML text can hold them), weights as decimal text (exact). Read back by
    :func:`keywords_from_text` with two splits: 100,000 URDs are read at a round's start.
    A key holding a separator anyway (a URD not made from XML) makes JSON after an RS."""
    if any(_US in kw.key or _RS in kw.key for kw in keywords):
        return _RS + json.dumps([[kw.key, str(kw.weight)] for kw in keywords])
    return _RS.join(f"{kw.key}{_US}{kw.weight}" for kw in keywords)


def keywords_from_text(text: str) -> tuple[Keyword, ...]:
    """:func:`keywords_text` read back."""
    if not text:
        return ()
    if text.startswith(_RS):
        return tuple(Keyword(key, Decimal(weight)) for key, weight in json.loads(text[1:]))
    return tuple(map(_keyword, text.split(_RS)))


_US, _RS = "\x1f", "\x1e"


@lru_cache(maxsize=65536)
def _keyword(pair: str) -> Keyword:
    """One ``key US weight`` (URDs naming the same keyword with the same weight share it)."""
    key, weight = pair.split(_US)
    return Keyword(key, Decimal(weight))


def load_files(paths: Iterable[str | Path], max_bytes: int = MAX_XML_BYTES) -> list[Urd]:
    """Every file's URDs, or :class:`UrdError` listing every problem (file, line, what is wrong)."""
    return list(iter_files(paths, max_bytes))


def iter_files(paths: Iterable[str | Path], max_bytes: int = MAX_XML_BYTES) -> Iterator[Urd]:
    """Every file's URDs as the files are read, each ``<urd>`` validated on its own and then
    dropped (memory holds one URD and the ids seen, however large the file), so that they
    can be stored as they come. Nothing more is yielded once a problem is found; the rest is
    still checked and :class:`UrdError` then lists every problem: a caller that stores in
    one transaction, ended by that exception, stores nothing. A file larger than
    ``max_bytes`` is refused before it is parsed."""
    problems = _Problems()
    seen: dict[str, str] = {}
    for path in paths:
        yield from _unique(_file_urds(Path(path), max_bytes, problems), seen, problems)
    problems.raise_any()


def parse(data: bytes, source: str = "<string>", max_bytes: int = MAX_XML_BYTES) -> list[Urd]:
    """Validate ``data`` (one ``<urd>`` or a ``<urds>`` list) and return its URDs."""
    problems = _Problems()
    urds: list[Urd] = []
    try:
        check_size(len(data), max_bytes)
    except XmlTooLarge as exc:
        problems.add(f"{source}: {exc}")
    else:
        urds = list(_unique(_document_urds(io.BytesIO(data), source, problems), {}, problems))
    problems.raise_any()
    return urds


class _Problems:
    """The problems of one ``add``: the first ``MAX_PROBLEMS`` of them, and how many more."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.more = 0

    def __bool__(self) -> bool:
        return bool(self.lines)

    def add(self, line: str) -> None:
        if len(self.lines) < MAX_PROBLEMS:
            self.lines.append(line)
        else:
            self.more += 1

    def extend(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.add(line)

    def raise_any(self) -> None:
        if self.lines:
            raise UrdError(self.lines + ([f"... and {self.more} more problem(s)"] if self.more else []))


def _unique(urds: Iterable[Urd], seen: dict[str, str], problems: _Problems) -> Iterator[Urd]:
    """``urds`` while no problem is found, each id once (a repeated one is a problem)."""
    for urd in urds:
        if urd.id in seen:
            problems.add(f"{urd.source}: duplicated URD id {urd.id!r}: also defined in {seen[urd.id]}")
        seen.setdefault(urd.id, urd.source)
        if not problems:
            yield urd


def _file_urds(path: Path, max_bytes: int, problems: _Problems) -> Iterator[Urd]:
    try:
        stream = open_limited(path, max_bytes)
    except XmlTooLarge as exc:
        problems.add(f"{path}: {exc}")
        return
    except OSError as exc:
        problems.add(f"{path}: cannot read: {exc.strerror or exc}")
        return
    with stream:
        yield from _document_urds(stream, str(path), problems)


def _document_urds(stream: BinaryIO, source: str, problems: _Problems) -> Iterator[Urd]:
    """The valid URDs of one document, read one ``<urd>`` at a time (problems go to
    ``problems``). A ``<urds>`` keeps only what is not a ``<urd>``, checked at its end."""
    events = safe_iterparse(stream, ("start", "end"), tag=("urd", "urds"))
    checked, position = False, 0  # checked: the DOCTYPE and the root, at the first event
    try:
        for event, element in events:
            if not checked and not _acceptable_document(element.getroottree(), source, problems):
                return
            checked = True
            parent = element.getparent()
            if event == "start" or element.tag != "urd" or not _is_root(parent, "urds"):
                continue
            position += parent is not None  # a lone <urd> has no place in a list
            urd = _checked(element, source, position, problems)
            if urd is not None:
                yield urd
            if parent is not None:
                _drop(element)
        root = events.root
        if (checked or _acceptable_document(root.getroottree(), source, problems)) and root.tag == "urds":
            problems.extend(_schema_problems(root, source, 0))
    except etree.XMLSyntaxError as exc:
        line = exc.lineno or (exc.position[0] if exc.position else 0)
        problems.add(f"{source}:{line}: not well-formed XML: {exc.msg}")
    except XmlTooLarge as exc:
        problems.add(f"{source}: {exc}")
    except OSError as exc:  # it opened but cannot be read (/proc/self/mem, a device, a disk error)
        problems.add(f"{source}: cannot read: {exc.strerror or exc}")


def _is_root(parent: etree._Element | None, tag: str) -> bool:
    """Whether ``parent`` is None (the element is the root) or the root ``tag``."""
    return parent is None or (parent.tag == tag and parent.getparent() is None)


def _acceptable_document(tree: etree._ElementTree, source: str, problems: _Problems) -> bool:
    root = tree.getroot()
    if tree.docinfo.doctype:
        problems.add(f"{source}:1: DOCTYPE declarations (and so entities) are not allowed in URD files")
    elif root.tag not in ("urd", "urds"):
        problems.add(f"{source}:{root.sourceline}: the root element is <{root.tag}>: "
                     "a URD file holds one <urd> or a <urds> list (with no namespace)")
    else:
        return True
    return False


def _drop(element: etree._Element) -> None:
    """Take a ``<urd>`` already read out of the tree, leaving any text after it (not allowed
    there) for the check of the ``<urds>``."""
    parent, tail = element.getparent(), element.tail
    parent.remove(element)
    if tail and tail.strip():
        parent.text = (parent.text or "") + tail


def _checked(element: etree._Element, source: str, position: int, problems: _Problems) -> Urd | None:
    """The URD ``element`` describes, or None with its problems added (``position``: its
    place in the ``<urds>``, 0 for a lone ``<urd>``)."""
    found = _schema_problems(element, source, position)
    if found:
        problems.extend(found)
        return None
    uri = element.find("uri")
    try:
        url = _seed_url(uri.text.strip(), uri.get("port"))
    except ValueError as exc:
        path = f"/urds/urd[{position}]/uri" if position else "/urd/uri"
        problems.add(f"{source}:{uri.sourceline}: URD {element.get('id')!r}: {exc} (at {path})")
        return None
    return _from_element(element, source, url)


def _schema_problems(element: etree._Element, source: str, position: int) -> list[str]:
    found = []
    for err in schema("urd").iter_errors(element):
        line, path = _located(err)
        if path and position:
            path = f"/urds/urd[{position}]{path[len('/urd'):]}"
        reason = err.reason or err.message
        if path and path.endswith("/uri") and "pattern" in reason:
            reason = f"not an absolute http:// or https:// URL: {err.obj!r}"
        reason = hide_credentials(reason if len(reason) <= 500 else reason[:500] + "...")
        found.append(f"{source}:{line}: {reason}" + (f" (at {path})" if path else ""))
    return found


def _located(err: xmlschema.XMLSchemaValidationError) -> tuple[int | str, str | None]:
    """The line and path of what is wrong. xmlschema reports a child the content model
    refuses (misspelt, repeated, not allowed there) at its parent, the ``<urd>``: point at
    the child itself."""
    elem = err.elem
    import xmlschema  # loaded by schema() already

    if isinstance(err, xmlschema.XMLSchemaChildrenValidationError) and elem is not None and err.index < len(elem):
        child = elem[err.index]
        if isinstance(child.tag, str) and child.sourceline is not None:
            return child.sourceline, f"{err.path}/{etree.QName(child).localname}" if err.path else None
    return (err.sourceline if err.sourceline is not None else "?"), err.path


class UrlWithCredentials(ValueError):
    """A URL with user information (``user:password@host``): refused wherever a page URL
    comes in (a URD's start page, an imported archive's record)."""


def crawlable_url(text: str) -> str:
    """The canonical form of a page URL from outside (a URD's start page, a WARC record's
    target), or ValueError saying why it cannot be crawled (:class:`UrlWithCredentials` for
    credentials: a crawl could never send them, and they would show in listings and logs;
    the message never repeats them)."""
    if _USERINFO.match(text.strip()):
        raise UrlWithCredentials(f"put credentials in settings, not in URLs: {hide_credentials(text)!r}")
    try:
        url = normalize(text)
    except BadURL as exc:
        raise ValueError(f"cannot crawl this URL: {hide_credentials(str(exc))}") from None
    parts = urlsplit(url)
    if "@" in parts.netloc:  # hidden from the pattern (a tab or newline urlsplit drops)
        raise UrlWithCredentials(f"put credentials in settings, not in URLs: {hide_credentials(url)!r}")
    if parts.port == 0:
        raise ValueError(f"cannot crawl this URL: port 0 of {url!r} is not a port a server listens on")
    return url


def _seed_url(text: str, port: str | None) -> str:
    """The canonical start page of a URD being added, or ValueError saying why it cannot be
    crawled (:func:`crawlable_url`)."""
    if _USERINFO.match(text.strip()):  # before the port is applied: the message shows the URL as given
        raise UrlWithCredentials(f"put credentials in settings, not in URLs: {hide_credentials(text)!r}")
    return crawlable_url(_apply_port(text, port))


def hide_credentials(text: str) -> str:
    """``text`` with the user information of every URL in it (``user:password@``) hidden."""
    return _USERINFO_ANYWHERE.sub(r"\1***@", text)


def _from_element(element: etree._Element, source: str, url: str | None = None) -> Urd:
    uri = element.find("uri")
    if url is None:
        url = normalize(_apply_port(uri.text.strip(), uri.get("port")))
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
        owner=canonical_owner(element.get("owner")) or element.get("owner"),  # urd.xsd checked the rule
        url=url,
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
    """The seed's ``port`` attribute applies only when the URL itself names no port (a bad
    port of the URL's own is left for :func:`normalize` to refuse)."""
    if not port:
        return url
    parts = urlsplit(url)
    try:
        if parts.port is not None or not parts.hostname:
            return url
    except ValueError:
        return url
    return urlunsplit((parts.scheme, f"{parts.netloc}:{int(port)}", parts.path, parts.query, parts.fragment))


def to_document(urds: Iterable[Urd]) -> str:
    """A ``<urds>`` document holding ``urds`` (what ``scrapy urd export`` would print)."""
    root = etree.Element("urds")
    for urd in urds:
        root.append(urd.to_element())
    return etree.tostring(root, encoding="unicode", pretty_print=True)
