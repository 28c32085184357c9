"""WARC and the crawl, both ways: the crawl's own WARC files written as it goes
(:class:`WarcArchiver`, ``WEBRACE_STORE_WARC``), and a WARC capture read back as the crawl
would have handled it (:class:`CrawlView`, for ``scrapy store import --warc``). The object
cache's side (export, reading archives) is :mod:`webrace.store.warc`.

**The archiver** writes, as Heritrix and StormCrawler do, a ``request`` and a ``response``
record per full fetch and a ``revisit`` record (profile ``server-not-modified``) per 304
answer, in files rotated by size. A file is written as ``NAME.warc.gz.open`` and renamed to
``NAME.warc.gz`` when it is full or the crawl ends, so a finished file is never one still
growing (Heritrix's convention). ``NAME`` is ``WEBRACE-<UTC time to the ms>-<serial>-<worker>``:
files of several workers in one directory never collide, and sort by time. Records are made
and written in one thread of their own, off Scrapy's reactor; at most ``_PENDING`` responses
wait for it, then the crawl waits (the archive never falls behind without bound). A record
holds what :mod:`webrace.store.warc` exports: the body as Scrapy handed it over (decoded), its
headers made true of it, ``WARC-Payload-Digest`` its SHA-256. The request record is the
request as it left the downloader middlewares (Host added from the URL). A directory that
cannot be written, or a write that fails (a full disk), stops the crawl with one error; the
file being written is cut back to its last whole record and closed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Headers, HtmlResponse, Response
from scrapy.responsetypes import responsetypes
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.response import get_base_url
from warcio.statusandheaders import StatusAndHeaders, StatusAndHeadersParser
from warcio.warcwriter import WARCWriter

from webrace import __version__
from webrace.conf import conf_list
from webrace.distributed.delegation import worker_id
from webrace.extractor import UrlExtractor
from webrace.middlewares.recrawl import CONDITIONAL
from webrace.spiders.responses import header_text, is_binary
from webrace.store.warc import (
    ANSWER_FIELD,
    SERVER_NOT_MODIFIED,
    Capture,
    replayable_headers,
    revisit_record_headers,
    split_header,
    warc_date,
    warc_digest,
)
from webrace.urls import REFUSE, SNIFF, MediaTypes, looks_binary

logger = logging.getLogger(__name__)

_PENDING = 64  # responses queued for the writer thread before the crawl waits for it


class CrawlView:
    """What the crawl makes of a response, decided with the crawl's own parts: the response
    class Scrapy's responsetypes picks, the media types of the exclusion middleware
    (``mime.types``; an undeclared type sniffed), the header text ``PageRecorder`` keeps, and
    the links the URL extractor pipe finds where ``PageRecorder.fetched`` looks for them (no
    error status, text, HTML). Called as :data:`webrace.store.warc.CrawlView`."""

    def __init__(self, extractor: UrlExtractor, media_types: MediaTypes) -> None:
        self.extractor = extractor
        self.media_types = media_types

    @classmethod
    def from_settings(cls, settings: Any) -> CrawlView:
        return cls(UrlExtractor.from_settings(settings),
                   MediaTypes(conf_list(settings, "WEBRACE_MIME_TYPES", "mime.types")))

    def __call__(self, url: str, status: int, fields: list[tuple[str, str]], body: bytes) -> Capture | str:
        headers = Headers()
        for name, value in fields:
            headers.appendlist(name, value)
        response = responsetypes.from_args(headers=headers, url=url, body=body)(
            url=url, status=status, headers=headers, body=body)
        verdict = self.media_types.judge((headers.get(b"Content-Type") or b"").decode("latin-1"), url)
        if verdict == REFUSE or (verdict == SNIFF and looks_binary(body)):
            return "mime"
        return Capture(header_text(response), self.links(response))

    def links(self, response: Response) -> list[str]:
        if response.status >= 400 or is_binary(response) or not isinstance(response, HtmlResponse):
            return []
        try:
            return self.extractor.extract(response.selector, get_base_url(response)).links
        except (ValueError, TypeError):  # lxml could not make a tree of it
            return []


class WarcFiles:
    """Size-rotated WARC files in one directory, each opening with a warcinfo record. Not
    thread-safe: one thread writes (the archiver's). An exchange's records are made in
    memory and written with one unbuffered write, so a failure knows where the file's whole
    records end."""

    def __init__(self, directory: Path, max_bytes: int, worker: str) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.worker = re.sub(r"[^A-Za-z0-9._-]+", "_", worker)[:64] or "worker"
        self.serial = 0
        self.path: Path | None = None  # the open file's final name
        self.fd: int | None = None
        self.size = 0  # bytes of whole records in the open file
        self.finished: list[Path] = []

    def write(self, records: list[tuple[str, str, StatusAndHeaders, bytes, dict[str, str]]]) -> None:
        """Write records of one exchange together, ``(type, url, http, payload, warc headers)``,
        in one file: rotate first if the open file is full. A failed write cuts the file
        back to where the exchange began, closes it and raises."""
        if self.fd is not None and self.size >= self.max_bytes:
            self.close()
        if self.fd is None:
            self._open()
        buffer = io.BytesIO()
        writer = WARCWriter(buffer, gzip=True, warc_version="1.1")
        for kind, url, http, payload, warc_headers in records:
            writer.write_record(writer.create_warc_record(
                url, kind, payload=io.BytesIO(payload), length=len(payload), http_headers=http,
                warc_headers_dict=warc_headers))
        self._append(buffer.getvalue())

    def close(self) -> None:
        """Close the open file and give it its final name."""
        if self.fd is None:
            return
        fd, path, size = self.fd, self.path, self.size
        self.fd, self.path, self.size = None, None, 0
        os.close(fd)
        if size == 0:  # not even its warcinfo made it: no file
            os.unlink(_open_name(path))
            return
        os.replace(_open_name(path), path)
        self.finished.append(path)

    def _open(self) -> None:
        self.serial += 1
        stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")[:17]
        self.path = self.directory / f"WEBRACE-{stamp}-{self.serial:05d}-{self.worker}.warc.gz"
        self.fd = os.open(_open_name(self.path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        buffer = io.BytesIO()
        writer = WARCWriter(buffer, gzip=True, warc_version="1.1")
        writer.write_record(writer.create_warcinfo_record(self.path.name, {
            "software": f"WebRACE {__version__} (warcio)", "format": "WARC File Format 1.1",
            "description": "WebRACE crawl archive (WEBRACE_STORE_WARC)", "robots": "obey"}))
        self._append(buffer.getvalue())

    def _append(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.fd, view):]
        except OSError:
            with contextlib.suppress(OSError):  # keep the whole records, and the file's final name
                os.ftruncate(self.fd, self.size)
            with contextlib.suppress(OSError):
                self.close()
            raise
        self.size += len(data)


def exchange_records(request: Request, response: Response) -> list[tuple[str, str, StatusAndHeaders, bytes,
                                                                          dict[str, str]]]:
    """The records of one exchange: a revisit (for an expected 304) or a response, then the
    request that was sent, pointing at it with ``WARC-Concurrent-To``."""
    url, date = response.url, warc_date(int(datetime.now(UTC).timestamp() * 1000))
    status_line, fields = split_header(header_text(response))
    status = status_line.partition(" ")[2]
    main_id = _record_id()
    conditional = request.meta.get(CONDITIONAL)
    if response.status == 304 and conditional and conditional["url"] == url and conditional["meta"].digest:
        meta = conditional["meta"]
        # the confirmed response's status and headers, freshened by the 304's: what replay serves
        shown, kept = revisit_record_headers(meta.header or f"HTTP/1.1 {meta.status}", header_text(response),
                                             meta.size)
        main = ("revisit", url, StatusAndHeaders(shown, kept, protocol="HTTP/1.1"), b"", {
            "WARC-Type": "revisit", "WARC-Record-ID": main_id, "WARC-Date": date, "WARC-Profile": SERVER_NOT_MODIFIED,
            "WARC-Refers-To-Target-URI": url, "WARC-Refers-To-Date": warc_date(meta.fetched),
            "WARC-Payload-Digest": warc_digest(bytes.fromhex(meta.digest)), ANSWER_FIELD: status_line})
    else:
        body = response.body
        main = ("response", url, StatusAndHeaders(status, replayable_headers(fields, len(body)), protocol="HTTP/1.1"),
                body, {"WARC-Type": "response", "WARC-Record-ID": main_id, "WARC-Date": date,
                       "WARC-Payload-Digest": warc_digest(hashlib.sha256(body).digest())})
        if response.ip_address:
            main[4]["WARC-IP-Address"] = str(response.ip_address)
    parts = urlsplit(request.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    sent = [(k.decode("latin-1"), v.decode("latin-1")) for k, values in request.headers.items() for v in values]
    http = StatusAndHeaders(f"{request.method} {target} HTTP/1.1", [("Host", parts.netloc), *sent],
                            is_http_request=True)
    return [main, ("request", request.url, http, request.body or b"", {
        "WARC-Type": "request", "WARC-Record-ID": _record_id(), "WARC-Date": date,
        "WARC-Concurrent-To": main_id})]


def _record_id() -> str:
    return StatusAndHeadersParser.make_warc_id()


def _open_name(path: Path) -> Path:
    return path.with_name(path.name + ".open")


class WarcArchiver:
    """The extension: every response the crawl receives goes to the WARC files."""

    def __init__(self, crawler: Crawler, directory: Path, max_bytes: int) -> None:
        self.crawler = crawler
        self.files = WarcFiles(directory, max_bytes, worker_id(crawler.settings))
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webrace-warc")
        self.pending = threading.BoundedSemaphore(_PENDING)
        self.failed: str | None = None
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.response_received, signal=signals.response_received)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> WarcArchiver:
        directory = crawler.settings.get("WEBRACE_STORE_WARC")
        if not directory:
            raise NotConfigured  # off by default: no "Disabled" warning in every crawl's log
        max_bytes = crawler.settings.getint("WEBRACE_STORE_WARC_MAX_BYTES")
        if max_bytes < 1:
            raise ValueError(f"WEBRACE_STORE_WARC_MAX_BYTES must be at least 1, not {max_bytes}")
        return cls(crawler, Path(directory).expanduser().resolve(), max_bytes)

    def spider_opened(self, spider: Spider) -> None:
        try:
            self.files.directory.mkdir(parents=True, exist_ok=True)
            probe = self.files.directory / f".webrace-probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            self._fail(spider, f"cannot write WARC files in {self.files.directory}: {exc.strerror or exc}")

    def response_received(self, response: Response, request: Request, spider: Spider) -> None:
        if self.failed:
            return
        self.pending.acquire()  # at most _PENDING waiting: past that the crawl waits for the disk
        future = self.pool.submit(self._write, request, response)
        future.add_done_callback(lambda f: self._written(f, spider))

    def _write(self, request: Request, response: Response) -> None:
        try:
            if not self.failed:
                self.files.write(exchange_records(request, response))
                self.crawler.stats.inc_value("webrace/warc/records", 2)
        finally:
            self.pending.release()

    def _written(self, future: Any, spider: Spider) -> None:
        """In the writer thread, after each exchange: a failure stops the crawl (in the reactor's thread)."""
        exc = future.exception()
        if exc is not None and not self.failed:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            self.failed = f"cannot write WARC file in {self.files.directory}: {reason}"
            from twisted.internet import reactor  # the one Scrapy installed (importing it earlier would install one)

            reactor.callFromThread(self._fail, spider, self.failed)

    def _fail(self, spider: Spider, message: str) -> None:
        """Stop the crawl as an unwritable body store does (``scrapy crawl`` says why, exit 1)."""
        self.failed = message
        logger.error("%s: stopping the crawl", message)
        self.crawler.stats.set_value("webrace/store_unwritable", message)
        if self.crawler.engine is not None:
            deferred_from_coro(self.crawler.engine.close_spider_async(reason="store_unwritable"))

    def spider_closed(self, spider: Spider) -> None:
        self.pool.shutdown(wait=True)  # every queued exchange written
        try:
            self.files.close()
        except OSError as exc:
            logger.error("Could not finish WARC file in %s: %s", self.files.directory, exc)
        if self.files.finished:
            logger.info("WARC: %d file(s) in %s", len(self.files.finished), self.files.directory)
