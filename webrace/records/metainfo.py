"""Meta-info records (seed 003 Table 3) as XML in ``urn:webrace:metainfo``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime

from lxml import etree

from webrace.xmlutil import safe_parser

NS = "urn:webrace:metainfo"
_Q = "{%s}%%s" % NS  # noqa: UP031 - a template for Clark names
WANTED_KEPT = 1024  # reach keys kept per page (a page reached from more start pages keeps the latest)


@dataclass(frozen=True)
class MetaInfo:
    url: str
    status: int
    fetched: int  # epoch ms
    header: str  # status line and headers, as received
    links: tuple[str, ...] = ()
    ip: str | None = None
    size: int = 0  # body bytes of the newest stored version
    lastmodified: str | None = None  # Last-Modified as received
    etag: str | None = None
    digest: str | None = None  # newest stored body
    version: int | None = None  # number of the newest stored version
    objcrc: int | None = None  # CRC-32 of that version's stored file (cheap integrity check)
    dropped: bool = False  # that body was relevant to no owner and was not kept (digest stays)
    # epoch ms at which the crawl round that last fetched or confirmed (304) that body opened: a
    # round of URDs with timing T opened before checked + T is served without a request (None: never)
    checked: int | None = None
    # reach keys (webrace.rounds.groups.reach_key) of the URDs whose rounds reached this page:
    # a new version is judged for all of them, whichever round fetched it (at most WANTED_KEPT, newest last)
    wanted: tuple[str, ...] = ()
    refresh: str | None = None  # where the page's refresh sends the browser (one of its links)
    # the newest version was stored but its page's item has not gone out yet (its ACIs and
    # sentinels not judged: a worker died, Redis went away): the next fetch announces it,
    # 304 or not (cleared by MetaInfoStore.announced once the item is out)
    unannounced: bool = False

    def wanting(self, keys: Iterable[str]) -> tuple[str, ...]:
        """``wanted`` with ``keys`` added (the newest ``WANTED_KEPT``)."""
        return with_wanted(self.wanted, keys)

    @property
    def kbytes(self) -> int:
        return (self.size + 1023) // 1024

    @property
    def ifmodifiedsince(self) -> int | None:
        """Last-Modified in epoch ms, or None when absent or not a valid HTTP date."""
        return http_date_ms(self.lastmodified)

    @property
    def not_kept(self) -> bool:
        """A 2xx answer of a media type the crawl does not keep: remembered (its headers and
        validators, so the next request is conditional) without a body."""
        return 200 <= self.status < 300 and not self.digest and self.version is None

    @property
    def validators(self) -> bool:
        return bool(self.etag or self.ifmodifiedsince is not None)

    def header_value(self, name: str) -> str | None:
        """A header of the stored response (case-insensitive name)."""
        prefix = name.lower() + ":"
        for line in self.header.splitlines():
            if line.lower().startswith(prefix):
                return line[len(prefix):].strip()
        return None

    def headers(self) -> dict[str, str]:
        """The stored response's headers (the lines after the status line), by name."""
        found: dict[str, str] = {}
        for line in self.header.splitlines()[1:]:
            name, sep, value = line.partition(":")
            if sep:
                found[name.strip()] = value.strip()
        return found

    def revalidated(self, etag: str | None, lastmodified: str | None) -> MetaInfo:
        """After a 304: validators the 304 may have refreshed."""
        return replace(self, etag=etag or self.etag, lastmodified=lastmodified or self.lastmodified)

    def to_xml(self) -> str:
        root = etree.Element(_Q % "metainfo", nsmap={"webrace": NS})

        def add(name: str, value: object) -> None:
            if value is not None:
                etree.SubElement(root, _Q % name).text = str(value)

        add("url", self.url)
        add("ip", self.ip)
        add("kbytes", self.kbytes)
        add("ifmodifiedsince", self.ifmodifiedsince)
        add("lastmodified", _xml_safe(self.lastmodified))
        add("etag", _xml_safe(self.etag))
        add("status", self.status)
        add("fetched", self.fetched)
        add("digest", self.digest)
        add("header", _xml_safe(self.header))
        add("links", " ".join(self.links))
        root.set("size", str(self.size))  # exact size; kbytes is the seed's rounded figure
        if self.version is not None:
            root.set("version", str(self.version))
        if self.objcrc is not None:
            root.set("objcrc", str(self.objcrc))
        if self.dropped:
            root.set("dropped", "true")
        if self.checked is not None:
            root.set("checked", str(self.checked))
        if self.wanted:
            root.set("wanted", " ".join(self.wanted))
        if self.refresh:
            root.set("refresh", self.refresh)
        if self.unannounced:
            root.set("unannounced", "true")
        return etree.tostring(root, encoding="unicode")

    @classmethod
    def from_xml(cls, text: str) -> MetaInfo:
        root = etree.fromstring(text.encode(), safe_parser())

        def get(name: str) -> str | None:
            el = root.find(_Q % name)
            return el.text if el is not None else None

        return cls(
            url=get("url") or "",
            status=int(get("status") or 0),
            fetched=int(get("fetched") or 0),
            header=get("header") or "",
            links=tuple((get("links") or "").split()),
            ip=get("ip"),
            size=int(root.get("size", "0")),
            lastmodified=get("lastmodified"),
            etag=get("etag"),
            digest=get("digest"),
            version=int(root.get("version")) if root.get("version") else None,
            objcrc=int(root.get("objcrc")) if root.get("objcrc") else None,
            dropped=root.get("dropped") in ("true", "1"),
            checked=int(root.get("checked")) if root.get("checked") else None,
            wanted=tuple((root.get("wanted") or "").split()),
            refresh=root.get("refresh") or None,
            unannounced=root.get("unannounced") in ("true", "1"),
        )


def with_wanted(wanted: tuple[str, ...], keys: Iterable[str]) -> tuple[str, ...]:
    """The reach keys ``wanted`` with ``keys`` added, in order, the newest ``WANTED_KEPT``."""
    have = set(wanted)
    added = tuple(k for k in dict.fromkeys(keys) if k not in have)
    return (wanted + added)[-WANTED_KEPT:] if added else wanted


def http_date_ms(value: str | None) -> int | None:
    if not value:
        return None
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed is None or parsed.tzinfo is None:
        return None
    ms = int(parsed.timestamp() * 1000)
    return ms if ms >= 0 else None


def _xml_safe(text: str | None) -> str | None:
    """Header values are bytes from the network: drop what XML 1.0 cannot hold."""
    if text is None:
        return None
    return "".join(ch for ch in text if ch in "\t\n\r" or (" " <= ch <= "\ud7ff") or ("\ue000" <= ch <= "\ufffd"))


class VersionExists(Exception):
    """The store has a version of this URL with this number already: another fetch of the URL
    was recorded meanwhile (two requests for one page in flight at once)."""


@dataclass(frozen=True)
class Version:
    """One stored version of a URL: its body is the object named ``digest``."""

    url: str
    number: int  # 1, 2, ... per URL, never reused
    digest: str
    fetched: int  # epoch ms
    size: int  # body bytes
    status: int
    header: str | None = None  # that fetch's status line and headers as received (None: stored before versions kept it)


@dataclass(frozen=True)
class Revisit:
    """A 304 answer: at ``fetched`` (epoch ms) the server confirmed that version ``number``
    (body ``digest``) of ``url`` was still current. ``header`` is the 304's status line and
    headers (None where the store keeps only the time: the distributed mode)."""

    url: str
    fetched: int
    number: int
    digest: str
    header: str | None = None
