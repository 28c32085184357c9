"""WARC (ISO 28500) out of and into the object cache, written and read with warcio.

**Export** (:func:`export_warc`): every stored version of a URL becomes a WARC/1.1
``response`` record and a ``request`` record, every recorded 304 answer a ``revisit`` record
(profile ``server-not-modified``), in fetch-time order per URL. The stored body is the body
*as Scrapy handed it over*: HttpCompressionMiddleware removed gzip/deflate/br/zstd,
Twisted removed chunking. The crawl recorded the wire's encoding and length in the stored
headers as it fetched (``X-WebRACE-Orig-Content-Encoding``, ``X-WebRACE-Orig-Content-Length``:
:func:`decoded_headers`, :mod:`webrace.middlewares.compression`). A record that kept
``Content-Encoding: gzip`` or ``Transfer-Encoding: chunked`` over a decoded body would not
replay, so those headers, where stored headers still have them, are renamed
``X-WebRACE-Orig-<name>`` and ``Content-Length`` is the written body's length (the server's
value, when it differs, is kept as ``X-WebRACE-Orig-Content-Length``). ``WARC-Payload-Digest``
is the SHA-256 of the written body (base32, ``sha256:...``), so a revisit names the same
digest as the response it confirms.

The crawl does not keep what it sent, so each ``request`` record is *reconstructed*: ``GET``
of the URL with the headers every WebRACE request carries (``User-Agent``, ``Accept``,
``Accept-Language``, ``Accept-Encoding``: see :func:`request_headers`); a revisit's request
adds the ``If-None-Match``/``If-Modified-Since`` of the version it confirmed (a 304 answers
only a conditional request). Validators of a conditional 200 are not known and not written.

**Import** (:func:`import_warcs`): ``response`` records of HTTP(S) URLs from any WARC go
through :meth:`ObjectCache.record_fetch` as the crawl's own fetches do: the body de-chunked
and decoded (warcio's ``content_stream``), the headers as the crawl's header text keeps
them, ``WARC-Date`` as the fetch time, and what the crawl makes of the response (header
text, links, whether it keeps it at all) decided by the caller's ``view``
(:class:`webrace.archive.CrawlView`: the crawl's own parts, which live above this layer).
Every file is first read through to the end (structure, lengths, digests); a bad record is
named and the reading goes on from the next record boundary. The good response records are
then stored in ``WARC-Date`` order, so several captures of one URL become versions oldest
first, and a capture not newer than what the store already holds for the URL is skipped: an
older record never replaces the newest meta-info, and importing a file twice adds nothing.

Any input ends in bounded time and memory: a file must be a regular file (``/dev/zero``, a
FIFO: one line) starting with a WARC record header within :data:`START_BYTES`; a record's
header (WARC and HTTP lines) may have :data:`RECORD_HEADER_LIMIT` bytes; after
:data:`MAX_BAD_PLACES` damaged places the rest of a file is not read. A record whose gzip
member is cut before its CRC-32 and length trailer (a file cut right after the record) was
read whole: it is kept and named in ``damaged``. A record URDs would refuse (credentials in
its URL: :func:`webrace.urd.crawlable_url`) is skipped and counted. Every message quoting a
record (a reason, a skipped record type) has its control characters escaped
(:func:`webrace.safetext.printable`): a record cannot drive the terminal it is reported on.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import os
import stat
import zlib
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from typing import IO, Any
from urllib.parse import urlsplit

from scrapy.downloadermiddlewares.httpcompression import ACCEPTED_ENCODINGS
from warcio.archiveiterator import ArchiveIterator
from warcio.bufferedreaders import BufferedReader, DecompressingBufferedReader
from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders, StatusAndHeadersParser
from warcio.timeutils import datetime_to_iso_date, iso_date_to_datetime
from warcio.warcwriter import WARCWriter

from webrace import __version__
from webrace.records.metainfo import MetaInfo, Revisit, Version
from webrace.safetext import printable
from webrace.store.cache import ObjectCache
from webrace.store.objects import ObjectCorrupt, ObjectMissing
from webrace.urd import Urd, UrlWithCredentials, crawlable_url
from webrace.urls import in_scope

SERVER_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
# Headers that describe the bytes on the wire, not the decoded body we keep.
_WIRE_HEADERS = ("content-encoding", "transfer-encoding")
ORIG_PREFIX = "X-WebRACE-Orig-"
# Response records sorted by WARC-Date together: bounds an import's memory whatever the
# archive's size (a URL captured in two batches still never goes back in time: see above).
ORDER_BATCH = 200_000
_READ = 64 * 1024
_OPEN_FILES = 64  # archives kept open at once while storing (an import may name thousands)
# What warcio raises on a damaged archive goes beyond its own exceptions (zlib, parsing,
# a record missing a header it then dereferences): any of them names the record bad.
_UNREADABLE = Exception
START_BYTES = 64 * 1024  # a WARC file's first record header starts within these (after blank lines)
RECORD_HEADER_LIMIT = 128 * 1024  # bytes of a record's WARC and HTTP header lines
MAX_BAD_PLACES = 100  # damaged places read past in one file before the rest of it is given up
_RECORD_TYPES = frozenset({"warcinfo", "response", "resource", "request", "metadata", "revisit", "conversion",
                           "continuation"})  # WARC 1.1's: another is counted as "unknown record type"


# -- export ----------------------------------------------------------------------------


@dataclass
class Exported:
    """What an export wrote, and what it could not."""

    urls: int = 0
    responses: int = 0
    requests: int = 0
    revisits: int = 0
    problems: list[str] = field(default_factory=list)  # one line each: a version not written, and why


def request_headers(settings: Any) -> list[tuple[str, str]]:
    """The headers every request of the crawl carries (besides Host and validators), from
    the settings the crawl runs with: its User-Agent, Scrapy's default headers, and the
    encodings HttpCompressionMiddleware accepts."""
    found = [("User-Agent", settings.get("USER_AGENT") or "")]
    found += [(str(k), str(v)) for k, v in (settings.getdict("DEFAULT_REQUEST_HEADERS") or {}).items()]
    found.append(("Accept-Encoding", b", ".join(ACCEPTED_ENCODINGS).decode()))
    return found


def export_warc(cache: ObjectCache, stream: IO[bytes], urls: Iterable[str], *, since: int = 0,
                headers: list[tuple[str, str]] = (), gzip: bool = True, filename: str = "") -> Exported:
    """Write the versions and 304 answers of ``urls`` fetched at or after ``since`` (epoch ms)
    to ``stream`` as WARC/1.1 records (one gzip member each when ``gzip``), after a warcinfo
    naming ``filename``. ``headers``: what every request carried (:func:`request_headers`)."""
    writer = WARCWriter(stream, gzip=gzip, warc_version="1.1")
    info = {"software": f"WebRACE {__version__} (warcio)", "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
            "description": "scrapy store export: the object cache's versions and 304 answers"}
    writer.write_record(writer.create_warcinfo_record(filename, info))
    report = Exported()
    for url in urls:
        _UrlExport(cache, writer, url, headers, report).write(since)
    return report


class _UrlExport:
    """The records of one URL: its versions and revisits, merged by fetch time."""

    def __init__(self, cache: ObjectCache, writer: WARCWriter, url: str, headers: list[tuple[str, str]],
                 report: Exported) -> None:
        self.cache, self.writer, self.url, self.headers, self.report = cache, writer, url, headers, report
        self.digests: dict[int, str] = {}  # version number -> WARC payload digest as written
        self.record_ids: dict[int, str] = {}  # version number -> its response record's id
        self.meta: MetaInfo | None = None

    def write(self, since: int) -> None:
        versions = self.cache.versions(self.url)
        revisits = self.cache.revisits(self.url) if versions else []
        by_number = {v.number: v for v in versions}
        events: list[tuple[int, int, Version | Revisit]] = [(v.fetched, 0, v) for v in versions]
        events += [(r.fetched, 1, r) for r in revisits]
        wrote = False
        for fetched, _, event in sorted(events, key=lambda e: (e[0], e[1])):
            if fetched < since:
                continue
            if isinstance(event, Version):
                wrote |= self.response(event)
            else:
                wrote |= self.revisit(event, by_number.get(event.number))
        self.report.urls += wrote

    def response(self, version: Version) -> bool:
        try:
            _, body = self.cache.get(self.url, version.number)
        except (LookupError, ObjectMissing, ObjectCorrupt) as exc:
            kind = "damaged" if isinstance(exc, ObjectCorrupt) else "missing"
            self.report.problems.append(f"{self.url} version {version.number}: stored body {kind}: not written")
            return False
        digest = warc_digest(hashlib.sha256(body).digest())
        status_line, fields = split_header(self._header(version))
        http = StatusAndHeaders(status_line.partition(" ")[2] or f"{version.status}",
                                replayable_headers(fields, len(body)), protocol="HTTP/1.1")
        date = warc_date(version.fetched)
        record = self.writer.create_warc_record(
            self.url, "response", payload=io.BytesIO(body), length=len(body), http_headers=http,
            warc_headers_dict=self._warc_headers("response", date, {"WARC-Payload-Digest": digest}))
        self.writer.write_record(record)
        record_id = record.rec_headers.get_header("WARC-Record-ID")
        self.digests[version.number], self.record_ids[version.number] = digest, record_id
        self._request(date, record_id, [])
        self.report.responses += 1
        return True

    def revisit(self, revisit: Revisit, confirmed: Version | None) -> bool:
        if confirmed is None:  # that version was dropped by gc: nothing to refer to
            self.report.problems.append(f"{self.url} 304 at {warc_date(revisit.fetched)}: "
                                        f"version {revisit.number} no longer stored: not written")
            return False
        answer = revisit.header or "HTTP/1.1 304 Not Modified"
        status, fields = revisit_record_headers(self._header(confirmed), answer, confirmed.size)
        http = StatusAndHeaders(status, fields, protocol="HTTP/1.1")
        date = warc_date(revisit.fetched)
        warc_headers = {"WARC-Profile": SERVER_NOT_MODIFIED,
                        "WARC-Refers-To-Target-URI": self.url, "WARC-Refers-To-Date": warc_date(confirmed.fetched),
                        "WARC-Payload-Digest": self._digest(confirmed),
                        ANSWER_FIELD: split_header(answer)[0] or "HTTP/1.1 304 Not Modified"}
        if confirmed.number in self.record_ids:
            warc_headers["WARC-Refers-To"] = self.record_ids[confirmed.number]
        record = self.writer.create_warc_record(self.url, "revisit", http_headers=http,
                                                warc_headers_dict=self._warc_headers("revisit", date, warc_headers))
        self.writer.write_record(record)
        validators = {name.lower(): value for name, value in split_header(self._header(confirmed))[1]}
        sent = [(name, validators[key]) for key, name in (("etag", "If-None-Match"),
                                                          ("last-modified", "If-Modified-Since"))
                if key in validators]
        self._request(date, record.rec_headers.get_header("WARC-Record-ID"), sent)
        self.report.revisits += 1
        return True

    def _request(self, date: str, concurrent_to: str, extra: list[tuple[str, str]]) -> None:
        parts = urlsplit(self.url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        http = StatusAndHeaders(f"GET {target} HTTP/1.1", [("Host", parts.netloc), *self.headers, *extra],
                                is_http_request=True)
        record = self.writer.create_warc_record(self.url, "request", http_headers=http, warc_headers_dict=(
            self._warc_headers("request", date, {"WARC-Concurrent-To": concurrent_to})))
        self.writer.write_record(record)
        self.report.requests += 1

    def _warc_headers(self, kind: str, date: str, more: dict[str, str]) -> dict[str, str]:
        """WARC headers in the usual order: type, id, target, date, then the record's own."""
        return {"WARC-Type": kind, "WARC-Record-ID": StatusAndHeadersParser.make_warc_id(),
                "WARC-Target-URI": self.url, "WARC-Date": date, **more}

    def _digest(self, version: Version) -> str:
        """The payload digest the response record of ``version`` has (or would have)."""
        if version.number not in self.digests:
            try:
                _, body = self.cache.get(self.url, version.number)
                self.digests[version.number] = warc_digest(hashlib.sha256(body).digest())
            except (LookupError, ObjectMissing, ObjectCorrupt):
                self.digests[version.number] = warc_digest(bytes.fromhex(version.digest))
        return self.digests[version.number]

    def _header(self, version: Version) -> str:
        """The version's status line and headers; for a version stored before versions kept
        them, the URL's meta-info header when it describes that version, else its status
        line with the newest known Content-Type."""
        if version.header:
            return version.header
        if self.meta is None:
            self.meta = self.cache.lookup(self.url) or MetaInfo(self.url, 0, 0, "")
        if self.meta.version == version.number and self.meta.status == version.status and self.meta.header:
            return self.meta.header
        ctype = self.meta.header_value("Content-Type")
        return f"HTTP/1.1 {version.status} {_phrase(version.status)}" + (f"\nContent-Type: {ctype}" if ctype else "")


