"""A crawl's progress line: while the crawl runs, one line on stderr rewritten in place every
second, ``Crawling: 1,204 pages (310/min), 5,310 queued, 3 failed, 0:03:52``, where a person
watches (stderr a terminal). In a pipe, a log file or under scrapyd there is none: Scrapy's
LogStats lines every ``LOGSTATS_INTERVAL`` are the log's progress. ``WEBRACE_PROGRESS`` turns
it off.

A log line written while the progress line shows would start where the progress line ends:
a filter on the handlers writing to the terminal erases the progress line before each record,
and the next tick draws it again under the record."""

from __future__ import annotations

import logging
import shutil
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from scrapy import Spider, signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import create_looping_call

from webrace.summary import summarize

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

REFRESH_S = 1.0  # seconds between two drawings of the line
ERASE = "\r\x1b[K"  # back to the line's start, and clear it (ANSI: every terminal of today)


def progress_line(stats: dict[str, Any], elapsed: float, downloading: int = 0) -> str:
    """``Crawling: 1,204 pages (310/min), 5,310 queued, 3 failed, 0:03:52`` from Scrapy's stats:
    the answers received; the requests the scheduler holds and the ``downloading`` ones the
    downloader holds (waiting for their host's turn, or on the wire); WebRACE's failed and
    error URLs."""
    pages = stats.get("response_received_count", 0)
    queued = max(0, stats.get("scheduler/enqueued", 0) - stats.get("scheduler/dequeued", 0)) + downloading
    summary = summarize(stats)
    rate = pages * 60 / elapsed if elapsed > 0 else 0.0
    clock = time.strftime("%H:%M:%S", time.gmtime(elapsed)).removeprefix("0")
    return (f"Crawling: {pages:,} pages ({rate:,.0f}/min), {queued:,} queued, "
            f"{summary['failed'] + summary['error']:,} failed, {clock}")


class Progress:
    """The extension (``EXTENSIONS``): off (``NotConfigured``) unless stderr is a terminal."""

    def __init__(self, crawler: Crawler, stream: TextIO) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.stream = stream
        self.shown = False  # a progress line is on the terminal now
        self.started = time.monotonic()
        self.task: Any = None
        self.handlers: list[logging.Handler] = []
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Progress:
        if not crawler.settings.getbool("WEBRACE_PROGRESS") or not sys.stderr.isatty():
            raise NotConfigured
        return cls(crawler, sys.stderr)

    def spider_opened(self, spider: Spider) -> None:
        self.started = time.monotonic()
        # the handlers that write to the same terminal (Scrapy's root handler, without LOG_FILE)
        self.handlers = [h for h in logging.root.handlers
                         if isinstance(h, logging.StreamHandler) and getattr(h, "stream", None) is self.stream]
        for handler in self.handlers:
            handler.addFilter(self.erase_before)
        self.task = create_looping_call(self.draw)
        self.task.start(REFRESH_S)

    def draw(self) -> None:
        width = shutil.get_terminal_size().columns - 1  # a line that wraps cannot be rewritten in place
        engine = self.crawler.engine
        downloading = len(engine.downloader.active) if engine is not None else 0
        line = progress_line(self.stats.get_stats(), time.monotonic() - self.started, downloading)
        self.stream.write(ERASE + line[:max(width, 20)])
        self.stream.flush()
        self.shown = True

    def erase_before(self, record: logging.LogRecord) -> bool:
        """A handler filter: a record is written on a clean line (it is never dropped)."""
        self.erase()
        return True

    def erase(self) -> None:
        if self.shown:
            self.stream.write(ERASE)
            self.stream.flush()
            self.shown = False

    def spider_closed(self, spider: Spider, reason: str) -> None:
        if self.task is not None and self.task.running:
            self.task.stop()
        for handler in self.handlers:
            handler.removeFilter(self.erase_before)
        self.erase()  # the summary follows on a clean line