def split_header(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The crawl's header text (status line, then ``Name: value`` lines) as a status line and
    a list of fields in order (a repeated header stays repeated)."""
    lines = text.splitlines()
    fields = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep and name.strip():
            fields.append((name.strip(), value.strip()))
    return (lines[0].strip() if lines else ""), fields


def decoded_headers(fields: list[tuple[str, str]], length: int, wire_length: int,
                    left: list[str] = ()) -> list[tuple[str, str]]:
    """The headers of a body that came with a ``Content-Encoding`` and is kept decoded
    (``length`` bytes; ``wire_length`` bytes were received), as the crawl stores them: the
    server's ``Content-Encoding`` as ``X-WebRACE-Orig-Content-Encoding``, its
    ``Content-Length`` (the bytes received, when it sent none: a chunked answer) as
    ``X-WebRACE-Orig-Content-Length``, and ``Content-Length``, when the server sent one, the
    decoded length. ``left``: encodings not undone (none Scrapy can decode), still the body's."""
    kept: list[tuple[str, str]] = []
    sent_length = None
    for name, value in fields:
        lower = name.lower()
        if lower == "content-encoding":
            kept.append((ORIG_PREFIX + "Content-Encoding", value))
        elif lower == "content-length":
            sent_length = value
            kept.append(("Content-Length", str(length)))
        elif not lower.startswith(ORIG_PREFIX.lower()):  # a server's own X-WebRACE-Orig-* says nothing
            kept.append((name, value))
    kept.append((ORIG_PREFIX + "Content-Length", sent_length or str(wire_length)))
    if left:
        kept.append(("Content-Encoding", ", ".join(left)))
    return kept


def replayable_headers(fields: list[tuple[str, str]], length: int) -> list[tuple[str, str]]:
    """Headers true of the decoded body: wire encodings renamed ``X-WebRACE-Orig-*`` (or
    dropped, when the crawl already recorded them so at fetch time), ``Content-Length`` set
    to ``length`` (the server's kept alongside when it differs)."""
    fields = _orig_spelled(fields)
    recorded = {name.lower() for name, _ in fields if name.startswith(ORIG_PREFIX)}
    kept: list[tuple[str, str]] = []
    for name, value in fields:
        lower = name.lower()
        if lower in _WIRE_HEADERS or (lower == "content-length" and value != str(length)):
            if (ORIG_PREFIX + name).lower() not in recorded:
                kept.append((ORIG_PREFIX + name, value))
        elif lower != "content-length":
            kept.append((name, value))
    kept.append(("Content-Length", str(length)))
    return kept


# A 304's fields that say nothing about the confirmed representation, or about its framing:
# a cache updating a stored response with a 304 leaves these as they were (RFC 9111 sections
# 3.2 and 4.3.4; RFC 9110 section 7.6.1's hop-by-hop fields).
_NOT_FRESHENED = frozenset({"content-length", "content-encoding", "content-type", "content-range",
                            "transfer-encoding", "connection", "keep-alive", "proxy-connection", "te", "trailer",
                            "upgrade"})
# On a revisit record: the status line of the answer it records (a 304's), when its HTTP
# headers are the confirmed response's (see :func:`revisit_record_headers`).
ANSWER_FIELD = "WebRACE-Revisit-Answer"


def revisit_record_headers(confirmed_header: str, answer_header: str | None,
                           length: int) -> tuple[str, list[tuple[str, str]]]:
    """The status and HTTP headers of a ``server-not-modified`` revisit record: the confirmed
    version's, as its response record has them (:func:`replayable_headers`, ``length`` its
    body's bytes), freshened by the 304's fields as a cache does (RFC 9111 section 4.3.4: its
    ``Date``, ``ETag``, ``Cache-Control``... replace the stored ones; fields that describe the
    body or its framing stay the version's). Replay tools serve a revisit with its own status
    and headers over the original's payload (pywb's ``ResolvingLoader``; a 3xx status, a 304
    included, is served with no body at all), so a revisit carrying the 304's status line
    browsed as an empty page. The 304's own status line goes in the WARC header
    :data:`ANSWER_FIELD`."""
    status_line, fields = split_header(confirmed_header)
    base = replayable_headers(fields, length)
    updates = [(name, value) for name, value in revisit_headers(split_header(answer_header or "")[1])
               if name.lower() not in _NOT_FRESHENED and not name.lower().startswith(ORIG_PREFIX.lower())]
    replaced = {name.lower() for name, _ in updates}
    kept = [(name, value) for name, value in base if name.lower() not in replaced]
    return status_line.partition(" ")[2] or "200 OK", kept + updates


def revisit_headers(fields: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A 304's headers for a revisit record: without the ``Content-Length: 0`` Scrapy gives
    every 304 (Twisted reads no body; the server sent none), which would claim the confirmed
    version empty (RFC 9110 section 8.6)."""
    return [(name, value) for name, value in _orig_spelled(fields) if name.lower() != "content-length"]


def _orig_spelled(fields: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``X-WebRACE-Orig-*`` spelled so (Scrapy's headers store ``X-Webrace-Orig-*``)."""
    size = len(ORIG_PREFIX)
    return [(ORIG_PREFIX + name[size:] if name[:size].lower() == ORIG_PREFIX.lower() else name, value)
            for name, value in fields]


def warc_digest(raw: bytes) -> str:
    """A SHA-256 digest in WARC's ``algorithm:base32`` form."""
    return "sha256:" + base64.b32encode(raw).decode()


def warc_date(ms: int) -> str:
    """Epoch ms as a WARC/1.1 date (UTC, fractional seconds)."""
    return datetime_to_iso_date(datetime.fromtimestamp(ms / 1000, UTC).replace(tzinfo=None), use_micros=True)


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def urd_urls(cache: ObjectCache, urd: Urd) -> list[str]:
    """The stored pages a crawl of ``urd`` reaches: its start page and, through each stored
    page's links, pages up to its depth within its scope (breadth first, each once). The
    store keeps no redirects, so pages reached only through one are not found."""
    queue, seen, found = deque([(urd.url, 0)]), {urd.url}, []
    while queue:
        url, depth = queue.popleft()
        meta = cache.lookup(url)
        if meta is None:
            continue
        found.append(url)
        if depth >= urd.depth:
            continue
        for link in meta.links:
            if link not in seen and in_scope(link, urd.url, urd.scope):
                seen.add(link)
                queue.append((link, depth + 1))
    return found


# -- import ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Bad:
    """A record that could not be read (or, in ``damaged``, was read with a problem): where
    it starts, and why. The reason may quote the record: it is kept printable."""

    path: str
    offset: int
    reason: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", printable(self.reason, 300))

    def __str__(self) -> str:
        return f"{printable(self.path, 300)}:{self.offset}: {self.reason}"


@dataclass
class Imported:
    """What an import did. ``skipped`` counts records not imported, by reason (record types
    other than response; ``not newer than stored``, ``mime``, ``robots.txt``, ...)."""

    files: int = 0
    responses: int = 0  # response records stored
    new_versions: int = 0
    unchanged: int = 0  # the body was the URL's newest stored one
    skipped: Counter[str] = field(default_factory=Counter)
    bad: list[Bad] = field(default_factory=list)
    damaged: list[Bad] = field(default_factory=list)  # read whole and kept, but the file is damaged there

    def skip(self, reason: str) -> None:
        """Count a record not imported; ``reason`` may quote the record: kept printable and short."""
        self.skipped[printable(reason, 60)] += 1


@dataclass(frozen=True)
class Capture:
    """A response record as the crawl would store it: the header text it keeps, the links
    its URL extractor pipe finds."""

    header: str
    links: list[str]


# What the crawl makes of a response: (url, status, headers as received minus a decoded
# Content-Encoding, decoded body) -> a Capture, or why the crawl would not keep it.
CrawlView = Callable[[str, int, list[tuple[str, str]], bytes], "Capture | str"]


@dataclass(frozen=True)
class _Found:
    """A good response record, to be stored in WARC-Date order."""

    fetched: int
    path: str
    offset: int


def _by_date(found: list[_Found]) -> list[_Found]:
    """WARC-Date order; records of one date stay in the order they were read (a stable sort)."""
    return sorted(found, key=lambda f: f.fetched)


class _Rejected(Exception):
    """A record that is well-formed but not one the import takes (counted, not bad)."""


def import_warcs(cache: ObjectCache, paths: Iterable[str], view: CrawlView, *, max_body: int) -> Imported:
    """Load the response records of the WARC files ``paths`` into ``cache``, each as ``view``
    (the crawl's own judgement: :class:`webrace.archive.CrawlView`) makes it. A bad record
    (truncated, corrupt, failing its digest) is named in ``bad`` and never stored; the rest
    of its file is read on from the next record boundary."""
    report = Imported()
    batch: list[_Found] = []
    for path in paths:
        report.files += 1
        for found in _Scanner(path, report).records():
            batch.append(found)
            if len(batch) >= ORDER_BATCH:
                _store(cache, _by_date(batch), view, max_body, report)
                batch = []
    _store(cache, _by_date(batch), view, max_body, report)
    return report


class _Scanner:
    """Reads one WARC file through (the first pass): counts what is skipped, names what is
    bad, yields the good response records. After a bad record it looks for the next record
    boundary (a gzip member, or a ``WARC/`` line in an uncompressed file) and goes on, at
    most :data:`MAX_BAD_PLACES` times."""

    def __init__(self, path: str, report: Imported) -> None:
        self.path, self.report = path, report
        self.gzipped = False
        self.places = 0  # damaged places read past (resynchronisations)
        self.size = 0

    def records(self) -> Iterator[_Found]:
        try:
            fh = _open_regular(self.path)
        except OSError as exc:
            self.report.bad.append(Bad(self.path, 0, f"cannot read: {exc.strerror or exc}"))
            return
        if fh is None:
            self.report.bad.append(Bad(self.path, 0, "not a regular file: a WARC file is read from offsets, twice"))
            return
        with fh:
            problem = self._not_a_warc(fh)
            if problem:
                self.report.bad.append(Bad(self.path, 0, problem))
                return
            start: int | None = 0
            synced = True
            while start is not None:
                start, synced = yield from self._from(fh, start, synced)
                if start is not None:
                    self.places += 1
                    if self.places > MAX_BAD_PLACES:
                        self.report.bad.append(Bad(self.path, start, f"more than {MAX_BAD_PLACES:,} damaged places: "
                                                   "the rest of the file is not read"))
                        return

    def _not_a_warc(self, fh: IO[bytes]) -> str | None:
        """Why the file cannot be read as a WARC at all (None: it may be one): no WARC (or
        ARC) record header at its start."""
        self.size = os.fstat(fh.fileno()).st_size
        raw = fh.read(START_BYTES)
        self.gzipped = raw[:2] == b"\x1f\x8b"
        head = raw
        if self.gzipped:
            try:
                head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, START_BYTES)
            except zlib.error as exc:
                return f"not a WARC file: its first gzip member does not decompress ({exc})"
        head = head.lstrip(b"\r\n")
        if head.startswith((b"WARC/", b"filedesc://")) or (not head and not raw.strip(b"\r\n")):
            return None
        return (f"not a WARC file: it does not start with a WARC record header (WARC/1.0, WARC/1.1) within "
                f"{START_BYTES // 1024} KiB")

    def _from(self, fh: IO[bytes], start: int, synced: bool) -> Iterator[_Found]:
        """Records from ``start`` on; returns where to go on after a bad one (None: done)."""
        fh.seek(start)
        noise = io.StringIO()  # warcio writes its warnings to stderr: we count them instead
        with contextlib.redirect_stderr(noise):
            records = _BoundedIterator(fh, check_digests=True)
        offset = start
        try:
            while True:
                with contextlib.redirect_stderr(noise):
                    record = next(records, None)
                    if record is None:  # warcio ends quietly at a record cut short: was it the file's end?
                        return self._ended(fh, records.offset, synced or records.offset != start), False
                    offset = records.offset
                    problem = _drain(record)
                    errors = records.err_count
                    records.read_to_end()
                    if records.err_count != errors:
                        problem = problem or "not followed by the blank lines that end a record (wrong Content-Length?)"
                if problem:
                    self.report.bad.append(Bad(self.path, offset, problem))
                    return self._resync(fh, offset + 1), False
                if self._trailer_cut(records, fh):
                    self.report.damaged.append(Bad(self.path, offset, (
                        "its gzip member ends before the CRC-32 and length that close it (the file is cut short "
                        "there): the record was read whole and is kept")))
                synced = True
                found = self._classify(record, offset)
                if found is not None:
                    yield found
        except _UNREADABLE as exc:
            if synced or offset != start:
                where = records.offset
                self.report.bad.append(Bad(self.path, where, self._gzip_problem(fh, where) or _reason(exc)))
            return self._resync(fh, max(records.offset, offset) + 1), False

    def _classify(self, record: ArcWarcRecord, offset: int) -> _Found | None:
        try:
            _, fetched = _response_of(record)
        except _Rejected as exc:
            self.report.skip(str(exc))
            return None
        except ValueError as exc:
            self.report.bad.append(Bad(self.path, offset, str(exc)))
            return None
        return _Found(fetched, self.path, offset)

    def _trailer_cut(self, records: ArchiveIterator, fh: IO[bytes]) -> bool:
        """The record just read was the last of the file, and its gzip member ends before
        its trailer (zlib saw the compressed data end but never the CRC-32 and length)."""
        reader = records.reader
        decompressor = reader.decompressor if self.gzipped and reader is not None else None
        return (decompressor is not None and not decompressor.eof and not decompressor.unused_data
                and not records.next_line and reader.rem_length() == 0 and fh.tell() >= self.size)

    def _gzip_problem(self, fh: IO[bytes], offset: int) -> str | None:
        """What is wrong with the gzip member at ``offset``, said plainly (warcio, failing to
        decompress it, reports its compressed bytes as a "first line"), or None when it
        decompresses whole. Reads to the member's end at most, keeping nothing."""
        if not self.gzipped:
            return None
        fh.seek(offset)
        decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            while not decompressor.eof:
                chunk = decompressor.unconsumed_tail or fh.read(_READ)
                if not chunk:
                    return "truncated: the file ends inside its gzip member"
                decompressor.decompress(chunk, _READ)
        except zlib.error as exc:
            text = str(exc)
            if "incorrect data check" in text or "incorrect length check" in text:
                return "its gzip member's CRC-32 or length does not match its data: the member is damaged"
            return f"its gzip member is damaged ({text.removeprefix('Error -3 while decompressing data: ')})"
        return None

    def _ended(self, fh: IO[bytes], offset: int, report: bool) -> int | None:
        """Where to go on when warcio stopped at ``offset``: nowhere when only blank lines are
        left, else (a record cut short) after naming it bad."""
        fh.seek(offset)
        rest = fh.read(_READ)
        if not rest.strip(b"\r\n"):
            return None
        if report:
            self.report.bad.append(Bad(self.path, offset, "truncated: the file ends inside this record"))
        return self._resync(fh, offset + 1)

    def _resync(self, fh: IO[bytes], position: int) -> int | None:
        """The next offset at or after ``position`` where a record may start, or None."""
        marker = b"\x1f\x8b\x08" if self.gzipped else b"\nWARC/"
        skip = 0 if self.gzipped else 1
        fh.seek(position)
        tail = b""
        while chunk := fh.read(_READ):
            window = tail + chunk
            at = window.find(marker)
            if at >= 0:
                return position - len(tail) + at + skip
            tail = window[-(len(marker) - 1):]
            position += len(chunk)
        return None


def _open_regular(path: str) -> IO[bytes] | None:
    """``path`` opened to read, or None when it is not a regular file (a device such as
    ``/dev/zero`` never ends; a FIFO cannot be read twice, and opening one to read would wait
    for a writer: it is opened without waiting, then looked at)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


class RecordHeaderTooLarge(ValueError):
    """A record's header lines (WARC and HTTP) run past :data:`RECORD_HEADER_LIMIT` bytes."""


class _BoundedReader(DecompressingBufferedReader):
    """warcio's reader, with the lines it reads bounded: header lines read one after another
    (no body read in between) past :data:`RECORD_HEADER_LIMIT` bytes raise
    :class:`RecordHeaderTooLarge`, and no line is longer, so a header that never ends (a file
    of zeros, one endless line) costs that much memory, never the file's size."""

    header_bytes = 0

    def readline(self, length: int | None = None) -> bytes:
        room = RECORD_HEADER_LIMIT - self.header_bytes + 1
        line = super().readline(room if length is None else min(length, room))
        if line.strip():  # blank lines between records are not kept: not counted
            self.header_bytes += len(line)
            if self.header_bytes > RECORD_HEADER_LIMIT:
                raise RecordHeaderTooLarge(f"record header over {RECORD_HEADER_LIMIT // 1024} KiB (no blank line "
                                           "ends it)")
        return line

    def read(self, length: int | None = None) -> bytes:
        self.header_bytes = 0  # a body is being read: the header is over
        return super().read(length)


class _BoundedIterator(ArchiveIterator):
    """warcio's iterator over a :class:`_BoundedReader`, its header count reset per record."""

    def __init__(self, fileobj: IO[bytes], **kwargs: Any) -> None:
        super().__init__(fileobj, **kwargs)
        self.reader = _BoundedReader(self.fh, block_size=self.reader.block_size)

    def _next_record(self, next_line: bytes | None) -> ArcWarcRecord:
        self.reader.header_bytes = 0
        return super()._next_record(next_line)


def _drain(record: ArcWarcRecord) -> str | None:
    """Read the record's block through; why it is bad (truncated, a digest that fails), or None."""
    stream = record.raw_stream
    while stream.read(_READ):
        pass
    missing = getattr(stream, "limit", 0)
    if missing > 0:
        return f"truncated: {missing} byte(s) of its {record.length} missing"
    checker = getattr(record, "digest_checker", None)
    if checker is not None and checker.problems:
        return "; ".join(checker.problems)
    return None


def _response_of(record: ArcWarcRecord) -> tuple[str, int]:
    """A response record's URL (canonical) and WARC-Date (epoch ms). Raises _Rejected for a
    record the import does not take, ValueError for one that breaks the format."""
    if record.format != "warc":
        raise _Rejected(f"{record.format} record")
    if record.rec_type != "response":
        kind = record.rec_type or "untyped"
        raise _Rejected(kind if kind in _RECORD_TYPES or kind == "untyped" else "unknown record type")
    if record.rec_headers.get_header("WARC-Segment-Number"):
        raise _Rejected("segmented response")
    if record.http_headers is None or not record.http_headers.protocol.upper().startswith("HTTP/"):
        raise _Rejected("response (not HTTP)")
    date = record.rec_headers.get_header("WARC-Date") or ""
    try:
        when = iso_date_to_datetime(date)
    except (ValueError, TypeError, IndexError):
        raise ValueError(f"bad WARC-Date {date!r}") from None
    try:  # the rule URDs follow: an archive's URL with credentials is refused as a URD's is
        url = crawlable_url(record.rec_headers.get_header("WARC-Target-URI") or "")
    except UrlWithCredentials:
        raise _Rejected("URL with credentials") from None
    except ValueError:
        raise _Rejected("not an HTTP(S) URL WebRACE can store") from None
    if urlsplit(url).path == "/robots.txt":
        raise _Rejected("robots.txt")
    return url, int(when.replace(tzinfo=UTC).timestamp() * 1000)


def _store(cache: ObjectCache, found: list[_Found], view: CrawlView, max_body: int, report: Imported) -> None:
    """The second pass: each good response record, read again at its offset, stored. Only
    reading is guarded: a store that cannot write stops the import (it is not the file's fault)."""
    handles: dict[str, IO[bytes]] = {}
    try:
        for item in found:
            if item.path not in handles and len(handles) >= _OPEN_FILES:
                for fh in handles.values():
                    fh.close()
                handles.clear()
            fh = handles.get(item.path) or handles.setdefault(item.path, open(item.path, "rb"))  # noqa: SIM115
            try:
                record, url, fetched = _reopen(fh, item.offset)
                previous = cache.lookup(url)
                if previous is not None and previous.fetched >= fetched:
                    report.skip("not newer than stored")
                    continue
                read = _read(record, max_body)
                capture = view(url, *read) if isinstance(read, tuple) else read
            except _UNREADABLE as exc:
                report.bad.append(Bad(item.path, item.offset, _reason(exc)))
                continue
            if isinstance(capture, str):
                report.skip(capture)
                continue
            http = record.http_headers
            recorded = cache.record_fetch(
                url, read[0], read[2], fetched=fetched, header=capture.header, links=capture.links,
                ip=record.rec_headers.get_header("WARC-IP-Address"), etag=http.get_header("ETag"),
                lastmodified=http.get_header("Last-Modified"), previous=previous, announce=False)
            report.responses += 1
            report.new_versions += recorded.new_version
            report.unchanged += recorded.unchanged
    finally:
        for fh in handles.values():
            fh.close()


def _reopen(fh: IO[bytes], offset: int) -> tuple[ArcWarcRecord, str, int]:
    """The response record at ``offset``, its URL and WARC-Date (epoch ms)."""
    fh.seek(offset)
    with contextlib.redirect_stderr(io.StringIO()):
        record = next(iter(_BoundedIterator(fh)))
    url, fetched = _response_of(record)
    return record, url, fetched


def _read(record: ArcWarcRecord, max_body: int) -> tuple[int, list[tuple[str, str]], bytes] | str:
    """Status, headers and body as the crawl keeps them (de-chunked, decoded, the wire's
    encoding and length named ``X-WebRACE-Orig-*``: :func:`decoded_headers`), or why the
    record is skipped."""
    http = record.http_headers
    encoding = (http.get_header("Content-Encoding") or "").strip().lower()
    if encoding not in ("", "identity") and encoding not in BufferedReader.get_supported_decompressors():
        return f"content-encoding {encoding}"
    status = int(http.get_statuscode())
    if status == 304 or status < 200:
        return f"{status} answer (no body to keep)"
    body = record.content_stream().read(max_body + 1)
    if len(body) > max_body:
        return "too large"
    fields = list(http.headers)
    if encoding not in ("", "identity"):
        fields = decoded_headers(fields, len(body), record.length - http.total_len)
    # warcio de-chunked it: what the server said stays visible, as the export writes it
    fields = [(ORIG_PREFIX + k if k.lower() == "transfer-encoding" else k, v) for k, v in fields]
    return status, fields, body


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, RecordHeaderTooLarge):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
